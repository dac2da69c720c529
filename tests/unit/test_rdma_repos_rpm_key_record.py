"""rdma_repos on yum/dnf hosts: `rdmaforge reset` removes the erdma key from rpm only where rdmaforge's import added it.

Run for real on this machine: Debian's rpm keeps root's database in $HOME/.rpmdb, so each test gives the play a HOME
of its own and rpm_key imports into a database under tmp_path. The play says dnf is the package manager (the fact the
roles choose their path by; as tests/playbooks/dnf_path.yml does on a lab node). The key is a throwaway one made here.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import local_inventory, recap, run_playbook, throwaway_signing_key

pytestmark = pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v rpm"], capture_output=True).returncode != 0,
                                reason="rpm is not installed (make deps installs it)")  # fmt: skip


def keys_in_rpm(home: Path) -> list[str]:
    proc = subprocess.run(["rpm", "-q", "gpg-pubkey", "--qf", "%{VERSION}\\n"], capture_output=True, text=True,
                          env={"HOME": str(home), "PATH": "/usr/bin:/bin"})  # fmt: skip
    return proc.stdout.split() if proc.returncode == 0 else []


@pytest.fixture
def node(tmp_path: Path) -> Any:
    with throwaway_signing_key("rdmaforge test erdma key <erdma@example.invalid>") as key:
        keyring = subprocess.run([*key.gpg, "--export", key.fingerprint], check=True, capture_output=True).stdout
        armored = subprocess.run([*key.gpg, "--armor", "--export", key.fingerprint], check=True,
                                 capture_output=True).stdout  # fmt: skip
        home = tmp_path / "home"
        home.mkdir()
        (tmp_path / "key.asc").write_bytes(armored)
        role_vars = {
            "rdma_repos_erdma_enabled": True,
            "rdma_repos_verified_keyring": {"content": base64.b64encode(keyring).decode()},
            "rdma_repos_expected_fpr": key.fingerprint.upper(),
            "rdma_repos_rpm_key_path": str(tmp_path / "etc" / "pki" / "rpm-gpg" / "RPM-GPG-KEY-rdmaforge-erdma"),
            "rdma_repos_rpm_key_record": str(tmp_path / "var" / "lib" / "rdmaforge" / "erdma-rpm-key-imported"),
            "rdma_repos_yum_reposdir": str(tmp_path / "etc" / "yum.repos.d"),
        }
        (tmp_path / "etc" / "yum.repos.d").mkdir(parents=True)
        yield tmp_path, home, key.fingerprint.lower(), role_vars


def run(tmp_path: Path, home: Path, tasks_from: str, role_vars: dict[str, Any], *extra: str) -> int:
    playbook = tmp_path / f"{tasks_from}.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": f"rdma_repos {tasks_from}", "hosts": "localhost", "gather_facts": False,
        "vars": {"ansible_facts": {"pkg_mgr": "dnf"}},
        # include parameters: above the role's vars (rdma_repos_expected_fpr is one)
        "tasks": [{"name": tasks_from, "ansible.builtin.include_role": {"name": "rdmaforge.cluster.rdma_repos",
                                                                       "tasks_from": tasks_from},
                   "vars": role_vars}],
    }]))  # fmt: skip
    proc = run_playbook(str(playbook), *extra, inventory=local_inventory(tmp_path / "hosts.yml"),
                        env={"ANSIBLE_CACHE_PLUGIN": "memory", "HOME": str(home)}, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:]
    return recap(proc.stdout)["localhost"]["changed"]


def test_a_key_rdmaforge_imported_is_recorded_and_removed_by_reset(node: Any) -> None:
    tmp_path, home, fingerprint, role_vars = node
    record = Path(role_vars["rdma_repos_rpm_key_record"])
    assert run(tmp_path, home, "yum", role_vars) > 0
    assert fingerprint[-8:] in keys_in_rpm(home)
    assert record.read_text().strip().lower() == fingerprint
    assert run(tmp_path, home, "yum", role_vars) == 0
    # The inventory's pin changed since (another key): the record says which key rdmaforge imported.
    assert run(tmp_path, home, "withdraw", {**role_vars, "rdma_repos_expected_fpr": "0" * 40}) > 0
    assert keys_in_rpm(home) == [] and not record.exists()
    assert not Path(role_vars["rdma_repos_rpm_key_path"]).exists()
    assert run(tmp_path, home, "withdraw", role_vars) == 0


def test_a_key_the_node_had_imported_itself_stays(node: Any) -> None:
    """The seeds' yum repository names the vendor's key URL (gpgkey=): dnf imports it on its first install, before
    rdmaforge runs. rdmaforge's import then changes nothing, and reset took that key out of rpm all the same."""
    tmp_path, home, fingerprint, role_vars = node
    subprocess.run(["rpm", "--import", str(tmp_path / "key.asc")], check=True, env={"HOME": str(home),
                   "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert keys_in_rpm(home) == [fingerprint[-8:]]
    run(tmp_path, home, "yum", role_vars)
    assert not Path(role_vars["rdma_repos_rpm_key_record"]).exists()
    assert run(tmp_path, home, "withdraw", role_vars) > 0  # the repository file and the key file rdmaforge wrote
    assert keys_in_rpm(home) == [fingerprint[-8:]]
