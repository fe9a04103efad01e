"""Who may do what, per layer, from one declaration (`identity`): the decisions every renderer of
identity takes (which groups may log in to which nodes, who gets sudo, Slurm AdminLevel and
cluster-admin) and the table `clusterdef access` prints.

Least privilege, as rendered:
- nodes: SSSD's `simple` access provider lets in the admin groups and, on a Slurm node group, the
  groups of the tenants whose accounts may run there (with pam_slurm_adopt, only while they have a
  job there); a Kubernetes node group admits administrators only. sudo: admin groups only, from
  a file (sudoers come from `files`, never from the directory).
- Slurm: AdminLevel for admin groups' members, and for nobody else (the sync script demotes);
  tenants' users are users of their tenant's account; PrivateData hides others' jobs when any
  tenant is dedicated.
- Kubernetes: cluster-admin bound to the admin groups only; tenants' groups get `edit` in their
  namespace and nothing cluster-wide; Pod Security never `privileged` for a tenant.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import capacity, privilege, tenancy
from .model import Definition
from .resolve import Resolved

LAYERS = ("nodes", "slurm", "kubernetes")


def admin_groups(d: Definition) -> tuple[str, ...]:
    return d.identity.admin_groups if d.identity else ()


def tenant_groups(d: Definition, tenant: str) -> tuple[str, ...]:
    """The tenant's directory groups (identity.tenant_groups), then its namespace's extra groups."""
    out = list(d.identity.tenant_groups.get(tenant, ())) if d.identity else []
    t = d.tenants[tenant]
    if t.kubernetes:
        out += t.kubernetes.groups
    return tuple(dict.fromkeys(out))


def slurm_tenants_of_group(d: Definition, group: str) -> tuple[str, ...]:
    """Tenants whose Slurm account may run jobs on node group `group` (a partition holding it
    allows the account, or allows every account)."""
    if d.slurm is None or d.nodes[group].control_plane != "slurm":
        return ()
    out = []
    for name, t in d.tenants.items():
        if t.slurm is None:
            continue
        for p in d.slurm.partitions.values():
            if group in p.node_groups and (not p.allow_accounts or t.slurm.account in p.allow_accounts):
                out.append(name)
                break
    return tuple(out)


def login_groups(d: Definition, group: str) -> tuple[str, ...]:
    """Directory groups SSSD lets log in to the nodes of `group`: admins, then the tenants' groups."""
    out = list(admin_groups(d))
    if d.identity:
        for tenant in slurm_tenants_of_group(d, group):
            out += d.identity.tenant_groups.get(tenant, ())
    return tuple(dict.fromkeys(out))


def sssd_file(d: Definition, group: str) -> str:
    """The rendered sssd.conf of a node group (a template when a bind password is referenced)."""
    dirc = d.identity.directory if d.identity else None
    return f"identity/sssd/{group}.conf" + (".j2" if dirc and dirc.bind_dn else "")


def oidc_group(d: Definition, group: str) -> str:
    """The group name as the API server sees it (with the OIDC groups prefix)."""
    prefix = d.identity.oidc.groups_prefix if d.identity and d.identity.oidc else ""
    return prefix + group


@dataclass(frozen=True)
class Grant:
    who: str            # "group:<name>" or "tenant:<name>"
    layer: str
    can: tuple[str, ...]
    files: tuple[str, ...]


def table(resolved: Resolved) -> list[Grant]:
    d = resolved.definition
    ledger = capacity.ledger(d)
    grants: list[Grant] = []
    ident = d.identity
    for g in ident.admin_groups if ident is not None else ():
        assert ident is not None
        admin: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
            ("nodes", (f"log in to every node group ({', '.join(d.nodes)})", "sudo (ALL)"),
             ("identity/sudoers.d/clusterdef-admins", *(sssd_file(d, n) for n in d.nodes if ident.directory)))]
        if d.slurm:
            admin.append(("slurm", (f"AdminLevel={ident.slurm_admin_level}",), ("identity/slurm-users.sh",)))
        if d.kubernetes:
            admin.append(("kubernetes", ("cluster-admin",), ("kubernetes/identity/cluster-admins.yaml",)))
        grants += [Grant(f"group:{g}", layer, can, files) for layer, can, files in admin]
    for name, t in d.tenants.items():
        groups = tenant_groups(d, name)
        who = f"tenant:{name}" + (f" ({', '.join(groups)})" if groups else "")
        nodes = [n for n in d.nodes if name in slurm_tenants_of_group(d, n)]
        if nodes and ident and ident.directory:
            grants.append(Grant(who, "nodes", (f"log in to {', '.join(nodes)} (SSSD access list)",
                                               "no sudo"),
                                tuple(sssd_file(d, n) for n in nodes)))
        cap = ledger[name]
        if t.slurm:
            can = [f"submit as account {t.slurm.account}"
                   + (f" (QOS {', '.join(t.slurm.qos)})" if t.slurm.qos else "")]
            if cap.slurm:
                can.append(f"at most {cap.slurm.limit} GPUs at once (GrpTRES)")
            can.append(f"partitions {', '.join(capacity.slurm_partitions(d, name)) or 'none'}")
            can.append("sees only its own jobs and usage (PrivateData)" if tenancy.private_data(d)
                       else "sees every job in squeue (no tenant is dedicated)")
            slurm_files = ["slurm/accounts.cfg", "slurm/slurm.conf"]
            if ident and ident.slurm_users_from_groups and groups:
                slurm_files.append("identity/slurm-users.sh")
            grants.append(Grant(who, "slurm", tuple(can), tuple(slurm_files)))
        if t.kubernetes:
            approved = privilege.tenant_features(d).get(name, ())
            ps = t.kubernetes.pod_security or ("privileged" if approved else
                                               "restricted" if t.isolation.level == "dedicated" else "baseline")
            k8s_can = [f"edit in namespace {t.kubernetes.namespace}"]
            if cap.kubernetes:
                k8s_can.append(f"at most {cap.kubernetes.limit} GPUs at once (ResourceQuota)")
            if approved:
                k8s_can.append(f"pods with {', '.join(approved)} "
                               f"(approvals {', '.join(privilege.approvals_of_tenant(d, name))})")
            grants.append(Grant(who, "kubernetes", (*k8s_can, f"pods at Pod Security `{ps}`", "nothing cluster-wide"),
                                (f"kubernetes/tenants/{name}.yaml",)
                                + (("kubernetes/admission/privileged-pods.yaml",) if approved else ())))
    for group, level in privilege.admin_levels(d).items():
        if d.slurm:
            grants.append(Grant(f"group:{group}", "slurm", (f"AdminLevel={level} (privileged approval)",),
                                ("identity/slurm-users.sh",)))
    if d.slurm:
        for p in d.slurm.partitions:
            for group in privilege.partition_groups(d, p) if d.slurm.partitions[p].privileged else ():
                grants.append(Grant(f"group:{group}", "slurm",
                                    (f"submit to root-equivalent partition {p} (AllowGroups)",),
                                    ("slurm/slurm.conf",)))
    return grants


def to_json(grants: list[Grant]) -> dict:
    return {"grants": [{"who": g.who, "layer": g.layer, "can": list(g.can), "files": list(g.files)} for g in grants]}


def to_markdown(grants: list[Grant]) -> str:
    out = ["| who | layer | can | file(s) |", "|---|---|---|---|"]
    for g in grants:
        out.append(f"| {g.who} | {g.layer} | {'; '.join(g.can).replace('|', '/')} | "
                   f"{', '.join(f'`{f}`' for f in g.files) or '-'} |")
    return "\n".join(out) + "\n"
