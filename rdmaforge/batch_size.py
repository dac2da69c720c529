"""The batch size of rdmaforge's rolling plays, Ansible's ``serial``: ``rdmaforge_upgrade_serial`` (upgrade-nccl,
rollback-nccl, their --serial) and ``rdmaforge_reboot_serial`` (the huge-page reboots). One rule for the command
line, the rollouts' first play (playbooks/check_upgrade_serial.yml) and preflight's inventory checks.

Ansible reads 0, or any number below 1, as one batch of every host: a "rolling" reboot would reboot the whole cluster
at once. A word fails only at the play that uses it, after earlier plays changed the nodes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

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


#: A rolling play's ``serial`` is a play keyword: Ansible templates it with extra vars only, so a batch size set in
#: group_vars was ignored (serial stayed 1) without a word. A keyword can read ``groups``, which an earlier play fills
#: (group_by): the rollout's first play puts the batch size its hosts have, -e included, in a group's name.
GROUP_PREFIX = "rdmaforge_batch_"


def group_name(value: object, variable: str) -> str:
    """The group that carries ``variable``'s batch size ``value`` to the rolling play (a group name has no '%')."""
    return f"{GROUP_PREFIX}{variable}_{str(value).replace('%', 'pct')}"


def from_groups(groups: Iterable[str], variable: str) -> str:
    """The batch size group_name put among ``groups`` for ``variable``; "1" when none did (the play that sets it
    had no host: one node at a time, the rolling plays' default)."""
    prefix = f"{GROUP_PREFIX}{variable}_"
    found = sorted(str(name)[len(prefix):] for name in groups if str(name).startswith(prefix))
    return found[0].replace("pct", "%") if found else "1"
