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
