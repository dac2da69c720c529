"""Where the roles keep their controller-side files: under RDMAFORGE_CONTROLLER_CACHE when it is set (README,
nccl_build_controller_cache), else ~/.cache/rdmaforge. The converge records' controller files and the run lock read
the same variable; a role writing elsewhere made a key or build the records never saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import run_playbook

from rdmaforge.collection import ensure_dev_tree

#: Each role's controller cache variable and the directory the README names under the cache.
CACHES = {
    "build_once_controller_cache": "builds",
    "nccl_build_controller_cache": "builds",
    "rdma_repos_controller_cache": "keys",
    "ssh_trust_controller_cache": "ssh-trust",
}

PLAYBOOK = (
    """---
- name: The roles' controller cache defaults as Ansible renders them (none of the roles' tasks run)
  hosts: all
  gather_facts: false
  tasks:
"""
    + "".join(
        f"""    - name: Load role {role}'s defaults
      ansible.builtin.import_role:
        name: rdmaforge.cluster.{role}
      when: false
"""
        for role in ("build_once", "nccl_build", "rdma_repos", "ssh_trust")
    )
    + """    - name: Write what they render to
      ansible.builtin.copy:
        dest: "{{ cache_out }}"
        mode: "0644"
        content: "{{ {'build_once_controller_cache': build_once_controller_cache,
                      'nccl_build_controller_cache': nccl_build_controller_cache,
                      'rdma_repos_controller_cache': rdma_repos_controller_cache,
                      'ssh_trust_controller_cache': ssh_trust_controller_cache} | to_json }}"
"""
)


def render(base: Path, env: dict[str, str]) -> dict[str, str]:
    ensure_dev_tree()
    inventory = base / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {"node1": local}}}}}))
    playbook = base / "caches.yml"
    playbook.write_text(PLAYBOOK)
    out = base / "out.json"
    run_playbook(str(playbook), "-e", f"cache_out={out}", inventory=inventory, check=True,
                 env={"ANSIBLE_CACHE_PLUGIN": "memory", **env}, timeout=300)  # fmt: skip
    rendered: dict[str, str] = json.loads(out.read_text())
    return rendered


def test_the_roles_keep_their_files_under_rdmaforge_controller_cache(tmp_path: Path) -> None:
    cache = tmp_path / "elsewhere"
    rendered = render(tmp_path, {"RDMAFORGE_CONTROLLER_CACHE": str(cache)})
    assert rendered == {name: str(cache / sub) for name, sub in CACHES.items()}


def test_without_it_the_roles_keep_them_under_the_home_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RDMAFORGE_CONTROLLER_CACHE", raising=False)
    home = Path.home()
    rendered = render(tmp_path, {})
    assert rendered == {name: str(home / ".cache" / "rdmaforge" / sub) for name, sub in CACHES.items()}
