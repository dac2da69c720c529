#!/usr/bin/python
"""Ansible module: from this node, open a non-interactive SSH session to each target, in parallel."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ssh_mesh_check
short_description: Check that this node reaches every given node over SSH without prompts
description:
  - Runs C(ssh -o BatchMode=yes -o StrictHostKeyChecking=yes TARGET true) to every target, in parallel.
  - BatchMode makes a missing key fail instead of prompting; StrictHostKeyChecking=yes makes an unknown or
    changed host key fail instead of being accepted. This is what mpirun needs from every node.
  - Read-only; supports check mode (it runs the same read-only probe).
version_added: "0.1.0"
options:
  targets:
    description: Addresses or names to reach (this node's own entry may be included; it is checked too).
    type: list
    elements: str
    required: true
  user:
    description: Remote user (default the current user).
    type: str
  identity_file:
    description: Private key to offer (default ssh's own choice, e.g. from ~/.ssh/config).
    type: path
  timeout:
    description: Connect timeout per target, in seconds.
    type: int
    default: 5
  parallel:
    description: How many SSH sessions at once.
    type: int
    default: 32
  retries:
    description:
      - Retries (with backoff) of a target whose sshd reset or closed the connection before authentication, as
        sshd does while its MaxStartups limit throttles a burst; refused keys and host keys are not retried.
    type: int
    default: 3
attributes:
  check_mode:
    support: full
    details: Runs the same read-only probe in check mode (an SSH session that runs C(true)); it never changes anything.
  diff_mode:
    support: none
author: rdmaforge
"""

EXAMPLES = r"""
- name: Every node reaches every node
  rdmaforge.cluster.ssh_mesh_check:
    targets: "{{ groups['cluster'] | map('extract', hostvars, 'ansible_host') | list }}"
    user: root
  register: mesh
"""

RETURN = r"""
probes:
  description: Per target, whether the session worked, the exit status and ssh's last error line.
  returned: always
  type: dict
  sample: {"198.18.0.12": {"ok": true, "rc": 0, "error": ""}}
failed_targets:
  description: Targets that could not be reached without a prompt.
  returned: always
  type: list
  elements: str
"""

import random
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

#: sshd's answer while it throttles unauthenticated connections (MaxStartups): every node opens a session to
#: every other at the same moment, so a node of a large cluster briefly sees more than sshd admits. Worth a retry;
#: a refused key or host key is not.
TRANSIENT = (
    "Connection reset by",
    "Connection closed by",
    "kex_exchange_identification",
    "ssh_exchange_identification",
)


def probe(
    ssh: str, target: str, user: str | None, identity: str | None, timeout: int, retries: int = 3
) -> dict[str, object]:
    result = _probe_once(ssh, target, user, identity, timeout)
    for attempt in range(retries):
        if result["ok"] or not any(marker in str(result["error"]) for marker in TRANSIENT):
            break
        time.sleep((0.5 * 2**attempt) * (1 + random.random()))  # back off, and spread the retries
        result = _probe_once(ssh, target, user, identity, timeout)
    return result


def _probe_once(ssh: str, target: str, user: str | None, identity: str | None, timeout: int) -> dict[str, object]:
    argv = [ssh, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", f"ConnectTimeout={timeout}"]
    if identity:
        argv += ["-i", identity]
    # "--": what follows is the destination, never an option (a target "-oProxyCommand=..." ran a local command)
    argv += ["--", f"{user}@{target}" if user else target, "true"]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        return {"ok": False, "rc": None, "error": f"no answer within {timeout + 10}s"}
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("Warning: Permanently")]
    return {"ok": proc.returncode == 0, "rc": proc.returncode, "error": lines[-1] if lines else ""}


ARGUMENT_SPEC = {
    "targets": {"type": "list", "elements": "str", "required": True},
    "user": {"type": "str"},
    "identity_file": {"type": "path"},
    "timeout": {"type": "int", "default": 5},
    "parallel": {"type": "int", "default": 32},
    "retries": {"type": "int", "default": 3},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    ssh = module.get_bin_path("ssh", required=True)
    params = module.params
    if params["parallel"] < 1:
        module.fail_json(msg=f"parallel={params['parallel']}: allowed values are 1 or more")
    for name in ("timeout", "retries"):
        if params[name] < (1 if name == "timeout" else 0):
            module.fail_json(msg=f"{name}={params[name]}: allowed values are {1 if name == 'timeout' else 0} or more")
    named = [("targets", t) for t in params["targets"]] + ([("user", params["user"])] if params["user"] else [])
    for option, value in named:
        if not value or value.startswith("-") or any(c.isspace() or not c.isprintable() for c in value):
            module.fail_json(msg=f"{option}: {value!r} is not allowed; allowed: a host name or address (a user name "
                                 "for user) that does not start with '-' and has no blanks or control characters")
    targets = list(dict.fromkeys(params["targets"]))
    with ThreadPoolExecutor(max_workers=min(params["parallel"], max(1, len(targets)))) as pool:
        results = dict(
            pool.map(
                lambda t: (
                    t,
                    probe(ssh, t, params["user"], params["identity_file"], params["timeout"], params["retries"]),
                ),
                targets,
            )
        )
    module.exit_json(changed=False, probes=results, failed_targets=[t for t, r in results.items() if not r["ok"]])


if __name__ == "__main__":
    main()
