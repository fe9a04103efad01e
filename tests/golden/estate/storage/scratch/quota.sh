#!/bin/sh
# Project quotas of filesystem scratch (lustre, /scratch) of cluster estate; rendered by clusterdef.
set -eu
MOUNT=${CLUSTERDEF_MOUNT:-/scratch}
[ -d "$MOUNT" ] || { echo "clusterdef: $MOUNT is not a directory" >&2; exit 1; }
# tenant vision: 200 TiB, project 390289608
dir="$MOUNT"/vision
mkdir -p "$dir"
lfs project -p 390289608 -s -r "$dir"
lfs setquota -p 390289608 -B 214748364800k "$MOUNT"
# tenant nlp: 100 TiB, project 608539071
dir="$MOUNT"/nlp
mkdir -p "$dir"
lfs project -p 608539071 -s -r "$dir"
lfs setquota -p 608539071 -B 107374182400k "$MOUNT"
# tenant speech: 50 TiB, project 331783190
dir="$MOUNT"/speech
mkdir -p "$dir"
lfs project -p 331783190 -s -r "$dir"
lfs setquota -p 331783190 -B 53687091200k "$MOUNT"
# tenant robotics: 50 TiB, project 356228834
dir="$MOUNT"/robotics
mkdir -p "$dir"
lfs project -p 356228834 -s -r "$dir"
lfs setquota -p 356228834 -B 53687091200k "$MOUNT"
# tenant genomics: 100 TiB, project 1183351740
dir="$MOUNT"/genomics
mkdir -p "$dir"
lfs project -p 1183351740 -s -r "$dir"
lfs setquota -p 1183351740 -B 107374182400k "$MOUNT"
# tenant climate: 50 TiB, project 989142023
dir="$MOUNT"/climate
mkdir -p "$dir"
lfs project -p 989142023 -s -r "$dir"
lfs setquota -p 989142023 -B 53687091200k "$MOUNT"
# tenant search: 100 TiB, project 1035703750
dir="$MOUNT"/search
mkdir -p "$dir"
lfs project -p 1035703750 -s -r "$dir"
lfs setquota -p 1035703750 -B 107374182400k "$MOUNT"
# tenant ads: 50 TiB, project 127184959
dir="$MOUNT"/ads
mkdir -p "$dir"
lfs project -p 127184959 -s -r "$dir"
lfs setquota -p 127184959 -B 53687091200k "$MOUNT"
# tenant recsys: 50 TiB, project 1996116904
dir="$MOUNT"/recsys
mkdir -p "$dir"
lfs project -p 1996116904 -s -r "$dir"
lfs setquota -p 1996116904 -B 53687091200k "$MOUNT"
# tenant fraud: 50 TiB, project 1088731922
dir="$MOUNT"/fraud
mkdir -p "$dir"
lfs project -p 1088731922 -s -r "$dir"
lfs setquota -p 1088731922 -B 53687091200k "$MOUNT"
# tenant chem: 50 TiB, project 1704642174
dir="$MOUNT"/chem
mkdir -p "$dir"
lfs project -p 1704642174 -s -r "$dir"
lfs setquota -p 1704642174 -B 53687091200k "$MOUNT"
# tenant materials: 50 TiB, project 602001620
dir="$MOUNT"/materials
mkdir -p "$dir"
lfs project -p 602001620 -s -r "$dir"
lfs setquota -p 602001620 -B 53687091200k "$MOUNT"
# tenant video: 100 TiB, project 93492299
dir="$MOUNT"/video
mkdir -p "$dir"
lfs project -p 93492299 -s -r "$dir"
lfs setquota -p 93492299 -B 107374182400k "$MOUNT"
# tenant audio: 100 TiB, project 410869157
dir="$MOUNT"/audio
mkdir -p "$dir"
lfs project -p 410869157 -s -r "$dir"
lfs setquota -p 410869157 -B 107374182400k "$MOUNT"
# tenant code: 25 TiB, project 1997887400
dir="$MOUNT"/code
mkdir -p "$dir"
lfs project -p 1997887400 -s -r "$dir"
lfs setquota -p 1997887400 -B 26843545600k "$MOUNT"
# tenant math: 25 TiB, project 837926508
dir="$MOUNT"/math
mkdir -p "$dir"
lfs project -p 837926508 -s -r "$dir"
lfs setquota -p 837926508 -B 26843545600k "$MOUNT"
# tenant safety: 100 TiB, project 868748910
dir="$MOUNT"/safety
mkdir -p "$dir"
lfs project -p 868748910 -s -r "$dir"
lfs setquota -p 868748910 -B 107374182400k "$MOUNT"
# tenant agents: 50 TiB, project 509699469
dir="$MOUNT"/agents
mkdir -p "$dir"
lfs project -p 509699469 -s -r "$dir"
lfs setquota -p 509699469 -B 53687091200k "$MOUNT"
# tenant maps: 100 TiB, project 1194209205
dir="$MOUNT"/maps
mkdir -p "$dir"
lfs project -p 1194209205 -s -r "$dir"
lfs setquota -p 1194209205 -B 107374182400k "$MOUNT"
# tenant health: 100 TiB, project 1470422322
dir="$MOUNT"/health
mkdir -p "$dir"
lfs project -p 1470422322 -s -r "$dir"
lfs setquota -p 1470422322 -B 107374182400k "$MOUNT"
# tenant finance: 25 TiB, project 1458808063
dir="$MOUNT"/finance
mkdir -p "$dir"
lfs project -p 1458808063 -s -r "$dir"
lfs setquota -p 1458808063 -B 26843545600k "$MOUNT"
# tenant retail: 50 TiB, project 220130115
dir="$MOUNT"/retail
mkdir -p "$dir"
lfs project -p 220130115 -s -r "$dir"
lfs setquota -p 220130115 -B 53687091200k "$MOUNT"
# tenant games: 50 TiB, project 280524895
dir="$MOUNT"/games
mkdir -p "$dir"
lfs project -p 280524895 -s -r "$dir"
lfs setquota -p 280524895 -B 53687091200k "$MOUNT"
# tenant translate: 25 TiB, project 1242598023
dir="$MOUNT"/translate
mkdir -p "$dir"
lfs project -p 1242598023 -s -r "$dir"
lfs setquota -p 1242598023 -B 26843545600k "$MOUNT"
# tenant vision-2: 200 TiB, project 1243670570
dir="$MOUNT"/vision-2
mkdir -p "$dir"
lfs project -p 1243670570 -s -r "$dir"
lfs setquota -p 1243670570 -B 214748364800k "$MOUNT"
# tenant nlp-2: 100 TiB, project 769408197
dir="$MOUNT"/nlp-2
mkdir -p "$dir"
lfs project -p 769408197 -s -r "$dir"
lfs setquota -p 769408197 -B 107374182400k "$MOUNT"
# tenant speech-2: 25 TiB, project 634674703
dir="$MOUNT"/speech-2
mkdir -p "$dir"
lfs project -p 634674703 -s -r "$dir"
lfs setquota -p 634674703 -B 26843545600k "$MOUNT"
# tenant robotics-2: 50 TiB, project 2720826
dir="$MOUNT"/robotics-2
mkdir -p "$dir"
lfs project -p 2720826 -s -r "$dir"
lfs setquota -p 2720826 -B 53687091200k "$MOUNT"
# tenant genomics-2: 50 TiB, project 1377200961
dir="$MOUNT"/genomics-2
mkdir -p "$dir"
lfs project -p 1377200961 -s -r "$dir"
lfs setquota -p 1377200961 -B 53687091200k "$MOUNT"
# tenant climate-2: 50 TiB, project 1208584491
dir="$MOUNT"/climate-2
mkdir -p "$dir"
lfs project -p 1208584491 -s -r "$dir"
lfs setquota -p 1208584491 -B 53687091200k "$MOUNT"
# tenant search-2: 100 TiB, project 1499706146
dir="$MOUNT"/search-2
mkdir -p "$dir"
lfs project -p 1499706146 -s -r "$dir"
lfs setquota -p 1499706146 -B 107374182400k "$MOUNT"
# tenant ads-2: 50 TiB, project 1753103330
dir="$MOUNT"/ads-2
mkdir -p "$dir"
lfs project -p 1753103330 -s -r "$dir"
lfs setquota -p 1753103330 -B 53687091200k "$MOUNT"
# tenant recsys-2: 50 TiB, project 1401010556
dir="$MOUNT"/recsys-2
mkdir -p "$dir"
lfs project -p 1401010556 -s -r "$dir"
lfs setquota -p 1401010556 -B 53687091200k "$MOUNT"
# tenant fraud-2: 50 TiB, project 1819317179
dir="$MOUNT"/fraud-2
mkdir -p "$dir"
lfs project -p 1819317179 -s -r "$dir"
lfs setquota -p 1819317179 -B 53687091200k "$MOUNT"
# tenant chem-2: 50 TiB, project 854252550
dir="$MOUNT"/chem-2
mkdir -p "$dir"
lfs project -p 854252550 -s -r "$dir"
lfs setquota -p 854252550 -B 53687091200k "$MOUNT"
# tenant materials-2: 50 TiB, project 1292707658
dir="$MOUNT"/materials-2
mkdir -p "$dir"
lfs project -p 1292707658 -s -r "$dir"
lfs setquota -p 1292707658 -B 53687091200k "$MOUNT"
# tenant video-2: 100 TiB, project 128483937
dir="$MOUNT"/video-2
mkdir -p "$dir"
lfs project -p 128483937 -s -r "$dir"
lfs setquota -p 128483937 -B 107374182400k "$MOUNT"
# tenant audio-2: 100 TiB, project 1789464891
dir="$MOUNT"/audio-2
mkdir -p "$dir"
lfs project -p 1789464891 -s -r "$dir"
lfs setquota -p 1789464891 -B 107374182400k "$MOUNT"
# tenant code-2: 25 TiB, project 912622923
dir="$MOUNT"/code-2
mkdir -p "$dir"
lfs project -p 912622923 -s -r "$dir"
lfs setquota -p 912622923 -B 26843545600k "$MOUNT"
# tenant math-2: 25 TiB, project 1953038341
dir="$MOUNT"/math-2
mkdir -p "$dir"
lfs project -p 1953038341 -s -r "$dir"
lfs setquota -p 1953038341 -B 26843545600k "$MOUNT"
# tenant safety-2: 100 TiB, project 999173993
dir="$MOUNT"/safety-2
mkdir -p "$dir"
lfs project -p 999173993 -s -r "$dir"
lfs setquota -p 999173993 -B 107374182400k "$MOUNT"
# tenant agents-2: 50 TiB, project 324982623
dir="$MOUNT"/agents-2
mkdir -p "$dir"
lfs project -p 324982623 -s -r "$dir"
lfs setquota -p 324982623 -B 53687091200k "$MOUNT"
# tenant maps-2: 100 TiB, project 1955579184
dir="$MOUNT"/maps-2
mkdir -p "$dir"
lfs project -p 1955579184 -s -r "$dir"
lfs setquota -p 1955579184 -B 107374182400k "$MOUNT"
# tenant health-2: 100 TiB, project 1789726394
dir="$MOUNT"/health-2
mkdir -p "$dir"
lfs project -p 1789726394 -s -r "$dir"
lfs setquota -p 1789726394 -B 107374182400k "$MOUNT"
# tenant finance-2: 25 TiB, project 1078978897
dir="$MOUNT"/finance-2
mkdir -p "$dir"
lfs project -p 1078978897 -s -r "$dir"
lfs setquota -p 1078978897 -B 26843545600k "$MOUNT"
# tenant retail-2: 50 TiB, project 301036653
dir="$MOUNT"/retail-2
mkdir -p "$dir"
lfs project -p 301036653 -s -r "$dir"
lfs setquota -p 301036653 -B 53687091200k "$MOUNT"
# tenant games-2: 50 TiB, project 1284493920
dir="$MOUNT"/games-2
mkdir -p "$dir"
lfs project -p 1284493920 -s -r "$dir"
lfs setquota -p 1284493920 -B 53687091200k "$MOUNT"
# tenant translate-2: 25 TiB, project 501330787
dir="$MOUNT"/translate-2
mkdir -p "$dir"
lfs project -p 501330787 -s -r "$dir"
lfs setquota -p 501330787 -B 26843545600k "$MOUNT"
