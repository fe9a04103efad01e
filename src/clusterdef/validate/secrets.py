"""Secrets by reference only: a literal secret anywhere in the definition is an error.

`secret_findings` walks the raw data (like the text net, iteratively, before the model sees it) and
flags a mapping key named like a credential (password, passwd, pass, pwd, secret, token, key,
credential(s), apikey, passphrase, also as the last word of a key: storage_pass, api_token,
AccountingStoragePass) that holds a literal scalar. A field the schema does not know
(`storage_pass: hunter2` under slurm.accounting) is a `secret-literal` rather than an unknown field.

Not flagged: the `secrets` section itself (references by name), and fields whose name looks like a
credential but whose value is a public name: taint keys (`nodes.*.taints[].key`), Kubernetes label
keys and values (`nodes.*.labels`, `kubernetes.node_labels`). `pkey` (an InfiniBand partition key)
and `mac` are other words; `public_key` is public."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..errors import Finding, Severity

Path = tuple

WORDS = frozenset({"password", "passwd", "pass", "pwd", "passphrase", "secret", "secrets", "token", "key",
                   "credential", "credentials", "apikey", "privatekey"})

# Paths whose keys look like credentials but hold names; "*" is any one step.
ALLOWED: tuple[Path, ...] = (
    ("secrets",),
    ("nodes", "*", "taints", "*", "key"),
    ("nodes", "*", "labels"),
    ("kubernetes", "node_labels"),
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# ALLOWED by length: the walk looks at a path once, when it reaches it, and never below an allowed one, so a
# path is allowed when it matches an entry of its own length
_ALLOWED_BY_LEN: dict[int, tuple[Path, ...]] = {n: tuple(a for a in ALLOWED if len(a) == n)
                                                 for n in {len(a) for a in ALLOWED}}


@lru_cache(maxsize=4096)  # a pure function of the key; a definition repeats its keys thousands of times
def looks_secret(key: str) -> bool:
    """The key's last word (split at '_', '-', '.', '/' and camelCase) is a credential word."""
    words = [w.lower() for w in re.split(r"[_\-./]", _CAMEL.sub("_", key)) if w]
    if len(words) >= 2 and words[-2] == "public":  # public_key, publicKey: public by name
        return False
    return bool(words) and words[-1] in WORDS


def _allowed(path: Path) -> bool:
    """`path` is an ALLOWED one (the walk never goes below an allowed path)."""
    return any(all(x == "*" or x == p for x, p in zip(a, path)) for a in _ALLOWED_BY_LEN.get(len(path), ()))


def secret_findings(data: Any) -> list[Finding]:
    findings: list[Finding] = []
    stack: list[tuple[Path, Any]] = [((), data)]
    while stack:
        path, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            child = path + (key,)
            if _allowed(child):
                continue
            if isinstance(value, (dict, list)):
                stack.append((child, value))
            elif (isinstance(key, str) and looks_secret(key) and not isinstance(value, bool)
                  and isinstance(value, (str, int, float)) and value != ""):
                findings.append(Finding(
                    "secret-literal", Severity.ERROR, child,
                    f"{key}: a literal secret in the definition (it would be in git and in every rendered tree)",
                    "keep the value in an Ansible Vault file and reference it by name under `secrets.refs` "
                    "(e.g. secrets: {backend: ansible-vault, refs: {slurmdbd_storage_pass: vault_slurmdbd_pass}})"))
    findings.reverse()
    return findings
