"""The preflight playbook for real, against fake nodes on this machine (ansible_connection=local).

The bad-inventory cases run preflight.yml followed by cluster_hosts.yml, writing to a temporary file
per node instead of /etc/hosts, to show that a bad inventory stops the run before anything is
written. Not site.yml itself: it grows roles that would install packages on this machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
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


@pytest.fixture(scope="module")
def node_facts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """rdmaforge_node of every fake node, written out by a play that runs after preflight."""
    tmp = tmp_path_factory.mktemp("facts")
    inventory = good_draft(tmp).write(tmp / "inventory")
    playbook = tmp / "dump.yml"
    playbook.write_text(f"""---
- name: Preflight
  ansible.builtin.import_playbook: {PLAYBOOKS / "preflight.yml"}
- name: Dump rdmaforge_node
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Write the fact
      ansible.builtin.copy:
        content: "{{{{ rdmaforge_node | to_json }}}}"
        dest: "{tmp}/{{{{ inventory_hostname }}}}.json"
        mode: "0644"
""")
    proc = run_playbook(str(playbook), inventory=inventory, env=ENV, check=True)
    assert "PLAY RECAP" in proc.stdout
    return {name: json.loads((tmp / f"{name}.json").read_text()) for name in NODES}


def test_good_inventory_passes_and_changes_nothing(tmp_path: Path) -> None:
    inventory = good_draft(tmp_path).write(tmp_path / "inventory")
    proc = run_playbook("preflight.yml", inventory=inventory, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    counts = recap(proc.stdout)
    assert set(NODES) <= set(counts)
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in counts.values()), counts


def test_preflight_passes_in_check_mode(tmp_path: Path) -> None:
    inventory = good_draft(tmp_path).write(tmp_path / "inventory")
    proc = run_playbook("preflight.yml", "--check", inventory=inventory, env=ENV)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "Summarise the node" in proc.stdout  # the read-only probes ran in check mode too


def test_cluster_hosts_writes_the_block_once_and_keeps_other_lines(tmp_path: Path, local_site: str) -> None:
    inventory = good_draft(tmp_path).write(tmp_path / "inventory")
    first = run_playbook(local_site, inventory=inventory, env=ENV)
    assert first.returncode == 0, first.stdout[-4000:]
    assert {h: c["changed"] for h, c in recap(first.stdout).items() if h in NODES} == dict.fromkeys(NODES, 1)
    expected_block = (
        "# BEGIN rdmaforge cluster hosts\n"
        + "".join(f"{address}\t{name}\n" for name, address in NODES.items())
        + "# END rdmaforge cluster hosts\n"
    )
    for content in hosts_files(tmp_path).values():
        assert content == "127.0.0.1\tlocalhost\n# a line of the node's own\n" + expected_block
    second = run_playbook(local_site, inventory=inventory, env=ENV)
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
