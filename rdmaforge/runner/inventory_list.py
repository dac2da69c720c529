"""``ansible-inventory --list``: an inventory as Ansible itself reads it (scripts and plugins included), in a process
of its own. ``rdmaforge render`` reads its hosts this way; the secret scrubber reads the variables of an inventory
its static readers cannot (:func:`rdmaforge.runner.execute.secret_values`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rdmaforge.runner import secrets
from rdmaforge.runner.inventory_cli import MESSAGES_FILE
from rdmaforge.terminal import escaped

#: Seconds an inventory may take to list: a cloud plugin pages through an API.
TIMEOUT_S = 300
#: The source Ansible names when it gives up on one; its warnings say why (a script's exit code and stderr).
FAILED_SOURCE = re.compile(r"Completely failed to parse inventory source (\S.*?)\s*$", re.MULTILINE)
#: The cause shown: the first warnings naming the failed source, each cut to its first and last lines.
CAUSE_WARNINGS = 2
CAUSE_HEAD, CAUSE_TAIL = 4, 3
CAUSE_LINE_CHARS = 300
#: How each of Ansible's messages on stderr starts (2.19's, and ERROR! before it).
MESSAGE_STARTS = ("[WARNING]:", "[ERROR]:", "[DEPRECATION WARNING]:", "ERROR!")
#: Ansible's separator between an error and the error it was caused by.
CAUSED_BY = "<<< caused by >>>"


class InventoryError(RuntimeError):
    """ansible-inventory could not list the inventory; the message says why, in Ansible's words."""


def command(args: Sequence[str]) -> list[str]:
    """``ansible-inventory ARGS`` of this interpreter's Ansible (the one the runs use), through
    :mod:`rdmaforge.runner.inventory_cli`, which records Ansible's messages with their kinds."""
    # -P: the working directory (a user's checkout, which may hold an ansible/ of its own) is not put on sys.path.
    return [sys.executable, "-P", "-m", "rdmaforge.runner.inventory_cli", *args]


def listed(
    inventory: str,
    *,
    cwd: Path,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    loads: Callable[[str], Any] = json.loads,
) -> dict[str, Any]:
    """The JSON ``ansible-inventory -i INVENTORY --list ARGS`` prints, read with ``loads``; ``env`` is added to
    this process's environment."""
    with tempfile.TemporaryDirectory(prefix="rdmaforge-inventory-") as scratch:
        messages_file = Path(scratch) / "messages.jsonl"
        try:
            proc = subprocess.run(
                command(["-i", inventory, "--list", *args]),
                cwd=cwd,
                capture_output=True,
                text=True,
                env={**os.environ, "ANSIBLE_NOCOLOR": "1", **(env or {}), MESSAGES_FILE: str(messages_file)},
                stdin=subprocess.DEVNULL,
                timeout=TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InventoryError(f"cannot run ansible-inventory: {exc}") from exc
        recorded = recorded_messages(messages_file)
    if proc.returncode != 0:
        cause = "".join(f"\n  {line}" for line in failed_source_warnings(proc.stderr, recorded))
        raise InventoryError(f"ansible-inventory -i {inventory} failed: {ansible_error(proc.stderr, recorded)}{cause}")
    try:
        data = loads(proc.stdout)
    except ValueError as exc:
        raise InventoryError(f"ansible-inventory -i {inventory} printed no JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise InventoryError(f"ansible-inventory -i {inventory} printed {type(data).__name__}, not an object")
    return data


#: A message Ansible displayed, as :mod:`rdmaforge.runner.inventory_cli` recorded it: its kind (error, warning,
#: deprecation) and its text.
Message = tuple[str, str]


def recorded_messages(path: Path) -> list[Message]:
    """The messages :mod:`rdmaforge.runner.inventory_cli` recorded, in order; none when it recorded none."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:  # a line cut short (the process killed while writing it)
            continue
        if isinstance(entry, dict) and isinstance(entry.get("kind"), str) and isinstance(entry.get("message"), str):
            found.append((entry["kind"], entry["message"]))
    return found


def ansible_error(stderr: str, recorded: Sequence[Message] = ()) -> str:
    """What an Ansible command said went wrong, without the traceback it may print after it.

    From the messages Ansible displayed as errors (``recorded``), where it displayed any: the last one, the error it
    stopped on. Else from stderr's text: the last line starting Ansible's ``[ERROR]:`` (or older ``ERROR!``) and its
    paragraph (the error Ansible stops on comes after every warning, and a warning may quote a script's stderr that
    prints such a line); else the last 2000 characters."""
    errors = [text for kind, text in recorded if kind == "error"]
    if errors:
        return _paragraph(errors[-1].strip().splitlines())
    lines = stderr.strip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(("[ERROR]:", "ERROR!"))]
    if starts:
        return _paragraph(lines[starts[-1] :])
    return stderr.strip()[-2000:]


def _paragraph(lines: Sequence[str]) -> str:
    """The first paragraph of a message, without a traceback after it."""
    kept = []
    for text in lines:
        if not text.strip() or text.startswith("Traceback"):
            break
        kept.append(text)
    return "\n".join(kept)


def failed_source_warnings(stderr: str, recorded: Sequence[Message] = ()) -> list[str]:
    """Why Ansible gave up on a source, which its error does not say: the first :data:`CAUSE_WARNINGS` warnings
    naming that source (the script plugin's holds the script's exit code and stderr), without blank lines nor what
    repeats a warning's first line, cut to their first and last lines, each line escaped (a script may print
    terminal escapes) and URL passwords and private keys hidden. The warnings are the ``recorded`` ones where Ansible's
    messages were recorded (a script's stderr stays inside its warning), else stderr's text cut at each line that
    starts a message. Empty when no source failed."""
    failed = FAILED_SOURCE.search(stderr)
    if failed is None:
        return []
    source = failed.group(1)
    messages = [text.splitlines() for _, text in recorded] if recorded else _messages(stderr)
    naming = [m for m in messages if m and m[0].startswith("[WARNING]") and any(source in line for line in m)]
    return [_shown(line) for warning in naming[:CAUSE_WARNINGS] for line in _compact(warning)]


def _messages(stderr: str) -> list[list[str]]:
    """stderr as Ansible's messages: each starts with a ``[WARNING]:``-like line and runs to the next one."""
    messages: list[list[str]] = []
    for line in stderr.splitlines():
        if line.startswith(MESSAGE_STARTS) or not messages:
            messages.append([line])
        else:
            messages[-1].append(line)
    return messages


def _compact(warning: list[str]) -> list[str]:
    first, rest = warning[0], warning[1:]
    kept = [first, *(line for line in rest if line.strip() and line.strip() != CAUSED_BY
                     and line.strip().rstrip(".") not in first)]  # fmt: skip
    if len(kept) <= CAUSE_HEAD + CAUSE_TAIL + 1:
        return kept
    left_out = len(kept) - CAUSE_HEAD - CAUSE_TAIL
    return [*kept[:CAUSE_HEAD], f"... ({left_out} lines left out)", *kept[-CAUSE_TAIL:]]


def _shown(line: str) -> str:
    line = secrets.redact_text(line, ())
    cut = line if len(line) <= CAUSE_LINE_CHARS else line[:CAUSE_LINE_CHARS] + " ..."
    return escaped(cut, one_line=True)
