"""Backoff for the roles' network operations (package installs, downloads, git, pip).

Ansible's ``until``/``retries``/``delay`` waits the same ``delay`` after every failed try. A mirror that is down for
a minute then costs every try at once, and a thousand nodes retry in lockstep. The roles' ``until`` conditions call
:func:`settled` (filter ``rdmaforge_network_retry_done``), which waits the rest of a doubling backoff before
Ansible's own ``delay``: the waits after tries 1, 2, 3, ... are delay, 2 x delay, 4 x delay, ..., each at most
``max(MAX_WAIT_S, delay)``. It runs in the task's worker process on the controller, one per host, so one host's
wait holds back no other host.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

#: The longest wait between two tries, unless the inventory's delay is longer already.
MAX_WAIT_S = 60.0


def wait_after(attempt: int, delay: float, cap: float = MAX_WAIT_S) -> float:
    """Seconds between failed try ``attempt`` (1 for the first) and the next: ``delay`` doubled per failure before
    it, at most ``max(cap, delay)``."""
    if attempt < 1 or delay <= 0:
        return max(0.0, float(delay))
    return float(min(delay * 2 ** (attempt - 1), max(cap, delay)))


def settled(
    result: Mapping[str, Any], retries: int, delay: float, sleep: Callable[[float], None] = time.sleep
) -> bool:
    """The ``until`` condition of a retried network task: True when the try succeeded. After a failed try that
    another follows, waits what the backoff adds to Ansible's fixed ``delay`` (which Ansible then waits), and
    returns False; after the last try, returns False at once."""
    if not isinstance(result, Mapping):
        raise TypeError(f"rdmaforge_network_retry_done expects a registered task result, got {type(result).__name__}")
    if not result.get("failed"):
        return True
    attempt = int(result.get("attempts") or 1)
    if attempt <= int(retries):
        extra = wait_after(attempt, float(delay)) - max(0.0, float(delay))
        if extra > 0:
            sleep(extra)
    return False
