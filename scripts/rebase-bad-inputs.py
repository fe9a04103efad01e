#!/usr/bin/env python3
"""Re-derive tests/bad/*.yaml files from the CURRENT clusters/lab.yaml (or gb200.yaml) (issue #18).

A corpus file is the lab with one thing broken. When the lab changes, old files carry the old lab
along, and with it findings that have nothing to do with their break (an unquoted kernel command line
the lab has since fixed, a tenant the lab has since isolated). This script takes each file whose
errors are not exactly its `# expect:` codes, splits its difference from the current lab into
hunks, and applies to the current lab the one hunk (or the header's line alone, in place of the lab's
line most like it, or every hunk that fewer than three corpus files share, or the smallest pair of
hunks) that yields exactly those codes, with the expected finding at the header's line, moved with the
hunk. Files it cannot rebase are listed for a hand edit.

    .venv/bin/python scripts/rebase-bad-inputs.py            # report what it would do
    .venv/bin/python scripts/rebase-bad-inputs.py --write    # rewrite the files
    .venv/bin/python scripts/rebase-bad-inputs.py --write tests/bad/037-ref-image.yaml
    .venv/bin/python scripts/rebase-bad-inputs.py --extra ...  # accept further codes of the same hunk
"""

from __future__ import annotations

import difflib
import itertools
import re
import sys
import tempfile
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from clusterdef.validate.pipeline import validate_file  # noqa: E402
from test_bad_inputs import HEADER, read_header  # noqa: E402

TODAY = date(2026, 11, 30)


def base_lines(name: str) -> list[str]:
    return [ln for ln in (REPO / "clusters" / name).read_text().splitlines(keepends=True)
            if "yaml-language-server" not in ln]


def closest_base(body: list[str]) -> list[str]:
    """The current clusters/*.yaml the file was copied from (most are the lab; some the GB200 cluster)."""
    bases = [base_lines(p.name) for p in sorted((REPO / "clusters").glob("*.yaml"))]
    return max(bases, key=lambda b: difflib.SequenceMatcher(None, b, body, autojunk=False).ratio())


def split(path: Path) -> tuple[list[str], list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    n = next((i for i, ln in enumerate(lines) if not HEADER.match(ln.rstrip("\n"))), len(lines))
    return lines[:n], lines[n:]


def errors(lines: list[str], name: str) -> tuple[set[str], list]:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_text("".join(lines), encoding="utf-8")
        r = validate_file(p, REPO / "matrices", TODAY)
    return {f.code for f in r.errors}, r.errors


def _hunks(lab: list[str], body: list[str]) -> list[tuple]:
    return [op for op in difflib.SequenceMatcher(None, lab, body, autojunk=False).get_opcodes() if op[0] != "equal"]


def _key(op, lab, body) -> tuple:
    return ("".join(lab[op[1]:op[2]]), "".join(body[op[3]:op[4]]))


_COMMON: dict[str, set] = {}


def common_hunks(lab: list[str]) -> set:
    """Changes that several corpus files share: an older lab carried along, not a break."""
    name = "".join(lab[:3])
    if name not in _COMMON:
        from collections import Counter

        seen: Counter = Counter()
        for p in sorted((REPO / "tests" / "bad").glob("*.yaml")):
            body = split(p)[1]
            seen.update({_key(op, lab, body) for op in _hunks(lab, body)})
        _COMMON[name] = {k for k, n in seen.items() if n >= 3}
    return _COMMON[name]


def rebase(path: Path, extra: bool = False) -> tuple[list[str] | None, str]:
    """The file on the current lab, or None. With `extra`, the hunk at the header's line may cause
    further codes: they are added as `# expect:` lines, for a reader to judge whether the one break
    necessarily causes them (a renamed key is an unknown and a missing one)."""
    header = read_header(path)
    head, body = split(path)
    want = set(header.codes)
    lab = closest_base(body)
    hunks = [op for op in difflib.SequenceMatcher(None, lab, body, autojunk=False).get_opcodes() if op[0] != "equal"]
    hl = header.line - len(head) - 1  # 0-based index of the header's line in the body

    def dist(op):
        _, _, _, j1, j2 = op
        return 0 if j1 <= hl < max(j2, j1 + 1) else min(abs(hl - j1), abs(hl - j2))

    def apply(ops):
        out, last = [], 0
        shift_line = None
        for _tag, i1, i2, j1, j2 in sorted(ops, key=lambda o: o[1]):
            out += lab[last:i1]
            if j1 <= hl < max(j2, j1 + 1):
                shift_line = len(out) + (hl - j1)
            out += body[j1:j2]
            last = i2
        out += lab[last:]
        return out, shift_line

    ordered = sorted(hunks, key=dist)
    # the header's line alone, in place of the base's line most like it (its hunk may also carry old lab)
    close = difflib.get_close_matches(body[hl], lab, n=1, cutoff=0.6) if 0 <= hl < len(body) else []
    line_only = [("replace", lab.index(close[0]), lab.index(close[0]) + 1, hl, hl + 1)] if close else []
    own = tuple(h for h in hunks if _key(h, lab, body) not in common_hunks(lab))  # all but the old lab
    tries = [(h,) for h in ordered] + [tuple(line_only)] * bool(line_only) + [own] * bool(own) + [
        c for c in itertools.combinations(ordered[:8], 2)]
    if extra:
        tries = [(h,) for h in ordered if dist(h) == 0] + [tuple(line_only)] * bool(line_only) + [own] * bool(own)
    for ops in tries:
        new, at = apply(list(ops))
        codes, errs = errors(new, path.name)
        if codes != want and not (extra and codes > want):
            continue
        line = (at + 1 + len(head)) if at is not None else None
        if line is None:  # the finding points outside the broken hunks: the same line, moved with the lab
            for a, b, size in difflib.SequenceMatcher(None, body, new, autojunk=False).get_matching_blocks():
                if a <= hl < a + size:
                    line = b + (hl - a) + 1 + len(head)
        if line is None:
            continue
        hits = [f for f in errs if f.code == header.codes[0] and f.line == line - len(head)]
        if not hits:
            continue
        if header.column is not None and not any(f.column == header.column for f in hits):
            continue
        also = sorted(codes - want)
        line += len(also)  # the header grows by one `# expect:` line per further code
        new_head = [re.sub(r"^(#\s*line:\s*)\d+", lambda m, n=line: m[1] + str(n), h) for h in head]
        last = max(i for i, h in enumerate(new_head) if h.startswith("# expect:"))
        new_head[last + 1:last + 1] = [f"# expect: {c}\n" for c in also]
        return new_head + new, f"{len(ops)} hunk(s) of {len(hunks)}" + (f", ALSO {also}" if also else "")
    return None, f"no hunk of {len(hunks)} gives exactly {sorted(want)}"


def needs_rebase(path: Path) -> bool:
    header = read_header(path)
    head, body = split(path)
    codes, _ = errors(body, path.name)
    return codes != set(header.codes)


def main(argv: list[str]) -> int:
    write = "--write" in argv
    extra = "--extra" in argv
    named = [Path(a) for a in argv if not a.startswith("--")]
    paths = named or sorted((REPO / "tests" / "bad").glob("*.yaml"))
    failed = []
    for path in paths:
        if not needs_rebase(path):
            continue
        new, how = rebase(path, extra)
        print(f"{path.name}: {'rebased, ' if new else 'NOT rebased: '}{how}")
        if new is None:
            failed.append(path.name)
        elif write:
            path.write_text("".join(new), encoding="utf-8")
    if failed:
        print(f"{len(failed)} file(s) need a hand edit: {' '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
