"""Every finding code the source can emit is triggered by some test (issue #18 item 7).

Emitted codes: an AST walk over src/clusterdef/**/*.py for calls whose first argument is a
string constant, to the helpers that make a Finding from a code. The helpers found:
  error, warning      (errors.py)
  Finding             (the dataclass itself, many modules)
  _ref                (validate/checks_refs.py: the ref-* codes)
  _fail               (limits.py: file-* and input-limit codes)
  SetProblem          (matrix/checks.py: matrix-* codes, made Findings in checks_matrix.py)
Helpers with a fixed code (fabric/check.py and drift.py `_bad`) call Finding with a literal, so
the walk finds their code there. Calls whose code is not a literal only pass a code through
(errors.error/warning, limits._fail, checks_refs._ref, Source.place, checks_matrix's p.code).
Not Finding codes, left out: plan/transition.py `Problem` (plan refusals and warnings) and
fabric/check.py `Issue` kinds.

Triggered codes: the `# expect:` headers of tests/bad/*.yaml, the codes of
tests/test_checks.py's CASES table, and TRIGGERED_ELSEWHERE below, where each code names the
test function that triggers it; that function must exist and name the code in its source.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "clusterdef"
TESTS = REPO / "tests"
HELPERS = {"error", "warning", "Finding", "_ref", "_fail", "_bad", "SetProblem"}
CODE = re.compile(r"[a-z]+(-[a-z0-9]+)+")

# code -> "file.py::test_function" that triggers it and names it
TRIGGERED_ELSEWHERE = {
    "queue-policy-needs-qos": "test_queue_policy.py::test_a_statement_that_cannot_mean_what_it_says_is_an_error",
    "queue-policy-qos-shared": "test_queue_policy.py::test_a_statement_that_cannot_mean_what_it_says_is_an_error",
    "queue-policy-scope-unknown": "test_queue_policy.py::test_a_statement_that_cannot_mean_what_it_says_is_an_error",
    "queue-policy-scope-empty": "test_queue_policy.py::test_a_statement_that_cannot_mean_what_it_says_is_an_error",
    "queue-policy-says-nothing": "test_queue_policy.py::test_a_statement_that_cannot_mean_what_it_says_is_an_error",
    "render-undelivered": "test_delivery.py::test_a_file_no_rule_covers_is_a_render_error",
    "hardware-driver-floor": "test_nvswitch_stack.py::test_a_set_older_than_the_platforms_first_driver_is_refused",
    "hardware-nvswitch-unknown": "test_nvswitch_stack.py::test_an_unknown_platform_is_asked_to_say_what_it_is",
    "hardware-nvswitch-contradiction": "test_nvswitch_stack.py::test_gpu_nvswitch_overrides_the_platform",
    "hardware-nvswitch-firmware-unchecked":
        "test_nvswitch_stack.py::test_blackwell_boards_get_the_nvswitch_stack_from_the_hardware",
    "queue-flavor-twice": "test_kueue_flavors.py::test_fallback_flavor_unknown_or_twice",
    "upgrade-baseline-invalid": "test_baseline_site.py::test_a_missing_site_baseline_is_a_located_error",
    "upgrade-baseline-unkeyed": "test_baseline_site.py::test_a_malformed_or_unkeyed_site_baseline_is_a_located_error",
    "switch-ports": "test_fabric_kinds.py::test_a_switch_with_more_ports_than_infiniband_allows_is_refused",
    "image-rollback-not-kept": "test_images_boot.py::test_a_stateless_rollback_needs_its_build_kept",
    "backup-slurm-absent": "test_backup.py::test_checks",
    "backup-rehearsal-stale": "test_backup.py::test_rehearsal_record_is_read_by_validate",
    "secret-backend-unknown": "test_secrets.py::test_backend_unknown",
    "driver-pool-group-twice": "test_kubernetes_render.py::test_kubernetes_checks",
    "driver-pool-reserved-name": "test_kubernetes_render.py::test_kubernetes_checks",
    "driver-pool-set-status": "test_kubernetes_render.py::test_kubernetes_checks",
    "queue-no-tenant": "test_kubernetes_render.py::test_kubernetes_checks",
    "rdma-without-network-operator": "test_kubernetes_render.py::test_kubernetes_checks",
    "gpu-limits-unknown": "test_observability.py::test_threshold_checks",
    "gpu-limits-incomplete": "test_checks_observability.py::test_b300_limits_the_reference_lacks_are_said_not_guessed",
    "nvlsm-unpinned": "test_nvlsm.py::test_nvlink5_boards_get_nvlsm_beside_fabric_manager",
    "hardware-nvlsm-driver": "test_nvlsm.py::test_a_set_older_than_nvlsm_is_refused",
    "file-not-found": "test_limits.py::test_only_regular_files",
    "file-not-regular": "test_limits.py::test_only_regular_files",
    "file-too-large": "test_limits.py::test_size_limit_reads_at_most_limit_plus_one",
    "json-syntax": "test_limits.py::test_json_limits",
    "ibnetdiscover-invalid": "test_fabric_check.py::test_parse_refuses",
    "lldp-invalid": "test_fabric_lldp.py::test_refuses_with_the_json_path",
    "matrix-cuda-unknown": "test_matrix.py::test_broken_sets_are_caught",
    "matrix-driver-cuda": "test_matrix.py::test_broken_sets_are_caught",
    "matrix-driver-eol": "test_matrix.py::test_broken_sets_are_caught",
    "matrix-nccl-cuda": "test_matrix.py::test_broken_sets_are_caught",
    "matrix-nccl-unknown": "test_matrix.py::test_broken_sets_are_caught",
    "matrix-operator-k8s": "test_matrix.py::test_broken_sets_are_caught",
    "matrix-operator-unknown": "test_matrix.py::test_broken_sets_are_caught",
    "matrix-slurm-unknown": "test_matrix.py::test_broken_sets_are_caught",
    "matrix-slurm-eos": "test_checks.py::test_slurm_eos_is_a_warning",
    "slurm-topology-unsupported": "test_slurm_render.py::test_topology_block_needs_a_major_with_it",
    "plan-git-ref": "test_plan.py::test_base_ref_is_never_a_git_option",
    "plan-base-mac-file": "test_plan.py::test_base_mac_inventory_outside_the_definitions_folder_is_refused",
    "matrices-not-found": "test_codes_triggered.py::test_matrices_not_found",
    "slurm-major-unknown": "test_codes_triggered.py::test_slurm_major_unknown",
    "matrix-driver-branch-unknown": "test_codes_triggered.py::test_matrix_driver_branch_unknown",
    "matrix-driver-cuda-major": "test_codes_triggered.py::test_matrix_driver_cuda_major",
    "matrix-duplicate-set": "test_codes_triggered.py::test_matrix_duplicate_set",
    "file-unreadable": "test_codes_triggered.py::test_file_unreadable",
    "facts-invalid": "test_codes_triggered.py::test_facts_invalid",
    "plan-git": "test_codes_triggered.py::test_plan_git",
    "render-unsafe-value": "test_codes_triggered.py::test_render_unsafe_value",
    "service-window-scope-unknown": "test_service.py::test_a_window_naming_unknown_scope",
    "service-window-overlap": "test_service.py::test_overlapping_windows_in_one_scope_warn",
    "service-hours-empty": "test_service.py::test_supported_hours_that_end_before_they_start",
    "service-recovery-unknown-set": "test_service.py::test_recovery_of_an_unknown_data_set",
    "service-rto-unmet": "test_service.py::test_rto_against_the_last_passed_rehearsal",
    "service-rto-unrehearsed": "test_service.py::test_no_rehearsal_on_record_warns_once_the_first_is_due",
}


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def emitted_codes() -> dict[str, str]:
    """code -> first place (file:line) that emits it."""
    out: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and _call_name(node) in HELPERS and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                out.setdefault(node.args[0].value, f"{path.relative_to(REPO)}:{node.lineno}")
    return out


def corpus_codes() -> set[str]:
    out = set()
    for path in sorted((TESTS / "bad").glob("*.yaml")):
        m = re.search(r"^#\s*expect:\s*(\S+)", path.read_text(encoding="utf-8"), re.M)
        assert m, path.name
        out.add(m[1])
    return out


def table_codes() -> set[str]:
    import test_checks

    return {case[0] for case in test_checks.CASES}


def _function_source(test: str) -> str:
    """The source (decorators included) of tests/FILE::FUNCTION; fails if it does not exist."""
    file, name = test.split("::")
    text = (TESTS / file).read_text(encoding="utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            parts = [ast.get_source_segment(text, d) or "" for d in node.decorator_list]
            return "\n".join(parts + [ast.get_source_segment(text, node) or ""])
    raise AssertionError(f"{test} does not exist")


def test_the_walk_finds_codes_from_every_helper():
    codes = emitted_codes()
    assert len(codes) > 100, len(codes)
    for code in ("ref-hardware", "unknown-field", "matrix-driver-eol", "file-too-large", "qos-preempt-off",
                 "ibnetdiscover-invalid", "facts-invalid"):
        assert code in codes, code
    assert all(CODE.fullmatch(c) for c in codes), sorted(c for c in codes if not CODE.fullmatch(c))


def test_every_emitted_code_is_triggered():
    triggered = corpus_codes() | table_codes() | set(TRIGGERED_ELSEWHERE)
    untested = {c: where for c, where in emitted_codes().items() if c not in triggered}
    assert not untested, f"finding codes no test triggers: {untested}"


def test_allow_list_names_real_tests_that_name_the_code():
    for code, test in TRIGGERED_ELSEWHERE.items():
        assert f'"{code}"' in _function_source(test), f"{test} does not name {code}"


def test_allow_list_has_no_stale_entries():
    emitted = emitted_codes()
    stale = sorted(c for c in TRIGGERED_ELSEWHERE if c not in emitted)
    assert not stale, f"no longer emitted: {stale}"
    covered = corpus_codes() | table_codes()
    redundant = sorted(c for c in TRIGGERED_ELSEWHERE if c in covered)
    assert not redundant, f"already triggered by tests/bad or test_checks.CASES: {redundant}"
