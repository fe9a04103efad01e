"""A new nccl-tests run against its recorded baseline (`pick`, `compare`): every (size,
datatype, op) row in both halves, with a tolerated busbw drop per message-size band."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..textnum import decimal
from .parse import BaselineError, Run, series_name, size_name, size_range
from .store import Baseline

# Size bands and their default tolerated busbw drop (percent). Small messages are
# latency-bound and noisy; large ones measure the fabric and get the policy value.
BANDS = (("small", 0, 1 << 20), ("medium", 1 << 20, 256 << 20), ("large", 256 << 20, 1 << 62))
DEFAULT_TOLERANCE = {"small": 25.0, "medium": 10.0, "large": 5.0}


def band(size: int) -> str:
    return next(name for name, lo, hi in BANDS if lo <= size < hi)


def parse_tolerance(pairs: list[str]) -> dict[str, float]:
    """`BAND=PCT` pairs (`--tolerance`); BaselineError on an unknown band or a PCT outside 0..100."""
    tol: dict[str, float] = {}
    for t in pairs:
        name, _, pct = t.partition("=")
        try:
            if name not in {b for b, _, _ in BANDS}:
                raise ValueError
            value = decimal(pct)
            if value is None or not 0 <= value <= 100:  # also refuses inf and nan: a tolerance that passes any slowdown
                raise ValueError
            tol[name] = value
        except ValueError:
            raise BaselineError(f"--tolerance {t!r}: use small=PCT, medium=PCT or large=PCT with PCT a number "
                                "from 0 to 100") from None
    return tol


def _same_hardware(b: Baseline, run: Run, fabric: str) -> bool:
    """The baseline was taken on the run's GPU model and fabric kind (or does not say)."""
    models = set(run.gpu_models)
    same_model = not b.gpu_model or not models or models == {b.gpu_model}
    return same_model and (not b.fabric or not fabric or b.fabric == fabric)


def pick(baselines: list[Baseline], run: Run, node_group: str = "", fabric: str = "") -> Baseline | None:
    """The baseline for this run: same test and node count, taken on the run's GPU model and fabric kind
    when one is (a file may hold one per model), preferring the node group."""
    same = [b for b in baselines if b.test == run.test and b.nodes == run.nodes]
    same = [b for b in same if _same_hardware(b, run, fabric)] or same
    for b in same:
        if node_group and b.node_group == node_group:
            return b
    return next((b for b in same if not b.node_group), same[0] if same else None)


@dataclass
class SizeResult:
    size: int
    band: str
    baseline_gbps: float
    measured_gbps: float
    drop_pct: float
    tolerance_pct: float
    ok: bool
    type: str = ""
    redop: str = ""
    half: str = "out-of-place"


@dataclass
class Comparison:
    test: str
    set: str
    ok: bool
    problems: list[str]
    sizes: list[SizeResult]

    def to_json(self) -> dict:
        return asdict(self)


def hardware_problems(run: Run, base: Baseline, fabric: str = "") -> list[str]:
    """Why the run cannot be compared with the baseline's figures: another GPU model (or several) or
    another fabric kind. Unknown on either side is not a mismatch."""
    problems = []
    if len(run.gpu_models) > 1:
        problems.append(f"run spans GPU models {', '.join(run.gpu_models)}: a baseline is per GPU model, "
                        "so no baseline compares; run the collective on nodes of one model")
    elif run.gpu_models and base.gpu_model and run.gpu_models[0] != base.gpu_model:
        problems.append(f"run on {run.gpu_models[0]}, baseline recorded on {base.gpu_model}: baselines are per "
                        f"GPU model, record one on {run.gpu_models[0]} (`clusterdef baseline record`)")
    if fabric and base.fabric and fabric != base.fabric:
        problems.append(f"run over {fabric}, baseline recorded over {base.fabric}: baselines are per fabric kind")
    return problems


def compare(run: Run, base: Baseline, tolerance: dict[str, float] | None = None, fabric: str = "") -> Comparison:
    """Compare a run with its baseline, every (size, datatype, op) row in both halves. Fails on a
    failed/incomplete run, any #wrong, another test, node count or GPUs per node, another GPU model or
    fabric kind (nothing else is compared then), a row whose busbw dropped beyond its band's tolerance, a
    baseline row the run lacks, or no rows in common."""
    tol = {**DEFAULT_TOLERANCE, **(tolerance or {})}
    problems: list[str] = hardware_problems(run, base, fabric)
    if problems:
        return Comparison(run.test, base.set, False, problems, [])
    if run.status != "ok":
        problems.append(f"run {run.status}: {run.reason}")
    elif run.wrong_total:
        problems.append(f"{run.wrong_total:g} wrong elements (#wrong)")
    if run.test and run.test != base.test:
        problems.append(f"run is {run.test}, baseline is {base.test}")
    if run.nodes != base.nodes:
        problems.append(f"run spans {run.nodes} nodes, baseline {base.nodes}")
    if run.gpus_per_node and base.gpus_per_node and run.gpus_per_node != base.gpus_per_node:
        problems.append(f"run has {run.gpus_per_node} GPUs per node, baseline {base.gpus_per_node}")
    measured = run.busbw()
    if base.legacy:
        series = run.series()
        if len(series) > 1:
            problems.append(f"the baseline is keyed by message size only (recorded before per-datatype "
                            f"baselines) and the run has {len(series)} datatype/op series "
                            f"({', '.join(series_name(*s) for s in series[:6])}); re-record it with "
                            "`clusterdef baseline record`")
            return Comparison(run.test, base.set, False, problems, [])
        measured = {(sz, "", ""): (oop, None) for (sz, _, _), (oop, _) in measured.items()}
    sizes: list[SizeResult] = []
    for key in sorted(set(measured) & set(base.busbw)):
        sz, dtype, redop = key
        for i, half in enumerate(("out-of-place", "in-place")):
            want, got = base.busbw[key][i], measured[key][i]
            if want is None or got is None:
                continue
            drop = 0.0 if want <= 0 else round((want - got) / want * 100.0, 2)
            limit = tol[band(sz)]
            ok = drop <= limit
            sizes.append(SizeResult(sz, band(sz), want, got, drop, limit, ok, dtype, redop, half))
            if not ok:
                what = " ".join(x for x in (size_name(sz), series_name(dtype, redop), half) if x)
                problems.append(f"{what}: busbw {got:g} GB/s is {drop:g}% below the baseline "
                                f"{want:g} GB/s (tolerance {limit:g}% for {band(sz)} messages)")
    missing = sorted(set(base.busbw) - set(measured))
    if missing and measured:
        names = sorted({series_name(t, o) for _, t, o in missing if t})
        problems.append(f"{len(missing)} baseline row(s) not in the run ("
                        + (f"datatype/op {', '.join(names[:6])}; " if names else "")
                        + f"sizes {size_range([m[0] for m in missing])})")
    if not sizes:
        problems.append("no message size in common with the baseline")
    return Comparison(run.test, base.set, not problems, problems, sizes)
