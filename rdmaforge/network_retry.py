"""Backoff for the roles' network operations (package installs, downloads, git, pip).

Ansible's ``until``/``retries``/``delay`` waits the same ``delay`` after every failed try. A mirror that is down for
a minute then costs every try at once, and a thousand nodes retry in lockstep. The roles' ``until`` conditions call
:func:`settled` (filter ``rdmaforge_network_retry_done``), which waits the rest of a doubling backoff before
Ansible's own ``delay``: the waits after tries 1, 2, 3, ... are delay, 2 x delay, 4 x delay, ..., each at most
``max(MAX_WAIT_S, delay)``. It runs in the task's worker process on the controller, one per host, so one host's
wait holds back no other host.

A failure that another try cannot mend ends the tries at once (:func:`permanent_failure`): an HTTP answer such as
404 or 403, a Python package that downloaded and then failed to build, a dpkg maintainer script that failed, a
module called with bad arguments. Anything not recognised is retried, as a network failure may be.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

#: HTTP client errors that another try may mend: timeout, too early, too many requests.
TRANSIENT_4XX = frozenset({408, 425, 429})

#: Text of a failed result that no later try changes, and what it means. Each is printed after the network part of
#: the operation has succeeded (a pip build runs after its downloads; pip fetching build dependencies from a dead
#: index fails with "Could not find a version" instead, and is retried).
PERMANENT_MESSAGES: tuple[tuple[str, str], ...] = (
    ("Failed building wheel for", "pip downloaded the package and could not build it"),
    ("Could not build wheels for", "pip downloaded the package and could not build it"),
    ("failed-wheel-build-for-install", "pip downloaded the package and could not build it"),
    ("Getting requirements to build wheel did not run successfully", "the package's build script failed"),
    ("setup.py egg_info did not run successfully", "the package's build script failed"),
    ("Preparing metadata (pyproject.toml) did not run successfully", "the package's build script failed"),
    ("externally-managed-environment", "pip refuses to install into the system's Python (PEP 668)"),
    ("post-installation script subprocess returned error exit status", "a package's maintainer script failed"),
    ("pre-installation script subprocess returned error exit status", "a package's maintainer script failed"),
    # apt: the repository is signed by a key its keyring lacks (a rotated key, a wrong keyring).
    ("NO_PUBKEY", "apt has no key for the repository's signature"),
    # Ansible's dnf module, gpgcheck on: an unsigned package, or one whose signature no imported key verifies.
    ("Failed to validate GPG signature for", "dnf refused the package's signature (gpgcheck is on)"),
    # pip's hash-checking mode (--require-hashes): a wheel whose sha256 is not a pinned one, or a package unpinned.
    ("DO NOT MATCH THE HASHES", "pip refused a package whose sha256 is not a pinned one"),
    ("Hashes are required in --require-hashes mode", "pip found a requirement without a pinned sha256"),
    # rpm_key: the key it was given is no file, URL or key id (a local path that is not there), a download that is
    # no key, or a key whose fingerprint is not the pinned one.
    ("Not a valid key ", "rpm_key was given a key path that is not a file"),
    ("Not a public key: ", "the key rpm_key fetched is not a public key"),
    ("does not match any key fingerprints in", "the key's fingerprint is not the pinned one"),
    ("Unsupported parameters for", "the module was called with arguments it does not take"),
    ("missing required arguments:", "the module was called without a required argument"),
)

#: The longest wait between two tries, unless the inventory's delay is longer already.
MAX_WAIT_S = 60.0


def wait_after(attempt: int, delay: float, cap: float = MAX_WAIT_S) -> float:
    """Seconds between failed try ``attempt`` (1 for the first) and the next: ``delay`` doubled per failure before
    it, at most ``max(cap, delay)``."""
    if attempt < 1 or delay <= 0:
        return max(0.0, float(delay))
    return float(min(delay * 2 ** (attempt - 1), max(cap, delay)))


def permanent_failure(result: Mapping[str, Any]) -> str | None:
    """Why another try of this failed result cannot succeed, or None when it may (or the result did not fail)."""
    if not result.get("failed"):
        return None
    for key in ("status_code", "status"):  # get_url, uri
        status = result.get(key)
        if isinstance(status, int) and 400 <= status < 500 and status not in TRANSIENT_4XX:
            return f"the server answered HTTP {status}; another try gets the same answer"
    text = "\n".join(str(result.get(key) or "") for key in ("msg", "stderr", "stdout"))
    for needle, meaning in PERMANENT_MESSAGES:
        if needle in text:
            return f"{meaning} ({needle!r}); not a network failure, so it is not tried again"
    return None


def settled(
    result: Mapping[str, Any],
    retries: int,
    delay: float,
    sleep: Callable[[float], None] = time.sleep,
    warn: Callable[[str], None] = lambda _: None,
) -> bool:
    """The ``until`` condition of a retried network task: True when the try succeeded. After a failed try that
    another follows, waits what the backoff adds to Ansible's fixed ``delay`` (which Ansible then waits), and
    returns False; after the last try, returns False at once. A failure :func:`permanent_failure` recognises
    returns True at once (the tries end and the task fails with that result), after ``warn("not retried: <why>")``."""
    if not isinstance(result, Mapping):
        raise TypeError(f"rdmaforge_network_retry_done expects a registered task result, got {type(result).__name__}")
    if not result.get("failed"):
        return True
    reason = permanent_failure(result)
    if reason:
        warn(f"not retried: {reason}")
        return True
    attempt = int(result.get("attempts") or 1)
    if attempt <= int(retries):
        extra = wait_after(attempt, float(delay)) - max(0.0, float(delay))
        if extra > 0:
            sleep(extra)
    return False
