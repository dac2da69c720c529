"""``ansible-inventory --list``: an inventory as Ansible itself reads it (scripts and plugins included), in a process
of its own. ``rdmaforge render`` reads its hosts this way; the secret scrubber reads the variables of an inventory
its static readers cannot (:func:`rdmaforge.runner.execute.secret_values`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Seconds an inventory may take to list: a cloud plugin pages through an API.
TIMEOUT_S = 300


class InventoryError(RuntimeError):
    """ansible-inventory could not list the inventory; the message says why, in Ansible's words."""


def tool() -> str:
    """This venv's ansible-inventory (the Ansible the runs use), else the one on PATH."""
    beside = Path(sys.executable).parent / "ansible-inventory"
    return str(beside) if beside.exists() else "ansible-inventory"


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
    try:
        proc = subprocess.run(
            [tool(), "-i", inventory, "--list", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env={**os.environ, "ANSIBLE_NOCOLOR": "1", **(env or {})},
            stdin=subprocess.DEVNULL,
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InventoryError(f"cannot run ansible-inventory: {exc}") from exc
    if proc.returncode != 0:
        raise InventoryError(f"ansible-inventory -i {inventory} failed: {ansible_error(proc.stderr)}")
    try:
        data = loads(proc.stdout)
    except ValueError as exc:
        raise InventoryError(f"ansible-inventory -i {inventory} printed no JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise InventoryError(f"ansible-inventory -i {inventory} printed {type(data).__name__}, not an object")
    return data


def ansible_error(stderr: str) -> str:
    """What an Ansible command said went wrong, without the traceback it may print after it: the ``[ERROR]:`` (or
    older ``ERROR!``) paragraph, else the last 2000 characters."""
    lines = stderr.strip().splitlines()
    for start, line in enumerate(lines):
        if line.startswith(("[ERROR]:", "ERROR!")):
            kept = []
            for text in lines[start:]:
                if not text.strip() or text.startswith("Traceback"):
                    break
                kept.append(text)
            return "\n".join(kept)
    return stderr.strip()[-2000:]
