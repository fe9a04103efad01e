"""Where the suite's time goes on CI's two cores (a plugin of the suite, conftest.py).

The molecule scenarios and the box bring-up run beside the other tests, so a test's wall time says
little about what it costs the run: at the end this prints, per test file, its wall time and the CPU the
whole machine spent meanwhile (podman containers included, which no rusage of ours sees), and when each
background job finished, counted from the session's start."""

from __future__ import annotations

import os
import time
from collections import defaultdict

START = time.monotonic()
_TICK = os.sysconf("SC_CLK_TCK")
_per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
_finished: dict[str, float] = {}


def machine_busy_seconds() -> float:
    """CPU seconds the machine has spent busy (all cores, all processes) since boot: /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICK


def finished(name: str) -> None:
    """Record that background job `name` ended now (called from its future's done-callback)."""
    _finished[name] = time.monotonic() - START


def pytest_runtest_protocol(item, nextitem):
    item._timeline = (time.monotonic(), machine_busy_seconds())


def pytest_runtest_makereport(item, call):
    if call.when != "teardown" or not hasattr(item, "_timeline"):
        return
    wall0, cpu0 = item._timeline
    row = _per_file[item.nodeid.split("::", 1)[0]]
    row[0] += time.monotonic() - wall0
    row[1] += machine_busy_seconds() - cpu0
    row[2] += 1


def pytest_terminal_summary(terminalreporter):
    rows = sorted(_per_file.items(), key=lambda kv: -kv[1][0])[:30]
    if not rows:
        return
    tr = terminalreporter
    tr.section("timeline: per test file (wall s, machine CPU s meanwhile, tests)")
    for path, (wall, cpu, n) in rows:
        tr.write_line(f"{wall:8.1f} {cpu:8.1f} {n:5d}  {path}")
    total = time.monotonic() - START
    ends = ", ".join(f"{k} {v:.0f}" for k, v in sorted(_finished.items(), key=lambda kv: kv[1])) or "none ran"
    tr.write_line(f"session {total:.1f} s; background jobs finished at (s from start): {ends}")
