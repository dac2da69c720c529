"""roles/rdma_repos for real on this machine (ansible_connection=local, every path under tmp_path) on a node whose
fabric is not erdma: the node's own erdma repository (Alibaba's manual procedure: erdma.repo on yum, a deb822
erdma.sources on apt) is its business and stays, in --check and for real; only what rdmaforge wrote goes, and a
node's own erdma.repo kept before rdmaforge wrote over it comes back. Review round 19b: every converge of such a
node deleted the node's own erdma.repo, with no copy kept for reset."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import local_inventory, recap, run_playbook

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
#: The erdma repository as Alibaba's manual procedure writes it on yum (seed 000's baseurl and key).
NODES_REPO = ("[erdma]\nname = ERDMA Repository\nbaseurl = http://mirrors.cloud.aliyuncs.com/erdma/yum/redhat/$releasever/"
              "erdma/$basearch/\ngpgcheck = 1\nenabled = 1\ngpgkey = http://mirrors.cloud.aliyuncs.com/erdma/GPGKEY\n")
NODES_SOURCE = ("Types: deb\nURIs: https://mirrors.aliyun.com/erdma/apt/ubuntu\nSuites: jammy/erdma\nComponents: main\n"
                "Signed-By: /etc/apt/keyrings/erdma.gpg\n")


def role_run(tmp_path: Path, tasks_from: str, *extra: str, **more: object) -> tuple[int, str]:
    inventory = local_inventory(tmp_path / "hosts.yml")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "rdma_repos on another fabric's node", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Repository", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.rdma_repos",
                                                                         "tasks_from": tasks_from}}],
    }]))  # fmt: skip
    paths = {"rdma_repos_erdma_enabled": False, "rdma_repos_yum_reposdir": str(tmp_path / "yum.repos.d"),
             "rdma_repos_rpm_key_record": str(tmp_path / "lib" / "erdma-rpm-key-imported"),
             "rdma_repos_rpm_key_path": "/etc/pki/rpm-gpg/RPM-GPG-KEY-rdmaforge-erdma",
             "rdma_repos_sources_path": str(tmp_path / "erdma.sources"),
             "rdma_repos_legacy_list_path": str(tmp_path / "erdma.list"),
             "rdma_repos_apt_main_list": str(tmp_path / "apt" / "sources.list"),
             "rdma_repos_keyring_dir": str(tmp_path / "keyrings"), **more}  # fmt: skip
    proc = run_playbook(str(playbook), "-e", json.dumps(paths), *extra, inventory=inventory, env=ENV, timeout=300)
    return proc.returncode, proc.stdout


def test_a_nodes_own_erdma_repo_stays_where_erdma_is_not_enabled(tmp_path: Path) -> None:
    repo = tmp_path / "yum.repos.d" / "erdma.repo"
    repo.parent.mkdir()
    repo.write_text(NODES_REPO)
    for extra in (["--check", "--diff"], []):
        code, out = role_run(tmp_path, "yum_repo", *extra)
        assert code == 0 and recap(out)["localhost"]["changed"] == 0, out[-3000:]
        assert repo.read_text() == NODES_REPO


def test_rdmaforges_erdma_repo_goes_and_the_nodes_own_comes_back(tmp_path: Path) -> None:
    # rdmaforge's file names its key file; the node's own was kept (keep_original.yml) before it was written over.
    repo = tmp_path / "yum.repos.d" / "erdma.repo"
    repo.parent.mkdir()
    repo.write_text("[erdma]\nname = ERDMA Repository\nbaseurl = http://mirror/erdma\ngpgcheck = 1\n"
                    "gpgkey = file:///etc/pki/rpm-gpg/RPM-GPG-KEY-rdmaforge-erdma\nenabled = 1\n")  # fmt: skip
    kept = tmp_path / "lib" / "erdma.repo.before-rdmaforge"
    kept.parent.mkdir()
    kept.write_text(NODES_REPO)
    code, out = role_run(tmp_path, "yum_repo")
    assert code == 0 and recap(out)["localhost"]["changed"] >= 1, out[-3000:]
    assert repo.read_text() == NODES_REPO and not kept.exists()
    code, out = role_run(tmp_path, "yum_repo")
    assert code == 0 and recap(out)["localhost"]["changed"] == 0, out[-3000:]
    assert repo.read_text() == NODES_REPO


def test_a_nodes_own_erdma_source_and_keyring_stay_where_erdma_is_not_enabled(tmp_path: Path) -> None:
    source, keyring = tmp_path / "erdma.sources", tmp_path / "keyrings" / "erdma.gpg"
    source.write_text(NODES_SOURCE)
    keyring.parent.mkdir()
    keyring.write_bytes(b"\x99\x01\x0dkey")
    for extra in (["--check", "--diff"], []):
        code, out = role_run(tmp_path, "apt", *extra)
        assert code == 0 and recap(out)["localhost"]["changed"] == 0, out[-3000:]
        assert source.read_text() == NODES_SOURCE and keyring.exists()


def test_reset_leaves_a_nodes_own_erdma_source_and_keyring(tmp_path: Path) -> None:
    """`rdmaforge reset` (withdraw.yml) removed erdma.sources and its keyring whoever wrote them, where the
    converge already left a node's own alone (review round 20)."""
    source, keyring = tmp_path / "erdma.sources", tmp_path / "keyrings" / "erdma.gpg"
    source.write_text(NODES_SOURCE)
    keyring.parent.mkdir()
    keyring.write_bytes(b"\x99\x01\x0dkey")
    for extra in (["--check", "--diff"], []):
        code, out = role_run(tmp_path, "withdraw", *extra, ansible_facts={"pkg_mgr": "apt"})
        assert code == 0 and recap(out)["localhost"]["changed"] == 0, out[-3000:]
        assert source.read_text() == NODES_SOURCE and keyring.exists()


def test_a_keyring_the_nodes_own_list_signs_with_stays(tmp_path: Path) -> None:
    """Alibaba's manual procedure signs its erdma.list with the same /etc/apt/keyrings/erdma.gpg: the converge of a
    node whose fabric is not erdma deleted that keyring whoever used it, and apt then failed on the node's own
    list (review round 38a). One no source names is still taken away (a keyring an earlier run left)."""
    keyring, listed = tmp_path / "keyrings" / "erdma.gpg", tmp_path / "erdma.list"
    keyring.parent.mkdir()
    keyring.write_bytes(b"\x99\x01\x0dkey")
    listed.write_text(f"deb [signed-by={keyring}] https://mirrors.aliyun.com/erdma/apt/ubuntu jammy/erdma main\n")
    code, out = role_run(tmp_path, "apt_source_withdraw")
    assert code == 0 and recap(out)["localhost"]["changed"] == 0, out[-3000:]
    assert keyring.exists()
    # the same line in apt's main list (final read, round 40: only sources.list.d was looked at)
    (tmp_path / "apt").mkdir()
    (tmp_path / "apt" / "sources.list").write_text(listed.read_text())  # outside sources.list.d, as apt keeps it
    listed.unlink()
    code, out = role_run(tmp_path, "apt_source_withdraw")
    assert code == 0 and recap(out)["localhost"]["changed"] == 0 and keyring.exists(), out[-3000:]
    (tmp_path / "apt" / "sources.list").unlink()
    code, out = role_run(tmp_path, "apt_source_withdraw")
    assert code == 0 and recap(out)["localhost"]["changed"] == 1 and not keyring.exists(), out[-3000:]
