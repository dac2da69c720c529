"""How MPI names the nodes: the hostfile's rule (mpi_launch_hostfile_by) and the benchmark's --host list."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from rdmaforge import mpi_hosts
from rdmaforge.paths import PROJECT_ROOT

# As the lab inventory gives them: an inventory name and its address.
HOSTVARS = {"node1": {"ansible_host": "198.18.0.11"}, "node2": {"ansible_host": "198.18.0.12"}, "gpu-a": {}}


def test_by_address_is_the_ansible_host_and_by_name_the_inventory_name() -> None:
    assert mpi_hosts.names(["node1", "gpu-a"], HOSTVARS) == {"node1": "198.18.0.11", "gpu-a": "gpu-a"}
    assert mpi_hosts.names(["node1", "gpu-a"], HOSTVARS, "name") == {"node1": "node1", "gpu-a": "gpu-a"}


def test_the_host_list_names_exactly_the_hosts_given_with_their_slots() -> None:
    # seed 000's hostfile gives each node its 8 GPUs as slots
    assert mpi_hosts.host_list(["node2", "node1"], HOSTVARS, [8, 8]) == "198.18.0.12:8,198.18.0.11:8"
    assert mpi_hosts.host_list(["node1"], HOSTVARS, [2], "name") == "node1:2"


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="mpi_launch_hostfile_by must be one of address, name, got 'ip'"):
        mpi_hosts.names(["node1"], HOSTVARS, "ip")
    with pytest.raises(ValueError, match="2 hosts but 1 slot counts"):
        mpi_hosts.host_list(["node1", "node2"], HOSTVARS, [8])


def hostfile_lines(hostvars: dict[str, dict[str, object]], current: str = "") -> list[str]:
    """The mpi_launch role's hostfile (roles/mpi_launch/templates/hostfile.j2) for ``hostvars``, as Ansible renders
    it with the role's defaults and vars: its non-empty lines after the two header lines."""
    from ansible.template import trust_as_template

    from rdmaforge.paths import PROJECT_ROOT
    from tests.unit.role_vars import role_vars

    template = (PROJECT_ROOT / "roles" / "mpi_launch" / "templates" / "hostfile.j2").read_text()
    hosts = sorted(hostvars)
    given = {"ansible_play_hosts_all": hosts, "ansible_play_hosts": hosts, "groups": {"cluster": hosts},
             "hostvars": hostvars, "ansible_managed": "managed",
             "mpi_launch_current": {"content": base64.b64encode(current.encode()).decode()} if current else {},
             }  # fmt: skip
    text = role_vars("mpi_launch", {}, **given).template(trust_as_template(template))
    return [line.strip() for line in str(text).splitlines() if line.strip()][2:]


def test_the_hostfile_names_an_unknown_gpu_count_and_takes_the_inventorys() -> None:
    """A node whose fact's count is null (preflight could not read it) got 1 slot as if it had no GPU: the
    inventory's rdmaforge_gpus_per_node stands for it, and without one the hostfile says the count is unknown. The
    lab's measured 0 (sysfs) is 1 slot, no comment."""
    hostvars: dict[str, dict[str, object]] = {
        "node1": {**HOSTVARS["node1"], "rdmaforge_node": {"gpu_count": 8, "gpu_source": "nvidia-smi"}},
        "node2": {**HOSTVARS["node2"], "rdmaforge_node": {"gpu_count": None, "gpu_source": "none"}},
        "node3": {"ansible_host": "198.18.0.13", "rdmaforge_node": {"gpu_count": None, "gpu_source": "none"},
                  "rdmaforge_gpus_per_node": 4},
        "node4": {"ansible_host": "198.18.0.14", "rdmaforge_node": {"gpu_count": 0, "gpu_source": "sysfs"}},
    }  # fmt: skip
    assert hostfile_lines(hostvars) == [
        "198.18.0.11 slots=8",
        "# 198.18.0.12: GPU count unknown (none from preflight, no rdmaforge_gpus_per_node): 1 slot(s)",
        "198.18.0.12 slots=1",
        "198.18.0.13 slots=4",
        "198.18.0.14 slots=1",
    ]


def test_the_hostfile_reads_the_count_as_every_role_does() -> None:
    """A fact of an earlier rdmaforge (0 with gpu_source none: never counted) was read as 0 GPUs, so the hostfile
    gave the node 1 slot without saying its count is unknown; a node without preflight's fact, or whose inventory
    count is no GPU count (0: preflight counts a node without GPUs itself), is unknown too."""
    hostvars: dict[str, dict[str, object]] = {
        "node1": {**HOSTVARS["node1"], "rdmaforge_node": {"gpu_count": 0, "gpu_source": "none"}},
        "node2": dict(HOSTVARS["node2"]),
        "node3": {"ansible_host": "198.18.0.13", "rdmaforge_node": {"gpu_count": None, "gpu_source": "none"},
                  "rdmaforge_gpus_per_node": 0},
        "node4": {"ansible_host": "198.18.0.14", "rdmaforge_node": {"gpu_count": 8, "gpu_source": "lspci"},
                  "rdmaforge_gpus_per_node": 4},  # a count read on the node wins over the inventory's
    }  # fmt: skip
    unknown = "GPU count unknown (none from preflight, no rdmaforge_gpus_per_node): 1 slot(s)"
    assert hostfile_lines(hostvars) == [
        f"# 198.18.0.11: {unknown}",
        "198.18.0.11 slots=1",
        f"# 198.18.0.12: {unknown}",
        "198.18.0.12 slots=1",
        f"# 198.18.0.13: {unknown}",
        "198.18.0.13 slots=1",
        "198.18.0.14 slots=8",
    ]


def test_the_launch_test_counts_each_nodes_answer_once_by_its_short_name() -> None:
    """mpirun --tag-output hostname, one process per node: a node whose kernel hostname is fully qualified printed
    it whole and was reported as 'did not start' (Ansible's hostname fact is the short name); and the answers were
    compared as a set, so one answer stood for two nodes of one hostname."""
    lines = ["[1,0]<stdout>:node1.cluster.example", "[1,1]<stdout>:node2"]
    assert mpi_hosts.missing_answers(lines, ["node1", "node2"]) == []
    assert mpi_hosts.missing_answers(lines[:1], ["node1", "node2"]) == ["node2"]
    # Two nodes named the same (cloned images): one answer no longer covers both.
    assert mpi_hosts.missing_answers(["[1,0]<stdout>:gpu", "[1,1]<stdout>:other"], ["gpu", "gpu"]) == ["gpu"]
    assert mpi_hosts.missing_answers(["[1,0]<stdout>:gpu", "[1,1]<stdout>:gpu"], ["gpu", "gpu"]) == []
    # Lines that are no answer (mpirun's own messages on stdout) answer for no node.
    assert mpi_hosts.missing_answers(["", "[1,0]<stdout>:"], ["node1"]) == ["node1"]


def test_the_launch_test_starts_one_process_per_node_of_the_hostfile() -> None:
    """-np was the play's host count while --hostfile lists group mpi_launch_group: a play with a host outside the
    group asked for more processes than the hostfile has nodes, and mpirun failed on slots, hiding the cause."""
    from tests.unit.role_vars import evaluate, role_vars

    hosts = {"node1": {"ansible_host": "198.18.0.11"}, "node2": {"ansible_host": "198.18.0.12"}, "builder": {}}
    templar = role_vars("mpi_launch", {}, groups={"cluster": ["node1", "node2"]}, mpi_launch_group="cluster",
                        ansible_play_hosts=["builder", "node1", "node2"], hostvars=hosts,
                        ansible_play_hosts_all=["builder", "node1", "node2"])  # fmt: skip
    assert evaluate(templar, "mpi_launch_all_here") is True
    assert evaluate(templar, "mpi_launch_tested") == ["node1", "node2"]
    # A node of the group lost earlier in the run: --host lists the nodes still here, and -np counts those.
    lost = role_vars("mpi_launch", {}, groups={"cluster": ["node1", "node2"]}, mpi_launch_group="cluster",
                     ansible_play_hosts=["node1"], hostvars=hosts, ansible_play_hosts_all=["node1", "node2"])
    assert evaluate(lost, "mpi_launch_all_here") is False
    assert evaluate(lost, "mpi_launch_tested") == ["node1"]


def test_in_check_mode_a_hostfile_the_run_would_change_is_not_the_one_launched_with() -> None:
    """Check mode writes no hostfile, and the launch test (check_mode: false) ran mpirun with the one on disk: a
    moved mpi_launch_hostfile failed check mode (no such file) where the run passes, and another
    mpi_launch_hostfile_by tested the old file. Where the run would change the hostfile, --host names the nodes."""
    from ansible.template import trust_as_template

    from tests.unit.role_vars import role_vars

    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "mpi_launch" / "tasks" / "main.yml").read_text())
    (launch,) = [t for t in tasks if t.get("name") == "Start one process on every node with mpirun"]
    hosts = {"node1": {"ansible_host": "198.18.0.11"}, "node2": {"ansible_host": "198.18.0.12"}}
    common = {"groups": {"cluster": ["node1", "node2"]}, "mpi_launch_group": "cluster", "hostvars": hosts,
              "ansible_play_hosts": ["node1", "node2"], "ansible_play_hosts_all": ["node1", "node2"]}  # fmt: skip

    def argv(check_mode: bool, changed: bool) -> list[str]:
        templar = role_vars("mpi_launch", {}, ansible_check_mode=check_mode,
                            mpi_launch_hostfile_written={"changed": changed}, **common)  # fmt: skip
        result: list[str] = templar.template(trust_as_template(launch["ansible.builtin.command"]["argv"]))
        return result

    assert "--hostfile" in argv(check_mode=False, changed=True)  # the run wrote it first
    assert "--hostfile" in argv(check_mode=True, changed=False)  # as it is on disk, which is what the run keeps
    named = argv(check_mode=True, changed=True)
    assert "--hostfile" not in named and named[named.index("--host") + 1] == "198.18.0.11,198.18.0.12", named


def test_a_run_without_the_gpu_count_keeps_the_slots_the_hostfile_has() -> None:
    """remove_node.yml runs mpi_launch without preflight's fact: every remaining node went from seed 000's slots=8
    to 1 slot ('GPU count unknown') until the next provision changed it back (review round 15a). A node whose
    count this run does not know keeps its line; one the hostfile does not list yet is still named unknown."""
    hostvars: dict[str, dict[str, object]] = {"node1": dict(HOSTVARS["node1"]), "node2": dict(HOSTVARS["node2"])}
    written = "# managed\n# header\n198.18.0.11 slots=8\n198.18.0.99 slots=8\n"  # .99: the node removed
    assert hostfile_lines(hostvars, written) == [
        "198.18.0.11 slots=8",
        "# 198.18.0.12: GPU count unknown (none from preflight, no rdmaforge_gpus_per_node): 1 slot(s)",
        "198.18.0.12 slots=1",
    ]


def test_an_mpirun_that_never_ends_is_killed_at_mpi_launch_timeout_and_the_failure_says_so(tmp_path: Path) -> None:
    """Review round 30: the launch test's message for a kill at mpi_launch_timeout had no test. The task's own argv
    (templated as Ansible does) runs here with a test double for an mpirun whose daemons never call back (it sleeps),
    under the real timeout(1); the assert's condition and message are then judged on what that run returned."""
    import os
    import subprocess
    import time

    from ansible.template import trust_as_template

    from benchmarks.ansible_vars import trusted
    from tests.unit.role_vars import role_vars

    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "mpi_launch" / "tasks" / "main.yml").read_text())
    (launch,) = [t for t in tasks if t.get("name") == "Start one process on every node with mpirun"]
    (check,) = [t for t in tasks if t.get("name") == "Check that every node answered"]
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    mpirun = fake_bin / "mpirun"
    mpirun.write_text("#!/bin/sh\n# test double: an mpirun whose daemons never call back\nexec sleep 600\n")
    mpirun.chmod(0o755)
    hosts = {"node1": {"ansible_host": "198.18.0.11", "ansible_facts": {"hostname": "node1"}},
             "node2": {"ansible_host": "198.18.0.12", "ansible_facts": {"hostname": "node2"}}}  # fmt: skip
    common = {"groups": {"cluster": ["node1", "node2"]}, "mpi_launch_group": "cluster", "hostvars": hosts,
              "ansible_play_hosts": ["node1", "node2"], "ansible_play_hosts_all": ["node1", "node2"],
              "ansible_check_mode": False, "mpi_launch_hostfile_written": {"changed": False},
              "mpi_launch_timeout": 5}  # fmt: skip  # the least preflight allows
    argv = role_vars("mpi_launch", {}, **common).template(trust_as_template(launch["ansible.builtin.command"]["argv"]))
    assert argv[:3] == ["timeout", "--kill-after=10", "5"] and "mpirun" in argv, argv
    started = time.monotonic()
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"})  # fmt: skip
    assert ran.returncode == 124 and time.monotonic() - started < 30, ran
    smoke = {"rc": ran.returncode, "stdout_lines": ran.stdout.splitlines(), "stderr": ran.stderr}
    templar = role_vars("mpi_launch", {}, mpi_launch_smoke=smoke, **common, **trusted(check["vars"]))
    conditions = check["ansible.builtin.assert"]["that"]
    held = [templar.template(trust_as_template("{{ " + condition + " }}")) for condition in conditions]
    assert held == [False, False], held  # no rc 0, and neither node answered
    message = " ".join(str(templar.template(trust_as_template(check["ansible.builtin.assert"]["fail_msg"]))).split())
    assert message.startswith("mpirun across 2 nodes did not start on: node1, node2."), message
    assert "mpirun did not end within mpi_launch_timeout (5 s) and was killed." in message, message
