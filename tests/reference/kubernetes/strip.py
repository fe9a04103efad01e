"""How the CRD copies here were made from the originals: `description` fields removed (to keep the
copies small) and, for Kueue, only the storage version (v1beta2) kept. Nothing else changes, so the
schemas validate exactly as the originals do. tests/test_kubernetes_render.py checks this against
../shared/reference when it is present.

    python tests/reference/kubernetes/strip.py ORIGINAL.yaml COPY.yaml
"""

from __future__ import annotations

import json
import sys


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def reduce_crd(crd: dict) -> dict:
    crd = strip(crd)
    versions = crd["spec"]["versions"]
    if len(versions) > 1:
        crd["spec"]["versions"] = [v for v in versions if v.get("storage")]
    return crd


if __name__ == "__main__":
    from ruamel.yaml import YAML

    y = YAML(typ="safe")
    with open(sys.argv[1]) as fh:
        data = y.load(fh)
    with open(sys.argv[2], "w") as fh:
        json.dump(reduce_crd(data), fh, indent=1, sort_keys=True)
        fh.write("\n")
