"""The batch size of rdmaforge's rolling plays, Ansible's ``serial``: ``rdmaforge_upgrade_serial`` (upgrade-nccl,
rollback-nccl, their --serial) and ``rdmaforge_reboot_serial`` (the huge-page reboots). One rule for the command
line, the rollouts' first play (playbooks/check_upgrade_serial.yml) and preflight's inventory checks.

Ansible reads 0, or any number below 1, as one batch of every host: a "rolling" reboot would reboot the whole cluster
at once. A word fails only at the play that uses it, after earlier plays changed the nodes."""

from __future__ import annotations

import json
import re

#: A whole number of nodes, 1 or more, or a percentage of the cluster from 1% to 100%, written without blanks.
WHOLE = re.compile(r"[1-9][0-9]*")
PERCENT = re.compile(r"([1-9][0-9]?|100)%")
ALLOWED = ("a whole number of nodes per batch, at least 1 (e.g. 2), or a percentage of the cluster from 1% to 100% "
           "(e.g. 25%)")  # fmt: skip
#: The variables that hold a batch size.
VARIABLES = ("rdmaforge_upgrade_serial", "rdmaforge_reboot_serial")


def allowed(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 1
    return isinstance(value, str) and (WHOLE.fullmatch(value) or PERCENT.fullmatch(value)) is not None


def problem(variable: str, value: object) -> str:
    """``VARIABLE=VALUE: allowed: ...`` for a batch size that is not allowed, else ''."""
    if allowed(value):
        return ""
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError):
        shown = repr(value)
    return f"{variable}={shown}: allowed: {ALLOWED}"
