"""The validated set the cluster runs: it exists, its status allows it, it is
internally consistent, and it pins firmware for every hardware type."""

from __future__ import annotations

from difflib import get_close_matches
from typing import Iterable

from ..errors import Finding, Severity
from ..matrix.checks import check_set
from .registry import Context, check

PATH = ("cluster", "matrix")


@check("matrix")
def matrix(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    vs = ctx.chosen_set
    if vs is None:
        known = sorted(ctx.matrix.sets)
        close = get_close_matches(d.cluster.matrix, known, n=1)
        yield Finding("matrix-unknown-set", Severity.ERROR, PATH,
                      f"validated set `{d.cluster.matrix}` is not in {ctx.matrix.root}/sets",
                      f"did you mean `{close[0]}`?" if close else f"known sets: {', '.join(known) or 'none'}")
        return
    if vs.status == "retired":
        yield Finding("matrix-retired", Severity.ERROR, PATH,
                      f"set `{vs.name}` is retired", "move the cluster to a validated set (`clusterdef matrix list`)")
    elif vs.status == "candidate" and not d.cluster.allow_candidate:
        yield Finding("matrix-candidate", Severity.ERROR, PATH,
                      f"set `{vs.name}` is a candidate, not validated",
                      "use a validated set, or set `cluster.allow_candidate: true` for a lab or canary cluster")
    for p in check_set(vs, ctx.matrix.compat, ctx.today):
        yield Finding(p.code, p.severity, PATH, p.message, p.hint)

    for hname, hw in d.hardware.items():
        pins = vs.firmware.get(hw.platform)
        if pins is None:
            if hw.firmware:
                yield Finding("firmware-platform-unpinned", Severity.ERROR, ("hardware", hname, "platform"),
                              f"set `{vs.name}` pins no firmware for platform `{hw.platform}`",
                              f"platforms pinned: {', '.join(sorted(vs.firmware)) or 'none'}")
            continue
        for i, comp in enumerate(hw.firmware):
            if comp not in pins:
                yield Finding("firmware-component-unpinned", Severity.ERROR, ("hardware", hname, "firmware", i),
                              f"set `{vs.name}` pins no `{comp}` firmware for platform `{hw.platform}`",
                              f"pinned for {hw.platform}: {', '.join(sorted(pins))}")

    target = d.upgrade.rollback.target
    if target != "previous":
        tset = ctx.matrix.sets.get(target)
        if tset is None:
            yield Finding("rollback-unknown-set", Severity.ERROR, ("upgrade", "rollback", "target"),
                          f"rollback target `{target}` is not a known set", "use `previous` or a validated set name")
        elif tset.status != "validated":
            yield Finding("rollback-not-validated", Severity.ERROR, ("upgrade", "rollback", "target"),
                          f"rollback target `{target}` is {tset.status}; under pressure return to a validated set",
                          "point the rollback at a validated set")
