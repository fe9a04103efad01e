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
    problems: tuple[tuple[int, str], ...] = ()  # (line, what is wrong), line 0 for the whole file; no path
    guids: dict[str, tuple[str, ...]] = field(default_factory=dict)  # host -> InfiniBand port GUIDs (column 3)
    refused: frozenset[str] = frozenset()  # hosts whose line is refused (a problem, not a missing host)
    readable: bool = True  # False: the file could not be read at all, so no host can be looked up in it

    def report(self, name: str) -> list[str]:
        """The problems, each as `name:line: what` with `name` the path as the definition wrote it."""
        return [f"{name}:{n}: {what}" if n else f"{name} {what}" for n, what in self.problems]


def read_inventory(file: Path) -> Inventory:
    """Read (or reuse, while the file is unchanged) one inventory."""
    try:
        st = Path(file).stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    return _read(Path(file), stamp)


def _unreadable(file: Path, what: str) -> Inventory:
    what = what.replace(str(file), "").strip() if str(file) in what else what
    return Inventory(file, {}, ((0, what),), readable=False)


@lru_cache(maxsize=64)
def _read(file: Path, stamp) -> Inventory:
    try:
        rows = list(csv.reader(io.StringIO(read_text(file, "inventory"), newline="")))
    except InputError as exc:
        f = exc.findings[0]
        return _unreadable(file, f"{f.message} ({f.hint})")
    except csv.Error as exc:
        return _unreadable(file, f"is not a valid CSV file: {exc}")
    macs: dict[str, str] = {}
    guids: dict[str, tuple[str, ...]] = {}
    problems: list[tuple[int, str]] = []
    refused: set[str] = set()
    for n, row in enumerate(rows, 1):
        host = row[0].strip() if row else ""  # each column stripped once: a line of a 16,384-line file is cheap
        if not host or row[0].startswith("#") or (n == 1 and host == "host"):
            continue
        mac = row[1].strip() if len(row) > 1 else ""
        ports = row[2].strip() if len(row) > 2 else ""
        problem = _line_problem(host, mac, ports, macs)
        if problem:
            problems.append((n, problem))
            if HOST.fullmatch(host) and host not in macs:
                refused.add(host)
        else:
            macs[host] = mac
            if ports:
                guids[host] = tuple(ports.split(";"))
    return Inventory(file, macs, tuple(problems), guids, frozenset(refused))


def _line_problem(host: str, mac: str, ports: str, macs: dict[str, str]) -> str | None:
    if not HOST.fullmatch(host):
        return f"{host!r} is not a host name"
    if not MAC.fullmatch(mac):
        if MAC.fullmatch(mac.lower()):
            # the same rule as a `list` of MACs in the definition: lower case, never silently changed
            return (f"MAC {mac!r} has upper-case letters; MAC addresses are lower-case and colon-separated, "
                    f"as in a `list` (write {mac.lower()})")
        return f"{mac!r} is not a MAC address (write 52:54:00:12:34:56)"
    if (problem := host_mac_problem(mac)):
        return f"{problem}: write the MAC of {host}'s provisioning NIC"
    if host in macs:
        return f"host {host} is listed twice"
    if ports and not GUIDS.fullmatch(ports):
        return f"port GUIDs {ports[:60]!r} are not 0x + 16 lower-case hex digits joined by ';'"
    return None


def read_inventories(files) -> dict[Path, Inventory]:
    """Each distinct file once."""
    return {f: read_inventory(f) for f in dict.fromkeys(files)}
