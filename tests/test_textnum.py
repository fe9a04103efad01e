"""Numbers from text are ASCII digits only (issue 30): Python's int(), float(), isdigit() and `\\d` accept
other scripts' digits, superscripts, underscores and padding, which no producer of these files writes."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from clusterdef.baseline import BaselineError
from clusterdef.baseline.compare import parse_tolerance
from clusterdef.model.base import SlurmTime
from clusterdef.types import KernelRelease, MigProfile, Version
from clusterdef.textnum import decimal, is_digits, whole

OTHER_DIGITS = ["\u0665\u0668\u0660", "\uff15\uff18\uff10", "58\u00b2", "5_80", " 580", "580 ", "\u0968"]


@pytest.mark.parametrize("text", OTHER_DIGITS)
def test_text_that_python_reads_as_a_number_is_not_one_here(text):
    assert whole(text) is None and decimal(text) is None and not is_digits(text)


def test_ascii_numbers_read():
    assert (whole("-12"), whole("+3"), whole("0042")) == (-12, 3, 42)
    assert (decimal("1.5"), decimal(".5"), decimal("2."), decimal("1e3"), decimal("-0.25E-2")) == \
        (1.5, 0.5, 2.0, 1000.0, -0.0025)
    assert decimal("nan") is None and decimal("inf") is None and decimal("1e999") is None
    assert whole("9" * 65) is None and is_digits("0") and not is_digits("")


@pytest.mark.parametrize("kind, good, bad", [
    (Version, "580.82.07", "\u0665\u0668\u0660.82.07"),
    (KernelRelease, "6.8.0-60-generic", "\u0666.8.0-60-generic"),
    (MigProfile, "1g.10gb", "\u0661g.10gb"),
    (SlurmTime, "1-00:00:00", "\u0661-00:00:00"),
])
def test_definition_numbers_in_other_scripts_are_refused(kind, good, bad):
    adapter = TypeAdapter(kind)
    assert adapter.validate_python(good) == good
    with pytest.raises(ValidationError):
        adapter.validate_python(bad)


def test_tolerance_and_command_line_numbers_are_ascii():
    assert parse_tolerance(["small=5"]) == {"small": 5.0}
    with pytest.raises(BaselineError):
        parse_tolerance(["small=\u0665"])
    from clusterdef.cli.common import min_int

    assert min_int(None)("7") == 7
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        min_int(None)("\u0667")
