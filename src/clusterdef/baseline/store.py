"""Performance baselines on disk: record a run per validated set, node group and node count,
and load the recorded ones (compare.py compares a new run with them).

A baseline is keyed by (message size, datatype, reduction op), so a `-d all` / `-o all`
log keeps every row (the size-only key let the last datatype of each size win), and both
halves (out-of-place and in-place) are stored and compared.

File format (one entry at the top level, optional further ones under `entries:`)::

    set: 2026.07-r580
    test: all_reduce_perf
    nodes: 2
    gpus_per_node: 8
    busbw_gbps:                 # datatype/redop -> size (bytes) -> [out-of-place, in-place] GB/s
      float/sum:
        "1024": [0.04, 0.04]

A datatype without a reduction op (all_gather, alltoall) is keyed by the datatype alone.
Files recorded before this format map sizes straight to the out-of-place busbw
(`"1024": 0.04`); they still load, as baselines of one unnamed series, and compare with a
run that has one datatype/op; a run with several is refused with a message asking to
re-record the baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..limits import InputError, check_yaml, read_text
from ..textnum import whole
from .parse import BaselineError, Key, Run, _why, series_name


def _read_yaml(path: Path, rt: bool = False):
    """A baseline file's data, read and checked within limits (round-trip data when rt)."""
    from ruamel.yaml import YAML, YAMLError

    try:
        text = read_text(path, "baseline")
        check_yaml(text, str(path))
        return YAML(typ="rt" if rt else "safe").load(text)
    except InputError as exc:
        raise BaselineError(_why(exc)) from None
    except YAMLError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc}") from None


@dataclass
class Baseline:
    set: str
    test: str
    nodes: int
    gpus_per_node: int | None
    busbw: dict[Key, tuple[float, float | None]]  # (size, datatype, redop) -> (out-of-place, in-place)
    node_group: str = ""
    avg_busbw_gbps: float | None = None
    source: str = ""
    legacy: bool = False  # a size-keyed file: datatype and op "" (unknown), out-of-place only
    gpu_model: str = ""  # the GPU the run was taken on, as nvidia-smi and the log name it
    fabric: str = ""  # the fabric kind its collective crossed: infiniband, roce or ethernet ("" unknown)

    def key(self) -> tuple:
        return (self.test, self.node_group, self.nodes)

    def series(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((t, o) for _, t, o in self.busbw))


def _entry(data: dict, where: str, set_name: str) -> Baseline:
    """One entry, every field type-checked so a malformed file is a message naming the field."""
    def bad(field: str, want: str) -> BaselineError:
        return BaselineError(f"{where}: `{field}` must be {want} (got {data.get(field)!r:.60}); an entry needs "
                             "test, nodes and busbw_gbps {datatype/op: {size: [out-of-place, in-place] GB/s}}")

    def count(field: str) -> int:
        v = data.get(field)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 1 << 31:
            raise bad(field, "a positive whole number")
        return v

    def gbps(v) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError
        return float(v)

    def size(k) -> int:
        if isinstance(k, bool):
            raise ValueError
        n = k if isinstance(k, int) else whole(k) if isinstance(k, str) else None
        if n is None or not 0 <= n < 1 << 62:
            raise ValueError
        return n

    if not isinstance(data.get("test"), str):  # "" when the log did not name its test
        raise bad("test", "the nccl-tests name (e.g. all_reduce_perf)")
    bw = data.get("busbw_gbps")
    if not isinstance(bw, dict) or not bw:
        raise bad("busbw_gbps", "a mapping of datatype/op to {size (bytes): [out-of-place, in-place] GB/s}")
    busbw: dict[Key, tuple[float, float | None]] = {}
    legacy = all(not isinstance(v, dict) for v in bw.values())
    try:
        if legacy:  # the original size-keyed format: size -> out-of-place GB/s
            busbw = {(size(k), "", ""): (gbps(v), None) for k, v in bw.items()}
        else:
            for name, rows in bw.items():
                if not isinstance(name, str) or not isinstance(rows, dict) or not rows:
                    raise ValueError
                dtype, _, redop = name.partition("/")
                for k, v in rows.items():
                    if not isinstance(v, list) or len(v) != 2:
                        raise ValueError
                    busbw[(size(k), dtype, redop)] = (gbps(v[0]), None if v[1] is None else gbps(v[1]))
    except (TypeError, ValueError, OverflowError):
        raise bad("busbw_gbps", "datatype/op mapped to sizes in bytes mapped to [out-of-place, in-place] "
                  "finite, non-negative GB/s (or, in files recorded before per-datatype keys, sizes "
                  "mapped to one GB/s figure)") from None
    try:
        avg = None if data.get("avg_busbw_gbps") is None else gbps(data["avg_busbw_gbps"])
    except ValueError:
        raise bad("avg_busbw_gbps", "a finite, non-negative GB/s figure") from None
    if not isinstance(data.get("gpu_model", ""), str) or len(data.get("gpu_model", "")) > 128:
        raise bad("gpu_model", "the GPU's name as the log gives it (e.g. NVIDIA H100 80GB HBM3)")
    if data.get("fabric", "") not in FABRICS:
        raise bad("fabric", "infiniband, roce or ethernet")
    return Baseline(set=str(data.get("set", set_name)), test=data["test"], nodes=count("nodes"),
                    gpus_per_node=None if data.get("gpus_per_node") is None else count("gpus_per_node"),
                    busbw=busbw, node_group=str(data.get("node_group", "") or ""),
                    avg_busbw_gbps=avg, source=str(data.get("source", "")), legacy=legacy,
                    gpu_model=data.get("gpu_model", ""), fabric=data.get("fabric", ""))


def load_baselines(path: str | Path) -> list[Baseline]:
    """A baseline file: the top-level entry (the original format) plus optional `entries:`
    (one per node group / node count / test)."""
    path = Path(path)
    data = _read_yaml(path)
    _check_shape(data, path)
    set_name = str(data.get("set", path.stem))
    out = []
    if "test" in data:
        out.append(_entry(data, str(path), set_name))
    for i, e in enumerate(data.get("entries") or []):
        out.append(_entry(e, f"{path}: entries[{i}]", set_name))
    return out


def _check_shape(data, path: Path) -> None:
    if not isinstance(data, dict):
        raise BaselineError(f"{path}: a baseline file is a mapping with set, test, nodes and busbw_gbps")
    entries = data.get("entries") or []
    if not isinstance(entries, list):
        raise BaselineError(f"{path}: `entries` must be a list of baseline entries")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise BaselineError(f"{path}: entries[{i}] is not a mapping")


FABRICS = ("", "infiniband", "roce", "ethernet")


def baseline_from_run(run: Run, set_name: str, node_group: str = "", source: str = "", fabric: str = "") -> dict:
    from ruamel.yaml.comments import CommentedSeq

    by_series: dict[str, dict[str, list]] = {}
    for (sz, dtype, redop), (oop, ip) in run.busbw().items():
        pair = CommentedSeq([oop, ip])
        pair.fa.set_flow_style()
        by_series.setdefault(series_name(dtype, redop), {})[str(sz)] = pair
    return {
        "set": set_name, "test": run.test, "node_group": node_group, "nodes": run.nodes,
        "gpus_per_node": run.gpus_per_node, "source": source,
        **({"gpu_model": run.gpu_models[0]} if len(run.gpu_models) == 1 else {}),
        **({"fabric": fabric} if fabric else {}),
        "busbw_gbps": by_series,
        "avg_busbw_gbps": run.avg_busbw_gbps,
    }


def record(path: str | Path, entry: dict) -> str:
    """Add or replace an entry (same test, node group and node count) in a baseline file and
    return the new text. A file in the original single-entry format keeps its top-level entry."""
    from io import StringIO

    from ruamel.yaml import YAML

    y = YAML()
    y.default_flow_style = False
    path = Path(path)
    data = _read_yaml(path, rt=True) if path.exists() else None
    if data:
        _check_shape(data, path)
    else:
        data = {"set": entry["set"]}
    key = (entry["test"], entry.get("node_group", ""), entry["nodes"])
    top_key = (data.get("test"), data.get("node_group", "") or "", data.get("nodes"))
    if "test" not in data or top_key == key:
        for k, v in entry.items():
            data[k] = v
    else:
        entries = data.setdefault("entries", [])
        for i, e in enumerate(entries):
            if (e.get("test"), e.get("node_group", "") or "", e.get("nodes")) == key:
                entries[i] = entry
                break
        else:
            entries.append(entry)
    buf = StringIO()
    y.dump(data, buf)
    return buf.getvalue()


def set_baseline_path(matrix_root: str | Path, set_name: str, recorded: str | None) -> Path:
    """A set's baseline file: the one the set names (`baseline:`), else baselines/<set>.yaml."""
    return Path(matrix_root) / (recorded or f"baselines/{set_name}.yaml")
