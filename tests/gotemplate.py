"""A small interpreter of the Go text/template (+ Sprig) subset the GPU Operator chart's
templates/clusterpolicy.yaml uses, so tests can build the ClusterPolicy the chart builds from
clusterdef's values without Helm (not installable here).

Covered, as Helm evaluates them: `{{- ... -}}` whitespace trimming; `if` / `else` / `end`
with Go truthiness (false, 0, nil, "" and empty collections are false); `.Values.a.b` lookups
(a missing key is nil and prints as "", a lookup through nil fails as in Go); the functions
`and`, `or`, `not`, `eq`, `ne`, `default`, `quote`, `toYaml`, `nindent`, `indent` and `include`
(helpers come from the caller: the chart's _helpers.tpl is not in the reference); pipelines
with `|` and parenthesised arguments; Helm's coalescing of the chart's values.yaml with user
values (maps merge, anything else replaces, null deletes). Anything else raises, so a template
using more fails loudly instead of rendering wrongly.
"""

from __future__ import annotations

import copy
import json
import re

import yaml

ACTION = re.compile(r"{{(-?)\s*(.*?)\s*(-?)}}", re.S)
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\(|\)|\||[^\s()|]+')


class TemplateError(Exception):
    pass


def coalesce(chart: dict, user: dict) -> dict:
    """Helm's merge of user values over the chart's defaults."""
    out = copy.deepcopy(chart)
    for k, v in user.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = coalesce(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _segments(text: str) -> list[tuple[str, str]]:
    """[("text", s) | ("action", s)] with the trim markers applied."""
    out: list[tuple[str, str]] = []
    pos, trim_next = 0, False
    for m in ACTION.finditer(text):
        chunk = text[pos:m.start()]
        if trim_next:
            chunk = chunk.lstrip()
        if m.group(1):
            chunk = chunk.rstrip()
        out.append(("text", chunk))
        out.append(("action", m.group(2)))
        pos, trim_next = m.end(), bool(m.group(3))
    tail = text[pos:]
    out.append(("text", tail.lstrip() if trim_next else tail))
    return out


def _parse(segments: list[tuple[str, str]]) -> list:
    """Nested nodes: str (text), ("out", pipeline), ("if", cond, then, else)."""
    root: list = []
    stack: list[list] = [root]
    ifs: list[list] = []
    for kind, s in segments:
        if kind == "text":
            stack[-1].append(s)
        elif s.startswith("if "):
            node = ["if", s[3:], [], []]
            stack[-1].append(node)
            ifs.append(node)
            stack.append(node[2])
        elif s == "else":
            stack.pop()
            stack.append(ifs[-1][3])
        elif s == "end":
            stack.pop()
            ifs.pop()
        elif s.startswith("/*") or re.match(r"(range|with|define|block|template|else if)\b", s):
            raise TemplateError(f"unsupported action: {s!r}")
        else:
            stack[-1].append(("out", s))
    if ifs:
        raise TemplateError("unclosed if")
    return root


def truthy(v) -> bool:
    return not (v is None or v is False or v == 0 and not isinstance(v, bool) or v in ("", [], {}))


def _text(v) -> str:
    if v is None:
        return ""  # Helm replaces Go's "<no value>" with nothing
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
        return str(int(v))
    if isinstance(v, (dict, list)):
        raise TemplateError("a map or list printed without toYaml")
    return str(v)


def _to_yaml(v) -> str:
    if v is None:
        return "null"
    return yaml.safe_dump(v, default_flow_style=False, sort_keys=True).rstrip("\n")


def _indent(n, s) -> str:
    return "\n".join(" " * int(n) + line for line in _text(s).split("\n"))


class _Eval:
    def __init__(self, data: dict, includes: dict[str, str]):
        self.data, self.includes = data, includes

    def lookup(self, path: str):
        node = self.data
        for part in path.strip(".").split(".") if path != "." else []:
            if node is None:
                raise TemplateError(f"nil pointer evaluating {path}")
            if not isinstance(node, dict):
                raise TemplateError(f"can't evaluate field {part} in {path}")
            node = node.get(part)
        return node

    def atom(self, tok):
        if isinstance(tok, list):
            return self.pipeline(tok)
        if tok.startswith('"'):
            return json.loads(tok)
        if tok in ("nil", "true", "false"):
            return {"nil": None, "true": True, "false": False}[tok]
        if re.fullmatch(r"-?\d+", tok):
            return int(tok)
        if tok.startswith("."):
            return self.lookup(tok)
        raise TemplateError(f"unknown token {tok!r}")

    FUNCS = {
        "not": lambda a: not truthy(a),
        "eq": lambda a, b: a == b,
        "ne": lambda a, b: a != b,
        "default": lambda d, v=None: v if truthy(v) else d,
        "quote": lambda *a: " ".join(json.dumps(_text(x)) for x in a if x is not None),
        "toYaml": _to_yaml,
        "nindent": lambda n, s: "\n" + _indent(n, s),
        "indent": _indent,
    }

    def command(self, toks: list, piped=...):
        head = toks[0]
        if head in ("and", "or") and piped is ...:  # Go (1.18+) stops at the first deciding argument
            value = None
            for t in toks[1:]:
                value = self.atom(t)
                if truthy(value) is (head == "or"):
                    break
            return value
        if isinstance(head, str) and head in self.FUNCS or head == "include":
            args = [self.atom(t) for t in toks[1:]] + ([] if piped is ... else [piped])
            if head == "include":
                if args[0] not in self.includes:
                    raise TemplateError(f"no helper {args[0]!r}")
                return self.includes[args[0]]
            return self.FUNCS[head](*args)
        if len(toks) != 1 or piped is not ...:
            raise TemplateError(f"not a function: {head!r}")
        return self.atom(head)

    def pipeline(self, toks: list):
        commands, cur = [], []
        for t in toks:
            if t == "|":
                commands.append(cur)
                cur = []
            else:
                cur.append(t)
        commands.append(cur)
        value = self.command(commands[0])
        for c in commands[1:]:
            value = self.command(c, value)
        return value


def _group(tokens: list[str]) -> list:
    """Parenthesised sub-pipelines as nested lists."""
    stack: list[list] = [[]]
    for t in tokens:
        if t == "(":
            stack.append([])
        elif t == ")":
            inner = stack.pop()
            stack[-1].append(inner)
        else:
            stack[-1].append(t)
    if len(stack) != 1:
        raise TemplateError("unbalanced parentheses")
    return stack[0]


def _run(nodes: list, ev: _Eval, out: list[str]) -> None:
    for n in nodes:
        if isinstance(n, str):
            out.append(n)
        elif n[0] == "out":
            out.append(_text(ev.pipeline(_group(TOKEN.findall(n[1])))))
        else:
            _run(n[2] if truthy(ev.pipeline(_group(TOKEN.findall(n[1])))) else n[3], ev, out)


def render(template: str, data: dict, includes: dict[str, str] | None = None) -> str:
    """The template's output for data ({"Values": ..., "Chart": ..., ...})."""
    out: list[str] = []
    _run(_parse(_segments(template)), _Eval(data, includes or {}), out)
    return "".join(out)
