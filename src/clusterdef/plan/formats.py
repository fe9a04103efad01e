"""Plan output formats from the plan document: rich text (coloured), Markdown for a
pull-request comment (Mermaid diagram of the waves, a collapsed section per file diff)
and JSON (the plan file)."""

from __future__ import annotations

import json

from rich.markup import escape

from ..hostlist import expand, fold

from .transition import LIVE, NONE, ORDER, REBOOT, REFLASH, RELOAD, RESTART

COLOUR = {REFLASH: "red", REBOOT: "yellow", RELOAD: "yellow", RESTART: "cyan", LIVE: "green", NONE: "dim"}
MD_DIFF_LINES = 150  # per file in Markdown; the JSON plan keeps whole diffs
MD_FILES = 40  # more files than this past the diff budget: they are counted per folder
MD_DIFF_CHARS = 28000  # all diffs together at most
MD_LIMIT = 60000  # characters: GitHub holds 65,536 in a pull-request comment; room for the workflow's own lines
MD_RESERVE = 6000  # for the per-folder count of files without a diff and the footer


def to_json(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _val(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, (dict, list)):
        text = json.dumps(v, sort_keys=True)
        return text if len(text) <= 60 else text[:57] + "..."
    return str(v)


def _md(v) -> str:
    return _val(v).replace("|", "\\|").replace("\n", " ")


def floors_line(ro: dict) -> str:
    """The lowest capacity each tenant, partition and pool keeps, lowest first, tenants before partitions and
    pools (a few named, the rest counted; the JSON plan has them all)."""
    kinds = ("tenant", "partition", "pool")  # what a tenant bought first
    fl = sorted(ro.get("floors") or [], key=lambda f: (f["lowest_pct"], kinds.index(f["kind"]) if f["kind"] in kinds
                                                       else len(kinds), f["name"]))
    if not fl:
        return ""
    shown = [f"{f['kind']} {escape_md(f['name'])} {f['lowest_nodes']}/{f['nodes']} nodes ({f['lowest_pct']:g}%)"
             for f in fl[:6]]
    more = f"; {len(fl) - 6} more at {fl[6]['lowest_pct']:g}% or above" if len(fl) > 6 else ""
    return (f"Capacity kept (waves take at most {ro.get('max_unavailable_pct', '-')}% of any partition, tenant or "
            "pool; the canary its own size), lowest first: " + "; ".join(shown) + more + ".")


def estimate_line(ro: dict) -> str:
    from .estimate import duration

    est = ro.get("estimate")
    if not est or not est["minutes"]:
        return ""
    t = est["timing"]
    return (f"Estimated duration: {duration(est['minutes'])}, stages one after another; a wave: drain (at most "
            f"{t['drain_minutes']} min), {t['reboot_minutes']} min reboot or {t['image_boot_minutes']} min image "
            f"boot, {t['gates_minutes']} min gates (`upgrade.timing`). Lowest in service: {est['lowest_nodes']} of "
            f"{est['gpu_nodes']} GPU nodes.")


def _approver_note(doc: dict | None, stage: str) -> str:
    """Who may approve running a stage outside its window (plan/approvals.py), for the plan's outside lines."""
    from .approvals import stage_groups

    st = next((x for x in (doc or {}).get("rollout", {}).get("stages", []) if x.get("name") == stage), None)
    if st is None:
        return ""
    _, groups = stage_groups(doc or {}, st)
    return (f"; `apply` runs it outside only with an approval by {' or '.join(f'`{g}`' for g in groups)}"
            if groups else "; no group in `service.approvers` may approve running it outside")


def schedule_lines(ro: dict, doc: dict | None = None) -> list[str]:
    """The stages in the maintenance windows (plan/windows.py): one line, and one per stage outside every window
    (with `doc`, the groups that may approve running it outside)."""
    sc = ro.get("schedule")
    if not sc:
        return []
    rows = sc["stages"]
    used = sorted({r["window"] for r in rows if r["window"]})
    late = [r["stage"] for r in rows if r.get("staffed") is False and (r["window"] or r.get("outside"))]
    line = (f"Maintenance windows (`service`, `{sc['timezone']}`): from {sc['start'][:16]} to {sc['end'][:16]}, "
            f"disruptive stages in {', '.join(f'`{w}`' for w in used) or 'no window'}; "
            + (f"{sc['outside']} outside every window:" if sc["outside"] else "none outside a window.")
            + (f" {len(late)} disruptive stage(s) start outside the supported hours." if late else ""))
    return [line, *(f"- **{r['stage']}** ({r['start'][:16]}): needs {r['outside']}"
                    + (_approver_note(doc, r["stage"]) if doc is not None else "") for r in rows if r.get("outside"))]


def needs_approval_lines(doc: dict, md: bool = True) -> list[str]:
    """The changes needing an approver (plan/audit.py): one line each, its groups as alternatives. The
    strings come from definitions and hooks: escaped for Markdown (`md`), else left to the caller."""
    from .audit import by_change

    def q(text: str) -> str:
        return escape_md(text).replace("`", "'") if md else text
    out = []
    for (kind, subject), entries in by_change(doc.get("changes_needing_approval") or []).items():
        groups = " or ".join(f"`{q(e['group'])}`" if md else e["group"] for e in entries if e["group"]) or \
            "nobody named (service.approvers, identity.admin_groups)"
        out.append(f"- {q(kind)} {q(subject)}: {q(entries[0]['why'])}; approver: {groups}")
    return out


def _kubernetes_canaries_line(ro: dict) -> list[str]:
    """The Kubernetes GPU nodes' own canaries, by driver pool or node group, or nothing."""
    kc = ro.get("kubernetes_canaries") or []
    if not kc:
        return []
    by = {"driver-pool": "driver pool", "node-group": "group"}
    return ["Kubernetes GPU canaries, before the rest of their nodes: " + "; ".join(
        f"{by[c['by']]} {escape_md(c['name'])} `{c['hosts']}`" for c in kc) + "."]


def to_markdown(doc: dict) -> str:
    f, t = doc["from"], doc["to"]
    out = [f"## clusterdef bring-up plan: `{doc['cluster']}` on {t['set']}" if doc.get("bringup") else
           f"## clusterdef plan: `{doc['cluster']}` {f['set']} → {t['set']}", ""]
    if doc["refused"]:
        out += ["> [!CAUTION]", "> **Refused.** This plan cannot be applied:"]
        out += [f"> - `{p['code']}`: {p['message']} (hint: {p['hint']})" for p in doc["refusals"]]
        out.append("")
    if doc.get("canary_only"):
        out += ["> [!WARNING]", f"> Target set `{t['set']}` is a **{t['status']}**: this plan covers the canary "
                f"and its rollback drill only; {doc['rollout']['waves_withheld']} wave(s) are withheld until the "
                "set is validated.", ""]
    for w in doc["warnings"]:
        out.append(f"- ⚠️ `{w['code']}`: {w['message']}")
    if doc["warnings"]:
        out.append("")
    out += [f"A new cluster from `{t['file']}` (set `{t['set']}`, {t['status']})." if doc.get("bringup") else
            f"From `{f['file']}` (set `{f['set']}`, {f['status']}) to `{t['file']}` (set `{t['set']}`, "
            f"{t['status']}).", ""]

    sc = doc["set_change"]
    out += ["### Set change", ""]
    if sc["layers"]:
        out += ["| layer | component | from | to | disruption | nodes |", "|---|---|---|---|---|---|"]
        for lc in sc["layers"]:
            comp = lc["component"] + (f" ({lc['hardware']})" if "hardware" in lc else "")
            out.append(f"| {lc['layer']} | {comp} | {_md(lc['from'])} | {_md(lc['to'])} | {_classes(lc)} "
                       f"| {lc['nodes']} |")
    else:
        out.append("No change of validated set.")
    out.append("")
    comp = doc.get("compatibility")
    if comp:
        out += ["**Compatibility across the transition**", ""]
        out += [f"- ✅ {c}" for c in comp["checks"]]
        out += [f"- ❌ {p['message']}" for p in comp["refusals"]]
        out += [f"- ⚠️ {p['message']}" for p in comp["warnings"]]
        if doc.get("slurm_transition"):
            out.append(f"- ⏳ {escape_md(slurm_transition_line(doc['slurm_transition']))}")
        out.append("")

    if doc.get("images"):
        out += ["### Images (built and published first)", "",
                "| image | running build | new build | stateless groups |", "|---|---|---|---|"]
        for ic in doc["images"]:
            out.append(f"| {ic['image']} | {_md(ic['from']['artefact'] if ic['from'] else None)} | "
                       f"{_md(ic['to']['artefact'])} | {', '.join(ic['stateless_groups']) or '-'} |")
        out.append("")
        for ic in doc["images"]:
            rows = [(p["package"], p["from"], p["to"]) for p in ic["pins"]]
            rows += [(p, None, "(installed)") for p in ic["packages_added"]]
            rows += [(p, "(installed)", None) for p in ic["packages_removed"]]
            if ic["kernel"]["from"] != ic["kernel"]["to"]:
                rows.append(("kernel", ic["kernel"]["from"], ic["kernel"]["to"]))
            if rows:
                out += [f"<details><summary>Image {ic['image']}: {len(rows)} package change(s)</summary>", "",
                        "| package | from | to |", "|---|---|---|"]
                out += [f"| `{p}` | {_md(a)} | {_md(b)} |" for p, a, b in rows]
                out += ["", "</details>", ""]

    out += ["### Disruption", ""]
    if doc["disruption"]:
        out += ["Each node counts once, under its worst class: the layers one reboot (or one image build) "
                "delivers are one disruption of that node.", "",
                "| class | changes | nodes |", "|---|---|---|"]
        for cls in ORDER:
            if cls in doc["disruption"]:
                s = doc["disruption"][cls]
                out.append(f"| {cls} | {s['changes']} | {s['nodes']} |")
        out.append("")
        if doc.get("approvals"):  # directory groups: a pattern without backticks (identity.DirectoryGroup)
            out += ["Approvers (`service.approvers`): " + "; ".join(
                f"{cls}: " + ", ".join(f"`{g}`" for g in groups) for cls, groups in doc["approvals"].items()) + ".", ""]
    if doc.get("changes_needing_approval"):
        out += ["### Changes needing an approver", "", "Recorded with `clusterdef approve --change KIND:SUBJECT`; "
                "`clusterdef apply` refuses the plan until each has one.", "", *needs_approval_lines(doc), ""]
    if doc["changes"]:
        out += ["<details><summary>Definition changes (" + str(len(doc["changes"])) + ")</summary>", "",
                "| field | from | to | disruption | nodes |", "|---|---|---|---|---|"]
        for c in doc["changes"]:
            out.append(f"| `{c['path']}` | {_md(c['from'])} | {_md(c['to'])} | {c['disruption']} | "
                       f"{c['nodes']}{' (' + c['hosts'] + ')' if c['hosts'] and len(c['hosts']) < 40 else ''} |")
        out += ["", "</details>", ""]

    ro = doc["rollout"]
    pt = ro["rollback"]["point"]
    out += ["### Rollout", "",
            "Layer order (one layer at a time): " + " → ".join(ro["layer_order"]) + ".",
            f"Canary: {ro['canary']['nodes']} node(s) `{ro['canary']['hosts'] or '-'}`; "
            f"waves of at most {ro['wave_size']} node(s): {ro['waves']}; rollback target: "
            f"`{ro['rollback']['target'] or '-'}`"
            + (" (exercised on the canary before wave 1)." if ro["rollback"]["exercised_on_canary"] else "."),
            *_kubernetes_canaries_line(ro),
            *([floors_line(ro)] if ro.get("floors") else []),
            *([estimate_line(ro)] if estimate_line(ro) else []),
            *schedule_lines(ro, doc),
            f"Rollback point: `{escape_md(_val(pt['file'])).replace('`', chr(39))}` on `{escape_md(pt['set'])}` "
            f"(definition {pt['definition_sha256'][:12]}, rendered tree {pt['tree_sha256'][:12]}), snapshotted by "
            "`clusterdef apply` with every node's versions before the first change.", ""]
    stages = ro["stages"]
    if stages:
        out += ["```mermaid", "flowchart TD"]
        for i, s in enumerate(stages):
            label = s["name"] + (f"<br/>{s['nodes']} nodes: {s['hosts']}" if s["nodes"] else "")
            if len(label) > 120:
                label = label[:117] + "..."
            out.append(f'  s{i}["{label}"]')
        for i in range(1, len(stages)):
            out.append(f"  s{i - 1} --> s{i}")
        if ro["waves"] and not doc.get("canary_only"):
            out.append("  halt{{halt on the first failing wave}}")
            first_wave = next(i for i, s in enumerate(stages) if s["kind"] == "wave")
            out.append(f"  s{first_wave} -. gate fails .-> halt")
        out += ["```", ""]
    if ro.get("estimate") and ro["estimate"]["minutes"]:
        from .estimate import chart

        out += [*chart(ro["estimate"]), ""]
    out += ["**Gates** after the canary, the control plane and every wave:", ""]
    out += [f"- {g}" for g in ro["gates"]]  # smoke commands sit in code spans they cannot leave (no `)
    out.append("")
    out += ["<details><summary>Stages, step by step</summary>", ""]
    out += _stage_lines(stages)
    out += ["", "</details>", ""]

    if doc["kubernetes_objects"]:
        out += ["### Kubernetes objects", "", "| change | kind | namespace | name | fields |", "|---|---|---|---|---|"]
        for o in doc["kubernetes_objects"]:
            out.append(f"| {o['change']} | {o['kind']} | {o['namespace'] or '-'} | {o['name']} | "
                       f"{_md(', '.join(o['fields']))} |")
        out.append("")

    out += ["### Rendered files", ""]
    if not doc["files"]:
        out += ["No rendered file changes.", ""]
    files, headers = _split_header_only(doc["files"])
    if headers:
        out += [_header_line(headers, lambda x: f"<code>{x}</code>"), ""]
    # Which files get their diff: the smallest first, while they fit in what the comment has left
    # (so a two-line slurm.conf change is never crowded out by one long file); the rest are a line
    # each, or counted per folder when there are many. Printed in path order.
    budget = min(MD_DIFF_CHARS, MD_LIMIT - MD_RESERVE - len("\n".join(out)))
    bodies = {fd["path"]: "\n".join(fd["diff"].splitlines()[:MD_DIFF_LINES]) for fd in files}
    # a diff costs its body and its <details> wrapper (summary, fences, the "more lines" note)
    cost = {p: len(b) + 2 * len(p) + 160 for p, b in bodies.items()}
    chosen: set[str] = set()
    for fd in sorted(files, key=lambda x: (cost[x["path"]], x["path"])):
        if cost[fd["path"]] <= budget:
            chosen.add(fd["path"])
            budget -= cost[fd["path"]]
    over = len(files) - len(chosen) > MD_FILES
    unshown: list[dict] = []
    for fd in files:
        if fd["path"] not in chosen:
            if over:
                unshown.append(fd)  # listed below, by folder
            else:
                out += [f"- <code>{fd['path']}</code> ({fd['status']}, +{fd['added']} −{fd['removed']}): "
                        "diff in the JSON plan (`--format json`)", ""]
            continue
        more = len(fd["diff"].splitlines()) - len(bodies[fd["path"]].splitlines())
        out += [f"<details><summary><code>{fd['path']}</code> ({fd['status']}, +{fd['added']} −{fd['removed']})"
                "</summary>", "", "```diff", bodies[fd["path"]], "```"]
        if more:
            out.append(f"{more} more diff line(s) in the JSON plan (`--format json`).")
        out += ["", "</details>", ""]
    if unshown:
        folders: dict[str, list[dict]] = {}
        for fd in unshown:
            folders.setdefault(fd["path"].rsplit("/", 1)[0] if "/" in fd["path"] else ".", []).append(fd)
        out += [f"{len(unshown)} more changed file(s), diffs in the JSON plan (`--format json`):", ""]
        for folder, fds in folders.items():
            status = ", ".join(f"{n} {st}" for st, n in sorted(
                {st: sum(1 for x in fds if x["status"] == st) for st in {x["status"] for x in fds}}.items()))
            out.append(f"- `{folder}/`: {status} (+{sum(x['added'] for x in fds)} "
                       f"−{sum(x['removed'] for x in fds)})")
        out.append("")
    out += [f"<sub>plan format {doc['plan_format']}, clusterdef {doc['clusterdef']}; definitions "
            f"{f['definition_sha256'][:12]} → {t['definition_sha256'][:12]}, trees {f['tree_sha256'][:12]} → "
            f"{t['tree_sha256'][:12]}</sub>", ""]
    return _fit_comment("\n".join(out))


def _stage_lines(stages: list[dict]) -> list[str]:
    """The stages as a numbered list. A run of waves that repeat the layers of the wave before them is
    one item (their hosts folded, one wave per stage in the JSON plan), so a rollout of dozens of waves
    stays a screenful."""
    out: list[str] = []
    seen_steps: list[str] | None = None
    i = 0
    while i < len(stages):
        s = stages[i]
        steps = s["steps"][1:]  # after the drain line, waves repeat the same layers
        if s["kind"] == "wave" and steps == seen_steps:
            j = i
            while j + 1 < len(stages) and stages[j + 1]["kind"] == "wave" and stages[j + 1]["steps"][1:] == steps:
                j += 1
            run = stages[i:j + 1]
            hosts = fold([h for r in run for h in expand(r["hosts"])]) if all(r["hosts"] for r in run) else ""
            switches = fold(sorted({sw for r in run for sw in r["switches"]}))
            name = run[0]["name"] if len(run) == 1 else f"{run[0]['name']} to {run[-1]['name']}"
            count = "" if len(run) == 1 else f"{len(run)} waves, "
            out.append(f"1. **{name}** — {count}{sum(r['nodes'] for r in run)} node(s)"
                       + (f" `{hosts}`" if hosts else "") + (f" on {switches}" if switches else ""))
            out.append("   - " + ("each wave in turn: " if len(run) > 1 else "")
                       + "drain, the same layers as the wave before, gates, resume")
            i = j + 1
            continue
        if s["kind"] == "wave":
            seen_steps = steps
        where = f" — {s['nodes']} node(s) `{s['hosts']}`" if s["nodes"] else ""
        sw = f" on {', '.join(s['switches'])}" if s["switches"] else ""
        out.append(f"1. **{s['name']}**{where}{sw}")
        out += [f"   - {escape_md(step)}" for step in s["steps"]]
        i += 1
    return out


def _block_ends(lines: list[str]) -> list[int]:
    """Indices after which no code block and no <details> is open: where a comment may end."""
    ends, fence, depth = [], False, 0
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            depth += line.count("<details>") - line.count("</details>")
        if not fence and depth == 0:
            ends.append(i)
    return ends


def _fit_comment(md: str) -> str:
    """The comment as it is when it fits in a pull-request comment; otherwise it ends after the last
    whole block (never inside a code block or a <details>) that fits, with a note: the whole plan is
    the JSON artifact."""
    if len(md) <= MD_LIMIT:
        return md
    note = ("\n\n> [!NOTE]\n> This plan is longer than a pull-request comment holds and ends here; "
            "the whole plan is the JSON plan (`--format json`, the workflow's artifact).\n")
    lines = md.split("\n")
    size, cut = 0, 0
    offsets = []
    for line in lines:
        offsets.append(size + len(line))
        size += len(line) + 1
    for i in _block_ends(lines):
        if offsets[i] > MD_LIMIT - len(note):
            break
        cut = i + 1
    return "\n".join(lines[:cut]).rstrip("\n") + note


def _classes(lc: dict) -> str:
    """A layer change's class, or its classes per node kind (`daemon restart` on 2 nodes, `no
    runtime change` on 6) when it depends on the node."""
    split = lc.get("by_class")
    if not split:
        return lc["disruption"]
    return "; ".join(f"{cls} on {split[cls]['nodes']}" for cls in ORDER if cls in split)


def _split_header_only(files: list[dict]) -> tuple[list[dict], list[dict]]:
    """Files with a real change, and those whose only change is their header comment (the set's
    name in a generated-by line): these are one line, not a diff each."""
    return ([f for f in files if not f.get("header_only")], [f for f in files if f.get("header_only")])


def _header_line(headers: list[dict], code) -> str:
    names = ", ".join(code(f["path"]) for f in headers[:60]) + (f" and {len(headers) - 60} more"
                                                                 if len(headers) > 60 else "")
    return (f"{len(headers)} file(s) differ only in their header comment (the set they were rendered for): "
            f"{names}")


def escape_md(text: str) -> str:
    return text.replace("<", "&lt;")


def slurm_transition_line(st: dict) -> str:
    """One line: which Slurm settings arrive after the last wave (plan/transition.py slurm_transition)."""
    held = [h["key"] for h in st["held_back"]]
    head = (f"Slurm {st['from']} -> {st['to']}: until the last wave the Slurm files in force are transition "
            f"files that Slurm {st['from']} parses; ")
    return head + (f"arriving after the last wave: {', '.join(held)}" if held else "nothing is held back")


def to_text(doc: dict) -> str:
    """Rich markup for the console."""
    f, t = doc["from"], doc["to"]
    e = escape
    out = [f"[bold]bring-up plan[/] {e(doc['cluster'])}: a new cluster on {e(t['set'])} ({t['status']})"
           if doc.get("bringup") else
           f"[bold]plan[/] {e(doc['cluster'])}: {e(f['set'])} ({f['status']}) -> {e(t['set'])} ({t['status']})"]
    for p in doc["refusals"]:
        out.append(f"[red]refused[/] {p['code']}: {e(p['message'])}  [green]hint:[/] {e(p['hint'])}")
    for w in doc["warnings"]:
        out.append(f"[yellow]warning[/] {w['code']}: {e(w['message'])}")
    if doc.get("canary_only"):
        out.append(f"[yellow]canary only[/]: {doc['rollout']['waves_withheld']} wave(s) withheld until "
                   f"{e(t['set'])} is validated")
    if doc["set_change"]["layers"]:
        out.append("[bold]set change[/]")
        for lc in doc["set_change"]["layers"]:
            c = COLOUR[lc["disruption"]]
            comp = lc["component"] + (f" ({lc['hardware']})" if "hardware" in lc else "")
            out.append(f"  {lc['layer']:<18} {e(comp):<28} {e(_val(lc['from']))} -> {e(_val(lc['to']))}  "
                       f"[{c}]{e(_classes(lc))}[/] {lc['nodes']} nodes")
    comp = doc.get("compatibility")
    if comp:
        out += [f"  [green]ok[/] {e(c)}" for c in comp["checks"]]
    if doc.get("slurm_transition"):
        out.append(f"  [cyan]transition[/] {e(slurm_transition_line(doc['slurm_transition']))}")
    for ic in doc.get("images", []):
        frm = ic["from"]["artefact"] if ic["from"] else "(new)"
        out.append(f"[bold]image[/] {e(ic['image'])}: {e(frm)} -> {e(ic['to']['artefact'])}")
        out += [f"  {e(p['package'])}: {e(_val(p['from']))} -> {e(_val(p['to']))}" for p in ic["pins"]]
    if doc["changes"]:
        out.append("[bold]definition changes[/]")
        for ch in doc["changes"]:
            c = COLOUR[ch["disruption"]]
            out.append(f"  {e(ch['path'])}: {e(_val(ch['from']))} -> {e(_val(ch['to']))}  [{c}]{ch['disruption']}[/]"
                       + (f" {ch['nodes']} nodes" if ch["nodes"] else ""))
    if doc["disruption"]:
        out.append("[bold]disruption[/] " + ", ".join(
            f"[{COLOUR[k]}]{k}[/]: {v['changes']} change(s), {v['nodes']} node(s) at worst"
            for k, v in sorted(doc["disruption"].items(), key=lambda kv: ORDER.index(kv[0]))))
    if doc.get("changes_needing_approval"):
        out.append("[bold]changes needing an approver[/]")
        out += [f"  {e(line)}" for line in needs_approval_lines(doc, md=False)]
    ro = doc["rollout"]
    if doc.get("bringup"):
        out.append("[bold]bring-up[/]: nothing runs yet, so no canary, waves or rollback point")
    else:
        out.append(f"[bold]rollout[/] canary {e(ro['canary']['hosts'] or '-')}, {ro['waves']} wave(s) of <= "
                   f"{ro['wave_size']}, rollback to {e(ro['rollback']['target'] or '-')}")
        out += [f"  kubernetes canary ({c['by']}) {e(c['name'])}: {e(c['hosts'])}"
                for c in ro.get("kubernetes_canaries") or []]
        if ro.get("floors"):
            out.append(f"  {e(floors_line(ro))}")
        if estimate_line(ro):
            out.append(f"  {e(estimate_line(ro))}")
        out += [f"  {e(line)}" for line in schedule_lines(ro, doc)]
        pt = ro["rollback"]["point"]
        out.append(f"[bold]rollback point[/] {e(pt['file'])} on {e(pt['set'])} (definition "
                   f"{pt['definition_sha256'][:12]}, tree {pt['tree_sha256'][:12]})")
    for s in ro["stages"]:
        out.append(f"  [bold]{e(s['name'])}[/]" + (f" {s['nodes']} nodes {e(s['hosts'])}" if s["nodes"] else ""))
        out += [f"    - {e(step)}" for step in s["steps"]]
    for o in doc["kubernetes_objects"]:
        out.append(f"  k8s {o['change']} {e(o['kind'])} {e(o['namespace'])}/{e(o['name'])}")
    files, headers = _split_header_only(doc["files"])
    if doc["files"]:
        out.append("[bold]rendered files[/]")
        for fd in files:
            out.append(f"  {fd['status']:<8} {e(fd['path'])} [green]+{fd['added']}[/] [red]-{fd['removed']}[/]")
        if headers:
            out.append(f"  {_header_line(headers, e)}")
        for fd in files:
            for line in fd["diff"].splitlines()[:200]:
                colour = "green" if line.startswith("+") else "red" if line.startswith("-") else \
                    "cyan" if line.startswith("@@") else ""
                out.append(f"[{colour}]{e(line)}[/]" if colour else e(line))
    return "\n".join(out)
