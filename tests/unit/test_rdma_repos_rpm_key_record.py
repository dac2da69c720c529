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


#: The erdma repository file as Alibaba's manual procedure writes it (seed 000: /etc/yum.repos.d/erdma.repo), with
#: the vendor's key URL and a comment of the node's owner.
MANUAL_REPO = """# added by hand, following the eRDMA guide
[erdma]
name = ERDMA Repository
baseurl = http://mirrors.cloud.aliyuncs.com/erdma/yum/redhat/$releasever/erdma/$basearch/
gpgcheck = 1
enabled = 1
gpgkey = http://mirrors.cloud.aliyuncs.com/erdma/GPGKEY
"""


def test_a_hand_made_erdma_repository_is_kept_by_the_converge_and_put_back_by_reset(node: Any) -> None:
    """A converge wrote over the node's own erdma.repo (the file seed 000 makes by hand) with no copy, and reset then
    deleted it: the node was left with erdma packages and no repository (review round 15a)."""
    tmp_path, home, _, role_vars = node
    repo = tmp_path / "etc" / "yum.repos.d" / "erdma.repo"
    repo.write_text(MANUAL_REPO)
    assert run(tmp_path, home, "yum", role_vars) > 0
    assert role_vars["rdma_repos_rpm_key_path"] in repo.read_text()  # rdmaforge's repository now (gpgcheck, its key)
    assert run(tmp_path, home, "yum", role_vars) == 0  # kept once: the second converge changes nothing
    assert run(tmp_path, home, "withdraw", role_vars) > 0
    assert repo.read_text() == MANUAL_REPO
    assert not (Path(role_vars["rdma_repos_rpm_key_record"]).parent / "erdma.repo.before-rdmaforge").exists()


def test_a_repository_rdmaforge_wrote_goes_and_one_it_never_touched_stays(node: Any) -> None:
    tmp_path, home, _, role_vars = node
    repo = tmp_path / "etc" / "yum.repos.d" / "erdma.repo"
    run(tmp_path, home, "yum", role_vars)
    assert repo.is_file()
    assert run(tmp_path, home, "withdraw", role_vars) > 0
    assert not repo.exists()
    # Never converged with erdma (another fabric): the node's own file is none of reset's business.
    repo.write_text(MANUAL_REPO)
    run(tmp_path, home, "withdraw", role_vars)
    assert repo.read_text() == MANUAL_REPO


def test_the_manual_procedures_erdma_list_is_kept_and_put_back(node: Any) -> None:
    """apt.yml removes the one-line erdma.list of the manual (apt-key) procedure where it writes the deb822 source:
    kept first (keep_original.yml, as apt.yml imports it), and reset puts it back (restore_original.yml, as
    withdraw.yml imports it). Run here without apt.yml's apt refresh, which would reach the network."""
    tmp_path, home, _, role_vars = node
    listed = tmp_path / "etc" / "apt" / "sources.list.d" / "erdma.list"
    listed.parent.mkdir(parents=True)
    listed.write_text("deb [arch=amd64] http://mirrors.cloud.aliyuncs.com/erdma/apt/ubuntu jammy/erdma main\n")
    before = listed.read_text()
    files = {**role_vars, "rdma_repos_original": str(listed), "rdma_repos_original_ours": "",
             "rdma_repos_original_kept": str(tmp_path / "var" / "lib" / "rdmaforge" / "erdma.list.before-rdmaforge")}
    assert run(tmp_path, home, "keep_original", files) > 0
    listed.unlink()  # as apt.yml's next task does
    assert run(tmp_path, home, "keep_original", files) == 0
    assert run(tmp_path, home, "restore_original", files) > 0
    assert listed.read_text() == before and not Path(files["rdma_repos_original_kept"]).exists()


def test_turning_erdma_off_takes_out_the_key_rdmaforge_imported(node: Any) -> None:
    """A converge with erdma turned off (another fabric now) removed the repository file but left the key rdmaforge
    had imported, which kept vouching for any package it signed, from any repository (review round 38a)."""
    tmp_path, home, fingerprint, role_vars = node
    assert run(tmp_path, home, "yum", role_vars) > 0
    assert fingerprint[-8:] in keys_in_rpm(home)
    off = {**role_vars, "rdma_repos_erdma_enabled": False}
    assert run(tmp_path, home, "yum", off) > 0
    assert keys_in_rpm(home) == [] and not Path(role_vars["rdma_repos_rpm_key_record"]).exists()
    assert not Path(role_vars["rdma_repos_rpm_key_path"]).exists()
    assert run(tmp_path, home, "yum", off) == 0
