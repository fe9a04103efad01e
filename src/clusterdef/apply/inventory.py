"""The rendered Ansible inventory as ansible-playbook reads it: host ranges (`gpu[001:004]`) and the upgrade
waves. Below both steps.py (waves of a stage) and delivery.py (host patterns of the delivery map), which
imports neither."""

from __future__ import annotations

import re

from ruamel.yaml import YAML

from ..textnum import is_digits

_RANGE = re.compile(r"\[([^\]:]+):([^\]:]+)(?::([0-9]+))?\]")


def expand_pattern(pattern: str) -> list[str]:
    """Hosts of an Ansible inventory host pattern with ranges: `gpu[001:004]`, `n[a:c]x[1:4:2]`."""
    m = _RANGE.search(pattern)
    if not m:
        return [pattern]
    lo, hi, step = m.group(1), m.group(2), int(m.group(3) or 1)
    head, tail = pattern[:m.start()], pattern[m.end():]
    if is_digits(lo) and is_digits(hi):
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        items = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1, step)]
    elif len(lo) == 1 and len(hi) == 1:
        items = [chr(c) for c in range(ord(lo), ord(hi) + 1, step)]
    else:
        raise ValueError(f"host range {m.group(0)!r} is neither numeric nor single letters")
    return [h for item in items for h in expand_pattern(head + item + tail)]


def inventory_waves(hosts_yml: str) -> dict[str, list[str]]:
    """`{wave_NNN: [hosts]}` in order from a rendered `ansible/inventory/hosts.yml`."""
    data = YAML(typ="safe", pure=True).load(hosts_yml) or {}
    groups = (((data.get("all") or {}).get("children") or {}).get("upgrade_waves") or {}).get("children") or {}
    out: dict[str, list[str]] = {}
    for name in sorted(groups, key=lambda g: int(g.split("_")[-1]) if is_digits(g.split("_")[-1]) else 1 << 30):
        hosts = (groups[name] or {}).get("hosts") or {}
        out[name] = [h for pattern in hosts for h in expand_pattern(str(pattern))]
    return out
