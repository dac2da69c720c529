"""The NCCL builder is chosen among the nodes still in the play (review round 27b).

The builder was the first node by name of ansible_play_hosts_all, which still lists a node that failed preflight or
went unreachable; a run_once task delegated to it (detect.yml's nvcc reads) then marked a live node unreachable and
ended the play for every node, while the others read ok. Here for real: Ansible on this machine, node1 an SSH host
on a loopback port nothing listens on (unreachable at once), node2 and node3 local connections, and the nccl_build
role's own detect.yml against this machine's real nvcc.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT

NVCC = Path("/usr/local/cuda/bin/nvcc")
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}


def run(tmp_path: Path, builders: list[str]) -> subprocess.CompletedProcess[str]:
    hosts = {"node1": {"ansible_host": "127.0.0.1", "ansible_port": 1}, "node2": LOCAL, "node3": LOCAL}
    inventory = {"all": {"children": {"cluster": {"hosts": hosts}}}}
    if builders:
        inventory["all"]["children"]["nccl_builder"] = {"hosts": dict.fromkeys(builders)}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    play = {"name": "A node lost before the build", "hosts": "cluster", "gather_facts": False, "tasks": [
        {"name": "Reach every node", "ansible.builtin.ping": None},
        {"name": "Detect the builder's nvcc", "ansible.builtin.include_role": {
            "name": "rdmaforge.cluster.nccl_build", "tasks_from": "detect", "public": True},
         "vars": {"nccl_build_cuda_home": str(NVCC.parent.parent)}},
        {"name": "After the detection", "ansible.builtin.debug": {"msg": "builder={{ nccl_build_builder }}"}}]}
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CACHE_PLUGIN": "memory"}
    return subprocess.run([str(PROJECT_ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           str(tmp_path / "play.yml")], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip


@pytest.mark.skipif(not NVCC.exists(), reason=f"no nvcc at {NVCC}")
@pytest.mark.parametrize(("builders", "builder"), [([], "node2"), (["node1", "node3"], "node3")])
def test_a_lost_node_is_never_the_builder_and_the_others_go_on(tmp_path: Path, builders: list[str],
                                                               builder: str) -> None:  # fmt: skip
    result = run(tmp_path, builders)
    out = result.stdout
    recap = {line.split()[0]: line for line in out.split("PLAY RECAP", 1)[-1].splitlines() if ":" in line}
    assert "unreachable=1" in recap["node1"], out[-3000:]
    for node in ("node2", "node3"):
        assert "unreachable=0" in recap[node] and "failed=0" in recap[node], out[-3000:]
        assert f'ok: [{node}] => {{\n    "msg": "builder={builder}"' in out, out[-3000:]


def test_preflight_and_the_build_name_the_same_builder() -> None:
    """Preflight checked the builder's free space on the first node in inventory order, which under --limit or an
    inventory not sorted by name was not the node that builds."""
    from rdmaforge.nccl_build import builder_of

    assert builder_of({"cluster": ["gpu-b", "gpu-a"]}, ["gpu-b", "gpu-a"]) == "gpu-a"
    assert builder_of({"nccl_builder": ["gpu-9", "gpu-3", "gpu-2"]}, ["gpu-2", "gpu-3"]) == "gpu-3"
    assert builder_of({"nccl_builder": ["gpu-9"]}, ["gpu-2", "gpu-3"]) == "gpu-2"
    assert builder_of({}, []) == ""
    free_space = (PROJECT_ROOT / "roles" / "preflight" / "tasks" / "free_space.yml").read_text()
    builder_vars = (PROJECT_ROOT / "roles" / "nccl_build" / "vars" / "main.yml").read_text()
    rule = "groups | rdmaforge.cluster.rdmaforge_nccl_builder(ansible_play_hosts)"
    assert rule in free_space and rule in builder_vars
