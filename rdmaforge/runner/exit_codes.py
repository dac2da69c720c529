"""Every exit code of the rdmaforge commands, in one place (README "CLI" and each command's --help list them)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    #: rdmaforge or Ansible could not do the job at all: no host matched a --limit, a missing optional part (mitogen).
    #: (An inventory Ansible cannot parse, or without group cluster, is BAD_INPUT.)
    ERROR = 1
    HOST_FAILED = 2
    UNREACHABLE = 3
    BELOW_THRESHOLD = 4
    #: A required benchmark component was skipped or ran without a threshold: nothing failed, nothing was proven.
    INCOMPLETE = 5
    #: `rdmaforge doctor`: a node differs from what its inventory and fabric profile imply.
    UNHEALTHY = 6
    #: `rdmaforge pairwise`: a node or link was named as a suspect.
    SUSPECTS = 7
    #: `rdmaforge provision --check --fail-on-drift`: a run would change a host (a drift check for CI).
    DRIFT = 8
    #: The command line or an input file was wrong (argparse usage errors included): the message names what.
    BAD_INPUT = 64
    #: An unexpected internal error: a short message points at the saved traceback.
    INTERNAL = 70
    #: `--no-wait` (provision, remove-node, upgrade-nccl, rollback-nccl, reset): another run holds the inventory's
    #: lock (EX_TEMPFAIL: try again later).
    BUSY = 75
    #: Ctrl-C (128 + SIGINT), as a shell reports it.
    INTERRUPTED = 130


MEANING = {
    ExitCode.OK: "success",
    ExitCode.ERROR: "could not run (no host matched the --limit, a missing optional part), or "
                    "its output was cut short (a closed pipe, a full disk)",
    ExitCode.HOST_FAILED: "a host failed",
    ExitCode.UNREACHABLE: "a host was unreachable",
    ExitCode.BELOW_THRESHOLD: "benchmark verdict fail (below a threshold, a failed run, a regression)",
    ExitCode.INCOMPLETE: "a required check was skipped or not judged (no verdict)",
    ExitCode.UNHEALTHY: "a node differs from what its inventory expects",
    ExitCode.SUSPECTS: "a suspect node, link or rail was found",
    ExitCode.DRIFT: "--check --fail-on-drift: a run would change a host (drift)",
    ExitCode.BAD_INPUT: "bad command line or input file",
    ExitCode.INTERNAL: "internal error (traceback saved)",
    ExitCode.BUSY: "another run holds the inventory's lock (--no-wait)",
    ExitCode.INTERRUPTED: "interrupted",
}

#: The epilog listing every code (README's table); each command's --help lists its own (epilog).
EPILOG = "exit codes: " + "; ".join(f"{int(code)} {MEANING[code]}" for code in ExitCode if code != ExitCode.INTERRUPTED)

#: What every command that runs against hosts may exit with besides COMMON.
HOST_CODES = (ExitCode.HOST_FAILED, ExitCode.UNREACHABLE)


#: What every command may exit with besides its own codes (rdmaforge.cli): output cut by a closed pipe or a full disk
#: (1), a bad command line or input file (64), an internal error (70), Ctrl-C (130).
COMMON = (ExitCode.OK, ExitCode.ERROR, ExitCode.BAD_INPUT, ExitCode.INTERNAL, ExitCode.INTERRUPTED)


#: What exit 1 means for a command that reads local files only (no inventory, no Ansible): only its output can stop
#: it there.
OUTPUT_CUT = "its output was cut short (a closed pipe, a full disk)"


def epilog(*codes: ExitCode, note: str = "", meanings: Mapping[ExitCode, str] | None = None) -> str:
    """The exit codes of a command: COMMON and its own ``codes`` (HOST_CODES for a command that runs against hosts),
    from MEANING: a code it can never return is not listed. ``meanings`` words a code as this command means it (one
    list per help page: a second list in the description contradicted this one, review round 29a).

    Wrapped at 100 columns, so that it reads well under RawDescriptionHelpFormatter too (the default formatter
    re-wraps it anyway).
    """
    chosen = sorted({*COMMON, *codes})
    worded = {**MEANING, **(meanings or {})}
    text = "exit codes: " + "; ".join(f"{int(code)} {worded[code]}" for code in chosen)
    return textwrap.fill(f"{text}; {note}" if note else text, width=100, break_on_hyphens=False)


def describe(code: int) -> str:
    try:
        return MEANING[ExitCode(code)]
    except ValueError:
        return "unknown"


def for_hosts(failed: Iterable[str], unreachable: Iterable[str]) -> ExitCode:
    """An unreachable host outranks a failed one: it was not even checked, so CI must look at it first."""
    if any(True for _ in unreachable):
        return ExitCode.UNREACHABLE
    if any(True for _ in failed):
        return ExitCode.HOST_FAILED
    return ExitCode.OK
