"""The Slurm files in force during a rolling upgrade, while slurmd of an older major still run.

slurmdbd and slurmctld move first, the nodes' slurmd wave by wave: until the last wave, daemons
of every major from the oldest still running to the set's one read the same slurm.conf (and the
files beside it). A slurmd refuses a key it does not know, so the transition files are rendered
with what all of those majors accept (knowledge.slurm.common: keyword and plugin lists of each
release); a setting a newer major renamed takes its older spelling, which the newer release still
reads (knowledge/slurm_keywords/renamed.yaml: JobContainerType=job_container/tmpfs with
job_container.conf for NamespaceType=namespace/linux with namespace.yaml). What only the newer
majors know is held back: named at the top of each file, and brought by the final files after
the last wave.

Pure functions of the resolved definition: no disk (apart from the package's keyword lists)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...knowledge import slurm as keywords
from ...quoting import line as comment_text
from ...quoting import slurm
from ...resolve import Resolved
from . import daemon_files, job_submit_lua, set_keywords, slurm_groups, uses_job_submit

_PAIR = re.compile(r'([A-Za-z][A-Za-z0-9_]*)=("[^"]*"|\S*)')
_PLUGIN = re.compile(r"^([a-z_0-9]+)/[A-Za-z0-9_.-]+$")
# slurm.conf lines that describe a record (the first key names it) and the list their keys are in
_RECORDS = {"nodename": "node", "partitionname": "partition", "nodeset": "nodeset"}
KEYED_FILES = ("slurm.conf", "cgroup.conf", "gres.conf", "topology.conf", "job_container.conf")


@dataclass(frozen=True)
class HeldBack:
    """A setting of the final files that the transition files leave out until the last wave."""

    file: str  # the rendered file's path (slurm/slurm.conf)
    key: str  # the key (for a record's key, `NodeName=gpu[01-04] Key`), or the file name for a whole file
    value: str
    why: str

    def to_json(self) -> dict:
        return {"key": self.key, "file": self.file, "value": self.value, "why": self.why}


def major(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _span(oldest: str, resolved: Resolved) -> tuple[str, str]:
    return major(oldest), resolved.set.slurm_major


def pairs(line: str) -> list[tuple[str, str]]:
    """`Key=value Key2="v w"` -> [(Key, value), (Key2, "v w")]; [] for a comment or blank line."""
    text = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
    return [(k, v[1:-1] if v.startswith('"') else v) for k, v in _PAIR.findall(text)]


def entries(text: str) -> dict[str, str]:
    """A key=value file as {key: value}; a record line (more than one pair) as `First=name Key` per key.
    A key on several lines (SlurmctldHost) keeps its values in order, one per line."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        kv = pairs(ln)
        if len(kv) == 1:
            k, v = kv[0]
            out[k] = f"{out[k]}\n{v}" if k in out else v
        elif kv:
            rid = f"{kv[0][0]}={kv[0][1]}"
            out[rid] = ""
            out.update((f"{rid} {k}", v) for k, v in kv[1:])
    return out


def _known(kw: keywords.Keywords, file: str, record: str | None) -> frozenset[str]:
    """Keys (lower-cased) a release accepts in `file`, on a record line of kind `record` or top-level."""
    if file == "slurm.conf":
        return getattr(kw, _RECORDS[record]) if record in _RECORDS else kw.parameters
    if file == "topology.conf":
        return frozenset().union(*kw.topology.values())
    return {"cgroup.conf": kw.cgroup, "gres.conf": kw.gres}.get(file, frozenset())


def plugin_names(value: str) -> list[str]:
    """The plugins a slurm.conf value names (`task/cgroup,task/affinity`)."""
    types = keywords.plugin_types()
    return [t for t in value.split(",") if (m := _PLUGIN.fullmatch(t)) and m[1] in types]


def _line_ok(kw: keywords.Keywords, file: str, kv: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs of one line that `kw` parses: a top-level key it lacks (or naming a plugin it lacks)
    drops the line, a record's key it lacks drops that key."""
    if file not in KEYED_FILES or file == "job_container.conf" or not kv:
        return kv
    first = kv[0][0].lower()
    record = first if len(kv) > 1 else None
    if len(kv) == 1:
        k, v = kv[0]
        bad_plugin = file == "slurm.conf" and any(p not in kw.plugins and not p.endswith("/none")
                                                  for p in plugin_names(v))
        return [] if k.lower() not in _known(kw, file, None) or bad_plugin else kv
    known = _known(kw, file, record)
    if first not in known and not (file == "slurm.conf" and record in _RECORDS):
        return []
    return [kv[0]] + [(k, v) for k, v in kv[1:] if k.lower() in known]


def filtered(kw: keywords.Keywords, file: str, text: str) -> str:
    """`text` with what `kw` does not parse left out (passthrough keys, a plugin it lacks)."""
    out = []
    for ln in text.splitlines(keepends=True):
        kv = pairs(ln)
        kept = _line_ok(kw, file, kv)
        if kept == kv:
            out.append(ln)
        elif kept:
            out.append(" ".join(f"{k}={slurm(v)}" for k, v in kept) + "\n")
    return "".join(out)


def _common(oldest: str, resolved: Resolved) -> keywords.Keywords:
    old, new = _span(oldest, resolved)
    kw = keywords.common(old, new)
    if kw is None:
        raise ValueError(f"no Slurm keyword list for Slurm {old}")
    return kw


def _bare(files: dict[str, str]) -> dict[str, str]:
    """The files without their header line (the one line that names the Slurm major)."""
    return {rel: text.split("\n", 1)[1] if text.startswith("# ") else text for rel, text in files.items()}


def _transition_bodies(resolved: Resolved, oldest: str) -> dict[str, str]:
    kw = _common(oldest, resolved)
    rendered = _bare(daemon_files(resolved, kw))
    return {rel: filtered(kw, rel.rsplit("/", 1)[1], text) for rel, text in rendered.items()}


def _majors_lacking(oldest: str, resolved: Resolved, file: str, record: str | None, key: str) -> list[str]:
    old, new = _span(oldest, resolved)
    return [major(v) for v in keywords.releases_between(old, new)
            if (kw := keywords.for_major(v)) is not None and key.lower() not in _known(kw, file, record)]


def _plugins_lacking(oldest: str, resolved: Resolved, value: str) -> list[tuple[str, list[str]]]:
    old, new = _span(oldest, resolved)
    out = []
    for p in plugin_names(value):
        lacking = [major(v) for v in keywords.releases_between(old, new)
                   if (kw := keywords.for_major(v)) is not None and not keywords.reads_plugin(kw, p)]
        if lacking:
            out.append((p, lacking))
    return out


def _releases(majors: list[str]) -> str:
    """["22.05", "23.02"] -> "Slurm 22.05 and 23.02"."""
    return "Slurm " + (", ".join(majors[:-1]) + " and " + majors[-1] if len(majors) > 1 else majors[0])


def _why_key(oldest: str, resolved: Resolved, file: str, name: str, value: str, instead: str | None) -> str:
    old, new = _span(oldest, resolved)
    record = name.split("=", 1)[0].lower() if " " in name else None
    key = name.rsplit(" ", 1)[-1]
    for r in keywords.renamed():
        if key.lower() == r.key.lower():
            return (f"{r.key} is Slurm {r.since}'s name; until the last wave the transition file has "
                    f"{r.older_key}={r.older_plugin}, which every Slurm from {old} to {new} reads")
    lacking = _majors_lacking(oldest, resolved, file, record, key)
    if lacking:
        return f"not a {file} key in {_releases(lacking)}"
    plugins = _plugins_lacking(oldest, resolved, value)
    if plugins:
        return "; ".join(f"{_releases(m)} {'have' if len(m) > 1 else 'has'} no plugin {p}" for p, m in plugins)
    if instead is not None:
        return f"Slurm {old} gets {instead!r} until the last wave"
    return f"left out while Slurm {old} runs"  # pragma: no cover - every difference above has a reason


def _why_file(oldest: str, resolved: Resolved, rel: str, held: list[HeldBack]) -> str:
    name = rel.rsplit("/", 1)[1]
    old, _ = _span(oldest, resolved)
    for r in keywords.renamed():
        if name == r.file:
            return (f"read by {r.plugin} (Slurm {r.since} on); {r.older_file} stands in for it, read by "
                    f"{r.older_plugin} in every Slurm of the upgrade")
    keys = [h.key for h in held if h.file == "slurm/slurm.conf"]
    return (f"not read while {', '.join(keys)} is held back" if keys
            else f"Slurm {old} does not read it")


def held_back(resolved: Resolved, oldest: str) -> list[HeldBack]:
    """What the final Slurm files have and the transition files (daemons from Slurm `oldest` to the
    set's major) leave out or spell the older way, each with the reason. Empty for no Slurm."""
    if resolved.definition.slurm is None or not slurm_groups(resolved):
        return []
    final = _bare(daemon_files(resolved, set_keywords(resolved)))
    trans = _transition_bodies(resolved, oldest)
    out: list[HeldBack] = []
    missing_files = []
    for rel, text in final.items():
        if rel not in trans:
            missing_files.append(rel)
            continue
        file = rel.rsplit("/", 1)[1]
        if file not in KEYED_FILES:
            continue
        mine, theirs = entries(text), entries(trans[rel])
        for name, value in mine.items():
            if theirs.get(name) != value:
                out.append(HeldBack(rel, name, value,
                                    _why_key(oldest, resolved, file, name, value, theirs.get(name))))
    out += [HeldBack(rel, rel.rsplit("/", 1)[1], "", _why_file(oldest, resolved, rel, out)) for rel in missing_files]
    return out


def _header(resolved: Resolved, oldest: str, rel: str, held: list[HeldBack], final: set[str],
            present: set[str]) -> str:
    old, new = _span(oldest, resolved)
    name = rel.rsplit("/", 1)[1]
    vs = resolved.set
    out = [f"# {name} of cluster {resolved.definition.cluster.name}: TRANSITION file, generated by clusterdef "
           f"for the rolling upgrade from Slurm {oldest} to {vs.components.slurm} (set {vs.name}); do not edit.\n",
           f"# Every daemon from Slurm {old} to {new} parses it. In force until the last wave runs Slurm {new};\n",
           "# then the final files replace it.\n"]
    # slurm.conf also names the final files that have no transition counterpart (namespace.yaml)
    mine = [h for h in held if h.file == rel or (rel == "slurm/slurm.conf" and h.file not in present)]
    if rel not in final:
        stands_for = [r.file for r in keywords.renamed() if r.older_file == name]
        out.append(f"# Stands in for {', '.join(stands_for) or 'a file of the final set'} until then.\n")
    elif mine:
        out.append("# Held back until the last wave:\n")
        out += [f"#   {comment_text(_shown(h), name)}: {comment_text(h.why, name)}\n" for h in mine]
    else:
        out.append("# Nothing in this file is held back.\n")
    return "".join(out)


def _shown(h: HeldBack) -> str:
    if h.key == h.file.rsplit("/", 1)[1]:
        return f"{h.key} (the whole file)"
    return f"{h.key}={h.value}" if h.value else h.key


def transition_files(resolved: Resolved, oldest: str) -> dict[str, str]:
    """The Slurm files (slurm.conf and those beside it that the daemons read) in force while slurmd
    of Slurm `oldest` still run: parsed by every major from `oldest` to the set's. A file the final
    set has but the transition does not (namespace.yaml) is named in slurm.conf's header."""
    if resolved.definition.slurm is None or not slurm_groups(resolved):
        return {}
    final = set(daemon_files(resolved, set_keywords(resolved)))
    held = held_back(resolved, oldest)
    bodies = _transition_bodies(resolved, oldest)
    out = {rel: _header(resolved, oldest, rel, held, final, set(bodies)) + body for rel, body in bodies.items()}
    if uses_job_submit(resolved.definition):
        # slurmctld will not start on JobSubmitPlugins=lua without the script beside slurm.conf ("job_submit/lua:
        # Unable to stat", seen on 24.11): it travels with the transition files, unchanged (every major's
        # job_submit/lua reads the job and partition fields it uses)
        rel = "slurm/job_submit.lua"
        hdr = _header(resolved, oldest, rel, held, final | {rel}, set(bodies))
        lua_hdr = "".join("--" + line[1:] for line in hdr.splitlines(keepends=True))  # Lua comments
        out[rel] = lua_hdr + job_submit_lua(resolved).split("\n", 1)[1]
    return dict(sorted(out.items()))
