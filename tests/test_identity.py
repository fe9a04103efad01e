"""Identity and least privilege, proven by the software that enforces them: `sssctl config-check`
accepts every rendered sssd.conf; a real slapd (TLS, reads only for the bind DN) seeded with two
tenants' users, a dedicated tenant's user and an admin, with SSSD running the rendered config in a
private mount namespace, resolves each user with the right groups, and SSSD's access provider (PAM
account phase) admits exactly the groups the definition allows on each node group; `visudo -cf`
accepts the rendered sudoers; the Kubernetes bindings give cluster-admin to admin groups only."""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import jinja2
import pytest

from clusterdef import access
from clusterdef.build import build_tree
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml

BIND_DN = "cn=sssd,ou=services,dc=lab,dc=example"
BIND_PW = "s3cret-bind-pw"
# user -> (uid, its group); groups as in clusters/lab.yaml's identity section
USERS = {"alice": (20001, "vision-users"), "bob": (20002, "nlp-users"), "carol": (20003, "secure-users"),
         "dave": (20004, "hpc-admins")}
GIDS = {"vision-users": 30001, "nlp-users": 30002, "secure-users": 30003, "hpc-admins": 30004}


def _need(tool: str) -> str:
    path = shutil.which(tool) or (f"/usr/sbin/{tool}" if os.path.exists(f"/usr/sbin/{tool}") else None)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is missing in CI: scripts/deps.d/80-identity.sh must install it")
        pytest.skip(f"{tool} is not installed (scripts/install-test-deps)")
    return path


def _ok(path: Path):
    r = validate_file(path, MATRICES, TODAY)
    assert r.ok, [f"{f.where} {f.code} {f.message}" for f in r.errors]
    return r


def _render(data: dict, tmp_path: Path, name: str = "lab.yaml") -> dict[str, str]:
    return build_tree(_ok(dump_yaml(data, tmp_path / name)))[0]


def _resolve_vault(text: str) -> str:
    """What the role's template task does on the node: the vault variable's value in its place."""
    return jinja2.Template(text, undefined=jinja2.StrictUndefined).render(vault_ldap_bind_password=BIND_PW)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab_tree():
    return build_tree(_ok(CLUSTERS / "lab.yaml"))[0]


@pytest.fixture(scope="module")
def ldap(tmp_path_factory):
    """A real slapd on a private port with TLS; only the bind DN may read the directory."""
    slapd = _need("slapd")
    w = tmp_path_factory.mktemp("ldap")
    ssl = dict(check=True, capture_output=True, cwd=w)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                    "-days", "2", "-subj", "/CN=clusterdef-test-ca"], **ssl)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
                    "-subj", "/CN=localhost"], **ssl)
    (w / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    subprocess.run(["openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", "srv.pem", "-days", "2", "-extfile", "ext"], **ssl)
    (w / "db").mkdir()
    (w / "slapd.conf").write_text(f"""\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {w}/slapd.pid
TLSCACertificateFile {w}/ca.pem
TLSCertificateFile {w}/srv.pem
TLSCertificateKeyFile {w}/srv.key
database mdb
suffix "dc=lab,dc=example"
rootdn "cn=admin,dc=lab,dc=example"
rootpw admin-only-in-this-test
directory {w}/db
access to attrs=userPassword by anonymous auth by self auth by * none
access to * by dn.exact="{BIND_DN}" read by * none
""")
    ldif = ["dn: dc=lab,dc=example\nobjectClass: dcObject\nobjectClass: organization\no: lab\ndc: lab\n"]
    for ou in ("people", "groups", "services"):
        ldif.append(f"dn: ou={ou},dc=lab,dc=example\nobjectClass: organizationalUnit\nou: {ou}\n")
    ldif.append(f"dn: {BIND_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
                f"cn: sssd\nuserPassword: {BIND_PW}\n")
    for user, (uid, _group) in USERS.items():
        ldif.append(f"dn: uid={user},ou=people,dc=lab,dc=example\nobjectClass: inetOrgPerson\n"
                    f"objectClass: posixAccount\nuid: {user}\ncn: {user}\nsn: {user}\nuidNumber: {uid}\n"
                    f"gidNumber: {uid}\nhomeDirectory: /home/{user}\n")
    for group, gid in GIDS.items():
        members = "".join(f"memberUid: {u}\n" for u, (_, g) in USERS.items() if g == group)
        ldif.append(f"dn: cn={group},ou=groups,dc=lab,dc=example\nobjectClass: posixGroup\ncn: {group}\n"
                    f"gidNumber: {gid}\n{members}")
    (w / "seed.ldif").write_text("\n".join(ldif))
    subprocess.run([shutil.which("slapadd") or "/usr/sbin/slapadd", "-f", "slapd.conf", "-l", "seed.ldif"], **ssl)
    port = _free_port()
    subprocess.run([slapd, "-f", str(w / "slapd.conf"), "-h", f"ldaps://127.0.0.1:{port}/"], check=True)
    try:
        for _ in range(50):
            if (w / "slapd.pid").exists():
                break
            time.sleep(0.1)
        yield {"dir": w, "uri": f"ldaps://127.0.0.1:{port}", "ca": str(w / "ca.pem")}
    finally:
        pid = int((w / "slapd.pid").read_text()) if (w / "slapd.pid").exists() else None
        if pid:
            os.kill(pid, 15)


def _lab_on(lab: dict, ldap: dict) -> dict:
    data = copy.deepcopy(lab)
    data["identity"]["directory"]["uris"] = [ldap["uri"]]
    data["identity"]["directory"]["tls_ca"] = ldap["ca"]
    return data


NS_SCRIPT = """\
set -e
W={w}
mkdir -p $W/varlib/db $W/varlib/pipes/private $W/varlib/mc $W/varlib/pubconf $W/varlib/gpo_cache \\
         $W/varlib/secrets $W/varlib/keytabs $W/log $W/run $W/pamd
printf 'auth required pam_permit.so\\naccount required pam_sss.so\\n' > $W/pamd/clusterdef-check
mkdir -p /var/lib/sss /var/log/sssd /etc/sssd
mount --bind $W/varlib /var/lib/sss
mount --bind $W/log /var/log/sssd
mount --bind $W/etc /etc/sssd
mount --bind $W/pamd /etc/pam.d
mount --bind $W/run /run
mount --bind {nsswitch} /etc/nsswitch.conf
sssd -D
for i in $(seq 50); do [ -S /var/lib/sss/pipes/nss ] && break; sleep 0.1; done
{commands}
kill $(cat /run/sssd.pid)
"""


def _with_sssd(tmp_path: Path, conf: str, nsswitch: str, commands: list[str], env: dict | None = None) -> str:
    """Run `commands` in a private mount namespace where SSSD runs `conf` and NSS reads `nsswitch`."""
    if os.geteuid() != 0:
        pytest.skip("SSSD needs root (it reads a root-owned 0600 sssd.conf and binds its pipes)")
    _need("sssd")
    w = tmp_path / "sssd"
    (w / "etc" / "conf.d").mkdir(parents=True)
    (w / "etc" / "sssd.conf").write_text(conf)
    (w / "etc" / "sssd.conf").chmod(0o600)
    (w / "nsswitch.conf").write_text(nsswitch)
    script = NS_SCRIPT.format(w=w, nsswitch=w / "nsswitch.conf", commands="\n".join(commands))
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr + "".join(f.read_text() for f in (w / "log").glob("*.log"))
    return p.stdout


def test_sssctl_accepts_every_rendered_sssd_conf(lab_tree, lab, tmp_path):
    """Every node group's sssd.conf, for each directory kind (plain LDAP, FreeIPA, Active Directory)."""
    sssctl = _need("sssctl")
    variants = {"ldap": lab_tree}
    for kind in ("ipa", "ad"):
        data = copy.deepcopy(lab)
        data["identity"]["directory"]["kind"] = kind
        variants[kind] = _render(data, tmp_path, f"lab-{kind}.yaml")
    checked = 0
    for kind, tree in variants.items():
        for rel, text in tree.items():
            if not rel.startswith("identity/sssd/"):
                continue
            d = tmp_path / kind / Path(rel).stem
            (d / "conf.d").mkdir(parents=True)
            conf = d / "sssd.conf"
            conf.write_text(_resolve_vault(text))
            conf.chmod(0o600)
            p = subprocess.run([sssctl, "config-check", "-c", str(conf)], capture_output=True, text=True)
            assert p.returncode == 0 and "Issues identified by validators: 0" in p.stdout, (kind, rel, p.stdout, p.stderr)
            assert f"{kind}_" in text or kind == "ldap"
            checked += 1
    assert checked == len(lab["nodes"]) * len(variants) == 7 * 3  # one sssd.conf per node group, service hosts too


def test_sssctl_config_check_can_fail(tmp_path):
    """The check above bites: a misspelt option is reported."""
    sssctl = _need("sssctl")
    (tmp_path / "conf.d").mkdir()
    conf = tmp_path / "sssd.conf"
    conf.write_text("[sssd]\nservices = nss\ndomains = x\n\n[domain/x]\nid_provider = ldap\nldap_urii = ldaps://a\n")
    conf.chmod(0o600)
    p = subprocess.run([sssctl, "config-check", "-c", str(conf)], capture_output=True, text=True)
    assert p.returncode != 0 and "ldap_urii" in p.stdout


def test_directory_users_resolve_with_their_groups(ldap, lab, tmp_path):
    tree = _render(_lab_on(lab, ldap), tmp_path)
    conf = _resolve_vault(tree["identity/sssd/train.conf.j2"])
    out = _with_sssd(tmp_path, conf, tree["identity/nsswitch.conf"],
                     [f"id {u}" for u in USERS] + ["getent passwd alice", "getent passwd mallory || echo none:mallory"])
    for user, (uid, group) in USERS.items():
        assert f"uid={uid}({user}) gid={uid} groups={uid},{GIDS[group]}({group})" in out, out
    assert f"alice:*:{USERS['alice'][0]}:{USERS['alice'][0]}:alice:/home/alice:" in out
    assert "none:mallory" in out


def test_wrong_bind_password_resolves_nobody(ldap, lab, tmp_path):
    """The directory answers only the bind DN: the referenced password is what makes SSSD work."""
    tree = _render(_lab_on(lab, ldap), tmp_path)
    conf = tree["identity/sssd/train.conf.j2"].replace("{{ vault_ldap_bind_password }}", "wrong")
    out = _with_sssd(tmp_path, conf, tree["identity/nsswitch.conf"], ["id alice || echo unresolved:alice"])
    assert "unresolved:alice" in out


def _account_checks(tmp_path, tree, group: str) -> dict[str, bool]:
    conf = _resolve_vault(tree[f"identity/sssd/{group}.conf.j2"])
    out = _with_sssd(tmp_path / group, conf, tree["identity/nsswitch.conf"],
                     [f"echo user={u}; sssctl user-checks -a acct -s clusterdef-check {u} 2>&1 | grep pam_acct_mgmt: || true"
                      for u in USERS])
    verdicts, user = {}, None
    for line in out.splitlines():
        if line.startswith("user="):
            user = line[5:]
        elif line.startswith("pam_acct_mgmt:"):
            verdicts[user] = line.split(":", 1)[1].strip() == "Success"
    assert set(verdicts) == set(USERS), out
    return verdicts


def test_sssd_admits_exactly_the_groups_allowed_on_each_node_group(ldap, lab, tmp_path):
    """PAM's account phase through SSSD: the dedicated tenant's nodes admit its users and the admins;
    Kubernetes nodes admit admins only; a shared Slurm group admits every tenant that may run there."""
    (tmp_path / "x").mkdir()
    data = _lab_on(lab, ldap)
    tree = _render(data, tmp_path)
    r = _ok(tmp_path / "lab.yaml")
    for group in ("secure", "infer", "train"):
        (tmp_path / group).mkdir()
        verdicts = _account_checks(tmp_path, tree, group)
        allowed = set(access.login_groups(r.definition, group))
        assert verdicts == {u: g in allowed for u, (_, g) in USERS.items()}, (group, verdicts)
        if group == "secure":
            assert verdicts == {"alice": False, "bob": False, "carol": True, "dave": True}
        if group == "infer":
            assert verdicts == {"alice": False, "bob": False, "carol": False, "dave": True}


def test_visudo_accepts_sudoers_and_only_admins_get_sudo(lab_tree, lab, tmp_path):
    visudo = _need("visudo")
    data = copy.deepcopy(lab)
    data["identity"]["admin_groups"] = ["hpc-admins", "Domain Admins", "ops@lab.example"]
    variants = {"lab": lab_tree, "spaces": _render(data, tmp_path, "lab-ad.yaml")}
    for name, tree in variants.items():
        f = tmp_path / f"sudoers-{name}"
        text = tree["identity/sudoers.d/clusterdef-admins"]
        f.write_text(text)
        f.chmod(0o440)
        p = subprocess.run([visudo, "-cf", str(f)], capture_output=True, text=True)
        assert p.returncode == 0, (name, p.stdout, p.stderr)
        rules = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
        assert len(rules) == len(data["identity"]["admin_groups"] if name == "spaces" else lab["identity"]["admin_groups"])
    assert '"%Domain Admins" ALL=(ALL:ALL) ALL' in variants["spaces"]["identity/sudoers.d/clusterdef-admins"]
    bad = tmp_path / "sudoers-bad"
    bad.write_text("%Domain Admins ALL=(ALL:ALL) ALL\n")
    assert subprocess.run([visudo, "-cf", str(bad)], capture_output=True).returncode != 0


def _identity_role(tree: dict[str, str], tmp_path: Path, hosts: str, extra: dict | None = None):
    """roles/identity by ansible-playbook on this machine (local connection) for `hosts` of the rendered
    inventory and group_vars, each host installing under <tmp>/root/<host>; the bind password from a
    vars file, as a vault file would give it."""
    ansible = Path(sys.executable).parent / "ansible-playbook"
    if not ansible.exists():
        pytest.skip("ansible-playbook is not installed")
    for rel, text in tree.items():
        if rel.startswith("ansible/"):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
    (tmp_path / "play.yml").write_text(f"- hosts: {hosts}\n  gather_facts: false\n  roles: [identity]\n")
    (tmp_path / "vault.yml").write_text(f"vault_ldap_bind_password: {BIND_PW}\n")
    ev = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
          "identity_root": str(tmp_path / "root") + "/{{ inventory_hostname }}", **(extra or {})}
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(Path(__file__).resolve().parents[1] / "roles"),
           "ANSIBLE_NOCOLOR": "1", "PATH": os.environ.get("PATH", "") + ":/usr/sbin"}
    return subprocess.run([str(ansible), "-i", str(tmp_path / "ansible"), str(tmp_path / "play.yml"),
                           "-e", "@" + str(tmp_path / "vault.yml"), "-e", json.dumps(ev)],
                          env=env, capture_output=True, text=True, timeout=300)


def test_identity_role_installs_the_rendered_files(lab_tree, tmp_path):
    """roles/identity, real ansible-playbook: a stateful node (kgpu01) gets its group's sssd.conf (the
    bind password resolved from the vault variable, 0600), nsswitch.conf and the sudoers file (0440),
    byte for byte as rendered; the stateless node (gpu001) gets only what its image cannot carry (its
    group's sssd.conf with the password). The handler runs only when a file changed, the second run
    changes nothing, and a sudoers file visudo refuses never replaces the installed one."""
    _need("visudo")
    runs = [_identity_role(lab_tree, tmp_path, "kgpu01,gpu001") for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    recap = [{h: next(ln for ln in r.stdout.splitlines() if ln.startswith(h + " ")) for h in ("kgpu01", "gpu001")}
             for r in runs]
    assert all("changed=0" not in ln for ln in recap[0].values()) and all("changed=0" in ln for ln in recap[1].values())
    assert "RUNNING HANDLER [identity : Restart sssd]" in runs[0].stdout
    assert "RUNNING HANDLER" not in runs[1].stdout
    assert BIND_PW not in runs[0].stdout + runs[0].stderr  # no_log
    root = tmp_path / "root"
    def resolved(group: str) -> str:  # the vault variable's value in its place, nothing else changed
        return lab_tree[f"identity/sssd/{group}.conf.j2"].replace("{{ vault_ldap_bind_password }}", BIND_PW)

    want = {"etc/sssd/sssd.conf": (resolved("infer"), 0o600),
            "etc/nsswitch.conf": (lab_tree["identity/nsswitch.conf"], 0o644),
            "etc/sudoers.d/clusterdef-admins": (lab_tree["identity/sudoers.d/clusterdef-admins"], 0o440)}
    for rel, (text, mode) in want.items():
        f = root / "kgpu01" / rel
        assert f.read_bytes() == text.encode(), rel
        assert (f.stat().st_mode & 0o7777, f.stat().st_uid) == (mode, 0), rel
    assert f"ldap_default_authtok = {BIND_PW}\n" in want["etc/sssd/sssd.conf"][0]
    assert (root / "gpu001/etc/sssd/sssd.conf").read_bytes() == resolved("train").encode()
    assert not (root / "gpu001/etc/nsswitch.conf").exists()  # the image carries it
    assert (root / "kgpu01/etc/sssd").stat().st_mode & 0o777 == 0o711
    broken = {"identity_files": [{"dest": "/etc/sudoers.d/clusterdef-admins", "mode": "0440", "kind": "sudoers",
                                  "secret": False, "content": "%Domain Admins ALL=(ALL:ALL) ALL\n"}]}
    r = _identity_role(lab_tree, tmp_path, "kgpu01", broken)
    assert r.returncode != 0 and "failed to validate" in r.stdout and "syntax error" in r.stdout, r.stdout[-3000:]
    assert (root / "kgpu01/etc/sudoers.d/clusterdef-admins").read_text() == want["etc/sudoers.d/clusterdef-admins"][0]


def test_images_carry_the_identity_files_their_groups_share(lab_tree):
    """The lab's one image boots three groups whose sssd.conf differ (and hold the bind password): the
    image carries the SSSD packages, nsswitch.conf and the sudoers file (0440 by build.sh), no sssd.conf."""
    root = "images/gpu-node/"
    assert "sssd" in lab_tree[root + "mkosi.conf.d/65-identity.conf"].split()
    assert lab_tree[root + "mkosi.extra/etc/nsswitch.conf"] == lab_tree["identity/nsswitch.conf"]
    assert lab_tree[root + "mkosi.extra/etc/sudoers.d/clusterdef-admins"] == lab_tree["identity/sudoers.d/clusterdef-admins"]
    assert not [r for r in lab_tree if r.startswith(root) and "sssd.conf" in r]
    assert "chmod 0440 mkosi.extra/etc/sudoers.d/clusterdef-admins\n" in lab_tree[root + "build.sh"]


def test_an_image_carries_sssd_conf_when_every_group_shares_it(lab, tmp_path):
    """Without a bind DN and with one group booting the image, its sssd.conf goes into the image
    (0600 by build.sh) and the role installs nothing on the stateless group."""
    data = copy.deepcopy(lab)
    for k in ("bind_dn", "bind_password_ref"):
        data["identity"]["directory"].pop(k)
    data["images"]["other"] = copy.deepcopy(data["images"]["gpu-node"])
    for g in ("infer", "secure"):  # gpu-node is then booted by the train group alone
        data["nodes"][g]["image"] = "other"
    tree = _render(data, tmp_path)
    root = "images/gpu-node/"
    assert tree[root + "mkosi.extra/etc/sssd/sssd.conf"] == tree["identity/sssd/train.conf"]
    assert "chmod 0600 mkosi.extra/etc/sssd/sssd.conf\n" in tree[root + "build.sh"]
    assert "identity_files" not in tree.get("ansible/group_vars/group_train.yml", "")


def test_cluster_admin_only_for_admin_groups(lab_tree):
    import kubernetes_validate
    from ruamel.yaml import YAML

    objs = [o for rel, text in lab_tree.items() if rel.startswith("kubernetes/") and rel.endswith(".yaml")
            for o in YAML(typ="safe").load_all(text) if isinstance(o, dict) and "kind" in o]
    bindings = [o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    admins = [o for o in bindings if o["roleRef"]["name"] in ("cluster-admin", "admin")]
    assert [o["kind"] for o in admins] == ["ClusterRoleBinding"]
    assert [s["name"] for s in admins[0]["subjects"]] == ["oidc:hpc-admins"]
    kubernetes_validate.validate(admins[0], "1.34.2", strict=True)
    tenant_bindings = [o for o in bindings if o["kind"] == "RoleBinding"]
    assert tenant_bindings and all(o["roleRef"]["name"] == "edit" and o["metadata"].get("namespace")
                                   for o in tenant_bindings)
    subjects = {s["name"] for o in tenant_bindings for s in o["subjects"]}
    assert {"oidc:vision-users", "oidc:nlp-users", "oidc:vision-eng", "oidc:nlp-eng"} <= subjects
    assert "oidc:hpc-admins" not in subjects
    auth = YAML(typ="safe").load(lab_tree["kubernetes/identity/authentication-config.yaml"])
    assert auth["apiVersion"] == "apiserver.config.k8s.io/v1"  # the lab's set runs Kubernetes 1.34
    assert auth["jwt"][0]["issuer"] == {"url": "https://idp.lab.example/realms/lab", "audiences": ["kubernetes"]}
    assert auth["jwt"][0]["claimMappings"]["groups"] == {"claim": "groups", "prefix": "oidc:"}


def test_rendered_tree_holds_no_bind_password(ldap, lab, tmp_path):
    tree = _render(_lab_on(lab, ldap), tmp_path)
    assert not [rel for rel, text in tree.items() if BIND_PW in text]
    assert all("{{ vault_ldap_bind_password }}" in t for r, t in tree.items() if r.startswith("identity/sssd/"))


def test_access_verb_reports_who_can_do_what():
    p = subprocess.run([sys.executable, "-m", "clusterdef", "access", str(CLUSTERS / "lab.yaml"), "-f", "json",
                        "--today", TODAY.isoformat()], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    grants = {(g["who"].split(" ")[0], g["layer"]): g for g in json.loads(p.stdout)["grants"]}
    assert "sudo (ALL)" in grants[("group:hpc-admins", "nodes")]["can"]
    assert grants[("group:hpc-admins", "kubernetes")]["can"] == ["cluster-admin"]
    assert "no sudo" in grants[("tenant:secure", "nodes")]["can"]
    assert not any("infer" in c for c in grants[("tenant:vision", "nodes")]["can"])
    assert "sees only its own jobs and usage (PrivateData)" in grants[("tenant:vision", "slurm")]["can"]
    assert grants[("tenant:vision", "kubernetes")]["can"][0] == "edit in namespace vision"


def test_slurm_users_script_refuses_hostile_member_names(lab_tree, tmp_path):
    """Group members come from the directory (hostile): a name that is not a POSIX user name never
    reaches sacctmgr. Stand-in getent and sacctmgr record what the script would run."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "getent").write_text("#!/bin/sh\ncase \"$2\" in\n"
                                 "  hpc-admins) echo 'hpc-admins:*:30004:dave,x;touch$IFS/tmp/pwn,Eve' ;;\n"
                                 "  vision-users) echo 'vision-users:*:30001:alice' ;;\n"
                                 "  *) exit 2 ;;\nesac\n")
    (bin_ / "sacctmgr").write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path}/calls\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    script = tmp_path / "slurm-users.sh"
    script.write_text(lab_tree["identity/slurm-users.sh"])
    p = subprocess.run(["sh", str(script)], capture_output=True, text=True,
                       env={"PATH": f"{bin_}:/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    calls = (tmp_path / "calls").read_text()
    assert "name=dave" in calls and "adminlevel=Administrator" in calls
    assert "name=alice account=vision" in calls
    assert "pwn" not in calls and "Eve" not in calls and "skipping" in p.stderr


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_users_sync_on_real_slurmdbd(ldap, lab, matrix, tmp_path):
    """The rendered slurm-users.sh, run where SSSD resolves the real directory, against real
    slurmdbd + MariaDB loaded with the rendered accounts: the admin group's member gets AdminLevel,
    a stale administrator outside it is demoted, each tenant group's member becomes a user of its
    tenant's account; a second run changes nothing."""
    from slurm_helpers import accounting_cluster, host_build, stop_all
    from test_slurm_daemons import _on_host_slurm, render

    build = host_build()
    data = _lab_on(lab, ldap)
    r = _ok(dump_yaml(data, tmp_path / "lab.yaml"))
    full = build_tree(r)[0]
    d, tree = render(data, _on_host_slurm(matrix, data["cluster"]["matrix"], build.version))
    started = []
    try:
        work, ctl, dbd, env = accounting_cluster(build, tree, started, "cdidentity-")
        dbd.sacctmgr("-i", "add", "user", "mallory", "account=nlp", "adminlevel=Administrator")
        script = tmp_path / "slurm-users.sh"
        script.write_text(full["identity/slurm-users.sh"])
        conf = _resolve_vault(full["identity/sssd/train.conf.j2"])

        def users() -> dict[str, str]:
            out = dbd.sacctmgr("-nP", "show", "user", "format=user,adminlevel").stdout
            return dict(ln.split("|") for ln in out.splitlines() if ln.strip())

        def assocs() -> set[tuple[str, str]]:
            out = dbd.sacctmgr("-nP", "show", "assoc", "format=user,account").stdout
            return {tuple(ln.split("|")) for ln in out.splitlines() if ln.strip() and ln.split("|")[0]}

        for run in (1, 2):
            _with_sssd(tmp_path / f"run{run}", conf, full["identity/nsswitch.conf"], [f"sh {script}"], env=env)
            u = users()
            assert u["dave"] == "Administrator" and u["mallory"] == "None", (run, u)
            assert all(level == "None" for name, level in u.items() if name not in ("dave", "root", "slurm")), u
            a = assocs()
            assert {("alice", "vision"), ("bob", "nlp"), ("carol", "secure"), ("dave", "root")} <= a, (run, a)
            assert not any(user in ("alice", "bob", "carol") and acct not in ("vision", "nlp", "secure")
                           for user, acct in a), a
            if run == 1:
                first = (u, a)
        assert (u, a) == first
    finally:
        stop_all(started)
