"""Run one of the project's modules for real with ``ansible localhost -m <module>`` from the project root.

Everything is real: the rdmaforge.cluster collection that ansible.cfg's collections_path names (its module_utils
are rdmaforge/parsers' files, which Ansible must ship), AnsiballZ, argument validation, check and diff mode, the
JSON result. A short module name means rdmaforge.cluster.<name>.
The default stdout callback prints ``localhost | CHANGED => {...}`` (``FAILED! =>`` after an error);
in diff mode the unified diff comes first. Facts go to the memory cache, never to .cache/facts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rdmaforge.paths import PROJECT_ROOT

ANSIBLE = Path(sys.executable).parent / "ansible"
HOST_RESULT = re.compile(r"^localhost \| (?P<status>[A-Z]+!?) => ", re.MULTILINE)
#: A Python 3.8 interpreter to prove the modules (and their module_utils) run on old targets.
PY38 = Path(os.environ.get("RDMAFORGE_PY38", "/root/.pyenv/versions/3.8.18/bin/python3.8"))


@dataclass
class Adhoc:
    rc: int
    result: dict[str, Any]
    before_result: str  # what the callback printed before the JSON: the diff in --diff mode
    stderr: str


def run_module(module: str, args: dict[str, Any], *extra: str, python: Path | None = None) -> Adhoc:
    # No "-a" for no arguments: an empty "-a {}" reads as raw parameters, which modules refuse.
    argv = [
        str(ANSIBLE), "localhost", "-i", "localhost,", "-c", "local",
        "-e", f"ansible_python_interpreter={python or sys.executable}",
        "-m", module if "." in module else f"rdmaforge.cluster.{module}",
        *(["-a", json.dumps(args)] if args else []), *extra,
    ]  # fmt: skip
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"),
        "ANSIBLE_CACHE_PLUGIN": "memory",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    }
    # A hang guard, not a speed check: at SCHED_IDLE behind the lab and other work a 3 s run took over 180 s.
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    match = HOST_RESULT.search(proc.stdout)
    assert match, f"no host result in the output:\n{proc.stdout}\n{proc.stderr}"
    return Adhoc(proc.returncode, json.loads(proc.stdout[match.end() :]), proc.stdout[: match.start()], proc.stderr)
