"""What Slurm accepts and where it keeps state, known to both the renderer and the checks.

Keyword lists per major (package data copied from SchedMD/slurm tags, see
slurm_keywords/README.md): which keys slurm.conf, cgroup.conf, gres.conf and topology.conf
accept in a given Slurm major. A major without its own list uses the nearest older one.
StateSaveLocation as the rendered slurm.conf has it (`live_state_dir`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources



def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


@dataclass(frozen=True)
class Keywords:
    version: str
    """The Slurm release the lists were taken from (e.g. 25.11.7)."""
    parameters: frozenset[str]
    """Top-level slurm.conf keys, lower-cased (the parser is case-insensitive)."""
    node: frozenset[str]
    partition: frozenset[str]
    nodeset: frozenset[str]
    cgroup: frozenset[str]
    gres: frozenset[str]
    topology: dict[str, frozenset[str]]
    """topology plugin (tree, block, ring) -> keys."""
    spelled: dict[str, str]
    """lower-cased slurm.conf parameter -> its documented spelling."""

    def supports_topology(self, plugin: str) -> bool:
        return plugin in self.topology


def _root():
    return resources.files(__package__).joinpath("slurm_keywords")


@lru_cache(maxsize=1)
def available() -> tuple[str, ...]:
    """Every release with lists, oldest first."""
    return tuple(sorted((p.name for p in _root().iterdir() if p.is_dir() and p.name[0].isdigit()), key=_key))


def release_for(major: str) -> str | None:
    """The list to use for a Slurm major: its own, else the nearest older one; None if older than all."""
    want = _key(major)[:2]
    older = [v for v in available() if _key(v)[:2] <= want]
    return older[-1] if older else None


def _lines(folder, name: str) -> list[str]:
    text = folder.joinpath(name).read_text(encoding="utf-8")
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


@lru_cache(maxsize=16)
def for_major(major: str) -> Keywords | None:
    version = release_for(major)
    if version is None:
        return None
    folder = _root().joinpath(version)
    params = _lines(folder, "slurm.conf.parameters.accepted.txt")
    topology: dict[str, set[str]] = {}
    for ln in _lines(folder, "topology.conf.keywords.txt"):
        section, key = ln.split("\t")
        plugin = section.split("/")[1] if section.startswith("topology/") else "tree"
        topology.setdefault(plugin, set()).add(key.lower())
    return Keywords(
        version=version,
        parameters=frozenset(p.lower() for p in params),
        node=frozenset(k.lower() for k in _lines(folder, "slurm.conf.NodeName.txt")),
        partition=frozenset(k.lower() for k in _lines(folder, "slurm.conf.PartitionName.txt")),
        nodeset=frozenset(ln.split("\t")[1].lower() for ln in _lines(folder, "slurm.conf.other-lines.txt")
                          if ln.startswith("NODESET")),
        cgroup=frozenset(k.lower() for k in _lines(folder, "cgroup.conf.keywords.txt")),
        gres=frozenset(k.lower() for k in _lines(folder, "gres.conf.keywords.txt")),
        topology={k: frozenset(v) for k, v in topology.items()},
        spelled={p.lower(): p for p in params},
    )


def majors_with_parameter(key: str) -> list[str]:
    """Releases whose slurm.conf accepts `key` (for hints such as 'added in 24.11')."""
    return [v for v in available() if (kw := for_major(v)) is not None and key.lower() in kw.parameters]


STATE_DEFAULT = "/var/lib/slurm/slurmctld"  # the rendered slurm.conf's StateSaveLocation


def live_state_dir(d) -> str:
    """StateSaveLocation as slurm.conf has it (the rendered default, or a passthrough key)."""
    value = d.slurm.passthrough.get("StateSaveLocation") if d.slurm else None
    return value if isinstance(value, str) and value.startswith("/") else STATE_DEFAULT
