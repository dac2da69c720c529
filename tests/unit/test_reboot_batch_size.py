"""playbooks/hugepages.yml run on its own (README: `-e rdmaforge_reboot_serial=10%`) checks the batch size before
the first play changes any kernel argument: Ansible's serial reads 0 as one batch of every host, so a "rolling"
reboot would have rebooted the whole cluster at once. Run for real against this machine (connection local), with
huge pages off: the check stops the run before the role, and nothing is changed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import LOCAL_NODE, recap, run_playbook

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}


def cluster_inventory(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {"localhost": dict(LOCAL_NODE)}}}}}))
    return path


@pytest.mark.parametrize(("value", "shown"), [("0", '"0"'), ("-1", '"-1"'), ("all", '"all"'), ("150%", '"150%"')])
def test_a_batch_size_serial_would_misread_stops_before_any_change(tmp_path: Path, value: str, shown: str) -> None:
    inventory = cluster_inventory(tmp_path / "hosts.yml")
    proc = run_playbook("hugepages.yml", "-e", f"rdmaforge_reboot_serial={value}", "-e", "hugepages_enabled=false",
                        inventory=inventory, env=ENV, timeout=300)  # fmt: skip
    assert proc.returncode != 0, proc.stdout[-3000:]
    said = " ".join(proc.stdout.split())
    assert (f"rdmaforge_reboot_serial={shown}: allowed: a whole number of nodes per batch, at least 1 (e.g. 2), or a "
            "percentage of the cluster from 1% to 100% (e.g. 25%)") in said, said[-3000:]  # fmt: skip
    assert recap(proc.stdout)["localhost"]["changed"] == 0


def test_a_share_of_the_cluster_goes_on(tmp_path: Path) -> None:
    inventory = cluster_inventory(tmp_path / "hosts.yml")
    proc = run_playbook("hugepages.yml", "-e", "rdmaforge_reboot_serial=10%", "-e", "hugepages_enabled=false",
                        "--check", inventory=inventory, env=ENV, timeout=300)  # fmt: skip
    assert "rdmaforge_reboot_serial=" not in proc.stdout
    assert recap(proc.stdout)["localhost"]["failed"] == 0, proc.stdout[-3000:]


@pytest.mark.parametrize("value", [1, "2", "25%", "100%"])
def test_a_batch_size_travels_to_the_rolling_play_in_a_group_name(value: object) -> None:
    """A play's serial reads -e only; the first play puts the batch size in a group's name (group_by), the rolling
    play's serial reads it back from groups (a group name holds no '%'). tests/unit/test_nccl_rollout_split.py runs
    the rollback this way with the batch size in the inventory."""
    from rdmaforge import batch_size

    name = batch_size.group_name(value, "rdmaforge_reboot_serial")
    assert "%" not in name
    groups = ["all", "ungrouped", "cluster", name, batch_size.group_name(3, "rdmaforge_upgrade_serial")]
    assert batch_size.from_groups(groups, "rdmaforge_reboot_serial") == str(value)
    assert batch_size.from_groups(["all", "cluster"], "rdmaforge_reboot_serial") == "1"  # the first play had no host
