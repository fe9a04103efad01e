"""The targets' Jinja templates compiled ahead (src/clusterdef/_jinja/, scripts/compile-templates): every module
is current, a render uses them, and a template edited since its module was written is compiled from its source."""

from __future__ import annotations

import re

import jinja2
import pytest

from clusterdef import jinja_precompiled
from clusterdef.quoting import guarded_env
from clusterdef.render import template_environments
from conftest import ROOT


def test_every_template_has_a_current_module():
    # The modules are keyed by the jinja2 that wrote them: under another release (a fresh install may resolve a
    # newer one) every template is compiled at run time as before, correct and slower; regenerate to keep the gain.
    made = {m.group(1) for f in (ROOT / "src" / "clusterdef" / "_jinja").glob("*__*.py")
            if (m := re.search(r"\(jinja2 ([^)]+)\): do not edit", f.read_text()))}
    assert made, "no compiled template module names the jinja2 it was made with"
    if made != {jinja2.__version__}:
        pytest.skip(f"modules made with jinja2 {', '.join(sorted(made))}, {jinja2.__version__} installed: all are "
                    "compiled at run time; run PYTHONPATH=src python scripts/compile-templates")
    stale = {p: jinja_precompiled.stale(env, p) for p, env in template_environments().items()}
    assert stale == {p: [] for p in stale}, "run: PYTHONPATH=src python scripts/compile-templates"


def test_a_render_runs_the_precompiled_code_not_jinja_compile(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("compiled from source")

    monkeypatch.setattr(jinja2.Environment, "compile", refuse)
    env = guarded_env("clusterdef.render.pxe")
    tpl = env.get_template("host.ipxe.j2")
    assert tpl.filename.endswith("pxe__host_ipxe_j2.py")
    assert "Boot pointer of host gpu001" in tpl.render(host="gpu001", mac="aa:bb:cc:dd:ee:01", group="g",
                                                       cluster="c", b={"artefact": "a", "name": "n", "version": "1", "set": "s"}, url="http://x",
                                                       script="s.ipxe")


def test_an_edited_template_is_compiled_from_its_source(monkeypatch):
    env = guarded_env("clusterdef.render.pxe")
    real = env.loader.get_source

    def edited(environment, name):
        source, filename, uptodate = real(environment, name)
        return source.replace("Boot pointer of host", "EDITED pointer of host"), filename, uptodate

    monkeypatch.setattr(env.loader, "get_source", edited)
    tpl = env.get_template("host.ipxe.j2")
    assert not tpl.filename.endswith(".py")
    assert "EDITED pointer of host gpu001" in tpl.render(host="gpu001", mac="aa:bb:cc:dd:ee:01", group="g",
                                                         cluster="c", b={"artefact": "a", "name": "n", "version": "1", "set": "s"}, url="http://x",
                                                         script="s.ipxe")


def test_two_environments_do_not_share_a_namespace():
    a, b = guarded_env("clusterdef.render.pxe"), guarded_env("clusterdef.render.pxe")
    ta, tb = a.get_template("host.ipxe.j2"), b.get_template("host.ipxe.j2")
    assert ta.environment is a and tb.environment is b
    assert ta.root_render_func.__globals__["environment"] is a
    assert tb.root_render_func.__globals__["environment"] is b
