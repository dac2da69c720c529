"""The preflight playbook for real, against fake nodes on this machine (ansible_connection=local).

The bad-inventory cases run preflight.yml followed by cluster_hosts.yml, writing to a temporary file
per node instead of /etc/hosts, to show that a bad inventory stops the run before anything is
written. Not site.yml itself: it grows roles that would install packages on this machine.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import recap, run_playbook
from inventory_cases import CASES, Case, InventoryDraft, check_case, names_of

from rdmaforge.parsers import nic_facts as nic_parser
from rdmaforge.paths import PROJECT_ROOT

# Facts of fake hosts must not land in the project's fact cache (.cache/facts).
ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
NODES = {"localhost": "127.0.0.1", "pf-b": "127.0.0.2", "pf-c": "127.0.0.3"}
PLAYBOOKS = PROJECT_ROOT / "playbooks"


@pytest.fixture(scope="module")
def local_site(tmp_path_factory: pytest.TempPathFactory) -> str:
    """site.yml's first two steps, the only ones safe to run against this machine."""
    path = tmp_path_factory.mktemp("site") / "local_site.yml"
    path.write_text(f"""---
- name: Preflight
  ansible.builtin.import_playbook: {PLAYBOOKS / "preflight.yml"}
- name: Cluster hosts
  ansible.builtin.import_playbook: {PLAYBOOKS / "cluster_hosts.yml"}
""")
    return str(path)


def test_site_starts_with_preflight_then_cluster_hosts() -> None:
    steps = [
        play.get("ansible.builtin.import_playbook") for play in yaml.safe_load((PLAYBOOKS / "site.yml").read_text())
    ]
    assert steps[:2] == ["preflight.yml", "cluster_hosts.yml"]


def good_draft(tmp_path: Path) -> InventoryDraft:
    hosts = {
        name: {"ansible_host": address, "cluster_hosts_path": str(tmp_path / f"hosts-{name}")}
        for name, address in NODES.items()
    }
    doc = {"all": {"children": {"cluster": {"hosts": hosts}}}}
    var_files = {
        "group_vars/all/connection.yml": {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        },
        "group_vars/all/fabric.yml": {"rdmaforge_fabric": "tcp"},
    }
    for name in NODES:
        (tmp_path / f"hosts-{name}").write_text("127.0.0.1\tlocalhost\n# a line of the node's own\n")
    return InventoryDraft(doc, var_files)


def hosts_files(tmp_path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(tmp_path.glob("hosts-*"))}


@dataclass(frozen=True)
class GoodRuns:
    """site.yml's first two steps run twice on the good inventory (what the tests below read)."""

    first: subprocess.CompletedProcess[str]
    hosts_after_first: dict[str, str]  # each node's hosts file after the first run
    second: subprocess.CompletedProcess[str]
    facts: dict[str, dict]  # rdmaforge_node of every node, written out by the first run


@pytest.fixture(scope="module")
def good_runs(tmp_path_factory: pytest.TempPathFactory, local_site: str) -> GoodRuns:
    """Shared by the tests that only read these runs (a preflight on three nodes is this module's costliest step).
    The first run ends with a play that writes out every node's rdmaforge_node; changed_when: false keeps the
    recap's changed counts those of preflight and cluster_hosts."""
    tmp = tmp_path_factory.mktemp("good")
    inventory = good_draft(tmp).write(tmp / "inventory")
    facts_dir = tmp / "facts"
    facts_dir.mkdir()
    first_playbook = tmp / "site_and_dump.yml"
    first_playbook.write_text(f"""---
- name: Preflight and cluster hosts
  ansible.builtin.import_playbook: {local_site}
- name: Dump rdmaforge_node
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Write the fact
      ansible.builtin.copy:
        content: "{{{{ rdmaforge_node | to_json }}}}"
        dest: "{facts_dir}/{{{{ inventory_hostname }}}}.json"
        mode: "0644"
      changed_when: false
""")
    first = run_playbook(str(first_playbook), inventory=inventory, env=ENV)
    hosts_after_first = hosts_files(tmp)
    second = run_playbook(local_site, inventory=inventory, env=ENV)
    facts = {p.stem: json.loads(p.read_text()) for p in facts_dir.glob("*.json")}
    return GoodRuns(first, hosts_after_first, second, facts)


@pytest.fixture(scope="module")
def node_facts(good_runs: GoodRuns) -> dict[str, dict]:
    """rdmaforge_node of every fake node, as the first good run published it."""
    assert good_runs.first.returncode == 0, good_runs.first.stdout[-4000:]
    assert set(good_runs.facts) == set(NODES)
    return good_runs.facts


def test_good_inventory_passes_and_changes_nothing(good_runs: GoodRuns) -> None:
    # the first run's preflight, on nodes never run before, changed nothing (cluster_hosts' play comes after it)
    first = good_runs.first
    assert first.returncode == 0, first.stdout[-4000:]
    preflight_part = first.stdout.split("PLAY [Cluster hosts")[0]
    assert "PLAY [Preflight | validate the inventory and the nodes" in preflight_part
    assert not re.search(r"^changed: ", preflight_part, re.MULTILINE), preflight_part[-4000:]
    # and the second run, preflight included, changed nothing and failed nowhere
    second = good_runs.second
    assert second.returncode == 0, second.stdout[-4000:]
    counts = recap(second.stdout)
    assert set(NODES) <= set(counts)
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in counts.values()), counts


def test_preflight_passes_in_check_mode(tmp_path: Path) -> None:
    inventory = good_draft(tmp_path).write(tmp_path / "inventory")
    proc = run_playbook("preflight.yml", "--check", inventory=inventory, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "Summarise the node" in proc.stdout  # the read-only probes ran in check mode too


def test_a_vars_file_that_names_no_host_is_a_warning(tmp_path: Path) -> None:
    """host_vars named by a node's address (Ansible reads it for no host): preflight passes, naming the file. A
    warning, not an error: inventories may share one directory of vars files (review round 24)."""
    draft = good_draft(tmp_path)
    address = "192.0.2.9"  # (a file name only: an address of no host here, as a node's real one would be)
    draft.var_files[f"host_vars/{address}.yml"] = {"rdmaforge_fabric": "roce"}
    inventory = draft.write(tmp_path / "inventory")
    proc = run_playbook("preflight.yml", inventory=inventory, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    assert f"host_vars/{address}.yml names no host of this inventory" in said, proc.stdout[-4000:]


def test_cluster_hosts_writes_the_block_once_and_keeps_other_lines(good_runs: GoodRuns) -> None:
    first = good_runs.first
    assert first.returncode == 0, first.stdout[-4000:]
    assert {h: c["changed"] for h, c in recap(first.stdout).items() if h in NODES} == dict.fromkeys(NODES, 1)
    expected_block = (
        "# BEGIN rdmaforge cluster hosts\n"
        + "".join(f"{address}\t{name}\n" for name, address in NODES.items())
        + "# END rdmaforge cluster hosts\n"
    )
    assert len(good_runs.hosts_after_first) == len(NODES)
    for content in good_runs.hosts_after_first.values():
        assert content == "127.0.0.1\tlocalhost\n# a line of the node's own\n" + expected_block
    second = good_runs.second
    assert second.returncode == 0, second.stdout[-4000:]
    assert all(c["changed"] == 0 for c in recap(second.stdout).values()), recap(second.stdout)


def test_node_fact_has_the_published_shape(node_facts: dict[str, dict]) -> None:
    for fact in node_facts.values():
        assert set(fact) == {
            "os",
            "cpu_count",
            "gpu_count",
            "gpu_source",
            "gpu_compute_caps",
            "rdma_devices",
            "rdma_source",
            "rdma_netdevs",
            "nics",
            "nics_error",
            "default_route_interface",
        }
        assert set(fact["os"]) == {"distribution", "version", "major_version", "family", "pkg_mgr"}
        assert fact["os"]["distribution"] and fact["os"]["family"]
        assert isinstance(fact["cpu_count"], int) and fact["cpu_count"] >= 1
        assert isinstance(fact["gpu_count"], int) and fact["gpu_source"] in ("nvidia-smi", "lspci", "sysfs")
        assert fact["gpu_compute_caps"] == []  # no nvidia-smi on this machine
        assert isinstance(fact["rdma_devices"], list) and fact["rdma_source"] in (
            "ibv_devinfo",
            "sysfs",
            "none",
        )
        assert isinstance(fact["rdma_netdevs"], dict)
        # the nic_facts module's records, as doctor and eni read them (this machine has iproute2)
        assert fact["nics_error"] is None and fact["nics"]
        assert all(set(nic) == set(nic_parser.Nic.__annotations__) for nic in fact["nics"])
        assert "lo" not in [nic["name"] for nic in fact["nics"]]
        if fact["default_route_interface"]:
            assert fact["default_route_interface"] in [nic["name"] for nic in fact["nics"]]


def test_legacy_os_passes_with_a_warning(tmp_path: Path, node_facts: dict[str, dict]) -> None:
    os_ = node_facts["localhost"]["os"]
    tables = {
        "preflight_supported_os": {},
        "preflight_legacy_os": {os_["distribution"]: [os_["major_version"]]},
    }
    inventory = good_draft(tmp_path).write(tmp_path / "inventory")
    proc = run_playbook("preflight.yml", "-e", json.dumps(tables), inventory=inventory, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert f"pf-b: ansible_distribution='{os_['distribution']}'" in proc.stdout
    assert "is a legacy OS (preflight_legacy_os)" in proc.stdout


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_inventory_is_rejected(case: Case, tmp_path: Path, local_site: str) -> None:
    draft = good_draft(tmp_path)
    names = names_of(draft)
    before = hosts_files(tmp_path)
    bad = draft.copy()
    case.edit(bad, names)
    proc = run_playbook(local_site, *case.extra, inventory=bad.write(tmp_path / "inventory"), env=ENV)
    check_case(case, names, proc.returncode, proc.stdout)
    assert hosts_files(tmp_path) == before


PROBE = PROJECT_ROOT / "tests" / "data" / "device-h100" / "probe.txt"
FAKE_NVIDIA_SMI = '''#!{python}
"""Test double for an H100 node's NVIDIA driver (this machine has no GPU): answers the nvidia-smi questions that
preflight asks with what one real H100 answered ({probe}). Anything else is refused."""
import csv, io, sys
text = open({probe!r}).read()
def section(name):
    return text.split("== " + name + "\\n", 1)[1].split("\\n== ", 1)[0]
args = sys.argv[1:]
if args == ["-L"]:
    print(section("nvidia-smi -L"))
elif args == ["--query-gpu=compute_cap", "--format=csv,noheader"]:
    rows = list(csv.reader(io.StringIO(section("nvidia-smi --query-gpu")), skipinitialspace=True))
    column = rows[0].index("compute_cap")
    print("\\n".join(row[column] for row in rows[1:]))
else:
    sys.exit("fake nvidia-smi: no recorded answer for %s" % args)
'''


def test_an_nccl_arch_list_without_the_gpus_arch_is_refused(tmp_path: Path) -> None:
    # The compute capability the real H100 reported, read from the recorded CSV, not from the code under test.
    query = PROBE.read_text().split("== nvidia-smi --query-gpu\n", 1)[1].splitlines()
    cap = query[1].split(", ")[query[0].split(", ").index("compute_cap")]
    assert cap == "9.0"
    driver = tmp_path / "fake-h100-driver"
    driver.mkdir()
    (driver / "nvidia-smi").write_text(FAKE_NVIDIA_SMI.format(python=sys.executable, probe=str(PROBE)))
    (driver / "nvidia-smi").chmod(0o755)
    inventory = good_draft(tmp_path).write(tmp_path / "inventory")
    probe_dirs = [str(driver), "/usr/bin", "/usr/sbin", "/sys/class"]

    def preflight(archs: list[str]) -> subprocess.CompletedProcess[str]:
        extra = json.dumps({"preflight_probe_dirs": probe_dirs, "nccl_cuda_archs": archs})
        return run_playbook("preflight.yml", "-e", extra, inventory=inventory, env=ENV)

    seed = preflight(["sm_80"])  # seed 000's arch list (A100) on H100 nodes
    assert seed.returncode != 0
    for node in NODES:
        assert (
            f'{node}: nccl_cuda_archs=["sm_80"] has no arch that runs on this node\'s GPUs of compute capability '
            f"{cap} (nvidia-smi)" in " ".join(seed.stdout.split())
        ), seed.stdout[-4000:]
    assert "add sm_90 to nccl_cuda_archs" in " ".join(seed.stdout.split())
    assert all(c["changed"] == 0 for c in recap(seed.stdout).values())
    both = preflight(["sm_80", "sm_90"])
    assert both.returncode == 0, both.stdout[-4000:]
    assert "1 GPUs (nvidia-smi)" in both.stdout


def test_a_configuration_that_skips_an_unparsed_inventory_is_refused(tmp_path: Path) -> None:
    """ansible-playbook outside the checkout reads no rdmaforge ansible.cfg: an inventory source it cannot parse was
    skipped with a warning and the run went on with what it read (review round 39a). Stopped on the controller, and
    a configuration without the converge ledger is named (no fast path then)."""
    inventory = good_draft(tmp_path).write(tmp_path / "inventory")
    proc = run_playbook("preflight.yml", inventory=inventory,
                        env={**ENV, "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "false"})  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-4000:]
    said = " ".join(proc.stdout.split())
    assert "skips an inventory source it cannot parse" in said and "any_unparsed_is_failed = true" in said, said[-3000:]
    assert "PLAY [Preflight | validate the inventory" not in proc.stdout  # no node was connected to
    proc = run_playbook("preflight.yml", "--check", inventory=inventory,
                        env={**ENV, "ANSIBLE_CALLBACKS_ENABLED": "rdmaforge.cluster.task_timing"})  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "WARNING: the rdmaforge.cluster.converge_ledger callback is not enabled" in " ".join(proc.stdout.split())
