"""`rdmaforge render` on hostile or unusual inputs (fuzz round 11a's findings).

Every case renders a copy of inventories/example (its workloads.yml replaced by 8 GPUs and the eRDMA device files,
the role's defaults otherwise: the MPIJob's 50Gi of hugepages) with the finding's variables in
group_vars/all/zz.yml. What is expected comes from Kubernetes' validation rules (k8s.io/kubernetes
pkg/apis/core/validation), docker's and Open MPI's documented syntax, and roles hugepages and nccl_env (their
argument_specs and tasks), never from the code under test.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.cli import main
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.workloads import k8s

EXAMPLE = PROJECT_ROOT / "inventories" / "example"
P = "workload_manifests_"
NODES = ("erdma-node1", "erdma-node2")
BASE = {f"{P}gpus_per_node": 8, f"{P}rdma_device_files": ["rdma_cm", "uverbs0", "uverbs1"]}
#: The hugepages role's reservation of seed 004 on an 8-GPU node: 50 pages of 1 GiB.
HUGEPAGES_ON = {"hugepages_enabled": True, "hugepages_count": 50}


@dataclass
class Rendered:
    code: int
    out: str
    err: str
    directory: Path

    def problems(self, *fragments: str) -> list[str]:
        return [line for line in self.err.splitlines() if all(f in line for f in fragments)]


def inventory(tmp_path: Path, variables: dict[str, Any]) -> Path:
    copy = tmp_path / "inv"
    if not copy.exists():
        shutil.copytree(EXAMPLE, copy)
        (copy / "group_vars" / "all" / "workloads.yml").write_text(yaml.safe_dump(BASE))
    (copy / "group_vars" / "all" / "zz.yml").write_text(yaml.safe_dump(variables))
    return copy


def render(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    variables: dict[str, Any],
    kinds: tuple[str, ...] = ("mpijob",),
    out: str | None = None,
    validate: bool = False,
) -> Rendered:
    """One `rdmaforge render` of the example's copy; each call its own -o unless ``out`` names one."""
    source = inventory(tmp_path, variables)
    directory = tmp_path / (out or f"out{len(list(tmp_path.glob('out*')))}")
    args = ["render", "-i", str(source), "-o", str(directory)]
    for kind in kinds:
        args += ["--kind", kind]
    code = main(args + (["--validate"] if validate else []))
    captured = capsys.readouterr()
    return Rendered(code, captured.out, captured.err, directory)


def refused(result: Rendered, variable: str, *fragments: str) -> None:
    """Nothing written, and one problem line per node (or one for the cluster-wide variable) that names the host,
    the variable and what is allowed."""
    assert result.code == 64, result.err
    assert not result.directory.exists()
    lines = result.problems(variable, *fragments)
    assert lines, result.err
    assert all(line.split(":", 1)[0] in NODES and "allowed:" in line for line in lines), lines


def accepted(result: Rendered) -> None:
    assert result.code == 0, result.err


# --- finding 1: k8s_extra_resources names Kubernetes refuses for a container -------------------------------------


# validateContainerResourceName: a name without '/' must be a standard container resource (cpu, memory,
# ephemeral-storage, hugepages-<size>); one with '/' must be a qualified name, and an extended one must not start
# with "requests.".
@pytest.mark.parametrize("name", ["gpu", "GPU", "rdma", "storage", "nvidia.com/", "requests.nvidia.com/gpu",
                                  "-bad.example/gpu", "hugepages-lots"])  # fmt: skip
def test_a_resource_name_kubernetes_refuses_for_a_container_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    result = render(tmp_path, capsys, {f"{P}k8s_extra_resources": {name: 1}}, ("mpijob", "pytorchjob"), validate=True)
    refused(result, f"{P}k8s_extra_resources", name, "cpu, memory, ephemeral-storage")


@pytest.mark.parametrize("name", ["rdma/hca", "example.com/fpga", "rdma/hca_shared_devices_a", "ephemeral-storage"])
def test_standard_and_domain_prefixed_resource_names_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    accepted(render(tmp_path, capsys, {f"{P}k8s_extra_resources": {name: 1}}, ("mpijob", "pytorchjob"), validate=True))


# --- finding 2: values the API server refuses that no schema checks ------------------------------------------------


def test_acs_replicas_above_int32_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A Deployment's replicas is an int32 (apps/v1 DeploymentSpec): 2**31 cannot be decoded by the API server.
    refused(render(tmp_path, capsys, {f"{P}acs_replicas": 2**31}, ("acs",)), f"{P}acs_replicas", "2147483647")
    refused(render(tmp_path, capsys, {f"{P}acs_replicas": 1099511627776}, ("acs",)), f"{P}acs_replicas")
    accepted(render(tmp_path, capsys, {f"{P}acs_replicas": 2**31 - 1}, ("acs",), validate=True))


@pytest.mark.parametrize("path", ["/sys/../etc", "/sys/..", "/../sys", "/a/../../b"])
def test_a_host_path_with_a_backstep_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str) -> None:
    # validateHostPathVolumeSource -> validatePathNoBacksteps: "must not contain '..'" (an element of the path).
    result = render(tmp_path, capsys, {f"{P}mpijob_host_paths": [{"name": "sys", "path": path}]}, validate=True)
    refused(result, f"{P}mpijob_host_paths", "'..'")


def test_a_host_path_with_dots_inside_a_name_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [{"name": "data", "path": "/mnt/data..v2"}, {"name": "dots", "path": "/mnt/...x"}]
    accepted(render(tmp_path, capsys, {f"{P}mpijob_host_paths": paths}, validate=True))


# --- findings 3 and 4: one hugepages check, whichever variable brings the limit ------------------------------------


def test_hugepages_through_extra_resources_get_the_nodes_reservation_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Role hugepages reserves hugepages_count=50 pages of 1 GiB: a worker asking for 500 would stay Pending.
    extra = {"hugepages-1Gi": "500Gi"}
    variables = {**HUGEPAGES_ON, f"{P}mpijob_hugepages_1gi": None, f"{P}k8s_extra_resources": extra}
    for kinds in (("mpijob",), ("pytorchjob",)):
        result = render(tmp_path, capsys, variables, kinds)
        refused(result, f"{P}k8s_extra_resources", "hugepages-1Gi", "500")
        assert {line.split(":", 1)[0] for line in result.problems("500")} == set(NODES)
    # HugePages require cpu or memory beside them (ValidateResourceRequirements)
    fits = {**variables, f"{P}k8s_extra_resources": {"hugepages-1Gi": "50Gi", "cpu": "8"}}
    accepted(render(tmp_path, capsys, fits, ("mpijob", "pytorchjob"), validate=True))


def test_hugepages_of_another_page_size_than_the_nodes_reserve_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hugepages_size (role hugepages' choices 1G, 2M) is 1G by default: no 2 MiB pages exist on the nodes.
    variables = {**HUGEPAGES_ON, f"{P}mpijob_hugepages_1gi": None, f"{P}k8s_extra_resources": {"hugepages-2Mi": "1Gi"}}
    refused(render(tmp_path, capsys, variables), f"{P}k8s_extra_resources", "hugepages-2Mi", "hugepages_size='1G'")
    two_mib = {**variables, "hugepages_size": "2M", "hugepages_count": 512}  # 512 pages of 2 MiB = 1 GiB
    accepted(render(tmp_path, capsys, two_mib, validate=True))
    wrong = {**HUGEPAGES_ON, "hugepages_size": "2M"}  # the default mpijob_hugepages_1gi: 50Gi of 1 GiB pages
    refused(render(tmp_path, capsys, wrong), f"{P}mpijob_hugepages_1gi", "hugepages_size='2M'")


@pytest.mark.parametrize("count", ["fifty", 10.5, -5, "10.5", [50]])
def test_a_hugepages_count_that_is_no_page_count_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: Any
) -> None:
    # roles/hugepages argument_specs: hugepages_count is type int (check_type_int: no 10.5, no "fifty"); a page count
    # is never negative.
    result = render(tmp_path, capsys, {"hugepages_enabled": True, "hugepages_count": count})
    refused(result, "hugepages_count=", "whole number")
    assert {line.split(":", 1)[0] for line in result.problems("hugepages_count=")} == set(NODES)


@pytest.mark.parametrize("count", [50, "50", 50.0, 64])
def test_a_hugepages_count_as_the_argument_spec_takes_it_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: Any
) -> None:
    accepted(render(tmp_path, capsys, {"hugepages_enabled": True, "hugepages_count": count}))


@pytest.mark.parametrize("enabled", ["maybe", 2, [True]])
def test_a_hugepages_enabled_that_is_no_boolean_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], enabled: Any
) -> None:
    # roles/hugepages argument_specs: hugepages_enabled is type bool; "maybe" was read as false.
    result = render(tmp_path, capsys, {"hugepages_enabled": enabled, "hugepages_count": 50})
    refused(result, "hugepages_enabled=", "true or false")
    assert not result.problems("hugepages_enabled is false")


# --- finding 5: device files in another directory ------------------------------------------------------------------


@pytest.mark.parametrize("listed", [
    ["/dev/infiniband_erdma/rdma_cm", "/dev/infiniband_erdma/uverbs0"],
    ["rdma_cm", "../uverbs0"],
    ["rdma_cm", "/dev/infiniband/../uverbs0"],
])  # fmt: skip
def test_device_files_outside_the_device_directory_are_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listed: list[str]
) -> None:
    result = render(tmp_path, capsys, {f"{P}rdma_device_files": listed}, ("docker",))
    elsewhere = [name for name in listed if "/" in name]
    refused(result, f"{P}rdma_device_files", *elsewhere, "/dev/infiniband")


def test_device_files_given_as_paths_in_the_device_directory_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "uverbs1"]
    result = render(tmp_path, capsys, {f"{P}rdma_device_files": listed}, ("docker",))
    accepted(result)
    script = (result.directory / "docker" / "erdma-node1" / "rdmaforge-train.sh").read_text()
    for name in ("rdma_cm", "uverbs0", "uverbs1"):
        assert f"--device=/dev/infiniband/{name}" in script


# --- finding 6: empty NCCL tables read as role nccl_env reads them -------------------------------------------------


def test_empty_nccl_env_profiles_never_bring_the_roles_default_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Role nccl_env: `nccl_env_profiles[nccl_env_profile] | default({})`: with {} the hosts get none of the erdma
    # profile's settings (NCCL_SOCKET_IFNAME=eth0 among them); the containers must not get them either.
    result = render(tmp_path, capsys, {"nccl_env_profiles": {}}, ("docker",))
    assert result.code == 64 and not result.directory.exists(), result.err
    assert result.problems("erdma-node1: nccl_env_profile='erdma'", "nccl_env_profiles", "allowed:")


@pytest.mark.parametrize("variables", [
    {"nccl_env_accelerators": {}, "nccl_env_accelerator": "taco"},
    {"nccl_env_accelerators": {}},
    {"nccl_env_accelerator": ""},
    {"nccl_env_accelerator": None},
])  # fmt: skip
def test_accelerator_settings_role_nccl_env_fails_on_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variables: dict[str, Any]
) -> None:
    # roles/nccl_env/tasks/validate.yml asserts `nccl_env_accelerator in nccl_env_accelerators`: the play fails.
    result = render(tmp_path, capsys, variables, ("docker",))
    refused(result, "nccl_env_accelerator=", "not a key of nccl_env_accelerators")


# --- finding 7: an MPIJob on the node's network with sshd on port 22 ---------------------------------------------


def test_host_network_mpijob_with_the_default_sshd_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # mpi-operator v2beta1 workers run sshd; on the node's network port 22 is the node's own sshd
    # (kubeflow/mpi-operator#593, #428).
    host_network = {f"{P}k8s_host_network": True, f"{P}mpijob_hugepages_1gi": None}
    refused(render(tmp_path, capsys, host_network, validate=True), f"{P}k8s_host_network", "22")
    other_port = {**host_network, f"{P}mpijob_worker_command": ["/usr/sbin/sshd", "-De", "-p", "2222"],
                  f"{P}mpijob_mpirun_args": ["--mca", "plm_rsh_args", "-p 2222"]}  # fmt: skip
    accepted(render(tmp_path, capsys, other_port, validate=True))
    accepted(render(tmp_path, capsys, {f"{P}mpijob_hugepages_1gi": None}, validate=True))  # pod network: port 22 free


# --- finding 11: exa quantities ----------------------------------------------------------------------------------


def test_exa_suffixes_are_exa_and_the_exponent_form_needs_a_number() -> None:
    # resource.Quantity: E = 10**18, Ei = 2**60; e<n> / E<n> is the decimal exponent form.
    assert k8s.quantity_value("1E") == 10**18
    assert k8s.quantity_value("1Ei") == 2**60
    assert k8s.quantity_value("2E3") == 2000 and k8s.quantity_value("2e3") == 2000
    assert k8s.quantity_value("1.5E") == 15 * 10**17


def test_an_exa_hugepages_limit_is_judged_by_its_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 1Ei is 2**30 pages of 1 GiB: whole pages, refused only for what the nodes reserve.
    refused(render(tmp_path, capsys, {**HUGEPAGES_ON, f"{P}mpijob_hugepages_1gi": "1Ei"}), "1Ei", "reserves 50")
    # 10**18 bytes is no whole number of 1 GiB pages (the API refuses it).
    extra = {**HUGEPAGES_ON, f"{P}mpijob_hugepages_1gi": None, f"{P}k8s_extra_resources": {"hugepages-1Gi": "1E"}}
    refused(render(tmp_path, capsys, extra, validate=True), f"{P}k8s_extra_resources", "1E")


# --- finding 12: strings that become command words ---------------------------------------------------------------


@pytest.mark.parametrize(("variable", "value"), [
    ("docker_binary", "/usr/bin/docker --debug"),
    ("docker_binary", "/usr/bin/docker\n"),
    ("docker_binary", "/usr/bin/do\tcker"),
    ("rdma_dev_dir", "/dev/rdma:ro"),
    ("rdma_dev_dir", "/dev/infini band"),
    ("rdma_dev_dir", "/dev/infiniband\n"),
])  # fmt: skip
def test_paths_that_would_not_be_one_command_word_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variable: str, value: str
) -> None:
    refused(render(tmp_path, capsys, {P + variable: value}, ("docker",)), P + variable, "allowed: an absolute path")


@pytest.mark.parametrize("value", ["eth0 eth1", "eth0\n", "eth0\teth1", "eth0,", "averyveryverylongname0", "eth0/1"])
def test_a_tcp_if_include_that_is_no_interface_list_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    # Open MPI's btl_tcp_if_include: a comma-separated list of interfaces (Linux names: 1-15 characters, no blank or
    # '/') or CIDR networks.
    refused(render(tmp_path, capsys, {f"{P}mpijob_tcp_if_include": value}), f"{P}mpijob_tcp_if_include", "comma")


@pytest.mark.parametrize("value", ["eth0", "eth0,bond0", "192.168.0.0/16", "bond0.100"])
def test_interface_lists_open_mpi_reads_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    result = render(tmp_path, capsys, {f"{P}mpijob_tcp_if_include": value})
    accepted(result)
    job = yaml.safe_load((result.directory / "mpijob" / "rdmaforge-train.yaml").read_text())
    command = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("btl_tcp_if_include") + 1] == value


# --- finding 9: unchanged files left alone, stale ones listed ------------------------------------------------------


def test_an_unchanged_render_rewrites_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = render(tmp_path, capsys, {}, ("docker", "mpijob"), out="out")
    accepted(first)
    files = sorted(p for p in first.directory.rglob("*") if p.is_file())
    past = time.time() - 1000
    for path in files:
        os.utime(path, (past, past))
    second = render(tmp_path, capsys, {}, ("docker", "mpijob"), out="out")
    accepted(second)
    assert all(path.stat().st_mtime == past for path in files)
    said = [line.split(" ", 1)[0] for line in second.out.splitlines()]
    assert said == ["unchanged"] * len(files), second.out
    # a changed file is written again, the others left alone
    third = render(tmp_path, capsys, {f"{P}image": "nvcr.io/nvidia/pytorch:25.01-py3"}, ("docker", "mpijob"), out="out")
    accepted(third)
    assert [line.split(" ", 1)[0] for line in third.out.splitlines()] == ["wrote"] * len(files), third.out


def test_a_changed_mode_is_written_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    accepted(render(tmp_path, capsys, {}, ("docker",), out="out"))
    script = tmp_path / "out" / "docker" / "erdma-node1" / "rdmaforge-train.sh"
    script.chmod(0o644)  # the script is run directly: its mode is part of it
    again = render(tmp_path, capsys, {}, ("docker",), out="out")
    assert f"wrote   {script}" in again.out and script.stat().st_mode & 0o777 == 0o755


def test_files_an_earlier_render_left_are_listed_never_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    accepted(render(tmp_path, capsys, {}, ("docker", "mpijob", "pytorchjob"), out="out"))
    out = tmp_path / "out"
    old = [out / "mpijob" / "rdmaforge-train.yaml", out / "pytorchjob" / "rdmaforge-train.yaml",
           out / "docker" / "erdma-node2" / "rdmaforge-train.sh"]  # fmt: skip
    renamed = render(tmp_path, capsys, {f"{P}name": "train-v2"}, ("docker", "mpijob"), out="out")
    accepted(renamed)
    assert (out / "mpijob" / "train-v2.yaml").is_file()
    warnings = [line for line in renamed.err.splitlines() if line.startswith("WARNING") and "not written" in line]
    assert len(warnings) == 1, renamed.err
    for path in old:
        assert path.is_file()
        assert str(path.relative_to(out)) in warnings[0]
    assert "train-v2" not in warnings[0]
    again = render(tmp_path, capsys, {f"{P}name": "train-v2"}, ("docker", "mpijob"), out="out")
    assert "rdmaforge-train.yaml" in again.err  # still there, still listed
    mine = out / "notes.txt"  # outside the kinds' directories: not render's
    mine.write_text("mine")
    assert "notes.txt" not in render(tmp_path, capsys, {f"{P}name": "train-v2"}, ("docker", "mpijob"), out="out").err


# --- finding 8: the hosts' NCCL_SOCKET_IFNAME in pods on the pod network --------------------------------------


@pytest.mark.parametrize(("ifname", "warned"), [("bond0", True), ("=ens1f0", True), ("eth", False), ("=eth0", False),
                                                ("^docker,lo", False), ("bond0,eth0", False)])  # fmt: skip
def test_a_socket_interface_no_pod_has_is_named_for_pods_on_the_pod_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ifname: str, warned: bool
) -> None:
    """A pod on the pod network has lo and the CNI's eth0 only; NCCL reads NCCL_SOCKET_IFNAME as prefixes ('=' exact
    names, '^' exclusions). The hosts' bond0 matched no interface in the pods, and both files passed --validate
    without a word. On the node's network (k8s_host_network) the hosts' interfaces are there: no warning."""
    overrides = {"nccl_env_overrides": {"NCCL_SOCKET_IFNAME": ifname}}
    result = render(tmp_path, capsys, overrides, kinds=("mpijob", "pytorchjob"))
    accepted(result)
    said = result.problems("WARNING", f"NCCL_SOCKET_IFNAME={ifname} (the hosts' setting)", "MPIJob and PyTorchJob")
    assert bool(said) == warned, result.err
    host_network = render(tmp_path, capsys, {**overrides, f"{P}k8s_host_network": True,
                                             f"{P}mpijob_api_version": "kubeflow.org/v1"})  # fmt: skip
    # (the MPIJob's mpirun interfaces, eth0 by default, are compared with the hosts' value there: review round 37a)
    assert not host_network.problems("WARNING", "NCCL_SOCKET_IFNAME=", "(the hosts' setting)"), host_network.err


# --- finding 10: an INI inventory's list given as comma-separated text -------------------------------------------


def test_a_list_given_as_ini_text_gets_one_line_per_host_and_an_example_that_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`[cluster:vars] workload_manifests_rdma_device_files=rdma_cm,uverbs0` is one text. The hint suggested
    ["rdma_cm,uverbs0"], which is refused in turn (one device file named "rdma_cm,uverbs0"), and the plan named the
    same value again per host. The example is the list meant, and the value is named once per host."""
    ini = tmp_path / "hosts.ini"
    ini.write_text("[cluster]\nn1\nn2\n[cluster:vars]\nrdmaforge_fabric=erdma\nworkload_manifests_gpus_per_node=8\n"
                   "workload_manifests_rdma_device_files=rdma_cm,uverbs0\n")  # fmt: skip
    code = main(["render", "-i", str(ini), "-o", str(tmp_path / "out"), "--kind", "docker"])
    err = capsys.readouterr().err
    assert code == 64 and not (tmp_path / "out").exists(), err
    for host in ("n1", "n2"):
        lines = [line for line in err.splitlines() if line.startswith(f"{host}: {P}rdma_device_files")]
        assert len(lines) == 1, err
        assert lines[0].endswith('e.g. ["rdma_cm", "uverbs0"])'), lines
    followed = tmp_path / "followed.ini"
    followed.write_text(ini.read_text().replace("=rdma_cm,uverbs0", '=["rdma_cm", "uverbs0"]'))
    assert main(["render", "-i", str(followed), "-o", str(tmp_path / "out2"), "--kind", "docker"]) == 0
    capsys.readouterr()


# --- review round 34a: files render cannot read, named -------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "said"),
    [(b"workload_manifests_name: caf\xe9\n", "not UTF-8 text (byte 0xe9 at offset 28)"),
     (b"- workload_manifests_name: x\n", "holds a list, not a mapping")],
    ids=["latin-1", "top-level-list"],
)  # fmt: skip
def test_a_group_vars_file_render_cannot_read_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, said: str
) -> None:
    """A latin-1 group_vars file: Ansible's 'utf-8 codec can't encode character' named no file; a file holding a
    list: 'expected dicts but got a dict and a _AnsibleTaggedList'. Each is now its file and what it must be."""
    source = inventory(tmp_path, {})
    (source / "group_vars" / "all" / "zz.yml").write_bytes(content)
    assert main(["render", "-i", str(source), "-o", str(tmp_path / "out")]) == 64
    err = capsys.readouterr().err
    assert f"{source / 'group_vars' / 'all' / 'zz.yml'}: {said}" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["render", "-o", "out"], ["provision"]])
def test_an_ini_inventory_that_is_not_utf8_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Ansible reads a latin-1 INI inventory on, the byte a "?" or a lone surrogate in the value (review round 35:
    YAML files were checked, INI ones read with the byte replaced). Refused as a YAML file is, naming file and byte."""
    monkeypatch.chdir(tmp_path)
    ini = tmp_path / "hosts.ini"
    content = b"[cluster]\nnode1 ansible_host=127.0.0.1 ansible_port=9 rdmaforge_fabric=erdma label=caf\xe9\n"
    ini.write_bytes(content)
    assert main([command[0], "-i", str(ini), *command[1:]]) == 64
    err = capsys.readouterr().err
    assert f"{ini}: not UTF-8 text (byte 0xe9 at offset {content.index(0xE9)})" in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_a_vault_encrypted_value_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An inline !vault value reached render as {"__ansible_vault": ...}: "is dict ...; allowed: text"."""
    source = inventory(tmp_path, {})
    (source / "group_vars" / "all" / "zz.yml").write_text(
        "workload_manifests_name: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6638\n")
    assert main(["render", "-i", str(source), "-o", str(tmp_path / "out")]) == 64
    err = capsys.readouterr().err
    assert "workload_manifests_name is vault-encrypted, which render cannot decrypt" in err, err


@pytest.mark.parametrize("content", ["$ANSIBLE_VAULT;1.1;AES256\n6638\n3162\n", "[]\n", "~\n"],
                         ids=["whole-file-vault", "empty-list", "null"])  # fmt: skip
def test_a_vault_file_or_an_empty_value_is_no_problem_of_the_mapping_check(tmp_path: Path, content: str) -> None:
    """Review round 35: the mapping check (above) refused a file made by `ansible-vault encrypt`, which reads as one
    string, and so stopped every command (64). Ansible decrypts it, and ignores an empty value."""
    from rdmaforge.inventory_files import yaml_problems

    source = inventory(tmp_path, {})
    (source / "group_vars" / "all" / "vault.yml").write_text(content)
    assert [p for p in yaml_problems(source / "hosts.yml") if "vault.yml" in p] == []


# --- review round 37a, finding 5: values tagged !unsafe ----------------------------------------------------------


def test_a_value_tagged_unsafe_is_its_text_and_never_read_as_jinja(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ansible-inventory prints a value tagged !unsafe as {"__ansible_unsafe": ...}: render read that as a mapping
    ("is a mapping, and an environment variable holds text", "is dict ...; allowed: text"), and Jinja-looking text in
    it was refused as an expression, which Ansible never templates in an !unsafe value: it is the text."""
    source = inventory(tmp_path, {})
    (source / "group_vars" / "all" / "zz.yml").write_text(
        "workload_manifests_image: !unsafe nvcr.io/nvidia/pytorch:24.05-py3\n"
        "nccl_env_overrides: {NCCL_DEBUG: !unsafe WARN}\n"
        "workload_manifests_env: {MY_TAG: !unsafe 'run-{{ id }}'}\n"
        "workload_manifests_mpijob_hugepages_1gi: null\n"
    )
    out = tmp_path / "out"
    assert main(["render", "-i", str(source), "-o", str(out), "--kind", "docker", "--kind", "mpijob"]) == 0, (
        capsys.readouterr().err)  # fmt: skip
    script = (out / "docker" / NODES[0] / "rdmaforge-train.sh").read_text()
    assert "-e NCCL_DEBUG=WARN" in script and "-e 'MY_TAG=run-{{ id }}'" in script, script
    assert "nvcr.io/nvidia/pytorch:24.05-py3" in script
    worker = yaml.safe_load((out / "mpijob" / "rdmaforge-train.yaml").read_text())["spec"]["mpiReplicaSpecs"]["Worker"]
    env = {e["name"]: e["value"] for e in worker["template"]["spec"]["containers"][0]["env"]}
    assert env["MY_TAG"] == "run-{{ id }}" and env["NCCL_DEBUG"] == "WARN", env


def test_jinja_outside_an_unsafe_value_is_still_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = inventory(tmp_path, {})
    (source / "group_vars" / "all" / "zz.yml").write_text(
        "workload_manifests_env: {MY_TAG: !unsafe 'run-{{ id }}', OTHER: '{{ inventory_hostname }}'}\n")
    assert main(["render", "-i", str(source), "-o", str(tmp_path / "out"), "--kind", "docker"]) == 64
    err = capsys.readouterr().err
    assert f"{NODES[0]}: {P}env holds a Jinja expression" in err, err
    assert not (tmp_path / "out").exists()


def test_a_vault_encrypted_value_inside_a_host_variable_is_named_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = inventory(tmp_path, {})
    (source / "group_vars" / "all" / "zz.yml").write_text(
        "nccl_env_overrides:\n  NCCL_DEBUG: !vault |\n    $ANSIBLE_VAULT;1.1;AES256\n    6638\n")
    assert main(["render", "-i", str(source), "-o", str(tmp_path / "out")]) == 64
    err = capsys.readouterr().err
    assert f"{NODES[0]}: nccl_env_overrides is vault-encrypted, which render cannot decrypt" in err, err
