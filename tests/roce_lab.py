"""The lab on a RoCE fabric (text replacement of clusters/lab.yaml, like test_apply.lab): the HGX
H100 nodes' eight compute ports are RoCE NICs roce0..roce7 (400 Gb/s) and fabric `ib0` is `roce`;
`rail=True` turns it into two rail-optimised scalable units of 8 rails (conftest.as_rail)."""

from __future__ import annotations

from pathlib import Path

from conftest import CLUSTERS

IB_NIC = "{name: ibp, kind: infiniband, speed_gbps: 400, count: 8, role: compute}"
ROCE_NIC = "{name: roce, kind: roce, speed_gbps: 400, count: 8, role: compute}"


def roce_text() -> str:
    text = (CLUSTERS / "lab.yaml").read_text()
    for old, new in ((IB_NIC, ROCE_NIC), ("    ib0:\n      kind: infiniband\n", "    ib0:\n      kind: roce\n")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def roce_lab(out: Path, rail: bool = False) -> Path:
    """Write the RoCE lab (rail-optimised when `rail`) to `out` and return it."""
    text = roce_text()
    if rail:
        from ruamel.yaml import YAML

        from conftest import as_rail, dump_yaml

        return dump_yaml(as_rail(YAML(typ="safe").load(text)), out)
    out.write_text(text)
    return out
