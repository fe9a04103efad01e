"""ruff (configured in pyproject.toml: [tool.ruff]) passes on src and tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _ruff() -> str | None:
    beside = Path(sys.executable).parent / "ruff"  # the venv's ruff (test extra)
    return str(beside) if beside.exists() else shutil.which("ruff")


def test_ruff_check_passes():
    ruff = _ruff()
    if ruff is None:
        if os.environ.get("CI"):
            pytest.fail("ruff missing in CI (pip install -e '.[test]')")
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    r = subprocess.run([ruff, "check", "src", "tests"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
