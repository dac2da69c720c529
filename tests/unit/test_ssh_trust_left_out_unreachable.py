"""ssh_trust's read of the host keys of nodes a --limit run leaves out (review round 27b): one of them down made
the node reading it unreachable, so the node being repaired ended its converge there and the run blamed it. The
role's own task, taken from its tasks file, run by Ansible on this machine: node1 an SSH host on a loopback port
nothing listens on (unreachable at once), node2 a local connection reading it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from rdmaforge.paths import PROJECT_ROOT

TASKS = PROJECT_ROOT / "roles" / "ssh_trust" / "tasks" / "main.yml"
NAME = "Read the SSH host keys of the cluster's nodes that this run leaves out"


def test_a_left_out_node_that_does_not_answer_leaves_the_reader_in_the_run(tmp_path: Path) -> None:
    (task,) = [t for t in yaml.safe_load(TASKS.read_text()) if t.get("name") == NAME]
    task = {**task, "loop": ["node1"]}  # the share this reader gets (rdmaforge_ssh_left_out_share)
    hosts = {"node1": {"ansible_host": "127.0.0.1", "ansible_port": 1},
             "node2": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    play = {"name": "repair node2 while node1 is down", "hosts": "node2", "gather_facts": False,
            "tasks": [task, {"name": "After the read", "ansible.builtin.debug": {"msg": "still here"}}]}
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    playbook = PROJECT_ROOT / ".venv" / "bin" / "ansible-playbook"
    result = subprocess.run([str(playbook), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
                            cwd=PROJECT_ROOT, capture_output=True, text=True,
                            env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=300,
                            check=False)  # fmt: skip
    recap = result.stdout.split("PLAY RECAP", 1)[-1]
    assert "unreachable=0" in next(line for line in recap.splitlines() if line.startswith("node2")), result.stdout
    assert '"msg": "still here"' in result.stdout


def test_a_left_out_node_with_no_keys_at_all_is_named_with_what_to_do() -> None:
    import pytest

    from rdmaforge.ssh_mesh import known_hosts_lines

    with pytest.raises(ValueError, match=r"^node9: left out of this run, and its SSH host keys could not be read"):
        known_hosts_lines(["node9"], {"node9": {}}, gathered=["node1"])
    with pytest.raises(ValueError, match=r"^node1: no SSH host key facts were gathered"):
        known_hosts_lines(["node1"], {"node1": {}}, gathered=["node1"])
