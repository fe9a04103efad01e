"""The site's own baseline file (`upgrade.baseline`): readable, well-formed, and every entry keyed by the
GPU model and fabric kind it was taken on, since the collective gates compare each stage only with the
entry of its own model and fabric (plan/rollout.py own_baseline; baseline/compare.py hardware_problems)."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error
from .registry import Context, check

RECORD = "clusterdef baseline record LOG --set SET --node-group GROUP --fabric KIND -o FILE"


@check("upgrade-baseline")
def upgrade_baseline(ctx: Context) -> Iterable[Finding]:
    rel = ctx.definition.upgrade.baseline
    if rel is None:
        return
    at = ("upgrade", "baseline")
    from ..baseline import BaselineError, load_baselines  # the log parser and its types: only for a baseline

    try:
        entries = load_baselines(ctx.base_dir / rel)
    except BaselineError as exc:
        yield error("upgrade-baseline-invalid", at, f"the site baseline `{rel}` cannot be used: {exc}",
                    f"point upgrade.baseline at a baseline file beside the definition, written by `{RECORD}`")
        return
    if not entries:
        yield error("upgrade-baseline-invalid", at, f"the site baseline `{rel}` holds no baseline entry",
                    f"record one with `{RECORD}`")
    for b in entries:
        missing = [f for f, v in (("gpu_model", b.gpu_model), ("fabric", b.fabric)) if not v]
        if missing:
            yield error("upgrade-baseline-unkeyed", at,
                        f"the entry ({b.test}, {b.nodes} nodes{', ' + b.node_group if b.node_group else ''}) of the "
                        f"site baseline `{rel}` does not say its {' and '.join(missing)}: the gate could compare "
                        "a stage with figures of another GPU model or fabric",
                        f"re-record it with `{RECORD}` (the GPU model comes from the log), or add "
                        f"{' and '.join(missing)} to the entry")
