"""MAC inventories: CSV files of `host,mac` lines exported from the vendor or the
asset system. Read once per file; problems are reported, never raised."""

from __future__ import annotations

import csv
import io
import re
from functools import lru_cache
from dataclasses import dataclass, field
from pathlib import Path

from .limits import InputError, read_text
from .macaddr import host_mac_problem

GUIDS = re.compile(r"^0x[0-9a-f]{16}(;0x[0-9a-f]{16}){0,63}$")
MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Inventory:
    file: Path
    macs: dict[str, str] = field(default_factory=dict)  # host -> MAC (lower case: upper case is refused)
    problems: tuple[str, ...] = ()  # human-readable, each naming file:line
    guids: dict[str, tuple[str, ...]] = field(default_factory=dict)  # host -> InfiniBand port GUIDs (column 3)


def read_inventory(file: Path) -> Inventory:
    """Read (or reuse, while the file is unchanged) one inventory."""
    try:
        st = Path(file).stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    return _read(Path(file), stamp)


@lru_cache(maxsize=64)
def _read(file: Path, stamp) -> Inventory:
    try:
        rows = list(csv.reader(io.StringIO(read_text(file, "inventory"), newline="")))
    except InputError as exc:
        f = exc.findings[0]
        return Inventory(file, {}, (f"{f.message} ({f.hint})",))
    except csv.Error as exc:
        return Inventory(file, {}, (f"{file} is not a valid CSV file: {exc}",))
    macs: dict[str, str] = {}
    guids: dict[str, tuple[str, ...]] = {}
    problems: list[str] = []
    for n, row in enumerate(rows, 1):
        if not row or not row[0].strip() or row[0].startswith("#") or (n == 1 and row[0].strip() == "host"):
            continue
        host = row[0].strip()
        mac = row[1].strip() if len(row) > 1 else ""
        if not HOST.match(host):
            problems.append(f"{file}:{n}: {host!r} is not a host name")
        elif MAC.match(mac.lower()) and not MAC.match(mac):
            # the same rule as a `list` of MACs in the definition: lower case, never silently changed
            problems.append(f"{file}:{n}: MAC {mac!r} has upper-case letters; MAC addresses are lower-case "
                            f"and colon-separated, as in a `list` (write {mac.lower()})")
        elif not MAC.match(mac):
            problems.append(f"{file}:{n}: {mac!r} is not a MAC address (write 52:54:00:12:34:56)")
        elif host_mac_problem(mac):
            problems.append(f"{file}:{n}: {host_mac_problem(mac)}: write the MAC of {host}'s provisioning NIC")
        elif host in macs:
            problems.append(f"{file}:{n}: host {host} is listed twice")
        elif len(row) > 2 and row[2].strip() and not GUIDS.match(row[2].strip()):
            problems.append(f"{file}:{n}: port GUIDs {row[2].strip()[:60]!r} are not 0x + 16 lower-case hex "
                            "digits joined by ';'")
        else:
            macs[host] = mac
            if len(row) > 2 and row[2].strip():
                guids[host] = tuple(row[2].strip().split(";"))
    return Inventory(file, macs, tuple(problems), guids)


def read_inventories(files) -> dict[Path, Inventory]:
    """Each distinct file once."""
    return {f: read_inventory(f) for f in dict.fromkeys(files)}
