"""One CLI convention for every command (issue 15): ansible-playbook's familiar flags reach Ansible, -q/-v and
--json shape the output, no escape sequence where there is no terminal (nor with NO_COLOR), a completion script
generated from the parser, and one exit-code table with usage errors on 64.

The runs are real: `rdmaforge provision` and `rdmaforge verify` through ansible-runner against this machine
(ansible_connection=local), provision with a tiny playbook in place of site.yml. A few seconds each.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import cli, terminal
from rdmaforge.commands import completion, provision, verify
from rdmaforge.runner import command, execute
from rdmaforge.runner.events import EventLog
from rdmaforge.runner.exit_codes import MEANING, ExitCode
from rdmaforge.runner.progress import CLEAR, AnsibleEcho, Progress, escapes_allowed
from rdmaforge.runner.secrets import REDACTED
from tests.unit.test_runner_local import CHANGES, inventory

PLAYBOOK = """---
- name: Tiny play
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Say hello
      ansible.builtin.debug:
        msg: hello
      tags: [hello]
    - name: Left out by skip-tags
      ansible.builtin.debug:
        msg: should not run
      tags: [skipme]
    - name: Show the vaulted value
      ansible.builtin.debug:
        msg: "vaulted is {{ vaulted_value | default('undefined') }}"
"""
VAULT_PASSWORD = "correct horse battery staple"
VAULTED = "opened-by-the-vault-4711"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def subcommands() -> dict[str, argparse.ArgumentParser]:
    return completion.sub_parsers(cli.build_parser())


def main(argv: list[str]) -> int:
    """rdmaforge's main(); argparse's own exits (usage errors, --help) become their code."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """provision with the tiny playbook in place of site.yml, an inventory of n1 and n2 on this machine."""
    playbook = tmp_path / "tiny.yml"
    playbook.write_text(PLAYBOOK)
    monkeypatch.setattr(provision, "playbook", lambda name: playbook)
    return {"inventory": inventory(tmp_path), "runs": tmp_path / "runs"}


def vault_files(tmp_path: Path) -> tuple[Path, Path]:
    from ansible.parsing.vault import VaultLib, VaultSecret

    password = tmp_path / "vault-pass.txt"
    password.write_text(VAULT_PASSWORD + "\n")
    vaulted = tmp_path / "vaulted.yml"
    lib = VaultLib([("default", VaultSecret(VAULT_PASSWORD.encode()))])
    vaulted.write_bytes(lib.encrypt(f"vaulted_value: {VAULTED}\n"))
    return password, vaulted


def run_dir_of(text: str) -> Path:
    match = re.search(r"; artifacts: (\S+)$", text.strip().splitlines()[-1])
    assert match, text[-2000:]
    return Path(match.group(1))


def recorded_command(run_dir: Path) -> list[str]:
    command_line: list[str] = json.loads((run_dir / "ansible" / "command").read_text())["command"]
    return command_line


# --- the familiar flags reach Ansible -----------------------------------------------------------------------


def test_flags_reach_ansible_json_on_stdout_and_quiet_shows_no_progress(
    tiny: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    password, vaulted = vault_files(tmp_path)
    user = "rdmaforge-test-user"
    code = main(["provision", "-i", str(tiny["inventory"]), "--runs-dir", str(tiny["runs"]), "--forks", "1",
                 "--skip-tags", "skipme", "-u", user, "--vault-password-file", str(password), "-e", f"@{vaulted}",
                 "--json", "-q"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, err[-3000:]
    # stdout: one JSON document, recap.json's content; the human output is on stderr.
    document = json.loads(out)
    run_dir = run_dir_of(err)
    assert document == json.loads((run_dir / "recap.json").read_text())
    assert document["command"] == "provision" and document["exit_code"] == 0 and document["meaning"] == "success"
    assert set(document["hosts"]) == {"n1", "n2"}
    # -q: no live progress, only the recap table and the final line.
    assert "TASK [" not in err and "PLAY [" not in err and "run directory" not in err
    assert err.lstrip().startswith("host ") and "n1 " in err and err.rstrip().endswith(str(run_dir))
    # What ansible-runner started, as it recorded it.
    argv = recorded_command(run_dir)
    assert argv[argv.index("--forks") + 1] == "1" and argv[argv.index("--skip-tags") + 1] == "skipme"
    assert argv[argv.index("--user") + 1] == user
    assert argv[argv.index("--vault-password-file") + 1] == str(password.resolve())
    stdout = (run_dir / "ansible" / "stdout").read_text()
    # The vault password file decrypted the vaulted -e file, and the decrypted value is redacted from the artifacts.
    assert f"vaulted is {REDACTED}" in stdout and VAULTED not in stdout
    assert "Left out by skip-tags" not in stdout and "Say hello" in stdout


def test_a_drift_check_exits_8_only_where_a_run_would_change_a_host(
    tiny: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`provision --check --fail-on-drift` as a CI drift check: 8 while a run would write a file (and it writes
    nothing), 0 once a run wrote it; without --check it is refused before any run."""
    written = tmp_path / "written"
    written.mkdir()
    playbook = tmp_path / "drifting.yml"
    playbook.write_text(CHANGES)  # two file tasks and a repair message; repair=false leaves the message out
    monkeypatch.setattr(provision, "playbook", lambda name: playbook)
    base = ["provision", "-i", str(tiny["inventory"]), "--runs-dir", str(tiny["runs"]), "-e", f"out_dir={written}"]
    converged = [*base, "-e", "repair=false"]

    code = main([*base, "--check", "--fail-on-drift"])
    out, err = capsys.readouterr()
    assert code == ExitCode.DRIFT and code == 8, (out + err)[-3000:]  # the documented number
    assert not list(written.iterdir())
    assert out.rstrip().endswith(f"exit 8 ({MEANING[ExitCode.DRIFT]}); artifacts: {run_dir_of(out)}")
    recap = json.loads((run_dir_of(out) / "recap.json").read_text())
    assert recap["exit_code"] == 8 and {h: r["status"] for h, r in recap["hosts"].items()} == {
        "n1": "would_change", "n2": "would_change"}  # fmt: skip
    # The JUnit report names each drifted node and what a run would change on it.
    suite = ET.parse(run_dir_of(out) / "junit.xml").getroot()
    for host in ("n1", "n2"):
        failure = suite.find(f".//testcase[@name='{host}']/failure")
        assert failure is not None, ET.tostring(suite).decode()[-2000:]
        assert failure.get("message") == (
            f"drift: a run would change 3 task(s): Write the greeting: {written}/{host}.txt")  # fmt: skip

    assert main(converged) == ExitCode.OK  # a run repairs the drift (no --fail-on-drift: it needs --check)
    names = sorted(f"{host}{suffix}.txt" for host in ("n1", "n2") for suffix in ("", "-a", "-b"))
    assert sorted(p.name for p in written.iterdir()) == names
    capsys.readouterr()
    assert main([*converged, "--check", "--fail-on-drift"]) == ExitCode.OK, capsys.readouterr().out[-3000:]
    suite = ET.parse(run_dir_of(capsys.readouterr().out) / "junit.xml").getroot()
    assert suite.findall(".//failure") == [] and len(suite.findall(".//testcase")) == 2

    runs = sorted(tiny["runs"].iterdir())
    assert main([*base, "--fail-on-drift"]) == ExitCode.BAD_INPUT
    assert "--fail-on-drift needs --check" in capsys.readouterr().err
    assert sorted(tiny["runs"].iterdir()) == runs  # refused before a run started


def test_verbose_shows_ansibles_own_output_without_escapes(
    tiny: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["provision", "-i", str(tiny["inventory"]), "--runs-dir", str(tiny["runs"]), "-v", "-t", "hello"])
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, (out + err)[-3000:]
    assert "TASK [Say hello] ***" in out and "ok: [n1]" in out and "PLAY RECAP ***" in out  # Ansible's own lines
    assert not re.search(r"^\[ *[0-9.]+s\] TASK \[", out, re.M)  # ... instead of the condensed progress
    assert "\x1b" not in out + err  # not a terminal: no escape sequence at all
    assert "-v" in recorded_command(run_dir_of(out))  # and Ansible's verbosity still goes on
    assert out.startswith("rdmaforge provision: run directory ")  # the default lines stay as they were
    assert out.rstrip().endswith(f"rdmaforge provision: exit 0 (success); artifacts: {run_dir_of(out)}")


def test_no_color_means_plain_lines_even_on_a_terminal(tiny: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("NO_COLOR", "1")
    code = main(["provision", "-i", str(tiny["inventory"]), "--runs-dir", str(tiny["runs"]), "-t", "hello"])
    text = terminal.getvalue()
    assert code == ExitCode.OK, text[-3000:]
    assert "\x1b" not in text and "\r" not in text
    assert re.search(r"^\[ *[0-9.]+s\] TASK \[Say hello\]$", text, re.M)  # the plain (CI) progress lines


def test_verify_json_and_flags_on_its_ping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    password = tmp_path / "pass.txt"
    password.write_text("pw\n")
    code = main(["verify", "-i", str(inventory(tmp_path)), "--runs-dir", str(tmp_path / "runs"), "-l", "nomatch",
                 "-u", "someone", "-f", "2", "--vault-password-file", str(password), "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == ExitCode.ERROR, err  # no host matched: nothing was verified
    run_dir = run_dir_of(err)
    document = json.loads(out)
    assert document == json.loads((run_dir / "recap.json").read_text()) and document["exit_code"] == 1
    argv = recorded_command(run_dir)
    assert argv[0].endswith("ansible") and "ansible.builtin.ping" in argv
    assert argv[argv.index("--forks") + 1] == "2" and argv[argv.index("--user") + 1] == "someone"
    assert argv[argv.index("--vault-password-file") + 1] == str(password.resolve())
    assert "--skip-tags" not in argv and "--tags" not in argv


# --- the flags, parsed and handed on ----------------------------------------------------------------------

#: The commands that run a lifecycle playbook (remove_node.yml, upgrade_nccl.yml, rollback_nccl.yml, reset.yml).
LIFECYCLE = ("remove-node", "upgrade-nccl", "rollback-nccl", "reset")


def test_every_playbook_command_takes_the_familiar_flags() -> None:
    parsers = subcommands()
    common = {"-u", "--user", "-b", "--become", "--become-user", "-f", "--forks", "--vault-id",
              "--vault-password-file", "-q", "--quiet", "-v", "-i", "-l", "--junit"}  # fmt: skip
    for name in ("provision", "bench", "doctor", "pairwise", "verify", *LIFECYCLE):
        options = set(completion.options(parsers[name]))
        assert common <= options, (name, common - options)
        assert ("--skip-tags" in options) == ("--tags" in options), name
    for name in ("provision", "verify", "doctor", "pairwise", *LIFECYCLE):
        assert "--json" in completion.options(parsers[name]), name
    for name in ("provision", *LIFECYCLE):  # the commands that change nodes take the inventory's lock
        assert "--no-wait" in completion.options(parsers[name]), name


def test_request_and_runner_kwargs_carry_the_flags(tmp_path: Path) -> None:
    parser = subcommands()["provision"]
    secret, dev, prod = tmp_path / "pw", tmp_path / "dev.pw", tmp_path / "prod@site.pw"
    for path in (secret, dev, prod):
        path.write_text("x")
    args = parser.parse_args(["-i", "hosts.yml", "--skip-tags", "a,b", "-u", "deploy", "-b", "--become-user", "root",
                              "-f", "7", "--vault-id", f"dev@{dev}", "--vault-id", f"prod@{prod}",
                              "--vault-password-file", str(secret)])  # fmt: skip
    request = execute.Request(inventory=tmp_path, playbook=Path("/p.yml"), tags="x", **command.ansible_options(args))
    kwargs = execute.runner_kwargs(request, tmp_path / "run", tmp_path)
    assert kwargs["skip_tags"] == "a,b" and kwargs["forks"] == 7 and kwargs["tags"] == "x"
    assert kwargs["cmdline"].split() == ["--user", "deploy", "--become", "--become-user", "root", "--vault-id",
                                         f"dev@{dev.resolve()}", "--vault-id", f"prod@{prod.resolve()}",
                                         "--vault-password-file", str(secret.resolve())]  # fmt: skip
    # Ad hoc (verify's ping): the same connection flags, no tags (`ansible` has none).
    adhoc = execute.Request(inventory=tmp_path, module="ansible.builtin.ping", tags="x", skip_tags="y", forks=3)
    kwargs = execute.runner_kwargs(adhoc, tmp_path / "run", tmp_path)
    assert "tags" not in kwargs and "skip_tags" not in kwargs and kwargs["forks"] == 3
    # Nothing given: nothing added (the default command line is what it was).
    plain = execute.runner_kwargs(execute.Request(inventory=tmp_path, playbook=Path("/p.yml")), tmp_path, tmp_path)
    assert not {"cmdline", "forks", "skip_tags", "tags"} & set(plain)


def test_mitogen_sets_the_strategy_of_provision_and_only_when_asked(tmp_path: Path) -> None:
    parsers = subcommands()
    # provision only: the command whose runs under mitogen the lab test proves.
    assert [name for name in parsers if "--mitogen" in completion.options(parsers[name])] == ["provision"]
    asked = parsers["provision"].parse_args(["-i", "hosts.yml", "--mitogen"])
    request = execute.Request(inventory=tmp_path, playbook=Path("/p.yml"), **command.ansible_options(asked))
    env = execute.runner_kwargs(request, tmp_path / "run", tmp_path)["envvars"]
    # mitogen's documented strategy name; its plugin file is where ansible-core will look for it.
    assert env["ANSIBLE_STRATEGY"] == "mitogen_linear"
    assert (Path(env["ANSIBLE_STRATEGY_PLUGINS"]) / "mitogen_linear.py").is_file()
    default = parsers["provision"].parse_args(["-i", "hosts.yml"])
    request = execute.Request(inventory=tmp_path, playbook=Path("/p.yml"), **command.ansible_options(default))
    env = execute.runner_kwargs(request, tmp_path / "run", tmp_path)["envvars"]
    assert "ANSIBLE_STRATEGY" not in env and "ANSIBLE_STRATEGY_PLUGINS" not in env


def test_mitogen_runs_a_playbook_under_its_strategy(tiny: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["provision", "-i", str(tiny["inventory"]), "--runs-dir", str(tiny["runs"]), "--mitogen", "-q"])
    said = "".join(capsys.readouterr())
    assert code == ExitCode.OK, said[-3000:]
    stdout = (run_dir_of(said) / "ansible" / "stdout").read_text()
    # ansible-core says so whenever it loads a strategy from outside ansible.builtin.
    assert "Use of strategy plugins not included in ansible.builtin" in stdout and "hello" in stdout


def test_mitogen_missing_is_an_error_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ansible_mitogen" else real_find_spec(name, *a))  # fmt: skip
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(yaml.safe_dump({"all": {}}))
    code = main(["provision", "-i", str(hosts), "--runs-dir", str(tmp_path / "runs"), "--mitogen"])
    err = capsys.readouterr().err
    assert code == ExitCode.ERROR, err
    # mitogen itself, in the range rdmaforge declares: rdmaforge[mitogen] is nothing pip finds (not on PyPI)
    assert "mitogen is not installed" in err and "pip install 'mitogen<0.4,>=0.3.54'" in err, err
    assert "(rdmaforge's [mitogen] extra)" in err and "rdmaforge[mitogen]" not in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_verify_hands_user_become_and_vault_to_testinfra_through_its_environment(tmp_path: Path) -> None:
    request = execute.Request(inventory=tmp_path, user="deploy", become=True, become_user="root",
                              vault_ids=("dev@/x",), vault_password_files=(tmp_path / "pw",))  # fmt: skip
    assert verify.suite_environment(request) == {
        "ANSIBLE_REMOTE_USER": "deploy", "ANSIBLE_BECOME": "True", "ANSIBLE_BECOME_USER": "root",
        "ANSIBLE_VAULT_IDENTITY_LIST": f"dev@/x,{(tmp_path / 'pw').resolve()}",
    }  # fmt: skip
    assert verify.suite_environment(execute.Request(inventory=tmp_path)) == {}  # never ANSIBLE_BECOME=False


def test_a_vault_id_is_split_at_its_first_at_and_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review round 26: the CLI split --vault-id at the first '@' (as Ansible does), the secret scrubber at the last,
    so it loaded no secret from prod@site.pw and could not redact the vaulted values. A relative path was checked
    from the caller's directory, while Ansible runs from the workspace's."""
    from rdmaforge.runner import vault

    monkeypatch.chdir(tmp_path)
    (tmp_path / "prod@site.pw").write_text("x")
    assert vault.split_vault_id("prod@prod@site.pw") == ("prod", "prod@site.pw")
    assert vault.split_vault_id("site.pw") == ("default", "site.pw")
    assert command.vault_identity("prod@prod@site.pw") == f"prod@{tmp_path / 'prod@site.pw'}"
    decrypt = vault.decryptor([f"prod@{tmp_path / 'prod@site.pw'}"], [])
    assert decrypt is not None  # the identity was loaded


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--forks", "0"], "--forks"),
        (["-f", "many"], "--forks"),
        (["--vault-password-file", "/no/such/vault-pass"], "/no/such/vault-pass"),
        (["--vault-id", "dev@prompt"], "dev@prompt"),
        # Review round 25c: a missing --vault-id file started the run, and Ansible stopped it with exit 1.
        (["--vault-id", "dev@/no/such/vault-pass"], "/no/such/vault-pass: no such file"),
        (["--vault-id", "/no/such/vault-pass"], "/no/such/vault-pass: no such file"),
        (["-q", "-v"], "allowed: one of them"),
    ],
)
def test_bad_flags_are_usage_errors_before_anything_runs(
    argv: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(yaml.safe_dump({"all": {}}))
    for name in ("provision", "bench", "doctor", "pairwise", "verify", *LIFECYCLE):
        nodes = ["node1"] if name == "remove-node" else ["--yes"] if name == "reset" else []
        code = main([name, *nodes, "-i", str(hosts), "--runs-dir", str(tmp_path / "runs"), *argv])
        err = capsys.readouterr().err
        assert code == ExitCode.BAD_INPUT, (name, err)
        assert named in err and "Traceback" not in err, (name, err)
    assert not (tmp_path / "runs").exists()  # nothing ran


# --- output: colour and escapes, -v's echo ----------------------------------------------------------------


def test_escapes_only_on_a_terminal_without_no_color() -> None:
    assert escapes_allowed(FakeTerminal(), {"TERM": "xterm"})
    assert not escapes_allowed(FakeTerminal(), {"TERM": "xterm", "NO_COLOR": "1"})
    assert escapes_allowed(FakeTerminal(), {"TERM": "xterm", "NO_COLOR": ""})  # no-color.org: set and not empty
    assert not escapes_allowed(FakeTerminal(), {"TERM": "dumb"})
    assert not escapes_allowed(io.StringIO(), {"TERM": "xterm"})
    closed = io.StringIO()
    closed.close()
    assert not escapes_allowed(closed, {})


def test_progress_and_echo_write_escapes_only_when_allowed() -> None:
    events: list[dict[str, Any]] = [
        {"event": "playbook_on_task_start", "event_data": {"name": "Build"},
         "stdout": "\x1b[0;32mTASK [Build] ***\x1b[0m"},
        {"event": "runner_on_ok", "event_data": {"host": "n1", "res": {}}, "stdout": "\x1b[0;32mok: [n1]\x1b[0m"},
    ]  # fmt: skip
    for tty in (False, True):
        out = io.StringIO()
        progress = Progress(out, tty=tty)
        for event in events:
            progress.handle(event)
        progress.close()
        assert (CLEAR in out.getvalue()) is tty
    out = io.StringIO()
    echo = AnsibleEcho(out)
    for event in events:
        echo.handle(event)
    # Ansible's colour is off in rdmaforge runs: a sequence in its output is a node's, shown escaped, not acted on.
    assert out.getvalue() == "\\x1b[0;32mTASK [Build] ***\\x1b[0m\n\\x1b[0;32mok: [n1]\\x1b[0m\n"


#: A name or a line of node output that would clear the screen and overwrite the line if the terminal acted on it.
HOSTILE = "n1\x1b[2J\rPLAY RECAP"


def hostile_events() -> list[dict[str, Any]]:
    """A task and a host named with HOSTILE that fails with it in its message, and a long task still running."""
    return [
        {"event": "playbook_on_play_start", "event_data": {"name": HOSTILE}},
        {"event": "playbook_on_task_start", "event_data": {"name": f"Build {HOSTILE}\nok: [all]"}},
        {"event": "runner_on_start", "event_data": {"host": HOSTILE}},
        {"event": "runner_on_async_poll", "event_data": {"host": HOSTILE, "res": {}}},
        {"event": "runner_on_failed", "event_data": {"host": HOSTILE, "res": {"msg": f"{HOSTILE} failed"}}},
        {"event": "runner_on_unreachable", "event_data": {"host": HOSTILE, "res": {"msg": HOSTILE}}},
        {"event": "playbook_on_stats", "event_data": {}},
    ]


def run_live(events: list[dict[str, Any]], tty: bool, echo: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    """What `rdmaforge provision` (-v with ``echo``) shows of ``events`` on a terminal or a pipe, through
    rdmaforge.terminal's escaping as rdmaforge.cli installs it; the recap after them is left out."""
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("NO_COLOR", raising=False)

    def fake_run(
        request: Any, run_dir: Path, on_event: Any = None, scrubbed: Any = None, read: Any = None
    ) -> execute.Outcome:
        for event in events:
            on_event(event)
        return execute.Outcome("failed", 2, EventLog(), {}, run_dir / "ansible", 0.0)

    monkeypatch.setattr(execute, "run", fake_run)
    shown = FakeTerminal() if tty else io.StringIO()
    out = terminal.EscapingStream(shown)
    session = command.Session("provision", Path("runs"), dt.datetime.now(dt.UTC), out, echo=echo)  # type: ignore[arg-type]
    command.run_playbook(session, None)  # type: ignore[arg-type]  # the fake run reads no request
    return shown.getvalue().split("(Ansible wrote no output)")[0]


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "plain"])
def test_progress_shows_control_characters_in_names_escaped(tty: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The live progress writes past rdmaforge.terminal's escaping on a terminal (its redraw is escape sequences):
    a host or task name with ESC [2J, a carriage return or a newline in it is shown escaped, each on its line."""
    text = run_live(hostile_events(), tty, echo=False, monkeypatch=monkeypatch)
    own = text.replace(CLEAR, "")  # the progress line's own redraw, on a terminal only
    assert (own != text) is tty
    assert "\x1b" not in own and "\r" not in own, own
    assert "PLAY [n1\\x1b[2J\\x0dPLAY RECAP]" in text
    assert "Build n1\\x1b[2J\\x0dPLAY RECAP\\x0aok: [all]" in text  # the newline does not start a line
    assert not any(line.startswith(("PLAY RECAP", "ok: [all]")) for line in own.splitlines()), own
    assert "FAILED n1\\x1b[2J\\x0dPLAY RECAP: n1\\x1b[2J" in text  # the message's first line ends at its CR


def test_progress_status_line_is_cut_to_the_width_after_escaping() -> None:
    """The redrawn line fits the terminal: its escapes count as the columns they take."""
    out = FakeTerminal()
    progress = Progress(out, tty=True, width=lambda: 41)
    progress.handle({"event": "playbook_on_task_start", "event_data": {"name": "\x1b" * 40}})
    assert out.getvalue() == CLEAR + "[0.0s] " + "\\x1b" * 7 + "\\x..."


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "plain"])
def test_echo_shows_node_output_escaped_and_keeps_ansible_line_ends(
    tty: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-v's echo: Ansible's CR LF line ends (it writes to a pty) are newlines; an ESC [2J or a lone CR in a node's
    output is shown escaped, on a terminal too."""
    event = {"event": "runner_on_ok", "stdout": f"\r\nTASK [Show] ***\r\nok: [{HOSTILE}] => {{'msg': 'x\ry'}}"}
    text = run_live([event], tty, echo=True, monkeypatch=monkeypatch)
    assert text.startswith("\nTASK [Show] ***\nok: [n1\\x1b[2J\\x0dPLAY RECAP] => {'msg': 'x\\x0dy'}\n"), text


# --- completion -----------------------------------------------------------------------------------------------


def test_bash_completion_is_valid_and_has_every_command_and_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", "bash"]) == ExitCode.OK
    script = capsys.readouterr().out
    path = tmp_path / "rdmaforge.bash"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    for name, parser in subcommands().items():
        assert name in script
        for option in completion.options(parser):
            assert option in script, (name, option)
    assert "--skip-tags" in script and "--vault-password-file" in script
    probe = (
        'complete_for() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _rdmaforge; '
        'echo "${COMPREPLY[*]}"; }; '
        "complete_for rdmaforge prov; complete_for rdmaforge provision --skip; complete_for rdmaforge lab i; "
        "complete_for rdmaforge provision -i hosts.yml -f 2 --vault-i; complete_for rdmaforge completion z"
    )
    lines = subprocess.run(["bash", "-c", f"source {path}; {probe}"], check=True, capture_output=True,
                           text=True).stdout.splitlines()  # fmt: skip
    assert lines == ["provision", "--skip-tags", "impair", "--vault-id", "zsh"]


def test_zsh_completion_goes_through_bashcompinit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "zsh"]) == ExitCode.OK
    script = capsys.readouterr().out
    assert "bashcompinit" in script and "complete -o filenames -F _rdmaforge rdmaforge" in script
    zsh = shutil.which("zsh")
    if zsh:
        path = tmp_path / "_rdmaforge"
        path.write_text(script)
        subprocess.run([zsh, "-n", str(path)], check=True)


# --- one exit-code table ---------------------------------------------------------------------------------------


def test_every_command_lists_its_exit_codes_and_usage_errors_exit_64(capsys: pytest.CaptureFixture[str]) -> None:
    names = subcommands()
    assert {"provision", "verify", "doctor", "bench", "pairwise", "report", "render", "baseline", "summary",
            "nccl-report", "lab", "completion"} <= set(names)  # fmt: skip
    for name in names:
        assert main([name, "--help"]) == ExitCode.OK, name
        text = " ".join(capsys.readouterr().out.split())
        assert "exit codes: 0 " in text, name  # "success", or what success means for this command
        for code in (ExitCode.BAD_INPUT, ExitCode.INTERNAL):
            assert f"{int(code)} {MEANING[code]}" in text, (name, code)
        listed = [int(c) for c in re.findall(r"(?:codes: |; )(\d+) ", text)]
        assert listed and all(ExitCode(c) in MEANING for c in listed), name
        for argv in ([name, "--no-such-option"], [name, "lab-no-such-verb"] if name == "lab" else []):
            if argv:
                assert main(argv) == ExitCode.BAD_INPUT, argv
                assert "error:" in capsys.readouterr().err
    for verb in completion.sub_parsers(names["lab"]):
        assert main(["lab", verb, "--no-such-option"]) == ExitCode.BAD_INPUT, verb
        capsys.readouterr()
    assert main(["no-such-command"]) == ExitCode.BAD_INPUT
    assert main(["completion", "fish"]) == ExitCode.BAD_INPUT



def test_every_commands_output_option_refuses_an_empty_path() -> None:
    """-o '' is Path("."): each command's -o/--output takes the shared type that refuses it (a usage error, 64)."""
    found = []
    for name, parser in subcommands().items():
        for action in parser._actions:
            if {"-o", "--output"} & set(action.option_strings):
                found.append(name)
                assert callable(action.type), name
                with pytest.raises(argparse.ArgumentTypeError, match="an empty path"):
                    action.type("")
                assert action.type("out") == Path("out"), name
    assert {"render", "baseline"} <= set(found)


def test_every_commands_limit_refuses_an_empty_pattern(capsys: pytest.CaptureFixture[str]) -> None:
    """--limit "" is no limit to Ansible: a script whose $NODES was unset reset every node. Each command's --limit
    refuses it (a usage error, 64) and keeps a real pattern as given."""
    found = []
    for name, parser in subcommands().items():
        for action in parser._actions:
            if "--limit" in action.option_strings:
                found.append(name)
                assert callable(action.type), name
                for empty in ("", "  "):
                    with pytest.raises(argparse.ArgumentTypeError, match="an empty pattern"):
                        action.type(empty)
                assert action.type("cluster:!node3") == "cluster:!node3", name
    assert {"provision", "reset", "verify", "remove-node", "upgrade-nccl"} <= set(found), found
    assert main(["reset", "-i", "hosts.yml", "--yes", "--limit", ""]) == 64
    assert "an empty pattern" in capsys.readouterr().err


# --- review round 17c: each --help lists what its command can return, in plain text -----------------------------

#: Codes a command can return besides 0, 1, 64, 70 and 130, read from its run() (README's exit code table).
OWN_CODES = {
    "provision": {2, 3, 8, 75}, "verify": {2, 3, 5}, "doctor": {2, 3, 5, 6}, "bench": {2, 3, 4, 5},
    "pairwise": {2, 3, 5, 7}, "remove-node": {2, 3, 75}, "upgrade-nccl": {2, 3, 75}, "rollback-nccl": {2, 3, 75},
    "reset": {2, 3, 75}, "report": {4, 5}, "baseline": set(), "summary": set(), "completion": set(),
    "nccl-report": {4, 5}, "render": {5},
}  # fmt: skip


@pytest.mark.parametrize("name", list(OWN_CODES))
def test_each_help_lists_the_exit_codes_its_command_can_return(name: str) -> None:
    """Every command printed the whole table: baseline listed 2 to 8 and 75, though it returns 0 or 64; doctor and
    verify listed 8 and 75 without --fail-on-drift or --no-wait."""
    text = " ".join(subcommands()[name].format_help().split())
    listed = {int(code) for code in re.findall(r"(?:exit codes: |; )(\d+) ", text)}
    assert listed == {0, 1, 64, 70, 130} | OWN_CODES[name], (name, listed)


def test_help_is_plain_text_and_names_no_module() -> None:
    """The top --help began with the module docstring's first line ("each sub-command lives in its own module of
    rdmaforge.commands"), and three commands printed reST's double backquotes."""
    assert "rdmaforge.commands" not in cli.build_parser().format_help()
    for name, parser in subcommands().items():
        assert "``" not in parser.format_help(), name


@pytest.mark.parametrize("argv", [["-h", "summary"], ["--help", "nccl-report"], ["-h", "lab", "up"]])
def test_help_before_a_command_is_that_commands_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`rdmaforge -h summary` printed the top help (review round 34a, low): the command named is the one asked of."""
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: rdmaforge {' '.join(argv[1:])} "), out[:200]


def test_an_unknown_option_after_a_command_is_named_with_that_commands_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It printed the top usage (`rdmaforge [-h] [--version] COMMAND ...`), as if the command were unknown."""
    assert main(["summary", "s.json", "--bogus"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("usage: rdmaforge summary"), err
    assert "rdmaforge summary: error: unrecognized arguments: --bogus" in err
    # a verb of its own (`lab up`): that verb's usage, not the lab's list of verbs
    assert main(["lab", "up", "--bogus"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("usage: rdmaforge lab up"), err
    assert "rdmaforge lab up: error: unrecognized arguments: --bogus" in err


def test_help_names_the_playbooks_as_an_installed_user_runs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """From the wheel there is no playbooks/ directory: provision's help said it 'Runs playbooks/site.yml'."""
    from rdmaforge import paths

    monkeypatch.setattr(paths, "CHECKOUT", None)
    for name, playbook in (("provision", "site"), ("bench", "bench"), ("pairwise", "pairwise"), ("doctor", "doctor")):
        text = " ".join(subcommands()[name].format_help().split())
        assert f"rdmaforge.cluster.{playbook}" in text and f"playbooks/{playbook}.yml" not in text, (name, text)
    monkeypatch.undo()
    assert "playbooks/site.yml" in " ".join(subcommands()["provision"].format_help().split())


def test_no_message_of_the_package_sends_a_user_to_the_checkouts_docs() -> None:
    """The wheel carries no docs/ directory: the AIACC plugin's init hint ended '(docs/nccl-tests-on-gpu.md)', a file
    a wheel user does not have. Messages say what the user needs themselves."""
    import ast

    import rdmaforge

    named = []
    for source in Path(rdmaforge.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "docs/" in node.value:
                named.append(f"{source.name}:{node.lineno}: {node.value[:80]}")
    assert not named, named


@pytest.mark.parametrize("name", ["provision", "verify", "doctor", "reset"])
def test_a_run_refused_before_it_starts_still_prints_its_json(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json promises one JSON document on stdout: an inventory with a YAML error (exit 64 before any run) printed
    nothing there, and `rdmaforge provision --json | jq` failed on empty input (review round 17c)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    cluster:\n      hosts:\n        n1: {ansible_host: 198.18.250.11\n")
    more = ["--yes"] if name == "reset" else []
    assert main([name, "-i", str(inventory), "--json", "--runs-dir", str(tmp_path / "runs"), *more]) == 64
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["command"] == name and document["exit_code"] == 64 and "YAML syntax error" in document["error"]
    assert "YAML syntax error" in err


@pytest.mark.parametrize("name", ["provision", "verify", "doctor"])
def test_a_command_line_refused_by_argparse_still_prints_its_json(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review round 25c: an unknown flag with --json left stdout empty (argparse's usage on stderr only)."""
    assert main([name, "-i", str(tmp_path / "hosts.yml"), "--jso" if name == "doctor" else "--json", "--bogus"]) == 64
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document == {"command": name, "exit_code": 64, "meaning": document["meaning"],
                        "error": "unrecognized arguments: --bogus"}  # fmt: skip
    assert "error: unrecognized arguments: --bogus" in err


def test_each_help_has_one_exit_code_list_and_local_commands_name_no_inventory() -> None:
    """Review round 29a: render's and nccl-report's descriptions had an exit-code list of their own that the
    epilog's contradicted (5 as "a required check was skipped" against "--validate found no manifest"); verify's
    description said 2 "a test failed on a node", the epilog "a host failed"; commands that take no inventory
    listed 1 as "an inventory Ansible cannot parse"."""
    helps = {name: " ".join(parser.format_help().split()) for name, parser in subcommands().items()}
    for name, text in helps.items():
        assert text.count("xit code") == 1, (name, text)  # "exit codes:" of the epilog, and no other list
    for name in ("summary", "baseline", "completion", "report", "nccl-report", "render"):
        assert "inventory Ansible cannot parse" not in helps[name], name
        assert "output was cut short (a closed pipe, a full disk)" in helps[name], name
    assert "2 a test failed on a node; 3 a node was unreachable" in helps["verify"]
    assert "5 --validate found no Kubernetes manifest" in helps["render"]
    assert "1 a manifest failed validation" in helps["render"]


@pytest.mark.parametrize("name", ["render", "verify", "doctor"])
def test_a_stale_rdmaforge_root_is_named(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """RDMAFORGE_ROOT left pointing at a removed checkout: render said 'cannot run ansible-inventory', verify ended in
    an internal error (exit 70) about missing collection files (round 33a). The variable is named, exit 64."""
    from rdmaforge.paths import PROJECT_ROOT

    monkeypatch.setenv("RDMAFORGE_ROOT", str(tmp_path / "old-checkout"))
    inventory = str(PROJECT_ROOT / "inventories" / "example" / "hosts.yml")
    more = ["-o", str(tmp_path / "out")] if name == "render" else ["--runs-dir", str(tmp_path / "runs")]
    assert main([name, "-i", inventory, *more]) == 64
    err = capsys.readouterr().err
    assert f"RDMAFORGE_ROOT={tmp_path / 'old-checkout'} is not an rdmaforge checkout" in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_a_stale_rdmaforge_root_does_not_stop_nccl_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """nccl-report reads only the logs it is given: the variable is not its concern."""
    monkeypatch.setenv("RDMAFORGE_ROOT", str(tmp_path / "old-checkout"))
    log = tmp_path / "empty.log"
    log.write_text("")
    main(["nccl-report", str(log)])
    assert "RDMAFORGE_ROOT" not in capsys.readouterr().err
