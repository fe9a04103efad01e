"""Internal consistency of one validated set against the compatibility facts.

Pure: returns (code, severity, message, hint) tuples; the caller decides where
in the definition they belong."""

from __future__ import annotations

from datetime import date
from typing import NamedTuple

from ..errors import Severity
from .compat import Compat, minor, past, ver
from .model import ValidatedSet


class SetProblem(NamedTuple):
    code: str
    severity: Severity
    message: str
    hint: str


def check_set(vs: ValidatedSet, compat: Compat, today: date) -> list[SetProblem]:
    out: list[SetProblem] = []
    c = vs.components
    E, W = Severity.ERROR, Severity.WARNING

    need = compat.min_driver(c.cuda)
    if need is None:
        out.append(SetProblem("matrix-cuda-unknown", E,
                              f"set {vs.name}: CUDA {c.cuda} has no minimum-driver fact",
                              "add the CUDA release to matrices/compat/cuda-driver-min.yaml with its source"))
    elif ver(c.driver) < ver(need):
        out.append(SetProblem("matrix-driver-cuda", E,
                              f"set {vs.name}: driver {c.driver} is older than {need}, the minimum for CUDA {c.cuda}",
                              f"raise the driver to {need} or newer, or pin an older CUDA"))

    op = compat.operator(c.gpu_operator)
    if op is None:
        out.append(SetProblem("matrix-operator-unknown", E,
                              f"set {vs.name}: GPU Operator {c.gpu_operator} is not in the compatibility facts",
                              "use a release listed in matrices/compat/gpu-operator.yaml"))
    elif op.k8s_min and op.k8s_max:
        k = minor(c.kubernetes)
        if not (minor(op.k8s_min) <= k <= minor(op.k8s_max)):
            out.append(SetProblem("matrix-operator-k8s", E,
                                  f"set {vs.name}: GPU Operator {c.gpu_operator} supports Kubernetes "
                                  f"{op.k8s_min}-{op.k8s_max}, not {c.kubernetes}",
                                  "choose a GPU Operator release whose range includes the Kubernetes minor"))

    nccl = compat.nccl_release(c.nccl)
    cuda_major = ver(c.cuda).major
    if nccl is None:
        out.append(SetProblem("matrix-nccl-unknown", E,
                              f"set {vs.name}: NCCL {c.nccl} is not in the compatibility facts",
                              "use a release listed in matrices/compat/nccl-cuda.yaml"))
    elif cuda_major not in nccl.cuda_majors:
        majors = ", ".join(str(m) for m in nccl.cuda_majors)
        out.append(SetProblem("matrix-nccl-cuda", E,
                              f"set {vs.name}: NCCL {c.nccl} is built for CUDA {majors}, not CUDA {cuda_major}",
                              "pick an NCCL release with a build for the set's CUDA major"))

    branch = compat.driver_branch(vs.driver_branch)
    if branch is None:
        out.append(SetProblem("matrix-driver-branch-unknown", W,
                              f"set {vs.name}: driver branch {vs.driver_branch} has no lifecycle fact",
                              "add it to matrices/compat/driver-branches.yaml"))
    else:
        if past(branch.eol, today) and vs.status != "retired":
            out.append(SetProblem("matrix-driver-eol", E,
                                  f"set {vs.name}: driver branch {branch.branch} ({branch.type}) reached end of life "
                                  f"in {branch.eol}",
                                  "move to a supported production or long-term branch"))
        if branch.max_cuda_major is not None and cuda_major > branch.max_cuda_major:
            out.append(SetProblem("matrix-driver-cuda-major", E,
                                  f"set {vs.name}: driver branch {branch.branch} supports CUDA up to "
                                  f"{branch.max_cuda_major}.x, not {c.cuda}",
                                  "use a newer driver branch or an older CUDA major"))

    rel = compat.slurm_release(vs.slurm_major)
    if rel is None or not rel.released:
        out.append(SetProblem("matrix-slurm-unknown", E,
                              f"set {vs.name}: Slurm {c.slurm} is not a released major in the compatibility facts",
                              "use a released Slurm major listed in matrices/compat/slurm-releases.yaml"))
    elif past(rel.end_of_support, today) and vs.status != "retired":
        out.append(SetProblem("matrix-slurm-eos", W,
                              f"set {vs.name}: Slurm {rel.major} reached end of support in {rel.end_of_support}",
                              "plan an upgrade to a supported Slurm major"))
    return out
