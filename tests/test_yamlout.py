"""render/yamlout.py, the emitter of every rendered YAML file: what it writes reads back as the data it was
given, by a YAML 1.2 reader (ruamel, as clusterdef reads) and a YAML 1.1 one (go-yaml in Helm and kubectl;
ruamel under a `%YAML 1.1` directive), whatever the order of the dumps (its caches key by type)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from clusterdef.render.yamlout import dump, dump_all

_TEXT = st.text(alphabet="aZ09 _-./:#'\"{}[],&*!|>%@`yesnoONtruefalsenul\\\t\né", max_size=8)
_SCALAR = st.none() | st.booleans() | st.integers(-10**12, 10**12) | _TEXT | st.sampled_from(
    ["on", "off", "yes", "No", "TRUE", "null", "~", "1e3", "0x1f", "012", "1_000", "30:00", ".inf", "-", "?"])
_DATA = st.recursive(_SCALAR, lambda kids: st.lists(kids, max_size=4)
                     | st.dictionaries(_TEXT | st.integers(-5, 5) | st.booleans(), kids, max_size=4), max_leaves=25)


def _load(text: str, version: str = "1.2"):
    return YAML(typ="safe", pure=True).load(f"%YAML {version}\n---\n{text}" if version != "1.2" else text)


@settings(max_examples=400, deadline=None)
@given(_DATA)
def test_a_dump_reads_back_as_its_data_in_yaml_1_2_and_1_1(data):
    text = dump(data, "a header\nof two lines")
    assert _load(text) == data
    assert _load(text, "1.1") == data


@settings(max_examples=100, deadline=None)
@given(st.lists(_DATA, min_size=1, max_size=3))
def test_documents_read_back_in_order(docs):
    assert list(YAML(typ="safe", pure=True).load_all(dump_all(docs))) == docs


def test_keys_equal_in_python_keep_their_own_spelling():
    """The key cache is typed: after `true:` is written, the key 1 is still written `1`, and 1.5 `1.5`."""
    assert dump({True: "a"}) == "true: a\n"
    assert dump({1: "a"}) == "1: a\n"
    assert dump({1.5: "a"}) == "1.5: a\n"
    assert dump({"1": "a"}) == '"1": a\n'
