"""The hugepages role's takeover of a reboot lock left by a run that is gone, run for real: the role's own shell
command (roles/hugepages/tasks/reboot.yml, read from the YAML) on lock directories in a temporary directory.

Ansible's part (the warning, the reboot) is the lab's test (tests/integration/test_tuning_on_lab.py); this one covers
what that cannot stage: a lock that is fresh, none at all, and a lock that another run renewed between the look at its
age and the takeover (review round 30: a run removed another's fresh lock).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml

from rdmaforge.paths import PROJECT_ROOT

TASKS = yaml.safe_load((PROJECT_ROOT / "roles" / "hugepages" / "tasks" / "reboot.yml").read_text())
(TAKEOVER,) = [task for task in TASKS if task["name"] == "Take over a reboot lock left by a run that is gone"]
SHELL, FLAG, SCRIPT, NAME = TAKEOVER["ansible.builtin.command"]["argv"][:4]


def take_over(lock: Path, stale_after: int, script: str = SCRIPT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SHELL, FLAG, script, NAME, str(lock), str(stale_after)], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip


def lock_of(directory: Path, owner: str, age: int) -> Path:
    lock = directory / "rdmaforge-reboot.lock"
    lock.mkdir()
    (lock / "owner").write_text(owner + "\n")
    then = time.time() - age
    os.utime(lock, (then, then))
    return lock


def test_a_lock_older_than_the_limit_is_taken_over_naming_its_owner(tmp_path: Path) -> None:
    lock = lock_of(tmp_path, "a run from ctl-1 since 2026-11-26T10:00:00Z", age=7200)
    said = take_over(lock, 3600).stdout
    assert said.startswith("taken over after 7")
    assert said.endswith("from: a run from ctl-1 since 2026-11-26T10:00:00Z\n")
    assert os.listdir(tmp_path) == []  # neither the lock nor the renamed one is left


def test_a_fresh_lock_and_no_lock_are_left_alone(tmp_path: Path) -> None:
    assert take_over(tmp_path / "none.lock", 3600).stdout == ""
    lock = lock_of(tmp_path, "a run that is rebooting this node", age=10)
    assert take_over(lock, 3600).stdout == ""
    assert (lock / "owner").read_text() == "a run that is rebooting this node\n"


def test_a_lock_renewed_between_the_look_and_the_takeover_is_put_back(tmp_path: Path) -> None:
    """Another run took the stale lock over and made it fresh just after this one looked at its age: the rename
    aside happens first and the age is read again there, so the fresh lock is renamed back, not removed. The race is
    staged by renewing the lock right after the script's first look (a line inserted there)."""
    lock = lock_of(tmp_path, "the old run", age=7200)
    first_look = '[ $(( $(date +%s) - $(stat -c %Y "$lock") )) -ge "$stale" ] || exit 0\n'
    assert first_look in SCRIPT
    staged = SCRIPT.replace(first_look, first_look + 'echo "the other run" > "$lock/owner"; touch "$lock"\n')
    assert take_over(lock, 3600, staged).stdout == ""
    assert (lock / "owner").read_text() == "the other run\n"
    assert sorted(os.listdir(tmp_path)) == ["rdmaforge-reboot.lock"]
