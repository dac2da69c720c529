"""Alibaba Cloud ACS pods on the high-performance RDMA network (seed 002).

A pod joins the RDMA network through the label ``alibabacloud.com/hpn-type: rdma``, on a GPU model that
supports it, with the number of GPUs per pod ACS documents for that model, and with the NCCL settings of
the model's RDMA NIC type. Those settings are role nccl_env's profiles ``acs_type1`` and ``acs_type2``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rdmaforge.parsers import nccl_env
from rdmaforge.plain_data import show
from rdmaforge.text import by_value
from rdmaforge.workloads import k8s
from rdmaforge.workloads.nodes import Cluster
from rdmaforge.workloads.options import PREFIX


@dataclass(frozen=True)
class GpuModel:
    name: str
    nic_type: int
    #: role nccl_env's profile for the model's RDMA NIC type
    profile: str
    #: compute class -> GPUs per pod that ACS supports RDMA with
    gpus_per_pod: Mapping[str, tuple[int, ...]]


#: Seed 002's table of GPU models with RDMA. P16EN supports RDMA with 16-GPU pods in compute class gpu,
#: and with 1/2/4/8/16-GPU pods in compute class gpu-hpn.
GPU_MODELS: dict[str, GpuModel] = {
    "GU8TF": GpuModel("GU8TF", 1, "acs_type1", {"gpu": (8,)}),
    "GU8TEF": GpuModel("GU8TEF", 1, "acs_type1", {"gpu": (8,)}),
    "GX8SF": GpuModel("GX8SF", 1, "acs_type1", {"gpu": (8,)}),
    "P16EN": GpuModel("P16EN", 2, "acs_type2", {"gpu": (16,), "gpu-hpn": (1, 2, 4, 8, 16)}),
}

#: The pods' socket interface on ACS (seed 002: NCCL_SOCKET_IFNAME=eth0; hpn0 is the RDMA NIC).
ACS_SOCKET_INTERFACE = "eth0"
#: An ACS pod's interfaces in the kernel's order: what NCCL chooses its socket interface from.
ACS_POD_INTERFACES = ("lo", ACS_SOCKET_INTERFACE, "hpn0")
#: What ACS requires of the NCCL settings per RDMA NIC type (seed 002: "P16EN must set NCCL_IB_DISABLE=1
#: and an empty NCCL_IB_HCA").
REQUIRED_ENV: dict[int, dict[str, str]] = {2: {"NCCL_IB_DISABLE": "1", "NCCL_IB_HCA": ""}}

LABEL_COMPUTE_CLASS = "alibabacloud.com/compute-class"
LABEL_COMPUTE_QOS = "alibabacloud.com/compute-qos"
LABEL_GPU_MODEL = "alibabacloud.com/gpu-model-series"
LABEL_HPN = "alibabacloud.com/hpn-type"
GPU_RESOURCE = "nvidia.com/gpu"


def _models_listing() -> str:
    by_type: dict[int, list[str]] = {}
    for model in GPU_MODELS.values():
        by_type.setdefault(model.nic_type, []).append(model.name)
    return ", ".join(f"{', '.join(names)} (RDMA NIC type {t})" for t, names in sorted(by_type.items()))


def default_model(fabric: str) -> str:
    """P16EN is the only type-2 model; otherwise seed 002's example GU8TF."""
    return "P16EN" if fabric == "acs_type2" else "GU8TF"


@dataclass(frozen=True)
class AcsJob:
    model: GpuModel
    gpus: int
    replicas: int
    env: dict[str, str]


#: A device name of ACS RDMA NIC type 1 (seed 002: NCCL_IB_HCA=mlx5 selects them by prefix).
_TYPE1_DEVICE = re.compile(r"mlx5_[0-9]+\Z")


def _selects_mlx5(hca: str) -> bool:
    """Whether NCCL_IB_HCA can select an mlx5_N device (NCCL's matching: a name is a prefix of the device's unless
    '=' asks for exact names; '^' excludes the listed ones). A value NCCL cannot parse is another check's line."""
    try:
        exclude, exact, entries = nccl_env.parse_ib_hca(hca)
    except ValueError:
        return True
    if not entries:
        return True

    if exclude:  # only a prefix of every mlx5_N (mlx5, mlx) leaves none; exact names leave the others
        return exact or not any("mlx5_".startswith(name) for name, _ in entries)
    if exact:
        return any(_TYPE1_DEVICE.fullmatch(name) for name, _ in entries)
    # a prefix of mlx5_N (mlx5, mlx5_1), or an mlx5_N itself
    return any("mlx5_".startswith(name) or _TYPE1_DEVICE.match(name) for name, _ in entries)


def chosen_model(cluster: Cluster) -> str:
    """The ACS GPU model's name: workload_manifests_acs_gpu_model, else the fabric's default."""
    return cluster.settings.acs_gpu_model or default_model(cluster.nodes[0].fabric if cluster.nodes else "tcp")


def check(cluster: Cluster) -> tuple[AcsJob | None, list[str]]:
    """The ACS job of the cluster, or the problems that stop it (one line each)."""
    settings = cluster.settings
    first = cluster.first
    problems: list[str] = []
    model_name = chosen_model(cluster)
    model = GPU_MODELS.get(model_name)
    if model is None:
        close = difflib.get_close_matches(model_name.upper(), list(GPU_MODELS), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return None, [
            f"{first}: {PREFIX}acs_gpu_model={show(model_name)} is not an ACS GPU model with RDMA support{hint}; "
            f"allowed: {_models_listing()}"
        ]
    allowed_counts = model.gpus_per_pod.get(settings.acs_compute_class)
    if allowed_counts is None:
        return None, [
            f"{first}: {PREFIX}acs_compute_class={show(settings.acs_compute_class)} has no RDMA for ACS GPU model "
            f"{model.name}; allowed: {', '.join(model.gpus_per_pod)}"
        ]
    for node in cluster.nodes:
        if node.fabric.startswith("acs_type") and node.fabric != model.profile:
            same_type = [m.name for m in GPU_MODELS.values() if m.profile == node.fabric]
            problems.append(
                f"{node.name}: {PREFIX}acs_gpu_model={show(model.name)} has RDMA NIC type {model.nic_type} "
                f"(fabric profile {model.profile}) but rdmaforge_fabric={show(node.fabric)}; "
                f"allowed with {node.fabric}: {', '.join(same_type)}"
            )
    counts = {node.name: (node.gpus, node.gpu_source) for node in cluster.nodes if node.gpus is not None}
    for host, (gpus, source) in counts.items():
        if gpus not in allowed_counts:
            problems.append(
                f"{host}: {source}={gpus} GPUs per pod is not supported with RDMA by ACS GPU model {model.name} "
                f"(RDMA NIC type {model.nic_type}, compute class {settings.acs_compute_class}); "
                f"allowed: {' or '.join(map(str, allowed_counts))} GPUs per pod, or no acs manifest (leave acs out "
                "of workload_manifests_kinds, or name the kinds with --kind)"
            )
    if len({c for c, _ in counts.values()}) > 1:
        listing = by_value({h: str(c) for h, (c, _) in counts.items()})
        problems.append(
            f"{first}: the nodes have different GPU counts ({listing}); allowed: one count for every pod "
            f"(a Deployment or Job has one pod template), set {PREFIX}gpus_per_node"
        )
    # Without a count from the inventory or the facts, a pod gets the one count the model allows; where it allows
    # several, none is guessed (the largest was taken: 16-GPU pods on P16EN gpu-hpn, review round 21c).
    gpus = next(iter(c for c, _ in counts.values()), max(allowed_counts))
    if not counts and len(allowed_counts) > 1:
        problems.append(
            f"{first}: no GPU count for the ACS pods ({PREFIX}gpus_per_node is not set, and render reads no facts); "
            f"ACS GPU model {model.name} (compute class {settings.acs_compute_class}) supports RDMA with "
            f"{' or '.join(map(str, allowed_counts))} GPUs per pod; allowed: one of them in {PREFIX}gpus_per_node"
        )
    lacking = [node.name for node in cluster.nodes if not isinstance(node.nccl_profiles.get(model.profile), Mapping)]
    if lacking:
        # Without it the pods would get no NCCL settings at all (env: []), and NCCL would guess the RDMA NIC.
        problems.append(
            f"{lacking[0]}: nccl_env_profiles has no profile {model.profile}, the NCCL settings of ACS GPU model "
            f"{model.name} (RDMA NIC type {model.nic_type}); allowed: a table that keeps role nccl_env's "
            f"{model.profile} (its defaults have acs_type1 and acs_type2), on "
            f"{', '.join(lacking) if len(lacking) < 6 else f'{len(lacking)} nodes'}"
        )
    envs = {node.name: node.env_for_profile(model.profile, settings.env) for node in cluster.nodes}
    env = envs[first] if first in envs else {}
    for host, node_env in envs.items():
        if node_env != env:
            problems.append(
                f"{host}: the NCCL settings for ACS differ from {first}'s ({show(node_env)} vs {show(env)}); "
                f"allowed: the same nccl_env_overrides and {PREFIX}env on every node (one pod template)"
            )
    for key, value in REQUIRED_ENV.get(model.nic_type, {}).items():
        if env.get(key) != value:
            problems.append(
                f"{first}: {key}={show(env.get(key))} (from nccl_env_overrides or {PREFIX}env) breaks RDMA on "
                f"ACS GPU model {model.name}; allowed: "
                + ", ".join(f"{k}={show(v)}" for k, v in REQUIRED_ENV[model.nic_type].items())
                + f" (RDMA NIC type {model.nic_type})"
            )
    if model.nic_type == 1:
        hca = env.get("NCCL_IB_HCA")
        if hca is not None and not _selects_mlx5(hca):
            # The hosts' own HCA (erdma_0, mlx5_bond_0 ...) reaches the pods too: no pod device matches it, and NCCL
            # falls back to sockets without an error.
            problems.append(
                f"{first}: NCCL_IB_HCA={show(hca)} (from nccl_env_overrides or {PREFIX}env) selects no mlx5 device, "
                f"the RDMA NIC of ACS GPU model {model.name} (RDMA NIC type 1), so NCCL in the pods would use TCP "
                f"sockets; allowed: NCCL_IB_HCA unset or one that selects mlx5_N devices, such as mlx5 (seed 002)"
            )
        # Type 1 reaches its RDMA NIC through NCCL's IB transport (NCCL_IB_HCA=mlx5) and its pods load no net plugin.
        problems += [
            f"{first}: {f.why} (from nccl_env_overrides or {PREFIX}env; ACS GPU model {model.name}, RDMA NIC type 1, "
            f"pods with {LABEL_HPN}: rdma); allowed: {f.allowed} (type 1 uses NCCL_IB_HCA=mlx5, seed 002)"
            for f in nccl_env.rdma_fallbacks(env, "none")
        ]
    replicas = settings.acs_replicas or len(cluster.nodes)
    return AcsJob(model, gpus, replicas, env), problems


def manifest(cluster: Cluster, job: AcsJob) -> dict[str, Any]:
    """A Deployment (long-running pods, as seed 002) or an Indexed Job of ``job.replicas`` RDMA pods."""
    settings = cluster.settings
    labels = {
        "app": settings.name,
        LABEL_COMPUTE_CLASS: settings.acs_compute_class,
        LABEL_COMPUTE_QOS: settings.acs_compute_qos,
        LABEL_GPU_MODEL: job.model.name,
        LABEL_HPN: "rdma",
    }
    resources = {"cpu": settings.acs_cpu, "memory": settings.acs_memory, GPU_RESOURCE: str(job.gpus)}
    container: dict[str, Any] = {
        "name": "train",
        "image": settings.image,
        "command": list(settings.command),
        "env": k8s.env_list(job.env),
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": [k8s.shm_mount()],
    }
    pod_spec: dict[str, Any] = {"containers": [container], "volumes": [k8s.shm_volume(settings.k8s_shm_size)]}
    template = {"metadata": {"labels": labels}, "spec": pod_spec}
    if settings.acs_kind == "Deployment":
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": k8s.metadata(settings.name, settings.namespace, {"app": settings.name}),
            "spec": {
                "replicas": job.replicas,
                "selector": {"matchLabels": {"app": settings.name}},
                "template": template,
            },
        }
    pod_spec["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": k8s.metadata(settings.name, settings.namespace, {"app": settings.name}),
        "spec": {
            # Indexed: each pod gets JOB_COMPLETION_INDEX, a stable rank for torchrun/mpirun wrappers.
            "completionMode": "Indexed",
            "completions": job.replicas,
            "parallelism": job.replicas,
            "backoffLimit": 0,
            "template": template,
        },
    }


def summary(job: AcsJob, settings_kind: str) -> Sequence[str]:
    return [
        f"ACS {settings_kind}: {job.replicas} pods of {job.gpus} GPUs, GPU model {job.model.name} "
        f"(RDMA NIC type {job.model.nic_type}, NCCL profile {job.model.profile}).",
    ]


def socket_interface_warnings(cluster: Cluster) -> list[str]:
    """Seed 002 sets NCCL_SOCKET_IFNAME=eth0 for both NIC types: an ACS pod has eth0 and hpn0, not the hosts' bond0.
    A warning, as for the MPIJob pods on the pod network: the hosts' value goes into the pods."""
    if not cluster.nodes:
        return []
    model = GPU_MODELS.get(chosen_model(cluster))
    if model is None:
        return []  # check() names the model
    env = cluster.nodes[0].env_for_profile(model.profile, cluster.settings.env)
    value = str(env.get("NCCL_SOCKET_IFNAME") or "")
    if not value.isprintable():
        return []  # a control character is refused on its own, naming the variable that set it
    chosen = nccl_env.first_socket_interface(value, ACS_POD_INTERFACES, env.get("NCCL_SOCKET_FAMILY"))
    if value and chosen == ACS_SOCKET_INTERFACE:
        return []
    # Unset, NCCL chooses by the pod's interface order, which seed 002 does not leave to chance.
    outcome = k8s.nccl_socket_outcome(chosen) if value else "NCCL would choose an interface itself"
    return [
        f"{cluster.first}: NCCL_SOCKET_IFNAME={show(env.get('NCCL_SOCKET_IFNAME'))} (the hosts' setting) goes into the "
        f"ACS pods, whose socket interface is {ACS_SOCKET_INTERFACE} (seed 002), so {outcome} "
        f"there; the ACS manifest needs NCCL_SOCKET_IFNAME={ACS_SOCKET_INTERFACE} (set by hand, or through "
        f"{PREFIX}env, which sets it in every kind's containers)"
    ]
