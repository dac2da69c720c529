"""The runner plumbing end to end, for real: a tiny playbook through ansible-runner's Python API against this
machine (ansible_connection=local), plus one host whose SSH port is closed. No lab, a few seconds."""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.paths import PLAYBOOKS_DIR
from rdmaforge.runner import command, execute, extravars
from rdmaforge.runner.exit_codes import ExitCode

SECRET = "hunter2-never-on-disk"
PLAYBOOK = """---
- name: Tiny play
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Say hello
      ansible.builtin.command: echo hello
      changed_when: false
    - name: Print a secret the careless way
      ansible.builtin.debug:
        msg: "the password is {{ db_password | default('unset') }}"
    # 6 s, polled each second: with 2 s, a fresh clone's unit tests beside the lab (stop 55) saw the job end before
    # the first poll answered, and no "still running" line could be printed.
    - name: Wait a little, asynchronously
      ansible.builtin.command: sleep 6
      async: 30
      poll: 1
      changed_when: false
    - name: Fail where asked to
      ansible.builtin.fail:
        msg: broken on purpose
      when: inventory_hostname in (fail_on | default('')).split(',')
"""
#: The tiny play without its asynchronous wait, for the runs that check failures: the "still running" lines are the
#: clean run's to show, and each look at the job is a module run on every host.
WAIT = PLAYBOOK[PLAYBOOK.index("    # 6 s, polled") : PLAYBOOK.index("    - name: Fail where asked to")]
WITHOUT_WAIT = PLAYBOOK.replace(WAIT, "")


def inventory(tmp_path: Path, unreachable: bool = False) -> Path:
    hosts: dict[str, dict[str, object]] = {
        name: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable} for name in ("n1", "n2")
    }
    if unreachable:
        # Port 1 on this machine: the connection is refused at once, the same everywhere.
        hosts["ghost"] = {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody"}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    return path


def run(
    tmp_path: Path, *extra: str, unreachable: bool = False, text: str = PLAYBOOK, check: bool = False,
    limit: str | None = None,
) -> tuple[int, command.Session, str, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    playbook = tmp_path / "tiny.yml"
    playbook.write_text(text)
    out = io.StringIO()
    args = command_args(tmp_path)
    session = command.start(args, "tiny", out=out)
    request = execute.Request(inventory=inventory(tmp_path, unreachable), playbook=playbook,
                              extra_vars=extravars.parse(list(extra)), check=check, limit=limit)  # fmt: skip
    outcome = command.run_playbook(session, request)
    code = command.finish(session, args, command.playbook_exit(outcome), command.host_cases(outcome, "tiny"),
                          command.outcome_record(outcome))  # fmt: skip
    return code, session, out.getvalue(), args.junit


def command_args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(runs_dir=tmp_path / "runs", keep=5, junit=tmp_path / "ci" / "junit.xml")


@dataclass(frozen=True)
class CleanRun:
    """One clean run of the tiny play, read by the two tests after: a password on the command line, a JSON mapping
    and a vars file, with the temporary root of its own that the private vars directory is made in."""

    code: int
    session: command.Session
    out: str
    junit_path: Path
    private_root: Path
    temporary_directories: list[Path]  # every tempfile.TemporaryDirectory made while it ran


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> CleanRun:
    tmp_path = tmp_path_factory.mktemp("clean-run")
    # A temporary root of the run's own: other tests running beside it (pytest-xdist) have their private vars
    # directories under /tmp at the same moment, so a glob there raced with them (CI, stop 25).
    private_root = tmp_path / "tmp"
    private_root.mkdir()
    seen: list[Path] = []
    real_tempdir = tempfile.TemporaryDirectory

    def spying_tempdir(*args: Any, **kwargs: Any) -> tempfile.TemporaryDirectory[str]:
        made = real_tempdir(*args, **kwargs)
        seen.append(Path(made.name))
        return made

    vars_file = tmp_path / "secret.yml"
    vars_file.write_text(f"vault_token: {SECRET}-file\n")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(tempfile, "tempdir", str(private_root))
        # execute calls tempfile.TemporaryDirectory
        monkeypatch.setattr(tempfile, "TemporaryDirectory", spying_tempdir)
        code, session, out, junit_path = run(tmp_path, f"db_password={SECRET}", '{"unrelated": 1}', f"@{vars_file}")
    return CleanRun(code, session, out, junit_path, private_root, seen)


def test_a_clean_run_exits_0_with_progress_recap_and_artifacts(clean_run: CleanRun) -> None:
    code, session, out, junit_path = clean_run.code, clean_run.session, clean_run.out, clean_run.junit_path
    assert code == ExitCode.OK, out
    assert "TASK [Say hello]" in out and "still running" in out  # plain progress (not a TTY), async elapsed time
    assert [line.split()[:4] for line in out.splitlines() if line.startswith(("n1 ", "n2 "))] == [
        ["n1", "3", "0", "0"],
        ["n2", "3", "0", "0"],
    ]
    assert out.rstrip().endswith(f"exit 0 (success); artifacts: {session.run_dir}")
    ansible = session.run_dir / "ansible"
    assert (ansible / "stdout").is_file() and list((ansible / "job_events").glob("*.json"))
    recap = json.loads((session.run_dir / "recap.json").read_text())
    assert recap["exit_code"] == 0 and set(recap["hosts"]) == {"n1", "n2"}
    assert ET.parse(junit_path).getroot().get("tests") == "2"
    assert (session.run_dir / "junit.xml").read_text() == junit_path.read_text()


def test_secrets_never_reach_env_nor_any_artifact(clean_run: CleanRun) -> None:
    code, session = clean_run.code, clean_run.session
    assert code == ExitCode.OK
    assert not (session.run_dir / "env").exists()  # ansible-runner's env/ (extravars, passwords, ssh_key)
    for path in session.run_dir.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    stdout = (session.run_dir / "ansible" / "stdout").read_text()
    assert "the password is ********" in stdout  # the task did print it; the artifact does not keep it
    recorded = json.loads((session.run_dir / "ansible" / "command").read_text())
    assert all("=" not in arg or not arg.startswith("db_password") for arg in recorded["command"])
    seen, private_root = clean_run.temporary_directories, clean_run.private_root
    assert [p.parent for p in seen] == [private_root] and seen[0].name.startswith("rdmaforge-vars-")
    assert not list(private_root.iterdir())  # the private vars directory, extravars file and all, is gone


def test_a_failing_task_exits_2_and_an_unreachable_host_3(tmp_path: Path) -> None:
    code, _, out, junit_path = run(tmp_path / "a", "fail_on=n2", text=WITHOUT_WAIT)
    assert code == ExitCode.HOST_FAILED, out
    assert "  FAILED n2: broken on purpose" in out and "n2: failed: Fail where asked to: broken on purpose" in out
    failure = ET.parse(junit_path).getroot().find(".//testcase[@name='n2']/failure")
    assert failure is not None and failure.get("message") == "Fail where asked to: broken on purpose"

    code, _, out, junit_path = run(tmp_path / "b", "fail_on=n2", unreachable=True, text=WITHOUT_WAIT)
    assert code == ExitCode.UNREACHABLE, out
    assert "UNREACHABLE ghost" in out
    assert ET.parse(junit_path).getroot().find(".//testcase[@name='ghost']/error") is not None


#: preflight.yml's shape (issue 18): an inventory problem stops every host, each with a failure that says why
#: (any_errors_fatal alone would leave the others looking "ok"); then the first task that connects; a later play
#: stands for the rest of site.yml.
PREFLIGHT_THEN_SITE = """---
- name: Preflight
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Stop on an inventory problem
      ansible.builtin.fail:
        msg: bad inventory on purpose
      when: inventory_hostname in (bad_inventory | default('')).split(',')
    - name: Stop every node when the inventory has problems
      ansible.builtin.fail:
        msg: "not run: the inventory has problems on {{ bad_inventory }}; no node was changed"
      when: bad_inventory is defined
      any_errors_fatal: true
    - name: Check the node
      ansible.builtin.ping:
- name: Later play
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Converge
      ansible.builtin.command: echo converged
      changed_when: false
"""


def test_an_unreachable_node_is_left_out_and_the_others_run_the_later_plays(tmp_path: Path) -> None:
    code, _, out, junit_path = run(tmp_path / "a", unreachable=True, text=PREFLIGHT_THEN_SITE)
    assert code == ExitCode.UNREACHABLE, out
    assert "  UNREACHABLE ghost: " in out and "ghost: unreachable: Check the node: " in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(("n1 ", "n2 ", "ghost "))}
    # ok, changed, failed, unreachable, ..., status: n1 and n2 pinged and ran the later play (ok=2), ghost did not.
    assert rows["n1"][:4] == rows["n2"][:4] == ["2", "0", "0", "0"] and rows["n1"][-1] == rows["n2"][-1] == "ok", out
    assert rows["ghost"][:4] == ["0", "0", "0", "1"] and rows["ghost"][-1] == "UNREACHABLE", out
    assert out.count("TASK [Converge]") == 1 and "exit 3 (a host was unreachable)" in out
    suite = ET.parse(junit_path).getroot()
    assert suite.find(".//testcase[@name='ghost']/error") is not None
    assert all(suite.find(f".//testcase[@name='n1']/{tag}") is None for tag in ("failure", "error", "skipped"))

    # An inventory problem still stops every host before the first connection (the unreachable one is never
    # tried): n2 with its problem, the others with "not run", none of them ok.
    code, _, out, _ = run(tmp_path / "b", "bad_inventory=n2", unreachable=True, text=PREFLIGHT_THEN_SITE)
    assert code == ExitCode.HOST_FAILED, out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(("n1 ", "n2 ", "ghost "))}
    assert {host: cells[-1] for host, cells in rows.items()} == dict.fromkeys(("ghost", "n1", "n2"), "FAILED"), out
    assert "n2: failed: Stop on an inventory problem: bad inventory on purpose" in out
    assert "n1: failed: Stop every node when the inventory has problems: not run: " in out
    assert "TASK [Check the node]" not in out and "TASK [Converge]" not in out


#: The tiny play's first task, then one that kills ansible-playbook (SIGKILL, as the OOM killer does): it dies with no
#: recap.
KILLED_MID_RUN = PLAYBOOK[: PLAYBOOK.index("    - name: Print a secret")] + """\
    - name: Kill ansible-playbook as the OOM killer would
      # -o: the oldest process whose command line names this playbook, the main one (its workers are its forks).
      ansible.builtin.command: pkill -KILL -o -f -- "{{ playbook_dir }}/tiny.yml"
      run_once: true
      changed_when: false
"""


def test_a_run_ansible_dies_in_shows_no_host_ok(tmp_path: Path) -> None:
    """Review round 36: ansible-playbook killed after a task had run on both hosts left no stats, and the recap was
    built from the events as for an ad-hoc run: both hosts ok, and passed in the JUnit XML. They are STOPPED."""
    code, session, out, junit_path = run(tmp_path, text=KILLED_MID_RUN)
    assert code == ExitCode.ERROR, out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(("n1 ", "n2 "))}
    assert {host: cells[-1] for host, cells in rows.items()} == {"n1": "STOPPED", "n2": "STOPPED"}, out
    assert "  ansible-playbook ended before its recap (" in out and "TASK [Kill ansible-playbook" in out, out
    assert json.loads((session.run_dir / "recap.json").read_text())["hosts"]["n1"]["status"] == "STOPPED"
    suite = ET.parse(junit_path).getroot()
    assert all(suite.find(f".//testcase[@name='{host}']/skipped") is not None for host in ("n1", "n2"))


#: Killed while the first play runs on n1 alone: n2, in group cluster, is never reached.
KILLED_BEFORE_N2 = """---
- name: A play for n1 first
  hosts: n1
  gather_facts: false
  tasks:
    - name: Greet
      ansible.builtin.debug:
        msg: hello
    - name: Kill ansible-playbook as the OOM killer would
      ansible.builtin.command: pkill -KILL -o -f -- "{{ playbook_dir }}/tiny.yml"
      changed_when: false
- name: The cluster
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Converge
      ansible.builtin.debug:
        msg: converged
"""


def test_a_host_a_dead_run_never_reached_has_a_row_of_its_own(tmp_path: Path) -> None:
    """A run Ansible died in listed only the hosts it had reached: the recap of a cluster read as complete, the
    others missing from it and from the JUnit XML. Each host of the cluster within the limit has a row: NOT_RUN."""
    code, session, out, junit_path = run(tmp_path / "a", text=KILLED_BEFORE_N2)
    assert code == ExitCode.ERROR, out
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.startswith(("n1 ", "n2 "))}
    assert rows == {"n1": "STOPPED", "n2": "NOT_RUN"}, out
    assert json.loads((session.run_dir / "recap.json").read_text())["hosts"]["n2"]["status"] == "NOT_RUN"
    skipped = ET.parse(junit_path).getroot().find(".//testcase[@name='n2']/skipped")
    assert skipped is not None and skipped.get("message") == "NOT_RUN: the run ended before it reached this host"
    # --limit n1: n2 was never meant to run, and has no row
    code, _, out, _ = run(tmp_path / "b", text=KILLED_BEFORE_N2, limit="n1")
    assert code == ExitCode.ERROR and not [line for line in out.splitlines() if line.startswith("n2 ")], out


#: remove_node.yml's pattern for a removed node that does not answer: ignore_unreachable (Ansible then counts the
#: failed ping ok and ignored), the fact that names the host left, and end_host.
LEFT_UNREACHED = """---
- name: Leave a node that does not answer
  hosts: cluster
  gather_facts: false
  ignore_unreachable: true
  tasks:
    - name: See whether the node answers
      ansible.builtin.ping:
      register: reach
    - name: Record that the node was left
      ansible.builtin.set_fact:
        rdmaforge_left: did not answer
      when: reach.unreachable | default(false)
    - name: Leave it
      ansible.builtin.meta: end_host
      when: reach.unreachable | default(false)
"""


def test_a_host_a_play_leaves_unreached_is_stopped_not_ok(tmp_path: Path) -> None:
    """Review round 36: `rdmaforge remove-node` showed a removed node that did not answer as ok, and passed it in
    JUnit: Ansible counts an ignored unreachable result as ok. The play's rdmaforge_left fact makes it STOPPED."""
    code, session, out, junit_path = run(tmp_path, unreachable=True, text=LEFT_UNREACHED)
    assert code == ExitCode.OK, out  # leaving it is what the play means to do
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.startswith(("n1 ", "n2 ", "ghost "))}
    assert rows == {"n1": "ok", "n2": "ok", "ghost": "STOPPED"}, out
    suite = ET.parse(junit_path).getroot()
    skipped = suite.find(".//testcase[@name='ghost']/skipped")
    assert skipped is not None and skipped.get("message") == "STOPPED: the playbook left it: did not answer"
    # remove_node.yml sets that fact where it leaves a removed node that does not answer.
    plays = yaml.safe_load((PLAYBOOKS_DIR / "remove_node.yml").read_text())
    tasks = [task for play in plays for task in play.get("tasks", [])]
    assert any(execute.LEFT_FACT in (task.get("ansible.builtin.set_fact") or {}) for task in tasks)


def test_ansible_errors_before_any_host_exit_1(tmp_path: Path) -> None:
    playbook = tmp_path / "broken.yml"
    playbook.write_text("- hosts: cluster\n  tasks:\n    - no_such_module_here: {}\n")
    args = command_args(tmp_path)
    out = io.StringIO()
    session = command.start(args, "broken", out=out)
    outcome = command.run_playbook(session, execute.Request(inventory=inventory(tmp_path), playbook=playbook))
    assert command.playbook_exit(outcome) == ExitCode.ERROR and not outcome.ran
    assert "no_such_module_here" in out.getvalue()  # Ansible's own error is shown: nothing else says why


def test_old_runs_are_rotated_on_the_next_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for stamp in ("20200101T000000Z", "20200102T000000Z", "20200103T000000Z"):
        (runs / f"{stamp}-tiny").mkdir(parents=True)
    args = command_args(tmp_path)
    args.keep = 2
    session = command.start(args, "tiny", out=io.StringIO())
    assert sorted(p.name for p in runs.iterdir()) == ["20200103T000000Z-tiny", session.run_dir.name]


def test_a_second_provision_on_the_same_inventory_waits_or_exits_75(tmp_path: Path) -> None:
    """One converge at a time per inventory: the lock is held by a real second process, as a running
    `rdmaforge provision` holds it; --no-wait exits 75 naming the holder, before Ansible starts."""
    import os
    import subprocess

    import pytest

    from rdmaforge.paths import PROJECT_ROOT
    from rdmaforge.runner import run_lock

    inventory = PROJECT_ROOT / "inventories" / "example" / "hosts.yml"  # never contacted: the lock comes first
    env = {**os.environ, "RDMAFORGE_CONTROLLER_CACHE": str(tmp_path)}
    locks = tmp_path / "locks"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from rdmaforge.runner import run_lock\n"
         f"with run_lock.inventory_lock(Path({str(inventory)!r}), 'provision', True, sys.stdout,"
         f" Path({str(locks)!r})):\n"
         "    print('held', flush=True); time.sleep(3600)"],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        busy = subprocess.run(
            [str(Path(sys.executable).parent / "rdmaforge"), "provision", "-i", str(inventory), "--no-wait"],
            capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        assert busy.returncode == 75, busy.stderr
        assert f"rdmaforge provision (pid {holder.pid}" in busy.stderr and str(inventory) in busy.stderr
        # The lifecycle commands change nodes too: the same lock, the same answer.
        for argv in (["remove-node", "node1"], ["upgrade-nccl"], ["rollback-nccl"], ["reset", "--yes"]):
            other = subprocess.run(
                [str(Path(sys.executable).parent / "rdmaforge"), *argv, "-i", str(inventory), "--no-wait"],
                capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
            )  # fmt: skip
            assert other.returncode == 75, (argv, other.stderr)
            assert f"rdmaforge {argv[0]}: " in other.stderr and f"(pid {holder.pid}" in other.stderr, other.stderr
        with pytest.raises(run_lock.Busy):
            with run_lock.inventory_lock(inventory, "provision", False, sys.stdout, tmp_path / "locks"):
                pass
    finally:
        holder.kill()
        holder.wait()
    # Released with its holder, even killed: the next run gets it at once.
    with run_lock.inventory_lock(inventory, "provision", False, sys.stdout, tmp_path / "locks"):
        pass


#: Three kinds of change a check run must name: a file written, loop items, and a message a role prints for what it
#: would do (the eni role's re-apply). The debug's change stands for a repair that only a run can make.
CHANGES = """---
- name: Things to change
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Write the greeting
      ansible.builtin.copy:
        content: "hello from {{ inventory_hostname }}\\n"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.txt"
        mode: "0644"
    - name: Write two more files
      ansible.builtin.copy:
        content: "{{ item }}\\n"
        dest: "{{ out_dir }}/{{ inventory_hostname }}-{{ item }}.txt"
        mode: "0644"
      loop: [a, b]
    - name: Say what a run would repair
      ansible.builtin.debug:
        msg: "{{ inventory_hostname }}: would apply the thing again"
      changed_when: true
      when: repair | default(true) | bool
"""


def test_a_check_run_names_what_a_run_would_change_and_a_run_does_not_list_its_changes(tmp_path: Path) -> None:
    out_dir = tmp_path / "written"
    out_dir.mkdir()
    code, session, out, _ = run(tmp_path / "check", f"out_dir={out_dir}", text=CHANGES, check=True)
    assert code == ExitCode.OK, out
    assert not list(out_dir.iterdir())  # check mode wrote nothing
    expected = {host: [f"  {host}: would change: Write the greeting: {out_dir}/{host}.txt",
                       f"  {host}: would change: Write two more files: a, b",
                       f"  {host}: would change: Say what a run would repair: {host}: would apply the thing again"]
                for host in ("n1", "n2")}  # fmt: skip
    assert [line for line in out.splitlines() if ": would change" in line] == expected["n1"] + expected["n2"], out
    # Nothing changed: the table's status says so, in one word (a script reading the last column gets all of it).
    assert statuses(out) == {"n1": "would_change", "n2": "would_change"}, out
    recap = json.loads((session.run_dir / "recap.json").read_text())
    assert {host: row["status"] for host, row in recap["hosts"].items()} == statuses(out)
    tasks = ("Write the greeting", "Write two more files", "Say what a run would repair")
    # In the order the events came: task by task, the two hosts of a task in either order.
    listed = sorted((c["host"], c["task"]) for c in recap["would_change"])
    assert listed == [(host, task) for host in ("n1", "n2") for task in sorted(tasks)]

    code, session, out, _ = run(tmp_path / "converge", f"out_dir={out_dir}", "repair=false", text=CHANGES)
    assert code == ExitCode.OK, out
    assert (out_dir / "n2-b.txt").read_text() == "b\n"
    assert "would change" not in out  # a run's changes are in its recap counts and ansible/stdout
    assert "would_change" not in json.loads((session.run_dir / "recap.json").read_text())
    assert statuses(out) == {"n1": "changed", "n2": "changed"}, out

    code, session, out, _ = run(tmp_path / "again", f"out_dir={out_dir}", "repair=false", text=CHANGES, check=True)
    assert code == ExitCode.OK, out
    assert "would change" not in out
    assert json.loads((session.run_dir / "recap.json").read_text())["would_change"] == []
    assert statuses(out) == {"n1": "ok", "n2": "ok"}, out


def statuses(out: str) -> dict[str, str]:
    """The recap table's last column, by host."""
    return {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.startswith(("n1 ", "n2 "))}


SLOW = """---
- name: A play interrupted in its middle
  hosts: n1
  gather_facts: false
  tasks:
    - name: Say where it is
      ansible.builtin.file:
        path: "{{ started }}"
        state: touch
        mode: "0644"
    - name: Take long
      # The sleeping process names the run's directory, so that the test can tell it is gone.
      ansible.builtin.command: "{{ ansible_python_interpreter }} -c 'import time; time.sleep(120)' {{ started }}"
      changed_when: false
"""


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGHUP"])
def test_ctrl_c_stops_ansible_before_the_command_exits_130(tmp_path: Path, signal_name: str) -> None:
    """Review round 25c: Ansible runs in a session of its own, which a terminal's Ctrl-C never reaches; the command
    exited 130 at once and left ansible-playbook (and its task) running after the run lock was released. Ctrl-C
    now cancels the run: its whole process group is killed, then the command exits 130. Review round 27b: the same
    for a hang-up (the operator's SSH session to the controller dropped), which killed the command at once."""
    import os
    import signal
    import subprocess
    import time

    from rdmaforge.paths import PROJECT_ROOT

    started = tmp_path / "started"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from rdmaforge.cli import main\n"
        "from tests.unit import test_runner_local as t\n"
        "try:\n"
        f"    t.run(Path(sys.argv[1]), 'started={started}', text=t.SLOW)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
        "sys.exit(1)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "run")], cwd=PROJECT_ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started.exists(), child.communicate(timeout=30)[0][-3000:]
        sleeper = f"time.sleep(120) {started}"  # as ps shows it, without the quotes
        while time.monotonic() < deadline and sleeper not in subprocess.run(
                ["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=False).stdout:  # fmt: skip
            time.sleep(0.2)
        os.kill(child.pid, getattr(signal, signal_name))
        output = child.communicate(timeout=60)[0]
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, output[-3000:]
    # Nothing of that run is left: no ansible-playbook, no worker, no process of its task (which names tmp_path).
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-af", str(tmp_path)], capture_output=True, text=True, check=False).stdout
    assert left == "", left


def test_a_signal_the_command_was_started_ignoring_stays_ignored() -> None:
    """Review round 28: the SIGHUP handler replaced nohup's "ignore", so `nohup rdmaforge provision &` was cancelled
    by the logout it was detached from."""
    import signal

    from rdmaforge.runner.execute import _signals_cancel

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with _signals_cancel():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN  # the others are still taken
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
