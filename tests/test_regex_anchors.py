"""A pattern that ends in `$` also matches before a final newline (Python's re: `$` is end of text or
just before a newline at its end). Matched with .match() or .search(), `"550.54\\n"` passed the version
pattern of drift's reports, and `"N\\n"` the plain-scalar pattern of the YAML emitter, which wrote it bare.
Every such pattern in src/ is used with .fullmatch(); this test finds one used otherwise."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "clusterdef"


def _dollar_patterns(tree: ast.Module) -> dict[str, int]:
    """Module-level NAME = re.compile("...$") without re.MULTILINE: name -> line."""
    out = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        call = node.value
        if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "re.compile" and call.args):
            continue
        try:
            pattern = ast.literal_eval(call.args[0])
        except ValueError:  # built from pieces: judged by its last literal piece below
            last = call.args[0]
            while isinstance(last, ast.BinOp):
                last = last.right
            pattern = last.value if isinstance(last, ast.Constant) and isinstance(last.value, str) else ""
        flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
        if isinstance(pattern, str) and pattern.endswith("$") and "MULTILINE" not in flags and ".M" not in flags:
            out[node.targets[0].id] = node.lineno
    return out


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    patterns = _dollar_patterns(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        target, method = node.func.value, node.func.attr
        if method in ("match", "search") and isinstance(target, ast.Name) and target.id in patterns:
            found.append(f"{path.relative_to(SRC)}:{node.lineno}: {target.id}.{method}()")
        if ast.unparse(target) == "re" and method in ("match", "search") and node.args and \
                isinstance(node.args[0], ast.Constant) and str(node.args[0].value).endswith("$"):
            found.append(f"{path.relative_to(SRC)}:{node.lineno}: re.{method}(r'...$')")
    return found


def test_patterns_ending_in_dollar_are_fullmatched():
    found = [o for path in sorted(SRC.rglob("*.py")) if "_jinja" not in path.parts for o in _offences(path)]
    assert not found, "use .fullmatch(): `$` matches before a final newline\n" + "\n".join(found)


def test_the_check_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('import re\n_V = re.compile(r"^[0-9.]+$")\nok = _V.fullmatch("1")\nno = _V.match("1\\n")\n'
                   'also = re.search(r"^x$", "x")\n', encoding="utf-8")
    global SRC
    saved, SRC = SRC, tmp_path
    try:
        assert _offences(bad) == ["bad.py:4: _V.match()", "bad.py:5: re.search(r'...$')"]
    finally:
        SRC = saved
    assert re.match(r"^[0-9.]+$", "550.54\n"), "the behaviour this guards against"


def test_node_and_fabric_text_ending_in_a_newline_is_masked():
    """The instances the check found: a value from a node's facts or from the fabric with a final newline
    was shown as it came (reports, drain reasons, metrics); now it is masked like any other."""
    from clusterdef import drift
    from clusterdef.fabric import check

    assert drift._shown("550.54") == "550.54"
    assert drift._shown("550.54\n") == "unprintable:550.54?"
    assert check._shown("0x0002c903000e0b72") == "0x0002c903000e0b72"
    assert check._shown("mlx5_0\n") == "unprintable:mlx5_0?"
