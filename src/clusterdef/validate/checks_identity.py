"""Identity and least privilege: administrators and tenants are separate groups, every identity
channel is TLS, the bind password is a reference, SlurmUser is never root, and no tenant may run
privileged pods."""

from __future__ import annotations

from typing import Iterable

from .. import privilege
from ..errors import Finding, error
from .checks_refs import _ref
from .registry import Context, check


@check("identity")
def identity(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    ident = d.identity
    if ident is None:
        return
    admins = set(ident.admin_groups)
    for tenant, groups in ident.tenant_groups.items():
        if tenant not in d.tenants:
            yield _ref("ref-tenant", ("identity", "tenant_groups", tenant), "tenant", tenant, d.tenants, "tenants")
        for i, g in enumerate(groups):
            if g in admins:
                yield error("tenant-group-is-admin", ("identity", "tenant_groups", tenant, i),
                            f"group `{g}` is both an admin group and tenant {tenant}'s user group",
                            "administrators and tenants' users must be separate groups: every member of an "
                            "admin group gets sudo, Slurm AdminLevel and cluster-admin; give the tenant its own group")
    owners: dict[str, str] = {}
    for tenant, groups in ident.tenant_groups.items():
        for i, g in enumerate(groups):
            if g in owners and owners[g] != tenant:
                yield error("tenant-group-shared", ("identity", "tenant_groups", tenant, i),
                            f"group `{g}` is a user group of tenants {owners[g]} and {tenant}",
                            "each directory group belongs to one tenant, so its members get one tenant's "
                            "account, namespace and nodes; split the group")
            owners.setdefault(g, tenant)
    if ident.oidc is not None and not ident.oidc.issuer.startswith("https://"):
        yield error("oidc-issuer-not-tls", ("identity", "oidc", "issuer"),
                    f"the OIDC issuer `{ident.oidc.issuer}` is not https",
                    "the API server only accepts an https issuer (its tokens would travel in clear); "
                    "write the https URL from the provider's discovery document")
    dirc = ident.directory
    if dirc is not None:
        for i, uri in enumerate(dirc.uris):
            if uri.startswith("ldap://") and not dirc.start_tls:
                yield error("ldap-without-tls", ("identity", "directory", "uris", i),
                            f"`{uri}` is plain LDAP without StartTLS",
                            "use ldaps:// or set `start_tls: true`: the bind password and every "
                            "user's password would cross the network in clear")
        if dirc.bind_dn is not None and dirc.bind_password_ref is None:
            yield error("ldap-bind-secret-missing", ("identity", "directory", "bind_dn"),
                        "a bind DN is given without its password reference",
                        "add `bind_password_ref: <purpose>` and the purpose under `secrets.refs` (an Ansible "
                        "Vault variable); drop bind_dn if the directory allows anonymous reads")
        if dirc.bind_password_ref is not None and dirc.bind_password_ref not in d.secrets.refs:
            yield error("ref-secret", ("identity", "directory", "bind_password_ref"),
                        f"secret purpose `{dirc.bind_password_ref}` is not under secrets.refs",
                        f"add `secrets: {{refs: {{{dirc.bind_password_ref}: vault_{dirc.bind_password_ref}}}}}` "
                        "and the variable to your vault file")


@check("least-privilege")
def least_privilege(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    if d.slurm is not None:
        user = d.slurm.passthrough.get("SlurmUser")
        if isinstance(user, str) and user.strip() in ("root", "0"):
            yield error("slurm-user-root", ("slurm", "passthrough", "SlurmUser"),
                        "SlurmUser is root",
                        "slurmctld runs as SlurmUser; as root a flaw in it is a root compromise of the "
                        "controller. Remove the key (clusterdef sets `slurm`)")
    approved = privilege.tenant_features(d)
    for name, t in d.tenants.items():
        if t.kubernetes is not None and t.kubernetes.pod_security == "privileged" and not approved.get(name):
            yield error("tenant-privileged-pods", ("tenants", name, "kubernetes", "pod_security"),
                        f"tenant {name}'s namespace would admit privileged pods, and no `privileged` approval "
                        "names it",
                        "a privileged pod is root on the node and sees every tenant's GPUs and files; use "
                        "`baseline` or `restricted`, run privileged agents in platform namespaces, or record the "
                        "approval (privileged.<name>: approver, reference, kubernetes.tenants and features)")
