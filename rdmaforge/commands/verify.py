"""`rdmaforge verify -i INVENTORY`: the testinfra suite in tests/infra against any inventory, as a per-node table.

Read-only, so it is safe on a production cluster: the inventory checked as preflight checks it, on the controller
(playbooks/inventory_check.yml, in check mode: a bad inventory stops verify before any node is reached), then a
reachability probe (Ansible's ping, through ansible-runner), then pytest runs tests/infra on the nodes that
answered, with testinfra's ansible backend (connection settings and host-key checking from the inventory), writing
JUnit XML into the run directory (verify/).

A dynamic inventory is listed once for both (execute.reading): the ping and the suite read that listing
(inventory_list.replay), which testinfra's backend gets as its --ansible-inventory. It runs ansible-inventory --list
on it once per pytest process, and ad-hoc ansible -i on it for each host.ansible() call and for each command on a
host whose ansible_connection it does not handle itself: each of them reads the listing, never the inventory.

-u, -b, --become-user and the vault flags reach both: the ping as Ansible's own flags, testinfra through the
environment it reads (ANSIBLE_REMOTE_USER, ANSIBLE_BECOME, ANSIBLE_BECOME_USER; there they outrank the
inventory's ansible_user/ansible_become, as testinfra gives the environment the last word) and
ANSIBLE_VAULT_IDENTITY_LIST for its ansible-inventory and ansible. -f/--forks applies to the ping only (the suite
runs one pytest process). No --tags, --skip-tags, --check, --diff nor -e: its one playbook is the inventory check.

pytest's output (a failure message may print a host's secret variable) is redacted with the probe's secrets
(execute.secret_values) before pytest.log, the screen and the table see it; command.finish scrubs the rest.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from rdmaforge import infra_report
from rdmaforge.errors import CannotRun, host_pattern, install_hint, inventory_path
from rdmaforge.paths import VERIFY_ROOT, playbook
from rdmaforge.runner import command, execute, inventory_list, junit, secrets
from rdmaforge.runner.exit_codes import ExitCode

NAME = "verify"
SUITE = VERIFY_ROOT / "tests" / "infra"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="run the read-only testinfra suite (tests/infra) on every node; a pass/fail table per node",
        description="Checks what a converged node must hold: repositories and keys, packages, /etc/nccl.conf, the "
        "NCCL net plugin and its symbols, mpirun on the non-interactive PATH (tests/infra). Read-only: usable on "
        "production clusters.",
        codes=(ExitCode.INCOMPLETE,),
        meanings={
            ExitCode.OK: "no test failed, and on every node at least one passed (the skipped are listed with their "
                         "reasons)",
            ExitCode.HOST_FAILED: "a test failed on a node",
            ExitCode.UNREACHABLE: "a node was unreachable",
            ExitCode.INCOMPLETE: "every test on some node was skipped, a node has no test result, or -k selected no "
                                 "test (no verdict)",
        },
    )
    parser.add_argument("-i", "--inventory", type=inventory_path, required=True,
                        help="the cluster's inventory (hosts.yml)")  # fmt: skip
    parser.add_argument("-l", "--limit", default="cluster", type=host_pattern,
                        help="host pattern to verify (default: group cluster)")  # fmt: skip
    parser.add_argument("-k", dest="keyword", help="only tests matching this pytest -k expression")
    command.add_connection_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="print pytest's output as it runs")
    command.add_json_argument(parser)
    command.add_output_arguments(parser)
    parser.set_defaults(func=run)


def pytest_argv(hosts: list[str], inventory: Path, junit_path: Path, keyword: str | None) -> list[str]:
    # xunit1: the family that keeps each test's properties, where the suite records the node it ran on
    # (infra_report.NODE_PROPERTY); a node is never read back from the test id alone.
    # -c /dev/null, --rootdir and --confcutdir: the suite runs with its own settings only. pytest would otherwise take
    # the configuration file and conftest.py files of the directories above it: a project holding the venv, whose
    # `addopts = "-x"` stopped the table at the first failure, and whose `--cov` (a plugin this venv lacks) ended
    # the run before any test.
    argv = [sys.executable, "-m", "pytest", str(SUITE), "-c", os.devnull, f"--rootdir={VERIFY_ROOT}",
            f"--confcutdir={VERIFY_ROOT}", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
            "-q", "-rfE", f"--hosts={','.join(f'ansible://{h}' for h in hosts)}",
            f"--ansible-inventory={inventory.resolve()}", f"--junitxml={junit_path}"]  # fmt: skip
    return [*argv, "-k", keyword] if keyword else argv


def suite_environment(request: execute.Request) -> dict[str, str]:
    """The connection and vault flags as the environment testinfra's ansible backend and ansible-inventory read."""
    env: dict[str, str] = {}
    if request.user:
        env["ANSIBLE_REMOTE_USER"] = request.user
    if request.become:
        env["ANSIBLE_BECOME"] = "True"  # testinfra takes any non-empty value as true: set only when asked
    if request.become_user:
        env["ANSIBLE_BECOME_USER"] = request.become_user
    vaults = execute.vault_identity_list(request)
    if vaults:
        env["ANSIBLE_VAULT_IDENTITY_LIST"] = vaults
    return env


def run_suite(
    argv: list[str],
    log: Path,
    echo: bool,
    extra_env: dict[str, str] | None = None,
    out: TextIO | None = None,
    redactor: secrets.Redactor | None = None,
) -> int:
    """pytest in its own process (its plugins and state stay out of ours); output to ``log``, echoed with -v; each
    line redacted first (of each line of a multi-line secret too: no line holds all of one)."""
    redactor = redactor or secrets.Redactor(())
    # The same environment as a playbook run: this venv's Ansible, the project's ansible.cfg, host keys checked.
    env = {**os.environ, **execute.runner_env(), **(extra_env or {})}
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):  # the caller's pytest settings are not the suite's either
        env.pop(name, None)
    with (
        log.open("w") as saved,
        subprocess.Popen(
            argv, cwd=VERIFY_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc,
    ):
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = redactor.text(raw)
            saved.write(line)
            if echo:
                print(line, end="", flush=True, file=out or sys.stdout)
    return proc.returncode


def verify_hosts(
    directory: Path,
    hosts: list[str],
    args: argparse.Namespace,
    request: execute.Request,
    session: command.Session,
    listed: inventory_list.Replayed | None = None,
) -> tuple[list[infra_report.TestOutcome], int]:
    """The suite on ``hosts``; it reads the inventory from ``listed`` (the ping's listing) where there is one."""
    directory.mkdir()
    junit_path = directory / "junit.xml"
    argv = pytest_argv(hosts, listed.script if listed else args.inventory, junit_path, args.keyword)
    echo = args.verbose and not args.quiet
    redactor = session.redactor()
    env = {**suite_environment(request), **(listed.environment if listed else {})}
    rc = run_suite(argv, directory / "pytest.log", echo, env, session.out, redactor)
    outcomes, unread = infra_report.read_junit(junit_path, hosts)
    if unread:
        print(f"rdmaforge {NAME}: {unread}; no node is judged", file=sys.stderr)
    return [replace(o, message=redactor.text(o.message)) for o in outcomes], rc


def cases(
    outcomes: list[infra_report.TestOutcome], unreachable: list[str], hosts: Sequence[str] = ()
) -> list[junit.Case]:
    status = {"passed": "passed", "skipped": "skipped", "failed": "failed", "error": "error"}
    result = [junit.Case(f"{o.test}[{o.host}]" if o.host else o.test, f"rdmaforge.verify.{o.host or 'suite'}",
                         outcome=status[o.status], message=o.message) for o in outcomes]  # fmt: skip
    result += [junit.Case(host, "rdmaforge.verify", outcome="error", message="unreachable") for host in unreachable]
    reported = {o.host for o in outcomes}
    result += [junit.Case(host, "rdmaforge.verify", outcome="skipped", message="no test result (not judged)")
               for host in hosts if host not in reported]  # fmt: skip
    return result


def run(args: argparse.Namespace) -> int:
    try:
        variables = command.check_arguments(args)
    except CannotRun as exc:
        return command.cannot_run(NAME, str(exc), args)
    if importlib.util.find_spec("testinfra") is None:  # the suite's runner is a test dependency
        needed = f"needs pytest-testinfra: {install_hint('pytest-testinfra')}"
        return command.cannot_run(NAME, needed, args)
    session = command.start(args, NAME, json_recap=args.json)
    # Unreachable nodes are found first and left out of the suite: testinfra would fail every test on them with
    # messages that do not say why.
    request = execute.Request(inventory=args.inventory, module="ansible.builtin.ping", host_pattern=args.limit,
                              **command.ansible_options(args))  # fmt: skip
    # One reading of the inventory for the ping and the suite: a dynamic one is evaluated once per verify.
    with execute.reading(request) as read:
        # The inventory first, as preflight checks it, on the controller: a bad value is refused naming the host and
        # the variable before any node is reached (pinged, a node with a bad name was only "unreachable").
        check = execute.Request(inventory=args.inventory, playbook=playbook("inventory_check.yml"), limit=args.limit,
                                check=True, extra_vars=variables, **command.ansible_options(args))  # fmt: skip
        checked = command.run_ansible(session, check, read=read)
        # (No host matched, --limit's or the inventory's: the ping below says so, as it did before the check. A check
        # that could not run at all on the whole inventory stops verify: its nodes are not to be reported unreachable.)
        broken = not checked.ran and checked.rc != 0 and not args.limit
        if checked.status == "canceled" or checked.events.failures() or broken:
            command.print_outcome(session, checked)
            record = {**command.outcome_record(checked), "pattern": args.limit, "stopped_before_contact": True}
            refused = command.host_cases(checked, f"rdmaforge.{NAME}")
            return command.finish(session, args, command.playbook_exit(checked), refused, record)
        probe = command.run_ansible(session, request, read=read)
        unreachable = [h for h in probe.events.hosts if probe.events.unreachable(h)]
        hosts = [h for h in probe.recaps if h not in unreachable]
        if not probe.recaps:
            missing = command.inventory_unusable(probe)  # unparsable, or no group 'cluster': bad input
            print(f"rdmaforge {NAME}: {missing or f'no host of {args.inventory} matches {args.limit!r}'}",
                  file=sys.stderr)  # fmt: skip
            return command.finish(session, args, command.playbook_exit(probe) if missing else ExitCode.ERROR,
                                  command.host_cases(probe, f"rdmaforge.{NAME}") if missing else [],
                                  {"hosts": [], "pattern": args.limit})  # fmt: skip
        down = f"; unreachable: {', '.join(unreachable)}" if unreachable else ""
        if not session.quiet:
            print(f"testinfra suite on {len(hosts)} node(s){down}", file=session.out, flush=True)
        suite = verify_hosts(session.run_dir / NAME, hosts, args, request, session, read.listed) if hosts else None
    outcomes, rc = suite if suite is not None else ([], None)
    print("", file=session.out)
    print(infra_report.render(outcomes, unreachable, hosts), file=session.out)
    keyword = bool(args.keyword)
    code = infra_report.exit_code(outcomes, unreachable, rc or 0, hosts, keyword) if hosts else ExitCode.UNREACHABLE
    nodes = {host or "(suite)": {"passed": r.passed, "failed": r.failed, "skipped": r.skipped, "result": r.result}
             for host, r in infra_report.by_node(outcomes, hosts).items()}  # fmt: skip
    # Every node named, as doctor's are: an unreachable one too. pytest_rc is null where the suite never ran (review
    # round 25c: 0, as if it had passed).
    nodes.update({host: {"passed": 0, "failed": 0, "skipped": 0, "result": "unreachable"} for host in unreachable})
    record = {"pattern": args.limit, "hosts": hosts, "unreachable": unreachable, "pytest_rc": rc, "nodes": nodes,
              "tests": [o.__dict__ for o in outcomes]}  # fmt: skip
    return command.finish(session, args, code, cases(outcomes, unreachable, hosts), record)
