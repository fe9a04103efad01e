"""Identity target: the directory read through SSSD on every node, administrators separate from
users at every layer (access.py decides who may do what).

    identity/sssd/<node group>.conf[.j2]   sssd.conf for the group's nodes: the directory, and the
                                           `simple` access provider admitting only the admin groups
                                           and the groups of tenants that may run there (`.j2` when a
                                           bind password is referenced: the role resolves the vault
                                           variable on the node, like slurmdbd.conf.j2)
    identity/nsswitch.conf                 passwd/group/shadow from files, then SSSD; sudoers from files only
    identity/sudoers.d/clusterdef-admins   sudo for the admin groups, nobody else
    identity/slurm-users.sh                (Slurm) AdminLevel for admin groups' members and nobody else;
                                           tenant groups' members as users of the tenant's account
                                           (`slurm_users_from_groups`)
The Kubernetes side (cluster-admin binding, the API server's OIDC configuration) is in the
kubernetes target (kubernetes/identity/). Pure: no network, no directory."""

from __future__ import annotations

from ... import access, privilege
from ...model.identity import Directory, Identity
from ...quoting import ini, shell, sudoers_group
from ...resolve import Resolved

ROOT = "identity"


def _domain(resolved: Resolved, dirc: Directory) -> str:
    return dirc.domain or resolved.definition.network.provisioning.domain


def _host(uri: str) -> str:
    return uri.split("://", 1)[1].rstrip("/").split(":")[0]


def sssd_conf(resolved: Resolved, dirc: Directory, group: str) -> str:
    d = resolved.definition
    dom = _domain(resolved, dirc)
    allow = access.login_groups(d, group)
    out = [f"# SSSD for node group {group} of cluster {d.cluster.name}; rendered by clusterdef.\n",
           "# Only these groups may log in: " + ", ".join(allow) + ".\n",
           "[sssd]\n", "config_file_version = 2\n", "services = nss, pam\n", f"domains = {ini(dom)}\n", "\n",
           "[nss]\n", "filter_users = root\n", "filter_groups = root\n", "\n",
           "[pam]\n", "\n",
           f"[domain/{ini(dom)}]\n"]
    kind = dirc.kind
    out += [f"id_provider = {kind}\n", f"auth_provider = {kind}\n", f"chpass_provider = {kind}\n",
            "access_provider = simple\n",
            "simple_allow_groups = " + ", ".join(ini(g) for g in allow) + "\n"]
    if kind == "ldap":
        out.append("ldap_uri = " + ", ".join(ini(u) for u in dirc.uris) + "\n")
        out.append(f"ldap_schema = {dirc.ldap_schema}\n")
    elif kind == "ipa":
        out.append(f"ipa_domain = {ini(dom)}\n")
        out.append("ipa_server = " + ", ".join(ini(_host(u)) for u in dirc.uris) + "\n")
    else:
        out.append(f"ad_domain = {ini(dom)}\n")
        out.append("ad_server = " + ", ".join(ini(_host(u)) for u in dirc.uris) + "\n")
    out.append(f"ldap_search_base = {ini(dirc.base_dn)}\n")
    if dirc.user_base_dn:
        out.append(f"ldap_user_search_base = {ini(dirc.user_base_dn)}\n")
    if dirc.group_base_dn:
        out.append(f"ldap_group_search_base = {ini(dirc.group_base_dn)}\n")
    out += [f"ldap_tls_cacert = {ini(dirc.tls_ca)}\n", "ldap_tls_reqcert = demand\n"]
    if dirc.start_tls:
        out.append("ldap_id_use_start_tls = true\n")
    if dirc.bind_dn and dirc.bind_password_ref:  # ldap-bind-secret-missing refuses a DN without its ref
        var = d.secrets.refs[dirc.bind_password_ref]
        out += [f"ldap_default_bind_dn = {ini(dirc.bind_dn)}\n", "ldap_default_authtok_type = password\n",
                # the vault variable's name only; the role resolves it on the node (no_log)
                f"ldap_default_authtok = {{{{ {var} }}}}\n"]
    out += ["cache_credentials = true\n", "enumerate = false\n"]
    return "".join(out)


NSSWITCH = """\
# Name services for cluster {cluster}; rendered by clusterdef.
# Local files first, then the directory through SSSD. sudoers come from files only: the directory
# cannot grant sudo (identity/sudoers.d/clusterdef-admins is the only rule).
passwd:         files sss
group:          files sss
shadow:         files sss
gshadow:        files
hosts:          files dns
networks:       files
protocols:      db files
services:       db files
ethers:         db files
rpc:            db files
netgroup:       files sss
sudoers:        files
"""


def sudoers(resolved: Resolved, ident: Identity) -> str:
    d = resolved.definition
    lines = [f"# Administrators of cluster {d.cluster.name}: the only sudo rule clusterdef renders.\n",
             "# Install with `visudo -cf`; tenants' users get no sudo anywhere.\n"]
    lines += [f"{sudoers_group(g)} ALL=(ALL:ALL) ALL\n" for g in ident.admin_groups]
    return "".join(lines)


def slurm_users(resolved: Resolved, ident: Identity) -> str:
    d = resolved.definition
    out = ["#!/bin/sh\n",
           f"# Slurm users and administrators of cluster {d.cluster.name} from directory groups; rendered by clusterdef.\n",
           "# Run on a host that resolves the directory (SSSD) as a Slurm operator. Idempotent: run it\n",
           "# after directory changes (the role does, at apply).\n",
           "set -eu\n",
           "SACCTMGR=${SACCTMGR:-sacctmgr}\n",
           f"LEVEL={shell(ident.slurm_admin_level)}\n",
           "# members of a group, one per line; names that are not POSIX user names are refused, never run\n",
           "members() {\n",
           "  getent group \"$1\" | cut -d: -f4 | tr ',' '\\n' | while IFS= read -r u; do\n",
           "    case \"$u\" in\n",
           "      '') ;;\n",
           "      [a-z_]*) case \"$u\" in *[!a-z0-9_.-]*) echo \"clusterdef: skipping user name $(printf %s \"$u\" | od -An -c | tr -s ' ') of group $1\" >&2 ;; *) printf '%s\\n' \"$u\" ;; esac ;;\n",
           "      *) echo \"clusterdef: skipping a user name of group $1 that does not start with a letter\" >&2 ;;\n",
           "    esac\n",
           "  done\n",
           "}\n",
           "has_user() { [ -n \"$($SACCTMGR -nP show user where name=\"$1\" format=user)\" ]; }\n",
           "has_assoc() { [ -n \"$($SACCTMGR -nP show assoc where user=\"$1\" account=\"$2\" format=user)\" ]; }\n",
           "admins=$(mktemp)\n",
           "approved=$(mktemp)\n",
           "trap 'rm -f \"$admins\" \"$approved\"' EXIT\n"]
    for g in ident.admin_groups:
        out.append(f"members {shell(g)} >>\"$admins\"\n")
    for g, level in privilege.admin_levels(d).items():  # `privileged` approvals; the admin groups' level wins
        out += [f"# privileged approval ({privilege.approved_by(d, g)}): members of {g} get AdminLevel={level}\n",
                f"members {shell(g)} | while IFS= read -r u; do\n",
                "  grep -qxF \"$u\" \"$admins\" && continue\n",
                "  has_user \"$u\" || $SACCTMGR -i add user name=\"$u\" account=root >/dev/null\n",
                f"  $SACCTMGR -i modify user where name=\"$u\" set adminlevel={shell(level)} >/dev/null || true\n",
                "  printf '%s\\n' \"$u\" >>\"$approved\"\n",
                "done\n"]
    out += ["# administrators get AdminLevel; anyone else holding one (but the approved above) is demoted\n",
            "sort -u \"$admins\" | while IFS= read -r u; do\n",
            "  has_user \"$u\" || $SACCTMGR -i add user name=\"$u\" account=root >/dev/null\n",
            "  $SACCTMGR -i modify user where name=\"$u\" set adminlevel=\"$LEVEL\" >/dev/null || true\n",
            "done\n",
            "$SACCTMGR -nP show user format=user,adminlevel | while IFS='|' read -r u level; do\n",
            "  case \"$level\" in None|'') continue ;; esac\n",
            "  case \"$u\" in root|slurm) continue ;; esac\n",
            "  grep -qxF \"$u\" \"$admins\" || grep -qxF \"$u\" \"$approved\" || $SACCTMGR -i modify user where name=\"$u\" set adminlevel=None >/dev/null\n",
            "done\n"]
    if ident.slurm_users_from_groups:
        for tenant, groups in ident.tenant_groups.items():
            t = d.tenants.get(tenant)
            if t is None or t.slurm is None or not groups:
                continue
            acct = shell(t.slurm.account)
            out.append(f"# tenant {tenant}: members of {', '.join(groups)} are users of account {t.slurm.account}\n")
            out.append("{ " + " ".join(f"members {shell(g)};" for g in groups) + " } | sort -u | while IFS= read -r u; do\n")
            out.append(f"  has_assoc \"$u\" {acct} || $SACCTMGR -i add user name=\"$u\" account={acct} >/dev/null\n")
            out.append("done\n")
    return "".join(out)


def render(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    ident = d.identity
    if ident is None:
        return {}
    out = {f"{ROOT}/sudoers.d/clusterdef-admins": sudoers(resolved, ident)}
    if ident.directory is not None:
        out[f"{ROOT}/nsswitch.conf"] = NSSWITCH.format(cluster=d.cluster.name)
        for group in d.nodes:
            out[access.sssd_file(d, group)] = sssd_conf(resolved, ident.directory, group)
    if d.slurm is not None:
        out[f"{ROOT}/slurm-users.sh"] = slurm_users(resolved, ident)
    return out


# Where roles/identity and the images put each rendered file, with its mode. sssd refuses a
# sssd.conf readable by others; sudo refuses a sudoers file writable by others.
SSSD_CONF = "/etc/sssd/sssd.conf"
NSSWITCH_CONF = "/etc/nsswitch.conf"
SUDOERS = "/etc/sudoers.d/clusterdef-admins"
# Debian's packages for SSSD logins: libpam-sss's pam-auth-update profile adds pam_sss to the
# common-* PAM stacks when it is installed, so clusterdef renders no PAM file of its own.
PACKAGES = ("sssd", "libnss-sss", "libpam-sss", "sudo")


def packages(d) -> tuple[str, ...]:
    """The packages the identity files need: SSSD's with a directory, sudo in any case."""
    if d.identity is None:
        return ()
    return PACKAGES if d.identity.directory is not None else ("sudo",)


def node_files(resolved: Resolved) -> dict[str, list[dict]]:
    """Per node group: [{dest, mode, kind, content}] of every identity file its nodes need. kind is
    `sssd` (restart sssd; `secret` too when it holds the bind password's vault variable), `nss` or
    `sudoers` (validated with visudo). Contents are `Unsafe`: copied as rendered, never templated."""
    from ..yamlout import Unsafe

    d = resolved.definition
    tree = render(resolved)
    if d.identity is None:
        return {}
    common: list[dict] = [{"dest": SUDOERS, "mode": "0440", "kind": "sudoers", "content": Unsafe(tree[f"{ROOT}/sudoers.d/clusterdef-admins"])}]
    if d.identity.directory is not None:
        common.append({"dest": NSSWITCH_CONF, "mode": "0644", "kind": "nss", "content": Unsafe(tree[f"{ROOT}/nsswitch.conf"])})
    out: dict[str, list[dict]] = {}
    for group in d.nodes:
        files = list(common)
        if d.identity.directory is not None:
            rel = access.sssd_file(d, group)
            files.insert(0, {"dest": SSSD_CONF, "mode": "0600", "kind": "sssd", "secret": rel.endswith(".j2"),
                             "content": Unsafe(tree[rel])})
        out[group] = [{**f, "secret": f.get("secret", False)} for f in files]
    return out


def image_files(resolved: Resolved, image: str) -> dict[str, dict]:
    """dest -> file of what image `image` carries: the identity files that are the same on every node
    group booting it and hold no secret (the bind password is resolved on the node, never built into
    an image the boot server hands to anyone on the provisioning network)."""
    d = resolved.definition
    per_group = [node_files(resolved).get(g, []) for g, n in d.nodes.items() if n.image == image]
    if not per_group or not per_group[0]:
        return {}
    first = {f["dest"]: f for f in per_group[0] if not f["secret"]}
    return {dest: f for dest, f in first.items()
            if all(any(o["dest"] == dest and str(o["content"]) == str(f["content"]) for o in files)
                   for files in per_group)}


def install(resolved: Resolved) -> dict[str, list[dict]]:
    """What roles/identity installs per node group: everything on a stateful group; on a stateless
    one only what its image cannot carry (a node group's own sssd.conf, or one holding the bind
    password), installed again after every boot (reimage.yml)."""
    d = resolved.definition
    out = {}
    for group, files in node_files(resolved).items():
        g = d.nodes[group]
        if g.provisioning == "stateless":
            carried = image_files(resolved, g.image)
            files = [f for f in files if f["dest"] not in carried]
        if files:
            out[group] = files
    return out
