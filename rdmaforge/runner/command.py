"""What the provision, bench, doctor, pairwise and verify commands share: their options (ansible-playbook's
familiar flags among them), the run directory, the live progress, the recap, recap.json, JUnit XML and the final
line with the exit code.

Everything a command writes into its run directory is kept free of the run's secrets: execute.run scrubs what
Ansible wrote, and ``finish``, which ends every command, redacts recap.json and the JUnit reports and scrubs the
whole run directory once more (for what the command wrote after the run: verify's pytest output, bench's copy of
the benchmark run) with every secret its runs found (``Session.secret_values``), reading only the files written or
changed since a run's scrub, or not yet scrubbed of every one of them (``Session.scrubbed``).

On screen: by default a condensed progress line per task; ``-q`` none (the recap table, the problems and the
final line only); ``-v`` Ansible's own output instead. ``--json`` (provision, verify, doctor) sends all of that
to stderr and prints recap.json on stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from rdmaforge import paths, terminal
from rdmaforge.errors import CannotRun, UserError, host_pattern, inventory_path, missing_path, output_path
from rdmaforge.paths import as_installed
from rdmaforge.paths import playbook as playbook_path
from rdmaforge.runner import accelerator, artifacts, execute, extravars, inventory_list, junit, run_lock, secrets, vault
from rdmaforge.runner.events import HostProblem
from rdmaforge.runner.exit_codes import HOST_CODES, ExitCode, describe, epilog, for_hosts
from rdmaforge.runner.progress import AnsibleEcho, Progress, Ticker, escapes_allowed
from rdmaforge.runner.recap import failed_hosts, first_line, render, unreachable_hosts


def add_parser(subparsers: Any, name: str, help: str, description: str, codes: Sequence[ExitCode] = (),
               meanings: Mapping[ExitCode, str] | None = None) -> argparse.ArgumentParser:  # fmt: skip
    """A command that runs against hosts; its --help lists the exit codes it can return: the common ones, a host
    failed or unreachable, and its own ``codes`` (worded as ``meanings`` says, where given)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=as_run(help), description=as_run(description),
        epilog=epilog(*HOST_CODES, *codes, meanings=meanings),
    )  # fmt: skip
    return parser


def as_run(text: str) -> str:
    """``text`` with each path of a checkout named as this installation reaches it (paths.as_installed): a
    playbooks/NAME.yml is the collection's rdmaforge.cluster.NAME where the wheel is installed."""
    return as_installed(text)


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1 (else a usage error, exit 64)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def seconds_limit(text: str) -> float:
    """argparse type: a finite number of seconds, 0 or more (else a usage error, exit 64): a limit of nan, inf or
    -1 would judge nothing (every comparison with nan is false) or everything."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, 0 or more, got {text!r}")
    return value


def existing_file(text: str) -> Path:
    """argparse type: a file that exists now, checked before anything runs (else a usage error naming it)."""
    path = Path(text).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return path


JUNIT_ALLOWED = "a file path whose directory exists or can be created, and can be written"


def junit_path(text: str) -> Path:
    """argparse type of --junit: a file that can be written, checked before anything runs (else a usage error, exit
    64). Found only at the end, after the run, a bad path replaced the run's own exit code (and recap.json, --json and
    the final scrub were skipped). Refused: the empty path (the current directory), a directory, a path under a
    file, a directory that cannot be created or written, an existing file that cannot be written."""
    path = output_path(JUNIT_ALLOWED)(text)
    try:
        return _writable_junit_path(text, path)
    except OSError as exc:  # a directory on the way that this user may not search: stat itself is refused
        raise argparse.ArgumentTypeError(f"{text}: cannot be reached ({exc.strerror or exc}); "
                                         f"allowed: {JUNIT_ALLOWED}") from None  # fmt: skip


def _writable_junit_path(text: str, path: Path) -> Path:
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory; allowed: {JUNIT_ALLOWED}")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise argparse.ArgumentTypeError(f"{text}: cannot be written (permission denied); allowed: {JUNIT_ALLOWED}")
        return path
    # The nearest existing directory above it: the rest is created by junit.write.
    parent = path.absolute().parent
    while not parent.exists() and not parent.is_symlink() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {parent} is not a directory; allowed: {JUNIT_ALLOWED}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: the directory {parent} cannot be written (permission denied); "
                                         f"allowed: {JUNIT_ALLOWED}")  # fmt: skip
    return path


def vault_identity(text: str) -> str:
    """argparse type for --vault-id: [LABEL@]SOURCE, split at the first '@' as Ansible does. Ansible runs without a
    terminal here: it cannot prompt. The source must exist now, as --vault-password-file's (review round 25c: a
    missing one started the run, which Ansible then stopped with exit 1)."""
    label, source = vault.split_vault_id(text)
    if source in ("prompt", "prompt_ask_vault_pass", ""):
        raise argparse.ArgumentTypeError(f"{text}: cannot prompt (Ansible runs without a terminal); "
                                         "give a password file or script, LABEL@FILE")  # fmt: skip
    path = Path(source).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: {source}: no such file; allowed: [LABEL@]FILE, a password file "
                                         "or script that exists")  # fmt: skip
    # Absolute: Ansible runs from the workspace directory, where a relative path names another file (review 26).
    return f"{label}@{path.resolve()}" if "@" in text else str(path.resolve())


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """ansible-playbook's -u, -b, --become-user, -f, --vault-id and --vault-password-file, passed on as they are."""
    parser.add_argument("-u", "--user", metavar="REMOTE_USER", help="connect as this user (Ansible's --user)")
    parser.add_argument("-b", "--become", action="store_true", help="run tasks with become (Ansible's --become)")
    parser.add_argument("--become-user", metavar="USER", help="become this user (Ansible's --become-user)")
    parser.add_argument("-f", "--forks", type=positive_int, metavar="N",
                        help="parallel processes (Ansible's --forks; default: ansible.cfg's)")  # fmt: skip
    parser.add_argument("--vault-id", action="append", default=[], type=vault_identity, metavar="[LABEL@]FILE",
                        help="vault identity to decrypt with (repeatable; Ansible's --vault-id)")  # fmt: skip
    parser.add_argument("--vault-password-file", action="append", default=[], type=existing_file, metavar="FILE",
                        help="vault password file (repeatable; must exist; as Ansible's)")  # fmt: skip


def ansible_options(args: argparse.Namespace) -> dict[str, Any]:
    """The execute.Request fields of the flags from add_target_arguments/add_connection_arguments."""
    return {
        "skip_tags": getattr(args, "skip_tags", None),
        "user": getattr(args, "user", None),
        "become": bool(getattr(args, "become", False)),
        "become_user": getattr(args, "become_user", None),
        "forks": getattr(args, "forks", None),
        "vault_ids": tuple(getattr(args, "vault_id", None) or ()),
        "vault_password_files": tuple(getattr(args, "vault_password_file", None) or ()),
        "mitogen": bool(getattr(args, "mitogen", False)),
    }


def add_target_arguments(
    parser: argparse.ArgumentParser, tags: bool = True, check: bool = True, extra_vars: bool = True
) -> None:
    parser.add_argument("-i", "--inventory", type=inventory_path, required=True,
                        help="the cluster's inventory (hosts.yml)")  # fmt: skip
    parser.add_argument("-l", "--limit", type=host_pattern, help="only these hosts or groups (Ansible's --limit)")
    if tags:
        parser.add_argument("-t", "--tags", help="only tasks with these tags (Ansible's --tags)")
        parser.add_argument("--skip-tags", metavar="TAGS", help="leave out tasks with these tags (--skip-tags)")
    if check:
        parser.add_argument("-C", "--check", action="store_true", help="change nothing; report what would change")
        parser.add_argument("-D", "--diff", action="store_true", help="record file changes in ansible/stdout (--diff)")
    if extra_vars:
        parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                            help="KEY=VALUE, @FILE (YAML/JSON) or a JSON mapping; repeatable, later wins. Never "
                                 "written to ansible-runner's env/ nor put on a command line; values of secret "
                                 "names (password, token, secret, ...) are redacted from the artifacts")  # fmt: skip
    add_connection_arguments(parser)
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="Ansible verbosity (-vvv for more), recorded in ansible/stdout; on screen, Ansible's own "
                        "output instead of the condensed progress")  # fmt: skip


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print the run's recap.json on stdout; everything else goes to stderr")  # fmt: skip


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no live progress: only the recap table, the problems and the final line")  # fmt: skip
    parser.add_argument("--junit", type=junit_path, metavar="FILE", help="also write JUnit XML here (for CI)")
    parser.add_argument("--runs-dir", type=output_path("a directory for run directories"), default=artifacts.RUNS_DIR,
                        help=f"where run directories go (default {artifacts.RUNS_DIR})")  # fmt: skip
    parser.add_argument("--keep", type=positive_int, default=artifacts.DEFAULT_KEEP,
                        help=f"run directories to keep, newest first (default {artifacts.DEFAULT_KEEP})")  # fmt: skip


@dataclass
class Session:
    """One command run: its directory, clock and output stream."""

    command: str
    run_dir: Path
    started: dt.datetime
    out: TextIO = field(default_factory=lambda: sys.stdout)
    quiet: bool = False  # -q: no live progress
    echo: bool = False  # -v: Ansible's own output instead of the condensed progress
    json_recap: bool = False  # --json: recap.json on stdout at the end (``out`` is then stderr)
    #: The secrets of every Ansible run of this command (run_ansible): redacted from all it writes.
    secret_values: set[str] = field(default_factory=set)
    #: What the scrubs of the run directory read (secrets.scrub_tree): ``finish`` reads only files written since.
    scrubbed: dict[Path, secrets.Scrubbed] = field(default_factory=dict)

    def elapsed(self) -> float:
        return (dt.datetime.now(dt.UTC) - self.started).total_seconds()

    def redactor(self) -> secrets.Redactor:
        return secrets.Redactor(self.secret_values)


def check_arguments(args: argparse.Namespace) -> list[extravars.ExtraVars]:
    if getattr(args, "quiet", False) and getattr(args, "verbose", 0):
        # Opposite asks (the usage reads [-q | -v...]): -q silently won (review round 25c).
        raise UserError("-q (no live progress) and -v (Ansible's own output on screen) ask for opposite outputs; "
                        "allowed: one of them")  # fmt: skip
    problem = missing_path(args.inventory, "inventory")
    if problem:  # a wrong -i is a bad command line: UserError, exit 64 from rdmaforge.cli, like render's
        raise UserError(problem)
    # What Ansible would stop on with a message naming no file (a group_vars YAML error: "YAML parsing failed"), or
    # skip without a word (a vars file that is a link to nothing), or fail on in its fact cache (a 300-character host
    # name): named with file and line before any run starts.
    from rdmaforge.inventory_files import yaml_problems  # only where hosts are run against

    problems = yaml_problems(Path(args.inventory), listing=False)
    if problems:
        raise UserError("\n".join(problems))
    if getattr(args, "mitogen", False):
        try:
            accelerator.strategy_dir()
        except accelerator.NotInstalled as exc:
            raise CannotRun(str(exc)) from exc
    # A bad -e is a bad command line: ExtraVarsError is a UserError, which rdmaforge.cli reports with exit 64.
    return extravars.parse(getattr(args, "extra_vars", []) or [])


def start(args: argparse.Namespace, command: str, out: TextIO | None = None, json_recap: bool = False) -> Session:
    """Create the run directory and rotate old ones (the new one always survives).

    With ``json_recap`` (--json) the human output goes to stderr and ``finish`` prints recap.json on stdout.
    """
    run_dir = artifacts.new_run_dir(args.runs_dir, command)
    artifacts.rotate(args.runs_dir, args.keep, current=run_dir)
    quiet = bool(getattr(args, "quiet", False))
    echo = bool(getattr(args, "verbose", 0)) and not quiet
    stream = out or (sys.stderr if json_recap else sys.stdout)
    session = Session(command, run_dir, dt.datetime.now(dt.UTC), stream, quiet, echo, json_recap)
    if not quiet:
        print(f"rdmaforge {command}: run directory {run_dir}", file=session.out, flush=True)
    ignored = ignored_config(Path.cwd(), os.environ)
    if ignored is not None:
        print(f"rdmaforge {command}: WARNING {ignored}", file=session.out, flush=True)
    return session


def ignored_config(cwd: Path, environ: Mapping[str, str]) -> str | None:
    """Why an ansible.cfg in the working directory does not apply: ansible-playbook would read it, rdmaforge runs
    Ansible with its own (execute.runner_env), whose settings the run needs (the fast path's ledger callback,
    keepalives, any_unparsed_is_failed). Said, so that remote_user or ssh_args set there are not silently lost
    (review round 29a). None when there is none, or when ANSIBLE_CONFIG names the file to use."""
    own = cwd / "ansible.cfg"
    if "ANSIBLE_CONFIG" in environ or not own.is_file() or own.resolve() == paths.ANSIBLE_CFG.resolve():
        return None
    return (f"{own} is not read: rdmaforge runs Ansible with its own ansible.cfg ({paths.ANSIBLE_CFG}); set "
            "connection settings in the inventory (ansible_user, ansible_ssh_common_args) or with -u/-b, or point "
            "ANSIBLE_CONFIG at a file that keeps rdmaforge's settings")

def is_tty(stream: TextIO) -> bool:
    """Whether escape sequences may be written to ``stream``: a terminal, TERM not dumb, NO_COLOR not set."""
    return escapes_allowed(stream, os.environ)


def live_stream(out: TextIO) -> TextIO:
    """Where the live progress goes: on a terminal the stream under rdmaforge.terminal's escaping, for the progress
    line's own escape sequences (redraw; Progress escapes the text it shows itself); elsewhere ``out``."""
    return terminal.unwrapped(out) if is_tty(out) else out


def run_ansible(
    session: Session,
    request: execute.Request,
    on_event: execute.EventHandler | None = None,
    read: execute.Reading | None = None,
) -> execute.Outcome:
    """execute.run in the session's run directory (reading the inventory as ``read`` does: execute.reading); its
    secrets are the session's too (``finish`` redacts them)."""
    outcome = execute.run(request, session.run_dir, on_event, session.scrubbed, read)
    session.secret_values |= outcome.secret_values
    return outcome


def run_playbook(session: Session, request: execute.Request) -> execute.Outcome:
    """Run with live progress (none with -q; Ansible's own output with -v); then print the recap table."""
    outcome = run_with_progress(session, request)
    print_outcome(session, outcome)
    return outcome


def run_with_progress(session: Session, request: execute.Request) -> execute.Outcome:
    """The run, with live progress (none with -q; Ansible's own output with -v)."""
    if session.quiet:
        outcome = run_ansible(session, request)
    elif session.echo:
        echo = AnsibleEcho(session.out)
        outcome = run_ansible(session, request, echo.handle)
    else:
        progress = Progress(live_stream(session.out), tty=is_tty(session.out))
        with Ticker(progress):
            outcome = run_ansible(session, request, progress.handle)
        progress.close()
    if outcome.leaked_env_files:  # cannot happen with suppress_env_files; never keep one if it does
        for path in outcome.leaked_env_files:
            path.unlink()
        print(f"rdmaforge: removed {len(outcome.leaked_env_files)} file(s) from env/", file=sys.stderr)
    return outcome


def print_outcome(session: Session, outcome: execute.Outcome) -> None:
    """The recap table with the run's problems, warnings and changes (why, when Ansible ran no host)."""
    print("", file=session.out)
    if not outcome.ran:  # Ansible stopped before any host (a syntax error, no host matched): show why
        print(ansible_output_tail(outcome), file=session.out)
    print(render(outcome.recaps, outcome.events.problems, outcome.events.warnings, outcome.events.changes),
          file=session.out)  # fmt: skip
    if died_before_recap(outcome):
        how = f"killed by {signal_name(-outcome.rc)}" if outcome.rc < 0 else f"exit {outcome.rc}"
        print(f"  ansible-playbook ended before its recap ({how}): the hosts it reached are STOPPED, the rest of the "
              "playbook ran on none; its output ends:", file=session.out)  # fmt: skip
        print(ansible_output_tail(outcome), file=session.out)
    unmatched = inventory_unusable(outcome)
    if unmatched:
        print(f"  {unmatched}", file=session.out)


def died_before_recap(outcome: execute.Outcome) -> bool:
    """A playbook run that reached hosts and ended without its stats (execute.recaps_from_events: STOPPED)."""
    return outcome.events.stats is None and any(r.stopped for r in outcome.recaps.values())


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


#: Ansible's warning for a play's host pattern that names no group or host of the inventory.
_UNMATCHED = re.compile(rf"{execute.UNMATCHED_WORDS}, ignoring: (.+)$", re.MULTILINE)
#: Ansible's error for an inventory source none of its inventory plugins could read (it stops before any play), and
#: the warning each plugin leaves with its reason.
_PLUGIN_FAILED = re.compile(r"^\[WARNING\]: (Failed to parse inventory with '[^']+' plugin: .+)$", re.MULTILINE)


def inventory_unusable(outcome: execute.Outcome) -> str:
    """Why a playbook ran no host because of the inventory itself, '' otherwise: an inventory Ansible cannot parse
    (an INI file with a broken line: Ansible stops with exit 1), or one without group ``cluster``, the group
    rdmaforge's playbooks target (Ansible only warns that the pattern matched nothing, and exits 0). Both are bad
    input (64), as a YAML inventory that cannot be read is to every command."""
    if outcome.recaps or outcome.status == "canceled":
        return ""
    text = execute.ansible_said(outcome.events, outcome.artifacts)
    unparsed = inventory_list.UNPARSED_SOURCE.search(text)
    if unparsed:
        causes = "; ".join(dict.fromkeys(_PLUGIN_FAILED.findall(text)))
        return f"no host was run: Ansible cannot parse the inventory {unparsed.group(1).strip()}" + (
            f" ({causes})" if causes else "")  # fmt: skip
    relisted = outcome.relisted  # Ansible's output lost the lines that say why (execute.Relisting)
    if relisted is not None and relisted.error:
        return f"no host was run: Ansible cannot read the inventory: {relisted.error}"
    # Only the group every playbook targets: other unmatched patterns are a --limit's (Ansible's own message says
    # so) or groups the plays make as they run (hugepages_reboot_queue).
    unmatched = {name.strip() for name in _UNMATCHED.findall(text)}
    if execute.CLUSTER_GROUP not in unmatched and (relisted is None or relisted.cluster_hosts != 0):
        return ""
    return as_installed("no host was run: the inventory has no host in 'cluster', the group the playbook runs on; put "
                        "the nodes under it (inventories/example/hosts.yml: all.children.cluster)")


#: ansible_output_tail when Ansible wrote nothing.
NO_ANSIBLE_OUTPUT = "(Ansible wrote no output)"


def ansible_output_tail(outcome: execute.Outcome, lines: int = 40) -> str:
    """The end of Ansible's own output (ansible-runner merges stderr into it), after the warning and error lines of
    the run's events that the stdout file lacks (EventLog.messages: the file can lose them)."""
    try:
        text = (outcome.artifacts / "stdout").read_text(errors="replace")
    except OSError:
        text = ""
    lost = [line.rstrip() for line in outcome.events.messages if line.strip() not in text]
    tail = [line.rstrip() for line in text.strip().splitlines()[-lines:]]
    return "\n".join([*lost, *tail]) or NO_ANSIBLE_OUTPUT


#: The first line of a warning Python printed (``FILE:LINE: CATEGORY: text``); the source line it quotes follows.
_PYTHON_WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")


def ansible_stop_reason(tail: str) -> str:
    """The line of ``tail`` (ansible_output_tail) that says why Ansible stopped before any host: its first error
    line ("[ERROR]: ...", "ERROR! ..." of older releases), else its last line that is not part of a warning a
    Python library printed (a deprecation printed on the way is not why no host ran)."""
    lines: list[str] = []
    quoted = False
    for line in tail.splitlines():
        if _PYTHON_WARNING.match(line):
            quoted = True  # its next, indented line quotes the source
            continue
        if quoted and line.startswith((" ", "\t")):
            quoted = False
            continue
        quoted = False
        if line.strip():
            lines.append(line.strip())
    for line in lines:
        if inventory_list.ANSIBLE_ERROR_LINE.match(line):
            return line
    return lines[-1] if lines else NO_ANSIBLE_OUTPUT


#: The name of the JUnit testcase that stands for a run no host's case accounts for (Ansible stopped first).
RUN_CASE = "ansible-playbook"


#: The fact a playbook's check of the command's own input publishes as it refuses it (remove_node.yml's node names):
#: the run stopped for bad input (64), not because a host failed (2).
BAD_INPUT_FACT = "rdmaforge_bad_input"


def playbook_exit(outcome: execute.Outcome) -> ExitCode:
    """The exit code of a playbook run: unreachable 3, failed 2, Ansible could not run 1, input the playbook
    refused (BAD_INPUT_FACT) or an inventory Ansible cannot use (inventory_unusable) 64, else 0."""
    if outcome.status == "canceled":
        return ExitCode.INTERRUPTED
    if outcome.events.fact(BAD_INPUT_FACT) or inventory_unusable(outcome):
        # An inventory without group 'cluster', or one Ansible cannot parse, is bad input whichever command read it
        # (render said 64; provision, through preflight's refusal, said 2, the others 1).
        return ExitCode.BAD_INPUT
    if not outcome.ran:
        return ExitCode.ERROR
    code = for_hosts(failed_hosts(outcome.recaps), unreachable_hosts(outcome.recaps))
    return ExitCode.ERROR if code == ExitCode.OK and outcome.rc != 0 else code


def host_cases(
    outcome: execute.Outcome, classname: str, ignore: Callable[[HostProblem], bool] | None = None
) -> list[junit.Case]:
    """One JUnit testcase per host: error when unreachable, failure when a task failed on it.

    ``ignore`` leaves out failures that are not the host's fault (the benchmark's verdict task).
    """
    cases = []
    for host, recap in outcome.recaps.items():
        every = [p for p in outcome.events.problems if p.host == host]
        problems = [p for p in every if ignore is None or not ignore(p)]
        failed = recap.failed - (len(every) - len(problems))
        details = "\n".join(f"{'unreachable' if p.unreachable else 'failed'}: {p.task}: {p.message}" for p in problems)
        first = first_line(f"{problems[0].task}: {problems[0].message}") if problems else ""
        result = "error" if recap.unreachable else "failed" if failed > 0 else "passed"
        if result == "passed" and recap.status in ("STOPPED", "NOT_RUN"):  # it did not fail, nor did it run
            left = outcome.events.facts.get(host, {}).get(execute.LEFT_FACT)
            why = (f"the playbook left it: {left}" if left else "the run ended before this host finished it"
                   if recap.status == "STOPPED" else "the run ended before it reached this host")
            result, first = "skipped", f"{recap.status}: {why}"
        cases.append(junit.Case(host, classname, 0.0, result, first if result != "passed" else "", details))
    unmatched = inventory_unusable(outcome)
    if unmatched:  # the plays matched no host: no case would stand for the run
        cases.append(junit.Case(RUN_CASE, classname, 0.0, "error", unmatched, ansible_output_tail(outcome)))
    elif not outcome.ran and outcome.status != "canceled":
        # No host ran (a bad -e file, a limit matching nothing, an inventory Ansible cannot parse): without a case
        # of its own the report held 0 tests and 0 failures, which CI reads as a pass.
        tail = ansible_output_tail(outcome)
        cases.append(junit.Case(RUN_CASE, classname, 0.0, "error", f"no host was run: {ansible_stop_reason(tail)}",
                                tail))  # fmt: skip
    return cases


def with_run_case(cases: Sequence[junit.Case], command: str, code: ExitCode) -> list[junit.Case]:
    """``cases``, and an error case for the run itself when it exits ERROR (1) and no case failed: the JUnit report
    of a run that could not be done must not read as a pass (0 failures, 0 errors)."""
    if code != ExitCode.ERROR or any(case.outcome in ("failed", "error") for case in cases):
        return list(cases)
    message = f"exit {int(code)}: {describe(code)}"
    return [*cases, junit.Case(RUN_CASE, f"rdmaforge.{command}", 0.0, "error", message, message)]


def finish(
    session: Session,
    args: argparse.Namespace,
    code: ExitCode,
    cases: Sequence[junit.Case],
    record: Mapping[str, Any],
) -> int:
    """Write the JUnit XML and recap.json into the run directory, scrub it of the session's secrets, write the --junit
    copy, print the last line, return the exit code.

    The --junit path was checked before the run (junit_path); should writing it fail all the same, that is a warning
    on stderr: the run's own exit code, recap.json and --json stand (a usage error, 64, after a converge would hide
    whether it worked)."""
    properties = {"command": session.command, "exit_code": str(int(code)), "run_dir": str(session.run_dir)}
    elapsed = session.elapsed()
    # Redacted before they are written: XML and JSON escape a secret's characters (a scrub of the files could miss
    # it), and the --junit copy lies outside the run directory.
    redactor = session.redactor()
    cases = [redacted_case(case, redactor) for case in with_run_case(cases, session.command, code)]
    junit.write(session.run_dir / "junit.xml", f"rdmaforge {session.command}", cases, elapsed, session.started,
                properties)  # fmt: skip
    summary = {"command": session.command, "exit_code": int(code), "meaning": describe(code),
               "started": session.started.isoformat(), "seconds": round(elapsed, 3), **record}  # fmt: skip
    # A run Ansible could not start (an inventory it cannot parse): why, as a refused run's document says it (the
    # JUnit case had it; recap.json and --json had empty hosts and problems: review round 29a).
    stopped = next((case.message for case in cases if case.name == RUN_CASE and case.outcome == "error"), None)
    if code in (ExitCode.ERROR, ExitCode.BAD_INPUT) and stopped and "error" not in summary:
        summary["error"] = stopped
    plain = json.loads(json.dumps(summary, default=str))  # JSON's types only (a Path as its text), then redacted
    document = json.dumps(secrets.redact_data(plain, redactor), indent=2) + "\n"
    (session.run_dir / "recap.json").write_text(document)
    # Last: whatever the command wrote into the run directory after its Ansible runs' own scrub (the files those
    # scrubs left as they are, of these secrets, are not read again).
    secrets.scrub_tree(session.run_dir, session.secret_values, session.scrubbed)
    junit_copy = getattr(args, "junit", None)
    if junit_copy is not None:
        try:
            junit.write(junit_copy, f"rdmaforge {session.command}", cases, elapsed, session.started, properties)
        except OSError as exc:
            print(f"rdmaforge {session.command}: warning: --junit {junit_copy}: cannot write it "
                  f"({exc.strerror or exc}); the exit code is the run's own, the report is "
                  f"{session.run_dir / 'junit.xml'}", file=sys.stderr)  # fmt: skip
    print(f"rdmaforge {session.command}: exit {int(code)} ({describe(code)}); artifacts: {session.run_dir}",
          file=session.out, flush=True)  # fmt: skip
    if session.json_recap:
        sys.stdout.write(document)
        sys.stdout.flush()
    return int(code)


def redacted_case(case: junit.Case, redactor: secrets.Redactor) -> junit.Case:
    return replace(case, name=redactor.text(case.name), message=redactor.text(case.message),
                   details=redactor.text(case.details))  # fmt: skip


def outcome_record(outcome: execute.Outcome) -> dict[str, Any]:
    return {
        "ansible": {"status": outcome.status, "rc": outcome.rc, "seconds": round(outcome.seconds, 3)},
        "hosts": {host: recap.to_dict() for host, recap in outcome.recaps.items()},
        "problems": [p.to_dict() for p in outcome.events.problems],
        "warnings": outcome.events.warnings,
        # A check run's changes: what a run would change (none kept for other runs).
        **({"would_change": [c.to_dict() for c in outcome.events.changes]} if outcome.events.keep_changes else {}),
    }


def cannot_run(command: str, message: str, args: argparse.Namespace | None = None) -> int:
    """Exit 1 before the run started, saying why (with --json, also as the JSON document on stdout)."""
    from rdmaforge.cli import json_error  # the CLI's own rule for a refused run's JSON

    print(f"rdmaforge {command}: {message}", file=sys.stderr)
    return json_error(args, ExitCode.ERROR, message)


def add_mitogen_argument(parser: argparse.ArgumentParser) -> None:
    """--mitogen, on provision only: the command whose runs under mitogen are tested and measured."""
    parser.add_argument("--mitogen", action="store_true",
                        help="run site.yml under mitogen's mitogen_linear strategy: an optional accelerator for first "
                        "converges and repairs, slower on a no-op (mitogen: rdmaforge's [mitogen] extra)")  # fmt: skip


def add_no_wait_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-wait", action="store_true",
        help="exit 75 at once when another run holds this inventory's lock, instead of waiting",
    )  # fmt: skip


def add_changing_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a command that runs a lifecycle playbook (run_changing_playbook): target, output, lock."""
    add_target_arguments(parser, tags=False)
    add_json_argument(parser)
    add_output_arguments(parser)
    add_no_wait_argument(parser)


def under_inventory_lock(args: argparse.Namespace, command: str, body: Callable[[], int]) -> int:
    """``body()`` while this run holds the inventory's lock (run_lock): one run that changes nodes at a time."""
    try:
        out = sys.stderr if getattr(args, "json", False) else sys.stdout
        with run_lock.inventory_lock(args.inventory, command, wait=not args.no_wait, out=out):
            return body()
    except run_lock.Busy as exc:
        print(f"rdmaforge {command}: {exc}; exit {int(ExitCode.BUSY)} (--no-wait)", file=sys.stderr)
        # --json's one document and --junit's report, as for any run refused before it started (review round
        # 27b: a CI job with --no-wait got empty stdout and no report file).
        junit_copy = getattr(args, "junit", None)
        if junit_copy is not None:
            case = junit.Case(RUN_CASE, f"rdmaforge.{command}", 0.0, "error", str(exc), str(exc))
            try:
                junit.write(junit_copy, f"rdmaforge {command}", [case])
            except OSError as error:
                print(f"rdmaforge {command}: warning: --junit {junit_copy}: cannot write it "
                      f"({error.strerror or error})", file=sys.stderr)  # fmt: skip
        from rdmaforge.cli import json_error  # the CLI's one writer of a refused run's document (cli imports this)

        return json_error(args, ExitCode.BUSY, str(exc))


def run_changing_playbook(args: argparse.Namespace, command: str, playbook: str, ours: Mapping[str, Any]) -> int:
    """A playbook that changes nodes (the lifecycle commands), run like provision runs site.yml: the user's -e
    first and ``ours`` (what the command's own arguments say) last, under the inventory's lock, with the usual
    progress, recap, artifacts and exit code."""
    try:
        variables = check_arguments(args)
    except CannotRun as exc:
        return cannot_run(command, str(exc), args)

    def body() -> int:
        session = start(args, command, json_recap=args.json)
        request = execute.Request(
            inventory=args.inventory,
            playbook=playbook_path(playbook),
            limit=args.limit,
            check=args.check,
            diff=args.diff,
            extra_vars=[*variables, extravars.ExtraVars(inline=dict(ours))],
            verbosity=args.verbose,
            **ansible_options(args),
        )
        outcome = run_playbook(session, request)
        code = playbook_exit(outcome)
        return finish(session, args, code, host_cases(outcome, f"rdmaforge.{command}"), outcome_record(outcome))

    return under_inventory_lock(args, command, body)
