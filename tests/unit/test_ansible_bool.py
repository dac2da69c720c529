"""rdmaforge.plain_data.ansible_bool reads a variable the way a role's ``| bool`` does: compared with Ansible's own
filter, run in a process of its own (it may print a deprecation warning for the values it coerces)."""

from __future__ import annotations

import json
import subprocess
import sys

from rdmaforge.plain_data import ansible_bool

VALUES = [True, False, 1, 0, 2, -1, 1.0, 0.5, None, "yes", "Yes", "YES", "on", "On", "true", "True", "1", "no",
          "off", "false", "0", "y", "t", "", " yes", "yes ", "enabled", [], {}, [1]]  # fmt: skip


def test_ansible_bool_answers_as_ansibles_bool_filter() -> None:
    code = (
        "import json, sys\n"
        "from ansible.plugins.filter.core import to_bool\n"
        "print(json.dumps([to_bool(v) for v in json.loads(sys.argv[1])]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(VALUES)], capture_output=True, text=True, check=True)
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = [ansible_bool(value) for value in VALUES]
    assert dict(zip(map(repr, VALUES), ours, strict=True)) == dict(zip(map(repr, VALUES), theirs, strict=True))
