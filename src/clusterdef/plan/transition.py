"""The set change: component layers old -> new and the compatibility of the transition
(Slurm upgrade windows, Kubernetes minor steps and kubelet skew, driver vs CUDA), all
read from matrices/compat through clusterdef.matrix.compat.Compat."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..matrix.compat import Compat, minor, ver
from ..matrix.model import ValidatedSet
from ..render.slurm import transition as slurm_files
from ..resolve import Resolved

# Rollout order: one layer of change at a time.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("firmware", ("firmware", "mft")),  # MFT first: the firmware role flashes with its mlxfwmanager
    ("driver", ("driver", "doca")),  # DOCA-OFED is kernel modules: a driver-layer change, not firmware
    ("cuda-nccl", ("cuda", "nccl")),
    ("container-toolkit", ("container_toolkit",)),
    ("kubernetes", ("kubernetes", "gpu_operator")),
    ("slurm", ("slurm",)),
)
LAYER_OF = {c: layer for layer, comps in LAYERS for c in comps}

LIVE = "live reconfigure"
RESTART = "daemon restart"
RELOAD = "drain + driver reload"  # the GPU Operator's upgrade controller, node by node
REBOOT = "drain + reboot"
REFLASH = "reflash + power cycle"
NONE = "no runtime change"
SEVERITY = {NONE: 0, LIVE: 1, RESTART: 2, RELOAD: 3, REBOOT: 3, REFLASH: 4}
ORDER = (REFLASH, REBOOT, RELOAD, RESTART, LIVE, NONE)  # worst first

# The class of a component's change on the nodes it reaches; container_toolkit and gpu_operator
# depend on the node (containerd or not; who owns the driver): plan/__init__.py splits them.
COMPONENT_DISRUPTION = {
    "driver": REBOOT, "cuda": REBOOT, "nccl": REBOOT, "doca": REBOOT,
    "mft": NONE,  # a tools package: nothing running uses it between flashes
    "container_toolkit": RESTART, "kubernetes": RESTART, "gpu_operator": RESTART, "slurm": RESTART,
}


@dataclass
class Problem:
    code: str
    message: str
    hint: str = ""

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message, "hint": self.hint}


@dataclass
class SlurmHop:
    version: str
    major: str
    order: tuple[str, ...] = ("slurmdbd", "slurmctld", "slurmd")


@dataclass
class Transition:
    slurm: list[SlurmHop] = field(default_factory=list)
    apiserver: list[str] = field(default_factory=list)  # each minor the API server passes through
    kubelet: list[str] = field(default_factory=list)  # versions kubelets move to, after the API server
    checks: list[str] = field(default_factory=list)  # human-readable passed checks
    refusals: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "slurm_path": [{"version": h.version, "major": h.major, "order": list(h.order)} for h in self.slurm],
            "apiserver_path": list(self.apiserver),
            "kubelet_path": list(self.kubelet),
            "checks": list(self.checks),
            "refusals": [p.to_json() for p in self.refusals],
            "warnings": [p.to_json() for p in self.warnings],
        }


def _major(version: str) -> str:
    return ".".join(version.split(".")[:2])


def slurm_path(compat: Compat, old: str, new: str) -> tuple[list[SlurmHop], list[Problem]]:
    """Hops from Slurm `old` to `new`. Each hop must start from a major in the target major's
    `compatible_prior` list; when the jump is wider, step through the furthest released
    intermediate major (at its newest maintenance release) that accepts the current one."""
    a, b = _major(old), _major(new)
    if old == new:
        return [], []
    if ver(b) < ver(a):
        return [], [Problem("slurm-downgrade", f"Slurm {old} -> {new} is a downgrade of the major release",
                            "Slurm does not support downgrading slurmdbd/slurmctld state; restore from the "
                            "pre-upgrade snapshot instead")]
    if a == b:
        return [SlurmHop(new, b)], []
    hops: list[SlurmHop] = []
    here = a
    for _ in range(20):
        target = compat.slurm_release(b)
        if target is None:
            return hops, [Problem("slurm-unknown-major", f"Slurm {b} is not in matrices/compat/slurm-releases.yaml",
                                  "add the release with its compatible_prior list")]
        if here in target.compatible_prior:
            hops.append(SlurmHop(new, b))
            return hops, []
        # furthest released major between here and b that accepts `here`
        candidates = [r for r in compat.slurm if r.released and r.latest and ver(here) < ver(r.major) < ver(b)
                      and here in r.compatible_prior]
        if not candidates:
            return hops, [Problem("slurm-no-path", f"no upgrade path from Slurm {here} to {b}: no released major "
                                  f"accepts {here}",
                                  "add intermediate releases to matrices/compat/slurm-releases.yaml")]
        step = max(candidates, key=lambda r: ver(r.major))
        hops.append(SlurmHop(str(step.latest), step.major))
        here = step.major
    return hops, [Problem("slurm-no-path", f"no upgrade path from Slurm {a} to {b}", "")]  # pragma: no cover


def kubernetes_hop_problem(compat: Compat, old: str, new: str) -> Problem | None:
    """A single API server upgrade old -> new: refused when it skips a minor or goes back."""
    (oa, ob), (na, nb) = minor(old), minor(new)
    if (na, nb) < (oa, ob):
        return Problem("k8s-downgrade", f"Kubernetes {old} -> {new} downgrades the API server minor",
                       "Kubernetes does not support minor downgrades; restore the etcd snapshot taken before "
                       "the upgrade instead")
    if na != oa or (nb - ob > 1 and not compat.kubernetes.apiserver_skip_minor):
        return Problem("k8s-skip-minor", f"Kubernetes {old} -> {new} skips minor release(s): the API server "
                       "must be upgraded one minor at a time",
                       "step through " + ", ".join(f"{oa}.{m}" for m in range(ob + 1, nb)) if na == oa else
                       "step through every minor in between")
    return None


def kubernetes_path(compat: Compat, old: str, new: str) -> tuple[list[str], list[str], list[Problem]]:
    """(API server minors in order, kubelet versions in order, problems). The API server never
    skips a minor; kubelets follow only once the API server is at the target, and move in
    steps no larger than the skew policy allows (they may never be ahead of the API server)."""
    if minor(old) == minor(new):
        return ([new], [new], []) if old != new else ([], [], [])
    (oa, ob), (na, nb) = minor(old), minor(new)
    if (na, nb) < (oa, ob) or na != oa:
        p = kubernetes_hop_problem(compat, old, new)
        return [], [], [p] if p else []
    api = [f"{oa}.{m}" for m in range(ob + 1, nb)] + [new]
    for prev, nxt in zip([old] + api, api):
        p = kubernetes_hop_problem(compat, prev, nxt)
        if p:  # pragma: no cover - the path is built one minor at a time
            return [], [], [p]
    skew = compat.kubernetes.kubelet_max_minor_older
    kubelet: list[str] = []
    here = ob
    while here < nb:
        here = min(nb, here + skew)
        kubelet.append(new if here == nb else f"{oa}.{here}")
    return api, kubelet, []


def transition(compat: Compat, old: ValidatedSet, new: ValidatedSet, has_slurm: bool, has_k8s: bool) -> Transition:
    t = Transition()
    oc, nc = old.components, new.components
    if has_slurm:
        t.slurm, probs = slurm_path(compat, oc.slurm, nc.slurm)
        t.refusals += probs
        if t.slurm:
            window = compat.slurm_window(_major(nc.slurm))
            if len(t.slurm) > 1:
                t.checks.append(f"Slurm {oc.slurm} -> {nc.slurm} crosses more majors than the upgrade window "
                                f"({window}) allows: stepped through "
                                + " -> ".join(h.version for h in t.slurm))
            else:
                t.checks.append(f"Slurm {oc.slurm} -> {nc.slurm} is within the upgrade window "
                                f"({window} prior majors); slurmdbd, then slurmctld, then slurmd")
    if has_k8s:
        api, kubelet, probs = kubernetes_path(compat, oc.kubernetes, nc.kubernetes)
        t.apiserver, t.kubelet = api, kubelet
        t.refusals += probs
        if api:
            t.checks.append(f"Kubernetes API server {oc.kubernetes} -> " + " -> ".join(api)
                            + " (one minor at a time); kubelets follow: " + " -> ".join(kubelet))
        for m in api:
            for label, tag in (("running", oc.gpu_operator), ("target", nc.gpu_operator)):
                op = compat.operator(tag)
                if op is None or not (op.k8s_min and op.k8s_max):
                    continue
                if not (minor(op.k8s_min) <= minor(m) <= minor(op.k8s_max)):
                    t.warnings.append(Problem(
                        "k8s-operator-range", f"GPU Operator {tag} ({label}) supports Kubernetes "
                        f"{op.k8s_min}-{op.k8s_max}, not {m} reached during the upgrade",
                        "upgrade the GPU Operator before (or with) that API server step"))
    need = compat.min_driver(nc.cuda)
    if need is None:
        t.refusals.append(Problem("cuda-unknown", f"CUDA {nc.cuda} has no minimum-driver fact",
                                  "add it to matrices/compat/cuda-driver-min.yaml"))
    elif ver(nc.driver) < ver(need):
        t.refusals.append(Problem("driver-cuda", f"driver {nc.driver} is older than {need}, the minimum for "
                                  f"CUDA {nc.cuda}", "raise the driver in the target set"))
    else:
        t.checks.append(f"driver {nc.driver} satisfies CUDA {nc.cuda} (needs >= {need})")
    # during the rollout the old CUDA userspace runs on the new driver (driver layer first)
    old_need = compat.min_driver(oc.cuda)
    if old_need and ver(nc.driver) >= ver(old_need) and oc.cuda != nc.cuda:
        t.checks.append(f"driver {nc.driver} also runs the old CUDA {oc.cuda} between the driver and "
                        "CUDA layers")
    return t


def slurm_transition(resolved: Resolved, old_version: str) -> dict | None:
    """When the Slurm major changes: the files in force until the last wave (every daemon from
    `old_version` to the set's Slurm parses them) and what they hold back, with the reason; the
    final files bring those after the last wave. None unless the major goes up, or without Slurm."""
    new_version = resolved.set.components.slurm
    if ver(_major(new_version)) <= ver(_major(old_version)):  # the same major, or a downgrade (refused)
        return None
    files = slurm_files.transition_files(resolved, old_version)
    if not files:
        return None
    return {"from": old_version, "to": new_version,
            "held_back": [h.to_json() for h in slurm_files.held_back(resolved, old_version)],
            "files": files}
