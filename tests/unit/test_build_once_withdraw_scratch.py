"""`rdmaforge reset` takes back the builder's scratch trees, not the user's scratch directory (review round 27b).

nccl_build_workdir is a user setting ("/scratch", a data disk): the withdrawal removed the whole directory on every
node, whatever else was in it. Now only the trees a build made (marked .rdmaforge-scratch by
stop_leftover_build.sh, the script every build starts with) and their locks go; the directory itself is left to the
reset's last step, which removes it only when nothing is left in it. For real: the nccl_build role's withdrawal run
by Ansible on this machine (connection local) over a scratch directory under the test's own directory.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from rdmaforge.paths import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "roles" / "build_once" / "files" / "stop_leftover_build.sh"


def test_reset_removes_the_marked_scratch_trees_and_nothing_else(tmp_path: Path) -> None:
    workdir = tmp_path / "scratch"
    (workdir / "projects").mkdir(parents=True)
    (workdir / "projects" / "important.txt").write_text("the user's\n")
    (workdir / "nccl-mine").mkdir()  # named like a build's tree, but no build made it
    tree = workdir / "nccl-2.29.7-cuda13.0-sm80"
    subprocess.run(["sh", str(SCRIPT), str(tree)], check=True)  # as a build starts
    (tree / "src" / "Makefile").write_text("all:\n")
    (workdir / f"{tree.name}.lock").mkdir()
    (workdir / f"{tree.name}.lock" / "owner").write_text("ctl ansible-playbook pid 1\n")

    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))  # fmt: skip
    play = {"name": "reset", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Withdraw", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.nccl_build",
                                                              "tasks_from": "withdraw"},
         "vars": {"nccl_build_workdir": str(workdir), "nccl_build_prefix_root": str(tmp_path / "prefix")}},
        {"name": "Show", "ansible.builtin.debug": {"msg": "roots={{ build_once_withdrawn_roots | to_json }}"}}]}
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CACHE_PLUGIN": "memory"}
    result = subprocess.run([str(PROJECT_ROOT / ".venv" / "bin" / "ansible-playbook"), "-i",
                             str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")], cwd=PROJECT_ROOT, env=env,
                            capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    assert sorted(p.name for p in workdir.iterdir()) == ["nccl-mine", "projects"]
    assert (workdir / "projects" / "important.txt").read_text() == "the user's\n"
    assert str(workdir) in result.stdout.split("roots=", 1)[1].splitlines()[0]  # removed at the end if empty
