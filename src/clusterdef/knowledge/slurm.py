"""What Slurm accepts and where it keeps state, known to both the renderer and the checks.

Keyword lists per major (package data copied from SchedMD/slurm tags, see
slurm_keywords/README.md): which keys slurm.conf, cgroup.conf, gres.conf and topology.conf
accept in a given Slurm major, and which plugins it has. A major without its own list uses the
nearest older one. `common` is what every major in a range accepts (a rolling upgrade's
transition file); `renamed` the settings a newer major renamed (slurm_keywords/renamed.yaml).
StateSaveLocation as the rendered slurm.conf has it (`live_state_dir`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

from ..source import safe_yaml


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
    plugins: frozenset[str] = frozenset()
    """Plugins of the release as slurm.conf names them (`topology/block`), from src/plugins/<type>/<name>."""

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
        plugins=frozenset(_lines(folder, "plugins.txt")),
    )


def releases_between(old: str, new: str) -> tuple[str, ...]:
    """The lists in force from Slurm `old` to `new`, both included (oldest first)."""
    lo, hi = release_for(old), release_for(new)
    if lo is None or hi is None:
        return ()
    return tuple(v for v in available() if _key(lo) <= _key(v) <= _key(hi))


@lru_cache(maxsize=32)
def common(old: str, new: str) -> Keywords | None:
    """What every Slurm from `old` to `new` accepts: the file daemons of all those majors parse."""
    lists = [kw for v in releases_between(old, new) if (kw := for_major(v)) is not None]
    if not lists:
        return None

    def meet(attr: str) -> frozenset[str]:
        return frozenset.intersection(*(getattr(kw, attr) for kw in lists))

    plugins = set(lists[0].plugins)
    for kw in lists[1:]:
        plugins = {p for p in plugins if reads_plugin(kw, p)}
    topology = {p: frozenset.intersection(*(kw.topology[p] for kw in lists))
                for p in lists[0].topology if all(p in kw.topology for kw in lists)}
    return replace(lists[0], parameters=meet("parameters"), node=meet("node"), partition=meet("partition"),
                   nodeset=meet("nodeset"), cgroup=meet("cgroup"), gres=meet("gres"), topology=topology,
                   plugins=frozenset(plugins))


@dataclass(frozen=True)
class Renamed:
    """A setting a newer major renamed (slurm_keywords/renamed.yaml)."""

    since: str
    key: str
    plugin: str
    file: str
    older_key: str
    older_plugin: str
    older_file: str
    newer_reads_older: bool
    older_plugin_prefix: str
    newer_plugin_prefix: str
    source: str


@lru_cache(maxsize=1)
def renamed() -> tuple[Renamed, ...]:
    data = safe_yaml().load(_root().joinpath("renamed.yaml").read_text(encoding="utf-8"))
    return tuple(Renamed(since=str(r["since"]), key=r["key"], plugin=r["plugin"], file=r["file"],
                         older_key=r["older_key"], older_plugin=r["older_plugin"], older_file=r["older_file"],
                         newer_reads_older=bool(r["newer_reads_older"]), older_plugin_prefix=r["older_plugin_prefix"],
                         newer_plugin_prefix=r["newer_plugin_prefix"], source=" ".join(str(r["source"]).split()))
                 for r in data["renamed"])


def reads_plugin(kw: Keywords, plugin: str) -> bool:
    """A release loads `plugin`: it has it, or reads it under the newer name of a renamed plugin type."""
    if plugin in kw.plugins or plugin.endswith("/none"):
        return True
    for r in renamed():
        if (r.newer_reads_older and _key(kw.version)[:2] >= _key(r.since)[:2]
                and plugin.startswith(r.older_plugin_prefix)):
            return r.newer_plugin_prefix + plugin[len(r.older_plugin_prefix):] in kw.plugins
    return False


def plugin_types() -> frozenset[str]:
    """Every plugin type of any release (`topology`, `job_container`, ...): a value `type/name` of one
    of them is a plugin name."""
    return frozenset(p.split("/")[0] for v in available() if (kw := for_major(v)) for p in kw.plugins)


def majors_with_parameter(key: str) -> list[str]:
    """Releases whose slurm.conf accepts `key` (for hints such as 'added in 24.11')."""
    return [v for v in available() if (kw := for_major(v)) is not None and key.lower() in kw.parameters]


STATE_DEFAULT = "/var/lib/slurm/slurmctld"  # the rendered slurm.conf's StateSaveLocation


def live_state_dir(d) -> str:
    """StateSaveLocation as slurm.conf has it (the rendered default, or a passthrough key)."""
    value = d.slurm.passthrough.get("StateSaveLocation") if d.slurm else None
    return value if isinstance(value, str) and value.startswith("/") else STATE_DEFAULT
