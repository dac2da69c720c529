"""`rdmaforge render` and role workload_manifests on hostile or unusual inputs (fuzz round 7a's findings).

* the node's net plugin (nccl_plugin_provider) judges NCCL_IB_DISABLE as preflight judges it;
* control characters in environment values are refused, and the systemd unit escapes those of other words;
* the container image must be a docker image reference (a leading '-' would be a `docker run` option);
* a symbolic link at an output path is refused, never written through;
* strings kubectl's YAML reader (go-yaml v2) or a YAML 1.2 reader would take for numbers are quoted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.cli import main
from rdmaforge.commands.render import host_inputs
from rdmaforge.inventory_checks import rdma_fallback_problems
from rdmaforge.paths import PROJECT_ROOT, ROLES_DIR
from rdmaforge.workloads import k8s
from rdmaforge.workloads.nodes import HostInput
from rdmaforge.workloads.options import PREFIX, nccl_env_profiles, role_defaults
from rdmaforge.workloads.plan import Plan, plan_from_hosts
from rdmaforge.workloads.render import environment, render_file, write_files

DEFAULTS = role_defaults()
PROFILES = nccl_env_profiles()
DEVICES = ["rdma_cm", "uverbs0", "uverbs1"]
# What Ansible's argument_specs check of role nccl_plugin accepts (preflight refuses anything else).
PLUGINS = yaml.safe_load((ROLES_DIR / "nccl_plugin/meta/argument_specs.yml").read_text())["argument_specs"]["main"][
    "options"
]["nccl_plugin_provider"]["choices"]
CONTROL_ALLOWED = "allowed: printable text, without tab, newline, carriage return or other control characters"


def host(name: str, /, fabric: str = "erdma", variables: dict[str, Any] | None = None, **options: Any) -> HostInput:
    values = {**DEFAULTS, f"{PREFIX}gpus_per_node": 8, f"{PREFIX}rdma_device_files": DEVICES}
    values.update({PREFIX + k: v for k, v in options.items()})
    return HostInput(name, values, {"rdmaforge_fabric": fabric, **(variables or {})})


def plan_of(*hosts: HostInput, kinds: list[str] | None = None) -> Plan:
    return plan_from_hosts(hosts, PROFILES, kinds)


def two_nodes(fabric: str = "erdma", variables: dict[str, Any] | None = None, **options: Any) -> Plan:
    return plan_of(*(host(n, fabric, variables, **options) for n in ("node1", "node2")))


# --- finding 1: the inventory's nccl_plugin_provider ------------------------------------------------


def cli_plan(inventory: dict[str, dict[str, Any]], kinds: list[str] | None = None) -> Plan:
    """The plan `rdmaforge render` makes of ``{host: variables}`` (ansible-inventory's hostvars)."""
    inputs, problems, _ = host_inputs(inventory)
    assert problems == []
    return plan_from_hosts(inputs, PROFILES, kinds)


def inventory_of(fabric: str, **variables: Any) -> dict[str, dict[str, Any]]:
    common = {"rdmaforge_fabric": fabric, f"{PREFIX}gpus_per_node": 8, f"{PREFIX}rdma_device_files": DEVICES}
    return {name: {**common, **variables} for name in ("node1", "node2")}


# Each fabric with a plugin other than its own (seed 002 / fabrics.py: aiacc on erdma, none on the others), where
# the fabric's default and the inventory's choice judge NCCL_IB_DISABLE=1 differently.
@pytest.mark.parametrize(
    ("fabric", "provider"),
    [("erdma", "none"), ("infiniband", "harp"), ("infiniband", "aiacc"), ("roce", "harp"), ("roce", "aiacc")],
)
def test_render_judges_ib_disable_with_the_inventorys_net_plugin_as_preflight_does(fabric: str, provider: str) -> None:
    variables = {"nccl_plugin_provider": provider, "nccl_env_overrides": {"NCCL_IB_DISABLE": 1}}
    # NCCL falls back to sockets only with IB off and no plugin to carry RDMA (a plugin replaces IB)
    refused_by_preflight = bool(rdma_fallback_problems("node1", {"rdmaforge_fabric": fabric, **variables}))
    assert refused_by_preflight == (provider == "none")
    plan = cli_plan(inventory_of(fabric, **variables), kinds=["docker", "mpijob"])
    on_hosts = [p for p in plan.problems if "NCCL_IB_DISABLE" in p and "NCCL settings (rdmaforge_fabric=" in p]
    assert [line.split(":", 1)[0] for line in on_hosts] == (["node1", "node2"] if refused_by_preflight else [])
    assert all(f"nccl_plugin_provider={provider})" in line for line in on_hosts), on_hosts
    # The containers load no plugin, whichever the hosts have (review round 37a): one line per node in either case.
    refused = [p for p in plan.problems if "NCCL_IB_DISABLE" in p]
    assert [line.split(":", 1)[0] for line in refused] == ["node1", "node2"], refused
    assert plan.files == []


def test_the_reports_two_cases_erdma_without_plugin_refused_infiniband_with_harp_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    erdma = _inventory(tmp_path / "erdma", {"rdmaforge_fabric": "erdma", "nccl_plugin_provider": "none",
                                            "nccl_env_overrides": {"NCCL_IB_DISABLE": 1}})  # fmt: skip
    assert main(["render", "-i", str(erdma), "--kind", "docker", "-o", str(tmp_path / "out1")]) == 64
    err = capsys.readouterr().err
    assert "n1: NCCL settings (rdmaforge_fabric=erdma, nccl_plugin_provider=none): NCCL_IB_DISABLE='1'" in err, err
    assert not (tmp_path / "out1").exists()
    # harp carries RDMA on the hosts (preflight accepts it), but the docker container does not load the host's
    # plugin (review round 37a): refused there too, naming the container and the plugin.
    infiniband = _inventory(tmp_path / "infiniband", {"rdmaforge_fabric": "infiniband", "nccl_plugin_provider": "harp",
                                                      "nccl_env_overrides": {"NCCL_IB_DISABLE": 1}})  # fmt: skip
    assert main(["render", "-i", str(infiniband), "--kind", "docker", "-o", str(tmp_path / "out2")]) == 64
    err = capsys.readouterr().err
    assert ("n1: NCCL settings in the docker container (rdmaforge_fabric=infiniband): NCCL_IB_DISABLE='1'" in err
            and "(nccl_plugin_provider=harp) is installed on the host" in err), err  # fmt: skip
    assert not (tmp_path / "out2").exists()


# --- review round 37a, finding 1: the containers load no net plugin -------------------------------------------


@pytest.mark.parametrize("provider", [None, *PLUGINS])  # None: unset, erdma's own (aiacc)
@pytest.mark.parametrize("kind", ["docker", "mpijob", "pytorchjob"])
def test_the_containers_are_judged_without_the_hosts_net_plugin(kind: str, provider: str | None) -> None:
    """nccl_env_profile: tcp (NCCL_IB_DISABLE: 1 in role nccl_env's profiles) on eRDMA rendered with exit 0: the
    hosts' aiacc carries RDMA there, but role nccl_plugin installs it on the host and registers it with ld.so
    (README, nccl_plugin), and no container mounts it: NCCL in the container uses TCP sockets without a word."""
    variables: dict[str, Any] = {"nccl_env_profile": "tcp"}
    if provider is not None:
        variables["nccl_plugin_provider"] = provider
    plan = cli_plan_unchecked(inventory_of("erdma", **variables), [kind])
    lines = [p for p in plan.problems if "NCCL_IB_DISABLE" in p]
    assert [line.split(":", 1)[0] for line in lines] == ["node1", "node2"], plan.problems
    assert all("allowed: NCCL_IB_DISABLE unset or 0" in line for line in lines), lines
    assert plan.files == []
    # Removed from the containers' settings only (the hosts keep the profile's): written.
    plan = cli_plan_unchecked(inventory_of("erdma", **variables, **{f"{PREFIX}env": {"NCCL_IB_DISABLE": None}}),
                              [kind])  # fmt: skip
    assert plan.problems == [] and plan.files, plan.problems


@pytest.mark.parametrize("value", ["aiac", "None", None, "", ["aiacc"], 1])
def test_a_net_plugin_the_role_does_not_offer_is_refused_naming_the_choices(value: Any) -> None:
    plan = cli_plan(inventory_of("erdma", nccl_plugin_provider=value))
    lines = [p for p in plan.problems if p.startswith("node1: nccl_plugin_provider=")]
    assert len(lines) == 1, plan.problems
    assert f"allowed: {', '.join(PLUGINS)}" in lines[0]


def _workloads_filter() -> Any:
    path = PROJECT_ROOT / "filter_plugins/rdmaforge_workloads.py"
    spec = importlib.util.spec_from_file_location("_rdmaforge_workloads", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_roles_filter_hands_the_net_plugin_over_from_hostvars() -> None:
    options = {**DEFAULTS, f"{PREFIX}gpus_per_node": 8, f"{PREFIX}rdma_device_files": DEVICES,
               f"{PREFIX}kinds": ["docker"]}  # fmt: skip
    hostvars = {
        name: {"rdmaforge_fabric": "erdma", "nccl_plugin_provider": "none",
               "nccl_env_overrides": {"NCCL_IB_DISABLE": 1}, "workload_manifests_node_input": {"options": options}}
        for name in ("node1", "node2")
    }  # fmt: skip
    planned = _workloads_filter().workload_plan(["node1", "node2"], hostvars, PROFILES)
    assert planned["files"] == []
    assert any("nccl_plugin_provider=none" in p and "NCCL_IB_DISABLE" in p for p in planned["problems"])


# --- finding 4: control characters in values --------------------------------------------------------


@pytest.mark.parametrize("char", ["\r", "\t", "\n", "\x00", "\x1b", "\x7f", "\x85", "\u2028"])
def test_a_control_character_in_an_environment_value_is_refused_naming_host_and_variable(char: str) -> None:
    value = f"x{char}ExecStartPost=/bin/touch /tmp/pwned"
    plan = two_nodes(env={"MY_TAG": value})
    assert plan.files == []
    lines = [p for p in plan.problems if "MY_TAG" in p]
    # workload_manifests_env is the whole cluster's: one line, not one per node
    assert lines == [f"node1: workload_manifests_env.MY_TAG={value!r} holds the control character {char!r}; "
                     f"{CONTROL_ALLOWED}"], plan.problems  # fmt: skip
    plan = two_nodes(variables={"nccl_env_overrides": {"NCCL_SOCKET_IFNAME": f"eth0{char}"}})
    lines = [p for p in plan.problems if "NCCL_SOCKET_IFNAME" in p]
    assert [line.split(":", 1)[0] for line in lines] == ["node1", "node2"], plan.problems
    assert all("nccl_env_overrides.NCCL_SOCKET_IFNAME=" in line and CONTROL_ALLOWED in line for line in lines)


def test_a_control_character_in_a_profile_of_the_inventory_is_named_by_its_profile() -> None:
    profiles = {**PROFILES, "erdma": {**PROFILES["erdma"], "NCCL_SOCKET_IFNAME": "eth0\r"}}
    plan = plan_of(host("node1", variables={"nccl_env_profiles": profiles}))
    assert [p for p in plan.problems if "NCCL_SOCKET_IFNAME" in p] == [
        f"node1: nccl_env_profiles[erdma].NCCL_SOCKET_IFNAME='eth0\\r' holds the control character '\\r'; "
        f"{CONTROL_ALLOWED}"
    ]


def test_a_nul_in_a_command_word_is_refused() -> None:
    plan = two_nodes(command=["python", "train.py\x00--evil"])
    assert plan.files == []
    assert any(p.startswith("node1: workload_manifests_command=") and "NUL" in p for p in plan.problems), plan.problems


CONTROL_WORD = "a\rExecStartPost=/bin/touch /tmp/pwned\tb\x01c\x7fd\x1be"


def _unit(tmp_path: Path, plan: Plan) -> Path:
    unit = next(f for f in plan.files if f.path == "docker/node1/rdmaforge-train.service")
    path = tmp_path / "rdmaforge-train.service"
    path.write_text(render_file(environment(), unit), newline="")
    return path


def test_the_unit_escapes_control_characters_of_command_words() -> None:
    plan = plan_of(host("node1", command=["python", CONTROL_WORD], kinds=["docker"]))
    assert plan.problems == []
    unit = next(f for f in plan.files if f.path.endswith(".service"))
    text = render_file(environment(), unit)
    # systemd's unit reader ends a line at \r as at \n: no raw control character may be left but the line ends
    assert not [c for c in text if (ord(c) < 0x20 or c == "\x7f") and c != "\n"]
    assert '"a\\rExecStartPost=/bin/touch /tmp/pwned\\tb\\x01c\\x7fd\\x1be"' in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_a_unit_with_control_characters_in_its_words(tmp_path: Path) -> None:
    # docker_binary: a binary that exists here; docker.service: a stub beside the unit, which verify also reads
    plan = plan_of(host("node1", command=["python", CONTROL_WORD], kinds=["docker"], docker_binary="/bin/true"))
    assert plan.problems == []
    unit = _unit(tmp_path, plan)
    (tmp_path / "docker.service").write_text("[Service]\nExecStart=/bin/true\n")
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and "rdmaforge-train.service" not in proc.stdout + proc.stderr, proc.stderr


# --- finding 7: the container image ------------------------------------------------------------------

IMAGE_ALLOWED = "allowed: a docker image reference"


@pytest.mark.parametrize(
    "image",
    [
        "--privileged",
        "-v",
        "nvcr.io/nvidia/pytorch:24.05-py3 -v /:/host",
        "nvcr.io/nvidia/pytorch:24.05-py3\n--volume=/:/host",
        "nvcr.io/nvidia/pytorch:24.05-py3\n",
        "nvcr.io/nvidia/pytorch:24.05-py3\r",
        "nvcr.io/nvidia/pytorch\t:24.05-py3",
        "nvcr.io/nvidia/pytorch:24.05-py3\x00",
        "nvcr.io/NVIDIA/pytorch:24.05-py3",
        "nvcr.io/nvidia/pytorch:",
        " nvcr.io/nvidia/pytorch:24.05-py3",
    ],
)
def test_an_image_that_is_no_image_reference_is_refused(image: str) -> None:
    plan = two_nodes(image=image, command=["ubuntu:22.04", "bash"])
    assert plan.files == []
    lines = [p for p in plan.problems if p.startswith(f"node1: workload_manifests_image={image!r}")]
    assert len(lines) == 1 and IMAGE_ALLOWED in lines[0], plan.problems


@pytest.mark.parametrize(
    ("image", "look_alike"),
    [
        ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch:24.05 -py3"),  # the role's default
        ("ubuntu", "-ubuntu"),
        ("localhost:5000/team/train:v1.2_rc-3", "localhost:5000/team/train:v1.2_rc-3\n"),
        ("registry.cn-hangzhou.aliyuncs.com/ns/train@sha256:" + "0" * 64,
         "registry.cn-hangzhou.aliyuncs.com/ns/train@sha256:" + "0" * 64 + " --privileged"),
    ],
)  # fmt: skip
def test_image_references_are_accepted_and_their_look_alikes_refused(image: str, look_alike: str) -> None:
    assert two_nodes(image=image).problems == []
    refused = two_nodes(image=look_alike).problems
    assert any(p.startswith(f"node1: workload_manifests_image={look_alike!r}") for p in refused), refused


def test_a_name_with_a_final_newline_is_refused() -> None:
    # A pattern's $ matches before a final newline: the name would become file names and metadata.name.
    plan = two_nodes(name="rdmaforge-train\n")
    assert any(p.startswith("node1: workload_manifests_name='rdmaforge-train\\n' is not valid") for p in plan.problems)


# --- finding 3: symbolic links under -o ---------------------------------------------------------------


def _inventory(root: Path, variables: dict[str, Any] | None = None) -> Path:
    (root / "group_vars" / "all").mkdir(parents=True)
    hosts: dict[str, Any] = {"all": {"children": {"cluster": {"hosts": {"n1": {}, "n2": {}}}}}}
    (root / "hosts.yml").write_text(yaml.safe_dump(hosts))
    values = {"rdmaforge_fabric": "tcp", f"{PREFIX}gpus_per_node": 8, f"{PREFIX}kinds": ["acs", "docker"],
              f"{PREFIX}acs_gpu_model": "GU8TF", f"{PREFIX}rdma_device_files": DEVICES}  # fmt: skip
    values.update(variables or {})
    (root / "group_vars" / "all" / "main.yml").write_text(yaml.safe_dump(values))
    return root / "hosts.yml"


@pytest.mark.parametrize("kind", ["to a file", "dangling", "to a directory"])
def test_a_symbolic_link_at_an_output_path_is_refused_and_nothing_outside_is_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    inventory = _inventory(tmp_path / "inventory")
    out, outside = tmp_path / "out", tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious data\n")
    victim.chmod(0o600)
    (out / "acs").mkdir(parents=True)
    if kind == "to a directory":
        link, shown = out / "docker", "docker"
        link.symlink_to(outside)
    else:
        link, shown = out / "acs/rdmaforge-train.yaml", "acs/rdmaforge-train.yaml"
        link.symlink_to(victim if kind == "to a file" else outside / "created")
    assert main(["render", "-i", str(inventory), "-o", str(out)]) == 64
    err = capsys.readouterr().err
    assert f"-o {out}: {shown} is a symbolic link (to {os.readlink(link)})" in err, err
    assert "refused, the link left as it is" in err and "nothing written" in err
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert victim.read_text() == "precious data\n" and victim.stat().st_mode & 0o777 == 0o600
    assert link.is_symlink()


def test_write_replaces_a_link_at_a_path_never_writes_through_it(tmp_path: Path) -> None:
    plan = plan_of(host("node1", "tcp", kinds=["docker"]))
    victim = tmp_path / "victim"
    victim.write_text("precious data\n")
    victim.chmod(0o600)
    out = tmp_path / "out"
    (out / "docker/node1").mkdir(parents=True)
    (out / "docker/node1/rdmaforge-train.sh").symlink_to(victim)
    (out / "docker/node1/rdmaforge-train.service").symlink_to(tmp_path / "created")
    write_files(plan, out)
    assert victim.read_text() == "precious data\n" and victim.stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "created").exists()
    script = out / "docker/node1/rdmaforge-train.sh"
    assert not script.is_symlink() and script.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in (out / "docker/node1").iterdir()) == ["rdmaforge-train.service", "rdmaforge-train.sh"]


# --- finding 2: strings other YAML readers take for numbers ----------------------------------------

#: Strings of the report (fuzz7a case 04) that PyYAML reads as strings, go-yaml v2 (kubectl) as numbers or booleans.
NUMBER_LIKE = ["1e-4", "3e-4", "1e9", "1e+3", "08", "09", "0o17", "y", "N", "2024-1-2", "1_0e3", "-.5e3"]
#: Strings that must stay plain (the files stay as they were).
PLAIN = ["train.py", "--lr", "nvcr.io/nvidia/pytorch:24.05-py3", "eth0", "=mlx5_0:1", "1.2.3", "0xg", "e9", "_1"]


@pytest.mark.parametrize("text", NUMBER_LIKE)
def test_number_like_strings_are_quoted_and_others_stay_plain(text: str) -> None:
    assert k8s.to_yaml({"value": text, "plain": PLAIN}) == (
        f"---\nvalue: '{text}'\nplain:\n" + "".join(f"  - {word}\n" for word in PLAIN)
    )


def test_a_yaml_1_2_reader_reads_back_every_string() -> None:
    from ruamel.yaml import YAML

    strings = [*NUMBER_LIKE, *PLAIN, "a\x85b", "a\u2028b"]
    assert YAML(typ="safe", pure=True).load(k8s.to_yaml({"values": strings})) == {"values": strings}
    assert yaml.safe_load(k8s.to_yaml({"values": strings})) == {"values": strings}


def _manifests_text(plan: Plan) -> dict[str, str]:
    env = environment()
    return {f.path: render_file(env, f) for f in plan.files if f.path.endswith(".yaml")}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_reads_the_inventorys_strings_as_strings(tmp_path: Path) -> None:
    # The report's realistic inputs: a learning rate in the script's arguments and in the environment.
    plan = two_nodes("tcp", pytorchjob_script=["train.py", "--lr", "1e-4", "--seed", "08"],
                     env={"LR": "3e-4", "STEPS": "1e9", "MODE": "0o17"}, kinds=["pytorchjob", "mpijob"])  # fmt: skip
    assert plan.problems == []
    for path, text in _manifests_text(plan).items():
        file = tmp_path / path.replace("/", "_")
        file.write_text(text)
        # --local: kubectl reads the file with its own YAML reader and prints it as JSON, without a cluster
        proc = subprocess.run(["kubectl", "label", "--local", "-f", str(file), "checked=yes", "-o", "json"],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        read = json.loads(proc.stdout)
        containers = [c for key, spec in read["spec"].items() if key.endswith("ReplicaSpecs")
                      for replica in spec.values() for c in replica["template"]["spec"]["containers"]]  # fmt: skip
        assert containers, read
        for container in containers:
            env = {e["name"]: e["value"] for e in container["env"]}
            assert (env["LR"], env["STEPS"], env["MODE"]) == ("3e-4", "1e9", "0o17"), path
        words = [w for c in containers for w in [*c.get("command", []), *c.get("args", [])]]
        assert all(isinstance(w, str) for w in words), words
        if path.startswith("pytorchjob/"):
            assert "1e-4" in words and "08" in words


# --- finding 5: ACS type-1 pods and the hosts' NCCL_IB_HCA -------------------------------------------


@pytest.mark.parametrize("hca", ["=erdma_0,erdma_1", "erdma", "^mlx5", "=mlx5", "mlx5_bond_0"])
def test_type1_acs_pods_refuse_an_ib_hca_that_selects_no_mlx5_device(hca: str) -> None:
    # seed 002: type 1 (GU8TF) pods reach their RDMA NIC as mlx5 (NCCL_IB_HCA=mlx5); other names match nothing there
    plan = two_nodes(variables={"nccl_env_overrides": {"NCCL_IB_HCA": hca, "NCCL_SOCKET_IFNAME": "bond0"}},
                     kinds=["acs"], acs_gpu_model="GU8TF")  # fmt: skip
    assert plan.files == []
    lines = [p for p in plan.problems if p.startswith(f"node1: NCCL_IB_HCA={hca!r}")]
    assert len(lines) == 1 and "selects no mlx5 device" in lines[0] and "allowed:" in lines[0], plan.problems
    # an HCA list that selects mlx5 devices (seed 002's, or exact names with ports) is the pods' own
    for own in ("mlx5", "=mlx5_0:1,mlx5_1:1", "^=mlx5_3"):
        plan = two_nodes(variables={"nccl_env_overrides": {"NCCL_IB_HCA": own}}, kinds=["acs"], acs_gpu_model="GU8TF")
        assert plan.problems == [], plan.problems


@pytest.mark.parametrize(("misspelled", "meant"), [("nccl_env_overides", "nccl_env_overrides"),
                                                   ("workload_manifest_shm_size", "workload_manifests_shm_size")])
def test_a_misspelled_variable_is_refused_as_preflight_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], misspelled: str, meant: str
) -> None:
    """render ignored them without a word (the second lacks the role's prefix, so not even a warning), while
    preflight names both: the files were written without the settings the user meant."""
    inventory = _inventory(tmp_path / "inv", {misspelled: {"NCCL_DEBUG": "INFO"} if "env" in misspelled else "16g"})
    assert main(["render", "-i", str(inventory), "--kind", "docker", "-o", str(tmp_path / "out")]) == 64
    err = capsys.readouterr().err
    said = f"n1: {misspelled} is not a variable rdmaforge reads, so its value would be ignored (did you mean {meant!r}?"
    assert said in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("acs_cpu", "-128", "acs_cpu='-128'"),
        ("mpijob_memory", "-100Gi", "mpijob_memory='-100Gi'"),
        ("k8s_extra_resources", {"rdma/hca": "-1"}, "has rdma/hca='-1'"),
        ("mpijob_host_paths", [{"name": "sys", "path": "/sys"}, {"name": "sys", "path": "/proc"}], "names sys twice"),
        ("mpijob_host_paths", [{"name": "dshm", "path": "/data"}], "names dshm twice"),
        ("mpijob_host_paths", [{"name": "shm", "path": "/dev/shm/"}], "names /dev/shm twice"),
    ],
)
def test_objects_the_api_server_refuses_are_refused_by_render(option: str, value: object, said: str) -> None:
    """Negative resource quantities and a volume name or mount path given twice (with the shared memory volume
    dshm at /dev/shm among them) were written, and --validate printed 'valid': the API server refuses each."""
    plan = two_nodes("tcp", kinds=["acs", "mpijob"], **{option: value})
    lines = [p for p in plan.problems if f"{PREFIX}{option}" in p]
    assert lines and said in lines[0], plan.problems
    assert not plan.files


def test_lower_case_environment_names_are_environment_names() -> None:
    """workload_manifests_env: {http_proxy: ...} (the usual spelling; the role's defaults say non-NCCL names are
    fine) was refused as 'not a valid environment variable name (allowed: A-Z, 0-9, _)'."""
    plan = two_nodes("tcp", kinds=["docker"], env={"http_proxy": "http://proxy.example:3128", "no_proxy": "localhost"})
    assert plan.problems == []
    assert "-e http_proxy=http://proxy.example:3128" in render_file(environment(), plan.files[0])
    bad = two_nodes("tcp", kinds=["docker"], env={"1PROXY": "x"})
    assert any("'1PROXY' is not a valid environment variable name" in p for p in bad.problems)


@pytest.mark.parametrize("version", ["1.33; rm -rf /", "1.33x", " 1.33"])
def test_a_kubernetes_version_that_is_no_version_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    """--kubernetes-version '1.33; rm -rf /' was read as 1.33 (major.minor only) and echoed in the verdict."""
    inventory = _inventory(tmp_path / "inv", {f"{PREFIX}kinds": ["mpijob"]})
    code = main(["render", "-i", str(inventory), "-o", str(tmp_path / "out"), "--validate",
                 "--kubernetes-version", version])  # fmt: skip
    assert code == 64
    assert f"--kubernetes-version {version}: kubernetes-validate" in capsys.readouterr().err


def test_an_empty_inventory_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-i '' (an unset shell variable) made Ansible read the current directory as the inventory."""
    with pytest.raises(SystemExit) as stop:
        main(["render", "-i", "", "-o", str(tmp_path / "out")])
    assert stop.value.code == 64
    assert "an empty inventory path" in capsys.readouterr().err


def test_a_value_of_another_type_says_what_is_allowed_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'allowed: a int' read as a typo."""
    inventory = _inventory(tmp_path / "inv", {f"{PREFIX}gpus_per_node": "eight"})
    assert main(["render", "-i", str(inventory), "--kind", "docker", "-o", str(tmp_path / "out")]) == 64
    err = capsys.readouterr().err
    assert 'n1: workload_manifests_gpus_per_node is str "eight"; allowed: a whole number (role' in err, err


# --- review round 17b: inputs that ended in an internal error (exit 70) ---------------------------------------


@pytest.mark.parametrize("size", [["1G"], {"1G": True}])
def test_a_hugepage_size_that_is_a_list_or_mapping_is_a_problem_not_a_crash(size: object) -> None:
    """`size not in HUGEPAGE_SIZES` on a list raised TypeError (unhashable): render exited 70."""
    plan = cli_plan_unchecked(inventory_of("erdma", hugepages_size=size), ["mpijob"])
    assert any("hugepages_size=" in p and "is not valid; allowed: 1G, 2M" in p for p in plan.problems), plan.problems


@pytest.mark.parametrize("variable", [f"{PREFIX}mpijob_hugepages_1gi", f"{PREFIX}k8s_extra_resources"])
def test_a_hugepages_quantity_too_large_to_divide_is_a_problem_not_a_crash(variable: str) -> None:
    """1e308 passes the quantity pattern; its remainder by a page overflowed Decimal's precision (InvalidOperation):
    render exited 70."""
    value: object = "1e308" if variable.endswith("_1gi") else {"hugepages-1Gi": "1e999", "memory": "1Gi"}
    plan = cli_plan_unchecked(inventory_of("erdma", **{variable: value}), ["mpijob"])
    assert any(re.search(r"is not a whole number of 1 ?Gi?B? pages", p) for p in plan.problems), plan.problems


def cli_plan_unchecked(inventory: dict[str, dict[str, Any]], kinds: list[str]) -> Plan:
    """cli_plan, the hosts' own problems added to the plan's."""
    inputs, problems, _ = host_inputs(inventory)
    plan = plan_from_hosts(inputs, PROFILES, kinds)
    plan.problems[:0] = problems
    return plan


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({"nccl_env_accelerator": "taco",
          "nccl_env_accelerators": {"none": {}, "taco": {"NCCL_ALGO": ["Ring", "Tree"]}}},
         'nccl_env_accelerators[taco].NCCL_ALGO=["Ring", "Tree"] is a list'),
        ({"nccl_env_profiles": {"erdma": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_ALGO": ["Ring", "Tree"]}}},
         'nccl_env_profiles[erdma].NCCL_ALGO=["Ring", "Tree"] is a list'),
        ({"nccl_env_profiles": {"erdma": None}}, "nccl_env_profiles[erdma]=null is not valid; allowed: a mapping"),
        ({"nccl_env_accelerators": {"none": None}},
         "nccl_env_accelerators[none]=null is not valid; allowed: a mapping"),
    ],
)  # fmt: skip
def test_lists_and_nulls_in_the_profile_or_accelerator_tables_are_problems(
    variables: dict[str, Any], says: str
) -> None:
    """Review round 17b: a list there was written as Python's repr (NCCL_ALGO=['Ring', 'Tree']), a null entry gave
    the containers none of the profile's settings; both exited 0, where role nccl_env fails on the same inventory."""
    plan = cli_plan_unchecked(inventory_of("erdma", **variables), ["docker"])
    assert any(says in p for p in plan.problems), plan.problems


def test_a_list_in_the_profile_that_an_override_replaces_is_no_problem() -> None:
    variables = {"nccl_env_profiles": {"erdma": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_ALGO": ["Ring", "Tree"]}},
                 "nccl_env_overrides": {"NCCL_ALGO": "Ring,Tree"}}  # fmt: skip
    plan = cli_plan_unchecked(inventory_of("erdma", **variables), ["docker"])
    assert not [p for p in plan.problems if "NCCL_ALGO" in p], plan.problems


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({f"{PREFIX}mpijob_memory": 100}, f"{PREFIX}mpijob_memory=100 is 100 bytes (a number without a unit is bytes)"),
        ({f"{PREFIX}acs_memory": "512"}, f"{PREFIX}acs_memory='512' is 512 bytes"),
        ({f"{PREFIX}acs_cpu": 0}, f"{PREFIX}acs_cpu=0 is no CPU at all"),
        ({"nccl_env_overrides": ""}, "nccl_env_overrides='' is not valid; allowed: a mapping"),
        ({"nccl_env_ib_hca_from_topology": "maybe"}, "nccl_env_ib_hca_from_topology='maybe' is not valid"),
        ({"nccl_env_strict_names": True, "nccl_env_overrides": {"NCCL_IB_HCAS": "mlx5_0"}},
         "NCCL_IB_HCAS unknown to NCCL (typo?)"),
    ],
)  # fmt: skip
def test_values_role_nccl_env_or_kubernetes_refuse_are_problems(variables: dict[str, Any], says: str) -> None:
    """Review round 17b: accepted silently (exit 0, --validate said valid): a memory limit of 100 bytes beside 50Gi of
    huge pages, 0 CPUs, overrides of '' read as none, 'maybe' read as false, and a misspelled NCCL name only warned
    of with nccl_env_strict_names: true, where role nccl_env and preflight stop."""
    plan = cli_plan_unchecked(inventory_of("erdma", **variables), ["acs", "mpijob"])
    assert any(says in p for p in plan.problems), plan.problems


@pytest.mark.parametrize(("value", "refused"), [("bond0", True), (None, True), ("=eth1", True), ("eth", False),
                                                ("=eth0", False), ("^hpn,lo", False), ("^=eth0,lo", True),
                                                ("hpn", True)])  # fmt: skip
def test_acs_pods_are_warned_of_a_socket_interface_that_misses_eth0(value: object, refused: bool) -> None:
    """Seed 002 sets NCCL_SOCKET_IFNAME=eth0 on ACS (its pods have eth0 and hpn0): the hosts' bond0, or the setting
    removed, went into the ACS pods without a word, where the MPIJob pods got a warning for the same value."""
    plan = cli_plan_unchecked(inventory_of("acs_type1", nccl_env_overrides={"NCCL_SOCKET_IFNAME": value}), ["acs"])
    # A warning, as for the MPIJob pods: render still writes (the default kinds include acs on every fabric).
    found = [w for w in plan.warnings if "goes into the ACS pods, whose socket interface is eth0 (seed 002)" in w]
    assert bool(found) == refused and not plan.problems, (plan.warnings, plan.problems)


# --- review round 37a, finding 2: the extra resources' quantities --------------------------------------------


@pytest.mark.parametrize(
    ("resources", "says"),
    [
        # The memory floor and the CPUs of the options that set the same limits (mpijob_memory, acs_cpu): 100 bytes,
        # 0 CPUs (seed 004 writes 100Gi, seed 002 128).
        ({"memory": "100"}, "has memory='100', which is 100 bytes (a number without a unit is bytes); allowed: for "
                            "memory, a memory quantity of 64Mi or more"),
        ({"memory": 1000}, "has memory=1000, which is 1000 bytes"),
        ({"cpu": "0"}, "has cpu='0', which is no CPU at all; allowed: for cpu, a positive CPU quantity"),
        ({"cpu": "0m"}, "has cpu='0m', which is no CPU at all"),
        # The API server counts an extended resource in whole units (ValidateResourceRequirements).
        ({"rdma/hca": "500m"}, "has rdma/hca='500m', which is not a whole number"),
        ({"example.com/foo": "1.5"}, "has example.com/foo='1.5', which is not a whole number"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("kind", ["mpijob", "pytorchjob"])
def test_an_extra_resource_is_held_to_the_rules_of_the_dedicated_options(
    kind: str, resources: dict[str, object], says: str
) -> None:
    """Only the names and the quantity syntax were checked: 100 bytes of memory, 0 CPUs and half an RDMA device were
    written (--validate called the first two valid and failed the third only after writing it)."""
    extra = {**resources, "rdma/hca": resources.get("rdma/hca", 1)}  # the pods' RDMA device plugin
    variables: dict[str, Any] = {f"{PREFIX}k8s_extra_resources": extra, f"{PREFIX}mpijob_memory": None}
    plan = cli_plan_unchecked(inventory_of("erdma", **variables), [kind])
    lines = [p for p in plan.problems if p.startswith(f"node1: {PREFIX}k8s_extra_resources=") and says in p]
    assert len(lines) == 1, plan.problems
    assert plan.files == []


@pytest.mark.parametrize("resources", [{"memory": "64Mi", "cpu": "500m", "rdma/hca": 1},
                                       {"memory": "100Gi", "cpu": 128, "rdma/hca": "2", "example.com/foo": "0"}])
def test_extra_resources_within_the_rules_are_written(resources: dict[str, object]) -> None:
    variables = {f"{PREFIX}k8s_extra_resources": resources, f"{PREFIX}mpijob_memory": None}
    plan = cli_plan_unchecked(inventory_of("erdma", **variables), ["mpijob", "pytorchjob"])
    assert plan.problems == [] and plan.files, plan.problems


# --- review round 37a, finding 3: the MPIJob's mpirun interfaces ---------------------------------------------

_MPI_WARNING = f"{PREFIX}mpijob_tcp_if_include="


@pytest.mark.parametrize(
    ("host_network", "ifname", "interfaces", "says"),
    [
        # The pod network: a pod has lo and the CNI's eth0 (Open MPI matches names exactly; a CIDR is not judged).
        (False, "eth0", "eth0", None),
        (False, "eth0", "eth0,bond0", None),
        (False, "eth0", "bond0", "Open MPI would find none of them there"),
        (False, "eth0", "lo", "Open MPI would use lo alone"),
        (False, "eth0", "10.0.0.0/8", None),
        # The node's network: the hosts' socket interface is the one their NCCL_SOCKET_IFNAME selects.
        (True, "bond0", "eth0", "names no interface the hosts' NCCL_SOCKET_IFNAME=bond0 selects"),
        (True, "=bond0", "lo", "names no interface the hosts' NCCL_SOCKET_IFNAME==bond0 selects"),
        (True, "bond0", "bond0", None),
        (True, "=bond0", "eth0,bond0", None),
        (True, "^docker,lo", "eth0", None),
        (True, None, "eth0", None),  # unset: NCCL chooses by the node's interfaces, which render does not know
    ],
)  # fmt: skip
def test_the_mpijobs_interfaces_are_warned_of_as_nccls_are(
    host_network: bool, ifname: str | None, interfaces: str, says: str | None
) -> None:
    """NCCL_SOCKET_IFNAME had a pod-network warning; the MPIJob's own `--mca btl_tcp_if_include/oob_tcp_if_include`
    none, on the pod network or the node's."""
    variables = {"nccl_env_overrides": {"NCCL_SOCKET_IFNAME": ifname}, f"{PREFIX}k8s_host_network": host_network,
                 f"{PREFIX}mpijob_tcp_if_include": interfaces, f"{PREFIX}mpijob_api_version": "kubeflow.org/v1",
                 f"{PREFIX}mpijob_hugepages_1gi": None}  # fmt: skip
    plan = cli_plan_unchecked(inventory_of("erdma", **variables), ["mpijob"])
    assert plan.problems == [] and plan.files, plan.problems
    warned = [w for w in plan.warnings if w.startswith(f"node1: {_MPI_WARNING}{interfaces} ")]
    assert len(warned) == (says is not None) and all(says in w for w in warned), plan.warnings
    # The PyTorchJob runs no mpirun.
    assert not [w for w in cli_plan_unchecked(inventory_of("erdma", **variables), ["pytorchjob"]).warnings
                if _MPI_WARNING in w]  # fmt: skip


# --- review round 37a, finding 8: an environment variable name, named by its variable ----------------------------


def test_a_bad_environment_variable_name_is_named_by_the_variable_that_set_it() -> None:
    """'A=B' in workload_manifests_env was "NCCL settings: 'A=B' is not a valid environment variable name", naming
    no variable (docker's -e A=B=1 sets A). Named by workload_manifests_env, once (it is the cluster's), and one of
    nccl_env_overrides by that, per node."""
    plan = two_nodes(env={"A=B": "1", "MY_TAG": "x"}, variables={"nccl_env_overrides": {"1X": "y"}})
    assert plan.files == []
    names = [p for p in plan.problems if "is not a valid environment variable name" in p]
    assert [line.split(": ", 2)[:2] for line in names] == [
        ["node1", f"{PREFIX}env"], ["node1", "nccl_env_overrides"], ["node2", "nccl_env_overrides"]], names
    assert all("allowed: letters, digits and _" in line for line in names), names
    assert ("'A=B'" in names[0]) and ("'1X'" in names[1]), names
    assert not [p for p in plan.problems if "NCCL settings:" in p and "environment variable name" in p], plan.problems
