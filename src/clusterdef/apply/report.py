"""How `clusterdef apply` shows a step's result on a console (cli/apply.py passes its own, as
validate.report does for findings): ok/failed/skipped with the hosts, the tasks that changed
(would change) as a small table, the hosts grouped by identical change sets, smoke tests and the
capacity returned. Both lists are cut to a few rows; the run record has all."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

MAX_TASKS, MAX_GROUPS, HOSTS_WIDTH = 10, 8, 48


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def number_ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> "#1-3,5"."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return "#" + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def short_hosts(expr: str, width: int = HOSTS_WIDTH) -> str:
    """A folded hostlist cut at a comma to about `width` characters (the count column and the
    run record have the rest)."""
    if len(expr) <= width:
        return expr
    depth, cut = 0, None
    for i, ch in enumerate(expr[:width]):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == ",":
            cut = (i, depth)
    if cut is None:
        return expr[:width] + "..."
    return expr[:cut[0]] + (",...]" if cut[1] else ",...")


def print_changes(console: Console, changes: dict, check: bool) -> None:
    """The tasks that changed (would change) in one step, as a small table, then the hosts
    grouped by identical change sets; both cut to a few rows, the run record has all."""
    from rich import box
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    tasks, groups = changes.get("changes") or [], changes.get("change_groups") or []
    reached, verb = changes.get("hosts_reached", 0), "would change" if check else "changed"
    if not tasks:
        console.print(f"  {'nothing would change' if check else 'nothing changed'}"
                      + (f" on {plural(reached, 'host')}" if reached else ""))
        return
    console.print(f"  {verb}: {plural(len(tasks), 'task')} on {changes.get('hosts_changed', 0)} of "
                  f"{plural(reached, 'host')}")
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    table.add_column("#", justify="right")
    table.add_column(f"task ({verb})")
    table.add_column("hosts")
    table.add_column("count", justify="right")
    for t in tasks[:MAX_TASKS]:
        table.add_row(str(t["n"]), Text(t["task"]), Text(short_hosts(t["hosts"])), f"{t['count']}/{reached}")
    console.print(Padding(table, (0, 0, 0, 2), expand=False))
    if len(tasks) > MAX_TASKS:
        console.print(f"  ... and {len(tasks) - MAX_TASKS} more tasks (all of them in the run record)")
    grid = Table.grid(padding=(0, 2))
    grid.add_column()
    grid.add_column()
    for g in groups[:MAX_GROUPS]:
        grid.add_row(Text(short_hosts(g["hosts"])),
                     f"{plural(len(g['tasks']), 'task')} {verb} ({number_ranges(g['tasks'])})")
    if changes.get("hosts_unchanged"):
        grid.add_row(Text(short_hosts(changes["hosts_unchanged"])), "nothing would change" if check else "no change")
    console.print("  by host:")
    console.print(Padding(grid, (0, 0, 0, 4), expand=False))
    if len(groups) > MAX_GROUPS:
        console.print(f"    ... and {len(groups) - MAX_GROUPS} more host groups (all of them in the run record)")


def print_step(console: Console, step, result, check: bool) -> None:
    """One finished step: `result` None when it was skipped (recorded as done by hand)."""
    hosts = f" {step.to_json()['hosts']}" if step.hosts else ""
    if result is None:
        console.print(f"[yellow]skipped[/] {escape(step.label)}: {escape(step.skipped)}")
        return
    if result.ok:
        console.print(f"[green]ok[/] {escape(step.label)}{hosts} ({step.playbook.name})")
    else:
        console.print(f"[red]failed[/] {escape(step.label)}{hosts} ({step.playbook.name}, "
                      f"rc {result.rc}): {escape(', '.join(result.failed_hosts) or result.status)}")
        for f in result.failures:
            console.print(f"  {escape(f)}")
        console.print(f"  artifacts: {escape(str(result.artifact_dir))}")
    print_changes(console, result.changes, check)
    for t in result.smoke:
        state = "[red]failed[/]" if t["failed"] else "[green]ok[/]"
        console.print(f"  smoke {escape(t['layer'])}/{escape(t['test'])}: {state} "
                      f"{escape(t['failed'] or t['ok'] or t['skipped'] or '-')}")
        if t.get("first_failure"):
            console.print(f"    {escape(t['first_failure'])}")
    if step.returns and result.ok:
        console.print(f"  capacity back in service: {len(step.hosts)} nodes, {step.gpus} GPUs")
