"""Numbers read from text (logs, facts, baselines, plan files, the command line): ASCII digits only.

Python's int(), float() and str.isdigit() accept far more than a number as its producer writes it:
int("٣٢") is 32, int("1_000") is 1000, "²".isdigit() is True but int("²") raises, float(" 1e3 ") is
1000.0. A tool that prints a number writes ASCII digits, so anything else is not a number here.
"""

from __future__ import annotations

import math
import re

_WHOLE = re.compile(r"[-+]?[0-9]+")
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# past this many digits a number is noise (and int() of 4,300 digits raises)
MAX_DIGITS = 64


def is_digits(text: str) -> bool:
    """True when `text` is one or more ASCII digits and nothing else."""
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def whole(text: str) -> int | None:
    """The whole number `text` spells in ASCII digits (an optional sign), else None."""
    if len(text.lstrip("+-")) > MAX_DIGITS or not _WHOLE.fullmatch(text):
        return None
    return int(text)


def decimal(text: str) -> float | None:
    """The finite decimal `text` spells in ASCII (sign, point, exponent), else None: no `nan`, `inf`,
    underscores, spaces or other scripts' digits."""
    if len(text) > MAX_DIGITS + 8 or not _DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None
