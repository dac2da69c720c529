"""Issue 15 on the lab: rdmaforge installed the ways a user outside this repository installs it, driving real nodes.

- The wheel, in a fresh venv outside the checkout (tests/installed.py), runs ``rdmaforge provision`` on the lab from
  a working directory of its own: the playbooks and roles it runs are the wheel's, its artifacts land in that
  directory, and the converged lab stays unchanged.
- The rdmaforge.cluster collection, built and installed into a temporary path, is used by FQCN from a playbook in
  an empty directory, in check mode against a lab node: the module and the role run there and write nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import LabHandle
from installed import BIN, WheelVenv, collection_env, run

pytestmark = pytest.mark.lab


def test_the_wheel_provisions_the_lab_from_outside_the_checkout(
    converged: LabHandle, wheel_venv: WheelVenv, tmp_path: Path
) -> None:
    proc = run([str(wheel_venv.bindir / "rdmaforge"), "provision", "-i", str(converged.inventory)], tmp_path,
               wheel_venv.env, timeout=1800)  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    run_dir = Path(re.findall(r"; artifacts: (\S+)$", output, re.M)[-1])
    assert run_dir.resolve().is_relative_to(tmp_path.resolve())  # the user's working directory, not the checkout
    recap = json.loads((run_dir / "recap.json").read_text())
    assert set(recap["hosts"]) >= set(converged.nodes)
    assert all(counts["changed"] == 0 for counts in recap["hosts"].values()), output[-4000:]
    # Every task that ran came from the collection inside the wheel's venv.
    venv_root = str(wheel_venv.bindir.parent.resolve())
    task_files = set()
    for event_file in (run_dir / "ansible" / "job_events").glob("*.json"):
        path = json.loads(event_file.read_text()).get("event_data", {}).get("task_path", "")
        if path:
            task_files.add(path.rsplit(":", 1)[0])
    assert task_files, "no task event names its file"
    assert all(path.startswith(venv_root) for path in task_files), sorted(task_files)[:5]


def test_the_installed_collection_checks_a_lab_node_by_fqcn(
    converged: LabHandle, installed_collection: Path, tmp_path: Path
) -> None:
    node = sorted(converged.nodes)[0]
    project = tmp_path / "project"
    project.mkdir()
    files = "sha256sum /etc/default/grub /etc/hosts"
    before = converged.ssh(node, files).stdout
    play = [
        {
            "name": "Use rdmaforge.cluster from outside the repository",
            "hosts": "cluster",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Ask for more huge pages on the node's GRUB defaults",
                    "rdmaforge.cluster.kernel_cmdline": {
                        "path": "/etc/default/grub",
                        "args": {"hugepages": "4242"},
                        "backend": "grub_defaults",
                    },
                    "register": "cmdline",
                },
                {
                    "name": "The module worked out the change on the node",
                    "ansible.builtin.assert": {
                        "that": ["cmdline is changed", "'hugepages=4242' in cmdline.cmdline_after"]
                    },
                },
                {
                    "name": "A role by FQCN (its filters by FQCN too)",
                    "ansible.builtin.include_role": {"name": "rdmaforge.cluster.cluster_hosts"},
                },
            ],
        }
    ]
    (project / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    proc = run([str(BIN / "ansible-playbook"), "-i", str(converged.inventory), "--limit", node, "play.yml", "--check",
                "--diff"], project, collection_env(installed_collection), timeout=600)  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert re.search(rf"^{node}\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0", output, re.M), output[-3000:]
    assert "hugepages=4242" in output  # the diff of what it would write
    assert "TASK [rdmaforge.cluster.cluster_hosts : " in output
    assert converged.ssh(node, files).stdout == before  # check mode: nothing written on the node
