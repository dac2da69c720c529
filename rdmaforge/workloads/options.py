"""The variables of role ``workload_manifests``, read the same way by the role and by ``rdmaforge render``.

The defaults live in ``roles/workload_manifests/defaults/main.yml`` only: the role gets them from Ansible,
the CLI reads the same file as plain YAML. Every problem is one line naming the host, the variable, the
bad value and what is allowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rdmaforge.paths import ROLES_DIR
from rdmaforge.plain_data import show, spec_bool, whole_number
from rdmaforge.role_defaults import defaults
from rdmaforge.stored import MAX_GPUS
from rdmaforge.text import by_value
from rdmaforge.workloads import KINDS
from rdmaforge.workloads.k8s import SHM_VOLUME, extended_problem, is_extended_resource, is_multiple, quantity_value

ROLE_DIR = ROLES_DIR / "workload_manifests"
ARGUMENT_SPECS_FILE = ROLE_DIR / "meta" / "argument_specs.yml"
TEMPLATES_DIR = ROLE_DIR / "templates"

PREFIX = "workload_manifests_"
#: Variables only the role reads (the CLI has -o and --validate instead); they may hold Jinja.
ROLE_ONLY = frozenset(
    {"workload_manifests_dir", "workload_manifests_group", "workload_manifests_validate",
     "workload_manifests_kubernetes_version"}
)
#: Variables that may differ between nodes; every other one describes the one job of the whole cluster.
PER_NODE = frozenset(
    {
        "workload_manifests_gpus_per_node",
        "workload_manifests_rdma_dev_dir",
        "workload_manifests_rdma_device_files",
        "workload_manifests_docker_binary",
        "workload_manifests_docker_gpu_mode",
        "workload_manifests_docker_extra_args",
    }
)

DOCKER_GPU_MODES = ("runtime", "gpus")
ACS_KINDS = ("Deployment", "Job")
ACS_COMPUTE_CLASSES = ("gpu", "gpu-hpn")
ACS_COMPUTE_QOS = ("default", "best-effort")
MPIJOB_API_VERSIONS = ("kubeflow.org/v2beta1", "kubeflow.org/v1")
CLEAN_POD_POLICIES = ("None", "Running", "All")

# \Z, not $: $ also matches before a final newline, and "rdmaforge-train\n" would pass as a name.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
# No '-': a Kubernetes quantity may be negative, but no resource request or limit (the only quantities here) may.
_QUANTITY = re.compile(r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?\Z")
_DOCKER_SIZE = re.compile(r"^([0-9]+)([bkmgBKMG]?)\Z")
# A docker image reference (github.com/distribution/reference, regexp.go): [host[:port]/]path[:tag][@digest], the
# path lower-case. Checked because the image is a word of `docker run`: one starting with '-' would be read as an
# option, and one with a blank or a control character names no image.
_IMAGE_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_DOMAIN = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IMAGE_HOST = rf"(?:{_IMAGE_DOMAIN}(?:\.{_IMAGE_DOMAIN})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_IMAGE = re.compile(
    rf"(?P<name>(?:{_IMAGE_HOST}/)?{_IMAGE_COMPONENT}(?:/{_IMAGE_COMPONENT})*)"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?\Z"
)
#: The longest image name (without tag and digest) docker accepts.
_IMAGE_NAME_MAX = 255
_IMAGE_ALLOWED = (
    "a docker image reference: [registry[:port]/]name[:tag][@digest] with a lower-case name, no blanks, control "
    "characters or leading '-', such as nvcr.io/nvidia/pytorch:24.05-py3"
)
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
#: The container resources Kubernetes names without a domain (IsStandardContainerResourceName, k8s.io/kubernetes
#: pkg/apis/core/helper), besides hugepages-<size>.
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"
_RESOURCE_NAMES_ALLOWED = (
    "cpu, memory, ephemeral-storage, hugepages-<page size> (such as hugepages-1Gi), or a domain-prefixed extended "
    "resource such as rdma/hca or nvidia.com/gpu (a qualified name: a DNS subdomain of 253 characters at most, '/', "
    "a name of 63 at most), each with a quantity"
)
#: The largest int32, the type of a Deployment's or a Job's replica counts in the API.
INT32_MAX = 2**31 - 1
#: Blanks or control characters: a path or a program with them is not the word of a command line meant.
_BLANK_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
#: One entry of Open MPI's btl/oob_tcp_if_include: a Linux interface name (1-15 characters, IFNAMSIZ, no blank, '/'
#: or ',') or a network in CIDR notation.
_IF_ENTRY = re.compile(r"^(?:[^\s/,:]{1,15}|[0-9]{1,3}(?:\.[0-9]{1,3}){3}/[0-9]{1,2})\Z")


def resource_name_problem(name: str) -> str | None:
    """Why Kubernetes refuses ``name`` as a container resource (validateContainerResourceName), or None."""
    if name in STANDARD_CONTAINER_RESOURCES:
        return None
    if name.startswith(HUGEPAGES_PREFIX):
        size = quantity_value(name.removeprefix(HUGEPAGES_PREFIX))
        if size is None or size <= 0 or size != int(size):
            return "is not hugepages-<page size> with a page size such as 1Gi or 2Mi"
        return None
    if "/" not in name:
        return "has no domain, and is not a standard resource for containers (Kubernetes refuses it)"
    prefix, _, base = name.partition("/")
    if not _RESOURCE_NAME.match(name) or len(prefix) > 253 or len(base) > 63 or name.startswith("requests."):
        return "is not a qualified resource name (Kubernetes refuses it)"
    return None


def role_defaults() -> dict[str, Any]:
    """The role's defaults that describe the workload (ROLE_ONLY left out): the options, by name."""
    return {str(k): v for k, v in defaults("workload_manifests").items() if k not in ROLE_ONLY}


def option_names() -> list[str]:
    """Names of every option; the role reads exactly these and hands them over."""
    return sorted(role_defaults())


def nccl_env_profiles() -> dict[str, Any]:
    """``nccl_env_profiles`` from role nccl_env's defaults: the NCCL settings per fabric profile (not a copy)."""
    profiles = defaults("nccl_env").get("nccl_env_profiles") or {}
    return dict(profiles) if isinstance(profiles, Mapping) else {}


def nccl_env_accelerators() -> dict[str, Any]:
    """``nccl_env_accelerators`` from role nccl_env's defaults (seed 004's taco among them)."""
    table = defaults("nccl_env").get("nccl_env_accelerators") or {}
    return dict(table) if isinstance(table, Mapping) else {}


@dataclass(frozen=True)
class HostPath:
    """A host directory mounted at the same path in a pod (seed 004's /sys, /dev/hugepages, ...)."""

    name: str
    path: str


@dataclass(frozen=True)
class Settings:
    """The options that describe the job of the whole cluster (the same on every node)."""

    #: Empty: the kinds that apply to the cluster's fabric (plan.applicable_kinds).
    kinds: tuple[str, ...]
    name: str
    namespace: str
    image: str
    command: tuple[str, ...]
    env: dict[str, object]
    shm_size: str
    require_rdma_devices: bool
    acs_kind: str
    acs_gpu_model: str | None
    acs_compute_class: str
    acs_compute_qos: str
    acs_replicas: int | None
    acs_cpu: str
    acs_memory: str
    k8s_privileged: bool
    k8s_host_network: bool
    k8s_extra_resources: dict[str, str]
    k8s_clean_pod_policy: str
    mpijob_api_version: str
    mpijob_program: tuple[str, ...]
    mpijob_mpirun_args: tuple[str, ...]
    mpijob_tcp_if_include: str
    mpijob_worker_command: tuple[str, ...] | None
    mpijob_hugepages_1gi: str | None
    mpijob_memory: str | None
    mpijob_host_paths: tuple[HostPath, ...]
    pytorchjob_script: tuple[str, ...]
    pytorchjob_rdzv_port: int

    @property
    def k8s_shm_size(self) -> str:
        """The docker size as a Kubernetes quantity: 8g -> 8Gi (both are binary multiples)."""
        return docker_size_to_quantity(self.shm_size)


@dataclass(frozen=True)
class NodeSettings:
    """The options that may differ between nodes."""

    gpus_per_node: int | None
    rdma_dev_dir: str
    rdma_device_files: tuple[str, ...] | None
    docker_binary: str
    docker_gpu_mode: str
    docker_extra_args: tuple[str, ...]


#: The least shared memory a training container may get: docker's own default /dev/shm.
MIN_SHM_BYTES = 64 * 2**20


def docker_size_bytes(size: str) -> int:
    """``8g`` -> 8589934592 (docker's k, m and g are binary multiples); ValueError for no docker size."""
    match = _DOCKER_SIZE.match(size)
    if not match:
        raise ValueError(f"{size!r} is not a docker size")
    number, unit = match.groups()
    return int(number) * {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit.lower()]


def docker_size_to_quantity(size: str) -> str:
    """``8g`` -> ``8Gi``; docker's k/m/g are binary multiples, as are Kubernetes' Ki/Mi/Gi."""
    match = _DOCKER_SIZE.match(size)
    if not match:
        raise ValueError(f"{size!r} is not a docker size")
    number, unit = match.groups()
    return number + {"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi"}[unit.lower()]


def is_dns_label(text: str) -> bool:
    return len(text) <= 63 and bool(_DNS_LABEL.match(text))


#: Why a NUL character is refused: execve ends an argument at it, and neither a shell script nor a systemd unit can
#: write one.
_NUL = "holds a NUL character, which no command line can carry"


class Reader:
    """Reads one host's options, appending a line to ``problems`` for every bad value.

    Values come from Ansible (typed) or from ``ansible-inventory --list`` (JSON), so numbers written as
    strings ("8") are accepted where a number is meant. A bad value reads as None (or the fallback).
    """

    def __init__(self, host: str, values: Mapping[str, Any], problems: list[str]) -> None:
        self.host = host
        self.values = values
        self.problems = problems

    def bad(self, name: str, why: str, allowed: str) -> None:
        self.problems.append(f"{self.host}: {name}={show(self.values.get(name))} {why}; allowed: {allowed}")

    def raw(self, name: str) -> Any:
        return self.values.get(name)

    def string(self, name: str, pattern: re.Pattern[str] | None = None, allowed: str = "a non-empty string") -> str:
        value = self.values.get(name)
        if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
            self.bad(name, "is not valid", allowed)
            return ""
        text = str(value)
        if pattern is not None and not pattern.match(text):
            self.bad(name, "is not valid", allowed)
            return ""
        if "\0" in text:
            self.bad(name, _NUL, allowed + " without NUL")
            return ""
        return text

    def optional_string(self, name: str, pattern: re.Pattern[str] | None = None, allowed: str = "") -> str | None:
        if self.values.get(name) in (None, ""):
            return None
        return self.string(name, pattern, allowed + ", or null") or None

    def choice(self, name: str, choices: Sequence[str]) -> str:
        value = self.values.get(name)
        if value not in choices:
            self.bad(name, "is not valid", ", ".join(choices))
            return choices[0]
        return str(value)

    def integer(self, name: str, minimum: int, maximum: int | None = None) -> int | None:
        value = self.values.get(name)
        allowed = f"an integer from {minimum}" + (f" to {maximum}" if maximum is not None else "")
        number = whole_number(value)
        if number is None or number < minimum or (maximum is not None and number > maximum):
            self.bad(name, "is not valid", allowed)
            return None
        return number

    def optional_integer(self, name: str, minimum: int, maximum: int | None = None) -> int | None:
        if self.values.get(name) is None:
            return None
        return self.integer(name, minimum, maximum)

    def boolean(self, name: str) -> bool:
        value = spec_bool(self.values.get(name))
        if value is None:
            self.bad(name, "is not valid", "true or false")
            return False
        return value

    def strings(self, name: str, allow_empty: bool = True) -> tuple[str, ...]:
        value = self.values.get(name)
        if (
            not isinstance(value, list)
            or any(isinstance(v, bool) or not isinstance(v, str | int | float) for v in value)
            or (not allow_empty and not value)
        ):
            self.bad(name, "is not valid", "a list of strings" + ("" if allow_empty else " (at least one)"))
            return ()
        if any("\0" in str(v) for v in value):
            self.bad(name, _NUL, "a list of strings without NUL")
            return ()
        return tuple(str(v) for v in value)

    def optional_strings(self, name: str, allow_empty: bool = True) -> tuple[str, ...] | None:
        if self.values.get(name) is None:
            return None
        return self.strings(name, allow_empty)

    def mapping(self, name: str) -> dict[str, object]:
        value = self.values.get(name)
        if not isinstance(value, Mapping):
            self.bad(name, "is not valid", "a mapping")
            return {}
        return {str(k): v for k, v in value.items()}

    def quantity(self, name: str, optional: bool = False) -> str | None:
        value = self.values.get(name)
        if optional and value in (None, ""):
            return None
        if isinstance(value, bool) or not isinstance(value, str | int) or not _QUANTITY.match(str(value)):
            allowed = "a Kubernetes quantity such as 8, 500m, 100Gi" + (", or null" if optional else "")
            self.bad(name, "is not valid", allowed)
            return None
        return str(value)

    def memory(self, name: str, optional: bool = False) -> str | None:
        """A memory quantity of at least MIN_MEMORY_BYTES (memory_problem)."""
        value = self.quantity(name, optional)
        why = memory_problem(value) if value is not None else None
        if why is not None:  # a problem: nothing is written, the value stays
            self.bad(name, f"is {why}", MEMORY_ALLOWED + (", or null" if optional else ""))
        return value

    def cpu(self, name: str) -> str | None:
        """A CPU quantity above 0 (cpu_problem)."""
        value = self.quantity(name)
        why = cpu_problem(value) if value is not None else None
        if why is not None:
            self.bad(name, f"is {why}", CPU_ALLOWED)
        return value


MEMORY_ALLOWED = "a memory quantity of 64Mi or more, such as 100Gi"
CPU_ALLOWED = "a positive CPU quantity such as 128 or 500m"
EXTENDED_ALLOWED = "a whole number, such as 1"


def memory_problem(quantity: str) -> str | None:
    """Why a memory limit (a quantity) is none a container starts under: below MIN_MEMORY_BYTES, as a bare 100 is
    100 bytes (seed 004 writes 100Gi). None when it is enough."""
    number = quantity_value(quantity)
    if number is not None and number < MIN_MEMORY_BYTES:
        return f"{number} bytes (a number without a unit is bytes)"
    return None


def cpu_problem(quantity: str) -> str | None:
    """Why a CPU limit (a quantity) is none a pod runs with: 0 (seed 002 asks for 128). None when above 0."""
    number = quantity_value(quantity)
    if number is not None and number <= 0:
        return "no CPU at all"
    return None




#: The least memory a pod's limit may give (Kubernetes starts no container with a few bytes; docker's least is 6m).
MIN_MEMORY_BYTES = 64 * 2**20


def read_settings(host: str, values: Mapping[str, Any], problems: list[str]) -> Settings:
    r = Reader(host, values, problems)
    # [] (the default): the kinds that apply to the cluster's fabric (plan.applicable_kinds).
    kinds = r.strings(f"{PREFIX}kinds")
    for kind in kinds:
        if kind not in KINDS:
            r.bad(f"{PREFIX}kinds", f"names {kind!r}, which is not a kind", ", ".join(KINDS))
    name = r.string(f"{PREFIX}name", _DNS_LABEL, "a DNS-1123 label: a-z, 0-9 and '-', such as rdmaforge-train")
    # A DNS label. Kubeflow adds "-launcher", "-worker-<i>" ...: kubeflow.name_problems checks those for the job's
    # real number of workers.
    if len(name) > 63:
        r.bad(f"{PREFIX}name", "is longer than a DNS label", "63 characters at most")
    resources: dict[str, str] = {}
    for key, value in r.mapping(f"{PREFIX}k8s_extra_resources").items():
        why = resource_name_problem(key)
        if why is not None:
            r.bad(f"{PREFIX}k8s_extra_resources", f"names {show(key)}, which {why}", _RESOURCE_NAMES_ALLOWED)
        elif as_quantity(value) is None:
            r.bad(f"{PREFIX}k8s_extra_resources", f"has {key}={show(value)}, which is not a quantity",
                  _RESOURCE_NAMES_ALLOWED)  # fmt: skip
        else:
            # The rules of the options that set the same limit (mpijob_memory, acs_cpu) and the API server's.
            rule = {"memory": (memory_problem, MEMORY_ALLOWED), "cpu": (cpu_problem, CPU_ALLOWED)}.get(key)
            if rule is None and is_extended_resource(key):
                rule = (extended_problem, EXTENDED_ALLOWED)
            why = rule[0](str(value)) if rule is not None else None
            if rule is not None and why is not None:
                r.bad(f"{PREFIX}k8s_extra_resources", f"has {key}={show(value)}, which is {why}",
                      f"for {key}, {rule[1]}")  # fmt: skip
            resources[key] = str(value)
    host_paths: list[HostPath] = []
    raw_paths = r.raw(f"{PREFIX}mpijob_host_paths")
    if not isinstance(raw_paths, list) or not all(
        isinstance(p, Mapping)
        and isinstance(p.get("name"), str)
        and is_dns_label(str(p.get("name")))
        and isinstance(p.get("path"), str)
        and str(p.get("path")).startswith("/")
        for p in raw_paths
    ):
        r.bad(f"{PREFIX}mpijob_host_paths", "is not valid", "a list of {name: <DNS-1123 label>, path: /absolute}")
    else:
        host_paths = [HostPath(str(p["name"]), str(p["path"])) for p in raw_paths]
        # validateHostPathVolumeSource (validatePathNoBacksteps): the API refuses a path with a '..' element.
        backsteps = [p.path for p in host_paths if ".." in p.path.split("/")]
        if backsteps:
            r.bad(f"{PREFIX}mpijob_host_paths", f"has {', '.join(backsteps)}, with a '..' element (Kubernetes refuses "
                  "a hostPath that contains '..')", "absolute paths without '..', such as /sys")  # fmt: skip
            host_paths = []
        # Each becomes a volume and a mount beside the shared-memory one (dshm at /dev/shm): a name or a path given
        # twice makes a pod the API server refuses.
        names = [p.name for p in host_paths] + [SHM_VOLUME]
        paths = [p.path.rstrip("/") or "/" for p in host_paths] + ["/dev/shm"]
        twice = sorted({n for n in names if names.count(n) > 1} | {q for q in paths if paths.count(q) > 1})
        if twice:
            r.bad(f"{PREFIX}mpijob_host_paths", f"names {', '.join(twice)} twice (with the shared memory volume "
                  f"{SHM_VOLUME} at /dev/shm)", "each name and each path once, other than dshm and /dev/shm")
            host_paths = []
    shm = r.string(f"{PREFIX}shm_size", _DOCKER_SIZE, "a docker size: a number with b, k, m or g, such as 8g")
    if shm and docker_size_bytes(shm) < MIN_SHM_BYTES:
        # 8 (no unit) is 8 bytes: NCCL's shared-memory transport and the data loaders would fail at their first use.
        r.bad(f"{PREFIX}shm_size", f"is {docker_size_bytes(shm)} bytes, below docker's own default of 64m (a unit "
                                   "left out?)", "a docker size of 64m or more, such as 8g")  # fmt: skip
        shm = ""
    hugepages = r.quantity(f"{PREFIX}mpijob_hugepages_1gi", optional=True)
    if hugepages is not None and not is_multiple(hugepages, 2**30):
        # Kubernetes refuses a hugepages-1Gi limit that is not whole pages; a bare 50 (seed 004's page count) is bytes.
        r.bad(
            f"{PREFIX}mpijob_hugepages_1gi",
            "is not a whole number of 1 GiB pages (a number without a unit is bytes)",
            "a positive multiple of 1Gi such as 50Gi (seed 004: 50 pages of 1 GiB), or null",
        )
        hugepages = None
    image = r.string(f"{PREFIX}image", _IMAGE, _IMAGE_ALLOWED)
    found = _IMAGE.fullmatch(image)
    if found is not None and len(found.group("name")) > _IMAGE_NAME_MAX:
        r.bad(f"{PREFIX}image", f"has a name longer than {_IMAGE_NAME_MAX} characters", _IMAGE_ALLOWED)
        image = ""
    return Settings(
        kinds=tuple(k for k in KINDS if k in kinds),
        name=name or "rdmaforge-train",
        namespace=r.string(f"{PREFIX}namespace", _DNS_LABEL, "a DNS-1123 label such as default") or "default",
        image=image,
        command=r.strings(f"{PREFIX}command", allow_empty=False),
        env=r.mapping(f"{PREFIX}env"),
        shm_size=shm or "8g",
        require_rdma_devices=r.boolean(f"{PREFIX}require_rdma_devices"),
        acs_kind=r.choice(f"{PREFIX}acs_kind", ACS_KINDS),
        acs_gpu_model=r.optional_string(f"{PREFIX}acs_gpu_model", allowed="an ACS GPU model"),
        acs_compute_class=r.choice(f"{PREFIX}acs_compute_class", ACS_COMPUTE_CLASSES),
        acs_compute_qos=r.choice(f"{PREFIX}acs_compute_qos", ACS_COMPUTE_QOS),
        acs_replicas=r.optional_integer(f"{PREFIX}acs_replicas", 1, INT32_MAX),
        acs_cpu=r.cpu(f"{PREFIX}acs_cpu") or "0",
        acs_memory=r.memory(f"{PREFIX}acs_memory") or "0",
        k8s_privileged=r.boolean(f"{PREFIX}k8s_privileged"),
        k8s_host_network=r.boolean(f"{PREFIX}k8s_host_network"),
        k8s_extra_resources=resources,
        k8s_clean_pod_policy=r.choice(f"{PREFIX}k8s_clean_pod_policy", CLEAN_POD_POLICIES),
        mpijob_api_version=r.choice(f"{PREFIX}mpijob_api_version", MPIJOB_API_VERSIONS),
        mpijob_program=r.strings(f"{PREFIX}mpijob_program", allow_empty=False),
        mpijob_mpirun_args=r.strings(f"{PREFIX}mpijob_mpirun_args"),
        mpijob_tcp_if_include=_interfaces(r, f"{PREFIX}mpijob_tcp_if_include"),
        mpijob_worker_command=r.optional_strings(f"{PREFIX}mpijob_worker_command", allow_empty=False),
        mpijob_hugepages_1gi=hugepages,
        mpijob_memory=r.memory(f"{PREFIX}mpijob_memory", optional=True),
        mpijob_host_paths=tuple(host_paths),
        pytorchjob_script=r.strings(f"{PREFIX}pytorchjob_script", allow_empty=False),
        pytorchjob_rdzv_port=r.integer(f"{PREFIX}pytorchjob_rdzv_port", 1, 65535) or 29500,
    )


#: An absolute path that names something below the root directory.
_BELOW_ROOT = re.compile(r"^/.*[^/]")


def _interfaces(r: Reader, name: str) -> str:
    """Open MPI's btl_tcp_if_include / oob_tcp_if_include: a comma-separated list of interfaces (or CIDR networks).
    "eth0 eth1" would be one interface name to Open MPI, and none matches it."""
    allowed = ("a comma-separated list of interface names (1-15 characters, no blank, '/' or ':') or CIDR networks, "
               "such as eth0 or eth0,bond0 or 192.168.0.0/16")  # fmt: skip
    text = r.string(name, allowed=allowed)
    if text and not all(_IF_ENTRY.match(entry) for entry in text.split(",")):
        r.bad(name, "is not a list of interfaces", allowed)
        return ""
    return text


def _command_path(r: Reader, name: str, example: str, colon: bool = False) -> str:
    """An absolute path that becomes a word of a command line (docker's binary, --device=<dir>/<file>)."""
    without = "blanks, control characters or ':'" if colon else "blanks or control characters"
    allowed = f"an absolute path below / without {without}, such as {example}"
    # "/" is no directory of devices nor a binary: rstrip("/") made it "", which became the default path unnamed
    text = r.string(name, _BELOW_ROOT, allowed)
    if text and _BLANK_OR_CONTROL.search(text):
        r.bad(name, "holds a blank or a control character (one word of the command line, not a path with options)",
              allowed)  # fmt: skip
        return ""
    if text and colon and ":" in text:
        r.bad(name, "holds ':', which docker's --device reads as host:container:permissions", allowed)
        return ""
    return text


def read_node_settings(host: str, values: Mapping[str, Any], problems: list[str]) -> NodeSettings:
    r = Reader(host, values, problems)
    dev_dir = _command_path(r, f"{PREFIX}rdma_dev_dir", "/dev/infiniband", colon=True)
    binary = _command_path(r, f"{PREFIX}docker_binary", "/usr/bin/docker")
    return NodeSettings(
        gpus_per_node=r.optional_integer(f"{PREFIX}gpus_per_node", 1, MAX_GPUS),
        rdma_dev_dir=dev_dir.rstrip("/") or "/dev/infiniband",
        rdma_device_files=r.optional_strings(f"{PREFIX}rdma_device_files"),
        docker_binary=binary or "/usr/bin/docker",
        docker_gpu_mode=r.choice(f"{PREFIX}docker_gpu_mode", DOCKER_GPU_MODES),
        docker_extra_args=r.strings(f"{PREFIX}docker_extra_args"),
    )


def as_quantity(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int) or not _QUANTITY.match(str(value)):
        return None
    return str(value)


def cluster_wide_differences(values_per_host: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Cluster-wide options must have one value: a job has one image, one name, one pod template."""
    problems: list[str] = []
    hosts = sorted(values_per_host)
    if not hosts:
        return problems
    names = sorted({n for values in values_per_host.values() for n in values} - PER_NODE - ROLE_ONLY)
    for name in names:
        seen: dict[str, list[str]] = {}
        for host in hosts:
            key = json.dumps(values_per_host[host].get(name), sort_keys=True, default=str)
            seen.setdefault(key, []).append(host)
        if len(seen) > 1:
            listing = by_value({host: show(json.loads(key)) for key, hosts in seen.items() for host in hosts})
            problems.append(
                f"{hosts[0]}: {name} differs between nodes ({listing}); allowed: one value for the whole "
                f"cluster (set it in group_vars), since every node runs the same job"
            )
    return problems
