"""Warm-cache `lab up --nodes 3 --nics 2` wall time (target: under 30 s) and time until Ansible answers."""

from __future__ import annotations

import subprocess
import time

from benchmarks.common import Result
from rdmaforge.lab import Lab
from rdmaforge.paths import PROJECT_ROOT

TARGET_SECONDS = 30.0


def run() -> list[Result]:
    lab = Lab()
    lab.down()
    lab.up(nodes=1, nics=0)  # make sure the caches are warm: this benchmark measures the warm path
    lab.down()
    started = time.monotonic()
    lab.up(nodes=3, nics=2)
    up_seconds = time.monotonic() - started
    ping = subprocess.run(
        [
            str(PROJECT_ROOT / ".venv" / "bin" / "ansible"),
            "-i",
            str(lab.inventory_path),
            "cluster",
            "-m",
            "ansible.builtin.ping",
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    ready_seconds = time.monotonic() - started
    answered = ping.stdout.count("SUCCESS")
    return [
        Result(
            "lab up --nodes 3 --nics 2 (warm cache)",
            round(up_seconds, 2),
            "s",
            f"< {TARGET_SECONDS:.0f} s",
            up_seconds < TARGET_SECONDS,
        ),
        Result(
            "lab up + ansible ping of 3 nodes",
            round(ready_seconds, 2),
            "s",
            "3 nodes answer",
            answered == 3 and ping.returncode == 0,
            f"{answered}/3 answered",
        ),
    ]
