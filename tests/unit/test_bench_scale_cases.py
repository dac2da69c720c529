"""The benchmarks of the SSH trust filters at 1,000 nodes and of the run directory scrub (benchmarks/ssh_mesh_scale.py,
benchmarks/run_dir_scrub.py): their inputs are shaped as the role and ansible-runner really produce them (checked
here against the role's own expressions and the runner's event reader, at a small scale), their answers are checked
before a figure counts, and selecting benchmarks by name. Figures are made up to sit on either side of the targets;
nothing here times anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import __main__ as bench_main
from benchmarks import common, run_dir_scrub, ssh_mesh_scale
from rdmaforge import ssh_mesh
from rdmaforge.runner import secrets
from rdmaforge.runner.events import EventLog
from tests.unit.role_vars import evaluate, role_vars

BY_BOTH = ["address", "name"]


def test_benchmarks_are_selected_by_name_and_an_unknown_name_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.selected(["run_dir_scrub", "ssh_mesh_scale", "run_dir_scrub"]) == ["run_dir_scrub",
                                                                                         "ssh_mesh_scale"]  # fmt: skip
    assert bench_main.selected([]) == bench_main.BENCHMARKS
    assert bench_main.main(["ssh_mesh_scale", "ssh_mesh"]) == 64
    said = capsys.readouterr().err
    assert "no benchmark 'ssh_mesh'; allowed values: lab_up, nccl_build" in said and "run_dir_scrub" in said
    assert not set(bench_main.LAB_BENCHMARKS) & {"ssh_mesh_scale", "run_dir_scrub"}  # no lab lock, no lab


def test_the_least_cpu_timing_is_the_figure() -> None:
    with common.stopwatch() as timing:
        sum(range(100_000))
    assert timing.wall > 0 and timing.cpu > 0
    runs = [common.Timing(1.0, 0.5), common.Timing(0.8, 0.7), common.Timing(3.0, 0.4)]
    assert common.least(runs) == common.Timing(3.0, 0.4)  # the wall time is the load's, the CPU time the work's
    assert runs[0] + runs[1] == common.Timing(1.8, 1.2)


def test_each_nodes_probes_are_what_the_roles_targets_expression_gives_it() -> None:
    """The built ``ssh_trust_probe`` of every node probes what roles/ssh_trust/vars/main.yml's ssh_trust_targets
    renders for it (the role's defaults: 8 peers of the ring, by address and name), with the real filters."""
    members = ssh_mesh_scale.cluster(12)
    hv = ssh_mesh_scale.hostvars(members, members)
    for node in ("node0001", "node0007", "node0012"):
        templar = role_vars("ssh_trust", {}, groups={"cluster": members}, hostvars=hv, inventory_hostname=node,
                            ansible_play_hosts_all=members, ansible_play_hosts=members)  # fmt: skip
        assert list(hv[node]["ssh_trust_probe"]["probes"]) == list(evaluate(templar, "ssh_trust_targets"))
    assert list(hv["node0012"]["ssh_trust_probe"]["probes"])[:4] == ["10.20.0.1", "node0001", "10.20.0.2", "node0002"]
    assert hv["node0003"]["ansible_facts"]["all_ipv4_addresses"] == ["10.20.0.3", "192.168.0.3"]


def test_the_expected_answers_are_counted_from_the_failing_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """4 nodes, checked all-pairs: node0002, failing, is the target of the 3 others, by 2 forms each."""
    monkeypatch.setattr(ssh_mesh_scale, "FAILING", {"node0002": (255, "Host key verification failed.")})
    members = ssh_mesh_scale.cluster(4)
    want = ssh_mesh_scale.expected(members, members[:2])
    assert want == {"coverage": {"probed": 12, "reached": 9, "failed": 3, "not_checked": 0}, "failure lines": 6,
                    "left out": 2, "largest share": 1}  # fmt: skip
    hv = ssh_mesh_scale.hostvars(members, members)
    table = ssh_mesh.matrix(members, hv, BY_BOTH, members)
    assert ssh_mesh_scale.check_matrix(table, want) == ""
    assert ssh_mesh_scale.check_failures(ssh_mesh.failures(members, hv, BY_BOTH, members), want) == ""
    table["pairs"]["node0001"]["node0002"] = True  # a filter that took a failed pair for reached
    assert ssh_mesh_scale.check_matrix(table, want) == (
        "matrix held {'probed': 12, 'reached': 10, 'failed': 2, 'other values': 0}, the inputs call for "
        "{'probed': 12, 'reached': 9, 'failed': 3, 'other values': 0}"
    )
    table["pairs"]["node0001"]["node0002"] = None  # or kept a pair not checked as null
    assert "'reached': 9, 'failed': 2, 'other values': 1}" in ssh_mesh_scale.check_matrix(table, want)
    table["pairs"]["node0001"]["node0002"] = False
    table["coverage"]["not_checked"] = -1  # or counted the pairs wrong
    assert ssh_mesh_scale.check_matrix(table, want) == (
        "matrix counted {'probed': 12, 'reached': 9, 'failed': 3, 'not_checked': -1}, the inputs call for "
        "{'probed': 12, 'reached': 9, 'failed': 3, 'not_checked': 0}"
    )
    assert "5 failure lines" in ssh_mesh_scale.check_failures(ssh_mesh.failures(members, hv, BY_BOTH)[1:], want)
    # 12 nodes, the role's 8 peers of the ring: 96 pairs probed of 132, node0002 the target of 8 of them.
    ring = ssh_mesh_scale.cluster(12)
    want = ssh_mesh_scale.expected(ring, ring)
    assert want["coverage"] == {"probed": 96, "reached": 88, "failed": 8, "not_checked": 36}
    assert ssh_mesh_scale.check_matrix(ssh_mesh.matrix(ring, ssh_mesh_scale.hostvars(ring, ring), BY_BOTH), want) == ""


def test_the_left_out_shares_must_read_each_left_out_node_once() -> None:
    members = ssh_mesh_scale.cluster(10)
    play = members[:3]
    want = ssh_mesh_scale.expected(members, play)
    assert (want["left out"], want["largest share"]) == (7, 3)
    hv = ssh_mesh_scale.hostvars(members, play)
    shares = {r: ssh_mesh.left_out_share(members, hv, play, play, r) for r in play}
    assert ssh_mesh_scale.check_shares(shares, members, play, want) == ""
    one_reader = {play[0]: members[3:], play[1]: [], play[2]: []}
    assert ssh_mesh_scale.check_shares(one_reader, members, play, want) == "largest share 7, the inputs call for 3"
    twice = {play[0]: members[3:], play[1]: members[3:4], play[2]: []}
    assert "read 8 nodes (7 distinct)" in ssh_mesh_scale.check_shares(twice, members, play, want)


def test_the_roles_expressions_rendered_by_ansible_give_the_filters_answers(tmp_path: Path) -> None:
    """RoleRender (real HostVars over a generated inventory) renders the role's set_fact as the filter answers on
    plain data: the ``ansible`` mode times the same answers."""
    from benchmarks.ansible_vars import RoleRender

    members = ssh_mesh_scale.cluster(6)
    hv = ssh_mesh_scale.hostvars(members, members)
    render = RoleRender.build(tmp_path / "inv", "ssh_trust", ssh_mesh_scale.EXAMPLE_GROUP_VARS, hv, "cluster")
    exprs = ssh_mesh_scale.matrix_facts()
    table = render.render(exprs["ssh_trust_matrix"], members[0], members)
    assert table == ssh_mesh.matrix(members, hv, BY_BOTH)
    # the next task prints the counts from that fact: 6 nodes checking 8 peers each check all 5 others
    render.register(members[0], "ssh_trust_matrix", table)
    tasks = ssh_mesh_scale._tasks("check.yml")
    (debug,) = [t for t in tasks if t.get("name") == "Say how much of the mesh was checked"]
    counts = render.render(debug["vars"]["ssh_trust_coverage"], members[0], members)
    assert counts == {"probed": 30, "reached": 30, "failed": 0, "not_checked": 0}
    assert render.render(exprs["ssh_trust_failing_pairs"], members[0], members) == []
    assert render.render("{{ ansible_user }}", members[0], members) == "root"  # the example's group_vars


def figures_ssh(seconds: float, rss: float, wrong: str = "") -> dict[str, Any]:
    cases = {case: {"seconds": 2 * seconds, "cpu": seconds, "all_cpu": 10 * seconds, "wrong": ""}
             for case in ssh_mesh_scale.CASES["ansible"]}  # fmt: skip
    cases["failures"]["wrong"] = wrong
    return {**cases, "rss_mib": rss, "inputs_rss_mib": rss / 2}


def test_ssh_mesh_rows_pass_under_their_targets_and_fail_over_them() -> None:
    fast = ssh_mesh_scale.judge("plain", figures_ssh(0.01, 60.0), "1.0 before / 1.0 after")
    assert [r.verdict for r in fast] == ["PASS"] * 4
    assert fast[0].name == "ssh_trust check, 1000 nodes: matrix, filter on plain data" and fast[0].unit == "CPU s"
    assert fast[0].detail.startswith("wall 0.020 s; best of 3; load average 1.0 before")
    assert "took longest, best of 3 (990 nodes left out), wall 0.020 s; 0.10 CPU s for them all" in fast[2].detail
    slow = ssh_mesh_scale.judge("ansible", figures_ssh(30.0, 900.0), "1.0 before / 1.0 after")
    assert [r.verdict for r in slow] == ["FAIL"] * 5


def test_an_ssh_mesh_figure_with_a_wrong_answer_fails_however_fast() -> None:
    rows = ssh_mesh_scale.judge("plain", figures_ssh(0.01, 60.0, wrong="1 failure lines"), "1.0 before / 1.0 after")
    assert [r.verdict for r in rows] == ["PASS", "FAIL", "PASS", "FAIL"]
    assert rows[1].detail.startswith("wrong answer, not a measurement: 1 failure lines")
    assert rows[3].detail.startswith("wrong answer in failures: not a measurement")


@pytest.fixture
def small_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, bytes]]:
    """A run directory of 400 events, a secret every second task (each way of showing one at least once)."""
    monkeypatch.setattr(run_dir_scrub, "FILES", 400)
    monkeypatch.setattr(run_dir_scrub, "SECRET_EVERY", 2)
    run_dir = tmp_path / "run"
    return run_dir, run_dir_scrub.build(run_dir, total=2_000_000)


def test_the_run_directory_is_what_ansible_runner_leaves(small_run: tuple[Path, dict[str, bytes]]) -> None:
    run_dir, _ = small_run
    events = sorted((run_dir / "ansible" / "job_events").iterdir(), key=lambda p: int(p.name.split("-")[0]))
    assert len(events) == 400 and events[0].name == "1-00000000-0000-0001-0000-000000000001.json"
    assert sorted(p.name for p in (run_dir / "ansible").iterdir()) == ["command", "job_events", "rc", "status",
                                                                      "stdout"]  # fmt: skip
    log = EventLog()
    for path in events:
        event = json.loads(path.read_text())
        assert f"{event['counter']}-{event['uuid']}.json" == path.name
        log.handle(event)
    assert log.hosts == run_dir_scrub.hosts()
    assert [p.message.splitlines()[0] for p in log.problems] == ["unexpected key file content:"]
    total = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    assert 1_800_000 < total < 2_200_000  # the command outputs make up the size asked for


def test_the_session_secrets_and_their_leaking_forms() -> None:
    found = run_dir_scrub.session_secrets()
    assert "4096" not in found and "erdma" not in found  # a setting and a plain variable: no secrets
    assert {"Tr0ub4dor&3-become", 'say "friend" and enter', "ghp_R2d2C3poBb8L3ia0rgAnaSoloChewie42"} <= found
    forms = run_dir_scrub.leak_forms(found)
    assert {b'say \\"friend\\" and enter', b"Tr0ub4dor&amp;3-become", b"login deploy-bot",
            b"pip-idx-Pa55w0rd"} <= forms  # fmt: skip


def test_the_scrubber_cleans_what_was_planted_and_the_rescan_reads_what_came_after(
    small_run: tuple[Path, dict[str, bytes]],
) -> None:
    run_dir, planted = small_run
    values, forms = run_dir_scrub.session_secrets(), run_dir_scrub.leak_forms(run_dir_scrub.session_secrets())
    shown = {way for way in run_dir_scrub.SECRET_WAYS if any(
        marker in data for data in planted.values() for marker in {
            "token": [b"hf_kTzQ"], "config": [b"Tr0ub4dor"], "pip": [b"pip-idx-"], "env": [b"ghp_R2d2"],
            "netrc": [b"netrc-Secr3t"], "key": [b"BEGIN OPENSSH PRIVATE KEY"]}[way])}  # fmt: skip
    assert shown == set(run_dir_scrub.SECRET_WAYS)
    assert {"ansible/stdout", "ansible/command"} <= set(planted)
    assert run_dir_scrub.leaks(run_dir, forms) == sorted(planted)
    record: dict[Path, secrets.Scrubbed] = {}
    assert sorted(str(p.relative_to(run_dir)) for p in secrets.scrub_tree(run_dir, values, record)) == sorted(planted)
    assert run_dir_scrub.leaks(run_dir, forms) == []
    written = run_dir_scrub.after_the_run(run_dir)
    assert run_dir_scrub.leaks(run_dir, forms) == ["verify/junit.xml", "verify/pytest.log"]
    assert sorted(secrets.scrub_tree(run_dir, values, record)) == sorted(written)


def figures_scrub(scale: float, wrong: str = "") -> dict[str, Any]:
    def step(seconds: float) -> dict[str, Any]:
        return {"seconds": seconds * scale, "cpu": seconds * scale, "wrong": ""}

    return {"secrets": 7, "files": 5004, "bytes": 56_000_000, "planted": 17, "scrub": {**step(1.0), "wrong": wrong},
            "rescan": step(0.2), "rescan without the record": step(1.2), "live": {**step(2.0), "events": 5000},
            "rss_mib": 40.0 * scale}  # fmt: skip


def test_scrub_rows_pass_under_their_targets_fail_over_them_and_on_a_wrong_scrub() -> None:
    rows = run_dir_scrub.judge(figures_scrub(1.0), "1.0 before / 1.0 after")
    assert [r.verdict for r in rows] == ["PASS", "PASS", "measured (reference, not judged)", "PASS", "PASS"]
    assert rows[0].value == 56.0 and rows[0].name == "run directory scrub after the run, 5004 files, 56 MB: speed"
    slow = run_dir_scrub.judge(figures_scrub(10.0), "1.0 before / 1.0 after")
    assert [r.verdict for r in slow] == ["FAIL", "FAIL", "measured (reference, not judged)", "FAIL", "FAIL"]
    wrong = run_dir_scrub.judge(figures_scrub(1.0, wrong="secrets left in 1 files (ansible/stdout)"), "1.0 / 1.0")
    assert [r.verdict for r in wrong] == ["FAIL", "PASS", "measured (reference, not judged)", "PASS", "FAIL"]
    assert wrong[0].detail.startswith("wrong, not a measurement: secrets left in 1 files (ansible/stdout)")
