"""Where the suite's time goes on CI's two cores (a plugin of the suite, conftest.py).

The molecule scenarios and the box bring-up run beside the other tests, so a test's wall time says
little about what it costs the run: at the end this prints, per test file, its wall time and the CPU the
whole machine spent meanwhile (podman containers included, which no rusage of ours sees), and when each
background job finished, counted from the session's start.

It also sets how the background jobs share the machine with the foreground (measured on 2 cores, 2026-12-03):
the foreground is one test at a time, so it can use about one core; the background jobs take the rest.
- Background threads run at a lower priority (`lower_priority`, nice 10; their subprocesses inherit it):
  the foreground keeps its core, and the background soaks up the other one and every wait of the foreground.
  Before, three molecule scenarios and the box bring-up took the foreground's core too, and once they were
  done the last ten minutes ran on one core.
- Tests that only wait for a background job's result run last (`pytest_collection_modifyitems`), so the
  foreground never stands still waiting; by then the jobs are done or nearly."""

from __future__ import annotations

import os
import threading
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


BACKGROUND_NICE = 10
# Tests that wait for a background job (box_bringup.py, molecule_support.py): run after every other test.
WAITS_FOR_BACKGROUND = ("tests/test_box_bringup.py::", "tests/test_roles.py::test_molecule_scenario[")


def lower_priority() -> None:
    """Make the calling thread, and every process it starts from now on, yield the CPU to the foreground
    (Linux keeps the nice value per thread; a child inherits its parent thread's): a ThreadPoolExecutor
    initializer of the background jobs."""
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)


def pytest_collection_modifyitems(session, config, items):
    waiting = [item for item in items if item.nodeid.startswith(WAITS_FOR_BACKGROUND)]
    if waiting:
        ids = {id(item) for item in waiting}
        items[:] = [item for item in items if id(item) not in ids] + waiting


_BUSY_AT_START = machine_busy_seconds()


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
    busy = machine_busy_seconds() - _BUSY_AT_START
    cores = os.cpu_count() or 1
    tr.write_line(f"machine busy {busy:.0f} CPU s of {total * cores:.0f} ({cores} cores): "
                  f"{100 * busy / (total * cores):.0f}%")
    ends = ", ".join(f"{k} {v:.0f}" for k, v in sorted(_finished.items(), key=lambda kv: kv[1])) or "none ran"
    tr.write_line(f"session {total:.1f} s; background jobs finished at (s from start): {ends}")
