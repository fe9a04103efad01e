"""slurmdbd.conf: the accounting daemon's configuration, rendered when slurm.accounting.storage is
slurmdbd, as an Ansible template `slurm/slurmdbd.conf.j2`.

The database password is never in the definition nor in the rendered tree: `StoragePass` carries the
*name* of an Ansible variable (`secrets.refs.slurmdbd_storage_pass`, e.g. `{{ vault_slurmdbd_pass }}`)
kept in a vault-encrypted vars file. The ansible target hands the same text to the slurm_control_plane
role (`slurm_control_plane_slurmdbd_conf` in group_vars/slurmdbd.yml), whose no_log task writes it to
/etc/slurm/slurmdbd.conf (0600, owner slurm) on the slurmdbd host; Ansible resolves the variable there,
decrypting the vault in memory with the `--vault-id` that `clusterdef apply` passes by reference.

Every key is documented in slurmdbd.conf(5) of each Slurm major the sets run (22.05 to 26.05: all of
them date from Slurm 2.x). Values are typed (Fqdn, UserName, DbName, ports) and quoted for slurm.conf
syntax; none may carry `{` or `}`, so nothing but the StoragePass reference is Jinja on the target."""

from __future__ import annotations

from ... import tenancy
from ...model.secrets import SLURMDBD_STORAGE_PASS
from ...quoting import Quoted, UnsafeValue, slurm
from ...resolve import Resolved
from .common import header, slurm_section

PATH = "slurm/slurmdbd.conf.j2"
# What regular users may not see of others' (slurm.conf and slurmdbd.conf alike; docs/tenancy.md).
PRIVATE_DATA = "accounts,jobs,reservations,usage,users"

# The keys written, in order (tests check each against slurmdbd.conf(5)).
# PrivateData only when a tenant is dedicated: sacct, sreport and sacctmgr read the database through
# slurmdbd, which applies its own PrivateData (slurmdbd.conf(5)), not slurm.conf's.
KEYS = ("AuthType", "DbdHost", "DbdPort", "SlurmUser", "LogFile", "PidFile", "StorageType", "StorageHost",
        "StoragePort", "StorageUser", "StorageLoc", "PrivateData", "StoragePass")


def _value(v) -> Quoted:
    """A slurmdbd.conf value (slurm.conf syntax) that the target's Jinja reads as plain text."""
    text = slurm(v)
    if "{" in text or "}" in text:
        raise UnsafeValue(f"{text[:60]!r}: a value of slurmdbd.conf.j2 cannot carry '{{' or '}}' (Jinja)")
    return text


# MariaDB on the accounting host (StorageHost=localhost), as Slurm's accounting guide asks before slurmdbd first
# runs (shared/reference/slurm/docs/accounting.shtml, "MySQL/MariaDB server settings"): innodb_buffer_pool_size
# 5-50 % of the server's memory and at least 4 GiB (a quarter here: slurmdbd and the system share the host);
# innodb_log_file_size 25 % of the pool (MariaDB 10.5 and later keep one redo log file, so no division by
# innodb_log_files_in_group); innodb_lock_wait_timeout 900; max_allowed_packet at least 16M. MariaDB's own
# defaults (a 128 MiB pool, 50 s lock wait) make upgrades and purges of a large database fail.
BUFFER_POOL_FLOOR_MIB = 4096


def database_settings(memory_gib: int | None) -> dict[str, str]:
    """[mysqld] settings for the accounting database on a host with `memory_gib` (None: unknown, the floor)."""
    pool = max(BUFFER_POOL_FLOOR_MIB, (memory_gib or 0) * 1024 // 4)
    return {"innodb_buffer_pool_size": f"{pool}M", "innodb_log_file_size": f"{pool // 4}M",
            "innodb_lock_wait_timeout": "900", "max_allowed_packet": "16M"}


def wanted(resolved: Resolved) -> bool:
    s = resolved.definition.slurm
    return s is not None and s.accounting.storage == "slurmdbd"


def storage_pass_var(resolved: Resolved) -> str:
    """The Ansible variable holding the database password (secrets.refs.slurmdbd_storage_pass)."""
    return resolved.definition.secrets.var(SLURMDBD_STORAGE_PASS)


def slurmdbd_conf(resolved: Resolved) -> str:
    s = slurm_section(resolved)
    a = s.accounting
    pairs = [
        ("AuthType", "auth/munge"),
        ("DbdHost", s.dbd_host()),
        ("DbdPort", a.port),
        ("SlurmUser", "slurm"),
        ("LogFile", "/var/log/slurm/slurmdbd.log"),
        ("PidFile", "/run/slurmdbd.pid"),
        ("StorageType", "accounting_storage/mysql"),
        ("StorageHost", a.storage_host),
        ("StoragePort", a.storage_port),
        ("StorageUser", a.storage_user),
        ("StorageLoc", a.storage_loc),
    ]
    if tenancy.private_data(resolved.definition):
        pairs.append(("PrivateData", PRIVATE_DATA))
    var = storage_pass_var(resolved)
    if not var.isidentifier():  # VaultVar's pattern makes this unreachable from a validated definition
        raise UnsafeValue(f"{var[:60]!r} is not an Ansible variable name")
    return (header(resolved, "slurmdbd.conf")
            + "# An Ansible template: the slurm_control_plane role writes it to /etc/slurm/slurmdbd.conf\n"
            + "# (0600, owner slurm), resolving StoragePass from the vault at apply time; no secret is here.\n"
            + "".join(f"{k}={_value(v)}\n" for k, v in pairs)
            + f"StoragePass={{{{ {var} }}}}\n")


def render(resolved: Resolved) -> dict[str, str]:
    return {PATH: slurmdbd_conf(resolved)} if wanted(resolved) else {}
