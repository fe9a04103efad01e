"""Mixed GPU models in Slurm partitions, without daemons: which partitions mix, the one warning each,
the table job_submit.lua reads, and its Lua quoting. The live proof is test_slurm_gpu_models.py."""

from __future__ import annotations

import re

import pytest

from clusterdef import generations
from clusterdef.model.definition import Definition
from clusterdef.quoting import lua
from clusterdef.render import slurm as slurm_target
from clusterdef.resolve import resolve
from conftest import CLUSTERS
from lab_variants import mixed_flavor, mixed_generations, without_governed_data
from test_checks import run


def test_mixed_partitions_in_node_group_order(lab):
    d = Definition.model_validate(mixed_generations(lab))
    assert generations.gpu_partitions(d) == {"train": ["h100", "h200"], "debug": ["h100", "h200"], "secure": ["h100"]}
    assert generations.mixed_partitions(d) == {"train": ["h100", "h200"], "debug": ["h100", "h200"]}
    data = mixed_generations(lab)
    data["slurm"]["partitions"]["train"]["node_groups"].reverse()
    assert generations.partition_models(Definition.model_validate(data), "train") == ["h200", "h100"]
    assert generations.mixed_partitions(Definition.model_validate(lab)) == {}


def test_a_flavor_over_two_models_is_the_one_error(lab, matrix, tmp_path):
    assert generations.mixed_flavors(Definition.model_validate(mixed_flavor(lab))) == {"h100": ["h100", "h200"]}
    assert generations.mixed_flavors(Definition.model_validate(mixed_generations(lab))) == {}
    result = run(mixed_flavor(without_governed_data(lab)), matrix, tmp_path)  # its dataset is on infer, moved here
    assert [(f.code, f.path) for f in result.findings] == [
        ("flavor-mixes-gpu-models", ("kubernetes", "kueue", "flavors", "h100", "node_groups"))]


def test_one_warning_per_mixing_partition(lab, matrix, tmp_path):
    result = run(mixed_generations(lab), matrix, tmp_path)
    hits = [f for f in result.findings if f.code == "partition-mixes-gpu-models"]
    assert [f.path for f in hits] == [("slurm", "partitions", p, "node_groups") for p in ("train", "debug")]
    assert result.ok and {f.code for f in result.findings} == {"partition-mixes-gpu-models"}
    assert '--constraint="[h100|h200]"' in hits[0].message and '--constraint="h100|h200"' in hits[0].hint


def test_job_submit_lua_gets_the_models_and_is_rendered_for_a_mix_alone(lab, matrix):
    data = mixed_generations(lab)
    for p in data["slurm"]["partitions"].values():
        p.pop("qos", None)  # no partition QOS: the mix alone needs job_submit.lua
    tree = slurm_target.render(resolve(Definition.model_validate(data), matrix, CLUSTERS))
    assert "JobSubmitPlugins=lua\n" in tree["slurm/slurm.conf"]
    script = tree["slurm/job_submit.lua"]
    assert 'local GPU_MODELS = {\n   ["train"] = {"h100", "h200"},\n   ["debug"] = {"h100", "h200"},\n' in script
    assert "job_desc.features = constraint" in script
    lab["slurm"]["partitions"]["train"].pop("qos")
    plain = slurm_target.render(resolve(Definition.model_validate(lab), matrix, CLUSTERS))
    assert "slurm/job_submit.lua" not in plain and "JobSubmitPlugins" not in plain["slurm/slurm.conf"]


@pytest.mark.parametrize("value", ['a"b', "back\\slash", "new\nline", "]] --[[", "é\0"])
def test_lua_literal_reads_back_as_the_value(value):
    text = lua(value)
    assert text.startswith('"') and text.endswith('"') and '"' not in text[1:-1] and "\n" not in text
    # Lua's reading of a "\\ddd" escape is the byte ddd (decimal); anything else outside `\\` stands for itself
    body = text[1:-1]
    assert re.fullmatch(r'(?:[ -!#-\[\]-~]|\\\d{3})*', body), body
    assert re.sub(rb"\\(\d{3})", lambda m: bytes([int(m[1])]), body.encode()) == value.encode()
