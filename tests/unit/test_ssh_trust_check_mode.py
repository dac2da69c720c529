"""ssh_trust's check-mode branch and mpi_launch's wait for it, rendered by Ansible over a real inventory and HostVars
(benchmarks.ansible_vars.RoleRender): in check mode the all-pairs probe sees the nodes as they are, so pairs that
the checked run would fix (a node added, a key a node missed) fail now. Where main.yml registered a trust write
that would change, those pairs are named instead of failed and the MPI launch test waits for the run; where no write
would change (a converged cluster, or ``playbooks/ssh_check.yml``, which writes nothing), a failing pair fails.

The lab drives both branches for real (tests/integration/test_ssh_trust.py, test_remove_node_on_lab.py); this
checks each condition's truth table, which the lab cannot reach in every combination."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.template import trust_as_template

from benchmarks.ansible_vars import RoleRender, trusted
from rdmaforge.paths import PROJECT_ROOT

NODES = ["node1", "node2", "node3"]
#: The five writes main.yml registers, in its order.
WRITES = ["private", "public", "authorized", "config", "known_hosts"]
FAILING = ["node1 -> node3 (Host key verification failed.)", "node2 -> node3 (Host key verification failed.)"]


def _task(role: str, name: str) -> dict[str, Any]:
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / role / "tasks" / ("check.yml" if role == "ssh_trust" else
                                                                        "main.yml")).read_text())  # fmt: skip
    (task,) = [t for t in tasks if t.get("name") == name]
    found: dict[str, Any] = task
    return found


CHANGING = _task("ssh_trust", "Name the nodes whose SSH trust the checked run would change")
SORT = _task("ssh_trust", "Sort the failing connections into those the checked run would fix and the others")
FAIL = _task("ssh_trust", "Fail listing the connections that fail")
NAME = _task("ssh_trust", "Name the connections that fail until the checked run writes the trust")


def _render(tmp_path: Path, written: dict[str, list[str]] | None, check_mode: bool) -> RoleRender:
    """Three nodes; ``written``: for each node, which of its five writes changed (None: main.yml did not run, as in
    ssh_check.yml)."""
    nodes: dict[str, dict[str, Any]] = {node: {"ansible_host": f"198.18.0.{11 + i}"} for i, node in enumerate(NODES)}
    if written is not None:
        for node in NODES:
            for write in WRITES:
                nodes[node][f"ssh_trust_wrote_{write}"] = {"changed": write in written.get(node, []),
                                                           "failed": False}  # fmt: skip
    render = RoleRender.build(tmp_path / "inv", "ssh_trust", None, nodes, "cluster")
    for node in NODES:
        render.register(node, "ansible_check_mode", check_mode)
    return render


def _template(render: RoleRender, task: dict[str, Any], text: str) -> Any:
    """``text`` templated on the first node (a run_once task runs there), with the task's own vars."""
    templar = render.templar(NODES[0], NODES)
    variables = {name: trusted(value) for name, value in (task.get("vars") or {}).items()}
    templar.available_variables = {**templar.available_variables, **variables}
    return templar.template(trust_as_template(text))


def _when(render: RoleRender, task: dict[str, Any]) -> bool:
    """The task's ``when`` on the first node (a run_once task runs there), with the task's own vars."""
    return bool(_template(render, task, "{{ " + task["when"] + " }}"))


def _changing(render: RoleRender) -> list[str] | None:
    """ssh_trust_changing as the run-once set_fact on the first node sets it; None where the task is skipped."""
    variables = {name: trusted(value) for name, value in CHANGING["vars"].items()}
    host = NODES[0]
    if not _when(render, CHANGING):
        return None
    templar = render.templar(host, NODES)
    templar.available_variables = {**templar.available_variables, **variables}
    value: list[str] = templar.template(trust_as_template(CHANGING["ansible.builtin.set_fact"]["ssh_trust_changing"]))
    return value


def _outcome(render: RoleRender, changing: list[str] | None, failing: list[str]) -> tuple[bool, bool, bool]:
    """(fail task runs, naming task runs, mpi_launch waits for the trust) on the first node."""
    for node in NODES:
        render.register(node, "ssh_trust_failing_pairs", failing)
        if changing is not None:
            render.register(node, "ssh_trust_changing", changing)
    host = NODES[0]
    fixed = _template(render, SORT, SORT["ansible.builtin.set_fact"]["ssh_trust_fixed_by_run"])
    for node in NODES:
        render.register(node, "ssh_trust_fixed_by_run", fixed)
    fails = _when(render, FAIL)
    names = _when(render, NAME)
    waits_expr = yaml.safe_load((PROJECT_ROOT / "roles/mpi_launch/vars/main.yml").read_text())
    waits = bool(render.render(waits_expr["mpi_launch_waits_for_trust"], host, NODES))
    return fails, names, waits


@pytest.mark.parametrize("write", WRITES)
def test_in_check_mode_any_trust_write_that_would_change_names_its_node(tmp_path: Path, write: str) -> None:
    render = _render(tmp_path, {"node3": [write]}, check_mode=True)
    assert _changing(render) == ["node3"]


def test_in_check_mode_every_node_with_a_change_is_named_in_play_order(tmp_path: Path) -> None:
    render = _render(tmp_path, {"node3": ["known_hosts"], "node1": ["authorized", "config"]}, check_mode=True)
    assert _changing(render) == ["node1", "node3"]


def test_check_mode_pairs_the_run_would_fix_are_named_not_failed_and_the_mpi_test_waits(tmp_path: Path) -> None:
    render = _render(tmp_path, {"node3": ["known_hosts"]}, check_mode=True)
    changing = _changing(render)
    assert _outcome(render, changing, FAILING) == (False, True, True)
    said = render.render(NAME["ansible.builtin.debug"]["msg"], NODES[0], NODES)
    # A count of connections: a pair once for each name or address the check uses (here, the two lines given).
    assert said.startswith(
        "check mode: SSH trust would change on node3, and until a run writes it 2 connections to or from those nodes"
    )
    assert FAILING[0] in said and "fails on any that still cannot connect" in said


def test_check_mode_excuses_only_the_pairs_of_the_nodes_whose_trust_would_change(tmp_path: Path) -> None:
    """One node whose trust would change (node3 missed a rotation) excused every failing pair, node1 -> node2 too,
    which the run writes nothing for: check mode exited 0 on a pair that the run would fail. Only the pairs to or
    from a changing node are named; the others fail."""
    render = _render(tmp_path, {"node3": ["known_hosts"]}, check_mode=True)
    changing = _changing(render)
    unrelated = "node1 -> node2 (198.18.0.12): Permission denied (publickey)."
    assert _outcome(render, changing, [*FAILING, unrelated]) == (True, True, True)
    assert _template(render, FAIL, "{{ _failing }}") == [unrelated]
    # a changing source excuses its own pairs too, and an unreachable one its "-> *" line
    source = _render(tmp_path / "source", {"node1": ["authorized"]}, check_mode=True)
    lost = "node1 -> *: no result from node1 (unreachable, or the check did not run)"
    assert _outcome(source, _changing(source), [unrelated, lost, FAILING[1]]) == (True, True, True)
    assert _template(source, FAIL, "{{ _failing }}") == [FAILING[1]]


def test_check_mode_on_a_converged_cluster_fails_a_failing_pair(tmp_path: Path) -> None:
    """Nothing would change, so nothing a run writes can fix the pair: check mode fails as a run would."""
    render = _render(tmp_path, {}, check_mode=True)
    changing = _changing(render)
    assert changing == []
    assert _outcome(render, changing, FAILING) == (True, False, False)
    assert _outcome(render, changing, []) == (False, False, False)


def test_ssh_check_alone_in_check_mode_fails_a_failing_pair(tmp_path: Path) -> None:
    """playbooks/ssh_check.yml runs check.yml without main.yml: no write is registered, so no node is 'changing'."""
    render = _render(tmp_path, None, check_mode=True)
    changing = _changing(render)
    assert changing == []
    assert _outcome(render, changing, FAILING) == (True, False, False)


def test_a_real_run_fails_a_failing_pair_whatever_it_wrote(tmp_path: Path) -> None:
    """Outside check mode the set_fact is skipped: the run has written the trust, and a pair that still fails is a
    failure; the MPI launch test runs."""
    render = _render(tmp_path, {"node3": ["known_hosts", "authorized"]}, check_mode=False)
    changing = _changing(render)
    assert changing is None
    assert _outcome(render, changing, FAILING) == (True, False, False)
    assert _outcome(render, changing, []) == (False, False, False)
