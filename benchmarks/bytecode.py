"""Compile clusterdef's bytecode before timing it: an installed wheel has it (pip compiles at install), while
a checkout run with PYTHONDONTWRITEBYTECODE=1 (this workplace's machines set it) compiles every module from
source in every process, about 60 ms of a 0.6 s render."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "clusterdef"


def compile_bytecode() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(SRC)], check=True, env=env,
                   stdout=subprocess.DEVNULL)
