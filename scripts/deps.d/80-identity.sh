# Identity proofs (tests/test_identity.py): a real slapd seeded with users and groups, SSSD pointed
# at it (in the test's own mount namespace, so the machine's nsswitch and SSSD are never touched),
# `sssctl config-check` on every rendered sssd.conf, and `visudo -cf` on the rendered sudoers.
# Sourced by scripts/install-test-deps (bash, as root, with apt_install). Debian's slapd package
# starts a default slapd on install; the test runs its own on a private port, so stop that one.

apt_install slapd ldap-utils sssd-ldap sssd-tools libnss-sss libpam-sss sudo openssl
if command -v service >/dev/null 2>&1; then service slapd stop >/dev/null 2>&1 || true; fi
