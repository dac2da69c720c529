"""The CLI's runner layer, piece by piece: exit codes from stats, extra vars, secrets, run directories and their
rotation, JUnit XML, and the progress display fed with recorded ansible-runner events."""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rdmaforge.commands import bench, provision
from rdmaforge.errors import UserError
from rdmaforge.plain_data import too_deep
from rdmaforge.runner import artifacts, command, execute, extravars, junit, secrets
from rdmaforge.runner.events import EventLog, HostChange, HostProblem, change_message, result_message
from rdmaforge.runner.exit_codes import EPILOG, ExitCode, for_hosts
from rdmaforge.runner.progress import Progress, duration
from rdmaforge.runner.recap import (
    CHANGES_SHOWN,
    MESSAGE_LINES,
    from_stats,
    message_lines,
    one_line,
    render,
    would_change_lines,
)

# --- exit codes -------------------------------------------------------------------------------------------

STATS = {
    "ok": {"node1": 10, "node2": 4, "node10": 1},
    "changed": {"node1": 2},
    "failures": {"node2": 1},
    "dark": {},
    "skipped": {"node1": 3},
    "rescued": {},
    "ignored": {"node10": 1},
    "processed": {"node1": 1, "node2": 1, "node10": 1},
}


def outcome(
    stats: dict[str, dict[str, int]] | None, problems: Sequence[HostProblem] = (), rc: int = 2
) -> execute.Outcome:
    log = EventLog()
    log.problems = list(problems)
    recaps = from_stats(stats) if stats else {}
    return execute.Outcome("failed" if rc else "successful", rc, log, recaps, Path("/nonexistent"), 1.0)


def test_recap_from_stats_counts_every_host_in_natural_order() -> None:
    recaps = from_stats(STATS)
    assert list(recaps) == ["node1", "node2", "node10"]
    assert recaps["node1"].ok == 10 and recaps["node1"].changed == 2 and recaps["node1"].skipped == 3
    assert recaps["node2"].failed == 1 and recaps["node2"].status == "FAILED"
    assert recaps["node10"].ignored == 1 and recaps["node10"].status == "ok"
    assert recaps["node1"].status == "changed"
    # A check run's changed host changed nothing: it would change; the others read as in a run.
    checked = from_stats(STATS, check=True)
    assert {h: r.to_dict()["status"] for h, r in checked.items()} == {
        "node1": "would_change", "node2": "FAILED", "node10": "ok"}  # fmt: skip
    assert "check" not in checked["node1"].to_dict()
    table = render(recaps, [HostProblem("node2", "Install packages", "apt", "No package matching 'x'")])
    assert "node2: failed: Install packages: No package matching 'x'" in table
    assert table.splitlines()[0].split() == ["host", "ok", "changed", "failed", "unreachable", "skipped", "rescued",
                                             "ignored", "status"]  # fmt: skip


def test_a_host_the_run_stopped_early_or_never_ran_is_not_shown_ok(tmp_path: Path) -> None:
    """Issue 18: a host Ansible stopped without a failure of its own ("NO MORE HOSTS LEFT") is STOPPED, not ok;
    one with no task result at all is NOT_RUN. Neither passes in the JUnit XML."""
    log = EventLog()
    for event in [ev("runner_on_ok", "node1"), ev("runner_on_failed", "node2", task="Check", res={"msg": "bad"}),
                  ev("playbook_on_no_hosts_remaining"), ev("playbook_on_stats", ok={"node1": 3, "node2": 2},
                  failures={"node2": 1}, processed={"node1": 1, "node2": 1, "node3": 1})]:  # fmt: skip
        log.handle(event)
    assert log.stopped_early
    recaps = from_stats(log.stats, log.hosts, log.hosts if log.stopped_early else ())
    assert {h: r.status for h, r in recaps.items()} == {"node1": "STOPPED", "node2": "FAILED", "node3": "NOT_RUN"}
    assert recaps["node1"].to_dict()["status"] == "STOPPED" and "stopped" not in recaps["node1"].to_dict()
    assert [line.split()[-1] for line in render(recaps).splitlines()[2:]] == ["STOPPED", "FAILED", "NOT_RUN"]
    cases = {c.name: c for c in command.host_cases(
        execute.Outcome("failed", 2, log, recaps, tmp_path, 1.0), "provision")}  # fmt: skip
    assert {n: c.outcome for n, c in cases.items()} == {"node1": "skipped", "node2": "failed", "node3": "skipped"}
    assert command.playbook_exit(execute.Outcome("failed", 2, log, recaps, tmp_path, 1.0)) == ExitCode.HOST_FAILED
    # A run that went on to its end: a host with results is ok as before.
    assert from_stats(log.stats, log.hosts)["node1"].status == "ok"


@pytest.mark.parametrize(
    ("dark", "failures", "expected"),
    [
        ({}, {}, ExitCode.OK),
        ({}, {"node2": 1}, ExitCode.HOST_FAILED),
        ({"node3": 1}, {}, ExitCode.UNREACHABLE),
        ({"node3": 1}, {"node2": 1}, ExitCode.UNREACHABLE),
    ],
)
def test_exit_code_from_stats(dark: dict[str, int], failures: dict[str, int], expected: ExitCode) -> None:
    stats = {**STATS, "dark": dark, "failures": failures}
    assert command.playbook_exit(outcome(stats, rc=0 if expected == ExitCode.OK else 2)) == expected


def test_ansible_that_never_reached_a_host_is_an_error_and_ctrl_c_is_130() -> None:
    assert command.playbook_exit(outcome(None, rc=4)) == ExitCode.ERROR  # syntax error: no stats at all
    assert command.playbook_exit(outcome({**STATS, "failures": {}}, rc=1)) == ExitCode.ERROR  # hosts fine, rc not
    interrupted = outcome(STATS)
    interrupted.status = "canceled"
    assert command.playbook_exit(interrupted) == ExitCode.INTERRUPTED


def test_a_drift_check_exits_8_only_where_the_run_would_otherwise_exit_0() -> None:
    drifted = outcome({**STATS, "failures": {}}, rc=0)
    assert provision.drift_exit(command.playbook_exit(drifted), drifted.recaps) == ExitCode.DRIFT
    clean = outcome({**STATS, "failures": {}, "changed": {}}, rc=0)
    assert provision.drift_exit(command.playbook_exit(clean), clean.recaps) == ExitCode.OK
    failed = outcome(STATS)  # node1 would change, node2 failed: the failure is what CI must see
    assert provision.drift_exit(command.playbook_exit(failed), failed.recaps) == ExitCode.HOST_FAILED


def test_exit_codes_are_documented_in_one_epilog() -> None:
    assert for_hosts([], []) == ExitCode.OK
    for code in (0, 1, 2, 3, 4):
        assert f"{code} " in EPILOG


def test_bench_exit_from_the_verdict_fact_and_any_failed_task_is_a_broken_host() -> None:
    """rdmaforge bench runs the role with benchmark_fail_on_verdict=false: the verdict arrives as a fact, so no task
    fails for it, and a failed task is a host problem whatever its name or message says."""
    clean = {**STATS, "failures": {}}
    assert bench.bench_exit(outcome(clean, rc=0), "fail") == ExitCode.BELOW_THRESHOLD
    assert bench.bench_exit(outcome(clean, rc=0), "incomplete") == ExitCode.INCOMPLETE
    # A failure on a host outranks the verdict, an unreachable host outranks everything.
    stats = {**STATS, "failures": {"node1": 1}}
    lookalike = HostProblem("node1", "Fail when the benchmark verdict is not pass", "ansible.builtin.fail",
                            "benchmark fail: e2e: fail: linearity 0.40 is below 1000.0")  # fmt: skip
    assert bench.bench_exit(outcome(stats, [lookalike]), "fail") == ExitCode.HOST_FAILED
    other = HostProblem("node1", "Install torch", "ansible.builtin.pip", "No matching distribution")
    assert bench.bench_exit(outcome(stats, [other]), "pass") == ExitCode.HOST_FAILED
    down = {**stats, "dark": {"node3": 1}}
    assert bench.bench_exit(outcome(down, [other]), "fail") == ExitCode.UNREACHABLE
    # A baseline set in the inventory that the role refused before measuring: it publishes why as a fact, and that
    # is bad input, not a broken host; a failed task that merely looks like the refusal is still a broken host.
    refusal = HostProblem("node1", "Stop before anything is measured", "ansible.builtin.fail",
                          "benchmark baseline /x: cannot read it")  # fmt: skip
    assert bench.bench_exit(outcome(stats, [refusal]), None) == ExitCode.HOST_FAILED
    refused = outcome(stats, [refusal])
    refused.events.facts["node1"] = {bench.BASELINE_PROBLEM_FACT: "benchmark baseline /x: cannot read it"}
    assert bench.bench_exit(refused, None) == ExitCode.BAD_INPUT
    assert bench.bench_exit(outcome({**STATS, "failures": {}}, rc=0), "pass") == ExitCode.OK


def test_bench_exit_without_a_verdict_is_never_success() -> None:
    """A clean play that published no benchmark_results (`--tags` that select none of the role's tasks, a play that
    never reached report.yml) measured nothing: not judged (5), as the JUnit case already says, never exit 0."""
    clean = outcome({**STATS, "failures": {}}, rc=0)
    assert command.playbook_exit(clean) == ExitCode.OK
    assert bench.bench_exit(clean, None) == ExitCode.INCOMPLETE
    assert bench.bench_exit(clean, "unknown") == ExitCode.INCOMPLETE  # a verdict no table knows is no pass either
    assert bench.verdict_case(None).outcome == "error"


def test_bench_require_names_what_is_allowed() -> None:
    assert bench.required_components("nccl-tests, e2e") == ["nccl-tests", "e2e"]
    assert bench.required_components(None) is None
    allowed = "nccl-tests, transport, e2e, accelerator, baseline"
    with pytest.raises(ValueError, match=rf"unknown component\(s\) gpu; allowed: {allowed}"):
        bench.required_components("e2e,gpu")


def test_bench_junit_reports_the_verdict_not_a_broken_host() -> None:
    result = outcome({**STATS, "failures": {}}, rc=0)  # the verdict fails no task under rdmaforge bench
    cases = {c.name: c for c in command.host_cases(result, "rdmaforge.bench")}
    assert cases["node1"].outcome == "passed"
    component = {"name": "e2e", "status": "fail", "required": True, "reason": "linearity low", "value": 0.4,
                 "threshold": 0.8, "unit": "linearity", "on": "gloo on CPU, 2 nodes, 2 ranks"}  # fmt: skip
    results = {"verdict": "fail", "reasons": ["e2e: fail: linearity low"], "components": [component]}
    verdict = bench.verdict_case(results)
    assert verdict.outcome == "failed" and verdict.message == "fail: e2e: fail: linearity low"
    assert verdict.details == (
        "e2e: fail (required), 0.4 linearity against 0.8 linearity, on gloo on CPU, 2 nodes, 2 ranks: linearity low"
    )
    assert bench.verdict_case({"verdict": "incomplete", "reasons": ["x"], "components": []}).outcome == "skipped"
    assert bench.verdict_case(None).outcome == "error"


# --- extra vars -------------------------------------------------------------------------------------------


def test_extra_vars_pairs_json_and_files(tmp_path: Path) -> None:
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text("benchmark_min_efficiency: 0.9\nvault_password: s3cr3t-from-file\n")
    sources = extravars.parse(["a=1 b='two words'", '{"c": [1, 2], "d": {"e": true}}', f"@{vars_file}", "a=3"])
    assert sources[0].inline == {"a": "1", "b": "two words"}
    assert sources[1].inline == {"c": [1, 2], "d": {"e": True}}
    assert sources[2].file == vars_file.resolve()
    merged = extravars.merged(sources)
    assert merged == {"a": "3", "b": "two words", "c": [1, 2], "d": {"e": True}, "benchmark_min_efficiency": 0.9,
                      "vault_password": "s3cr3t-from-file"}  # fmt: skip


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("novalue", "is not KEY=VALUE"),
        ("1x=2", "not a valid variable name"),
        ("@/nonexistent.yml", "no such file"),
        ("[1, 2]", "must be a mapping"),
        ("{bad", "not valid JSON or YAML"),
        ("", "needs KEY=VALUE"),
        # Past Python's recursion limit (the YAML parser's RecursionError), and under it but deeper than any
        # variable (json.dumps and the secret scrubber would recurse through it later).
        pytest.param('{"a": ' + "[" * 3000 + "]" * 3000 + "}", "nested too deeply", id="lists-3000"),
        pytest.param('{"a": ' + "[" * 150 + "]" * 150 + "}", "nested too deeply", id="lists-150"),
        pytest.param("{a: " + "{b: " * 120 + "1" + "}" * 121, "nested too deeply", id="mappings-121"),
    ],
)
def test_bad_extra_vars_are_refused_with_the_argument(argument: str, message: str) -> None:
    with pytest.raises(extravars.ExtraVarsError, match=message) as raised:
        extravars.parse_one(argument)
    assert isinstance(raised.value, UserError)  # rdmaforge.cli: one line, exit 64
    assert len(str(raised.value)) < 200 and str(raised.value).startswith(f"-e {argument[:20]}")


def test_extra_vars_nested_as_deep_as_allowed_are_read() -> None:
    deepest = extravars.parse_one('{"a": ' + "[" * 99 + "]" * 99 + "}").inline
    assert not too_deep(deepest) and too_deep({"b": deepest})


def test_inline_extra_vars_go_through_private_files_in_order(tmp_path: Path) -> None:
    vars_file = tmp_path / "v.json"
    vars_file.write_text("{}")
    sources = extravars.parse(["db_password=hunter2-secret", f"@{vars_file}"])
    args = extravars.to_cmdline(sources, tmp_path)
    assert args == ["-e", f"@{tmp_path / 'extravars-0.json'}", "-e", f"@{vars_file.resolve()}"]
    private = tmp_path / "extravars-0.json"
    assert json.loads(private.read_text()) == {"db_password": "hunter2-secret"}
    assert private.stat().st_mode & 0o777 == 0o600


def test_runner_keeps_env_empty_host_keys_checked_and_project_config(tmp_path: Path) -> None:
    request = execute.Request(inventory=tmp_path, playbook=Path("/p.yml"), limit="node1", tags="mpi", check=True,
                              extra_vars=extravars.parse(["x=1"]))  # fmt: skip
    kwargs = execute.runner_kwargs(request, tmp_path / "run", tmp_path)
    assert kwargs["suppress_env_files"] is True and "extravars" not in kwargs and "passwords" not in kwargs
    assert kwargs["cmdline"].endswith("--check") and "x=1" not in kwargs["cmdline"]
    assert kwargs["limit"] == "node1" and kwargs["tags"] == "mpi" and kwargs["ident"] == execute.IDENT
    env = execute.runner_env({})
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True" and env["ANSIBLE_CONFIG"].endswith("ansible.cfg")
    assert execute.runner_env({"ANSIBLE_HOST_KEY_CHECKING": "False"})["ANSIBLE_HOST_KEY_CHECKING"] == "False"


# --- secrets ----------------------------------------------------------------------------------------------


def test_secret_names_and_values() -> None:
    for name in ("ansible_password", "ansible_become_pass", "db_passwd", "GITHUB_TOKEN", "aws_secret_access_key",
                 "api_key", "ssh_private_key", "registry_credentials", "ansible_ssh_pass"):  # fmt: skip
        assert secrets.is_secret_name(name), name
    for name in ("benchmark_min_efficiency", "rdma_repos_erdma_gpg_fingerprint", "passthrough", "bypass_cache",
                 "ssh_trust_rotate", "SSH_AUTH_SOCK_DIR"):  # fmt: skip
        assert not secrets.is_secret_name(name), name
    found = secrets.secret_values(
        {
            "db": {"password": "hunter2-db"},
            "api_token": "tok-12345",
            "nodes": [{"bmc_password": "bmc-pw-1"}],
            "ansible_password": "abc",
            "plain": "visible-value",
        }  # fmt: skip
    )
    assert found == {"hunter2-db", "tok-12345", "bmc-pw-1"}  # "abc" is too short to replace safely


def test_scrubbing_removes_secrets_from_every_file_and_the_recorded_environment(tmp_path: Path) -> None:
    events = tmp_path / "ansible" / "job_events"
    events.mkdir(parents=True)
    (events / "1-x.json").write_text(json.dumps({"stdout": 'pw hun"ter2 here', "res": {"msg": 'hun"ter2'}}))
    (tmp_path / "ansible" / "stdout").write_text("token tok-12345 printed\n")
    command_file = tmp_path / "ansible" / "command"
    command_file.write_text(json.dumps({"command": ["ansible-playbook"], "env": {"CI_JOB_TOKEN": "ci-tok",
                                        "HOME": "/root", "URL": "https://u:tok-12345@h"}}))  # fmt: skip
    secrets.scrub_command(command_file, ["tok-12345"])
    changed = secrets.scrub_tree(tmp_path, ['hun"ter2', "tok-12345"])
    assert {p.name for p in changed} == {"1-x.json", "stdout"}
    text = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert "hun" not in text and "tok-12345" not in text and "ci-tok" not in text
    assert json.loads(command_file.read_text())["env"]["HOME"] == "/root"
    assert secrets.env_files(tmp_path) == []
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "extravars").write_text("{}")
    assert secrets.env_files(tmp_path) == [tmp_path / "env" / "extravars"]


# --- run directories --------------------------------------------------------------------------------------


def test_run_directories_are_named_by_time_and_rotated_newest_kept(tmp_path: Path) -> None:
    start = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    made = [artifacts.new_run_dir(tmp_path, "bench", start + dt.timedelta(minutes=i)) for i in range(5)]
    same_second = artifacts.new_run_dir(tmp_path, "bench", start + dt.timedelta(minutes=4))
    assert made[0].name == "20260102T030405Z-bench" and same_second.name == "20260102T030805Z-bench-2"
    assert made[0].stat().st_mode & 0o777 == 0o700
    (tmp_path / "notes").mkdir()  # not a run: never rotated away
    (tmp_path / "latest").symlink_to(made[0])
    removed = artifacts.rotate(tmp_path, keep=3, current=same_second)
    assert removed == made[:3]
    assert artifacts.run_dirs(tmp_path) == [made[3], made[4], same_second]
    assert (tmp_path / "notes").is_dir()
    assert artifacts.latest(tmp_path, "bench") == same_second and artifacts.latest(tmp_path, "doctor") is None
    with pytest.raises(ValueError):
        artifacts.rotate(tmp_path, keep=0)


def test_runs_of_hyphenated_commands_are_rotated_and_found(tmp_path: Path) -> None:
    """remove-node, upgrade-nccl and rollback-nccl runs never matched the run name's pattern: --keep left them all."""
    start = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    made = [artifacts.new_run_dir(tmp_path, "upgrade-nccl", start + dt.timedelta(minutes=i)) for i in range(3)]
    assert artifacts.run_dirs(tmp_path) == made
    assert artifacts.rotate(tmp_path, keep=1, current=made[-1]) == made[:2]
    assert artifacts.latest(tmp_path, "upgrade-nccl") == made[-1] and artifacts.latest(tmp_path, "upgrade") is None


def test_a_live_run_of_another_process_is_never_rotated_away(tmp_path: Path) -> None:
    """Two runs with their own inventories may share a runs directory; one's rotation deleted the other's live run
    directory (its ansible/status then missing: exit 64). A run holds its directory's lock while it lives."""
    code = ("import sys, time; from pathlib import Path; from rdmaforge.runner import artifacts; "
            "print(artifacts.new_run_dir(Path(sys.argv[1]), 'provision'), flush=True); time.sleep(60)")  # fmt: skip
    other = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None
        live = Path(other.stdout.readline().strip())
        later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
        mine = [artifacts.new_run_dir(tmp_path, "provision", later + dt.timedelta(minutes=i)) for i in range(2)]
        assert artifacts.rotate(tmp_path, keep=1, current=mine[-1]) == [mine[0]]
        assert live.is_dir()
    finally:
        other.kill()
        other.wait()
    assert artifacts.rotate(tmp_path, keep=1, current=mine[-1]) == [live]  # ended: rotated as any old run


def test_the_current_run_survives_rotation_even_when_older(tmp_path: Path) -> None:
    old = artifacts.new_run_dir(tmp_path, "provision", dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    artifacts.new_run_dir(tmp_path, "provision", dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert artifacts.rotate(tmp_path, keep=1, current=old) == []


# --- JUnit ------------------------------------------------------------------------------------------------


def test_junit_xml_structure(tmp_path: Path) -> None:
    cases = [
        junit.Case("node1", "rdmaforge.provision"),
        junit.Case(
            "node2",
            "rdmaforge.provision",
            outcome="failed",
            message="Install: no package\nsecond line",
            details="failed: Install: no package\x07",
        ),  # fmt: skip
        junit.Case("node3", "rdmaforge.provision", outcome="error", message="unreachable"),
        junit.Case("benchmark verdict", "rdmaforge.bench", outcome="skipped", message="skipped: no GPU"),
    ]
    path = junit.write(tmp_path / "out" / "junit.xml", "rdmaforge provision", cases, 12.5,
                       dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), {"exit_code": "3"})  # fmt: skip
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "4"
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("name"), suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped"),
            suite.get("time"), suite.get("timestamp")) == ("rdmaforge provision", "4", "1", "1", "1", "12.500",
                                                           "2026-01-02T03:04:05")  # fmt: skip
    props = suite.find("properties")
    assert props is not None and props[0].attrib == {"name": "exit_code", "value": "3"}
    testcases = suite.findall("testcase")
    assert [t.get("name") for t in testcases] == ["node1", "node2", "node3", "benchmark verdict"]
    assert list(testcases[0]) == []
    failure = testcases[1].find("failure")
    assert failure is not None and failure.get("message") == "Install: no package" and failure.get("type") == "failed"
    assert failure.text == "failed: Install: no package"  # the control character is dropped (invalid XML)
    assert testcases[2].find("error") is not None and testcases[3].find("skipped") is not None


# --- progress ---------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ev(event: str, host: str | None = None, **data: Any) -> dict[str, Any]:
    """An event as ansible-runner hands it to event_handler."""
    event_data: dict[str, Any] = dict(data)
    if host is not None:
        event_data["host"] = host
    return {"event": event, "uuid": "u", "counter": 1, "event_data": event_data}


RECORDED = [
    ev("playbook_on_start"),
    ev("playbook_on_play_start", name="NCCL, built once"),
    ev("playbook_on_task_start", name="nccl_build : Compile NCCL", task="Compile NCCL"),
    ev("runner_on_start", "node1", task="Compile NCCL"),
    ev("runner_on_start", "node2", task="Compile NCCL"),
    ev("runner_on_skipped", "node2", task="Compile NCCL"),
    "tick:20",
    ev("runner_on_async_poll", "node1", task="async_status", res={"started": 1, "finished": 0, "ansible_job_id": "j1"}),
    "tick:30",
    ev("runner_on_async_poll", "node1", task="async_status", res={"started": 1, "finished": 0}),
    "tick:45",
    ev("runner_on_async_poll", "node1", task="async_status", res={"started": 1, "finished": 0}),
    "tick:30",
    ev("runner_on_ok", "node1", task="Compile NCCL", res={"changed": True}),
    ev("playbook_on_task_start", name="rdma_core : Install the packages"),
    ev("runner_on_start", "node1"),
    ev("runner_on_start", "node2"),
    ev("runner_on_start", "node3"),
    ev("runner_on_ok", "node1", res={"changed": False}),
    ev("runner_on_failed", "node2", res={"msg": "No package matching 'ibverbs-utils' is available\ndetails"}),
    ev("runner_on_unreachable", "node3", res={"msg": "Failed to connect to the host via ssh: refused"}),
    ev("playbook_on_task_start", name="Check (errors ignored)"),
    ev("runner_on_failed", "node1", ignore_errors=True, res={"msg": "ignored"}),
    ev("playbook_on_stats", ok={"node1": 2}),
]


def replay(tty: bool) -> tuple[str, Progress]:
    out = io.StringIO()
    clock = FakeClock()
    progress = Progress(out, tty=tty, clock=clock, poll_every=60, width=lambda: 200)
    for event in RECORDED:
        if isinstance(event, str):
            clock.now += float(event.split(":")[1])
        else:
            progress.handle(event)
    progress.close()
    return out.getvalue(), progress


def test_plain_progress_from_recorded_events() -> None:
    text, progress = replay(tty=False)
    lines = text.splitlines()
    assert "\x1b" not in text and "\r" not in text  # CI logs: plain lines only
    assert lines[0] == "PLAY [NCCL, built once]"
    assert lines[1] == "[   0.0s] TASK [nccl_build : Compile NCCL]"
    # The async build says it is still running, at most once a minute, with the time since it started.
    assert [line.strip() for line in lines if "still running" in line] == [
        "node1: still running (20.0s)",
        "node1: still running (1m35s)",
    ]
    assert "ok=1 changed=1 skipped=1 (2m05s)" in text
    assert "  FAILED node2: No package matching 'ibverbs-utils' is available" in lines
    assert "  UNREACHABLE node3: Failed to connect to the host via ssh: refused" in lines
    assert "ok=1 failed=1 unreachable=1 (0.0s)" in text
    assert "ok=0 ignored=1" in text and "FAILED node1" not in text
    assert progress.tasks == 3


def test_terminal_progress_redraws_one_status_line() -> None:
    text, _ = replay(tty=True)
    assert "\r\x1b[K" in text
    assert "node1 1m35s" in text  # elapsed time of the async task on the status line
    assert "+ nccl_build : Compile NCCL  ok=1 changed=1 skipped=1  (2m05s)" in text
    assert "x rdma_core : Install the packages  ok=1 failed=1 unreachable=1  (0.0s)" in text
    assert "still running" not in text


def test_tick_redraws_elapsed_time_without_events() -> None:
    out, clock = io.StringIO(), FakeClock()
    progress = Progress(out, tty=True, clock=clock, width=lambda: 200)
    progress.handle(ev("playbook_on_task_start", name="Build"))
    progress.handle(ev("runner_on_start", "node1"))
    progress.handle(ev("runner_on_async_poll", "node1", res={}))
    clock.now += 125
    progress.tick()
    assert out.getvalue().endswith("[2m05s] Build  ok=0  running on 1  node1 2m05s")


def test_durations_and_result_messages() -> None:
    assert [duration(s) for s in (0.25, 59.9, 61, 3725)] == ["0.2s", "59.9s", "1m01s", "1h02m"]
    assert result_message({"msg": "", "stderr": "E: broken\n"}) == "E: broken"
    loop = {"results": [{"failed": True, "msg": "a"}, {"failed": False}, {"failed": True, "msg": "b"}]}
    assert result_message(loop) == "a; b"
    assert result_message({"rc": 3}) == "exit status 3"


def test_event_log_keeps_failures_unreachable_and_published_facts() -> None:
    log = EventLog()
    for event in RECORDED:
        if not isinstance(event, str):
            log.handle(event)
    log.handle(ev("runner_on_ok", "node1", res={"ansible_facts": {"benchmark_artifacts": "/a/b", "ansible_lo": {}}}))
    assert [p.host for p in log.failures()] == ["node2"] and [p.host for p in log.unreachable()] == ["node3"]
    assert log.fact("benchmark_artifacts") == "/a/b" and log.fact("ansible_lo") is None
    assert log.hosts == ["node1", "node2", "node3"] and log.stats is not None and log.stats["ok"] == {"node1": 2}


def test_warning_lines_of_debug_tasks_are_kept_once_and_printed_under_the_recap() -> None:
    """A check that left nodes out says so with a WARNING debug line (roles ssh_trust, mpi_launch, rdma_core); the
    recap repeats it once, so it is not lost in the scroll. Other debug output and other modules' msg are not."""
    log = EventLog()
    warn = "WARNING: SSH trust not checked for node3 (unreachable or failed earlier in this\nrun)"
    log.handle(ev("runner_on_ok", "node1", task_action="ansible.builtin.debug", res={"msg": warn}))
    log.handle(ev("runner_on_ok", "node1", task_action="ansible.builtin.debug", res={"msg": warn}))
    log.handle(ev("runner_on_ok", "node2", task_action="ansible.builtin.debug",
                  res={"msg": ["SSH trust: 2 node pairs reached", "WARNING node2: no RDMA device"]}))  # fmt: skip
    log.handle(ev("runner_on_ok", "node1", task_action="ansible.builtin.debug", res={"msg": "all fine"}))
    log.handle(ev("runner_on_ok", "node1", task_action="ansible.builtin.command", res={"msg": "WARNING not debug"}))
    assert log.warnings == [
        "WARNING: SSH trust not checked for node3 (unreachable or failed earlier in this run)",
        "WARNING node2: no RDMA device",
    ]
    table = render(from_stats(STATS), [], log.warnings)
    assert table.splitlines()[-2:] == [f"  {line}" for line in log.warnings]


@pytest.mark.parametrize("value", ["0", "-3", "two", "1.5"])
def test_keep_must_be_a_count_of_one_or_more(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--keep 0 would delete the run being started; it was an error after argument parsing (exit 1), now a usage
    error naming the option (exit 64) before anything runs, as every other bad argument."""
    from rdmaforge.cli import main

    hosts = tmp_path / "hosts.yml"
    hosts.write_text("all:\n  hosts:\n    node1: {}\n")
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "-i", str(hosts), "--runs-dir", str(tmp_path / "runs"), f"--keep={value}"])
    assert exited.value.code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "argument --keep:" in err and repr(value) in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_a_check_runs_changes_are_listed_host_by_host_and_cut_after_the_first_ten() -> None:
    changes = [HostChange("node10", "nccl_env : Write /etc/nccl.conf", "/etc/nccl.conf")]
    changes += [HostChange("node2", f"os_packages : Step {i}", "") for i in range(12)]
    lines = would_change_lines(changes)
    assert lines[0] == "  node2: would change: os_packages : Step 0"  # node2 before node10; no ": " without a message
    assert len(lines) == 10 + 1 + 1 == CHANGES_SHOWN + 2
    assert lines[10] == "  node2: would change 2 more (ansible/stdout of the run directory)"
    assert lines[11] == "  node10: would change: nccl_env : Write /etc/nccl.conf: /etc/nccl.conf"
    assert lines == render({}, would_change=changes).splitlines()[1:]


def test_only_a_log_for_a_check_run_keeps_changes_and_says_what_each_changed() -> None:
    def changed(task: str, res: dict[str, Any], role: str = "eni") -> dict[str, Any]:
        return {"event": "runner_on_ok", "event_data": {"host": "node3", "task": task, "role": role, "res": res}}

    events = [
        changed("Apply", {"changed": True, "msg": "All items completed",
                          "results": [{"changed": True, "item": "eth1"}, {"changed": False, "item": "eth0"},
                                      {"changed": True, "item": {"name": "eth2"}}]}),  # fmt: skip
        changed("Install", {"changed": True, "invocation": {"module_args": {"name": ["rdma-core", "perftest"]}}}),
        changed("Read", {"changed": False, "msg": "nothing"}),
        changed("Hidden", {"changed": True, "censored": "the output has been hidden"}),
    ]
    kept, plain = EventLog(keep_changes=True), EventLog()
    for event in events:
        kept.handle(event)
        plain.handle(event)
    assert plain.changes == []
    assert [(c.task, c.message) for c in kept.changes] == [
        ("eni : Apply", "eth1, eth2"), ("eni : Install", "rdma-core, perftest"), ("eni : Hidden", "")]  # fmt: skip
    assert change_message({"changed": True, "dest": "/etc/hosts", "msg": ""}) == "/etc/hosts"
    # A file-editing module's message names no file: the file comes first (from the arguments in a check run).
    block = {"changed": True, "msg": "Block removed", "invocation": {"module_args": {"path": "/etc/hosts"}}}
    assert change_message(block) == "/etc/hosts: Block removed"
    assert change_message({"changed": True, "msg": "wrote /etc/nccl.conf", "dest": "/etc/nccl.conf"}) == (
        "wrote /etc/nccl.conf")  # fmt: skip


# --- failure messages of several lines, loop results (events trimmed from recorded runs' job_events) ----------

#: preflight's failure of a node with three problems (rdmaforge_fabric, rdmaforge_network_timeout, hugepages_count).
PREFLIGHT_PROBLEMS = [
    "erdma-node1: rdmaforge_fabric='ethernet' is not a known fabric profile; allowed: erdma, infiniband, roce, "
    "acs_type1, acs_type2, tcp",
    "erdma-node1: rdmaforge_network_timeout=1 is not allowed; allowed: a whole number from 5 to 3600",
    "erdma-node1: hugepages_count=-5 is not allowed while hugepages_enabled is true; allowed: a whole number of "
    "pages above 0, or null for seed 004's rule (50 on an 8-GPU node, otherwise GPUs x 5 + 10); 0 only with "
    "hugepages_enabled: false",
]


def preflight_failure(problems: Sequence[str]) -> dict[str, Any]:
    return ev("runner_on_failed", "erdma-node1", role="preflight", ignore_errors=None,
              task="Stop when the inventory has problems (all problems of each node are listed)",
              task_action="ansible.builtin.fail", resolved_action="ansible.builtin.fail",
              res={"msg": "\n".join(problems), "changed": False, "exception": "(traceback unavailable)",
                   "_ansible_no_log": False})  # fmt: skip


#: doctor -e doctor_expected_gpus=abc: the role's argument spec fails on the controller.
ARGUMENT_SPEC_FAILURE = ev(
    "runner_on_failed", "erdma-node1", role="doctor", ignore_errors=None,
    task="Validating arguments against arg spec 'main' - Read-only health of a node, written as JSON on the "
    "controller for rdmaforge doctor",
    task_action="ansible.builtin.validate_argument_spec", resolved_action="ansible.builtin.validate_argument_spec",
    res={"validate_args_context": {"type": "role", "name": "doctor", "argument_spec_name": "main"},
         "msg": "Validation of arguments failed:\nargument 'doctor_expected_gpus' is of type str and we were unable "
                "to convert to int: \"'abc'\" cannot be converted to an int",
         "argument_errors": ["argument 'doctor_expected_gpus' is of type str and we were unable to convert to int: "
                             "\"'abc'\" cannot be converted to an int"],
         "changed": False, "exception": "(traceback unavailable)", "_ansible_no_log": False},
)  # fmt: skip

SSH_REFUSED = (
    "Task failed: Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 9: Connection refused"
)


def unreachable_item(item: str) -> dict[str, Any]:
    return {"unreachable": True, "exception": "(traceback unavailable)", "msg": SSH_REFUSED, "changed": False,
            "_ansible_no_log": False, "item": item, "ansible_loop_var": "item",
            "_ansible_item_label": item}  # fmt: skip


#: rollback-nccl against a node that refuses SSH: the stat loop over `current` and `previous` is unreachable.
UNREACHABLE_LOOP = ev(
    "runner_on_unreachable", "erdma-node1", role="nccl_build",
    task="Look at the builds `current` and `previous` point to", task_action="ansible.builtin.stat",
    res={"results": [unreachable_item("current"), unreachable_item("previous")], "unreachable": True,
         "msg": "All items completed", "changed": False},
)  # fmt: skip


def shown(events: Sequence[dict[str, Any]]) -> tuple[str, str, EventLog]:
    """What the plain live progress and the recap print of ``events`` (a task start put before them)."""
    out = io.StringIO()
    progress = Progress(out, tty=False, clock=FakeClock())
    log = EventLog()
    for event in [ev("playbook_on_task_start", name="Task"), *events]:
        progress.handle(event)
        log.handle(event)
    progress.close()
    return out.getvalue(), render(from_stats(None, log.hosts), log.problems), log


def test_every_problem_preflight_lists_for_a_node_is_shown_not_only_the_first() -> None:
    """A node with three inventory problems: preflight's fail lists all three, one a line; the screen showed the
    first only (the others were in recap.json alone)."""
    live, recap, log = shown([preflight_failure(PREFLIGHT_PROBLEMS)])
    assert log.problems[0].message == "\n".join(PREFLIGHT_PROBLEMS)  # recap.json: the message as it is
    assert [f"  FAILED erdma-node1: {PREFLIGHT_PROBLEMS[0]}", *(f"    {p}" for p in PREFLIGHT_PROBLEMS[1:])] == [
        line for line in live.splitlines() if "erdma-node1:" in line]  # fmt: skip
    task = "Stop when the inventory has problems (all problems of each node are listed)"
    assert recap.splitlines()[3:] == [f"  erdma-node1: failed: {task}: {PREFLIGHT_PROBLEMS[0]}",
                                      *(f"    {p}" for p in PREFLIGHT_PROBLEMS[1:])]  # fmt: skip


def test_a_long_list_of_problems_is_cut_after_ten_lines_with_a_count_of_the_rest() -> None:
    problems = [f"erdma-node1: problem {i}" for i in range(MESSAGE_LINES + 3)]
    live, recap, _ = shown([preflight_failure(problems)])
    expected = [*problems[:MESSAGE_LINES], "and 3 more (recap.json)"]
    assert [line.split(": ", 1)[-1].strip() if "FAILED" in line else line.strip()
            for line in live.splitlines()[1:-1]] == expected  # fmt: skip
    assert [line.strip() for line in recap.splitlines()[4:]] == expected[1:]


def test_an_argument_spec_failure_shows_the_argument_not_only_its_header() -> None:
    """doctor -e doctor_expected_gpus=abc printed "Validation of arguments failed:" and nothing of the variable."""
    live, recap, log = shown([ARGUMENT_SPEC_FAILURE])
    error = ("argument 'doctor_expected_gpus' is of type str and we were unable to convert to int: \"'abc'\" cannot "
             "be converted to an int")  # fmt: skip
    assert f"  FAILED erdma-node1: Validation of arguments failed:\n    {error}\n" in live
    assert recap.endswith(f"doctor: Validation of arguments failed:\n    {error}")
    # No task went to a node: the argument spec is checked on the controller.
    assert log.contacted == []


def test_any_message_that_starts_with_a_header_shows_what_follows_and_others_keep_one_line() -> None:
    header = "unexpected result:\nthe line that says what\nmore"
    assert message_lines(header, "ansible.builtin.command") == ["unexpected result:", "the line that says what",
                                                                "more"]  # fmt: skip
    assert message_lines("No package matching 'x'\ndetails", "ansible.builtin.apt") == ["No package matching 'x'"]
    assert message_lines("a\nb", "ansible.builtin.assert") == ["a", "b"]
    assert message_lines("", "ansible.builtin.fail") == [""]
    # In one line (a doctor finding): the header and its content joined by a space, a list by '; '.
    assert one_line(header, "ansible.builtin.command") == "unexpected result: the line that says what; more"


def test_an_unreachable_loop_names_the_ssh_error_not_the_loop_summary() -> None:
    """rollback-nccl reported its unreachable node as "All items completed"."""
    live, recap, log = shown([UNREACHABLE_LOOP])
    assert result_message(UNREACHABLE_LOOP["event_data"]["res"]) == SSH_REFUSED
    assert f"  UNREACHABLE erdma-node1: {SSH_REFUSED}" in live.splitlines()
    assert recap.endswith(f"erdma-node1: unreachable: Look at the builds `current` and `previous` point to: "
                          f"{SSH_REFUSED}")  # fmt: skip
    assert log.unreachable()[0].message == SSH_REFUSED and log.contacted == ["erdma-node1"]
    # A failed loop: its failed items' messages, each once, not "One or more items failed".
    failed = {"msg": "One or more items failed", "results": [
        {"failed": True, "msg": "boom", "item": 1}, {"failed": False, "item": 2}, {"failed": True, "msg": "boom"}]}
    assert result_message(failed) == "boom"


def test_a_run_stopped_on_the_controller_contacted_no_node() -> None:
    """Facts set, includes, fail and the argument spec run on the controller: no node was contacted; any other
    task result, or an unreachable one, is a node the run tried to reach."""
    log = EventLog()
    for event in [ev("runner_on_ok", "localhost", task_action="ansible.builtin.assert", res={"msg": "ok"}),
                  ev("runner_on_ok", "node1", task_action="ansible.builtin.set_fact", res={"ansible_facts": {}}),
                  ev("runner_on_ok", "node1", task_action="ansible.builtin.include_tasks", res={}),
                  ev("runner_on_skipped", "node2", task_action="ansible.builtin.command"),
                  preflight_failure(PREFLIGHT_PROBLEMS)]:  # fmt: skip
        log.handle(event)
    assert log.contacted == []
    log.handle(ev("runner_on_ok", "node2", task_action="ansible.builtin.setup", res={}))
    log.handle(UNREACHABLE_LOOP)
    assert log.contacted == ["node2", "erdma-node1"]


def test_an_ansible_cfg_in_the_working_directory_is_said_to_be_ignored(tmp_path: Path) -> None:
    """ansible-playbook would read ./ansible.cfg; rdmaforge runs Ansible with its own, so remote_user or ssh_args
    set there were lost without a word (review round 29a)."""
    from rdmaforge.paths import ANSIBLE_CFG
    from rdmaforge.runner.command import ignored_config

    assert ignored_config(tmp_path, {}) is None  # none there
    (tmp_path / "ansible.cfg").write_text("[defaults]\nremote_user = ops\n")
    said = ignored_config(tmp_path, {})
    assert said is not None and said.startswith(f"{tmp_path / 'ansible.cfg'} is not read: ")
    assert str(ANSIBLE_CFG) in said and "ansible_user" in said
    assert ignored_config(tmp_path, {"ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg")}) is None  # chosen explicitly
    assert ignored_config(ANSIBLE_CFG.parent, {}) is None  # rdmaforge's own (a checkout's root)
