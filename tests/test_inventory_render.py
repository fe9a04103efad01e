"""render/inventory.py: the CSV files are written exactly as Python's csv.writer writes them."""

from __future__ import annotations

import csv
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdef.render.inventory import csv_text

_FIELD = st.one_of(st.text(alphabet='ab1 ,"\r\n\t\'-:.', max_size=6), st.integers(-5, 500), st.none(),
                   st.floats(allow_nan=False, allow_infinity=False), st.booleans())


def _writer(rows) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_FIELD, max_size=5), max_size=6))
def test_csv_text_is_what_the_csv_writer_writes(rows):
    """Rows with nothing to quote are joined directly; quotes, commas, line ends, empty rows and a lone
    empty field (written as "") still come out as the writer has them."""
    assert csv_text(rows) == _writer(rows)


def test_csv_text_quotes_what_needs_quoting():
    assert csv_text([["gpu1", "a,b", 'say "x"', ""], [""], []]) == 'gpu1,"a,b","say ""x""",\n""\n\n'


def test_csv_text_joins_plain_rows_without_the_writer(monkeypatch):
    """The point of csv_text: plain rows (every row of the inventories) never reach csv.writer."""
    from clusterdef.render import inventory

    def refuse(*_a, **_k):
        raise AssertionError("csv.writer called for a plain row")

    monkeypatch.setattr(inventory.csv, "writer", refuse)
    assert csv_text([["gpu0001", "su1", "slurm", 400, None, "10.64.8.1"], ["", ""]]) == \
        "gpu0001,su1,slurm,400,,10.64.8.1\n,\n"
