"""The pinned versions every other target and role reads: the validated set's
components, and the firmware baseline per hardware type."""

from __future__ import annotations

import json

from ..resolve import Resolved


def render(resolved: Resolved) -> dict[str, str]:
    d, vs = resolved.definition, resolved.set
    doc = {
        "cluster": {"name": d.cluster.name, "site": d.cluster.site, "description": d.cluster.description},
        "set": vs.name,
        "status": vs.status,
        "components": vs.components.model_dump(exclude_none=True),
        "driver_branch": vs.driver_branch,
        "slurm_major": vs.slurm_major,
        "baseline": vs.baseline,
        "firmware": {
            hname: {"platform": hw.platform,
                    "components": {c: vs.firmware.get(hw.platform, {}).get(c) for c in hw.firmware}}
            for hname, hw in d.hardware.items()
        },
        "images": {name: {"version": img.version, "distribution": img.distribution, "release": img.release,
                          "kernel": img.kernel} for name, img in d.images.items()},
    }
    return {"versions.json": json.dumps(doc, indent=2, sort_keys=True) + "\n"}
