"""Cycles in the definition's hierarchies (Slurm account parents, Kueue cohort parents, switch
trees), found with an iterative depth-first walk: no recursion limit, linear in nodes + edges."""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, Sequence, TypeVar

N = TypeVar("N", bound=Hashable)

_NEW, _OPEN, _DONE = 0, 1, 2


def cycles(nodes: Iterable[N], edges: Callable[[N], Sequence[N]]) -> list[list[N]]:
    """Every cycle a depth-first walk closes, each as its members in edge order (a -> b -> ... -> a).

    `nodes` sets the walk's order (definition order keeps findings stable); `edges(n)` names n's
    successors, and a successor that is not among `nodes` is ignored (dangling references are
    reported by the reference checks). Self-edges are ignored too: callers report them with a code of
    their own. Each edge is followed once, so the walk is O(nodes + edges) plus the length of the
    cycles reported. One cycle is reported per edge that closes one (exactly one per cycle where every
    node has at most one successor, as with parents)."""
    order = list(nodes)
    known = set(order)
    state: dict[N, int] = dict.fromkeys(order, _NEW)
    found: list[list[N]] = []
    for start in order:
        if state[start] != _NEW:
            continue
        # stack of (node, its successors, index of the next successor to follow)
        stack: list[tuple[N, Sequence[N], int]] = [(start, edges(start), 0)]
        on_path: dict[N, int] = {start: 0}
        path: list[N] = [start]
        state[start] = _OPEN
        while stack:
            node, succ, i = stack[-1]
            if i == len(succ):
                stack.pop()
                path.pop()
                del on_path[node]
                state[node] = _DONE
                continue
            stack[-1] = (node, succ, i + 1)
            nxt = succ[i]
            if nxt == node or nxt not in known:
                continue
            if state[nxt] == _NEW:
                state[nxt] = _OPEN
                on_path[nxt] = len(path)
                path.append(nxt)
                stack.append((nxt, edges(nxt), 0))
            elif state[nxt] == _OPEN:
                found.append(path[on_path[nxt]:])
    return found


def last_defined(cycle: Sequence[N], order: dict[N, int]) -> N:
    """The cycle's member defined last: where its finding points, so the line is easy to predict."""
    return max(cycle, key=order.__getitem__)


def describe(cycle: Sequence[str], start: str | None = None) -> str:
    """`a -> b -> a`, rotated to begin at `start` when given."""
    c = list(cycle)
    if start is not None and start in c:
        k = c.index(start)
        c = c[k:] + c[:k]
    return " -> ".join(f"`{n}`" for n in c + c[:1])
