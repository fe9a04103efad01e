"""Run the clusterdef command line in-process, as the tests' CliRunner: the verb's exit code,
its standard output and error apart and interleaved (`output`), and any exception that was not
an exit. rich's consoles write to whatever sys.stdout/sys.stderr are at print time, and see no
terminal here (80 columns, no colour), as in a CI log."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Callable


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    output: str
    exception: BaseException | None


class _Tee(io.StringIO):
    def __init__(self, both: io.StringIO):
        super().__init__()
        self._both = both

    def write(self, text: str) -> int:
        self._both.write(text)
        return super().write(text)


class CliRunner:
    def invoke(self, app: Callable[[list[str]], None], args: list[str]) -> Result:
        both = io.StringIO()
        out, err = _Tee(both), _Tee(both)
        code, exception = 0, None
        with redirect_stdout(out), redirect_stderr(err):
            try:
                app([str(a) for a in args])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                exception = exc if code else None
            except Exception as exc:  # noqa: BLE001 (reported to the test, as click's runner does)
                code, exception = 1, exc
        sys.stdout.flush()
        return Result(code, out.getvalue(), err.getvalue(), both.getvalue(), exception)
