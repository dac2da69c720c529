"""roles/rdma_repos/tasks/apt.yml for real on this machine (ansible_connection=local, every path it touches under
tmp_path): the one-line erdma.list of Alibaba's manual procedure is removed only where rdmaforge writes the deb822
source it would duplicate. Where erdma is not enabled (another fabric) the converge deleted it all the same, on
every run, and reset never put it back: the file is the node's own there, and stays."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import local_inventory, recap, run_playbook

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
#: The manual procedure's line (seed 000's apt source for the erdma repository, its apt-key form).
LEGACY_LINE = "deb [arch=amd64] https://mirrors.aliyun.com/erdma/apt/ubuntu jammy/erdma main\n"


def apt_run(tmp_path: Path, *extra: str, enabled: bool) -> tuple[int, str]:
    inventory = local_inventory(tmp_path / "hosts.yml")
    playbook = tmp_path / "apt.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "rdma_repos' apt source", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Sources", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.rdma_repos",
                                                                     "tasks_from": "apt"}}],
    }]))  # fmt: skip
    paths = {"rdma_repos_erdma_enabled": enabled, "rdma_repos_legacy_list_path": str(tmp_path / "erdma.list"),
             "rdma_repos_sources_path": str(tmp_path / "erdma.sources"),
             "rdma_repos_keyring_dir": str(tmp_path / "keyrings")}  # fmt: skip
    proc = run_playbook(str(playbook), "-e", json.dumps(paths), *extra, inventory=inventory, env=ENV, timeout=300)
    return proc.returncode, proc.stdout


def test_a_nodes_own_erdma_list_stays_where_erdma_is_not_enabled(tmp_path: Path) -> None:
    legacy = tmp_path / "erdma.list"
    legacy.write_text(LEGACY_LINE)
    for extra in (["--check"], []):
        code, out = apt_run(tmp_path, *extra, enabled=False)
        assert code == 0 and recap(out)["localhost"]["changed"] == 0, out[-3000:]
        assert legacy.read_text() == LEGACY_LINE
