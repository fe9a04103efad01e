"""Source positions: every key and list item of a file maps to its 1-based line and column,
by the data's paths (the same keys the safe loader constructs). Expected positions are read off
the text below by eye, not computed."""

from __future__ import annotations

from clusterdef.source import Source, load_text

TEXT = """\
cluster:
  name: lab
  ports:
    - 22
    -   80
base: &base
  site: eu
  zone: a
derived:
  <<: *base
  zone: b
copy: *base
7: seven
over:
  zone:
    id: 1
  <<: {zone: {id: 2}, site: x}
list:
  - name: x
    size: 1
  - [p, q]
"""


def test_positions_of_keys_items_aliases_and_merges():
    pos = Source("t.yaml", TEXT).positions()
    assert pos[("cluster",)] == (1, 1)
    assert pos[("cluster", "name")] == (2, 3)
    assert pos[("cluster", "ports", 0)] == (4, 7)
    assert pos[("cluster", "ports", 1)] == (5, 9)  # the item, not its dash
    assert pos[("base", "site")] == (7, 3)
    assert pos[("derived", "zone")] == (11, 3)  # its own key wins over the merged one
    assert pos[("derived", "site")] == (7, 3)  # merged: where the anchor defines it
    assert pos[("copy", "zone")] == (8, 3)  # an alias: where the anchor's key is
    assert pos[(7,)] == (13, 1)  # an int key, as the safe loader constructs it
    assert pos[("list", 0)] == (19, 5)
    assert pos[("list", 0, "size")] == (20, 5)
    assert pos[("list", 1, 1)] == (21, 9)
    assert ("derived", "<<") not in pos
    assert pos[("over", "zone", "id")] == (16, 5)  # its own nested key, though the merge comes after
    assert pos[("over", "site")] == (17, 23)  # merged from a flow mapping


def test_every_data_path_has_a_position():
    src = load_text(TEXT, "t.yaml")
    pos = src.positions()

    def paths(node, path=()):
        if isinstance(node, dict):
            for k, v in node.items():
                yield path + (k,)
                yield from paths(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield path + (i,)
                yield from paths(v, path + (i,))

    data_paths = set(paths(src.data))
    assert data_paths == set(pos)


def test_locate_falls_back_to_the_deepest_known_prefix():
    src = Source("t.yaml", TEXT)
    assert src.locate(("cluster", "ports", 7)) == (3, 3)
    assert src.locate(("nowhere",)) == (1, 1)
    assert Source("e.yaml", "").locate(("x",)) == (0, 0)
    assert Source("bad.yaml", "a: [").positions() == {}
