"""The rdmaforge.cluster collection, as a user outside this repository gets it: ``ansible-galaxy collection build``
(of the tree rdmaforge.collection assembles), ``ansible-galaxy collection install`` into a temporary path, then a
playbook in an empty directory elsewhere that uses a module and a role by FQCN, against localhost in check mode
(connection local; the only files named are temporary ones). No ansible.cfg applies: not the checkout's, and the
checkout's collection tree is not on the collections path. Built and installed once per session
(tests/installed.py); tests/integration/test_installed_on_lab.py uses it against a lab node."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from installed import BIN, collection_env

from rdmaforge import collection
from rdmaforge.paths import PROJECT_ROOT


def test_ansible_doc_finds_the_installed_collection(installed_collection: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "ansible-doc"), "--json", "rdmaforge.cluster.kernel_cmdline"],
        cwd=tmp_path,
        env=collection_env(installed_collection),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["rdmaforge.cluster.kernel_cmdline"]["doc"]
    assert Path(doc["filename"]).resolve().is_relative_to(installed_collection.resolve())


def test_playbook_outside_the_repository_uses_module_and_role_by_fqcn(
    installed_collection: Path, tmp_path: Path
) -> None:
    project = tmp_path / "x"
    project.mkdir()
    assert not str(project.resolve()).startswith(str(PROJECT_ROOT.resolve()))
    grub = tmp_path / "grub"
    grub.write_text('GRUB_CMDLINE_LINUX="quiet"\n')
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n# BEGIN rdmaforge cluster hosts\n# END rdmaforge cluster hosts\n")
    before = (grub.read_text(), hosts.read_text())
    (project / "inventory.yml").write_text(
        yaml.safe_dump(
            {
                "cluster": {
                    "hosts": {
                        "node1": {
                            "ansible_connection": "local",
                            "ansible_host": "127.0.0.1",
                            "ansible_python_interpreter": sys.executable,
                        }
                    }
                }
            }
        )
    )
    play = [
        {
            "name": "Use rdmaforge.cluster from outside the repository",
            "hosts": "cluster",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Reserve huge pages on a temporary GRUB defaults file",
                    "rdmaforge.cluster.kernel_cmdline": {
                        "path": str(grub),
                        "args": {"hugepages": "4"},
                        "backend": "grub_defaults",
                        "proc_cmdline": str(grub),
                        "backup": False,
                    },
                    "register": "cmdline",
                },
                {
                    "name": "The module computed the change",
                    "ansible.builtin.assert": {
                        "that": ["cmdline is changed", "cmdline.cmdline_after == 'quiet hugepages=4'"]
                    },
                },
                {
                    "name": "A role by FQCN (its filters by FQCN too)",
                    "ansible.builtin.include_role": {"name": "rdmaforge.cluster.cluster_hosts"},
                    "vars": {"cluster_hosts_path": str(hosts)},
                },
                {
                    "name": "The role worked out the block",
                    "ansible.builtin.assert": {
                        "that": [
                            "cluster_hosts_entries.lines | length == 1",
                            "'node1' in cluster_hosts_entries.lines[0]",
                        ]
                    },
                },
            ],
        }
    ]
    (project / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "inventory.yml", "play.yml", "--check", "--diff"],
        cwd=project,
        env=collection_env(installed_collection),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "failed=0" in proc.stdout and "hugepages=4" in proc.stdout
    assert (grub.read_text(), hosts.read_text()) == before  # check mode: nothing written


def test_the_converge_digest_follows_the_collection_that_runs(installed_collection: Path, tmp_path: Path) -> None:
    """The fast path's code digest read the roles of the collection beside the rdmaforge package (here the
    checkout's), not those of the collection Ansible ran: with a collection installed by ansible-galaxy and then
    changed (upgraded, patched), a node recorded in sync would have skipped the changed roles."""
    copy = tmp_path / "collections"
    shutil.copytree(installed_collection, copy, symlinks=True)
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"cluster": {"hosts": {"node1": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))  # fmt: skip
    (tmp_path / "digest.yml").write_text(yaml.safe_dump([{
        "name": "The code digest", "hosts": "cluster", "gather_facts": False,
        "tasks": [{"name": "Print it", "ansible.builtin.debug": {
            "msg": "DIGEST {{ (hostvars | rdmaforge.cluster.rdmaforge_converge_digests(['node1'])).nodes.node1 }}"}}],
    }]))  # fmt: skip

    def node_digest() -> str:
        proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "inventory.yml", "digest.yml"], cwd=tmp_path,
                              env=collection_env(copy), capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return re.findall(r"DIGEST ([0-9a-f]{64})", proc.stdout)[0]

    before = node_digest()
    role = collection.collection_dir(copy) / "roles" / "cluster_hosts" / "tasks" / "main.yml"
    role.write_text(role.read_text() + "\n- name: A task the upgrade added\n  ansible.builtin.debug:\n    msg: new\n")
    assert node_digest() != before
