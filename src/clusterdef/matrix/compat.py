"""Compatibility facts and the pure rules that read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from packaging.version import InvalidVersion, Version

from .model import (CudaDriverRow, DriverBranch, KubernetesSkew, NcclRelease, OperatorRelease, PackageSource,
                    SlurmRelease, SlurmUpgradeRule)


def ver(text: str) -> Version:
    """Parse a vendor version (580.82.07, v25.3.4, 1.35.2) for comparison."""
    try:
        return Version(text.lstrip("v"))
    except InvalidVersion:
        return Version("0")


def minor(text: str) -> tuple[int, int]:
    v = ver(text)
    return (v.major, v.minor)


def year_month(text: str) -> tuple[int, int] | None:
    """'2026-06' -> (2026, 6); None when not a date."""
    try:
        y, m = text.split("-")[:2]
        return int(y), int(m)
    except (ValueError, AttributeError):
        return None


def past(ym: str | None, today: date) -> bool:
    """True when the month `ym` has ended before today."""
    parsed = year_month(ym) if ym else None
    return parsed is not None and (today.year, today.month) > parsed


@dataclass(frozen=True)
class Compat:
    cuda_driver: tuple[CudaDriverRow, ...] = ()
    gpu_operator: tuple[OperatorRelease, ...] = ()
    nccl: tuple[NcclRelease, ...] = ()
    slurm: tuple[SlurmRelease, ...] = ()
    slurm_rule: SlurmUpgradeRule = field(default_factory=SlurmUpgradeRule)
    driver_branches: tuple[DriverBranch, ...] = ()
    kubernetes: KubernetesSkew = field(default_factory=KubernetesSkew)
    package_sources: tuple[PackageSource, ...] = ()

    def min_driver(self, cuda: str) -> str | None:
        """Minimum Linux driver for a CUDA toolkit: the exact row, else the newest row of
        the same major.minor that is not newer than the given version."""
        want = ver(cuda)
        same = [r for r in self.cuda_driver if minor(r.cuda) == (want.major, want.minor)
                and ver(r.cuda) <= want]
        if not same:
            return None
        return max(same, key=lambda r: ver(r.cuda)).min_driver

    def operator(self, tag: str) -> OperatorRelease | None:
        norm = "v" + tag.lstrip("v")
        return next((r for r in self.gpu_operator if r.gpu_operator == norm), None)

    def nccl_release(self, version: str) -> NcclRelease | None:
        return next((r for r in self.nccl if r.nccl == version), None)

    def slurm_release(self, major: str) -> SlurmRelease | None:
        return next((r for r in self.slurm if r.major == major), None)

    def driver_branch(self, branch: str) -> DriverBranch | None:
        return next((b for b in self.driver_branches if b.branch == branch), None)

    def slurm_window(self, to_major: str) -> int:
        """How many prior majors an upgrade to `to_major` may start from."""
        rule = self.slurm_rule
        return rule.window_from_24_11 if ver(to_major) >= ver("24.11") else rule.window_before_24_11
