"""No inert fields: every leaf value of the lab definition, and every field the lab leaves at its
default where a different value can be made (booleans, choices, numbers), is changed in turn;
each change must change the rendered tree (manifest and resolved definition aside, which change
with any input) or the findings. A field that changes neither is a promise nobody keeps; the few
that legitimately change neither are listed in INERT with the reason.

Changes are chosen to stay valid where possible (another choice, the number +1/-1/x2), so a field
counts as live because its value is rendered or checked, not because a nonsense value fails."""

from __future__ import annotations

import copy
import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from clusterdef.build import build_tree
from clusterdef.model import Definition
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY, dump_yaml

pytestmark = pytest.mark.slow

# path pattern ("*" = any key or index) -> why changing it changes neither the tree nor the findings
INERT: dict[tuple, str] = {
    ("cluster", "allow_candidate"): "matters only when the set is a candidate (the lab's is current); "
                                    "tests/bad/ and test_matrix.py cover a candidate set",
    ("hardware", "*", "gpu", "mig_profiles"): "checked against kubernetes.gpu_operator.mig_profile "
                                              "(mig-profile-unsupported), which the lab leaves unset",
    ("backup", "rehearsal", "database"): "where `clusterdef drill` restores to; checked only against the live "
                                         "database (backup-rehearsal-live; test_backup.py)",
    ("backup", "rehearsal", "state_dir"): "where `clusterdef drill` restores StateSaveLocation to; checked only "
                                          "against the live one (backup-rehearsal-live; test_backup.py)",
    ("backup", "rehearsal", "max_age_days"): "warns once the last recorded rehearsal is older (backup-rehearsal-stale, "
                                             "test_backup.py); the lab adopted its policy the day after TODAY",
    ("service", "supported_hours", "days"): "dropping the last day (Friday) changes nothing: no stage of the lab's "
                                            "plan starts on a Friday (`staffed`: test_service.py)",
    ("service", "recovery", "slurm", "rto_minutes"): "compared with the last passed rehearsal's duration "
                                                     "(service-rto-unmet), and the lab has no rehearsal record yet "
                                                     "(test_service.py::test_rto_against_the_last_passed_rehearsal)",
    ("kubernetes", "kueue", "pods_ready_timeout_s"): "Kueue's waitForPodsReady timeout, rendered only with a "
                                                      "gang queue (the lab has none; test_kubernetes_render)",
}

ALWAYS_CHANGES = ("manifest.json", "definition.resolved.json")


OLD_SET = "2025.10-r580"  # the lab's previous set: `upgrade` fields are read by plan, so they are planned too


def _old_side(data: dict, tmp: Path):
    """The lab on its previous set (its own image version, no BlueField-3 firmware then), and the
    builds that rendering it publishes (kept on the boot server by the new side: image identity)."""
    from clusterdef.plan.images import builds_of
    from conftest import image_version

    old = copy.deepcopy(data)
    old["cluster"]["matrix"] = OLD_SET
    for img in old["images"].values():
        img["version"] = image_version(OLD_SET)
    for hw in old["hardware"].values():
        hw["firmware"] = [c for c in hw.get("firmware", []) if c != "bf3"]
    path = dump_yaml(old, tmp / "lab-old.yaml")
    r = validate_file(path, MATRICES, TODAY)
    assert r.ok, [(f.code, f.message) for f in r.errors]
    return path, builds_of(build_tree(r)[0])


def _plan(data: dict, tmp: Path) -> str:
    from clusterdef.plan import FROM_SIDE_IGNORED, load_side, make_plan
    from clusterdef.plan.formats import to_markdown

    old_path, builds = _old_side(data, tmp)
    new = copy.deepcopy(data)
    for name, b in builds.items():
        new["images"][name].setdefault("published", {})[b.version] = {"set": b.set, "digest": b.digest}
    a = load_side(old_path, MATRICES, TODAY, FROM_SIDE_IGNORED)
    b = load_side(dump_yaml(new, tmp / "lab.yaml"), MATRICES, TODAY, set())
    # the definitions' and trees' hashes change with any edit: masked, so a planned field is live only
    # when it changes what the plan says
    return re.sub(r"\b[0-9a-f]{12}\b", "<sha>", to_markdown(make_plan(a, b, False).doc))


def _outcome(data: dict, tmp: Path, with_plan: bool = False):
    path = dump_yaml(data, tmp / "lab.yaml")
    r = validate_file(path, MATRICES, TODAY)
    findings = frozenset((f.code, f.where) for f in r.findings)
    if not r.ok:
        return findings, None, None
    tree = build_tree(r)[0]
    return (findings, {k: v for k, v in tree.items() if k not in ALWAYS_CHANGES},
            _plan(data, tmp) if with_plan else None)


def _literal_choices(annotation) -> tuple:
    """The choices of a Literal (also inside Optional/Annotated), else ()."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return typing.get_args(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None), typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _literal_choices(arg)
            if found:
                return found
    return ()


def _model_of(annotation):
    """The BaseModel class inside an annotation (Optional, dict values, tuples), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        m = _model_of(arg)
        if m is not None:
            return m
    return None


def _candidates(value, annotation):
    if isinstance(value, bool):
        return [not value]
    choices = _literal_choices(annotation)
    if choices:
        return [c for c in choices if c != value]
    if isinstance(value, int):
        return [value + 1, value - 1, value * 2, value // 4]
    if isinstance(value, float):
        return [value * 2, value / 2, value + 1]
    if isinstance(value, str):
        return [value + "x", value[:-1] if len(value) > 1 else value + "y"]
    return []


def _mutations(data, model: type[BaseModel], path=()):
    """(path, new value) for each leaf of `data` under `model`, and each defaulted simple field."""
    if not isinstance(data, dict):
        return
    for name, field in model.model_fields.items():
        ann = field.annotation
        sub = _model_of(ann)
        if name not in data:
            if field.default is not None and isinstance(field.default, (bool, int, float, str)):
                for c in _candidates(field.default, ann):
                    yield path + (name,), c
            continue
        value = data[name]
        origin = typing.get_origin(ann) or (typing.get_origin(typing.get_args(ann)[0]) if typing.get_args(ann) else None)
        if isinstance(value, dict) and sub is not None and not _is_mapping_of_models(ann):
            yield from _mutations(value, sub, path + (name,))
        elif isinstance(value, dict) and sub is not None:
            for k, v in value.items():
                yield from _mutations(v, sub, path + (name, k))
        elif isinstance(value, dict):
            for k, v in value.items():
                for c in _candidates(v, None):
                    yield path + (name, k), c
        elif isinstance(value, list):
            if sub is not None:
                for i, v in enumerate(value):
                    yield from _mutations(v, sub, path + (name, i))
            else:
                for i, v in enumerate(value):
                    for c in _candidates(v, None):
                        yield path + (name, i), c
                if value:
                    yield path + (name,), value[:-1]
        else:
            del origin
            for c in _candidates(value, ann):
                yield path + (name,), c


def _is_mapping_of_models(annotation) -> bool:
    for a in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(a) is dict:
            return True
    return False


def _set(data: dict, path: tuple, value):
    node = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value


def _allowed(path: tuple) -> str | None:
    for pattern, why in INERT.items():
        if len(pattern) == len(path) and all(p == "*" or p == q for p, q in zip(pattern, path)):
            return why
    return None


def test_every_field_changes_the_tree_or_the_findings(lab_data, tmp_path):
    base = _outcome(copy.deepcopy(lab_data), tmp_path)
    base_planned = _outcome(copy.deepcopy(lab_data), tmp_path, with_plan=True)
    assert base[1] is not None and base_planned[2], "the lab must validate and plan"
    by_path: dict[tuple, list] = {}
    for path, value in _mutations(lab_data, Definition):
        by_path.setdefault(path, []).append(value)
    assert len(by_path) > 150, f"only {len(by_path)} fields walked"
    inert = []
    for path, values in by_path.items():
        live = False
        for value in values:
            data = copy.deepcopy(lab_data)
            _set(data, path, value)
            planned = path[0] in ("upgrade", "service")  # read by plan (service: the windows, approvers)
            outcome = _outcome(data, tmp_path, with_plan=planned)
            if outcome != (base_planned if planned else base):
                live = True
                break
        if not live and _allowed(path) is None:
            inert.append(".".join(map(str, path)) + f" (tried {values!r})")
    assert not inert, "fields whose change changes nothing:\n  " + "\n  ".join(inert)
