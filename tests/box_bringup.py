"""Starts the box bring-up (tests/test_box_bringup.py) with the session, in a thread, when its tests are
selected: plan and apply over nine containers wait on podman and Ansible's connection more than they use the
CPU, so the rest of the suite runs beside them, as the molecule scenarios do (molecule_support.py). The tests
wait for the result; the box is stopped at the session's end."""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

import timeline


def selected(session) -> bool:
    return any(item.nodeid.startswith("tests/test_box_bringup.py") or "test_box_bringup.py::" in item.nodeid
               for item in session.items)


@pytest.fixture(scope="session")
def box_bringup(box_ready, tmp_path_factory, lab_data) -> Future:
    from test_box_bringup import bring_up

    tmp = tmp_path_factory.mktemp("bringup")
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=1, initializer=timeline.lower_priority) as pool:
        future = pool.submit(bring_up, tmp, lab_data, stack)
        future.add_done_callback(lambda _f: timeline.finished("box bring-up"))
        yield future
        future.exception()  # the box is stopped only once the bring-up has finished with it
