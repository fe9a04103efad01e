"""No import cycles in src/clusterdef: every import counts, at the top of a module or inside a function
(a cycle hidden in a function is still two modules that need each other). The capacity ledger is the
case in point: access, render/slurm and render/kubernetes/tenants each computed a piece of a tenant's
capacity and imported each other to do it; capacity.py now computes it and imports neither."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "clusterdef"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in it; `from pkg import name` counts as
    importing pkg.name when that is a module, else pkg)."""
    mods = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names)
        graph[mod] = {m for m in out if m in mods and m != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def test_src_has_no_import_cycle():
    """The last one was apply/delivery <-> apply/steps (host ranges one way, payloads the other): the
    rendered inventory's reading (apply/inventory.py) now sits below both."""
    found = cycles(import_graph(SRC))
    assert found == [], found


def test_the_ledger_imports_only_the_definition_and_what_it_reads():
    graph = import_graph(SRC)
    assert graph["clusterdef.capacity"] == {"clusterdef.hostlist", "clusterdef.tenancy", "clusterdef.model",
                                            "clusterdef.memo"}
    assert graph["clusterdef.memo"] == set()  # computed once per definition by a module that imports nothing
    # who reads it: access, the Slurm and Kubernetes renderers, validation; none of them through another
    for mod in ("clusterdef.access", "clusterdef.render.slurm", "clusterdef.render.kubernetes.tenants",
                "clusterdef.render.kubernetes.kueue", "clusterdef.validate.checks_capacity"):
        assert "clusterdef.capacity" in graph[mod], mod
    assert not {m for m in graph["clusterdef.access"] if m.startswith("clusterdef.render")}


def test_a_cycle_inside_a_function_is_found(tmp_path):
    """What the ledger removed: `access` importing the Slurm renderer inside a function, the renderer
    importing the Kubernetes one inside a function, and that one importing `access` at the top."""
    pkg = tmp_path / "clusterdef"
    (pkg / "render" / "slurm").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "render" / "__init__.py").write_text("")
    (pkg / "access.py").write_text("def table():\n    from .render.slurm import share\n")
    (pkg / "render" / "slurm" / "__init__.py").write_text("def share():\n    from ..kubernetes import ceiling\n")
    (pkg / "render" / "kubernetes.py").write_text("from .. import access\n\ndef ceiling():\n    pass\n")
    (pkg / "tenancy.py").write_text("from .access import table\n")  # into the cycle, not part of it
    graph = import_graph(pkg)
    assert graph["clusterdef.render.slurm"] == {"clusterdef.render.kubernetes"}
    assert cycles(graph) == [["clusterdef.access", "clusterdef.render.kubernetes", "clusterdef.render.slurm"]]


def reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module `start` imports, directly or through others: module -> the module that imports it on
    one path from `start` (to name the chain in a failure)."""
    via: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop()
        for w in sorted(graph[v]):
            if w not in via and w != start:
                via[w] = v
                todo.append(w)
    return via


def forbidden_imports(graph: dict[str, set[str]], package: str, forbidden: tuple[str, ...]) -> list[str]:
    """`a <- b <- c` chains from a module of `package` to a module under one of `forbidden`."""
    def under(mod: str, prefix: str) -> bool:
        return mod == prefix or mod.startswith(prefix + ".")

    found = []
    for mod in sorted(m for m in graph if under(m, package)):
        via = reachable(graph, mod)
        for bad in sorted(m for m in via if any(under(m, f) for f in forbidden)):
            chain = [bad]
            while chain[-1] != mod:
                chain.append(via[chain[-1]])
            found.append(" <- ".join(chain))
    return found


def test_validation_never_renders():
    """No module of validate/ imports a renderer, the tree builder or the drill (which renders the tree
    it rehearses), directly or through another module: the rehearsal record validation reads is
    rehearsal.py, below both."""
    graph = import_graph(SRC)
    assert forbidden_imports(graph, "clusterdef.validate",
                             ("clusterdef.render", "clusterdef.build", "clusterdef.drill")) == []
    assert "clusterdef.rehearsal" in graph["clusterdef.validate.checks_backup"]


def test_the_validated_sets_do_not_import_the_definition_model():
    """matrix/ shares the version and name types and the base model with the definition through types.py,
    and turns its pydantic errors into findings through schema_errors.py, never through clusterdef.model."""
    graph = import_graph(SRC)
    assert forbidden_imports(graph, "clusterdef.matrix", ("clusterdef.model",)) == []
    assert "clusterdef.types" in graph["clusterdef.matrix.model"]
    assert "clusterdef.types" in graph["clusterdef.model.base"]


def test_a_forbidden_import_through_another_module_is_found(tmp_path):
    pkg = tmp_path / "clusterdef"
    (pkg / "validate").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "validate" / "__init__.py").write_text("")
    (pkg / "validate" / "checks.py").write_text("def f():\n    from ..record import read\n")
    (pkg / "record.py").write_text("from .drill import run\n")
    (pkg / "drill.py").write_text("")
    graph = import_graph(pkg)
    assert forbidden_imports(graph, "clusterdef.validate", ("clusterdef.drill",)) == [
        "clusterdef.drill <- clusterdef.record <- clusterdef.validate.checks"]
