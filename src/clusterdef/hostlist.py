"""Slurm-style hostlists (``gpu[0001-0512]``, ``a[1-3,7],b5``), through ClusterShell's
NodeSet, the HPC standard library for folding and expanding them. Everything
else in clusterdef goes through these few functions."""

from __future__ import annotations

import re
from functools import lru_cache

from ClusterShell.NodeSet import NodeSet, NodeSetParseError
from ClusterShell.NodeSet import RESOLVER_NOGROUP


class HostlistError(ValueError):
    """A hostlist expression that cannot be parsed."""


# The most names one expression may stand for: 2**17 = 131,072, twice the addresses of a /16
# provisioning subnet and about five times the node count of the largest GPU clusters built. A
# definition cannot mean more hosts than it can address, and NodeSet materialises every name, so
# `gpu[1-100000000]` must be refused before it is expanded, not after memory has run out.
MAX_NAMES = 2**17
# Host, switch and block names are RFC 1123 labels: lower-case letters, digits and '-', at most 63
# characters, no leading or trailing '-'. The expression alphabet below admits only what such names
# and Slurm's range syntax need, so nothing else ever reaches NodeSet, slurm.conf or a shell.
_ALPHABET = re.compile(r"^[a-z0-9\-\[\],/]+$")
_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
# A line that is not such a label, searched for in all the names joined by newlines (the alphabet has no
# newline): one scan of the names instead of one match per name.
_NOT_LABEL = re.compile(rf"^(?!{_LABEL}$).*$", re.MULTILINE)
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"^([0-9]{1,9})(?:-([0-9]{1,9})(?:/([0-9]{1,9}))?)?$")


def _split_top(expr: str) -> list[str]:
    """Comma-separated parts outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(expr):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return parts


def size_bound(expr: str) -> int:
    """How many names `expr` stands for at most, computed from its ranges without expanding them.
    Raises HostlistError for a malformed range (NodeSet gives the detailed message otherwise)."""
    total = 0
    for part in _split_top(expr):
        count = 1
        for body in _BRACKET.findall(part):
            n = 0
            for rng in body.split(","):
                m = _RANGE.fullmatch(rng)
                if not m:
                    raise HostlistError(f"hostlist {expr!r}: range {rng!r} is not N, N-M or N-M/STEP "
                                        "(at most 9 digits each)")
                a, b, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
                if b < a or step < 1:
                    raise HostlistError(f"hostlist {expr!r}: range {rng!r} is empty or has step 0")
                n += (b - a) // step + 1
            count *= n
        total += count
        if total > MAX_NAMES:
            break
    return total


@lru_cache(maxsize=4096)
def parse(expr: str) -> NodeSet:
    """Parse a hostlist expression into a NodeSet (group syntax such as @name is off)."""
    if not isinstance(expr, str) or not expr.strip():
        raise HostlistError("empty hostlist")
    if any(c.isspace() for c in expr.strip()):
        raise HostlistError(f"hostlist {expr!r} contains whitespace")
    if "@" in expr or "!" in expr or "&" in expr or "^" in expr:
        raise HostlistError(f"hostlist {expr!r} uses set operators or groups; list hosts and ranges only")
    if len(expr) > 65536 or not _ALPHABET.fullmatch(expr):
        raise HostlistError(f"hostlist {expr[:80]!r} has characters host names cannot have: use lower-case "
                            "letters, digits and '-', with ranges in [ ] (gpu[001-128],login1)")
    if size_bound(expr) > MAX_NAMES:
        raise HostlistError(f"hostlist {expr[:80]!r} stands for more than {MAX_NAMES:,} names, more than a "
                            "definition can address; check the range bounds")
    try:
        ns = NodeSet(expr.strip(), resolver=RESOLVER_NOGROUP)
    except (NodeSetParseError, ValueError) as exc:
        raise HostlistError(f"hostlist {expr!r} is not valid: {exc}") from None
    return ns


@lru_cache(maxsize=4096)
def names(expr: str) -> tuple[str, ...]:
    """All host names, in Slurm's order (sorted by prefix, then index); expanded once per expression.

    NodeSet validates the expression; the names of a one-dimensional one (each part a digit-free prefix
    and one index or bracket) are spelled out here, in NodeSet's order, a few times faster than NodeSet's
    iterator, which sorts every index through a Python key function (ClusterShell 1.9 RangeSet)."""
    ns = parse(expr)
    out = _expand_1d(expr.strip())
    return out if out is not None and len(out) == len(ns) else tuple(ns)


_PART_1D = re.compile(r"^([a-z-]*)(?:\[([0-9,/-]+)\]|([0-9]*))$")


def _expand_1d(expr: str) -> tuple[str, ...] | None:
    """The names of `expr` as NodeSet orders them, or None when a part is not one-dimensional. NodeSet
    keeps one index set per pattern (`gpu%s`; a bare name is its own pattern), walks the patterns in
    sorted order and each set's indices by (length, text), indices keeping their zero-padding as written
    (ClusterShell 1.9: NodeSet._iter, RangeSet._sortkey, RangeSet.add_range)."""
    indices: dict[str, list[str]] = {}  # pattern (`gpu%s`) -> its indices; a bare name (no `%s`) -> []
    ranges: dict[str, int] = {}  # how many ranges a pattern gathered: one ascending range needs no sort
    for part in _split_top(expr):
        m = _PART_1D.fullmatch(part)
        if m is None:
            return None
        prefix, body, digits = m.groups()
        if body is None and not digits:
            indices[prefix] = []
            continue
        pattern = prefix + "%s"
        got = indices.setdefault(pattern, [])
        for rng in (body.split(",") if body is not None else [digits]):
            r = _RANGE.fullmatch(rng)
            if r is None:
                return None
            first, last, step = r[1], r[2] or r[1], int(r[3] or 1)
            if step < 1:
                return None
            width = len(first) if len(first) > 1 and first[0] == "0" else 0
            if (width or (len(last) > 1 and last[0] == "0")) and len(first) != len(last):
                return None  # a padding NodeSet refuses
            got.extend("%0*d" % (width, i) for i in range(int(first), int(last) + 1, step))
            ranges[pattern] = ranges.get(pattern, 0) + 1
    out: list[str] = []
    for pattern in sorted(indices):
        got = indices[pattern]
        if not pattern.endswith("%s"):  # a bare name (names hold no '%')
            out.append(pattern)
            continue
        if ranges[pattern] > 1:
            got = sorted(set(got), key=lambda i: (len(i), i))
        head = pattern[:-2]
        out.extend([head + i for i in got])
    return tuple(out)


def check_names(expr: str) -> None:
    """Every name of `expr` is an RFC 1123 label (no leading/trailing '-', at most 63 characters)."""
    bad = _NOT_LABEL.search("\n".join(names(expr)))
    if bad:
        name = bad[0]
        raise HostlistError(f"hostlist {expr[:80]!r} yields {name!r}, which is not a host name: at most 63 "
                            "lower-case letters, digits and '-', starting and ending with a letter or digit")


def expand(expr: str) -> list[str]:
    return list(names(expr))


_DIGITS = "0123456789"


@lru_cache(maxsize=256)
def _uniform(prefix: str, digits: int) -> re.Pattern:
    """Lines of `prefix` followed by exactly `digits` digits."""
    return re.compile(rf"(?:{re.escape(prefix)}[0-9]{{{digits}}}\n)*")


def _uniform_indices(hosts) -> tuple[str, int, list[int]] | None:
    """(prefix, width, sorted indices) when every name is one prefix and the same number of digits, as a
    group's hosts, a leaf's or a wave's are; checked in one scan of the names joined by newlines (a name
    holding one takes the general path). Their key is _index_runs's: NodeSet keeps same-length indices in
    one padded set when any of them is zero-padded (gpu0999, gpu1000), else in one unpadded set. None for
    any other list."""
    first = hosts[0]
    prefix = first.rstrip(_DIGITS)
    n = len(prefix)
    lines = "\n".join(hosts) + "\n"
    if n == len(first) or lines.count("\n") != len(hosts) or not _uniform(prefix, len(first) - n).fullmatch(lines):
        return None
    digits = [h[n:] for h in hosts]
    return prefix, len(first) - n if min(digits)[0] == "0" else 0, sorted(set(map(int, digits)))


def _runs_of(ordered: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct indices as (first, last) runs of consecutive ones."""
    if ordered[-1] - ordered[0] == len(ordered) - 1:
        return [(ordered[0], ordered[-1])]
    out: list[tuple[int, int]] = []
    start = prev = ordered[0]
    for n in ordered[1:]:
        if n == prev + 1:
            prev = n
        else:
            out.append((start, prev))
            start = prev = n
    out.append((start, prev))
    return out


def _index_runs(hosts):
    """Group names by prefix and index width into sorted runs of consecutive indices.

    Returns (runs, others, fast): runs maps (prefix, width) to [(first, last), ...]; others are
    names without a trailing index; fast is True when the runs already are NodeSet's canonical
    form (no other names, one width per prefix, no digits in prefixes)."""
    hosts = [hosts] if isinstance(hosts, str) else hosts if isinstance(hosts, (list, tuple)) else list(hosts)
    uniform = _uniform_indices(hosts) if hosts else None
    if uniform is not None:
        prefix, width, ordered = uniform
        return {(prefix, width): _runs_of(ordered)}, [], not any(c.isdigit() or c in "[],%" for c in prefix)
    numbers: dict[tuple[str, int], set[int]] = {}
    others: list[str] = []
    for host in hosts:
        prefix = host.rstrip(_DIGITS)
        digits = host[len(prefix):]
        if digits:
            numbers.setdefault((prefix, len(digits) if digits[0] == "0" else 0), set()).add(int(digits))
        else:
            others.append(host)
    for prefix, width in [k for k in numbers if k[1]]:
        # gpu0999 and gpu1000 are one run to NodeSet: a zero-padded run goes on into unpadded indices of its
        # length (RangeSet._slices_padding); with no other width under the prefix they are one padded set
        plain = numbers.get((prefix, 0))
        if plain and sum(1 for p, w in numbers if p == prefix and w) == 1 and \
                all(len(str(n)) == width for n in plain):
            numbers[(prefix, width)] |= numbers.pop((prefix, 0))
    runs = {key: _runs_of(sorted(numbers[key]))  # never empty: a key exists once it has an index
            for key in sorted(numbers, key=lambda k: k[0] + "%s")}  # the order NodeSet prints its patterns in
    fast = not others and len({prefix for prefix, _ in runs}) == len(runs) and \
        not any(c.isdigit() or c in "[],%" for prefix, _ in runs for c in prefix)
    return runs, others, fast


def _span(width: int, a: int, b: int, sep: str = "-") -> str:
    fmt = f"{{:0{width}d}}" if width else "{}"
    return fmt.format(a) if a == b else f"{fmt.format(a)}{sep}{fmt.format(b)}"


def fold(hosts) -> str:
    """Compress host names into the shortest hostlist expression (NodeSet's canonical form).

    Names are grouped into index runs first, so thousands of hosts fold in milliseconds; NodeSet
    itself only normalises the unusual cases (digits in prefixes, mixed padding, bare names)."""
    runs, others, fast = _index_runs(hosts)
    parts = []
    for (prefix, width), spans in runs.items():
        body = ",".join(_span(width, a, b) for a, b in spans)
        single = len(spans) == 1 and spans[0][0] == spans[0][1]
        parts.append(f"{prefix}{body}" if fast and single else f"{prefix}[{body}]")
    if fast:
        return ",".join(parts)
    ns = NodeSet(resolver=RESOLVER_NOGROUP)
    ns.update(",".join(parts + others))
    return str(ns)


@lru_cache(maxsize=4096)
def canonical(expr: str) -> str:
    """An expression in NodeSet's canonical folded form (`gpu[001-002],gpu003` -> `gpu[001-003]`)."""
    return fold(names(expr))


def contiguous(hosts, sep: str = "-") -> list[str]:
    """The hosts as a list of contiguous ranges (`gpu[0001-0128]`, `gpu0200`), in NodeSet's order;
    `sep` joins range ends (Ansible inventories use ':')."""
    return list(_contiguous(tuple([hosts] if isinstance(hosts, str) else hosts), sep))


@lru_cache(maxsize=4096)
def _contiguous(hosts: tuple[str, ...], sep: str) -> tuple[str, ...]:
    """contiguous() once per host list: a render folds the same lists again (a group's hosts, a leaf
    switch's, the wave that is that leaf)."""
    runs, others, fast = _index_runs(hosts)
    if not fast:
        ns = NodeSet(fold(hosts), resolver=RESOLVER_NOGROUP)
        return tuple(re.sub(r"\[([0-9]+)-([0-9]+)\]", rf"[\1{sep}\2]", str(part)) for part in ns.contiguous())
    return tuple(f"{prefix}{_span(width, a, b)}" if a == b else f"{prefix}[{_span(width, a, b, sep)}]"
                 for (prefix, width), spans in runs.items() for a, b in spans)


def count(expr: str) -> int:
    return len(parse(expr))


def union(exprs) -> NodeSet:
    ns = NodeSet(resolver=RESOLVER_NOGROUP)
    for e in exprs:
        ns.update(parse(e) if isinstance(e, str) else e)
    return ns


def overlap(a: str, b: str) -> NodeSet:
    """Hosts present in both hostlists (empty NodeSet when disjoint)."""
    return parse(a).intersection(parse(b))
