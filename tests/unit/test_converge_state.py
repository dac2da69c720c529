"""The fast no-op path: the ledger (what tasks manage), the digest (what decides the desired state) and the
converge_state module (record, check, drift), the module run for real through ``ansible localhost``.

Task results below are shaped like the ones ansible-core 2.19 hands to callbacks (checked against the job
events of a lab converge: ``invocation.module_args`` carries the templated arguments, ``cmd`` the argv).
"""

from __future__ import annotations

import configparser
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import inventory_checks as checks
from rdmaforge.converge import digest, ledger
from rdmaforge.inventory_checks import NodeInput
from rdmaforge.parsers import converge_resources, packages
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import PY38, Adhoc, run_module


def result(action_args: dict, **extra) -> dict:
    return {"changed": False, "invocation": {"module_args": action_args}, **extra}


def test_the_ledger_keeps_what_each_kind_of_task_manages_or_reads() -> None:
    entry = ledger.Resources()
    ledger.add_task_result(entry, "hosts", "ansible.builtin.blockinfile", result({"path": "/etc/hosts"}))
    ledger.add_task_result(entry, "conf", "ansible.builtin.template", result({}, dest="/etc/nccl.conf"))
    ledger.add_task_result(entry, "ld", "rdmaforge.cluster.text_file", result({"dest": "/etc/ld.so.conf.d/n.conf"}))
    ledger.add_task_result(entry, "pkgs", "ansible.builtin.apt", result({"name": ["rdma-core", "perftest=4.5"]}))
    ledger.add_task_result(entry, "svc", "ansible.builtin.systemd_service", result({"name": "systemd-networkd"}))
    ledger.add_task_result(
        entry, "rules", "ansible.builtin.command", result({"argv": ["ip", "rule"]}, cmd=["ip", "rule"]), [False]
    )
    ledger.add_task_result(entry, "grub", "kernel_cmdline", result({"path": "/etc/default/grub", "dropin": None}))
    ledger.add_task_result(entry, "tools", "ansible.builtin.find", result({"paths": ["/usr/bin"]}, files=[]))
    ledger.add_task_result(entry, "facts", "ansible.builtin.set_fact", result({}))
    # The benchmark role's pip install into its venv: one venv to watch, read by the check itself.
    venv = "/opt/rdmaforge/e2e-venv"
    ledger.add_task_result(entry, "pip", "ansible.builtin.pip", result({"virtualenv": venv + "/", "requirements": "r"}))
    out = entry.as_dict()
    assert out["venvs"] == [venv]
    assert out["paths"] == ["/etc/default/grub", "/etc/hosts", "/etc/ld.so.conf.d/n.conf", "/etc/nccl.conf"]
    assert out["packages"] == {"apt": ["perftest=4.5", "rdma-core"]}
    assert out["services"] == ["systemd-networkd"]
    assert out["commands"] == [["ip", "rule"]]
    assert out["listings"] == ["/usr/bin"]
    assert out["unverifiable"] == []


def test_a_package_query_is_watched_as_the_packages_it_reads() -> None:
    """os_packages asks dpkg/rpm which packages are installed and runs apt only when one is missing: on a converged
    node the apt task is skipped, so the packages must come from the query, named as packages in a drift report
    ('package ibverbs-utils: ... now "absent"') rather than as a command whose output changed."""
    entry = ledger.Resources()
    for manager in ("apt", "dnf"):
        argv = packages.query_argv(manager, ["rdma-core", "ibverbs-utils=44.0-2"])
        ledger.add_task_result(entry, "query", "ansible.builtin.command", result({"argv": argv}, cmd=argv), [False])
    other = ["dpkg-query", "-W", "rdma-core"]  # not the query os_packages runs: a command like any other
    ledger.add_task_result(entry, "other", "ansible.builtin.command", result({"argv": other}, cmd=other), [False])
    out = entry.as_dict()
    assert out["packages"] == {"apt": ["ibverbs-utils", "rdma-core"], "dnf": ["ibverbs-utils", "rdma-core"]}
    assert out["commands"] == [other]


def test_a_find_with_patterns_is_watched_as_far_as_it_looks() -> None:
    """A find for a few names (preflight's GPU tools in /usr/bin) watches those names, not every binary a package
    adds: a tool installed beside them is no drift. Regexes, which the listing form does not carry, watch every name."""
    entry = ledger.Resources()
    tools = {"paths": ["/usr/bin", "/usr/sbin"], "patterns": ["nvidia-smi", "lspci"], "recurse": False, "depth": None}
    ledger.add_task_result(entry, "tools", "ansible.builtin.find", result(dict(tools, use_regex=False), files=[]))
    boot = {"paths": ["/boot"], "patterns": ["grub", "grub.cfg"], "recurse": True, "depth": 4, "use_regex": False}
    ledger.add_task_result(entry, "boot", "ansible.builtin.find", result(boot, files=[]))
    regex = {"paths": ["/etc/netplan"], "patterns": [r".*\.ya?ml$"], "recurse": False, "use_regex": True}
    ledger.add_task_result(entry, "netplan", "ansible.builtin.find", result(regex, files=[]))
    assert entry.as_dict()["listings"] == [
        "/boot matching grub,grub.cfg to depth 4",
        "/etc/netplan",
        "/usr/bin matching nvidia-smi,lspci",
        "/usr/sbin matching nvidia-smi,lspci",
    ]


def test_the_node_probe_is_recorded_as_the_find_and_commands_it_gathered() -> None:
    """preflight read the GPU tools with a find and read-only command tasks, and the free space with a df it declared
    no state; the node_probe module reads them all in one run. Its record watches what theirs watched."""
    nvidia_smi = ["/usr/bin/nvidia-smi", "-L"]
    caps = ["/usr/bin/nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]
    df = ["/usr/bin/df", "-P", "-k", "/opt", "/var/cache"]
    tasks = ledger.Resources()
    find = {"paths": ["/usr/bin", "/usr/sbin"], "patterns": ["nvidia-smi", "lspci"], "file_type": "any"}
    ledger.add_task_result(tasks, "Look for the GPU tools", "ansible.builtin.find",
                           result(find, files=[{"path": "/usr/bin/nvidia-smi"}]))  # fmt: skip
    for argv in (nvidia_smi, caps):
        ledger.add_task_result(tasks, "GPUs", "ansible.builtin.command", result({"argv": argv}, cmd=argv), [False])
    ledger.add_task_result(tasks, "lspci", "ansible.builtin.command", {"skipped": True}, [False])
    ledger.add_task_result(tasks, "df", "ansible.builtin.command", result({"argv": df}, cmd=df), [False], observe=False)
    probe = ledger.Resources()
    args = {"tool_dirs": ["/usr/bin", "/usr/sbin"], "tool_names": ["nvidia-smi", "lspci"], "nic_exclude": ["lo"],
            "ip_path": None, "df_paths": df[3:], "sys_root": "/sys"}  # fmt: skip
    ran = {"rc": 0, "stdout": "", "stderr": ""}
    ledger.add_task_result(probe, "Read the GPUs, RDMA devices, NICs and rails", "rdmaforge.cluster.node_probe", result(
        args, tool_files=["/usr/bin/nvidia-smi"], nvidia_smi={"cmd": nvidia_smi, **ran},
        compute_caps={"cmd": caps, **ran}, lspci={"skipped": True, "msg": "nvidia-smi answered"}, df={"cmd": df, **ran},
        rdma={"devices": []}, nics={"nics": []}, topology={"gpus": []}))  # fmt: skip
    assert probe.as_dict() == tasks.as_dict()
    assert probe.as_dict()["commands"] == [nvidia_smi, caps]  # free space moves: checked, never recorded
    assert probe.as_dict()["listings"] == ["/usr/bin matching nvidia-smi,lspci", "/usr/sbin matching nvidia-smi,lspci"]
    assert probe.as_dict()["unverifiable"] == []


@pytest.mark.parametrize(("recurse", "depth"), [(False, None), (True, 2), (True, None)])
def test_a_listing_with_patterns_sees_what_the_find_module_finds(tmp_path: Path, recurse: bool, depth: int | None):
    """The names a listing entry watches are the ones ansible-core's own find module returns for the same task (run
    here for real), at every depth: so the record notices every change the task would see."""
    top = tmp_path / "boot"
    for name in ("grub", "grub.cfg", ".grub", "vmlinuz", "d1/grub.cfg", "d1/other", "d1/d2/grub", "d1/d2/d3/grub.cfg"):
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text("")
    (top / "d1" / "grub").mkdir()  # a directory that matches
    args: dict[str, Any] = {"paths": [str(top)], "patterns": ["grub", "grub.cfg"], "file_type": "any", "hidden": True,
                            "recurse": recurse}  # fmt: skip
    if depth is not None:
        args["depth"] = depth
    found = run_module("ansible.builtin.find", args)
    assert found.rc == 0, found.stderr
    want = sorted(os.path.relpath(f["path"], top) for f in found.result["files"])
    assert "grub.cfg" in want and "vmlinuz" not in want
    entry = converge_resources.listing_entry(str(top), args["patterns"], depth if recurse else 1)
    assert converge_resources.observe_listing(entry) == want


def test_a_listing_with_patterns_drifts_only_for_a_name_it_matches(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "lspci").write_text("")
    entry = converge_resources.listing_entry(str(tools), ["nvidia-smi", "lspci"])
    python = PY38 if PY38.exists() else None  # the module's own code on the oldest Python it supports, when here
    recorded, state = record(tmp_path, {"listings": [entry]}, python=python)
    assert recorded.rc == 0, recorded.stderr
    (tools / "iperf3").write_text("")  # another package's binary beside the tools
    assert reasons_apart_from_the_lab(check(state).result) == []
    (tools / "nvidia-smi").write_text("")  # the driver installed: preflight would now see a GPU tool
    reasons = check(state).result["reasons"]
    assert any(entry in reason and "nvidia-smi" in reason for reason in reasons), reasons


def test_loop_results_are_each_recorded_and_skipped_items_are_not() -> None:
    entry = ledger.Resources()
    items = [result({"path": "/etc/a"}), {"skipped": True}, result({"path": "/etc/b"})]
    ledger.add_task_result(entry, "files", "ansible.builtin.file", {"results": items})
    assert entry.as_dict()["paths"] == ["/etc/a", "/etc/b"]


@pytest.mark.parametrize(
    ("action", "args", "changed_when"),
    [
        ("community.general.modprobe", {"name": "rdma_ucm"}, None),  # a module the ledger does not know
        ("ansible.builtin.shell", {"_raw_params": "ip rule", "_uses_shell": True}, [False]),
        ("ansible.builtin.pip", {"name": ["torch"]}, None),  # no virtualenv: the system's pip
        ("ansible.builtin.script", {"cmd": "probe.sh"}, [False]),  # a controller file: not re-runnable
    ],
)
def test_what_the_ledger_cannot_check_makes_the_record_unverifiable(action, args, changed_when) -> None:
    entry = ledger.Resources()
    ledger.add_task_result(entry, "the task", action, result(args), changed_when)
    assert entry.unverifiable and entry.unverifiable[0].startswith("the task")


def test_a_command_that_changes_something_is_an_effect_and_creates_is_watched() -> None:
    entry = ledger.Resources()
    ledger.add_task_result(entry, "ldconfig", "ansible.builtin.command", result({"argv": ["ldconfig"]}), [True])
    stop = result({"cmd": "stop_leftover_build.sh /var/tmp/b"})
    ledger.add_task_result(entry, "stop", "ansible.builtin.script", stop, ["out is search('stopped:')"])
    ledger.add_task_result(
        entry, "build", "ansible.builtin.command", result({"argv": ["make"], "creates": "/opt/x/lib"}), None
    )
    out = entry.as_dict()
    assert out["effects"] == ["ldconfig", "stop"]
    assert out["paths"] == ["/opt/x/lib"]
    assert out["commands"] == []


def test_every_module_the_roles_use_is_known_to_the_ledger() -> None:
    """A new module in a role must get a drift check (or be declared stateless), else no run is ever fast."""
    import yaml

    known = ledger.NO_STATE | ledger.FILE_DEST | ledger.FILE_PATH | {
        "slurp", "find", "unarchive", "apt", "dnf", "yum", "systemd_service", "systemd", "service",
        "yum_repository", "rpm_key", "getent", "git", "pip", "kernel_cmdline", "nccl_net_api",
        "command", "shell", "script",
        "include_role", "import_role", "import_playbook",
    }  # fmt: skip
    # Used by pairwise.yml / bench.yml only, never recorded (tempfile: the benchmark's private -J directory).
    not_in_site = {"pairwise_iperf", "raw", "tempfile"}
    used: set[str] = set()

    def walk(node):
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in ("block", "rescue", "always", "tasks", "pre_tasks", "handlers"):
                    walk(value)
                elif key.startswith("ansible.builtin.") or key in {
                    p.stem for p in (PROJECT_ROOT / "library").glob("*.py")
                }:
                    used.add(ledger.short_action(key))

    for path in list((PROJECT_ROOT / "roles").glob("*/tasks/*.yml")) + list(
        (PROJECT_ROOT / "roles").glob("*/handlers/*.yml")
    ):
        walk(yaml.safe_load(path.read_text()))
    assert used - known - not_in_site == set()


def cluster_digest(hostvars: dict[str, Any], hosts: list[str]) -> str:
    return str(digest.digests(hostvars, hosts)["cluster"])


def node_digests(hostvars: dict[str, Any], hosts: list[str]) -> dict[str, str]:
    return dict(digest.digests(hostvars, hosts)["nodes"])


def test_the_digest_covers_input_variables_and_ignores_runtime_facts() -> None:
    base = {"node1": {"ansible_host": "198.18.0.11", "nccl_build_version": "2.29.7", "group_names": ["cluster"]}}
    # Facts gathered, set by set_fact, or published by rdmaforge's modules (kept in the fact cache) are not inputs:
    # with them in, a warm and a cold fact cache would give two digests.
    same = {
        "node1": dict(
            base["node1"], rdmaforge_node={"gpus": 8}, ansible_facts={"x": 1}, nccl_env_in_force={},
            rdma_devices=[{"name": "erdma_0"}], rdmaforge_topology={"rails": []},
        )
    }  # fmt: skip
    other = {"node1": dict(base["node1"], nccl_build_version="2.16.5")}
    moved = {"node1": dict(base["node1"], ansible_host="198.18.0.21")}
    regrouped = {"node1": dict(base["node1"], group_names=["cluster", "builders"])}
    first = cluster_digest(base, ["node1"])
    assert cluster_digest(same, ["node1"]) == first  # facts and set_fact results are not inputs
    assert {"rdmaforge_node", "nccl_env_in_force", "rdma_devices", "rdmaforge_topology"} <= digest.runtime_names()
    for changed in (other, moved, regrouped):
        assert cluster_digest(changed, ["node1"]) != first
    two = {**base, "node2": dict(base["node1"], ansible_host="198.18.0.12")}
    assert cluster_digest(two, ["node1", "node2"]) != first  # a node added changes the cluster digest


def test_a_node_added_or_another_hosts_variable_leaves_a_nodes_own_digest_as_it_was() -> None:
    """The node digest covers only the host's own inputs: adding node3 (or moving node2) must not make node1 converge
    in full, while the cluster digest, which the cluster-wide plays follow, changes."""
    node = {"ansible_host": "198.18.0.11", "nccl_build_version": "2.29.7", "group_names": ["cluster"]}
    two = {"node1": node, "node2": dict(node, ansible_host="198.18.0.12")}
    three = {**two, "node3": dict(node, ansible_host="198.18.0.13")}
    moved = {**two, "node2": dict(two["node2"], ansible_host="198.18.0.22")}
    before = node_digests(two, ["node1", "node2"])
    assert set(before) == {"node1", "node2"} and before["node1"] != before["node2"]
    grown = node_digests(three, ["node1", "node2", "node3"])
    assert grown["node1"] == before["node1"] and grown["node2"] == before["node2"]
    assert node_digests(moved, ["node1", "node2"])["node1"] == before["node1"]
    assert node_digests(moved, ["node1", "node2"])["node2"] != before["node2"]
    cluster = cluster_digest(two, ["node1", "node2"])
    for other, hosts in ((three, ["node1", "node2", "node3"]), (moved, ["node1", "node2"]), (two, ["node1"])):
        assert cluster_digest(other, hosts) != cluster
    # A variable every node has (group_vars, -e) changes every node's own digest.
    upgraded = {h: dict(v, nccl_build_version="2.16.5") for h, v in two.items()}
    after = node_digests(upgraded, ["node1", "node2"])
    assert all(after[h] != before[h] for h in before)


def test_turning_the_fast_path_off_is_not_a_change_of_desired_state() -> None:
    base = {"n": {"ansible_host": "a"}}
    off = {"n": {"ansible_host": "a", "converge_state_fast_path": False, "preflight_fast_path_gate": True}}
    assert cluster_digest(base, ["n"]) == cluster_digest(off, ["n"])


def test_controller_cache_files_are_kept_file_by_file_outside_the_digests(tmp_path: Path) -> None:
    """A new build in a controller cache (nccl-tests, a second NCCL build for a canary) is no change of any node's
    desired state: the digests stay, and the files map gains the file. A cache file rewritten changes only its own
    entry; a change of the code or of a node's inputs still changes the digests."""
    cache = tmp_path / "ssh-trust"
    cache.mkdir()
    (cache / "id_cluster").write_text("key one")
    hv = {"n": {"ansible_host": "a", "ssh_trust_controller_cache": str(cache)}}
    first = digest.digests(hv, ["n"])
    assert set(first["files"]) >= {f"{cache}/id_cluster"} and str(cache) in first["caches"]
    (cache / "nccl-tests-2.13.11.tar.gz").write_bytes(b"another build")
    added = digest.digests(hv, ["n"])
    assert (added["cluster"], added["nodes"]) == (first["cluster"], first["nodes"])
    assert set(added["files"]) - set(first["files"]) == {f"{cache}/nccl-tests-2.13.11.tar.gz"}
    assert added["files"][f"{cache}/id_cluster"] == first["files"][f"{cache}/id_cluster"]
    (cache / "id_cluster").write_text("key two")
    rewritten = digest.digests(hv, ["n"])
    assert (rewritten["cluster"], rewritten["nodes"]) == (first["cluster"], first["nodes"])
    assert rewritten["files"][f"{cache}/id_cluster"] != first["files"][f"{cache}/id_cluster"]
    # The node's inputs changed: both digests change, whatever the caches hold.
    moved = digest.digests({"n": dict(hv["n"], ansible_host="b")}, ["n"])
    assert moved["cluster"] != first["cluster"] and moved["nodes"]["n"] != first["nodes"]["n"]


def test_run_locks_and_module_payloads_are_not_desired_state(tmp_path: Path) -> None:
    (tmp_path / "ssh-trust").mkdir()
    (tmp_path / "ssh-trust" / "id_cluster").write_text("key")
    for unwatched in ("locks/inventory-abc.lock", "ansiballz/0123abcd/ansible.modules.command-ZIP_DEFLATED-none"):
        (tmp_path / unwatched).parent.mkdir(parents=True)
        (tmp_path / unwatched).write_text("changes with every run")
    assert list(digest.controller_files(str(tmp_path))) == ["ssh-trust/id_cluster"]


def test_the_module_cache_that_ansible_cfg_names_is_outside_the_digest() -> None:
    """Each run adds payloads to the module cache: inside a watched controller cache, every run would see the
    desired state changed and converge in full (found by a make test run whose fast path never held)."""
    config = configparser.ConfigParser()
    config.read(PROJECT_ROOT / "ansible.cfg")
    module_cache = Path(config["callback_module_cache"]["dir"]).expanduser()
    cache = Path(digest.CONTROLLER_CACHE).expanduser()
    if module_cache.is_relative_to(cache):
        assert module_cache.relative_to(cache).parts[0] in digest.UNWATCHED


def test_the_same_code_has_one_digest_in_a_checkout_and_in_the_collection_installed_from_it(tmp_path: Path) -> None:
    """A node converged by the wheel's `rdmaforge provision` (the installed collection) and then checked by this
    checkout's ansible-playbook is in sync when the code is the same: the digest names files by their collection
    path, not by where they lie."""
    from rdmaforge import collection

    installed = collection.assemble(tmp_path / "ansible_collections" / "rdmaforge" / "cluster")
    (installed / "plugins" / "filter" / "__pycache__").mkdir(exist_ok=True)
    (installed / "plugins" / "filter" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    (installed / "MANIFEST.json").write_text("{}")  # what ansible-galaxy adds: metadata, not code
    assert set(digest.code_files(installed)) == set(digest.code_files(PROJECT_ROOT))
    assert digest.code_digest(installed) == digest.code_digest(PROJECT_ROOT)
    # ... and a change to a role is a change of the code wherever it lies.
    task = installed / "roles" / "cluster_hosts" / "tasks" / "main.yml"
    task.write_text(task.read_text() + "\n# edited\n")
    digest.code_digest.cache_clear()
    assert digest.code_digest(installed) != digest.code_digest(PROJECT_ROOT)


# --- the controller files the record keeps: the start's, with those the run added ------------------------------


@pytest.fixture
def run_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Two nodes and their controller caches, all under tmp_path: the default cache (the module's CONTROLLER_CACHE,
    never the user's) holding the verified erdma key, and an SSH trust cache the inventory names that the first
    converge creates."""
    default = tmp_path / "controller-cache"
    (default / "keys").mkdir(parents=True)
    (default / "keys" / "erdma.asc").write_text("armored key")
    monkeypatch.setattr(digest, "CONTROLLER_CACHE", default)
    ssh = tmp_path / "ssh-trust"
    node = {"ansible_host": "198.18.0.11", "ssh_trust_controller_cache": str(ssh), "group_names": ["cluster"]}
    hostvars = {"node1": node, "node2": dict(node, ansible_host="198.18.0.12")}
    return {"default": default, "ssh": ssh, "hostvars": hostvars, "hosts": ["node1", "node2"]}


def recorded(start: dict[str, Any]) -> dict[str, str]:
    """What record.yml records, through the filter, from the start's digests as a fact holds them (JSON)."""
    from tests.unit.test_filter_docs import FILTERS

    return dict(FILTERS["rdmaforge_converge_recorded_files"](json.loads(json.dumps(start))))


def test_files_the_run_added_to_the_controller_caches_are_in_the_files_it_records(run_caches: dict) -> None:
    """The first converge fetches an NCCL build and creates the cluster SSH key: the record keeps them as they are
    at the end, so the next run's start sees what was recorded (in sync), with the same digests."""
    hostvars, hosts = run_caches["hostvars"], run_caches["hosts"]
    default, ssh = run_caches["default"], run_caches["ssh"]
    start = digest.digests(hostvars, hosts)
    assert list(start["files"]) == [f"{default}/keys/erdma.asc"]
    (default / "builds").mkdir()
    (default / "builds" / "nccl-2.29.7.tar.gz").write_bytes(b"build")
    ssh.mkdir()  # absent at the start
    (ssh / "id_cluster").write_text("private key")
    (default / "locks").mkdir()
    (default / "locks" / "run.lock").write_text("not desired state")
    got = recorded(start)
    next_start = digest.digests(hostvars, hosts)
    assert (next_start["cluster"], next_start["nodes"]) == (start["cluster"], start["nodes"])
    assert got == next_start["files"]
    assert sorted(got) == [f"{default}/builds/nccl-2.29.7.tar.gz", f"{default}/keys/erdma.asc", f"{ssh}/id_cluster"]
    assert recorded(next_start) == next_start["files"]  # nothing added: the start's


@pytest.mark.parametrize("change", ["changed", "vanished", "cache-vanished"])
def test_a_controller_file_the_run_changed_or_removed_is_recorded_as_the_start_saw_it(
    run_caches: dict, change: str
) -> None:
    """A file that was there at the start and differs at the end (rewritten, removed, its directory gone) was not
    what the nodes converged against: the start's observation of it is recorded, so the next run sees it otherwise
    and converges in full; a file added beside it is still taken in."""
    hostvars, hosts = run_caches["hostvars"], run_caches["hosts"]
    default, ssh = run_caches["default"], run_caches["ssh"]
    ssh.mkdir()
    (ssh / "id_cluster").write_text("private key")
    start = digest.digests(hostvars, hosts)
    (default / "builds").mkdir()
    (default / "builds" / "nccl-2.29.7.tar.gz").write_bytes(b"build")  # an addition beside it
    moved = {"changed": f"{default}/keys/erdma.asc", "vanished": f"{default}/keys/erdma.asc"}.get(change)
    if change == "changed":
        (default / "keys" / "erdma.asc").write_text("another key")
    elif change == "vanished":
        (default / "keys" / "erdma.asc").unlink()
    else:
        shutil.rmtree(ssh)
        moved = f"{ssh}/id_cluster"
    got = recorded(start)
    assert got[moved] == start["files"][moved]
    assert got[f"{default}/builds/nccl-2.29.7.tar.gz"] == digest.digests(hostvars, hosts)["files"][
        f"{default}/builds/nccl-2.29.7.tar.gz"
    ]
    assert digest.digests(hostvars, hosts)["files"].get(moved) != got[moved]  # so the next run converges in full


def test_the_record_takes_its_files_from_one_read_per_run_and_a_node_in_sync_keeps_the_start_ones() -> None:
    """record.yml reads the controller caches once (run_once), not once per node; a node in sync skipped its own
    roles, so it did not converge against the files the run added and keeps the start's files. The digests are the
    start's for every node: nothing a run adds to the caches changes them."""
    import yaml

    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "converge_state" / "tasks" / "record.yml").read_text())
    block = [task for task in tasks if "block" in task]
    assert len(block) == 1 and "converge_state_digests is defined" in block[0]["when"]
    work_out, record_task = block[0]["block"]
    assert work_out["run_once"] is True
    expression = work_out["ansible.builtin.set_fact"]["converge_state_recorded_files"]
    assert "converge_state_digests | rdmaforge.cluster.rdmaforge_converge_recorded_files" in expression
    args = record_task["rdmaforge.cluster.converge_state"]
    assert "ternary(converge_state_digests.files, converge_state_recorded_files)" in args["controller_files"]
    assert "converge_state_in_sync" in args["controller_files"]
    assert args["digest"] == "{{ converge_state_digests.nodes[inventory_hostname] }}"
    assert args["cluster_digest"] == "{{ converge_state_digests.cluster }}"
    # The check is still one module call per node, which is given the files as the start sees them.
    check_tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "converge_state" / "tasks" / "check.yml").read_text())
    calls = [task for task in check_tasks if "rdmaforge.cluster.converge_state" in task]
    assert len(check_tasks) == 2 and len(calls) == 1
    assert calls[0]["rdmaforge.cluster.converge_state"]["controller_files"] == "{{ converge_state_digests.files }}"


# --- the module, for real -------------------------------------------------------------------------------


#: The controller files record() and check() pass by default: one file of each of two caches.
FILES = {"/cache/keys/erdma.asc": "a1", "/cache/builds/nccl-2.29.7.json": "b1"}


def record(tmp_path: Path, resources: dict, digest_value: str = "d1", python: Path | None = None, merge: bool = False,
           cluster: str = "c1", files: dict[str, str] | None = None):  # fmt: skip
    state = tmp_path / "state.json"
    args = {"state": "record", "path": str(state), "digest": digest_value, "resources": resources, "summary": {"a": 1},
            "cluster_digest": cluster, "controller_files": FILES if files is None else files}  # fmt: skip
    return run_module("converge_state", dict(args, merge=merge), python=python), state


def check(state: Path, digest_value: str = "d1", *extra: str, cluster: str = "c1", files: dict[str, str] | None = None):
    args = {"path": str(state), "digest": digest_value, "cluster_digest": cluster,
            "controller_files": FILES if files is None else files}  # fmt: skip
    return run_module("converge_state", args, *extra)


def make_managed(root: Path) -> dict:
    """What a converge manages, under ``root``: a file, a listing, a venv, a package and a command reading the file."""
    conf = root / "nccl.conf"
    conf.write_text("NCCL_DEBUG=INFO\n")
    conf.chmod(0o644)
    (root / "plugins").mkdir()
    # A venv as pip leaves one (site-packages with a distribution's metadata), read from its files by the module.
    dist = root / "venv" / "lib" / "python3.11" / "site-packages" / "aiacc_nccl_plugin-2.0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: aiacc-nccl-plugin\nVersion: 2.0.1\n\nText\n")
    return {
        "paths": [str(conf)],
        "listings": [str(root / "plugins")],
        "packages": {"apt": ["dpkg"]},
        "venvs": [str(root / "venv")],
        "commands": [["cat", str(conf)]],
    }


@pytest.fixture()
def managed(tmp_path: Path) -> dict:
    return make_managed(tmp_path)


#: This machine's own fingerprint parts that the lab changes while the unit tests run beside it (bridges, veth
#: pairs and their addresses come and go): a reason of their own, unrelated to what a test recorded.
LAB_VOLATILE = ("fingerprint links:", "fingerprint addresses:")


def reasons_apart_from_the_lab(result: dict) -> list[str]:
    return [reason for reason in result["reasons"] if not reason.startswith(LAB_VOLATILE)]


# Each module run costs seconds of CPU: the runs below are taken once per module (scope="module") and shared by the
# tests that only read them; a test that changes files or records works on its own copies.


@dataclasses.dataclass
class InSync:
    """A record of make_managed's resources, recorded again with nothing changed, then checked."""

    state: Path
    first: Adhoc
    first_record: dict[str, Any]  # the record file as the first run wrote it
    again: Adhoc
    checked: Adhoc
    ip_calls: list[str]  # the arguments of every `ip` the check ran (a real ip behind a wrapper that logs each call)


@pytest.fixture(scope="module")
def in_sync(tmp_path_factory: pytest.TempPathFactory) -> InSync:
    root = tmp_path_factory.mktemp("in-sync")
    managed = make_managed(root)
    first, state = record(root, managed)
    first_record = json.loads(state.read_text())
    # A second record of the same state is no change; tried again only while the lab beside moved this machine's
    # links or addresses in between (each try records afresh, so a real difference would fail every try).
    for _ in range(3):
        again, _ = record(root, managed)
        if again.result["changed"] is False:
            break
    real_ip = shutil.which("ip")
    assert real_ip, "iproute2's ip is needed on this machine"
    wrappers, log = root / "bin", root / "ip.log"
    wrappers.mkdir()
    (wrappers / "ip").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real_ip} "$@"\n')
    (wrappers / "ip").chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{wrappers}{os.pathsep}{os.environ['PATH']}")
        checked = check(state)
    return InSync(state, first, first_record, again, checked, log.read_text().splitlines())


@dataclasses.dataclass
class OwnDrift:
    """A record, then one drift of each kind a node's own resources can show (all at once), then one check."""

    root: Path
    files: dict[str, Path]  # the file whose content changed, the one whose mode changed, the one removed
    state: Path
    checked: Adhoc


@pytest.fixture(scope="module")
def own_drift(tmp_path_factory: pytest.TempPathFactory) -> OwnDrift:
    root = tmp_path_factory.mktemp("own-drift")
    managed = make_managed(root)
    files = {"content": Path(managed["paths"][0]), "mode": root / "mode.conf", "removed": root / "removed.conf",
             "large": root / "libnccl.so.2"}  # fmt: skip
    for path in (files["mode"], files["removed"]):
        path.write_text("NCCL_DEBUG=INFO\n")
        path.chmod(0o644)
    # Past the size the module hashes (8 MiB): a library, known by its size and times.
    files["large"].write_bytes(b"\0" * (9 << 20))
    files["large"].chmod(0o644)
    _, state = record(root, dict(managed, paths=sorted(str(path) for path in files.values())))
    # Written in place, same size, its mtime put back (cp -p, rsync -a, touch -r): review round 25a.
    before = files["large"].stat()
    with files["large"].open("r+b") as library:
        library.seek(4096)
        library.write(b"another build here")
    os.utime(files["large"], ns=(before.st_atime_ns, before.st_mtime_ns))
    files["content"].write_text("NCCL_DEBUG=WARN\n")
    files["mode"].chmod(0o600)
    files["removed"].unlink()
    (root / "plugins" / "libnccl-net.so").write_text("")
    # Another version of the plugin installed into its venv by hand.
    (metadata,) = (root / "venv").glob("lib/python*/site-packages/*.dist-info/METADATA")
    metadata.write_text(metadata.read_text().replace("2.0.1", "2.0.2"))
    data = json.loads(state.read_text())
    data["observations"]["packages"]["apt"]["dpkg"] = "0.0 installed"  # as if dpkg had been up/downgraded
    state.write_text(json.dumps(data))
    return OwnDrift(root, files, state, check(state))


@pytest.fixture(scope="module")
def command_drift(tmp_path_factory: pytest.TempPathFactory) -> Adhoc:
    """A record of one command (`cat` of a file), then the file's content changed, then a check."""
    root = tmp_path_factory.mktemp("command-drift")
    managed = make_managed(root)
    _, state = record(root, {"commands": managed["commands"]})
    Path(managed["paths"][0]).write_text("NCCL_DEBUG=TRACE\n")
    return check(state)


@pytest.fixture(scope="module")
def no_record(tmp_path_factory: pytest.TempPathFactory) -> Adhoc:
    """A check where no record was ever written, for cluster digest c2."""
    return check(tmp_path_factory.mktemp("no-record") / "none.json", cluster="c2")


def test_record_then_check_is_in_sync_and_a_second_record_changes_nothing(in_sync: InSync) -> None:
    assert in_sync.first.rc == 0 and in_sync.first.result["changed"] is True
    assert in_sync.first_record["observations"]["packages"]["apt"]["dpkg"].endswith("installed")
    assert in_sync.again.result["changed"] is False
    checked = in_sync.checked
    assert reasons_apart_from_the_lab(checked.result) == [], checked.result["reasons"]
    assert checked.result["summary"] == {"a": 1} and checked.result["changed"] is False


def test_every_kind_of_drift_is_found_and_named(tmp_path: Path, managed: dict, own_drift: OwnDrift) -> None:
    # The node's own files, listings, venvs and packages, drifted at once: each is named, by a reason of its own.
    checked = own_drift.checked.result
    assert checked["in_sync"] is False
    files, venv = own_drift.files, own_drift.root / "venv"
    expected = {  # the start of each one's reason, and words it must hold
        "content": (f"path {files['content']}: ", "now file (sha256"),
        "mode": (f"path {files['mode']}: ", "mode 0600"),
        "removed": (f"path {files['removed']}: ", "now absent"),
        "large": (f"path {files['large']}: ", "ctime_ns"),
        "listing": (f"listing {own_drift.root / 'plugins'}: ", "libnccl-net.so"),
        "venv": (f"venv {venv}: ", 'was ["aiacc-nccl-plugin==2.0.1"], now ["aiacc-nccl-plugin==2.0.2"]'),
    }
    for kind, (start, words) in expected.items():
        assert [r for r in checked["reasons"] if r.startswith(start) and words in r], (kind, checked["reasons"])
    # A node's own files, listings, venvs and commands are its own drift (all of them at once too: one that is not
    # would make the whole check's drift_local False); another desired state or record format is not. (Unless the
    # lab beside moved this machine's links: a fingerprint of its own.)
    if reasons_apart_from_the_lab(checked) == checked["reasons"]:
        assert checked["drift_local"] is True, checked
    else:
        assert checked["drift_local"] is False
    # Another desired state, then another record format: the record itself is out of date, for every node.
    _, state = record(tmp_path, managed)
    for drift, expected_words in (("digest", "desired state changed"), ("format", "format 99")):
        if drift == "format":
            data = json.loads(state.read_text())
            data["format"] = 99
            state.write_text(json.dumps(data))
        checked = check(state, "d2" if drift == "digest" else "d1").result
        assert checked["in_sync"] is False
        assert expected_words in " ".join(checked["reasons"]), (drift, checked)
        assert checked["drift_local"] is False, (drift, checked)


def test_a_controller_file_the_record_keeps_that_changed_or_is_gone_is_named_and_one_added_since_is_not(
    in_sync: InSync,
) -> None:
    """in_sync's record keeps FILES. A build added to a cache since (nccl-tests, a canary's NCCL build) is not one
    this node's converge used: still in sync. A kept file changed or gone is named, and is not the node's own drift
    (the node converges in full, and the cluster-wide plays with it)."""
    added = check(in_sync.state, files=dict(FILES, **{"/cache/builds/nccl-tests-2.13.11.json": "c1"})).result
    assert reasons_apart_from_the_lab(added) == [], added
    drifted = check(in_sync.state, files={"/cache/keys/erdma.asc": "a2"}).result
    assert drifted["in_sync"] is False and drifted["drift_local"] is False, drifted
    assert drifted["reasons"] == [
        "controller file /cache/builds/nccl-2.29.7.json is gone since the record",
        "controller file /cache/keys/erdma.asc changed since the record",
    ]


def test_the_fingerprint_reads_each_rdma_ports_rate_and_physical_state(tmp_path: Path) -> None:
    """Review round 25a: a port that trained down from 200 to 100 Gb/s, still ACTIVE, fails rdma_core's
    min_rate_gbps check in a full run; the fingerprint read only each port's state, so the fast path saw nothing.
    The kernel's sysfs files here are written as mlx5 shows them."""
    port = tmp_path / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "phys_state").write_text("5: LinkUp\n")
    code = (
        "import json, sys\n"
        "from ansible_collections.rdmaforge.cluster.plugins.modules import converge_state\n"
        "print(json.dumps(converge_state.rdma_ports(sys.argv[1])))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT / "build" / "collections"))

    def ports() -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                              check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(proc.stdout))

    readings = []
    for rate in ("200 Gb/sec (4X HDR)", "100 Gb/sec (2X HDR)"):
        (port / "rate").write_text(rate + "\n")
        readings.append(ports())
    assert readings[0] == {"mlx5_0": {"1": "4: ACTIVE | 5: LinkUp | 200 Gb/sec (4X HDR)"}}
    assert readings[0] != readings[1]



def test_the_fingerprint_watches_the_pci_trees_gpus() -> None:
    """Review round 25a: without the driver, nvidia-smi -L says nothing; the node probe counts GPUs by lspci or the
    PCI tree, and a GPU gone there was only the node's own drift (the other nodes' hostfiles kept its slots)."""
    code = (
        "import json\n"
        "from ansible_collections.rdmaforge.cluster.plugins.modules import converge_state\n"
        "converge_state.gpu_functions = lambda: ['0000:1b:00.0']\n"
        "print(json.dumps(converge_state.fingerprint(converge_state.NodeReading(10))['gpu_pci']))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT / "build" / "collections"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["0000:1b:00.0"]


def test_grubby_entries_are_compared_in_their_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review round 25a: a recorded command's lines were compared sorted; for grubby --info=ALL, the default entry
    losing its huge page arguments to another entry read the same. A test double for grubby (this machine has
    none) prints two entries, as RHEL's does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    grubby = bin_dir / "grubby"

    def entries(first: str, second: str) -> None:
        grubby.write_text("#!/bin/sh\ncat <<EOT\n"
                          f'index=0\nkernel="/boot/vmlinuz-5.14.0-427"\nargs="{first}"\n'
                          f'index=1\nkernel="/boot/vmlinuz-5.14.0-362"\nargs="{second}"\nEOT\n')  # fmt: skip
        grubby.chmod(0o755)

    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    entries("ro hugepagesz=1G hugepages=16", "ro")
    _, state = record(tmp_path, {"commands": [["grubby", "--info=ALL"]]})
    entries("ro", "ro hugepagesz=1G hugepages=16")
    reasons = reasons_apart_from_the_lab(check(state).result)
    assert reasons and reasons[0].startswith("command `grubby --info=ALL`"), reasons


def test_a_record_without_controller_files_is_never_in_sync(tmp_path: Path, in_sync: InSync) -> None:
    """A record of the format before controller_files (its digest covered the caches) or one that lacks them: the
    node converges in full once, and its next record keeps the files."""
    old = {k: v for k, v in in_sync.first_record.items() if k != "controller_files"}
    for fmt, words in ((1, "format 1 is not 3"), (2, "format 2 is not 3"), (3, "keeps no controller files")):
        state = tmp_path / f"format-{fmt}.json"
        state.write_text(json.dumps(dict(old, format=fmt)))
        checked = check(state).result
        assert checked["in_sync"] is False and checked["drift_local"] is False, checked
        assert any(words in reason for reason in checked["reasons"]), checked


def test_a_build_the_run_added_is_watched_from_its_record_on(run_caches: dict, tmp_path: Path) -> None:
    """Through the digests, the filter and the module: a build the converge added is recorded; a canary's build
    added after the record leaves the node in sync; the recorded build rebuilt makes it converge in full."""
    hostvars, hosts, default = run_caches["hostvars"], run_caches["hosts"], run_caches["default"]
    start = digest.digests(hostvars, hosts)
    build = default / "builds" / "nccl-2.29.7-sm90.tar.gz"
    build.parent.mkdir()
    build.write_bytes(b"the build the converge fetched")
    ran, state = record(tmp_path, {}, digest_value=start["nodes"]["node1"], files=recorded(start))
    assert ran.rc == 0, ran.stderr

    def check_now() -> dict[str, Any]:
        now = digest.digests(hostvars, hosts)
        return check(state, now["nodes"]["node1"], cluster="c1", files=now["files"]).result

    assert reasons_apart_from_the_lab(check_now()) == []
    (default / "builds" / "nccl-2.30.1-sm90.tar.gz").write_bytes(b"a canary's build")
    assert reasons_apart_from_the_lab(check_now()) == []
    build.write_bytes(b"rebuilt")
    assert check_now()["reasons"] == [f"controller file {build} changed since the record"]


def host_identity(key_dirs: list[Path] | None = None) -> dict[str, Any]:
    """The module's host_identity(), called in a process of its own (importing the collection's module here would
    leave a plain ``ansible_collections`` package in this process, hiding the collection from Ansible's loader for
    the tests after it), with its HOST_KEY_DIRS replaced by ``key_dirs`` when given."""
    from rdmaforge.collection import ensure_dev_tree

    code = (
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import ansible_collections.rdmaforge.cluster.plugins.modules.converge_state as m\n"
        "if len(sys.argv) > 2: m.HOST_KEY_DIRS = tuple(sys.argv[2:])\n"
        "print(json.dumps(m.host_identity(m.NodeReading(10))))\n"
    )
    argv = [sys.executable, "-c", code, str(ensure_dev_tree()), *(str(d) for d in key_dirs or [])]
    found: dict[str, Any] = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    return found


def test_the_check_reads_the_nodes_addresses_once(in_sync: InSync) -> None:
    """The fingerprint and host_identity share one ``ip -o addr show`` (in_sync's check ran a real ``ip`` behind a
    wrapper that logs each call): the check is on every node's path at every converge."""
    calls = in_sync.ip_calls
    assert calls.count("-o addr show") == 1 and not [c for c in calls if "addr" in c and c != "-o addr show"], calls
    result = in_sync.checked.result
    assert isinstance(result["host_identity"]["ipv4_addresses"], list), result  # what they are: the test below


def test_the_checks_host_identity_matches_what_ansibles_setup_gathers(tmp_path: Path) -> None:
    """The ssh_trust role writes a node left out of its play from the check's host_identity instead of a delegated
    setup: the addresses must be those of setup's all_ipv4_addresses (Ansible's own collector, run here for real),
    the keys each host key file's type and key, from the first directory holding any, as setup reads them."""
    for _ in range(3):  # the lab beside may add or remove a bridge's address between the two readings
        gathered = run_module("ansible.builtin.setup", {"gather_subset": ["!all", "!min", "network"]})
        facts = gathered.result["ansible_facts"]
        identity = host_identity()
        if set(identity["ipv4_addresses"]) == set(facts["ansible_all_ipv4_addresses"]):
            break
    assert identity["ipv4_addresses"] == sorted(facts["ansible_all_ipv4_addresses"]), (identity, facts)
    first, second = tmp_path / "first", tmp_path / "second"
    for directory, kinds in ((first, ["ecdsa"]), (second, ["ed25519", "rsa"])):
        directory.mkdir()
        for kind in kinds:
            subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(directory / f"ssh_host_{kind}_key")],
                           check=True)  # fmt: skip
    words = (first / "ssh_host_ecdsa_key.pub").read_text().split()
    found = host_identity([tmp_path / "none", first, second])
    assert found["ssh_host_keys"] == {"ecdsa": {"keytype": words[0], "key": words[1]}}
    assert words[0].startswith("ecdsa-sha2-") and len(words) == 3  # type, key, comment: the comment is left out
    assert host_identity([tmp_path / "none"])["ssh_host_keys"] == {}


def test_only_a_nodes_own_resources_make_its_drift_local(
    tmp_path: Path, own_drift: OwnDrift, no_record: Adhoc, command_drift: Adhoc, in_sync: InSync
) -> None:
    """drift_local lets the nodes in sync skip the cluster-wide plays: it must be False for anything the other
    nodes' cluster-wide files are written from (the fingerprint: host keys, addresses). A recorded command reads
    the node itself (the MPI launch across nodes is never recorded): its output is the node's own."""
    own = own_drift.checked.result  # a file's mode changed, among the node's other own drift
    if reasons_apart_from_the_lab(own) == own["reasons"]:  # the lab beside did not move this machine's links
        assert own["drift_local"] is True, own
    data = json.loads(own_drift.state.read_text())
    data["fingerprint"]["ssh_host_keys"] = {"ssh_host_ed25519_key.pub": "another key"}
    state = tmp_path / "state.json"  # that record with another host key, beside the same drifted files
    state.write_text(json.dumps(data))
    rekeyed = check(state).result
    assert any(r.startswith("fingerprint ssh_host_keys") for r in rekeyed["reasons"]), rekeyed
    assert rekeyed["drift_local"] is False
    assert no_record.result["drift_local"] is False  # no record
    # A recorded command's output changed (`cat` of the file, whose content changed): the node's own drift.
    catted = command_drift.result
    assert any(r.startswith("command `cat ") for r in catted["reasons"]), catted
    if reasons_apart_from_the_lab(catted) == catted["reasons"]:
        assert catted["drift_local"] is True, catted
    # In sync: nothing drifted, so nothing is local drift either.
    synced = in_sync.checked.result
    if not synced["reasons"]:
        assert synced["in_sync"] is True and synced["drift_local"] is False


def test_the_gate_keeps_the_nodes_in_sync_out_of_the_cluster_wide_plays_only_for_local_drift() -> None:
    from tests.unit.test_filter_docs import FILTERS

    drift_is_local = FILTERS["rdmaforge_converge_drift_is_local"]
    own = {"in_sync": False, "reasons": ["path /etc/nccl.conf: ..."], "drift_local": True}
    other = {"in_sync": False, "reasons": ["fingerprint ssh_host_keys: ..."], "drift_local": False}
    synced = {"in_sync": True, "reasons": [], "drift_local": False}

    def hostvars(**checks: dict | None) -> dict:
        return {h: ({"converge_state_check": c} if c is not None else {}) for h, c in checks.items()}

    hosts = ["node1", "node2", "node3"]
    assert drift_is_local(hosts, hostvars(node1=synced, node2=own, node3=synced)) is True
    assert drift_is_local(hosts, hostvars(node1=own, node2=own, node3=synced)) is True
    assert drift_is_local(hosts, hostvars(node1=synced, node2=own, node3=other)) is False
    assert drift_is_local(hosts, hostvars(node1=synced, node2=synced, node3=synced)) is False  # nothing drifted
    assert drift_is_local(hosts, hostvars(node1=synced, node2=own, node3=None)) is False  # node3 not checked
    skipped = {"skipped": True, "drift_local": True}
    assert drift_is_local(hosts, hostvars(node1=synced, node2=own, node3=skipped)) is False
    older = {"in_sync": False, "reasons": ["x"]}  # checked by a module without drift_local
    assert drift_is_local(hosts, hostvars(node1=synced, node2=older, node3=synced)) is False


def test_a_command_whose_output_changes_is_drift(command_drift: Adhoc) -> None:
    assert command_drift.result["in_sync"] is False
    assert any(r.startswith("command `cat ") for r in command_drift.result["reasons"])


def test_a_package_missing_is_drift(own_drift: OwnDrift) -> None:
    # own_drift's record says dpkg had another version than the one installed (as if it had been up/downgraded).
    checked = own_drift.checked
    # any(): this machine's own fingerprint can change meanwhile (the lab adds bridges and addresses beside the
    # unit tests), which adds a reason of its own
    assert checked.result["in_sync"] is False
    assert any("package dpkg" in reason for reason in checked.result["reasons"]), checked.result["reasons"]


def test_no_record_unreadable_record_and_unverifiable_record_are_never_in_sync(
    tmp_path: Path, no_record: Adhoc
) -> None:
    assert no_record.result["in_sync"] is False and "no record" in no_record.result["reasons"][0]
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert "cannot be read" in check(broken).result["reasons"][0]
    _, state = record(tmp_path, {"unverifiable": ["Load a module (module community.general.modprobe)"]})
    reasons = check(state).result["reasons"]
    assert any("no check can verify: Load a module" in reason for reason in reasons), reasons


def test_a_node_that_skipped_its_own_roles_keeps_what_its_record_checked(tmp_path: Path, managed: dict) -> None:
    """Per-node fast path: a node in sync ran only the cluster-wide plays, so this run's ledger lists a few files.
    Its new record must still check everything its last complete converge managed, or drift would go unseen."""
    _, state = record(tmp_path, managed)
    hosts = tmp_path / "hosts"
    hosts.write_text("198.18.0.11 node1\n")
    merged, _ = record(tmp_path, {"paths": [str(hosts)], "commands": [["cat", str(hosts)]]}, merge=True)
    assert merged.rc == 0, merged.stderr
    kept = json.loads(state.read_text())["resources"]
    assert kept["paths"] == sorted([managed["paths"][0], str(hosts)])
    assert kept["listings"] == managed["listings"] and kept["packages"] == managed["packages"]
    assert kept["commands"] == managed["commands"] + [["cat", str(hosts)]]
    assert reasons_apart_from_the_lab(check(state).result) == []
    # Drift in what only the earlier record listed (a role this run skipped) is still found, and so is drift in
    # what this run added: each by a reason of its own, in one check.
    Path(managed["paths"][0]).write_text("NCCL_DEBUG=WARN\n")
    hosts.write_text("198.18.0.99 node1\n")
    reasons = check(state).result["reasons"]
    assert any(reason.startswith(f"path {managed['paths'][0]}: ") for reason in reasons), reasons
    assert any(reason.startswith(f"path {hosts}: ") for reason in reasons), reasons


def test_a_merged_record_keeps_the_stored_reading_of_what_this_run_did_not_manage(
    tmp_path: Path, managed: dict
) -> None:
    """Review round 25a: the merged record read every resource again when it was written. A node in sync skips its
    roles while others converge (minutes); a file of a role it skipped, edited in that time, was recorded as
    converged, and every later check said in sync. The stored reading is kept for those; what this run managed
    (the cluster-wide /etc/hosts, its command, a package) is read afresh."""
    conf, venv = Path(managed["paths"][0]), tmp_path / "venv"
    (metadata,) = venv.glob("lib/python*/site-packages/*.dist-info/METADATA")
    hosts = tmp_path / "hosts"
    hosts.write_text("198.18.0.11 node1\n")
    _, state = record(tmp_path, dict(managed, paths=[str(conf), str(hosts)]))
    # While the run converges other nodes: the skipped roles' file, venv and command output change by hand ...
    conf.write_text("NCCL_DEBUG=WARN\n")
    metadata.write_text(metadata.read_text().replace("2.0.1", "2.0.2"))
    # ... and the cluster-wide play this node ran rewrites /etc/hosts.
    hosts.write_text("198.18.0.11 node1\n198.18.0.12 node2\n")
    merged, _ = record(tmp_path, {"paths": [str(hosts)], "packages": {"apt": ["dpkg"]}}, merge=True)
    assert merged.rc == 0, merged.stderr
    reasons = reasons_apart_from_the_lab(check(state).result)
    assert sorted(reason.split(":")[0] for reason in reasons) == sorted(
        [f"path {conf}", f"venv {venv}", f"command `cat {conf}`"]
    ), reasons


def test_one_rule_combines_resource_lists_for_the_ledger_and_the_module() -> None:
    """The ledger's record form and the module's merge are the same function (converge_resources.merge): names
    sorted once each, packages per manager, ordered kinds in first-seen order; and the ledger collects exactly the
    kinds a record lists."""
    assert {f.name for f in dataclasses.fields(ledger.Resources)} == set(converge_resources.KINDS)
    old = {"paths": ["/etc/b", "/etc/a"], "packages": {"apt": ["rdma-core"]}, "commands": [["ip", "rule"]]}
    new = {"paths": ["/etc/a", "/etc/hosts"], "packages": {"apt": ["perftest", "rdma-core"], "dnf": ["numactl"]},
           "commands": [["cat", "/etc/hosts"], ["ip", "rule"]], "effects": ["sysctl -p"]}  # fmt: skip
    assert converge_resources.merge(old, new) == {
        "paths": ["/etc/a", "/etc/b", "/etc/hosts"],
        "listings": [],
        "services": [],
        "venvs": [],
        "packages": {"apt": ["perftest", "rdma-core"], "dnf": ["numactl"]},
        "commands": [["ip", "rule"], ["cat", "/etc/hosts"]],
        "effects": ["sysctl -p"],
        "unverifiable": [],
    }
    collected = ledger.Resources(paths={"/etc/b", "/etc/a"}, packages={"apt": {"rdma-core"}})
    collected.command(["ip", "rule"])
    assert collected.as_dict() == converge_resources.merge(old)


def test_a_node_recorded_for_another_cluster_is_in_sync_but_says_the_cluster_changed(
    in_sync: InSync, no_record: Adhoc
) -> None:
    same = in_sync.checked.result  # recorded and checked for cluster c1
    assert same["cluster_changed"] == "" and reasons_apart_from_the_lab(same) == []
    grown = check(in_sync.state, cluster="c2").result
    assert reasons_apart_from_the_lab(grown) == []  # the node itself has not changed
    assert grown["cluster_changed"].startswith("the cluster changed since the record"), grown
    assert no_record.result["cluster_changed"] == ""  # no record (checked for c2): not in sync anyway
    # The gate's filter names exactly the nodes recorded for another cluster.
    from tests.unit.test_filter_docs import FILTERS

    converge_cluster_changes = FILTERS["rdmaforge_converge_cluster_changes"]
    hostvars = {"node1": {"converge_state_check": same}, "node2": {"converge_state_check": grown}, "node3": {}}
    assert list(converge_cluster_changes(["node1", "node2", "node3"], hostvars)) == ["node2"]


@pytest.mark.parametrize("stored", ["none", "other-digest"])
def test_a_merge_without_a_record_to_keep_is_never_in_sync(tmp_path: Path, managed: dict, stored: str) -> None:
    if stored == "other-digest":
        record(tmp_path, managed, digest_value="d0")
    merged, state = record(tmp_path, {"paths": managed["paths"]}, merge=True)
    assert merged.rc == 0, merged.stderr
    reasons = check(state).result["reasons"]
    assert any("a partial run with no earlier record to keep" in reason for reason in reasons), reasons


def test_check_mode_writes_no_record(tmp_path: Path, managed: dict) -> None:
    state = tmp_path / "state.json"
    run = run_module(
        "converge_state", {"state": "record", "path": str(state), "digest": "d", "resources": managed}, "--check"
    )
    assert run.result["changed"] is True and not state.exists()


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
def test_the_module_runs_on_python_3_8(tmp_path: Path, managed: dict) -> None:
    run, state = record(tmp_path, managed, python=PY38)
    assert run.rc == 0, run.stderr
    assert os.path.exists(state)


def test_provision_says_in_plain_words_what_the_fast_path_decided() -> None:
    from rdmaforge.commands.provision import fast_path_lines

    assert fast_path_lines(True, {})[0].startswith("fast path: every node is in sync")
    lines = fast_path_lines(False, {"node2": ["path /etc/nccl.conf: was a, now b", "package x: was 1, now absent"]})
    assert lines == [
        "full converge: 1 node(s) differ from their last complete converge",
        "  node2: path /etc/nccl.conf: was a, now b (+1 more)",
    ]
    assert fast_path_lines(None, None) == []  # the gate did not run (--tags, an early failure)
    # Per-node fast path: the nodes in sync are counted, the ones that converge are named with their reasons.
    lines = fast_path_lines(False, {"node2": ["package x: was 1, now absent"]}, ["node3", "node1"])
    assert lines[0].startswith("converge: 1 node(s) differ from their last complete converge and converge in full; ")
    assert "2 node(s) in sync skip their own roles" in lines[0]
    assert lines[1] == "  node2: package x: was 1, now absent"
    # A node added: every node in sync, but the cluster-wide plays run because the cluster changed.
    lines = fast_path_lines(False, {}, ["node1", "node2", "node3"], {"node1": "x", "node2": "x"})
    assert len(lines) == 1 and "the cluster changed since 2 node(s) recorded it" in lines[0], lines
    assert "3 node(s) run only the cluster-wide plays" in lines[0]
    # The new node itself has no record: it converges in full, the others run only the cluster-wide plays.
    lines = fast_path_lines(False, {"node4": ["no record at /var/lib/rdmaforge/converge-state.json"]},
                            ["node1", "node2", "node3"], {"node1": "x"})  # fmt: skip
    assert lines[0].startswith("converge: 1 node(s) differ") and lines[1].startswith("  node4: no record"), lines
    # A node unreachable at the check: never "every node is in sync"; the nodes checked run the cluster-wide plays
    # and the lost node is named as not checked.
    lines = fast_path_lines(False, {}, ["node1", "node2"], {}, ["node3"])
    assert lines == [
        "converge: every node checked is in sync with its last complete converge, but 1 node(s) could not be "
        "checked; 2 node(s) run only the cluster-wide plays (/etc/hosts, SSH trust, MPI launch)",
        "  not checked (unreachable or failed before the check): node3",
    ]
    assert (
        "not checked (unreachable or failed before the check): node3"
        in fast_path_lines(False, {"node2": ["package x: was 1, now absent"]}, ["node1"], {}, ["node3"])[1]
    )
    # Drift that is the drifted node's own: the nodes in sync skip the cluster-wide plays too, and say so.
    lines = fast_path_lines(False, {"node2": ["path /etc/nccl.conf: was a, now b"]}, ["node1", "node3"], {}, [], True)
    assert "2 node(s) in sync skip their own roles and the cluster-wide plays" in lines[0], lines
    assert "run on the drifted node(s) alone" in lines[0] and lines[1] == "  node2: path /etc/nccl.conf: was a, now b"


def test_a_task_that_reads_no_state_can_say_so() -> None:
    entry = ledger.Resources()
    df = result({"argv": ["df", "-P", "-k", "/opt"]}, cmd=["df", "-P", "-k", "/opt"])
    ledger.add_task_result(entry, "Measure free space", "ansible.builtin.command", df, [False], observe=False)
    assert entry.as_dict()["commands"] == []


def test_what_an_input_template_reads_from_the_inventory_is_an_input() -> None:
    """nccl_env_overrides: "{{ vault_nccl_overrides }}" (Ansible's vault indirection) was hashed as its text: a new
    vault_nccl_overrides left every node 'in sync' and the old nccl.conf in place. What a template names is kept as
    written (transitively), so a change there is a change of desired state."""
    base = {"node1": {"ansible_host": "198.18.0.11", "group_names": ["cluster"],
                      "nccl_env_overrides": "{{ vault_nccl_overrides }}", "vault_nccl_overrides": "{{ site_env }}",
                      "site_env": {"NCCL_DEBUG": "INFO"}, "unrelated": 1}}  # fmt: skip
    first = node_digests(base, ["node1"])["node1"]
    deeper = {"node1": dict(base["node1"], site_env={"NCCL_DEBUG": "WARN"})}
    assert node_digests(deeper, ["node1"])["node1"] != first
    other = {"node1": dict(base["node1"], unrelated=2)}  # named by no input's template: not an input
    assert node_digests(other, ["node1"])["node1"] == first


def test_a_prefixed_mapping_with_keys_of_mixed_types_has_a_digest() -> None:
    """{1: a, spare: b} could not be ordered by json.dumps(sort_keys=True): every node failed in preflight."""
    hostvars = {"node1": {"ansible_host": "198.18.0.11", "cluster_racks": {1: "a", "spare": "b"}}}
    assert node_digests(hostvars, ["node1"])["node1"]


def test_an_input_that_reads_the_environment_is_hashed_by_its_value(tmp_path: Path) -> None:
    """nccl_cuda_archs: "{{ lookup('ansible.builtin.env', 'SITE_ARCHS') | split(',') }}": its text never changes,
    its value does. Through real Ansible (HostVars templating), on a host that is never contacted (debug only)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {"node1": {
        "ansible_host": "127.0.0.1", "ansible_port": 9,
        "nccl_cuda_archs": "{{ lookup('ansible.builtin.env', 'SITE_ARCHS') | split(',') }}"}}}}}}))  # fmt: skip
    playbook = tmp_path / "digest.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "node1", "gather_facts": False, "tasks": [{
        "ansible.builtin.debug": {"msg": "DIGEST={{ (hostvars | rdmaforge.cluster.rdmaforge_converge_digests("
                                         "groups['all'])).nodes.node1 }}"}}]}]))  # fmt: skip

    def node_digest(archs: str) -> str:
        env = {**os.environ, "SITE_ARCHS": archs, "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"),
               "ANSIBLE_CACHE_PLUGIN": "memory", "RDMAFORGE_CONTROLLER_CACHE": str(tmp_path / "cache")}  # fmt: skip
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                               str(playbook)], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
        found = re.search(r"DIGEST=([0-9a-f]{64})", proc.stdout)
        assert proc.returncode == 0 and found, proc.stdout[-3000:] + proc.stderr[-2000:]
        return found.group(1)

    first = node_digest("sm_80")
    assert node_digest("sm_80") == first
    assert node_digest("sm_90") != first

    # Through a variable of the user's own that the input names (review round 25a): the same.
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {"node1": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "nccl_cuda_archs": "{{ site_archs }}",
        "site_archs": "{{ lookup('ansible.builtin.env', 'SITE_ARCHS') | split(',') }}"}}}}}}))  # fmt: skip
    first = node_digest("sm_80")
    assert node_digest("sm_80") == first
    assert node_digest("sm_90") != first


@pytest.mark.parametrize(("damage", "reason"), [
    # the commands' outputs paired with the commands by position: with fewer kept, a drift went unseen (zip)
    (lambda data: data["observations"].update(commands=[]), "keep 0 command output(s) for 1 recorded command(s)"),
    (lambda data: data.update(observations={}), "keep 0 command output(s) for 1 recorded command(s)"),
    # shapes rdmaforge does not write: the check failed the node before any change, on every run
    (lambda data: data.update(observations=["paths"]), "the record is not as rdmaforge writes it (AttributeError"),
    (lambda data: data["resources"].update(packages=["dpkg"]), "the record is not as rdmaforge writes it"),
    (lambda data: data["resources"].update(unverifiable={"a": 1}), "the record is not as rdmaforge writes it"),
    # resources that are no mapping: compared as a reason, then counted outside that guard (a traceback)
    (lambda data: data.update(resources=["x"]), "the record is not as rdmaforge writes it"),
])  # fmt: skip
def test_a_damaged_record_is_never_in_sync_nor_a_failure(tmp_path: Path, damage, reason: str) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=INFO\n")
    _, state = record(tmp_path, {"commands": [["cat", str(conf)]]})
    data = json.loads(state.read_text())
    damage(data)
    state.write_text(json.dumps(data))
    conf.write_text("NCCL_DEBUG=TRACE\n")  # a drift the record's commands would show
    checked = check(state)
    assert checked.rc == 0, checked.stdout[-2000:]
    assert checked.result["in_sync"] is False and any(reason in r for r in checked.result["reasons"]), checked.result


def test_a_partial_run_over_a_record_whose_resources_are_no_mapping_records_them_unverifiable(tmp_path: Path) -> None:
    """merge=true keeps the stored record's resources: a record whose resources are a list failed the node with a
    traceback (AttributeError in the merge) on every partial run. It cannot be merged, which the option says is a
    partial run with nothing to keep: recorded, and marked unverifiable (so the next check converges in full)."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=INFO\n")
    _, state = record(tmp_path, {"paths": [str(conf)]})
    data = json.loads(state.read_text())
    state.write_text(json.dumps(dict(data, resources=["x"])))
    merged, _ = record(tmp_path, {"paths": [str(conf)]}, merge=True)
    assert merged.rc == 0, merged.stdout[-2000:]
    unverifiable = json.loads(state.read_text())["resources"]["unverifiable"]
    assert any("cannot be merged" in line for line in unverifiable), unverifiable
    assert check(state).result["in_sync"] is False


#: A STAND-IN systemctl answering as systemd 252 on a lab node does (captured there): `is-enabled` prints nothing on
#: stdout for a unit without a unit file; `show` prints one block per unit, in the order asked.
SYSTEMCTL_STAND_IN = r"""#!/usr/bin/env python3
import sys
UNITS = {"cron": ("active", "enabled"), "ssh": ("active", "enabled")}
verb, names = sys.argv[1], [a for a in sys.argv[2:] if not a.startswith("-")]
states = [UNITS.get(name, ("inactive", "")) for name in names]
if verb == "is-active":
    print("\n".join(active for active, _ in states))
elif verb == "is-enabled":
    print("\n".join(enabled for _, enabled in states if enabled))
elif verb == "show":
    # A name systemd reads as a pattern ("x*") shows every unit it matches: here two.
    states = [state for name, state in zip(names, states) for _ in range(2 if "*" in name else 1)]
    print("\n\n".join(f"ActiveState={active}\nUnitFileState={enabled}" for active, enabled in states))
"""


def test_a_unit_without_a_unit_file_does_not_shift_the_next_units_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`systemctl is-enabled a b c` prints nothing for a unit without a unit file: b's state was recorded under a
    unit's name it was not (review round 21a), so a drift report named the wrong service."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(SYSTEMCTL_STAND_IN)
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    run, state = record(tmp_path, {"services": ["ssh", "cron", "nosuch"]})
    assert run.rc == 0, run.stderr
    observed = json.loads(state.read_text())["observations"]["services"]
    assert observed == {"cron": "active/enabled", "nosuch": "inactive/?", "ssh": "active/enabled"}, observed
    # A name that shows several units leaves the others read, one unit at a time (it made every one "?/?").
    (tmp_path / "pattern").mkdir()
    run, state = record(tmp_path / "pattern", {"services": ["ssh", "x*"]})
    observed = json.loads(state.read_text())["observations"]["services"]
    assert observed["ssh"] == "active/enabled", observed


def test_a_command_timeout_below_one_second_is_refused(tmp_path: Path) -> None:
    """At 0, every command and the fingerprint's `ip` timed out at the record and at the check alike, and the two
    "timed out" readings agreed: in sync with drift present (review round 37c)."""
    args = {"path": str(tmp_path / "state.json"), "digest": "d1", "command_timeout": 0}
    for state in ("record", "check"):
        refused = run_module("converge_state", dict(args, state=state, resources={"commands": [["true"]]}))
        assert refused.rc == 2, refused.result
        assert refused.result["msg"] == ("command_timeout=0 is not allowed; allowed: a whole number of seconds, 1 or "
                                         "more (converge_state_command_timeout)")  # fmt: skip
    assert not (tmp_path / "state.json").exists()
    # preflight says so first, before any node is touched
    (line,) = checks.inventory_report([NodeInput("node1", None, "erdma", values={
        "rdmaforge_fabric": "erdma", "converge_state_command_timeout": 0})])["node1"]  # fmt: skip
    assert line.startswith("node1: converge_state_command_timeout=0 is not allowed; allowed: a whole number of "
                           "seconds"), line


def test_a_command_that_timed_out_is_not_verified(tmp_path: Path) -> None:
    """A command slower than command_timeout at the record and at the check compared its "timed out" twice: the
    same, so in sync, though nothing was read."""
    state = tmp_path / "state.json"
    args = {"path": str(state), "digest": "d1", "cluster_digest": "c1", "controller_files": FILES,
            "command_timeout": 1}  # fmt: skip
    recorded = run_module("converge_state", dict(args, state="record", resources={"commands": [["sleep", "3"]]}))
    assert recorded.result["changed"] is True, recorded.result
    # the record says so: a check of it is never in sync, whatever the next run reads
    kept = json.loads(state.read_text())["resources"]["unverifiable"]
    assert kept == ["`sleep 3` timed out after 1s (converge_state_command_timeout): not verified"]
    checked = run_module("converge_state", args)
    assert checked.result["in_sync"] is False
    assert checked.result["reasons"] == ["the record holds what no check can verify: `sleep 3` timed out after 1s "
                                         "(converge_state_command_timeout): not verified"]
    # read at the record, too slow at the check: not verified either (the old check compared rc -1 to rc 0: a
    # "changed output", the node's own drift)
    slow = tmp_path / "slow.json"
    args = dict(args, path=str(slow), command_timeout=10)
    run_module("converge_state", dict(args, state="record", resources={"commands": [["sleep", "2"]]}))
    checked = run_module("converge_state", dict(args, command_timeout=1))
    assert checked.result["in_sync"] is False and checked.result["drift_local"] is False, checked.result
    assert checked.result["reasons"] == ["`sleep 2` timed out after 1s (converge_state_command_timeout): not verified"]


@pytest.mark.parametrize(("resources", "message"), [
    ({"paths": "/etc/hosts"}, "resources: paths='/etc/hosts' is not allowed; allowed: a list of text"),
    ({"commands": [[]]}, "resources: commands=[[]] is not allowed; allowed: a list of non-empty argv lists of text"),
    ({"packages": {"apt": "dpkg"}}, "resources: packages={'apt': 'dpkg'} is not allowed; allowed: a mapping of a "
                                    "package manager to a list of names"),
    ({"files": ["/etc/hosts"]}, "resources: 'files' is not a kind of resource; allowed: paths, listings, services"),
])  # fmt: skip
def test_resources_of_another_shape_are_refused(tmp_path: Path, resources: dict, message: str) -> None:
    """``paths: /etc/hosts`` was observed one character at a time (/, c, e, h, ...), so an edit of /etc/hosts was
    never seen; ``commands: [[]]`` raised IndexError."""
    refused = run_module("converge_state", {"state": "record", "path": str(tmp_path / "s.json"), "digest": "d1",
                                            "resources": resources})  # fmt: skip
    assert refused.rc == 2 and refused.result["msg"].startswith(message), refused.result


def test_a_record_that_is_not_utf8_is_written_anew(tmp_path: Path) -> None:
    """The check called it unreadable (a full converge), then the record step raised UnicodeDecodeError on every
    run, so the damaged record was never replaced."""
    state = tmp_path / "state.json"
    state.write_bytes(b"{\xff\xfe")
    result = run_module("converge_state", {"state": "record", "path": str(state), "digest": "d1",
                                           "resources": {"paths": [str(state.parent)]}}).result  # fmt: skip
    assert result.get("changed") is True, result
    assert json.loads(state.read_text())["digest"] == "d1"
