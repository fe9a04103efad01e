"""Data protection: what is authoritative (backed up, restore practised) and what is reproducible
(never backed up), with the schedule and the retention of the backup plan (render target `backup`,
restic; docs/backup.md).

    backup:
      repository: {url: "sftp:restic@backup01.lab.example:/srv/restic/lab", password_ref: vault_restic_password}
      schedule: {interval_hours: 24, at_hour: 2}
      retention: {within_days: 2, daily_days: 14, weekly_days: 56, monthly_days: 365}
      authoritative:
        slurm: true            # slurmdbd's database (mysqldump --single-transaction) + StateSaveLocation
        etcd: {host: k8sctl01} # `etcdctl snapshot save` on a control-plane host
        sets:                  # identity data, the cluster repository, named datasets and registries
          identity: {kind: identity, host: idm01, paths: [/var/lib/dirsrv, /etc/dirsrv]}
      reproducible: [/var/cache/apt]   # caches; every `filesystems.<fs>.scratch` mount is reproducible too
      rehearsal: {max_age_days: 30, adopted: "2026-12-01"}

Secrets by reference only: `password_ref` names the Ansible Vault variable holding the restic
repository password; the accounting database is dumped with slurmdbd's own credentials
(`slurm.accounting.storage_user` and `secrets.refs.slurmdbd_storage_pass`)."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from .base import Model, Name
from .secrets import VaultVar
from ..types import AbsPath, DbName, Fqdn, _pattern


def _no_credentials(value: str) -> str:
    if re.search(r"://[^/@]*:[^/@]*@", value):
        raise ValueError("the repository URL carries a password (user:password@); keep it in the vault "
                         "and name it with password_ref")
    return value


# A restic repository (restic's own syntax): a local absolute path, or backend:location for the
# backends restic ships (sftp:user@host:/path, rest:https://host:8000/repo, s3:host/bucket/path ...).
ResticRepository = Annotated[str, _pattern(
    r"^(/[A-Za-z0-9_.+@/-]{1,4095}|(sftp|rest|s3|b2|azure|gs|swift|rclone):[A-Za-z0-9_.@:/+-]{1,4095})$", 4096,
    "a restic repository: an absolute path or backend:location (sftp:restic@backup01:/srv/restic/lab, "
    "rest:https://backup01:8000/lab, s3:s3.example/bucket/lab)"), AfterValidator(_no_credentials)]
# An etcd client URL (scheme, host or address, port).
EtcdEndpoint = Annotated[str, _pattern(r"^https?://[A-Za-z0-9.-]{1,253}:[0-9]{1,5}$", 270,
                                       "an etcd client URL such as https://127.0.0.1:2379")]

# Intervals a systemd calendar expression repeats exactly (divisors of a day, a day, a week).
INTERVALS = (1, 2, 3, 4, 6, 8, 12, 24, 168)


class Repository(Model):
    url: ResticRepository
    """Where restic keeps the snapshots (off the cluster: another site or an object store)."""
    password_ref: VaultVar = "vault_restic_password"
    """The Ansible Vault variable that holds the repository password (never the password)."""


class Schedule(Model):
    interval_hours: Literal[1, 2, 3, 4, 6, 8, 12, 24, 168] = 24
    """Hours between backups: a divisor of 24, 24 (daily) or 168 (weekly, on Sunday)."""
    at_hour: int = Field(default=2, ge=0, le=23)
    """Hour of day of the daily and weekly backups (and the first of the day for shorter intervals)."""


class Retention(Model):
    """How long snapshots are kept, as restic's `forget --keep-within*` durations (relative to the
    latest snapshot): everything for `within_days`, one a day for `daily_days`, one a week for
    `weekly_days`, one a month for `monthly_days`. 0 leaves a rule out."""

    within_days: int = Field(default=0, ge=0, le=36500)
    daily_days: int = Field(default=0, ge=0, le=36500)
    weekly_days: int = Field(default=0, ge=0, le=36500)
    monthly_days: int = Field(default=0, ge=0, le=36500)

    @property
    def window_hours(self) -> int:
        """How far back restore points survive `forget`: the longest rule."""
        return 24 * max(self.within_days, self.daily_days, self.weekly_days, self.monthly_days)


class Etcd(Model):
    host: Fqdn
    """The control-plane host whose etcd member is snapshotted (`etcdctl snapshot save`)."""
    endpoint: EtcdEndpoint = "https://127.0.0.1:2379"
    pki_dir: AbsPath = "/etc/kubernetes/pki/etcd"
    """Folder with ca.crt and the healthcheck-client certificate (kubeadm's layout)."""
    data_dir: AbsPath = "/var/lib/etcd"
    """The member's data directory, which a restore replaces."""


class DataSet(Model):
    kind: Literal["identity", "repository", "dataset", "registry", "other"]
    """What it is: identity data, the cluster repository, a named dataset, an image registry."""
    host: Fqdn
    """The host that runs its backup (where the paths are)."""
    paths: tuple[AbsPath, ...] = Field(min_length=1, max_length=64)


class Authoritative(Model):
    slurm: bool = True
    """Back up the Slurm controller: the accounting database (when slurm.accounting.storage is slurmdbd)
    and StateSaveLocation (queued jobs, reservations), in one snapshot on the primary controller."""
    etcd: Etcd | None = None
    """Kubernetes state: an etcd snapshot."""
    sets: dict[Name, DataSet] = Field(default={}, max_length=256)
    """Other authoritative data by name: identity data, the cluster repository, datasets, registries."""


class Rehearsal(Model):
    """The restore rehearsal (`clusterdef drill`): restores the latest Slurm snapshot into a scratch
    database and state folder, never the live ones, and records the result beside the definition."""

    max_age_days: int = Field(default=30, ge=1, le=3650)
    """`validate` warns when the last passed rehearsal is older than this."""
    adopted: date | None = None
    """When this backup plan was adopted: before any rehearsal is recorded, the first one is due
    `max_age_days` after it (without it, a plan never rehearsed is a warning at once)."""
    database: DbName = "slurm_acct_db_rehearsal"
    """Scratch database the rehearsal restores the accounting dump into (dropped and recreated)."""
    state_dir: AbsPath = "/var/tmp/clusterdef-rehearsal/slurmctld"
    """Scratch folder the rehearsal restores StateSaveLocation into (replaced)."""


class Backup(Model):
    tool: Literal["restic"] = "restic"
    repository: Repository
    schedule: Schedule = Field(default_factory=Schedule)
    retention: Retention
    authoritative: Authoritative = Field(default_factory=Authoritative)
    reproducible: tuple[AbsPath, ...] = Field(default=(), max_length=256)
    """Caches and other rebuildable data: excluded from every backup, like every scratch filesystem."""
    rehearsal: Rehearsal = Field(default_factory=Rehearsal)
