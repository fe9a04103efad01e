"""The identity checks (validate/checks_identity.py) finding by finding, for the branches the bad-input
corpus does not take: code, path, message and hint written out by hand. Issue #18."""

from __future__ import annotations

from clusterdef.errors import Severity
from test_checks import run


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def test_a_tenant_group_of_an_undefined_tenant_names_the_closest_tenant(lab, matrix, tmp_path):
    lab["identity"]["tenant_groups"]["visoin"] = ["visoin-users"]
    assert _found(run(lab, matrix, tmp_path), "ref-tenant") == [(
        Severity.ERROR, ("identity", "tenant_groups", "visoin"), "tenant `visoin` is not defined",
        "did you mean `vision`?")]
