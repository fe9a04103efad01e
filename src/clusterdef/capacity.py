"""The capacity ledger: what each tenant may hold on each control plane, and what each plane can
physically give it. Slurm's accounts (GrpTRES, Fairshare), the Kubernetes ResourceQuota and Kueue
ClusterQueues, `clusterdef access` and validation all read it; nothing here imports a renderer.

Per tenant and plane:
- reachable: GPUs of the node groups the tenant may use there (Slurm: groups of the partitions that
  allow its account, or every account; Kubernetes: groups of its queues' Kueue flavors);
- owned: GPUs of its own node groups there (`isolation.node_groups`);
- exclusive: GPUs of groups nobody else may use there (owned groups, a partition only it may use,
  a flavor only its queues list): what it cannot use of them nobody can;
- holdable: what the plane can give it at once (Slurm: reachable; Kubernetes: its queues' nominal
  quota plus what other queues of their cohort can actually lend, within reachable);
- reserved: the part of its reservation held on that plane (Kubernetes: the nominal quota, never
  lent; Slurm: the rest);
- limit: what it is allowed to hold at once (Kubernetes: ResourceQuota `requests.nvidia.com/gpu`,
  the smallest of reserved + burst and holdable; Slurm: GrpTRES `gres/gpu`, reserved + burst less
  the Kubernetes limit), so both planes together never hold more than reserved + burst, and what
  Kubernetes cannot hold is left to Slurm.

Kueue semantics (kueue v0.19 apis/kueue/v1beta1/clusterqueue_types.go): a ClusterQueue borrows only
within its cohort tree and only the flavors it lists, each flavor on its own (quota is per flavor and
resource), at most `borrowingLimit` over its nominal quota
and only what others do not use of their lendable quota: a queue lends at most `lendingLimit` of its
nominal quota (all of it when unset). So when every other queue of the cohort lends 0 and the cohort
holds no quota of its own, nothing can be borrowed, whatever borrowingLimit says."""

from __future__ import annotations

from dataclasses import dataclass

from . import hostlist, memo, tenancy
from .model import Definition


@dataclass(frozen=True)
class FlavorShare:
    """A ClusterQueue's GPU quota on one flavor as rendered (nominalQuota, borrowingLimit, lendingLimit)."""

    flavor: str
    nominal: int
    borrowing: int | None  # None: the queue is in no cohort (no borrowing or lending limits apply)
    lending: int | None


@dataclass(frozen=True)
class QueueQuota:
    """A ClusterQueue's GPU quota: one share per flavor, in the order Kueue tries them."""

    flavors: tuple[FlavorShare, ...]
    tenant: str | None

    @property
    def nominal(self) -> int:
        return sum(f.nominal for f in self.flavors)

    @property
    def borrowing(self) -> int | None:
        return None if self.flavors[0].borrowing is None else sum(f.borrowing or 0 for f in self.flavors)

    @property
    def lending(self) -> int | None:
        return None if self.flavors[0].lending is None else sum(f.lending or 0 for f in self.flavors)


@dataclass(frozen=True)
class Plane:
    """One tenant's GPUs on one control plane (see the module's docstring for each figure)."""

    groups: tuple[str, ...]
    reachable: int
    owned: int
    exclusive: int
    holdable: int
    reserved: int
    limit: int


@dataclass(frozen=True)
class KubernetesPlane(Plane):
    nominal: int
    """Nominal quota of its queues (the queues whose LocalQueue is in its namespace)."""
    borrowable: int
    """What its queues can borrow at once: their borrowing limits, within what the other queues of
    their cohort trees lend (and the cohorts' own quota) of the same flavor."""


@dataclass(frozen=True)
class TenantCapacity:
    reserved: int
    burst: int
    slurm: Plane | None
    """None: the tenant has no Slurm account, or the cluster no Slurm."""
    kubernetes: KubernetesPlane | None
    """None: the tenant has no namespace, or the cluster no Kubernetes."""

    @property
    def sold(self) -> int:
        return self.reserved + self.burst

    @property
    def holdable(self) -> int:
        """GPUs the planes can give the tenant at once, all planes together."""
        return sum(p.holdable for p in (self.slurm, self.kubernetes) if p is not None)


def group_gpus(d: Definition, group: str) -> int:
    """GPUs of a node group (0 for an unknown group or hardware type: references are checked elsewhere)."""
    g = d.nodes.get(group)
    hw = d.hardware.get(g.hardware) if g is not None else None
    if g is None or hw is None or hw.gpu is None:
        return 0
    return hostlist.count(g.hosts) * hw.gpu.count


def _gpus(d: Definition, groups) -> int:
    return sum(group_gpus(d, g) for g in groups)


def flavor_gpus(d: Definition, flavor: str) -> int:
    k = d.kubernetes
    if k is None or flavor not in k.kueue.flavors:
        return 0
    return _gpus(d, k.kueue.flavors[flavor].node_groups)


# --------------------------------------------------------------------------- Kueue

def queue_tenants(d: Definition) -> dict[str, str]:
    """Kueue queue -> the tenant whose namespace has its LocalQueue (first tenant listing it)."""
    out: dict[str, str] = {}
    for tname, t in d.tenants.items():
        if t.kubernetes:
            for q in t.kubernetes.queues:
                out.setdefault(q, tname)
    return out


def queue_quotas(d: Definition) -> dict[str, QueueQuota]:
    """Nominal, borrowing and lending GPUs per queue and flavor.

    A tenant's reserved GPUs are spread over its queues in the order it lists them, and over each
    queue's flavors in order; the reserved part of a flavor's quota is never lent (lendingLimit =
    nominal - reserved part) and a queue may borrow up to the tenant's burst GPUs of each flavor.
    Explicit borrowing/lending limits in the definition win. Limits only apply to queues in a cohort."""
    if d.kubernetes is None:
        return {}
    queues = d.kubernetes.kueue.queues
    owner = queue_tenants(d)
    reserved_left = {t: d.tenants[t].quota.reserved_gpus for t in set(owner.values())}
    out: dict[str, QueueQuota] = {}
    for tname, t in d.tenants.items():
        if not t.kubernetes:
            continue
        for qname in t.kubernetes.queues:
            if qname not in queues or owner.get(qname) != tname or qname in out:
                continue
            q = queues[qname]
            shares = []
            for fq in q.flavor_quotas():
                part = min(fq.nominal_gpus, reserved_left[tname])
                reserved_left[tname] -= part
                borrow = fq.borrowing_limit_gpus if fq.borrowing_limit_gpus is not None else t.quota.burst_gpus
                lend = fq.lending_limit_gpus if fq.lending_limit_gpus is not None else fq.nominal_gpus - part
                shares.append(FlavorShare(fq.flavor, fq.nominal_gpus, borrow if q.cohort else None,
                                          min(lend, fq.nominal_gpus) if q.cohort else None))
            out[qname] = QueueQuota(tuple(shares), tname)
    for qname, q in queues.items():
        if qname not in out:  # no tenant: nothing of it is reserved, it borrows nothing unless told
            out[qname] = QueueQuota(tuple(
                FlavorShare(fq.flavor, fq.nominal_gpus,
                            (fq.borrowing_limit_gpus or 0) if q.cohort else None,
                            (fq.lending_limit_gpus if fq.lending_limit_gpus is not None else fq.nominal_gpus)
                            if q.cohort else None)
                for fq in q.flavor_quotas()), None)
    return out


def flavor_nominal(d: Definition) -> dict[str, list[tuple[str, int, int]]]:
    """Flavor -> (queue, index of the flavor in the queue's list, nominal GPUs) of every queue quota on
    it: what the flavor's nodes must hold."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    if d.kubernetes is None:
        return out
    for qname, q in d.kubernetes.kueue.queues.items():
        for i, fq in enumerate(q.flavor_quotas()):
            out.setdefault(fq.flavor, []).append((qname, i, fq.nominal_gpus))
    return out


def cohort_root(d: Definition, name: str) -> str:
    """The root of a cohort's tree (parent cycles are refused by validation; stop at the first repeat)."""
    cohorts = d.kubernetes.kueue.cohorts if d.kubernetes else {}
    seen = set()
    while (parent := cohorts[name].parent if name in cohorts else None) and name not in seen:
        seen.add(name)
        name = parent
    return name


def cohort_spare(d: Definition) -> dict[str, dict[str, int]]:
    """Root cohort -> flavor -> GPUs of the flavor that no queue holds: the root cohort's own quota
    (rendered on its Cohort), which its queues may borrow. Only where every queue on the flavor is in
    that one tree."""
    if d.kubernetes is None:
        return {}
    kq = d.kubernetes.kueue
    spare: dict[str, dict[str, int]] = {}
    on = flavor_nominal(d)
    for fname in kq.flavors:
        users = [(kq.queues[qname], n) for qname, _, n in on.get(fname, [])]
        roots = {cohort_root(d, q.cohort) if q.cohort else None for q, _ in users}
        left = flavor_gpus(d, fname) - sum(n for _, n in users)
        root = roots.pop() if len(roots) == 1 else None
        if root is not None and left > 0:
            spare.setdefault(root, {})[fname] = left
    return spare


def _borrowable(d: Definition, tenant: str, quotas: dict[str, QueueQuota], spare) -> int:
    """What the tenant's queues can borrow at once, per (cohort tree, flavor): the sum of their
    borrowing limits, within what other tenants' queues of that tree lend of that flavor plus the
    tree's own quota of it."""
    kq = d.kubernetes.kueue if d.kubernetes else None
    if kq is None:
        return 0
    wants: dict[tuple[str, str], int] = {}
    lenders: dict[tuple[str, str], int] = {}  # (tree, flavor) -> what other tenants' queues lend
    for qname, qq in quotas.items():
        q = kq.queues[qname]
        if not q.cohort:
            continue
        for share in qq.flavors:
            key = (cohort_root(d, q.cohort), share.flavor)
            if qq.tenant == tenant and share.borrowing:
                wants[key] = wants.get(key, 0) + share.borrowing
            elif qq.tenant != tenant and share.lending:
                lenders[key] = lenders.get(key, 0) + share.lending
    return sum(min(want, lenders.get((root, flavor), 0) + spare.get(root, {}).get(flavor, 0))
               for (root, flavor), want in wants.items())


# --------------------------------------------------------------------------- who may use what

def slurm_partitions(d: Definition, tenant: str) -> tuple[str, ...]:
    """Partitions the tenant's account may submit to (AllowAccounts names it, or is empty)."""
    t = d.tenants[tenant]
    if d.slurm is None or t.slurm is None:
        return ()
    acct = t.slurm.account
    return tuple(p for p, part in d.slurm.partitions.items() if not part.allow_accounts or acct in part.allow_accounts)


def _slurm_users(d: Definition) -> dict[str, set[str]]:
    """Slurm node group -> who may run there: tenants by name, `*` for a partition open to every
    account, `account:<a>` for an allowed account no tenant maps to."""
    if d.slurm is None:
        return {}
    by_account = {t.slurm.account: n for n, t in d.tenants.items() if t.slurm}
    out: dict[str, set[str]] = {}
    for part in d.slurm.partitions.values():
        users = {by_account.get(a, f"account:{a}") for a in part.allow_accounts} or {"*"}
        for g in part.node_groups:
            out.setdefault(g, set()).update(users)
    return out


def _kubernetes_users(d: Definition, quotas: dict[str, QueueQuota]) -> dict[str, set[str]]:
    """Kubernetes node group -> the tenants (or `queue:<q>` for a queue of no tenant) whose queues'
    flavors hold it."""
    if d.kubernetes is None:
        return {}
    kq = d.kubernetes.kueue
    out: dict[str, set[str]] = {}
    for qname, q in kq.queues.items():
        who = quotas[qname].tenant or f"queue:{qname}"
        for fname in q.flavor_names():
            for g in kq.flavors[fname].node_groups if fname in kq.flavors else ():
                out.setdefault(g, set()).add(who)
    return out


def _on(d: Definition, groups, plane: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(g for g in groups if g in d.nodes and d.nodes[g].control_plane == plane))


# --------------------------------------------------------------------------- the ledger

@dataclass(frozen=True)
class _Shared:
    """What every tenant's figures read, computed once per definition."""

    quotas: dict[str, QueueQuota]
    spare: dict[str, dict[str, int]]
    slurm_users: dict[str, set[str]]
    kubernetes_users: dict[str, set[str]]


def _shared(d: Definition) -> _Shared:
    quotas = queue_quotas(d)
    return _Shared(quotas, cohort_spare(d), _slurm_users(d), _kubernetes_users(d, quotas))


def _kubernetes(d: Definition, tenant: str, s: _Shared) -> KubernetesPlane | None:
    t = d.tenants[tenant]
    if t.kubernetes is None or d.kubernetes is None:
        return None
    groups = _on(d, tenancy.tenant_pod_groups(d, tenant), "kubernetes")
    reachable = _gpus(d, groups)
    nominal = sum(qq.nominal for qq in s.quotas.values() if qq.tenant == tenant)
    borrowable = _borrowable(d, tenant, s.quotas, s.spare)
    holdable = min(reachable, nominal + borrowable)
    limit = min(t.quota.reserved_gpus + t.quota.burst_gpus, holdable)
    return KubernetesPlane(
        groups=groups, reachable=reachable, owned=_gpus(d, tenancy.owned_groups(d, tenant, "kubernetes")),
        exclusive=_gpus(d, (g for g in groups if s.kubernetes_users.get(g) == {tenant})),
        holdable=holdable, reserved=min(t.quota.reserved_gpus, nominal, holdable), limit=limit,
        nominal=nominal, borrowable=borrowable)


def _slurm(d: Definition, tenant: str, s: _Shared, k8s: KubernetesPlane | None) -> Plane | None:
    t = d.tenants[tenant]
    if t.slurm is None or d.slurm is None:
        return None
    groups = _on(d, (g for p in slurm_partitions(d, tenant) for g in d.slurm.partitions[p].node_groups), "slurm")
    reachable = _gpus(d, groups)
    sold = t.quota.reserved_gpus + t.quota.burst_gpus
    return Plane(
        groups=groups, reachable=reachable, owned=_gpus(d, tenancy.owned_groups(d, tenant, "slurm")),
        exclusive=_gpus(d, (g for g in groups if s.slurm_users.get(g) == {tenant})),
        holdable=reachable, reserved=t.quota.reserved_gpus - (k8s.reserved if k8s else 0),
        limit=max(0, sold - (k8s.limit if k8s else 0)))


def _tenant(d: Definition, tenant: str, s: _Shared) -> TenantCapacity:
    t = d.tenants[tenant]
    k8s = _kubernetes(d, tenant, s)
    return TenantCapacity(t.quota.reserved_gpus, t.quota.burst_gpus, _slurm(d, tenant, s, k8s), k8s)


def ledger(d: Definition) -> dict[str, TenantCapacity]:
    """Every tenant's capacity, in definition order (computed once per definition: memo.py)."""
    def compute() -> dict[str, TenantCapacity]:
        s = _shared(d)
        return {name: _tenant(d, name, s) for name in d.tenants}
    return dict(memo.once(d, "capacity.ledger", compute))


def of(d: Definition, tenant: str) -> TenantCapacity:
    """One tenant's capacity (from the definition's ledger, computed once)."""
    return ledger(d)[tenant]


def plane_gpus(d: Definition, plane: str) -> int:
    """GPUs of a control plane's worker groups."""
    return _gpus(d, d.groups_of(plane))
