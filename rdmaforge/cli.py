"""The ``rdmaforge`` command line: each sub-command lives in its own module of rdmaforge.commands.

No traceback reaches a user: a usage error or a bad input file (rdmaforge.errors.UserError, an unreadable
path) prints one line naming it and exits 64; a run stopped before Ansible starts (rdmaforge.errors.CannotRun) says
why and exits 1; a closed pipe (``| head``) ends quietly and stdout on a full disk
says so, both exit 1; anything unexpected prints a short message pointing at the traceback saved in a file, and
exits 70.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import pkgutil
import shlex
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from rdmaforge import __version__, commands, terminal
from rdmaforge.errors import CannotRun, UserError
from rdmaforge.runner.exit_codes import ExitCode, describe

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


#: The top --help's first line (the module docstring is for developers).
DESCRIPTION = ("rdmaforge: turn GPU hosts into an RDMA-ready training cluster (provision), check it (verify, doctor) "
               "and measure it (bench, pairwise).")


class UsageError(SystemExit):
    """argparse's usage error, exit 64, with its message (for --json's document)."""

    def __init__(self, message: str) -> None:
        super().__init__(int(ExitCode.BAD_INPUT))
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on exit code 64 (BAD_INPUT): 2 means "a host failed" in rdmaforge."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self._print_message(f"{self.prog}: error: {message}\n", sys.stderr)
        raise UsageError(message)

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        # argparse drops a write error here: --help on a full disk would exit 0, its help never printed. Raised,
        # main() reports it as it does a command's own output.
        if message:
            (file or sys.stderr).write(message)


def command_modules() -> list[str]:
    """The modules of rdmaforge.commands, one per sub-command (``nccl_report`` holds ``nccl-report``)."""
    return sorted(info.name for info in pkgutil.iter_modules(commands.__path__))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` (a module name) that one sub-command: importing every command
    costs about half a second (ansible-runner and the benchmark code), more than a small nccl-report takes."""
    return _build(only)[0]


def _build(only: str | None) -> tuple[argparse.ArgumentParser, set[str]]:
    parser = _Parser(prog="rdmaforge", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"rdmaforge {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name in [only] if only else command_modules():
        module = importlib.import_module(f"{commands.__name__}.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser, set(subparsers.choices)


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """Only the named sub-command's module is imported; anything else (no command, --help, a typo) gets them all."""
    first = argv[0] if argv else ""
    module = first.replace("-", "_")
    if first and not first.startswith("-") and module in command_modules():
        parser, names = _build(module)
        if first in names:
            return parser
    return build_parser()


def subcommand(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the sub-command ``args`` chose, down to a verb of its own (``lab up``): the one whose usage goes
    with an error in its arguments."""
    chosen, name = parser, getattr(args, "command", None)
    while name is not None:
        found = [action for action in chosen._actions
                 if isinstance(action, argparse._SubParsersAction) and name in action.choices]  # fmt: skip
        if not found:
            break
        chosen = found[0].choices[name]
        verbs = [action for action in chosen._actions if isinstance(action, argparse._SubParsersAction)]
        name = getattr(args, verbs[0].dest, None) if verbs and verbs[0].dest != argparse.SUPPRESS else None
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    saved = terminal.install()  # text from files escaped, what the terminal cannot encode degraded (never put back
    try:  # half-way: the handlers below print through it too)
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = saved


def _prog(argv: Sequence[str]) -> str:
    """How messages name the command before its arguments are parsed: ``rdmaforge summary``, or ``rdmaforge``."""
    first = argv[0] if argv else ""
    if first and not first.startswith("-") and first.replace("-", "_") in command_modules():
        return f"rdmaforge {first}"
    return "rdmaforge"


def _main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[0] in ("-h", "--help") and _prog(argv[1:]) != "rdmaforge":
        # `rdmaforge -h summary`: argparse printed the top help and exited 0, the command's own never shown.
        argv = [*argv[1:], "-h"]
    prog = _prog(argv)
    args: argparse.Namespace | None = None
    try:
        try:
            parser = parser_for(argv)
            if len(argv) > 1 and len(argv[0]) >= 3 and "--version".startswith(argv[0]):
                # argparse prints the version as soon as it meets the option and exits 0, the rest unread: a
                # script's `rdmaforge --version summary` then ran nothing and passed (review round 29b).
                parser.error(f"--version takes no other argument: {shlex.join(argv[1:])}")
            args, extra = parser.parse_known_args(argv)
            if extra:  # named by the sub-command, with its usage (the top parser's would show `rdmaforge COMMAND`)
                subcommand(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
        except SystemExit as exc:
            # --json as written, or as argparse accepts it abbreviated (--js, --jso; review round 26).
            wants_json = any(len(arg) >= 4 and "--json".startswith(arg) for arg in argv)
            if isinstance(exc, UsageError) and wants_json and argv[0] in RECAP_JSON_COMMANDS:
                # The one JSON document --json promises, for a command line refused too (review round 25c).
                json_error(argparse.Namespace(command=argv[0], json=True), ExitCode.BAD_INPUT, exc.message)
            if exc.code not in (0, None):
                raise  # a usage error: argparse printed it
            # --help or --version, printed: flushed like a command's output, for the same reasons.
            sys.stdout.flush()
            raise
        prog = f"rdmaforge {args.command}"
        from rdmaforge.paths import root_problem

        problem = root_problem() if args.command not in NO_PROJECT_FILES else None
        if problem:  # the others read the project's files, or their workspace (artifacts/), from there
            raise UserError(problem)
        code = int(args.func(args))
        # Flushed here, not by the interpreter at exit: a short output waits in stdout's buffer, and a reader gone
        # or a full disk would otherwise end in Python's "Exception ignored" and exit 120 after the verdict.
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        _silence_stdout()
        return int(ExitCode.ERROR)  # the reader went away: the output was not all read
    except UserError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return json_error(args, ExitCode.BAD_INPUT, str(exc))
    except CannotRun as exc:  # raised once the command started (a command's own checks report it themselves)
        print(f"{prog}: {exc}", file=sys.stderr)
        return json_error(args, ExitCode.ERROR, str(exc))
    except OSError as exc:
        if exc.filename is None and exc.errno in _DISK_FULL:
            # No file named: a file rdmaforge writes names itself, so this is stdout (`> /dev/full`). Not a bug
            # to report; the job was not done (1), and the unwritten rest must not fail again at exit.
            _silence_stdout()
            print(f"{prog}: cannot write the output: {exc.strerror}", file=sys.stderr)
            return int(ExitCode.ERROR)
        if exc.filename is None:
            return _internal(prog, exc)
        print(f"{prog}: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return json_error(args, ExitCode.BAD_INPUT, f"{exc.filename}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a message and a saved traceback
        return _internal(prog, exc)


#: The commands that read neither the project's files nor the workspace: a stale RDMAFORGE_ROOT does not stop them.
NO_PROJECT_FILES = frozenset({"nccl-report", "completion"})

#: The commands whose --json prints the run's recap.json (README: --json); pairwise, report and nccl-report print
#: documents of their own, and a refusal there leaves stdout empty.
RECAP_JSON_COMMANDS = frozenset({"provision", "verify", "doctor", "remove-node", "upgrade-nccl", "rollback-nccl",
                                 "reset"})  # fmt: skip


def json_error(args: argparse.Namespace | None, code: ExitCode, message: str) -> int:
    """``code``; with --json, also the one JSON document stdout promises (command, exit_code, meaning, error): a run
    refused before it started printed nothing there, and `rdmaforge provision --json | jq` failed on empty input."""
    if args is not None and getattr(args, "json", False) and args.command in RECAP_JSON_COMMANDS:
        document = {"command": args.command, "exit_code": int(code), "meaning": describe(code), "error": message}
        print(json.dumps(document, indent=2), flush=True)
    return int(code)


#: Write errors of a full disk or quota, which name no file when they come from write() rather than open().
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _silence_stdout() -> None:
    """After EPIPE or ENOSPC, point stdout at /dev/null so that the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def save_traceback(exc: BaseException) -> str | None:
    """Write ``exc``'s traceback to a new file in the temporary directory; its path, or None if that failed."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        fd, path = tempfile.mkstemp(prefix=f"rdmaforge-crash-{time.strftime('%Y%m%dT%H%M%S')}-", suffix=".txt")
        with os.fdopen(fd, "w") as out:
            out.write(f"rdmaforge {__version__}\nargv: {sys.argv!r}\n\n{text}")
    except OSError:
        return None
    return path


def _internal(prog: str, exc: BaseException) -> int:
    path = save_traceback(exc)
    where = f"traceback saved to {path}" if path else "the traceback could not be saved"
    summary = str(exc).splitlines()[0][:200] if str(exc) else ""
    print(f"{prog}: internal error ({type(exc).__name__}: {summary}); {where}; please report it", file=sys.stderr)
    return int(ExitCode.INTERNAL)


if __name__ == "__main__":
    raise SystemExit(main())
