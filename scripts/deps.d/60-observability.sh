# Observability target tests (tests/test_observability.py): promtool, for `promtool check rules`
# on the rendered rule files and `promtool test rules` on the unit tests generated per alert.
# Sourced by scripts/install-test-deps (bash, as root, with apt_install and $CLUSTERDEF_CACHE).
#
# Debian's prometheus package carries promtool (bookworm: 2.42). The package's service is not
# started by the tests (they only run promtool); nothing is cached.

apt_install prometheus
