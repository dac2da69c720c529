"""Kubeflow jobs for the cluster: an MPIJob (seed 004) and a PyTorchJob with torchrun's c10d rendezvous (seed 001).

One pod per inventory node, each with all of that node's GPUs; every pod runs one pod template, so the
nodes must agree on their GPU count and NCCL settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rdmaforge import fabrics, role_defaults, tuning
from rdmaforge.parsers import nccl_env
from rdmaforge.plain_data import show, spec_bool, whole_number
from rdmaforge.text import by_value
from rdmaforge.workloads import k8s
from rdmaforge.workloads.nodes import Cluster
from rdmaforge.workloads.options import HUGEPAGES_PREFIX, PREFIX, Settings

GPU_RESOURCE = "nvidia.com/gpu"
#: training-operator finds the PyTorch container by this name (and the master's port by the port name).
PYTORCH_CONTAINER = "pytorch"
PYTORCH_PORT_NAME = "pytorchjob-port"
MPI_CONTAINER = "mpi"
#: mpi-operator v2beta1: the launcher reaches the workers over SSH with keys it mounts here.
SSH_AUTH_MOUNT_PATH = "/root/.ssh"
#: Pod hostnames and Service names are DNS labels: 63 characters at most.
DNS_LABEL_MAX = 63


def derived_names(kind: str, name: str, nodes: int) -> list[str]:
    """The longest names the operator derives from the job's name, for a job on ``nodes`` nodes.

    mpi-operator v2beta1 (pkg/controller/mpi_job_controller.go): worker pods, each its own hostname,
    ``<name>-worker-<i>`` for i from 0 (one worker per node here), the workers' headless Service (their subdomain)
    ``<name>-worker``, the launcher's Job, hostname and Service ``<name>-launcher``; its validation
    (pkg/apis/kubeflow/validation) refuses a job whose ``<name>-worker-<replicas - 1>`` is no DNS label. v1 names
    the pods the same way (seed 004: taco-bench-worker-0, taco-bench-launcher). training-operator's PyTorchJob
    (GenGeneralName): pods and a Service each ``<name>-master-0`` and ``<name>-worker-<i>``, the workers being the
    nodes after the master's.
    """
    if kind == "MPIJob":
        return [f"{name}-launcher", f"{name}-worker-{nodes - 1}"]
    return [f"{name}-master-0"] + ([f"{name}-worker-{nodes - 2}"] if nodes > 1 else [])


def name_problems(cluster: Cluster, kind: str) -> list[str]:
    """workload_manifests_name too long for the names the operator derives from it for this many workers."""
    name, nodes = cluster.settings.name, len(cluster.nodes)
    if not name or not nodes:
        return []
    if not "a" <= name[0] <= "z":
        # The operator's Services (<name>-worker, <name>-launcher, <name>-master-0) are DNS-1035 labels, which the
        # API refuses when they start with a digit; a pod name alone would pass.
        return [
            f"{cluster.first}: {PREFIX}name={show(name)} starts with {name[0]!r}: the operator names Services after it "
            f"({name}-worker ...), and a Service name must start with a letter; allowed: a DNS-1035 label, a-z first, "
            "such as rdmaforge-train"
        ]
    longest = max(derived_names(kind, name, nodes), key=len)
    if len(longest) <= DNS_LABEL_MAX:
        return []
    workers = f"{nodes} workers" if kind == "MPIJob" else f"a master and {nodes - 1} workers"
    allowed = DNS_LABEL_MAX - (len(longest) - len(name))
    return [
        f"{cluster.first}: {PREFIX}name={show(name)} has {len(name)} characters, too long for {kind} with "
        f"{workers}: the operator would name a pod {longest}, {len(longest)} characters, and pod hostnames and "
        f"Service names are DNS labels of {DNS_LABEL_MAX} at most; allowed: {allowed} characters at most for {workers}"
    ]


def article(kind: str) -> str:
    """'an MPIJob', 'a PyTorchJob'."""
    return f"an {kind}" if kind[0] in "AEIMOU" else f"a {kind}"


@dataclass(frozen=True)
class JobShape:
    nodes: int
    gpus: int
    env: dict[str, str]


def check(cluster: Cluster, kind: str) -> tuple[JobShape | None, list[str]]:
    """Nodes, GPUs per node and the NCCL settings of the one pod template, or the problems. A node's unknown or
    zero GPU count leaves no shape: plan() names it once for every kind (nodes.gpu_problems)."""
    a_kind = article(kind)
    problems = name_problems(cluster, kind)
    if problems or not cluster.nodes or any(node.gpus is None or node.gpus < 1 for node in cluster.nodes):
        return None, problems
    first = cluster.nodes[0]
    counts = {node.name: node.gpus for node in cluster.nodes}
    if len(set(counts.values())) > 1:
        listing = by_value({h: str(c) for h, c in counts.items()})
        problems.append(
            f"{first.name}: the nodes have different GPU counts ({listing}); {a_kind} runs the same pod on "
            f"every node; allowed: one count, e.g. {PREFIX}gpus_per_node in group_vars"
        )
    problems += _resource_problems(cluster, kind)
    if kind == "MPIJob":
        problems += host_network_sshd_problems(cluster)
    for node in cluster.nodes[1:]:
        if node.env != first.env:
            problems.append(
                f"{node.name}: NCCL settings {show(node.env)} differ from {first.name}'s {show(first.env)}; "
                f"{a_kind} has one pod template; allowed: the same rdmaforge_fabric, nccl_env_overrides and "
                f"{PREFIX}env on every node"
            )
    return JobShape(len(cluster.nodes), int(first.gpus or 0), first.env), problems


#: The worker command of an mpi-operator v2beta1 MPIJob when mpijob_worker_command is null: sshd on port 22.
DEFAULT_V2_WORKER_COMMAND = ("/usr/sbin/sshd", "-De")


def host_network_sshd_problems(cluster: Cluster) -> list[str]:
    """An mpi-operator v2beta1 MPIJob on the node's network with the default worker command: each worker's sshd
    would need the node's port 22, which the node's own sshd holds (kubeflow/mpi-operator#593, #428), and the
    launcher's ssh would reach the node's sshd, which refuses the job's keys: the job never starts. Refused rather
    than moved to another port, which both the workers' sshd and the launcher's ssh would need (an image matter)."""
    settings = cluster.settings
    if not (settings.k8s_host_network and settings.mpijob_api_version == "kubeflow.org/v2beta1"
            and settings.mpijob_worker_command is None):  # fmt: skip
        return []
    return [
        f"{cluster.first}: {PREFIX}k8s_host_network=true with {PREFIX}mpijob_worker_command=null: the "
        f"kubeflow.org/v2beta1 MPIJob workers would run {' '.join(DEFAULT_V2_WORKER_COMMAND)} on the node's network, "
        f"where port 22 is the node's own sshd (the workers' sshd cannot bind it, and the launcher's ssh would reach "
        f"the node's sshd, which refuses the job's keys); allowed: {PREFIX}k8s_host_network: false, or an sshd on "
        f"another port on both sides, e.g. {PREFIX}mpijob_worker_command: [/usr/sbin/sshd, -De, -p, '2222'] with "
        f"{PREFIX}mpijob_mpirun_args: [--mca, plm_rsh_args, '-p 2222']"
    ]


#: The interface a pod on the pod network has besides lo (the CNI's): what NCCL_SOCKET_IFNAME must match there.
POD_INTERFACE = "eth0"
#: Such a pod's interfaces in the kernel's order: what NCCL chooses its socket interface from.
POD_INTERFACES = ("lo", POD_INTERFACE)


def pod_network_ifname_warnings(cluster: Cluster, kinds: Sequence[str]) -> list[str]:
    """The hosts' NCCL_SOCKET_IFNAME in pods on the pod network (k8s_host_network false): a pod has lo and the CNI's
    eth0 only, so a value naming the hosts' bond0 or ens1f0 matches no interface there and NCCL's bootstrap fails
    ("no socket interface found"); one that leaves lo first bootstraps over 127.0.0.1. One warning for the
    Kubeflow ``kinds`` rendered; none on the node's network."""
    if not kinds or cluster.settings.k8s_host_network or not cluster.nodes:
        return []
    env = cluster.nodes[0].env
    value = str(env.get("NCCL_SOCKET_IFNAME") or "").strip()
    chosen = nccl_env.first_socket_interface(value, POD_INTERFACES, env.get("NCCL_SOCKET_FAMILY"))
    if chosen == POD_INTERFACE:
        return []
    return [
        f"{cluster.first}: NCCL_SOCKET_IFNAME={value} (the hosts' setting) goes into the {' and '.join(kinds)} pods, "
        f"which are on the pod network ({PREFIX}k8s_host_network: false) and have only lo and {POD_INTERFACE} there: "
        f"{k8s.nccl_socket_outcome(chosen)}; set {PREFIX}k8s_host_network: true, or NCCL_SOCKET_IFNAME: "
        f"{POD_INTERFACE} in {PREFIX}env"
    ]


def mpi_interface_warnings(cluster: Cluster, kinds: Sequence[str]) -> list[str]:
    """The MPIJob's mpirun interfaces (mpijob_tcp_if_include: --mca btl_tcp_if_include and oob_tcp_if_include, names
    Open MPI matches exactly, or CIDR networks) against what its pods have, as pod_network_ifname_warnings judges
    NCCL_SOCKET_IFNAME: on the pod network only lo and eth0, so bond0 matches nothing (mpirun cannot reach the
    workers) and lo alone reaches no other pod; on the node's network the hosts' own interfaces, of which render
    knows the one NCCL_SOCKET_IFNAME selects. A CIDR network is not judged (render knows no addresses)."""
    settings = cluster.settings
    value = settings.mpijob_tcp_if_include
    if "MPIJob" not in kinds or not cluster.nodes or not value:
        return []
    names = value.split(",")
    if any("/" in name for name in names):
        return []
    variable = (f"{PREFIX}mpijob_tcp_if_include={value} (the MPIJob's mpirun --mca btl_tcp_if_include and "
                "oob_tcp_if_include)")  # fmt: skip
    if not settings.k8s_host_network:
        if POD_INTERFACE in names:
            return []
        outcome = ("Open MPI would use lo alone, which no other pod can reach" if "lo" in names else
                   "Open MPI would find none of them there, and mpirun could not reach the workers")  # fmt: skip
        return [
            f"{cluster.first}: {variable} goes into the MPIJob's pods, which are on the pod network "
            f"({PREFIX}k8s_host_network: false) and have only lo and {POD_INTERFACE} there: {outcome}; set "
            f"{PREFIX}mpijob_tcp_if_include: {POD_INTERFACE}, or {PREFIX}k8s_host_network: true"
        ]
    env = cluster.nodes[0].env
    ifname = str(env.get("NCCL_SOCKET_IFNAME") or "")
    if not ifname.isprintable() or nccl_env.socket_ifname(ifname) is None:
        return []  # unset or ignored: NCCL chooses by the node's interfaces, which render does not know
    family = env.get("NCCL_SOCKET_FAMILY")
    if nccl_env.first_socket_interface(ifname, names, None if family is None else str(family)) is not None:
        return []
    return [
        f"{cluster.first}: {variable} names no interface the hosts' NCCL_SOCKET_IFNAME={ifname} selects, and the "
        f"MPIJob's pods are on the node's network ({PREFIX}k8s_host_network: true): Open MPI's TCP traffic would "
        f"leave by another interface than NCCL's socket one, or find none on a node without {value}; set "
        f"{PREFIX}mpijob_tcp_if_include to the hosts' socket interface (the one NCCL_SOCKET_IFNAME={ifname} names)"
    ]


def rdma_access_findings(cluster: Cluster, kinds: Sequence[str]) -> tuple[list[str], list[str]]:
    """An RDMA fabric's pods need its devices: a privileged pod sees the node's /dev/infiniband, an unprivileged one
    only what a device plugin's resource (k8s_extra_resources, e.g. rdma/hca: 1) hands it. Without either NCCL
    finds no HCA and falls back to TCP sockets, the docker container's case (require_rdma_devices decides alike).
    One line for the Kubeflow ``kinds`` rendered (MPIJob, PyTorchJob): the options are the same for both. Returns
    (problems, warnings)."""
    settings = cluster.settings
    if not kinds or not cluster.nodes:
        return [], []
    first = cluster.nodes[0]
    if not fabrics.is_rdma(first.fabric) or settings.k8s_privileged or device_resources(settings.k8s_extra_resources):
        return [], []
    pods = " and ".join(f"{kind}'s" for kind in kinds)
    message = (f"{first.name}: rdmaforge_fabric={show(first.fabric)} uses RDMA but the {pods} pods are not "
               f"privileged ({PREFIX}k8s_privileged: false) and ask for no RDMA device plugin resource "
               f"({PREFIX}k8s_extra_resources names none: a device plugin's resource is domain/name, with a count of "
               f"1 or more): they would see no RDMA device, and NCCL would fall back to "
               f"TCP sockets; allowed: {PREFIX}k8s_privileged: true, or the device plugin's resource in "
               f"{PREFIX}k8s_extra_resources (e.g. rdma/hca: 1)")  # fmt: skip
    if settings.require_rdma_devices:
        return [message + f", or {PREFIX}require_rdma_devices: false"], []
    return [], [message + f" ({PREFIX}require_rdma_devices is false: not an error)"]


def device_resources(extra: Mapping[str, Any]) -> list[str]:
    """The device plugins' resources of ``extra`` a pod asks one or more of: extended resources (domain/name, as
    rdma/hca or rdma/rdma_shared_device_a), the GPU's aside. Any entry let the RDMA check pass before, even
    ephemeral-storage or rdma/hca: 0, with pods that would see no RDMA device (review round 21c)."""
    return [name for name, count in extra.items()
            if "/" in str(name) and name != GPU_RESOURCE and (whole_number(count) or 0) > 0]  # fmt: skip


def _resource_problems(cluster: Cluster, kind: str) -> list[str]:
    """k8s_extra_resources naming a resource the job sets itself (one of the two values would be dropped), and
    hugepages without the cpu or memory limit the API requires with them.

    The GPU limit must be the count the ranks are sized by (slotsPerWorker, -np, --nproc-per-node); an
    MPIJob also sets memory and hugepages-1Gi from its own options.
    """
    settings, first = cluster.settings, cluster.nodes[0]
    extra = settings.k8s_extra_resources
    variable = f"{PREFIX}k8s_extra_resources"
    problems = []
    if GPU_RESOURCE in extra:
        problems.append(
            f"{first.name}: {variable} has {GPU_RESOURCE}={show(extra[GPU_RESOURCE])}, but the {kind}'s pods get "
            f"the node's GPU count ({first.gpu_source}={first.gpus}), which sizes its ranks; allowed: other "
            f"resources (e.g. rdma/hca), and the GPU count in {PREFIX}gpus_per_node"
        )
    if kind == "MPIJob":
        for key, option, value in (
            ("memory", f"{PREFIX}mpijob_memory", settings.mpijob_memory),
            ("hugepages-1Gi", f"{PREFIX}mpijob_hugepages_1gi", settings.mpijob_hugepages_1gi),
        ):
            if key in extra and value is not None:
                problems.append(
                    f"{first.name}: {variable} has {key}={show(extra[key])} and {option}={show(value)} sets it too; "
                    f"the MPIJob workers have one {key} limit; allowed: one of the two ({option}: null, or "
                    f"{key} left out of {variable})"
                )
    extra_hugepages = sorted(name for name in extra if name.startswith(HUGEPAGES_PREFIX))
    memory = kind == "MPIJob" and settings.mpijob_memory is not None
    if extra_hugepages and not memory and not {"cpu", "memory"} & set(extra):
        problems.append(
            f"{first.name}: {variable} has {', '.join(extra_hugepages)} and no cpu or memory"
            f"{f' (and {PREFIX}mpijob_memory=null)' if kind == 'MPIJob' else ''}: Kubernetes refuses the {kind}'s pods "
            f"('HugePages require cpu or memory'); allowed: a cpu or memory limit in {variable}"
            f"{f' or {PREFIX}mpijob_memory' if kind == 'MPIJob' else ''}, or no hugepages-<size> in {variable}"
        )
    if kind == "MPIJob":
        hugepages = settings.mpijob_hugepages_1gi
        if hugepages is not None and settings.mpijob_memory is None and not {"cpu", "memory"} & set(extra):
            problems.append(
                f"{first.name}: {PREFIX}mpijob_hugepages_1gi={show(hugepages)} with {PREFIX}mpijob_memory=null and no "
                f"cpu or memory in {variable}: Kubernetes refuses the workers ('HugePages require cpu or memory'); "
                f"allowed: a memory limit in {PREFIX}mpijob_memory (seed 004: 100Gi), "
                f"or {PREFIX}mpijob_hugepages_1gi: null"
            )
    return problems


#: Role hugepages' page sizes (its argument_specs' choices of hugepages_size), in bytes.
HUGEPAGE_SIZES = {"1G": 2**30, "2M": 2**21}


@dataclass(frozen=True)
class HugepagesRequest:
    """A hugepages-<size> limit of the job's pods, and the variable that brings it."""

    variable: str
    resource: str
    quantity: str
    page_bytes: int
    pods: str


def hugepages_requests(cluster: Cluster, kinds: Sequence[str] = ("MPIJob",)) -> list[HugepagesRequest]:
    """Every hugepages limit the pods of ``kinds`` get: mpijob_hugepages_1gi (the MPIJob workers) and each
    hugepages-<size> of k8s_extra_resources (the MPIJob workers and every PyTorchJob pod)."""
    settings = cluster.settings
    pods = " and ".join(f"{kind} {'worker' if kind == 'MPIJob' else 'pod'}" for kind in kinds)
    found = []
    if "MPIJob" in kinds and settings.mpijob_hugepages_1gi is not None:
        found.append(HugepagesRequest(f"{PREFIX}mpijob_hugepages_1gi", "hugepages-1Gi", settings.mpijob_hugepages_1gi,
                                      2**30, "MPIJob worker"))  # fmt: skip
    for name, quantity in settings.k8s_extra_resources.items() if kinds else ():
        page = k8s.quantity_value(name.removeprefix(HUGEPAGES_PREFIX)) if name.startswith(HUGEPAGES_PREFIX) else None
        if page is not None and page > 0 and page == int(page):
            found.append(HugepagesRequest(f"{PREFIX}k8s_extra_resources", name, quantity, int(page), pods))
    return found


def _page_size_name(size: int) -> str:
    """2**30 -> 1Gi, 2**21 -> 2Mi, as a hugepages resource names its page size."""
    for unit, suffix in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def _hugepages_variable_problems(node_name: str, variables: Mapping[str, Any]) -> list[str]:
    """Role hugepages' variables that its argument_specs refuse (`rdmaforge render` never runs that role)."""
    problems = []
    enabled = variables.get("hugepages_enabled")
    if enabled is not None and spec_bool(enabled) is None:
        problems.append(f"{node_name}: hugepages_enabled={show(enabled)} is not valid; allowed: true or false "
                        "(role hugepages' argument_specs: bool), or null")  # fmt: skip
    size = variables.get("hugepages_size")
    if size is not None and not (isinstance(size, str) and size in HUGEPAGE_SIZES):  # a list is unhashable
        problems.append(f"{node_name}: hugepages_size={show(size)} is not valid; allowed: "
                        f"{', '.join(HUGEPAGE_SIZES)} (role hugepages' argument_specs' choices), or null")  # fmt: skip
    given = variables.get("hugepages_count")
    count = whole_number(given)
    if given not in (None, "") and (count is None or count < 0):
        problems.append(
            f"{node_name}: hugepages_count={show(given)} is not valid; allowed: a whole number of pages, "
            "0 or more (above 0 with hugepages_enabled: true), or null for seed 004's rule by GPU count"
        )
    return problems


def hugepages_findings(cluster: Cluster, kinds: Sequence[str] = ("MPIJob",)) -> tuple[list[str], list[str]]:
    """The pods' hugepages limits (hugepages_requests: mpijob_hugepages_1gi or a hugepages-<size> of
    k8s_extra_resources, one check whichever brings it) against the pages role hugepages reserves on each node
    (seed 004: 50 pages of 1 GiB on an 8-GPU node, requested as 50Gi): problems where the node reserves fewer pages
    or another page size (the pods would stay Pending), or role hugepages' variables are not valid; warnings where
    the inventory reserves none."""
    problems: list[str] = []
    warnings: list[str] = []
    requests = hugepages_requests(cluster, kinds)
    if not requests:
        return problems, warnings
    for node in cluster.nodes:
        problems += _hugepages_variable_problems(node.name, node.hugepages)
    for request in requests:
        value = k8s.quantity_value(request.quantity)
        if value is None:
            continue
        wanted, option, resource = request.quantity, request.variable, request.resource
        own = option.endswith("_1gi")
        shown = option if own else f"{option} {resource}"
        drop = f"{option}: null" if own else f"{resource} left out of {option}"
        page_name = _page_size_name(request.page_bytes)
        if value <= 0 or not k8s.whole_multiple(value, request.page_bytes):
            problems.append(f"{cluster.first}: {shown}={wanted} is not a whole number of {page_name} pages (a number "
                            f"without a unit is bytes); allowed: a positive multiple of {page_name}, such as "
                            f"50{page_name[-2:]}")  # fmt: skip
            continue
        pages = int(value // request.page_bytes)
        for node in cluster.nodes:
            variables = node.hugepages
            if _hugepages_variable_problems(node.name, variables):
                continue  # named above
            if not spec_bool(role_defaults.value_of(variables, "hugepages_enabled")):
                warnings.append(
                    f"{node.name}: {shown}={wanted}, but hugepages_enabled is false (role hugepages reserves no "
                    f"pages on this node): the {request.pods}s stay Pending unless the node has {pages} pages of "
                    f"{page_name} reserved some other way; set {drop}, or "
                    "hugepages_enabled: true"
                )
                continue
            size = str(variables.get("hugepages_size") or role_defaults.default_of("hugepages_size"))
            if HUGEPAGE_SIZES.get(size) != request.page_bytes:
                matching = [k for k, v in HUGEPAGE_SIZES.items() if v == request.page_bytes]
                fixes = [f"hugepages_size: {matching[0]}"] if matching else []
                if not own:
                    fixes.append(f"hugepages-{_page_size_name(HUGEPAGE_SIZES.get(size, 2**30))} in {option}")
                problems.append(
                    f"{node.name}: {shown}={wanted} requests {resource}, but hugepages_size={show(size)} reserves "
                    f"pages of another size on this node; allowed: {', '.join(fixes)}, or {drop}"
                )
                continue
            given = variables.get("hugepages_count")
            count = whole_number(given)
            if count is None and node.gpus is None:
                continue  # the unknown GPU count is a problem of its own
            reserved = tuning.hugepages_count(node.gpus or 0, count)
            source = (
                f"hugepages_count={count}"
                if count is not None
                else f"hugepages_count=null: seed 004's rule for {node.gpus} GPUs, 50 on 8, else GPUs x 5 + 10"
            )
            if pages > reserved:
                problems.append(
                    f"{node.name}: {shown}={wanted} asks each {request.pods} for {pages} pages of {page_name}, but "
                    f"the node reserves {reserved} ({source}): the {request.pods} would never be scheduled; allowed: "
                    f"{_page_size_name(reserved * request.page_bytes)} at most, or hugepages_count: {pages} or more"
                )
    return problems, warnings


def _security_context(settings: Settings) -> dict[str, Any]:
    # Privileged sees the node's RDMA devices and /sys (HARP reads it); otherwise RDMA at least needs to
    # pin memory, which IPC_LOCK allows.
    if settings.k8s_privileged:
        return {"privileged": True}
    return {"privileged": False, "capabilities": {"add": ["IPC_LOCK"]}}


def _pod_spec(settings: Settings, containers: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if volumes:
        spec["volumes"] = volumes
    if settings.k8s_host_network:
        # ClusterFirstWithHostNet keeps the job's service names (launcher, master) resolvable.
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    return spec


def _gpu_limits(settings: Settings, gpus: int) -> dict[str, str]:
    limits = {GPU_RESOURCE: str(gpus)}
    limits.update(settings.k8s_extra_resources)
    return limits


def mpirun(settings: Settings, shape: JobShape) -> list[str]:
    """mpirun with one rank per GPU of every worker, exporting every NCCL (and LightCC) setting."""
    interface = settings.mpijob_tcp_if_include
    command = [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        str(shape.nodes * shape.gpus),
        "--bind-to",
        "none",
        "--map-by",
        "slot",
        "--mca",
        "btl_tcp_if_include",
        interface,
        "--mca",
        "oob_tcp_if_include",
        interface,
    ]
    for name in [*sorted(shape.env), "PATH", "LD_LIBRARY_PATH"]:
        command += ["-x", name]
    return [*command, *settings.mpijob_mpirun_args, *settings.mpijob_program]


def mpijob(settings: Settings, shape: JobShape) -> dict[str, Any]:
    """Launcher (mpirun, no GPU) plus one worker per node (seed 004: privileged, host paths, hugepages)."""
    v2 = settings.mpijob_api_version == "kubeflow.org/v2beta1"
    env = k8s.env_list(shape.env)
    launcher = {
        "name": MPI_CONTAINER,
        "image": settings.image,
        "command": mpirun(settings, shape),
        "env": env,
        "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
    }
    worker_command = settings.mpijob_worker_command or (DEFAULT_V2_WORKER_COMMAND if v2 else ("sleep", "infinity"))
    limits = _gpu_limits(settings, shape.gpus)
    if settings.mpijob_memory:
        limits["memory"] = settings.mpijob_memory
    if settings.mpijob_hugepages_1gi:
        limits["hugepages-1Gi"] = settings.mpijob_hugepages_1gi
    mounts = [{"name": p.name, "mountPath": p.path} for p in settings.mpijob_host_paths] + [k8s.shm_mount()]
    volumes = [{"name": p.name, "hostPath": {"path": p.path}} for p in settings.mpijob_host_paths]
    volumes.append(k8s.shm_volume(settings.k8s_shm_size))
    worker = {
        "name": MPI_CONTAINER,
        "image": settings.image,
        "command": list(worker_command),
        "env": env,
        "securityContext": _security_context(settings),
        "resources": {"limits": limits},
        "volumeMounts": mounts,
    }
    spec: dict[str, Any] = {
        "slotsPerWorker": shape.gpus,
        "runPolicy": {"cleanPodPolicy": settings.k8s_clean_pod_policy},
    }
    if v2:
        spec["mpiImplementation"] = "OpenMPI"
        spec["sshAuthMountPath"] = SSH_AUTH_MOUNT_PATH
    spec["mpiReplicaSpecs"] = {
        "Launcher": {
            "replicas": 1,
            "restartPolicy": "OnFailure",
            "template": {"spec": _pod_spec(settings, [launcher], [])},
        },
        "Worker": {
            "replicas": shape.nodes,
            "restartPolicy": "Never",
            "template": {"spec": _pod_spec(settings, [worker], volumes)},
        },
    }
    return {
        "apiVersion": settings.mpijob_api_version,
        "kind": "MPIJob",
        "metadata": k8s.metadata(settings.name, settings.namespace),
        "spec": spec,
    }


def torchrun(settings: Settings, shape: JobShape) -> list[str]:
    """Seed 001's torchrun: nodes and processes per node from the inventory, c10d rendezvous on the master.

    training-operator sets MASTER_ADDR in every pod; Kubernetes expands ``$(MASTER_ADDR)`` in the command.
    """
    return [
        "torchrun",
        f"--nnodes={shape.nodes}",
        f"--nproc-per-node={shape.gpus}",
        f"--rdzv-id={settings.name}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=$(MASTER_ADDR):{settings.pytorchjob_rdzv_port}",
        *settings.pytorchjob_script,
    ]


def pytorchjob(settings: Settings, shape: JobShape) -> dict[str, Any]:
    """Master plus (nodes - 1) workers, each a node's worth of GPUs, all running the same torchrun."""
    container = {
        "name": PYTORCH_CONTAINER,
        "image": settings.image,
        "command": torchrun(settings, shape),
        "env": k8s.env_list(shape.env),
        # The master's Service exposes this port, where torchrun's c10d store listens.
        "ports": [{"name": PYTORCH_PORT_NAME, "containerPort": settings.pytorchjob_rdzv_port}],
        "securityContext": _security_context(settings),
        "resources": {"limits": _gpu_limits(settings, shape.gpus)},
        "volumeMounts": [k8s.shm_mount()],
    }

    def replica(count: int) -> dict[str, Any]:
        pod = _pod_spec(settings, [dict(container)], [k8s.shm_volume(settings.k8s_shm_size)])
        return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": pod}}

    replicas = {"Master": replica(1)}
    if shape.nodes > 1:
        replicas["Worker"] = replica(shape.nodes - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": k8s.metadata(settings.name, settings.namespace),
        "spec": {
            "nprocPerNode": str(shape.gpus),
            "runPolicy": {"cleanPodPolicy": settings.k8s_clean_pod_policy},
            "pytorchReplicaSpecs": replicas,
        },
    }


def summary(kind: str, settings: Settings, shape: JobShape) -> Sequence[str]:
    api = settings.mpijob_api_version if kind == "MPIJob" else "kubeflow.org/v1"
    nodes = f"{shape.nodes} node{'' if shape.nodes == 1 else 's'}"
    return [f"{kind} ({api}): {nodes} x {shape.gpus} GPUs = {shape.nodes * shape.gpus} ranks."]
