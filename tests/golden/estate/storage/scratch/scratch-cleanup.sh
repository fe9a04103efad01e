#!/bin/sh
# Scratch expiry of filesystem scratch (lustre, /scratch) of cluster estate; rendered by clusterdef.
set -eu
MOUNT=${CLUSTERDEF_MOUNT:-/scratch}
[ -d "$MOUNT" ] || { echo "clusterdef: $MOUNT is not a directory" >&2; exit 1; }
# tenant vision: files not accessed for 30 days
dir="$MOUNT"/vision
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant nlp: files not accessed for 30 days
dir="$MOUNT"/nlp
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant speech: files not accessed for 30 days
dir="$MOUNT"/speech
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant robotics: files not accessed for 30 days
dir="$MOUNT"/robotics
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant genomics: files not accessed for 30 days
dir="$MOUNT"/genomics
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant climate: files not accessed for 30 days
dir="$MOUNT"/climate
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant search: files not accessed for 14 days
dir="$MOUNT"/search
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant ads: files not accessed for 14 days
dir="$MOUNT"/ads
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant recsys: files not accessed for 30 days
dir="$MOUNT"/recsys
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant fraud: files not accessed for 30 days
dir="$MOUNT"/fraud
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant chem: files not accessed for 14 days
dir="$MOUNT"/chem
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant materials: files not accessed for 30 days
dir="$MOUNT"/materials
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant video: files not accessed for 14 days
dir="$MOUNT"/video
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant audio: files not accessed for 30 days
dir="$MOUNT"/audio
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant code: files not accessed for 14 days
dir="$MOUNT"/code
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant math: files not accessed for 14 days
dir="$MOUNT"/math
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant safety: files not accessed for 30 days
dir="$MOUNT"/safety
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant agents: files not accessed for 30 days
dir="$MOUNT"/agents
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant maps: files not accessed for 14 days
dir="$MOUNT"/maps
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant health: files not accessed for 30 days
dir="$MOUNT"/health
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant finance: files not accessed for 14 days
dir="$MOUNT"/finance
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant retail: files not accessed for 30 days
dir="$MOUNT"/retail
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant games: files not accessed for 14 days
dir="$MOUNT"/games
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant translate: files not accessed for 14 days
dir="$MOUNT"/translate
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant vision-2: files not accessed for 30 days
dir="$MOUNT"/vision-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant nlp-2: files not accessed for 30 days
dir="$MOUNT"/nlp-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant speech-2: files not accessed for 14 days
dir="$MOUNT"/speech-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant robotics-2: files not accessed for 30 days
dir="$MOUNT"/robotics-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant genomics-2: files not accessed for 14 days
dir="$MOUNT"/genomics-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant climate-2: files not accessed for 30 days
dir="$MOUNT"/climate-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant search-2: files not accessed for 14 days
dir="$MOUNT"/search-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant ads-2: files not accessed for 14 days
dir="$MOUNT"/ads-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant recsys-2: files not accessed for 30 days
dir="$MOUNT"/recsys-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant fraud-2: files not accessed for 30 days
dir="$MOUNT"/fraud-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant chem-2: files not accessed for 14 days
dir="$MOUNT"/chem-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant materials-2: files not accessed for 30 days
dir="$MOUNT"/materials-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant video-2: files not accessed for 14 days
dir="$MOUNT"/video-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant audio-2: files not accessed for 30 days
dir="$MOUNT"/audio-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant code-2: files not accessed for 14 days
dir="$MOUNT"/code-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant math-2: files not accessed for 14 days
dir="$MOUNT"/math-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant safety-2: files not accessed for 30 days
dir="$MOUNT"/safety-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant agents-2: files not accessed for 30 days
dir="$MOUNT"/agents-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant maps-2: files not accessed for 14 days
dir="$MOUNT"/maps-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant health-2: files not accessed for 30 days
dir="$MOUNT"/health-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant finance-2: files not accessed for 14 days
dir="$MOUNT"/finance-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant retail-2: files not accessed for 30 days
dir="$MOUNT"/retail-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant games-2: files not accessed for 14 days
dir="$MOUNT"/games-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant translate-2: files not accessed for 14 days
dir="$MOUNT"/translate-2
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
