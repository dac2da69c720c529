"""Every module in library/ documents ``attributes.check_mode`` and ``attributes.diff_mode`` (the house style), and
its documented check mode support agrees with ``supports_check_mode`` in its AnsibleModule(...) call: pairwise_iperf
said ``none`` while it ran in check mode, and ssh_mesh_check documented no attributes at all."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT

MODULES = sorted((PROJECT_ROOT / "library").glob("*.py"))


def documentation(tree: ast.Module) -> dict[str, Any]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "DOCUMENTATION":
            assert isinstance(node.value, ast.Constant)
            return dict(yaml.safe_load(node.value.value))
    raise AssertionError("no DOCUMENTATION")


def supports_check_mode(tree: ast.Module) -> bool:
    """The module's supports_check_mode (AnsibleModule's default, False, when not given)."""
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "AnsibleModule"]  # fmt: skip
    assert len(calls) == 1, f"{len(calls)} AnsibleModule(...) calls"
    for keyword in calls[0].keywords:
        if keyword.arg == "supports_check_mode":
            assert isinstance(keyword.value, ast.Constant), "supports_check_mode is not a constant"
            return bool(keyword.value.value)
    return False


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_the_documented_check_mode_is_what_the_code_supports(path: Path) -> None:
    tree = ast.parse(path.read_text())
    attributes = documentation(tree).get("attributes") or {}
    assert {"check_mode", "diff_mode"} <= set(attributes), f"{path.name}: attributes {sorted(attributes)}"
    support = attributes["check_mode"].get("support")
    allowed = ("full", "partial") if supports_check_mode(tree) else ("none",)
    assert support in allowed, f"{path.name}: check_mode support {support!r}; the code says {allowed}"
    if support == "partial":  # partial says nothing on its own: what differs is in the details
        assert attributes["check_mode"].get("details"), f"{path.name}: check_mode partial without details"
    assert attributes["diff_mode"].get("support") in ("full", "partial", "none"), path.name


def test_pairwise_iperf_says_that_check_mode_measures_nothing() -> None:
    tree = ast.parse((PROJECT_ROOT / "library" / "pairwise_iperf.py").read_text())
    check_mode = documentation(tree)["attributes"]["check_mode"]
    assert check_mode["support"] == "partial" and "measures" in check_mode["details"], check_mode
