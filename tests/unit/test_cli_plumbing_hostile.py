"""Hostile command lines for the runner plumbing every command shares (fuzz round 9b): a --limit Ansible reads as
"every host", a --junit path found bad only after the run, a JUnit report that reads as a pass when no host ran,
``-i ""`` and ``--runs-dir ""`` taken for the current directory, a malformed ``-e @FILE`` blamed on the inventory,
``--serial`` checked only inside the playbook, and an inventory lock that depended on how -i was spelled.

Every refusal is a usage error (exit 64) before anything runs: no run directory is made. The runs that do happen are
``--check`` runs against hosts on 127.0.0.2/127.0.0.3 port 9, which refuse the connection (exit 3, or 1 when no
host matched)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TextIO

import pytest
import yaml

from rdmaforge import cli, errors
from rdmaforge.commands import completion, upgrade_nccl
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner import command, extravars, junit, run_lock
from rdmaforge.runner.exit_codes import ExitCode

HOSTS = {
    "all": {
        "children": {
            "cluster": {
                "hosts": {
                    "node1": {"ansible_host": "127.0.0.2", "ansible_port": 9},
                    "node2": {"ansible_host": "127.0.0.3", "ansible_port": 9},
                }
            }
        }
    }
}


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    """A cluster of two nodes that refuse connections, in a directory of its own (with group_vars/)."""
    directory = tmp_path / "inv"
    shutil.copytree(PROJECT_ROOT / "inventories" / "example" / "group_vars", directory / "group_vars")
    path = directory / "hosts.yml"
    path.write_text(yaml.safe_dump(HOSTS))
    return path


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Runs in this process: the inventory lock under tmp_path (not the user's cache), no fact cache written, and
    the current directory an empty one (where a path taken for "." would show)."""
    locks = tmp_path / "locks"
    real = run_lock.inventory_lock

    def lock(inventory: Path, name: str, wait: bool, out: TextIO) -> AbstractContextManager[None]:
        return real(inventory, name, wait, out, locks)

    monkeypatch.setattr(run_lock, "inventory_lock", lock)
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    yield


def main(argv: list[str]) -> int:
    """rdmaforge's main(); argparse's own exits (usage errors) become their code."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def parse_exit(argv: list[str]) -> int | None:
    """The exit code argparse stops ``argv`` with (None when it parses): nothing runs either way."""
    try:
        cli.parser_for(argv).parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return None


def check_run(inventory: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["provision", "-i", str(inventory), "--check", "-q", "--runs-dir", str(tmp_path / "runs"), *extra]


def nothing_ran(tmp_path: Path) -> bool:
    return not (tmp_path / "runs").exists() and not list((tmp_path / "cwd").iterdir())


# 1. --limit that Ansible reads as no limit


@pytest.mark.parametrize("pattern", [",", ":", " , ", ",,", ": :", "[", "\t"])
def test_a_limit_with_no_term_once_split_is_refused(
    pattern: str, inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ansible splits --limit on ',' (or ':' outside [ranges]) and drops empty terms: these leave none, which it
    takes for every host (reset --yes would wipe every node)."""
    assert parse_exit(["reset", "-i", str(inventory), "--yes", "--limit", pattern]) == ExitCode.BAD_INPUT
    capsys.readouterr()
    assert main(check_run(inventory, tmp_path, "--limit", pattern)) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"--limit: {pattern!r}: an empty pattern" in err and "allowed: host or group names" in err, err
    assert nothing_ran(tmp_path)


@pytest.mark.parametrize("content", ["", "\n", "  \n\n \t\n"])
def test_a_limit_file_with_no_host_is_refused(
    content: str, inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limit = tmp_path / "failed_hosts.txt"
    limit.write_text(content)
    assert main(check_run(inventory, tmp_path, "--limit", f"@{limit}")) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"the limit file {limit} holds no host name" in err, err
    assert nothing_ran(tmp_path)
    assert parse_exit(["reset", "-i", str(inventory), "--yes", "--limit", f"@{limit},,"]) == ExitCode.BAD_INPUT


def test_real_patterns_and_limit_files_are_kept_as_given(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("\nnode1\n\n")
    for pattern in ("node[1:3]", "node1:&gpu", "cluster:!node3", "node1,,node2", "node1 node2", "!node1",
                    f"@{hosts}", f"@{tmp_path / 'missing'}", "fe80::1"):  # fmt: skip
        assert errors.host_pattern(pattern) == pattern


@pytest.mark.parametrize(
    "pattern",
    ["a,b[1], c[2:3] , d", "node[1:3]", "node1:&gpu", "x[1:2]:y", "cluster:!node3", " a : b ", ",", ":", " , ", "[",
     "node1 node2", "[a:b]:c,", "@f:g", "&x:!y"],
)  # fmt: skip
def test_patterns_split_as_ansible_splits_them(pattern: str) -> None:
    from ansible.inventory.manager import split_host_pattern

    assert errors.split_host_pattern(pattern) == split_host_pattern(pattern)


# 2. --junit checked before the run; a failure to write it at the end keeps the run's exit code


def test_a_bad_junit_path_is_refused_before_anything_runs(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    (tmp_path / "a-dir").mkdir()
    for path, says in ((str(tmp_path / "a-dir"), "is a directory"), ("", "an empty path"),
                       (str(a_file / "junit.xml"), f"{a_file} is not a directory"),
                       (str(a_file / "deeper" / "junit.xml"), f"{a_file} is not a directory")):  # fmt: skip
        assert main(check_run(inventory, tmp_path, "--junit", path)) == ExitCode.BAD_INPUT, path
        err = capsys.readouterr().err
        assert f"--junit: {path or repr(path)}" in err and says in err and "allowed: a file path" in err, err
        assert nothing_ran(tmp_path), path
    assert command.junit_path(str(tmp_path / "new" / "dirs" / "junit.xml")) == tmp_path / "new" / "dirs" / "junit.xml"


def junit_path_as(uid: int | None, text: str) -> str:
    """command.junit_path(text)'s refusal ('' when it takes the path), checked as user ``uid`` (None: this one) in a
    forked child: root may write anywhere, and CI runs as root, so the check of a locked directory needs a user
    the permissions apply to."""
    if uid is None:
        try:
            command.junit_path(text)
        except argparse.ArgumentTypeError as exc:
            return str(exc)
        return ""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's result goes through the pipe
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write, junit_path_as(None, text).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        said = answer.read().decode()
    os.waitpid(child, 0)
    return said


def test_a_junit_path_in_a_directory_that_cannot_be_written_is_refused() -> None:
    """A directory of mode 0555 (no one but root may write in it), and one of mode 0500 (no one else may even look
    in it: stat raised PermissionError, a traceback): refused for a user other than root (nobody, 65534, when these
    tests run as root, as CI does), before anything runs."""
    import tempfile

    outer = Path(tempfile.mkdtemp(prefix="rdmaforge-junit-"))
    outer.chmod(0o755)  # the user can reach the locked directory, and finds it locked
    locked, hidden = outer / "locked", outer / "hidden"
    locked.mkdir(mode=0o555)
    hidden.mkdir(mode=0o500)
    user = 65534 if os.geteuid() == 0 else None
    try:
        said = junit_path_as(user, str(locked / "junit.xml"))
        assert said == (f"{locked / 'junit.xml'}: the directory {locked} cannot be written (permission denied); "
                        f"allowed: {command.JUNIT_ALLOWED}"), said  # fmt: skip
        said = junit_path_as(user, str(hidden / "junit.xml"))
        reached = f"{hidden / 'junit.xml'}: cannot be reached (Permission denied)"
        assert said == f"{reached}; allowed: {command.JUNIT_ALLOWED}", said
        open_dir = outer / "open"
        open_dir.mkdir(mode=0o777)
        open_dir.chmod(0o777)
        assert junit_path_as(user, str(open_dir / "junit.xml")) == ""
    finally:
        locked.chmod(0o700)
        hidden.chmod(0o700)
        shutil.rmtree(outer)


def test_a_junit_copy_that_cannot_be_written_is_a_warning_and_the_runs_exit_code_stands(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path passed the check, then could not be written (a disk that filled, a directory made meanwhile): the
    run's own exit code (3: both nodes refuse), recap.json, --json and the final line stand."""
    copy = tmp_path / "ci" / "junit.xml"
    real = junit.write

    def write(path: Path, *args: Any, **kwargs: Any) -> Path:
        if path == copy:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(junit, "write", write)
    assert main(check_run(inventory, tmp_path, "--junit", str(copy), "--json")) == ExitCode.UNREACHABLE
    out, err = capsys.readouterr()
    assert f"warning: --junit {copy}: cannot write it (No space left on device)" in err, err
    assert '"exit_code": 3' in out  # --json
    assert "exit 3 (a host was unreachable)" in err
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert (run_dir / "recap.json").is_file() and (run_dir / "junit.xml").is_file()


# 3. a JUnit report of a run in which no host ran is no pass


def test_a_run_where_no_host_ran_reports_an_error_case(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "junit.xml"
    assert main(check_run(inventory, tmp_path, "--limit", "nomatch", "--junit", str(report))) == ExitCode.ERROR
    assert "no host was run" in capsys.readouterr().out
    root = ET.parse(report).getroot()
    assert (root.get("tests"), root.get("errors"), root.get("failures")) == ("1", "1", "0")
    (case,) = root.iter("testcase")
    assert case.get("name") == command.RUN_CASE
    error = case.find("error")
    assert error is not None
    assert "no host was run" in error.get("message", "") and "no hosts to target" in error.get("message", "")


def test_an_error_exit_with_no_failing_case_gets_one() -> None:
    passed = junit.Case("node1", "rdmaforge.verify")
    (added,) = command.with_run_case([passed], "verify", ExitCode.ERROR)[1:]
    assert added.outcome == "error" and added.message.startswith("exit 1: ")
    failing = [passed, junit.Case("node2", "rdmaforge.verify", outcome="failed", message="x")]
    assert command.with_run_case(failing, "verify", ExitCode.ERROR) == failing
    assert command.with_run_case([passed], "verify", ExitCode.OK) == [passed]


def test_the_stop_reason_is_ansibles_error_line() -> None:
    tail = "[WARNING]: Could not match supplied host pattern, ignoring: x\n[ERROR]: no hosts to target.\nmore"
    assert command.ansible_stop_reason(tail) == "[ERROR]: no hosts to target."
    assert command.ansible_stop_reason("one\nlast\n") == "last"
    library_noise = "[WARNING]: No hosts matched, nothing to do\n/x/ssh.py:18: CryptographyDeprecationWarning: DSA\n  x"
    assert command.ansible_stop_reason(library_noise) == "[WARNING]: No hosts matched, nothing to do"
    crashed = "[WARNING]: a warning first\nTraceback (most recent call last):\n  File x\nRuntimeError: boom"
    assert command.ansible_stop_reason(crashed) == "RuntimeError: boom"
    assert command.ansible_stop_reason("") == command.NO_ANSIBLE_OUTPUT


# 5. -i ""


def test_every_commands_inventory_refuses_an_empty_path() -> None:
    found = []
    for name, parser in completion.sub_parsers(cli.build_parser()).items():
        for action in parser._actions:
            if "--inventory" in action.option_strings:
                found.append(name)
                for empty in ("", "  "):
                    with pytest.raises(argparse.ArgumentTypeError, match="an empty inventory path"):
                        action.type(empty)  # type: ignore[misc]
                assert action.type("inv/hosts.yml") in (Path("inv/hosts.yml"), "inv/hosts.yml"), name  # type: ignore[misc]
    assert {"provision", "bench", "doctor", "pairwise", "reset", "remove-node", "upgrade-nccl", "rollback-nccl",
            "render", "verify"} <= set(found), found  # fmt: skip


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_inventory_is_refused_not_read_as_the_current_directory(
    empty: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cwd" / "hosts.yml").write_text(yaml.safe_dump(HOSTS))  # what "." would have found
    assert main(["provision", "-i", empty, "--check", "-q", "--runs-dir", str(tmp_path / "runs")]) == 64
    assert "-i/--inventory: " in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
    assert parse_exit(["upgrade-nccl", "-i", empty]) == ExitCode.BAD_INPUT


# 6. -e @FILE that is no mapping


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("foo: [unclosed\n", "{path}:2: not valid JSON or YAML"),
        ("a: 1\nb: {\n", "{path}:3: not valid JSON or YAML"),
        ("- a\n- b\n", "{path} holds a list"),
        ("just text\n", "{path} holds a string"),
        ("42\n", "{path} holds a number"),
        ("", "{path} holds nothing"),
        ("# a comment only\n", "{path} holds nothing"),
    ],
)
def test_a_malformed_extra_vars_file_is_a_usage_error(
    content: str, says: str, inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "vars.yml"
    path.write_text(content)
    assert main(check_run(inventory, tmp_path, "-e", f"@{path}")) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("rdmaforge provision: -e @") and says.format(path=path) in err, err
    assert "allowed: a YAML or JSON mapping" in err
    assert nothing_ran(tmp_path)


def test_good_and_vaulted_extra_vars_files_are_left_to_ansible(tmp_path: Path) -> None:
    good = tmp_path / "good.yml"
    good.write_text("a: 1\nsecret: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3132\n")
    vaulted = tmp_path / "vaulted.yml"
    vaulted.write_text("$ANSIBLE_VAULT;1.1;AES256\n6132333435\n")  # cannot be decrypted here: Ansible's to say
    as_json = tmp_path / "vars.json"
    as_json.write_text('{"a": 1}')
    parsed = extravars.parse([f"@{good}", f"@{vaulted}", f"@{as_json}"])
    assert [source.file for source in parsed] == [good.resolve(), vaulted.resolve(), as_json.resolve()]


# 7. --serial


@pytest.mark.parametrize("command_name", ["upgrade-nccl", "rollback-nccl"])
@pytest.mark.parametrize("value", ["0", "", " ", "150%", "0%", "101%", "two", "2.5", "-1", "²", "３", "25 %", "1e2"])
def test_a_bad_serial_is_a_usage_error_before_the_run(
    command_name: str, value: str, inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command_name, "-i", str(inventory), "--check", "-q", "--runs-dir", str(tmp_path / "runs")]
    assert main([*argv, "--serial", value]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"argument --serial: {value!r}: allowed: a whole number of nodes per batch, at least 1" in err, err
    assert nothing_ran(tmp_path)


@pytest.mark.parametrize(("value", "variable"), [("1", 1), ("3", 3), (" 2 ", 2), ("25%", "25%"), ("100%", "100%"),
                                                 ("25%\n", "25%")])  # fmt: skip
def test_a_good_serial_reaches_the_playbook(value: str, variable: object) -> None:
    args = cli.parser_for(["upgrade-nccl"]).parse_args(["upgrade-nccl", "-i", "inv", "--serial", value])
    assert upgrade_nccl.rollout_variables(args) == {"rdmaforge_upgrade_serial": variable}


def test_the_playbook_checks_serial_with_the_commands_rule() -> None:
    """One rule: check_upgrade_serial.yml refuses with rdmaforge.batch_size, as --serial does."""
    (play,) = yaml.safe_load((PROJECT_ROOT / "playbooks" / "check_upgrade_serial.yml").read_text())
    (task,) = [t for t in play["tasks"] if "ansible.builtin.assert" in t]
    refusal = play["vars"]["serial_refusal"]
    assert "rdmaforge.cluster.rdmaforge_batch_size_problem('rdmaforge_upgrade_serial')" in refusal
    assert task["ansible.builtin.assert"]["that"] == "serial_refusal | length == 0"


# 8. --runs-dir ""


def test_an_empty_runs_dir_is_refused(inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["provision", "-i", str(inventory), "--check", "-q", "--runs-dir", ""]) == ExitCode.BAD_INPUT
    assert "--runs-dir: '': an empty path" in capsys.readouterr().err
    assert nothing_ran(tmp_path)


@pytest.mark.parametrize(("argv", "named"), [
    (["report", ""], "argument run_dir: ''"),
    (["report", "--baseline", " ", "run"], "argument --baseline: ' '"),
    (["summary", ""], "argument file: ''"),
    (["baseline", "", "-o", "out.json"], "argument run_dir: ''"),
])  # fmt: skip
def test_an_empty_path_to_read_is_refused_not_taken_for_the_current_directory(
    argv: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Path("") is Path("."): `report "$RUN"` with RUN unset read the current directory as the run, and its error
    named '.'. The current directory here holds a run.json, which must not be read."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    assert main(argv) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{named}: an empty path (it would stand for the current directory); allowed:" in err, err


def test_an_empty_runs_dir_variable_is_the_default(tmp_path: Path) -> None:
    """RDMAFORGE_RUNS_DIR="" (a variable exported unset) is the default, not the current directory."""
    code = "import rdmaforge.paths as p, rdmaforge.runner.artifacts as a; print(a.RUNS_DIR, p.WORKSPACE)"
    env = {**os.environ, "RDMAFORGE_RUNS_DIR": "", "RDMAFORGE_WORKSPACE": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout.split() == [str(tmp_path / "artifacts" / "runs"), str(tmp_path)], proc.stderr


# 9. one lock however -i names the inventory


def test_an_inventory_directory_and_its_file_take_one_lock(inventory: Path, tmp_path: Path) -> None:
    directory = inventory.parent
    link = tmp_path / "link"
    link.symlink_to(directory)
    same = {run_lock.lock_path(p, tmp_path) for p in (directory, inventory, link, link / "hosts.yml",
                                                        Path(f"{directory}/./hosts.yml"))}  # fmt: skip
    assert len(same) == 1


def test_a_lone_inventory_file_shares_its_directorys_lock_and_side_by_side_ones_do_not(tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "hosts.yml").write_text(yaml.safe_dump(HOSTS))
    (alone / "README.md").write_text("notes")  # not an inventory source to Ansible
    assert run_lock.lock_path(alone, tmp_path) == run_lock.lock_path(alone / "hosts.yml", tmp_path)
    several = tmp_path / "inventories"
    several.mkdir()
    for name in ("c1.yml", "c2.yml"):
        (several / name).write_text(yaml.safe_dump(HOSTS))
    assert run_lock.lock_path(several / "c1.yml", tmp_path) != run_lock.lock_path(several / "c2.yml", tmp_path)


def test_a_run_given_the_file_waits_for_a_run_given_the_directory(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_lock.inventory_lock(inventory.parent, "provision", wait=False, out=sys.stdout):
        assert main([*check_run(inventory, tmp_path), "--no-wait"]) == ExitCode.BUSY
    err = capsys.readouterr().err
    assert "rdmaforge provision (pid" in err and str(inventory) in err, err
    assert not (tmp_path / "runs").exists()


def test_a_busy_inventory_with_json_and_junit_still_gives_its_document_and_report(
    inventory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review round 27b: exit 75 printed nothing on stdout with --json (`| jq` failed on empty input) and wrote no
    --junit file, so a CI job read no failure at all."""
    report = tmp_path / "report.xml"
    with run_lock.inventory_lock(inventory.parent, "provision", wait=False, out=sys.stdout):
        code = main([*check_run(inventory, tmp_path), "--no-wait", "--json", "--junit", str(report)])
    assert code == ExitCode.BUSY
    document = json.loads(capsys.readouterr().out)
    assert document["exit_code"] == 75 and document["command"] == "provision" and "pid" in document["error"]
    suite = ET.parse(report).getroot()
    assert suite.get("errors") == "1" and suite.get("tests") == "1", ET.tostring(suite)
