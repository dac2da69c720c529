"""Training workloads (rdmaforge.workloads, role workload_manifests, `rdmaforge render`).

Every kind is rendered for every fabric profile and validated (Kubernetes schemas, Kubeflow SDK models, the
MPIJob v2beta1 CRD schema); bad inputs must give one clear line naming host, variable, value and what is
allowed; the CLI runs end to end on a temporary inventory; and playbooks/workloads.yml runs for real against
this machine (ansible_connection=local) and must write byte-identical files to the CLI's.

Decision on RDMA fabrics whose node has no uverbs device: an error (NCCL would silently use TCP sockets),
a warning with workload_manifests_require_rdma_devices: false.
"""

from __future__ import annotations

import copy
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import recap, run_playbook

from rdmaforge.cli import main
from rdmaforge.inventory_checks import FABRICS
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.role_defaults import defaults
from rdmaforge.workloads import KINDS, docker, validate
from rdmaforge.workloads.nodes import HostInput, build_cluster
from rdmaforge.workloads.options import PREFIX, nccl_env_profiles, role_defaults
from rdmaforge.workloads.plan import Plan, plan_from_hosts
from tests.unit.redefined_defaults import redefine_default

DEFAULTS = role_defaults()
PROFILES = nccl_env_profiles()
DEVICES = ["rdma_cm", "uverbs0", "uverbs1"]
TYPE1_ENV = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "eth0"}
TYPE2_ENV = {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1", "NCCL_IB_HCA": "", "NCCL_SOCKET_IFNAME": "eth0"}
ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}  # facts of fake hosts stay out of the project's fact cache


def host(
    host_name: str,
    /,
    fabric: str = "erdma",
    gpus: int | None = 8,
    devices: list[str] | None = DEVICES,
    found: list[str] | None = None,
    variables: dict[str, Any] | None = None,
    **options: Any,
) -> HostInput:
    values = {**DEFAULTS, f"{PREFIX}gpus_per_node": gpus, f"{PREFIX}rdma_device_files": devices}
    values.update({PREFIX + k: v for k, v in options.items()})
    return HostInput(host_name, values, {"rdmaforge_fabric": fabric, **(variables or {})}, found)


def cluster_plan(*hosts: HostInput, kinds: list[str] | None = None) -> Plan:
    return plan_from_hosts(hosts, PROFILES, kinds)


def ok_plan(*hosts: HostInput, kinds: list[str] | None = None) -> Plan:
    plan = cluster_plan(*hosts, kinds=kinds)
    assert not plan.problems, plan.problems
    return plan


def manifest(plan: Plan, kind: str) -> dict[str, Any]:
    return next(doc for path, doc in plan.manifests.items() if path.startswith(f"{kind}/"))


def container(pod_template: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = pod_template["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def env_of(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c["env"]}


def single_problem(plan: Plan, *fragments: str) -> str:
    """The one problem line that contains every fragment (and nothing was planned for writing)."""
    assert plan.files == [], "a plan with problems must write nothing"
    matching = [p for p in plan.problems if all(f in p for f in fragments)]
    assert len(matching) == 1, f"expected one line with {fragments}, got:\n" + "\n".join(plan.problems)
    return matching[0]


# --- every kind, every profile, validated ----------------------------------------------------------


def _gpus_for(fabric: str) -> int:
    return 16 if fabric == "acs_type2" else 8  # the default ACS model follows the fabric: P16EN on type 2


#: Seed 002's ACS pods (GPU models with RDMA NIC type 1 or 2) are the only fabric profiles the ACS manifest is for.
ACS_FABRICS = ("acs_type1", "acs_type2")


@pytest.mark.parametrize("fabric", FABRICS)
def test_the_default_kinds_are_the_ones_that_apply_to_the_fabric(fabric: str) -> None:
    """workload_manifests_kinds left at its default renders docker and the Kubeflow jobs, and the ACS pod only on
    ACS's own profiles. It rendered acs for every fabric: a 4-GPU RoCE or tcp cluster's render stopped on "4 GPUs
    per pod is not supported with RDMA by ACS GPU model GU8TF", a manifest nobody asked for (review round 21c)."""
    assert defaults("workload_manifests")[f"{PREFIX}kinds"] == []
    gpus = _gpus_for(fabric) if fabric in ACS_FABRICS else 4
    plan = ok_plan(*(host(n, fabric, gpus) for n in ("node1", "node2")))
    kinds = {f.path.split("/")[0] for f in plan.files}
    assert kinds == ({"docker", "acs", "mpijob", "pytorchjob"} if fabric in ACS_FABRICS
                     else {"docker", "mpijob", "pytorchjob"}), kinds  # fmt: skip
    # Named, acs is rendered for any fabric (and its GPU counts are checked).
    named = cluster_plan(*(host(n, fabric, gpus) for n in ("node1", "node2")), kinds=["acs"])
    assert (fabric in ACS_FABRICS) == (not named.problems), named.problems
    if fabric not in ACS_FABRICS:
        assert named.files == [] and named.problems, named.problems
        assert all("4 GPUs per pod is not supported with RDMA by ACS GPU model" in p for p in named.problems)


@pytest.mark.parametrize("mpijob_api", ["kubeflow.org/v2beta1", "kubeflow.org/v1"])
@pytest.mark.parametrize("fabric", FABRICS)
def test_every_kind_renders_and_validates_for_every_profile(fabric: str, mpijob_api: str) -> None:
    gpus = _gpus_for(fabric)
    plan = ok_plan(*(host(n, fabric, gpus, mpijob_api_version=mpijob_api) for n in ("node1", "node2")),
                   kinds=list(KINDS))  # fmt: skip
    assert sorted(f.path for f in plan.files) == sorted(
        [
            "docker/node1/rdmaforge-train.sh",
            "docker/node1/rdmaforge-train.service",
            "docker/node2/rdmaforge-train.sh",
            "docker/node2/rdmaforge-train.service",
            "acs/rdmaforge-train.yaml",
            "mpijob/rdmaforge-train.yaml",
            "pytorchjob/rdmaforge-train.yaml",
        ]
    )
    for path, document in plan.manifests.items():
        assert validate.problems(document) == [], path
    # the containers get exactly the NCCL settings /etc/nccl.conf gets from role nccl_env on these nodes
    expected = {k: str(v) for k, v in PROFILES[fabric].items()}
    for kind in ("mpijob", "pytorchjob"):
        replicas = next(v for k, v in manifest(plan, kind)["spec"].items() if k.endswith("ReplicaSpecs"))
        for replica in replicas.values():
            assert env_of(container(replica["template"])) == expected
    assert manifest(plan, "mpijob")["apiVersion"] == mpijob_api


@pytest.mark.parametrize(
    ("model", "compute_class", "gpus", "profile_env"),
    [
        ("GU8TF", "gpu", 8, TYPE1_ENV),
        ("GU8TEF", "gpu", 8, TYPE1_ENV),
        ("GX8SF", "gpu", 8, TYPE1_ENV),
        ("P16EN", "gpu", 16, TYPE2_ENV),
        ("P16EN", "gpu-hpn", 4, TYPE2_ENV),
    ],
)
@pytest.mark.parametrize("acs_kind", ["Deployment", "Job"])
def test_acs_pods_carry_the_rdma_labels_and_the_models_nccl_settings(
    model: str, compute_class: str, gpus: int, profile_env: dict[str, str], acs_kind: str
) -> None:
    fabric = "acs_type2" if model == "P16EN" else "acs_type1"
    plan = ok_plan(
        *(
            host(n, fabric, gpus, acs_gpu_model=model, acs_compute_class=compute_class, acs_kind=acs_kind)
            for n in ("a", "b", "c")
        ),
        kinds=["acs"],
    )
    document = manifest(plan, "acs")
    assert validate.problems(document) == []
    assert document["kind"] == acs_kind
    template = document["spec"]["template"]
    assert template["metadata"]["labels"] == {
        "app": "rdmaforge-train",
        "alibabacloud.com/compute-class": compute_class,
        "alibabacloud.com/compute-qos": "default",
        "alibabacloud.com/gpu-model-series": model,
        "alibabacloud.com/hpn-type": "rdma",
    }
    c = container(template)
    assert env_of(c) == profile_env
    assert c["resources"]["limits"]["nvidia.com/gpu"] == str(gpus)
    assert c["resources"]["requests"] == c["resources"]["limits"]
    replicas = document["spec"]["replicas"] if acs_kind == "Deployment" else document["spec"]["parallelism"]
    assert replicas == 3


def test_acs_uses_the_models_profile_on_any_fabric_and_the_model_count_without_facts() -> None:
    # An eRDMA inventory rendered for ACS: the NCCL settings are the GPU model's, not eRDMA's; with no GPU
    # count known (no variable, no facts) the pod asks for what the model supports.
    plan = ok_plan(host("n1", "erdma", gpus=None, acs_gpu_model="P16EN"), kinds=["acs"])
    c = container(manifest(plan, "acs")["spec"]["template"])
    assert env_of(c) == TYPE2_ENV
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "16"


def test_acs_pods_keep_the_training_accelerators_settings_as_the_docker_container_does() -> None:
    """nccl_env_accelerator: taco (seed 004's NCCL_ALGO=RING and LightCC's LIGHT_*) reached the docker container
    but not the ACS pods, whose settings were the model's profile alone."""
    taco = defaults("nccl_env")["nccl_env_accelerators"]["taco"]
    plan = ok_plan(host("n1", "erdma", 8, variables={"nccl_env_accelerator": "taco"}, acs_gpu_model="GU8TF"),
                   kinds=["acs"])  # fmt: skip
    pod = env_of(container(manifest(plan, "acs")["spec"]["template"]))
    assert pod["NCCL_ALGO"] == "RING" and pod["LIGHT_INTRA_SIZE"] == "8", pod  # node_gpu_count: the pod's 8 GPUs
    assert {k for k in pod if k.startswith("LIGHT_")} == {k for k in taco if k.startswith("LIGHT_")}


def test_acs_without_the_models_profile_in_the_table_is_refused_not_rendered_with_no_settings() -> None:
    """An nccl_env_profiles of the user's own without acs_type2 gave the pods env: [] (--validate said valid)."""
    table = {"nccl_env_profiles": {"erdma": {"NCCL_SOCKET_IFNAME": "bond0"}}}
    plan = cluster_plan(host("n1", "erdma", 8, variables=table, acs_gpu_model="P16EN"), kinds=["acs"])
    line = single_problem(plan, "has no profile acs_type2")
    assert line.startswith("n1: nccl_env_profiles has no profile acs_type2, the NCCL settings of ACS GPU model P16EN")


# --- bad inputs: one clear line each, nothing written ----------------------------------------------


def test_gpu_count_4_is_refused_for_gu8tf() -> None:
    plan = cluster_plan(host("n1", "acs_type1", 4, acs_gpu_model="GU8TF"), kinds=["acs"])
    line = single_problem(plan, "GU8TF")
    assert line == (
        "n1: workload_manifests_gpus_per_node=4 GPUs per pod is not supported with RDMA by ACS GPU model GU8TF "
        "(RDMA NIC type 1, compute class gpu); allowed: 8 GPUs per pod, or no acs manifest (leave acs out of "
        "workload_manifests_kinds, or name the kinds with --kind)"
    )


def test_gpu_count_8_is_refused_for_p16en() -> None:
    plan = cluster_plan(host("n1", "acs_type2", 8, acs_gpu_model="P16EN"), kinds=["acs"])
    line = single_problem(plan, "P16EN")
    assert line.startswith("n1: workload_manifests_gpus_per_node=8 GPUs per pod")
    assert "allowed: 16 GPUs per pod, or no acs manifest" in line


def test_gpu_count_from_the_facts_is_named_as_such() -> None:
    facts = {"rdmaforge_node": {"gpu_count": 4}}
    plan = cluster_plan(host("n1", "acs_type1", gpus=None, variables=facts), kinds=["acs"])
    assert single_problem(plan, "GU8TF").startswith("n1: rdmaforge_node.gpu_count=4 GPUs per pod")


def test_gpu_hpn_is_p16en_only() -> None:
    plan = cluster_plan(host("n1", "acs_type1", 8, acs_compute_class="gpu-hpn"), kinds=["acs"])
    line = single_problem(plan, "acs_compute_class")
    assert "workload_manifests_acs_compute_class='gpu-hpn' has no RDMA for ACS GPU model GU8TF" in line
    assert line.endswith("allowed: gpu")


def test_unknown_gpu_model_is_refused_with_a_suggestion() -> None:
    plan = cluster_plan(host("n1", "acs_type1", 8, acs_gpu_model="GU8TX"), kinds=["acs"])
    line = single_problem(plan, "GU8TX")
    assert line == (
        "n1: workload_manifests_acs_gpu_model='GU8TX' is not an ACS GPU model with RDMA support (did you mean "
        "'GU8TF'?); allowed: GU8TF, GU8TEF, GX8SF (RDMA NIC type 1), P16EN (RDMA NIC type 2)"
    )


def test_gpu_model_of_the_other_nic_type_than_the_fabric_is_refused() -> None:
    plan = cluster_plan(host("n1", "acs_type1", 16, acs_gpu_model="P16EN"), kinds=["acs"])
    line = single_problem(plan, "rdmaforge_fabric")
    assert "has RDMA NIC type 2 (fabric profile acs_type2) but rdmaforge_fabric='acs_type1'" in line
    assert line.endswith("allowed with acs_type1: GU8TF, GU8TEF, GX8SF")


def test_p16en_needs_ib_disabled_and_an_empty_hca() -> None:
    overrides = {"nccl_env_overrides": {"NCCL_IB_HCA": "mlx5"}}
    plan = cluster_plan(host("n1", "acs_type2", 16, variables=overrides), kinds=["acs"])
    line = single_problem(plan, "NCCL_IB_HCA")
    assert line.startswith("n1: NCCL_IB_HCA='mlx5' (from nccl_env_overrides or workload_manifests_env) breaks RDMA")
    assert line.endswith("allowed: NCCL_IB_DISABLE='1', NCCL_IB_HCA='' (RDMA NIC type 2)")


def test_unknown_fabric_is_refused() -> None:
    plan = cluster_plan(host("n1", "ethernet"))
    line = single_problem(plan, "rdmaforge_fabric")
    assert line == (
        "n1: rdmaforge_fabric='ethernet' is not a known fabric profile; "
        "allowed: erdma, infiniband, roce, acs_type1, acs_type2, tcp"
    )


def test_an_unknown_fabric_gets_no_warning_of_the_fabric_it_was_not_given() -> None:
    """The device list of a node whose fabric is refused is not judged as if the node were on tcp: a warning naming
    rdmaforge_fabric='tcp' would name a value nobody set."""
    plan = cluster_plan(host("n1", "carrier", devices=["rdma_cm", "uverbs0"]), kinds=["docker"])
    assert plan.problems == ["n1: rdmaforge_fabric='carrier' is not a known fabric profile; "
                             "allowed: erdma, infiniband, roce, acs_type1, acs_type2, tcp"]  # fmt: skip
    assert plan.warnings == []


@pytest.mark.parametrize("fabric", ["erdma", "infiniband", "roce", "acs_type1"])
def test_rdma_fabric_without_uverbs_devices_is_an_error(fabric: str) -> None:
    plan = cluster_plan(host("n1", fabric, devices=["rdma_cm"]), kinds=["docker"])
    line = single_problem(plan, "uverbs")
    assert line.startswith(f"n1: rdmaforge_fabric='{fabric}' uses RDMA but the docker container would get no uverbs")
    assert "workload_manifests_rdma_device_files: rdma_cm" in line
    assert line.endswith("or workload_manifests_require_rdma_devices: false")


@pytest.mark.parametrize("kind", ["acs", "mpijob", "pytorchjob"])
def test_the_docker_device_list_is_not_asked_of_kubernetes_kinds(kind: str) -> None:
    """Seed 002's ACS pods (GU8TF, NIC type 1) are on managed Kubernetes: there are no hosts to list devices of, and
    `render --kind acs` refused the example for want of the docker container's uverbs list (fuzz 14)."""
    plan = ok_plan(host("n1", "acs_type1", devices=None, acs_gpu_model="GU8TF"),
                   host("n2", "acs_type1", devices=None, acs_gpu_model="GU8TF"), kinds=[kind])  # fmt: skip
    assert plan.files and not any("docker container" in w for w in plan.warnings)
    docker = cluster_plan(host("n1", "acs_type1", devices=None, acs_gpu_model="GU8TF"), kinds=["docker", kind])
    assert any("the docker container would get no uverbs" in p for p in docker.problems)


def test_rdma_fabric_without_uverbs_devices_is_a_warning_when_not_required() -> None:
    plan = ok_plan(host("n1", "erdma", devices=[], require_rdma_devices=False), kinds=["docker"])
    assert any("would get no uverbs device" in w and "not an error" in w for w in plan.warnings)
    assert plan.files


def test_cli_without_device_list_says_what_to_set() -> None:
    plan = cluster_plan(host("n1", "erdma", devices=None), kinds=["docker"])
    line = single_problem(plan, "uverbs")
    assert "workload_manifests_rdma_device_files is not set, and `rdmaforge render` cannot look" in line


def test_unknown_gpu_count_stops_the_kubeflow_jobs_but_not_docker() -> None:
    assert ok_plan(host("n1", gpus=None), kinds=["docker"]).files
    plan = cluster_plan(host("n1", gpus=None), kinds=["pytorchjob"])
    line = single_problem(plan, "GPU count is unknown")
    assert line.startswith("n1: the GPU count is unknown: neither workload_manifests_gpus_per_node nor "
                           "rdmaforge_gpus_per_node is set")
    assert "a PyTorchJob needs it" in line


def test_an_unknown_gpu_count_is_one_line_per_node_for_every_kind_that_needs_it() -> None:
    """Each kind used to add its own line for the same missing count (two per node for mpijob and pytorchjob)."""
    plan = cluster_plan(host("n1", gpus=None), host("n2", gpus=None), kinds=["docker", "mpijob", "pytorchjob"])
    unknown = [p for p in plan.problems if "GPU count" in p]
    assert [line.split(":", 1)[0] for line in unknown] == ["n1", "n2"], plan.problems
    assert all("; an MPIJob and a PyTorchJob need it; allowed:" in line for line in unknown), unknown
    counted_none = {"rdmaforge_node": {"gpu_count": 0, "gpu_source": "nvidia-smi"}}
    none = cluster_plan(host("n1", gpus=None, variables=counted_none), kinds=["docker", "mpijob", "pytorchjob"])
    assert [p for p in none.problems if "GPU" in p] == [
        "n1: rdmaforge_node.gpu_count=0: a node without GPUs cannot run an MPIJob, a PyTorchJob or the docker "
        "container; allowed: 1 or more (set workload_manifests_gpus_per_node if the count is wrong)"]


def test_the_inventorys_declared_gpu_count_sizes_the_jobs_as_it_sizes_the_benchmark() -> None:
    """rdmaforge_gpus_per_node (the count benchmark and mpi_launch take when preflight could read none) sizes the
    jobs too when workload_manifests_gpus_per_node is not set; a count read on the node wins over it."""
    declared = ok_plan(host("n1", gpus=None, variables={"rdmaforge_gpus_per_node": 4}), kinds=["pytorchjob"])
    assert manifest(declared, "pytorchjob")["spec"]["nprocPerNode"] == "4"
    read = {"rdmaforge_gpus_per_node": 4, "rdmaforge_node": {"gpu_count": 2, "gpu_source": "nvidia-smi"}}
    assert manifest(ok_plan(host("n1", gpus=None, variables=read), kinds=["pytorchjob"]),
                    "pytorchjob")["spec"]["nprocPerNode"] == "2"  # fmt: skip


def test_a_gpu_count_that_differs_from_the_one_benchmark_and_mpi_launch_use_is_named() -> None:
    """Review round 37a: rdmaforge_gpus_per_node: 4 with workload_manifests_gpus_per_node: 8 rendered 8 ranks a node
    without a word, where the benchmark and the MPI hostfile take 4. Two counts of the inventory for one node are
    refused, naming both; a count preflight read is one workload_manifests_gpus_per_node may correct (a warning)."""
    declared = {"rdmaforge_gpus_per_node": 4}
    plan = cluster_plan(host("n1", gpus=8, variables=declared), host("n2", gpus=8, variables=declared),
                        kinds=["mpijob"])  # fmt: skip
    lines = [p for p in plan.problems if "rdmaforge_gpus_per_node" in p]
    assert [line.split(":", 1)[0] for line in lines] == ["n1", "n2"] and plan.files == [], plan.problems
    assert lines[0].startswith("n1: workload_manifests_gpus_per_node=8 differs from rdmaforge_gpus_per_node=4")
    assert "allowed: one count" in lines[0]
    # The same count, or a fact that the benchmark takes over the declared count: no line.
    assert ok_plan(host("n1", gpus=4, variables=declared), kinds=["mpijob"]).files
    read = {**declared, "rdmaforge_node": {"gpu_count": 8, "gpu_source": "nvidia-smi"}}
    assert not [w for w in ok_plan(host("n1", gpus=8, variables=read), kinds=["mpijob"]).warnings if "GPU" in w]
    # A count preflight read, corrected: written, with a warning naming both.
    found = {"rdmaforge_node": {"gpu_count": 4, "gpu_source": "nvidia-smi"}}
    corrected = ok_plan(host("n1", gpus=8, variables=found), kinds=["mpijob"])
    assert [w for w in corrected.warnings if "gpus_per_node=8" in w and "preflight found 4 GPUs" in w], (
        corrected.warnings)  # fmt: skip


@pytest.mark.parametrize(("value", "line"), [
    (2000, "n1: rdmaforge_gpus_per_node=2000 is more GPUs than a node has; allowed: a whole number from 1 to 1024, "
           "or null"),
    (0, "n1: rdmaforge_gpus_per_node=0 is not allowed; allowed: a whole number from 1 to 1024, or null"),
    ("eight", "n1: rdmaforge_gpus_per_node='eight' is not a GPU count; allowed: a whole number from 1 to 1024, or "
              "null"),
])  # fmt: skip
def test_a_declared_gpu_count_that_is_no_count_is_refused_once(value: Any, line: str) -> None:
    plan = cluster_plan(host("n1", gpus=None, variables={"rdmaforge_gpus_per_node": value}),
                        kinds=["mpijob", "pytorchjob"])  # fmt: skip
    assert [p for p in plan.problems if "GPU" in p or "gpus" in p] == [line]


def test_a_null_gpu_count_from_preflight_is_unknown_not_a_missing_fact() -> None:
    """preflight ran and could read no GPU count (gpu_source none): the fact is there, its count null. It is named
    as such, not as a fact that is not available, and never as 0 GPUs."""
    facts = {"rdmaforge_node": {"gpu_count": None, "gpu_source": "none"}}
    plan = cluster_plan(host("n1", gpus=None, variables=facts), kinds=["pytorchjob"])
    line = single_problem(plan, "GPU count is unknown")
    assert line.startswith("n1: the GPU count is unknown: rdmaforge_node.gpu_count is null (preflight could not read "
                           "the GPU count: gpu_source none) and neither workload_manifests_gpus_per_node nor "
                           "rdmaforge_gpus_per_node is set"), line
    assert "=0" not in line


@pytest.mark.parametrize(("value", "shown"), [(-1, "-1"), (0, "0"), (8.5, "8.5"), (True, "true")])
def test_a_gpu_count_that_is_set_to_no_count_is_never_called_not_set(value: Any, shown: str) -> None:
    plan = cluster_plan(host("n1", gpus=value), kinds=["mpijob", "pytorchjob"])
    assert plan.files == []
    assert not [p for p in plan.problems if "is not set" in p], plan.problems
    refused = f"n1: workload_manifests_gpus_per_node={shown} is not valid; allowed: an integer from 1 to 1024"
    assert [p for p in plan.problems if "GPU" in p or "gpus" in p] == [refused]  # its own line, not a second one


def test_nodes_of_different_gpu_counts_cannot_share_a_kubeflow_job() -> None:
    plan = cluster_plan(host("n1", gpus=8), host("n2", gpus=4), kinds=["mpijob"])
    line = single_problem(plan, "different GPU counts")
    assert line.startswith("n1: the nodes have different GPU counts (n1: 8; n2: 4); an MPIJob runs the same pod")


def test_a_cluster_wide_option_must_be_the_same_on_every_node() -> None:
    plan = cluster_plan(host("n1"), host("n2", image="other:1"), kinds=["docker"])
    line = single_problem(plan, "workload_manifests_image differs")
    assert "n1: 'nvcr.io/nvidia/pytorch:24.05-py3'; n2: 'other:1'" in line


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("name", "Train_Job", "n1: workload_manifests_name='Train_Job' is not valid; allowed: a DNS-1123 label"),
        ("shm_size", "8 GB", "n1: workload_manifests_shm_size='8 GB' is not valid; allowed: a docker size"),
        ("kinds", ["k8s"], "n1: workload_manifests_kinds=[\"k8s\"] names 'k8s', which is not a kind; allowed: docker"),
        ("gpus_per_node", 0, "n1: workload_manifests_gpus_per_node=0 is not valid; allowed: an integer from 1"),
        # above stored.MAX_GPUS, the bound of every GPU count rdmaforge stores: a typo, not a node
        ("gpus_per_node", 10**23, "n1: workload_manifests_gpus_per_node=100000000000000000000000 is not valid; "
                                  "allowed: an integer from 1 to 1024"),
        ("docker_gpu_mode", "all", "n1: workload_manifests_docker_gpu_mode='all' is not valid; allowed: runtime, gpus"),
        ("acs_memory", "lots", "n1: workload_manifests_acs_memory='lots' is not valid; allowed: a Kubernetes quantity"),
        ("rdma_device_files", ["umad0"], 'n1: workload_manifests_rdma_device_files=["umad0"] names umad0'),
    ],
)
def test_bad_option_values_name_the_variable_and_what_is_allowed(option: str, value: Any, expected: str) -> None:
    plan = cluster_plan(host("n1", **{option: value}))
    assert plan.files == []
    assert any(p.startswith(expected) for p in plan.problems), plan.problems


# --- docker ----------------------------------------------------------------------------------------


def docker_argv(h: HostInput) -> list[str]:
    cluster = build_cluster([h], PROFILES)
    assert not cluster.problems, cluster.problems
    return docker.argv(docker.run_groups(cluster.nodes[0], cluster.settings))


def test_docker_gets_exactly_the_rdma_devices_the_node_has() -> None:
    found = ["issm0", "uverbs10", "umad0", "uverbs2", "rdma_cm", "uverbs0"]
    argv = docker_argv(host("n1", "infiniband", devices=None, found=found))
    assert [a for a in argv if a.startswith("--device")] == [
        "--device=/dev/infiniband/rdma_cm",
        "--device=/dev/infiniband/uverbs0",
        "--device=/dev/infiniband/uverbs2",
        "--device=/dev/infiniband/uverbs10",
    ]


def test_docker_run_has_the_runtime_limits_and_the_profiles_nccl_settings() -> None:
    argv = docker_argv(host("n1", "roce", devices=["uverbs0", "rdma_cm"]))
    assert argv[:5] == ["/usr/bin/docker", "run", "--rm", "--name", "rdmaforge-train"]
    for flag in ("--runtime=nvidia", "--shm-size=8g", "--ipc=host", "--net=host"):
        assert flag in argv
    assert argv[argv.index("--ulimit") + 1] == "memlock=-1"
    assert [a for a in argv if a.startswith("--device")] == [
        "--device=/dev/infiniband/rdma_cm",
        "--device=/dev/infiniband/uverbs0",
    ]
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert env == ["NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA=mlx5", "NCCL_SOCKET_IFNAME=eth0"]
    assert argv[-3:] == ["nvcr.io/nvidia/pytorch:24.05-py3", "sleep", "infinity"]


def test_socket_fabrics_get_no_devices_and_gpus_mode_uses_gpus_all() -> None:
    argv = docker_argv(host("n1", "tcp", devices=None, docker_gpu_mode="gpus"))
    assert not [a for a in argv if a.startswith("--device")]
    assert "--gpus=all" in argv and "--runtime=nvidia" not in argv
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-e"] == ["NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME=eth0"]


def test_a_node_that_names_no_nccl_env_profile_gets_the_roles_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nccl_env_profile's default is role nccl_env's Jinja, evaluated for the node (its fabric profile), not
    restated: with the role's default changed to map roce to infiniband, a roce node gets infiniband's settings
    (seed 001's, in the role's nccl_env_profiles), a tcp node still its own, and the inventory's value wins."""
    roce_as_infiniband = "{{ 'infiniband' if rdmaforge_fabric | default('tcp') == 'roce' else rdmaforge_fabric }}"
    redefine_default(tmp_path, monkeypatch, "nccl_env", "nccl_env_profile", roce_as_infiniband)

    def env(h: HostInput) -> list[str]:
        argv = docker_argv(h)
        return [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]

    assert env(host("n1", "roce")) == ["NCCL_DEBUG=INFO", "NCCL_IB_HCA=mlx5", "NCCL_SOCKET_IFNAME=eth"]
    assert env(host("n1", "tcp", devices=None)) == ["NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME=eth0"]
    mine = {"nccl_env_profile": "roce"}
    assert env(host("n1", "roce", variables=mine)) == ["NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA=mlx5",
                                                        "NCCL_SOCKET_IFNAME=eth0"]  # fmt: skip


def test_overrides_and_extra_env_reach_the_container_and_null_removes() -> None:
    overrides = {"nccl_env_overrides": {"NCCL_DEBUG": None, "NCCL_IB_HCA": "=mlx5_0:1"}}
    argv = docker_argv(host("n1", "infiniband", variables=overrides, env={"LIGHT_2D_ALLREDUCE": 1}))
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert env == ["LIGHT_2D_ALLREDUCE=1", "NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME=eth"]


def test_script_and_unit_quote_what_their_parsers_would_split() -> None:
    groups = [["/usr/bin/docker", "run"], ["-e", 'X=a b%c$HOME"q\\'], ["img", ""]]
    script = docker.shell_lines(groups)
    assert shlex.split(script.replace("\\\n", " ")) == docker.argv(groups)
    unit = docker.systemd_lines(groups)
    assert '-e "X=a b%%c$$HOME\\"q\\\\"' in unit
    assert unit.endswith('img ""')


# --- Kubeflow --------------------------------------------------------------------------------------


def test_pytorchjob_runs_torchrun_with_c10d_sized_by_the_inventory() -> None:
    plan = ok_plan(*(host(f"n{i}", "infiniband", 8) for i in range(3)), kinds=["pytorchjob"])
    document = manifest(plan, "pytorchjob")
    replicas = document["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"Master": 1, "Worker": 2}
    command = container(replicas["Master"]["template"])["command"]
    assert command == [
        "torchrun",
        "--nnodes=3",
        "--nproc-per-node=8",
        "--rdzv-id=rdmaforge-train",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=$(MASTER_ADDR):29500",
        "train.py",
    ]
    assert container(replicas["Master"]["template"])["ports"] == [{"name": "pytorchjob-port", "containerPort": 29500}]
    single = manifest(ok_plan(host("n1"), kinds=["pytorchjob"]), "pytorchjob")
    assert list(single["spec"]["pytorchReplicaSpecs"]) == ["Master"]
    assert validate.problems(single) == []


def test_mpijob_has_seed_004s_worker_and_exports_every_setting() -> None:
    overrides = {"nccl_env_overrides": {"LIGHT_2D_ALLREDUCE": 1, "LIGHT_INTRA_SIZE": 8}}
    plan = ok_plan(*(host(n, "tcp", 8, variables=overrides) for n in ("a", "b", "c", "d")), kinds=["mpijob"])
    spec = manifest(plan, "mpijob")["spec"]
    assert spec["slotsPerWorker"] == 8
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running"}
    launcher = container(spec["mpiReplicaSpecs"]["Launcher"]["template"])
    command = launcher["command"]
    assert command[:4] == ["mpirun", "--allow-run-as-root", "-np", "32"]
    exported = [command[i + 1] for i, a in enumerate(command) if a == "-x"]
    assert exported == [
        "LIGHT_2D_ALLREDUCE",
        "LIGHT_INTRA_SIZE",
        "NCCL_IB_DISABLE",
        "NCCL_SOCKET_IFNAME",
        "PATH",
        "LD_LIBRARY_PATH",
    ]
    worker_spec = spec["mpiReplicaSpecs"]["Worker"]
    assert worker_spec["replicas"] == 4
    worker = container(worker_spec["template"])
    assert worker["securityContext"] == {"privileged": True}
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": "8", "memory": "100Gi", "hugepages-1Gi": "50Gi"}
    assert [m["mountPath"] for m in worker["volumeMounts"]] == [
        "/sys",
        "/dev/hugepages",
        "/usr/local/tfabric/tools",
        "/dev/shm",
    ]


def test_taco_accelerator_exports_seed_004s_settings_in_the_mpijob() -> None:
    # Seed 004's mpirun line: -x NCCL_ALGO=RING -x LIGHT_2D_ALLREDUCE=1 -x LIGHT_TOPK_ALLREDUCE=1
    # -x LIGHT_TOPK_THRESHOLD=2097152 -x LIGHT_INTRA_SIZE=8, on a VPC (tcp) fabric with 1 GiB huge pages.
    taco = {"nccl_env_accelerator": "taco"}
    plan = ok_plan(*(host(n, "tcp", 8, variables=taco) for n in ("a", "b")), kinds=["mpijob"])
    spec = manifest(plan, "mpijob")["spec"]
    command = container(spec["mpiReplicaSpecs"]["Launcher"]["template"])["command"]
    exported = [command[i + 1] for i, a in enumerate(command) if a == "-x"]
    for name in ("NCCL_ALGO", "LIGHT_2D_ALLREDUCE", "LIGHT_TOPK_ALLREDUCE", "LIGHT_TOPK_THRESHOLD", "LIGHT_INTRA_SIZE"):
        assert name in exported
    worker = container(spec["mpiReplicaSpecs"]["Worker"]["template"])
    env = {e["name"]: e["value"] for e in worker.get("env", [])} | {
        e["name"]: e["value"] for e in container(spec["mpiReplicaSpecs"]["Launcher"]["template"]).get("env", [])
    }
    assert env.get("NCCL_ALGO") == "RING"
    assert env.get("LIGHT_TOPK_THRESHOLD") == "2097152"
    assert worker["resources"]["limits"]["hugepages-1Gi"] == "50Gi"
    assert "/dev/hugepages" in [m["mountPath"] for m in worker["volumeMounts"]]


def light_intra_size(plan: Plan) -> tuple[str | None, str | None]:
    """LIGHT_INTRA_SIZE in the MPIJob's launcher and worker containers."""
    spec = manifest(plan, "mpijob")["spec"]
    return tuple(  # type: ignore[return-value]
        env_of(container(spec["mpiReplicaSpecs"][role]["template"])).get("LIGHT_INTRA_SIZE")
        for role in ("Launcher", "Worker")
    )


@pytest.mark.parametrize("gpus", [8, 4])
def test_taco_light_intra_size_is_the_ranks_of_one_node(gpus: int) -> None:
    # Seed 004: LIGHT_INTRA_SIZE=8 with 8 ranks on each 8-GPU worker (mpirun -np 32 -H taco-bench-worker-0:8,...):
    # LightCC's intra-node group is one node's ranks, one per GPU. A 4-GPU node (gpus_per_node: 4) runs 4 ranks.
    taco = {"nccl_env_accelerator": "taco"}
    plan = ok_plan(*(host(n, "tcp", gpus, variables=taco) for n in ("a", "b")), kinds=["mpijob"])
    assert manifest(plan, "mpijob")["spec"]["slotsPerWorker"] == gpus
    assert light_intra_size(plan) == (str(gpus), str(gpus))
    assert f"LIGHT_INTRA_SIZE={gpus}" in docker_argv(host("a", "tcp", gpus, variables=taco))


def test_taco_light_intra_size_from_an_override_wins() -> None:
    variables = {"nccl_env_accelerator": "taco", "nccl_env_overrides": {"LIGHT_INTRA_SIZE": 2}}
    plan = ok_plan(*(host(n, "tcp", 4, variables=variables) for n in ("a", "b")), kinds=["mpijob"])
    assert light_intra_size(plan) == ("2", "2")


def test_taco_without_a_gpu_count_is_refused_unless_overridden() -> None:
    taco = {"nccl_env_accelerator": "taco"}
    plan = cluster_plan(host("n1", "tcp", None, variables=taco), kinds=["docker"])
    single_problem(plan, "n1: NCCL settings: LIGHT_INTRA_SIZE=node_gpu_count", "nccl_env_overrides")
    overridden = {**taco, "nccl_env_overrides": {"LIGHT_INTRA_SIZE": 8}}
    ok_plan(host("n1", "tcp", None, variables=overridden), kinds=["docker"])


def test_a_node_that_names_no_accelerator_gets_the_roles_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "LIGHT_INTRA_SIZE=8" not in docker_argv(host("a", "tcp", 8))  # the checkout's default: none
    redefine_default(tmp_path, monkeypatch, "nccl_env", "nccl_env_accelerator", "taco")
    assert "LIGHT_INTRA_SIZE=8" in docker_argv(host("a", "tcp", 8))


def test_an_unknown_accelerator_is_refused_naming_the_choices() -> None:
    plan = cluster_plan(host("n1", variables={"nccl_env_accelerator": "tacoo"}))
    assert plan.files == []
    expected = "n1: nccl_env_accelerator='tacoo' is not a key of nccl_env_accelerators; allowed: none, taco"
    assert expected in plan.problems


def nodes_named(count: int, name: str) -> list[HostInput]:
    return [host(f"n{i:04d}", "tcp", 8, name=name) for i in range(count)]


def test_a_name_fits_the_pod_names_of_a_thousand_workers() -> None:
    # mpi-operator names worker i "<name>-worker-<i>", from 0, and makes it the pod's hostname: a DNS label of 63
    # characters at most. 1000 nodes: worker-999, 52 + 11 = 63.
    name = "t" * 52
    plan = ok_plan(*nodes_named(1000, name), kinds=["mpijob"])
    replicas = manifest(plan, "mpijob")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert replicas == 1000
    assert len(f"{name}-worker-{replicas - 1}") == 63


def test_a_name_too_long_for_the_workers_pod_names_is_refused_with_the_count() -> None:
    # 1001 nodes: worker-1000 would be 52 + 12 = 64 characters; 51 is the most that fits.
    problem = single_problem(
        cluster_plan(*nodes_named(1001, "t" * 52), kinds=["mpijob"]), "workload_manifests_name=", "1001 workers"
    )
    assert f"{'t' * 52}-worker-1000" in problem
    assert "allowed: 51 characters at most for 1001 workers" in problem
    ok_plan(*nodes_named(1001, "t" * 51), kinds=["mpijob"])
    # PyTorchJob: a master and 1000 workers (worker-0 to worker-999): the 52 characters fit.
    ok_plan(*nodes_named(1001, "t" * 52), kinds=["pytorchjob"])


def test_a_small_job_allows_the_name_up_to_its_longest_pod_name() -> None:
    # 2 nodes: <name>-launcher, <name>-worker-1 (MPIJob) and <name>-master-0 (PyTorchJob) add 9 characters.
    ok_plan(*nodes_named(2, "t" * 54), kinds=["mpijob", "pytorchjob"])
    plan = cluster_plan(*nodes_named(2, "t" * 55), kinds=["mpijob"])
    assert "allowed: 54 characters at most for 2 workers" in single_problem(plan, f"{'t' * 55}-")
    # docker and ACS add nothing: a DNS label, 63 characters.
    ok_plan(*nodes_named(2, "t" * 63), kinds=["docker", "acs"])
    single_problem(
        cluster_plan(*nodes_named(1, "t" * 64), kinds=["docker"]),
        "workload_manifests_name=",
        "63 characters at most",
    )


def test_a_kubeflow_name_must_start_with_a_letter() -> None:
    # Kubernetes refuses a Service whose name is not a DNS-1035 label (a letter first); the operators name their
    # Services <name>-worker, <name>-launcher, <name>-master-0. docker and ACS name no Service after it.
    for kind in ("mpijob", "pytorchjob"):
        problem = single_problem(cluster_plan(*nodes_named(2, "1train"), kinds=[kind]), "workload_manifests_name=")
        assert "must start with a letter" in problem and "1train-worker" in problem, problem
    ok_plan(*nodes_named(2, "1train"), kinds=["docker", "acs"])
    ok_plan(*nodes_named(2, "train1"), kinds=["mpijob", "pytorchjob"])


# --- validation catches what a cluster would refuse ------------------------------------------------


def _valid_documents() -> dict[str, dict[str, Any]]:
    plan = ok_plan(host("n1"), host("n2"), kinds=list(KINDS))
    return {path.split("/")[0]: document for path, document in plan.manifests.items()}


def test_validation_finds_unknown_fields_and_broken_rules() -> None:
    documents = _valid_documents()
    deployment = copy.deepcopy(documents["acs"])
    deployment["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    assert any("'imagee' was unexpected" in p for p in validate.problems(deployment))

    mpijob = copy.deepcopy(documents["mpijob"])
    mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "Always"
    found = validate.problems(mpijob)
    assert any("spec.mpiReplicaSpecs.Launcher.replicas: 1 was expected" in p for p in found), found
    assert any("spec.mpiReplicaSpecs.Worker.restartPolicy" in p for p in found), found

    pytorchjob = copy.deepcopy(documents["pytorchjob"])
    pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["name"] = "main"
    pytorchjob["spec"]["elasticity"] = {}
    found = validate.problems(pytorchjob)
    assert any("spec.elasticity: unknown field of KubeflowOrgV1PyTorchJobSpec" in p for p in found), found
    assert any("container named 'pytorch'" in p for p in found), found


# --- the CLI, end to end ---------------------------------------------------------------------------


def write_inventory(root: Path, hosts: dict[str, dict[str, Any]], group_vars: dict[str, Any]) -> Path:
    (root / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    (root / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    (root / "group_vars" / "all" / "main.yml").write_text(yaml.safe_dump(group_vars))
    return root / "hosts.yml"


LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
NODES = {"localhost": {"ansible_host": "127.0.0.1"}, "wl-b": {"ansible_host": "127.0.0.2"}}


def test_cli_renders_validates_and_writes_yamllint_clean_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = write_inventory(
        tmp_path / "inventory",
        NODES,
        {
            **LOCAL,
            "rdmaforge_fabric": "erdma",
            f"{PREFIX}gpus_per_node": 8,
            f"{PREFIX}rdma_device_files": DEVICES,
        },
    )
    out = tmp_path / "out"
    assert main(["render", "-i", str(inventory), "-o", str(out), "--validate", "--kind", "all"]) == 0
    stdout = capsys.readouterr().out
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == sorted(
        [
            "acs/rdmaforge-train.yaml",
            "docker/localhost/rdmaforge-train.service",
            "docker/localhost/rdmaforge-train.sh",
            "docker/wl-b/rdmaforge-train.service",
            "docker/wl-b/rdmaforge-train.sh",
            "mpijob/rdmaforge-train.yaml",
            "pytorchjob/rdmaforge-train.yaml",
        ]
    )
    assert stdout.count("valid   ") == 3
    assert (out / "docker/wl-b/rdmaforge-train.sh").stat().st_mode & 0o777 == 0o755
    script = (out / "docker/wl-b/rdmaforge-train.sh").read_text()
    assert "--device=/dev/infiniband/uverbs1" in script
    proc = subprocess.run(["sh", "-n", str(out / "docker/wl-b/rdmaforge-train.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lint = subprocess.run(
        [str(PROJECT_ROOT / ".venv/bin/yamllint"), "-c", str(PROJECT_ROOT / ".yamllint"), "-s", str(out)],
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_cli_kind_selects_and_bad_inventory_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variables = {
        **LOCAL,
        "rdmaforge_fabric": "acs_type1",
        f"{PREFIX}gpus_per_node": 4,
        f"{PREFIX}gpu_per_node": 8,
        f"{PREFIX}rdma_device_files": DEVICES,
    }
    inventory = write_inventory(tmp_path / "inventory", NODES, variables)
    out = tmp_path / "out"
    assert main(["render", "-i", str(inventory), "--kind", "acs", "-o", str(out)]) == 64  # BAD_INPUT
    stderr = capsys.readouterr().err
    # A misspelled variable is refused, as preflight refuses it (it was a warning, and its value was ignored).
    assert ("localhost: workload_manifests_gpu_per_node is not a variable rdmaforge reads, so its value would be "
            "ignored (did you mean 'workload_manifests_gpus_per_node'?)") in stderr  # fmt: skip
    assert "WARNING localhost: workload_manifests_gpu_per_node" not in stderr  # named once
    assert "localhost: workload_manifests_gpus_per_node=4 GPUs per pod is not supported" in stderr
    assert "nothing written" in stderr
    assert not out.exists()
    # A name of the role's prefix close to none of its variables is the user's own: a warning, not a refusal.
    del variables[f"{PREFIX}gpu_per_node"]
    variables[f"{PREFIX}team_label"] = "ml-infra"
    inventory = write_inventory(tmp_path / "inventory2", NODES, variables)
    assert main(["render", "-i", str(inventory), "--kind", "docker", "-o", str(out)]) == 0
    assert "WARNING localhost: workload_manifests_team_label is not a variable of role workload_manifests" in (
        capsys.readouterr().err)  # fmt: skip
    assert sorted(p.parent.name for p in out.rglob("*.sh")) == ["localhost", "wl-b"]
    assert not (out / "acs").exists()


def test_vars_links_that_lead_to_no_file_are_refused_but_an_editors_lock_is_not(tmp_path: Path) -> None:
    """Ansible reads only what is a file in group_vars/: a link to nothing or a link loop it skips without a word, so
    render would write the defaults; named instead. A hidden name Ansible skips anyway (Emacs' lock) stays unnamed."""
    from rdmaforge.inventory_files import yaml_problems

    hosts = tmp_path / "hosts.yml"
    hosts.write_text("all:\n  children:\n    cluster:\n      hosts:\n        n1:\n")
    folder = tmp_path / "group_vars" / "all"
    folder.mkdir(parents=True)
    (folder / "gone.yml").symlink_to(tmp_path / "nowhere.yml")
    (folder / "loop.yml").symlink_to("loop.yml")
    (folder / ".#fabric.yml").symlink_to("root@host.1234:1700000000")
    skipped = "Ansible would skip it without a word, leaving its variables unset; allowed: a link to a readable file, "
    assert yaml_problems(hosts) == [
        f"{folder}/gone.yml: cannot read: a symbolic link that leads to no file (it links to {tmp_path}/nowhere.yml, "
        f"which does not exist); {skipped}or no link",
        f"{folder}/loop.yml: cannot read: a symbolic link that leads to no file (Too many levels of symbolic links); "
        f"{skipped}or no link",
    ]


def test_cli_refuses_jinja_it_cannot_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variables = {**LOCAL, "rdmaforge_fabric": "tcp", f"{PREFIX}gpus_per_node": "{{ 4 * 2 }}"}
    inventory = write_inventory(tmp_path / "inventory", NODES, variables)
    assert main(["render", "-i", str(inventory), "-o", str(tmp_path / "out")]) == 64  # BAD_INPUT
    assert "workload_manifests_gpus_per_node holds a Jinja expression" in capsys.readouterr().err
    # A Jinja comment too: the role's Ansible drops it (eth0{#bond#} is eth0), render would write it as it stands.
    commented = {**variables, f"{PREFIX}gpus_per_node": 8, "nccl_env_overrides": {"NCCL_SOCKET_IFNAME": "eth0{#bond#}"}}
    inventory = write_inventory(tmp_path / "commented", NODES, commented)
    assert main(["render", "-i", str(inventory), "-o", str(tmp_path / "out2")]) == 64
    assert "nccl_env_overrides holds a Jinja expression" in capsys.readouterr().err


# --- the role, for real, against this machine ------------------------------------------------------


def test_playbook_writes_the_same_files_as_the_cli(tmp_path: Path) -> None:
    """playbooks/workloads.yml on localhost (and a second local host) with devices found on the "node"
    (a directory of fake device files), then the CLI on the same inventory with those devices listed:
    every file must be byte-identical (one implementation, two template engines)."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("rdma_cm", "uverbs0", "uverbs1", "umad0", "issm0"):
        (dev / name).touch()
    common = {
        **LOCAL,
        "rdmaforge_fabric": "erdma",
        "nccl_env_overrides": {"NCCL_DEBUG": "INFO", "LIGHT_2D_ALLREDUCE": 1},
        f"{PREFIX}gpus_per_node": 8,
        f"{PREFIX}rdma_dev_dir": str(dev),
        f"{PREFIX}dir": str(tmp_path / "play"),
        f"{PREFIX}validate": True,
        f"{PREFIX}kinds": list(KINDS),  # every kind (erdma's default leaves acs out)
    }
    inventory = write_inventory(tmp_path / "role-inventory", NODES, common)
    proc = run_playbook("workloads.yml", inventory=inventory, env=ENV)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert {h: c["failed"] for h, c in recap(proc.stdout).items()} == {"localhost": 0, "wl-b": 0}

    cli_inventory = write_inventory(
        tmp_path / "cli-inventory", NODES, {**common, f"{PREFIX}rdma_device_files": ["rdma_cm", "uverbs0", "uverbs1"]}
    )
    assert main(["render", "-i", str(cli_inventory), "-o", str(tmp_path / "cli")]) == 0

    def files(root: Path) -> dict[str, tuple[bytes, int]]:
        return {
            str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o777) for p in root.rglob("*") if p.is_file()
        }

    played, rendered = files(tmp_path / "play"), files(tmp_path / "cli")
    assert len(played) == 7
    assert played == rendered
    assert b"--device=/dev" not in played["docker/localhost/rdmaforge-train.sh"][0]  # the fake dir's paths
    assert f"--device={dev}/uverbs1".encode() in played["docker/localhost/rdmaforge-train.sh"][0]
    assert b"-e LIGHT_2D_ALLREDUCE=1" in played["docker/wl-b/rdmaforge-train.sh"][0]

    again = run_playbook("workloads.yml", inventory=inventory, env=ENV)
    assert again.returncode == 0, again.stdout[-4000:]
    assert all(c["changed"] == 0 for c in recap(again.stdout).values()), recap(again.stdout)


def test_playbook_names_the_files_an_earlier_render_left(tmp_path: Path) -> None:
    """The role wrote its files and said nothing of a job an earlier render left in a kind's directory (a node gone
    from the inventory): `kubectl apply -f` of that directory would start it too. It names them, as the CLI does,
    and leaves them."""
    variables = {**LOCAL, "rdmaforge_fabric": "tcp", f"{PREFIX}gpus_per_node": 8,
                 f"{PREFIX}dir": str(tmp_path / "play")}  # fmt: skip
    inventory = write_inventory(tmp_path / "inventory", NODES, variables)
    kinds = f'{{"{PREFIX}kinds": ["docker"]}}'
    first = run_playbook("workloads.yml", "-e", kinds, inventory=inventory, env=ENV)
    assert first.returncode == 0, first.stdout[-4000:]
    assert "not written by this render" not in first.stdout
    gone = tmp_path / "play" / "docker" / "node-gone" / "rdmaforge-train.sh"
    gone.parent.mkdir()
    gone.write_text("#!/bin/sh\n")
    again = run_playbook("workloads.yml", "-e", kinds, inventory=inventory, env=ENV)
    assert again.returncode == 0, again.stdout[-4000:]
    warned = [line for line in again.stdout.splitlines() if "WARNING" in line and "not written by this render" in line]
    assert len(warned) == 1 and "docker/node-gone/rdmaforge-train.sh" in warned[0], again.stdout[-4000:]
    assert "docker/localhost" not in warned[0] and gone.read_text() == "#!/bin/sh\n"
    assert all(c["changed"] == 0 for c in recap(again.stdout).values()), recap(again.stdout)


def test_a_limited_playbook_run_is_refused_rather_than_rendering_a_smaller_cluster(tmp_path: Path) -> None:
    """Review round 37a: `--limit localhost` sized the jobs from the play's hosts: the MPIJob was rewritten as 1 node
    x 8 GPUs and the other node's docker files were called stale. The jobs are the whole group's (both inventory
    nodes): the run stops, naming the node left out, before anything is written, and suggests no --limit."""
    variables = {**LOCAL, "rdmaforge_fabric": "tcp", f"{PREFIX}gpus_per_node": 8,
                 f"{PREFIX}dir": str(tmp_path / "play")}  # fmt: skip
    inventory = write_inventory(tmp_path / "inventory", NODES, variables)
    kinds = f'{{"{PREFIX}kinds": ["docker", "mpijob"]}}'
    proc = run_playbook("workloads.yml", "-e", kinds, "--limit", "localhost", inventory=inventory, env=ENV)
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "wl-b of group cluster are not in this play (--limit?)" in proc.stdout, proc.stdout[-4000:]
    assert "allowed: a run over every node of the group, without --limit" in proc.stdout
    assert not (tmp_path / "play").exists()
    # The whole group renders its two nodes.
    whole = run_playbook("workloads.yml", "-e", kinds, inventory=inventory, env=ENV)
    assert whole.returncode == 0, whole.stdout[-4000:]
    mpijob = yaml.safe_load((tmp_path / "play" / "mpijob" / "rdmaforge-train.yaml").read_text())
    assert mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == len(NODES)


def test_playbook_probes_the_gpus_like_preflight_and_stops_on_problems(tmp_path: Path) -> None:
    """Without workload_manifests_gpus_per_node the role runs preflight's probes: this machine has no
    GPU, so the run stops with the line naming rdmaforge_node.gpu_count, before writing anything."""
    variables = {**LOCAL, "rdmaforge_fabric": "tcp", f"{PREFIX}dir": str(tmp_path / "play")}
    inventory = write_inventory(tmp_path / "inventory", {"localhost": {"ansible_host": "127.0.0.1"}}, variables)
    proc = run_playbook("workloads.yml", "-e", f'{{"{PREFIX}kinds": ["pytorchjob"]}}', inventory=inventory, env=ENV)
    assert proc.returncode != 0
    if "rdmaforge_node.gpu_count=0" not in proc.stdout:
        pytest.skip("this machine has GPUs: the no-GPU path cannot be shown here")
    assert "localhost: rdmaforge_node.gpu_count=0: a node without GPUs cannot run a PyTorchJob" in proc.stdout
    assert not (tmp_path / "play").exists()


def test_role_readme_examples_are_what_render_writes(tmp_path: Path) -> None:
    """The README's examples are real output: re-render its inventory and find every example verbatim."""
    variables = {
        "rdmaforge_fabric": "erdma",
        f"{PREFIX}gpus_per_node": 8,
        f"{PREFIX}rdma_device_files": DEVICES,
        f"{PREFIX}kinds": list(KINDS),  # the README shows each kind (acs is named: erdma's default leaves it out)
    }
    inventory = write_inventory(tmp_path / "inventory", {"erdma-node1": {}, "erdma-node2": {}}, variables)
    out = tmp_path / "out"
    assert main(["render", "-i", str(inventory), "-o", str(out)]) == 0
    readme = (PROJECT_ROOT / "roles" / "workload_manifests" / "README.md").read_text()
    for example in (
        "docker/erdma-node1/rdmaforge-train.sh",
        "docker/erdma-node1/rdmaforge-train.service",
        "acs/rdmaforge-train.yaml",
        "mpijob/rdmaforge-train.yaml",
        "pytorchjob/rdmaforge-train.yaml",
    ):
        assert (out / example).read_text().rstrip("\n") in readme, f"README example of {example} is out of date"


def test_unprivileged_host_network_pods_with_an_rdma_resource_validate() -> None:
    options = {
        "k8s_privileged": False,
        "k8s_host_network": True,
        "k8s_extra_resources": {"rdma/hca": 1},
        "mpijob_hugepages_1gi": None,
        "mpijob_host_paths": [],
        # On the node's network, port 22 is the node's sshd: the workers' sshd and the launcher's ssh use another.
        "mpijob_worker_command": ["/usr/sbin/sshd", "-De", "-p", "2222"],
        "mpijob_mpirun_args": ["--mca", "plm_rsh_args", "-p 2222"],
    }
    plan = ok_plan(host("n1", "roce", **options), host("n2", "roce", **options), kinds=["mpijob", "pytorchjob"])
    for document in plan.manifests.values():
        assert validate.problems(document) == []
    worker = manifest(plan, "mpijob")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert worker["spec"]["hostNetwork"] is True
    assert worker["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert container(worker)["securityContext"] == {"privileged": False, "capabilities": {"add": ["IPC_LOCK"]}}
    assert container(worker)["resources"]["limits"] == {"nvidia.com/gpu": "8", "rdma/hca": "1", "memory": "100Gi"}


def test_validation_refuses_a_kubernetes_version_without_schemas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(validate.UnknownVersion, match="--kubernetes-version 1.2: .* has no schemas for it"):
        validate.problems(_valid_documents()["acs"], "1.2")
    # From the command line: refused before anything is written, each allowed version named once.
    inventory = write_inventory(tmp_path / "inventory", NODES, {**LOCAL, "rdmaforge_fabric": "erdma",
                                                                 f"{PREFIX}gpus_per_node": 8,
                                                                 f"{PREFIX}rdma_device_files": DEVICES})  # fmt: skip
    out = tmp_path / "out"
    assert main(["render", "-i", str(inventory), "-o", str(out), "--validate", "--kubernetes-version", "bogus"]) == 64
    err = capsys.readouterr().err
    assert "--kubernetes-version bogus" in err and "nothing written" in err, err
    allowed = err.split("allowed: ", 1)[1].split(";", 1)[0].split(", ")
    assert validate.KUBERNETES_VERSION in allowed and len(allowed) == len(set(allowed)), allowed
    assert not out.exists() or not any(out.rglob("*"))


@pytest.mark.parametrize("kind", ["mpijob", "pytorchjob"])
def test_extra_resources_cannot_replace_the_gpu_count_the_job_is_sized_by(kind: str) -> None:
    # gpus_per_node 8: slotsPerWorker / --nproc-per-node 8, so the pods must get 8 GPUs, not the extra map's 4.
    extra = {"k8s_extra_resources": {"nvidia.com/gpu": 4, "rdma/hca": 1}}
    plan = cluster_plan(host("n1", **extra), host("n2", **extra), kinds=[kind])
    line = single_problem(plan, "workload_manifests_k8s_extra_resources", "nvidia.com/gpu")
    assert line.startswith("n1: ") and "workload_manifests_gpus_per_node=8" in line and "allowed:" in line


@pytest.mark.parametrize(("key", "option"), [("memory", "mpijob_memory"), ("hugepages-1Gi", "mpijob_hugepages_1gi")])
def test_mpijob_resources_set_twice_are_refused_not_one_silently_dropped(key: str, option: str) -> None:
    extra = {"k8s_extra_resources": {key: "10Gi"}}  # the defaults set mpijob_memory 100Gi, hugepages 50Gi
    line = single_problem(cluster_plan(host("n1", **extra), kinds=["mpijob"]), key, f"workload_manifests_{option}")
    assert line.startswith("n1: ") and "10Gi" in line and "allowed:" in line
    # the PyTorchJob has no memory or hugepages option of its own: there the extra resource is the only one (with
    # hugepages, beside a cpu limit: the API refuses hugepages without cpu or memory)
    extra = {"k8s_extra_resources": {key: "10Gi", **({"cpu": "8"} if key.startswith("hugepages-") else {})}}
    limits = container(manifest(ok_plan(host("n1", **extra), kinds=["pytorchjob"]), "pytorchjob")["spec"][
        "pytorchReplicaSpecs"]["Master"]["template"])["resources"]["limits"]  # fmt: skip
    assert limits[key] == "10Gi"


@pytest.mark.parametrize("value", [50, "50", "1536Mi", "0.5Gi"])
def test_hugepages_1gi_must_be_whole_gibibytes(value: Any) -> None:
    # Seed 004 reserves hugepages=50 pages and limits hugepages-1Gi: "50Gi". The API refuses a hugepages-1Gi
    # limit that is not a positive multiple of 1Gi; 50 alone would be 50 bytes.
    plan = cluster_plan(host("n1", mpijob_hugepages_1gi=value))
    line = single_problem(plan, "workload_manifests_mpijob_hugepages_1gi")
    assert line.startswith("n1: ") and "allowed:" in line and "50Gi" in line


def test_hugepages_without_a_memory_or_cpu_limit_are_refused() -> None:
    # The API: "HugePages require cpu or memory" (a container with hugepages must limit cpu or memory too).
    plan = cluster_plan(host("n1", mpijob_memory=None), kinds=["mpijob"])
    line = single_problem(plan, "workload_manifests_mpijob_hugepages_1gi", "workload_manifests_mpijob_memory")
    assert line.startswith("n1: ") and "allowed:" in line
    # a cpu or memory limit from the extra resources is enough
    ok_plan(host("n1", mpijob_memory=None, k8s_extra_resources={"cpu": 16}), kinds=["mpijob"])


def test_validation_applies_the_apis_hugepages_and_extended_resource_rules() -> None:
    mpijob = _valid_documents()["mpijob"]
    limits = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert validate.problems(mpijob) == []
    for change, expected in [
        ({"hugepages-1Gi": "50"}, "not a whole multiple of 1Gi"),
        ({"hugepages-2Mi": "3Mi"}, "not a whole multiple of 2Mi"),
        ({"memory": None}, "HugePages require cpu or memory"),
        ({"rdma/hca": "500m"}, "must be an integer"),
    ]:
        broken = copy.deepcopy(mpijob)
        target = broken["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
        target["limits"] = {k: v for k, v in {**limits, **change}.items() if v is not None}
        found = validate.problems(broken)
        assert any(expected in p and "Worker" in p for p in found), (change, found)
    acs = copy.deepcopy(_valid_documents()["acs"])
    acs["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["rdma/hca"] = "0.5"
    assert any("rdma/hca: 0.5 must be an integer" in p for p in validate.problems(acs))


def _hugepages_plan(gpus: int, **variables: Any) -> Plan:
    return cluster_plan(host("n1", "tcp", gpus, variables=variables), kinds=["mpijob"])


def test_mpijob_hugepages_fit_what_the_hugepages_role_reserves() -> None:
    # Seed 004: hugepages=50 on an 8-GPU node, requested as hugepages-1Gi: 50Gi. roles/hugepages reserves
    # 50 pages on 8 GPUs, otherwise GPUs x 5 + 10: 30 on a 4-GPU node, where 50Gi would never be scheduled.
    assert not _hugepages_plan(8, hugepages_enabled=True).problems
    line = single_problem(_hugepages_plan(4, hugepages_enabled=True), "workload_manifests_mpijob_hugepages_1gi")
    assert line.startswith("n1: ") and "50Gi" in line and "30" in line and "allowed:" in line
    line = single_problem(_hugepages_plan(8, hugepages_enabled=True, hugepages_count=32), "hugepages_count=32")
    assert "50Gi" in line and "allowed:" in line
    for written in (32.0, "32.0", "32"):  # as role hugepages' argument spec takes them (check_type_int): 32 pages
        line = single_problem(_hugepages_plan(8, hugepages_enabled=True, hugepages_count=written), "hugepages_count=32")
        assert "reserves 32" in line, written
    line = single_problem(_hugepages_plan(8, hugepages_enabled=True, hugepages_size="2M"), "hugepages_size='2M'")
    assert "hugepages-1Gi" in line and "allowed:" in line
    assert not _hugepages_plan(4, hugepages_enabled=True, hugepages_count=64).problems
    assert not cluster_plan(host("n1", "tcp", 4, variables={"hugepages_enabled": True}, mpijob_hugepages_1gi="30Gi"),
                            kinds=["mpijob"]).problems  # fmt: skip


def test_mpijob_hugepages_on_nodes_the_inventory_reserves_none_for_are_a_warning() -> None:
    plan = _hugepages_plan(8, hugepages_enabled=False)
    assert plan.files and not plan.problems
    assert any(w.startswith("n1: ") and "hugepages_enabled" in w and "50Gi" in w for w in plan.warnings), plan.warnings
    quiet = cluster_plan(host("n1", "tcp", 8, mpijob_hugepages_1gi=None), kinds=["mpijob"])
    assert not any("hugepages" in w for w in quiet.warnings)


def test_mpijob_hugepages_follow_the_hugepages_roles_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a node that sets none of role hugepages' variables reserves what the role's defaults say
    redefine_default(tmp_path, monkeypatch, "hugepages", "hugepages_enabled", True)
    plan = _hugepages_plan(8)
    assert not plan.problems and not any("hugepages" in w for w in plan.warnings), plan.warnings
    redefine_default(tmp_path / "2M", monkeypatch, "hugepages", "hugepages_size", "2M")
    assert "hugepages-1Gi" in single_problem(_hugepages_plan(8, hugepages_enabled=True), "hugepages_size='2M'")


def test_cli_reads_the_hugepages_roles_variables_from_the_inventory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    variables = {**LOCAL, "rdmaforge_fabric": "tcp", f"{PREFIX}gpus_per_node": 4, "hugepages_enabled": True}
    inventory = write_inventory(tmp_path / "inventory", NODES, variables)
    out = tmp_path / "out"
    assert main(["render", "-i", str(inventory), "--kind", "mpijob", "-o", str(out)]) == 64  # BAD_INPUT
    err = capsys.readouterr().err
    assert "localhost: workload_manifests_mpijob_hugepages_1gi=50Gi asks each MPIJob worker for 50 pages" in err
    assert "reserves 30 (hugepages_count=null" in err and not out.exists()


@pytest.mark.parametrize(
    ("variables", "options"),
    [({"nccl_env_overrides": {"NCCL_IB_DISABLE": 1}}, {}), ({}, {"env": {"NCCL_IB_DISABLE": "1"}})],
)
def test_type1_acs_pods_with_ib_disabled_are_refused(variables: dict[str, Any], options: dict[str, Any]) -> None:
    # Seed 002: type 1 models (GU8TF, GU8TEF, GX8SF) reach their RDMA NIC through NCCL's IB transport
    # (NCCL_IB_HCA=mlx5); NCCL_IB_DISABLE=1 "closes IB/RoCE and uses IP sockets", which only P16EN must set.
    plan = cluster_plan(host("n1", "tcp", variables=variables, **options), kinds=["acs"])
    line = single_problem(plan, "NCCL_IB_DISABLE", "GU8TF")
    assert line.startswith("n1: ") and "allowed:" in line
    assert not cluster_plan(host("n1", "tcp", env={"NCCL_IB_DISABLE": "0"}), kinds=["acs"]).problems


def test_cli_validate_options_never_pass_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inventory = write_inventory(tmp_path / "inventory", NODES, {**LOCAL, "rdmaforge_fabric": "erdma",
                                                                 f"{PREFIX}gpus_per_node": 8,
                                                                 f"{PREFIX}rdma_device_files": DEVICES})  # fmt: skip
    out = tmp_path / "out"
    # --kubernetes-version does nothing without --validate: a bad command line, not a silent no-op
    assert main(["render", "-i", str(inventory), "-o", str(out), "--kubernetes-version", "9.99"]) == 64
    err = capsys.readouterr().err
    assert "--kubernetes-version 9.99" in err and "--validate" in err and not out.exists()
    # --validate with no Kubernetes manifest among the kinds validated nothing: not judged (5), never a pass (0),
    # though the files it was asked for are written
    assert main(["render", "-i", str(inventory), "-o", str(out), "--kind", "docker", "--validate"]) == 5
    captured = capsys.readouterr()
    assert "valid " not in captured.out and "wrote" in captured.out
    assert "not judged: no Kubernetes manifest" in captured.err and "nothing validated" in captured.err
    # With a manifest among them the others are named as not validated, file by file (review round 33b: only the
    # manifest's 'valid' line was printed, read as covering every file written).
    mixed = tmp_path / "mixed"
    assert main(["render", "-i", str(inventory), "-o", str(mixed), "--kind", "docker", "--kind", "mpijob",
                 "--validate"]) == 0  # fmt: skip
    out_lines = capsys.readouterr().out.splitlines()
    written = sorted(str(p.relative_to(mixed)) for p in mixed.rglob("*") if p.is_file())
    manifests = [name for name in written if name.endswith(".yaml")]
    others = [name for name in written if not name.endswith(".yaml")]
    assert manifests and others, written
    for name in manifests:
        assert any(line.startswith(f"valid   {name}: ") for line in out_lines), out_lines
    for name in others:
        assert (f"not validated {name}: not a Kubernetes manifest (--validate checks manifests only)"
                in out_lines), out_lines


def test_cli_validate_judges_before_writing_and_writes_nothing_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review round 37a: `render --validate` wrote first and left the INVALID manifests in -o after exit 1, as if
    ready for `kubectl apply -f`; the role validates before writing. A manifest the validator refuses (here one the
    test makes it refuse: every MPIJob) stops the render before any file is written, the others' included."""
    inventory = write_inventory(tmp_path / "inventory", NODES, {**LOCAL, "rdmaforge_fabric": "erdma",
                                                                 f"{PREFIX}gpus_per_node": 8,
                                                                 f"{PREFIX}rdma_device_files": DEVICES})  # fmt: skip
    real = validate.problems

    def refusing(document: dict[str, Any], version: str = validate.KUBERNETES_VERSION) -> list[str]:
        return ["MPIJob/x: spec: refused by the test"] if document.get("kind") == "MPIJob" else real(document, version)

    monkeypatch.setattr(validate, "problems", refusing)
    out = tmp_path / "out"
    args = ["render", "-i", str(inventory), "-o", str(out), "--kind", "docker", "--kind", "mpijob", "--kind",
            "pytorchjob", "--validate"]  # fmt: skip
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "INVALID mpijob/rdmaforge-train.yaml: MPIJob/x: spec: refused by the test" in captured.err, captured.err
    assert "nothing written" in captured.err and "wrote" not in captured.out
    assert not out.exists()
    monkeypatch.setattr(validate, "problems", real)
    assert main(args) == 0
    assert "valid   mpijob/rdmaforge-train.yaml: " in capsys.readouterr().out and (out / "mpijob").is_dir()


@pytest.mark.parametrize(("blocker", "is_dir"), [("mpijob", False), ("pytorchjob/rdmaforge-train.yaml", True)])
def test_cli_refuses_an_output_path_taken_by_the_wrong_kind_of_file_before_writing_any(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], blocker: str, is_dir: bool
) -> None:
    inventory = write_inventory(tmp_path / "inventory", NODES, {**LOCAL, "rdmaforge_fabric": "tcp",
                                                                 f"{PREFIX}gpus_per_node": 8})  # fmt: skip
    out = tmp_path / "out"
    (out / blocker).parent.mkdir(parents=True, exist_ok=True)
    (out / blocker).mkdir() if is_dir else (out / blocker).write_text("")
    assert main(["render", "-i", str(inventory), "-o", str(out)]) == 64
    err = capsys.readouterr().err
    assert f"-o {out}: {blocker}" in err and "nothing written" in err, err
    assert not (out / "docker").exists()  # the files planned before the blocked one were not written either


@pytest.mark.parametrize(
    ("variables", "options", "variable"),
    [
        ({}, {"env": {"LIGHT_INTRA_SIZE": [8]}}, "workload_manifests_env"),
        ({"nccl_env_overrides": {"NCCL_IB_HCA": {"mlx5_0": 1}}}, {}, "nccl_env_overrides"),
    ],
)
def test_an_environment_value_that_is_a_list_or_mapping_is_refused_not_written_as_python(
    variables: dict[str, Any], options: dict[str, Any], variable: str
) -> None:
    # An environment variable holds text: a list or mapping used to reach the pods as "[8]" or "{'mlx5_0': 1}".
    plan = cluster_plan(host("n1", "tcp", variables=variables, **options))
    line = single_problem(plan, variable)
    assert line.startswith("n1: ") and "allowed:" in line


def test_cli_refuses_an_empty_output_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """-o '' (an unset shell variable) would be Path("."), the current directory: a usage error, nothing written."""
    variables = {**LOCAL, "rdmaforge_fabric": "tcp", f"{PREFIX}gpus_per_node": 8}
    inventory = write_inventory(tmp_path / "inventory", NODES, variables)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    with pytest.raises(SystemExit) as exited:
        main(["render", "-i", str(inventory), "--kind", "docker", "-o", ""])
    assert exited.value.code == 64
    assert "rdmaforge render: error: argument -o/--output: '': an empty path" in capsys.readouterr().err
    assert list(here.iterdir()) == []


@pytest.mark.parametrize(("variable", "value", "line"), [
    ("nccl_env_profile", ["erdma"], 'n1: nccl_env_profile=["erdma"] is not valid for role nccl_env; allowed: '),
    # Names the role's argument_specs refuse (preflight does): the empty one, and one of the user's own.
    ("nccl_env_profile", "", "n1: nccl_env_profile='' is not valid for role nccl_env; allowed: erdma, infiniband"),
    ("nccl_env_profile", "erdma_bond", "n1: nccl_env_profile='erdma_bond' is not valid for role nccl_env; allowed: "),
    ("nccl_env_accelerator", ["taco"], 'n1: nccl_env_accelerator=["taco"] is not a key of nccl_env_accelerators; '),
    ("nccl_env_accelerator", {"taco": 1}, 'n1: nccl_env_accelerator={"taco": 1} is not a key of nccl_env_accelerators'),
])  # fmt: skip
def test_a_list_or_mapping_given_as_a_profile_name_is_refused_not_a_crash(variable: str, value: Any, line: str) -> None:
    """A list is no key of a table: `profile in profiles` raised TypeError (unhashable), render's exit 70."""
    plan = cluster_plan(host("n1", "erdma", variables={variable: value}), kinds=["docker"])
    assert single_problem(plan, variable).startswith(line)


def test_nodes_of_two_fabrics_are_refused_for_every_kind_as_preflight_refuses_them() -> None:
    """One node erdma, one infiniband: the docker files and the ACS manifest were written (exit 0)."""
    for kinds in (["docker"], ["acs"]):
        plan = cluster_plan(host("n1", "erdma", acs_gpu_model="GU8TF"), host("n2", "infiniband", acs_gpu_model="GU8TF"),
                            kinds=kinds)  # fmt: skip
        line = single_problem(plan, "differs from the rest of the cluster")
        assert line == ("n2: rdmaforge_fabric='infiniband' differs from the rest of the cluster ('erdma' on n1); "
                        "allowed: one fabric profile for every node of group cluster"), kinds


def test_unprivileged_kubeflow_pods_on_an_rdma_fabric_need_a_device_plugin_resource() -> None:
    """workload_manifests_k8s_privileged: false with no RDMA device plugin resource: the pods see no HCA and NCCL
    falls back to TCP, which the docker container's check refuses; the Kubeflow jobs were written without a word."""
    options = {"k8s_privileged": False}
    plan = cluster_plan(host("n1", "infiniband", **options), host("n2", "infiniband", **options),
                        kinds=["mpijob", "pytorchjob"])  # fmt: skip
    line = single_problem(plan, "are not privileged")
    assert line.startswith("n1: rdmaforge_fabric='infiniband' uses RDMA but the MPIJob's and PyTorchJob's pods are "
                           "not privileged"), line
    assert ok_plan(host("n1", "infiniband", k8s_privileged=False, k8s_extra_resources={"rdma/hca": 1}),
                   kinds=["mpijob"]).files  # fmt: skip
    lenient = ok_plan(host("n1", "infiniband", k8s_privileged=False, require_rdma_devices=False), kinds=["mpijob"])
    assert any("are not privileged" in w and "not an error" in w for w in lenient.warnings)
    assert ok_plan(host("n1", "tcp", k8s_privileged=False), kinds=["mpijob"]).files  # no RDMA, nothing to see


@pytest.mark.parametrize("extra", [{"ephemeral-storage": "10Gi"}, {"rdma/hca": 0}, {"cpu": 4, "memory": "8Gi"}])
def test_a_resource_that_is_no_device_plugins_does_not_stand_for_an_rdma_device(extra: dict) -> None:
    """Any entry of k8s_extra_resources passed the check, though only a device plugin's (domain/name, one or more)
    hands a pod an RDMA device (review round 21c)."""
    options = {"k8s_privileged": False, "k8s_extra_resources": extra}
    plan = cluster_plan(host("n1", "infiniband", **options), host("n2", "infiniband", **options), kinds=["mpijob"])
    line = single_problem(plan, "are not privileged")
    assert "a device plugin's resource is domain/name, with a count of 1 or more" in line, line


def test_an_ini_inventorys_text_values_are_read_as_the_argument_spec_takes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[cluster:vars] values are text: render refused workload_manifests_k8s_privileged=false ("is str; allowed: a
    bool") and gpus_per_node=8, which the role's argument spec (Ansible's check_type_bool, check_type_int) takes
    and preflight accepts. A word that is no boolean is still refused."""
    inventory = tmp_path / "hosts.ini"
    common = ("[cluster]\nwl-a ansible_host=198.18.0.2\nwl-b ansible_host=198.18.0.3\n[cluster:vars]\n"
              "rdmaforge_fabric=tcp\nworkload_manifests_gpus_per_node=8\n")  # fmt: skip
    inventory.write_text(common + "workload_manifests_k8s_privileged=false\n")
    assert main(["render", "-i", str(inventory), "--kind", "mpijob", "-o", str(tmp_path / "out")]) == 0
    worker = yaml.safe_load(next((tmp_path / "out" / "mpijob").glob("*.yaml")).read_text())
    pod = worker["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert pod["securityContext"]["privileged"] is False
    assert pod["resources"]["limits"]["nvidia.com/gpu"] == "8"
    capsys.readouterr()
    inventory.write_text(common + "workload_manifests_k8s_privileged=maybe\n")
    assert main(["render", "-i", str(inventory), "--kind", "mpijob", "-o", str(tmp_path / "out2")]) == 64
    assert "workload_manifests_k8s_privileged" in capsys.readouterr().err


@pytest.mark.parametrize(("size", "shown"), [("8", "8"), ("0g", "0"), ("63m", "66060288")])
def test_a_shared_memory_size_below_dockers_default_is_refused(size: str, shown: str) -> None:
    """workload_manifests_shm_size: 8 (a unit left out) gave the containers 8 bytes of /dev/shm."""
    plan = cluster_plan(host("n1", "tcp", shm_size=size), kinds=["docker"])
    line = single_problem(plan, "workload_manifests_shm_size")
    assert line == (f"n1: workload_manifests_shm_size={size!r} is {shown} bytes, below docker's own default of 64m (a "
                    "unit left out?); allowed: a docker size of 64m or more, such as 8g")
    assert ok_plan(host("n1", "tcp", shm_size="64m"), kinds=["docker"]).files


def test_a_uverbs_name_with_a_leading_zero_is_no_device() -> None:
    """The kernel names them uverbs0, uverbs1, ...: uverbs00 was passed to docker --device as if it existed."""
    plan = cluster_plan(host("n1", "erdma", devices=["rdma_cm", "uverbs00", "uverbs0"]), kinds=["docker"])
    line = single_problem(plan, "workload_manifests_rdma_device_files")
    assert "names uverbs00, which NCCL does not open" in line, line



@pytest.mark.parametrize("option", ["rdma_dev_dir", "docker_binary"])
@pytest.mark.parametrize("value", ["/", "//", "dev/infiniband"])
def test_a_path_that_names_nothing_below_the_root_is_refused(option: str, value: str) -> None:
    """rdma_dev_dir "/" lost its slash and became "", so the default /dev/infiniband was rendered in its place with
    no word; "/" is no directory of devices, nor a docker binary."""
    plan = cluster_plan(host("n1", "erdma", **{option: value}), kinds=["docker"])
    line = single_problem(plan, f"{PREFIX}{option}")
    assert line.startswith(f"n1: {PREFIX}{option}=") and "allowed: an absolute path below /" in line, line


def test_a_node_that_differs_is_named_first_and_the_others_counted() -> None:
    """At 1000 nodes one odd node made problem lines of about 13 KB, every host listed, the odd one among them
    (review round 21c): the smallest group comes first, and each group names five hosts at most."""
    nodes = [host(f"n{i:04d}", "tcp", gpus=4 if i == 500 else 8, image="x/y:1" if i == 500 else "a/b:2")
             for i in range(1, 1001)]
    plan = cluster_plan(*nodes, kinds=["mpijob"])
    counts = single_problem(plan, "different GPU counts")
    assert "(n0500: 4; n0001, n0002, n0003, n0004, n0005 and 994 more: 8)" in counts, counts
    image = single_problem(plan, "workload_manifests_image differs between nodes")
    assert "(n0500: 'x/y:1'; n0001, n0002, n0003, n0004, n0005 and 994 more: 'a/b:2')" in image, image
    assert max(len(line) for line in plan.problems) < 1000, [len(line) for line in plan.problems]


def test_acs_pods_get_no_guessed_gpu_count_where_the_model_allows_several() -> None:
    """Seed 002: P16EN in compute class gpu-hpn supports RDMA with 1, 2, 4, 8 or 16 GPUs per pod; with no count
    known the pods silently got 16 (review round 21c). A model with one count (GU8TF: 8) still takes it."""
    options = {"acs_compute_class": "gpu-hpn", "acs_gpu_model": "P16EN"}
    plan = cluster_plan(host("n1", "acs_type2", gpus=None, **options), kinds=["acs"])
    line = single_problem(plan, "no GPU count for the ACS pods")
    assert "supports RDMA with 1 or 2 or 4 or 8 or 16 GPUs per pod" in line, line
    assert "workload_manifests_gpus_per_node" in line, line
    assert ok_plan(host("n1", "acs_type2", gpus=16, **options), kinds=["acs"]).files
