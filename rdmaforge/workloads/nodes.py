"""Per-node inputs: fabric, NCCL settings, GPU count and RDMA device files, from a host's variables.

The role hands over what Ansible resolved (and what it found on the node); ``rdmaforge render`` hands
over the output of ``ansible-inventory --list`` merged with the role's defaults. Both end up here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import yaml

from rdmaforge import fabrics, role_defaults
from rdmaforge.inventory_checks import fabric_problems, gpu_count_problems, mixed_fabric_problems
from rdmaforge.node_facts import known_gpu_count
from rdmaforge.parsers import nccl_env
from rdmaforge.paths import ROLES_DIR
from rdmaforge.plain_data import show, spec_bool
from rdmaforge.stored import MAX_GPUS
from rdmaforge.workloads.options import (
    PREFIX,
    NodeSettings,
    Settings,
    cluster_wide_differences,
    nccl_env_accelerators,
    read_node_settings,
    read_settings,
)

#: Host variables (besides the options) the workloads read: the fabric, role nccl_env's variables, the net plugin
#: (whether NCCL_IB_DISABLE leaves RDMA to a plugin or sends NCCL to sockets), and the fact preflight publishes.
HOST_VARIABLES: tuple[str, ...] = (
    "rdmaforge_fabric",
    "nccl_env_profile",
    "nccl_env_profiles",
    "nccl_env_overrides",
    "nccl_env_accelerator",
    "nccl_env_accelerators",
    "nccl_env_ib_hca_from_topology",
    "nccl_env_strict_names",
    "nccl_plugin_provider",
    "rdmaforge_node",
    "rdmaforge_gpus_per_node",
    "rdmaforge_topology",
    "hugepages_enabled",
    "hugepages_size",
    "hugepages_count",
)
#: Role hugepages' variables, which say how many huge pages of which size the node reserves.
HUGEPAGES_VARIABLES = ("hugepages_enabled", "hugepages_size", "hugepages_count")

#: Device files NCCL (libibverbs, librdmacm) opens; umadN and issmN are for management tools only.
# The kernel numbers uverbs devices from 0 without leading zeros: uverbs00 is no device.
_RDMA_DEVICE_FILE = re.compile(r"^(rdma_cm|uverbs(0|[1-9][0-9]*))$")
_UVERBS = re.compile(r"^uverbs(0|[1-9][0-9]*)$")


@dataclass(frozen=True)
class HostInput:
    """What is known about one host before anything is checked.

    ``options``: the workload_manifests_* values for this host (defaults applied). ``variables``: the
    other host variables of HOST_VARIABLES. ``found_device_files``: names the role found in
    workload_manifests_rdma_dev_dir on the node, or None when nobody looked (the CLI never does).
    """

    name: str
    options: Mapping[str, Any]
    variables: Mapping[str, Any] = field(default_factory=dict)
    found_device_files: list[str] | None = None


@dataclass(frozen=True)
class Node:
    name: str
    fabric: str
    profile: str
    #: GPUs per node, or None when unknown (a problem only for the kinds that need the count).
    gpus: int | None
    #: Where the count came from (a variable name), or why it is unknown, for messages.
    gpu_source: str
    #: Absolute paths of the RDMA device files passed to docker (empty on socket-only fabrics).
    device_files: tuple[str, ...]
    #: The NCCL settings in force on this node (profile, nccl_env_overrides, workload_manifests_env).
    env: dict[str, str]
    settings: NodeSettings
    nccl_profiles: Mapping[str, Any]
    nccl_overrides: Mapping[str, Any]
    #: Role hugepages' variables as the inventory sets them (absent: the role's defaults apply).
    hugepages: Mapping[str, Any] = field(default_factory=dict)
    #: A variable was set to no GPU count, and a line of its own says so (gpu_problems adds none).
    gpu_refused: bool = False
    #: The settings of the node's training accelerator (nccl_env_accelerator), merged over any profile.
    nccl_accelerator: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rdma(self) -> bool:
        """True on fabrics where NCCL is expected to use RDMA (and so needs the device files)."""
        return fabrics.is_rdma(self.fabric)

    def env_for_profile(self, profile: str, extra: Mapping[str, object]) -> dict[str, str]:
        """The settings this node would have with another profile (the ACS GPU model's), same accelerator and
        overrides (the rail map is this node's own HCAs', not a pod's elsewhere)."""
        return environment(self.nccl_profiles, profile, self.nccl_overrides, extra, self.nccl_accelerator,
                           gpus=self.gpus)  # fmt: skip


class ContainerFallback(NamedTuple):
    """A node's setting that the host's net plugin makes harmless there but not in a container (no plugin)."""

    host: str
    fabric: str
    plugin: str | None
    fallback: nccl_env.Fallback


@dataclass
class Cluster:
    nodes: list[Node]
    settings: Settings
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: The device files' findings: the docker kind's only (Kubernetes pods get RDMA by their own means, which
    #: kubeflow.rdma_access_findings checks), so an ACS render of seed 002 needs no docker device list.
    docker_problems: list[str] = field(default_factory=list)
    docker_warnings: list[str] = field(default_factory=list)
    #: Settings that send NCCL to TCP sockets in the containers only: a host's net plugin (nccl_plugin_provider)
    #: carries RDMA with NCCL_IB_DISABLE set on the host, but the containers do not load it (container_fallbacks).
    container_fallbacks: list[ContainerFallback] = field(default_factory=list)

    @property
    def first(self) -> str:
        return self.nodes[0].name if self.nodes else "cluster"


def environment(
    profiles: Mapping[str, Any],
    profile: str,
    overrides: Mapping[str, Any],
    extra: Mapping[str, object],
    accelerator: Mapping[str, Any] | None = None,
    topology: Mapping[str, str] | None = None,
    gpus: int | None = None,
) -> dict[str, str]:
    """nccl_env's profile, its accelerator (nccl_env_accelerator), the rail map's NCCL_IB_HCA
    (nccl_env_ib_hca_from_topology), nccl_env_overrides, then workload_manifests_env; null removes a setting.
    A value node_gpu_count (taco's LIGHT_INTRA_SIZE) becomes ``gpus``, as role nccl_env does on the node."""
    base = profiles.get(profile) or {}
    merged = nccl_env.merge(base if isinstance(base, Mapping) else {}, accelerator or {})
    merged = nccl_env.merge(merged, topology or {})
    return nccl_env.with_gpu_count(nccl_env.merge(nccl_env.merge(merged, overrides), extra), gpus)


def accelerator_name(variables: Mapping[str, Any]) -> Any:
    """nccl_env_accelerator as role nccl_env reads it: the inventory's value when set (even '' or null), else the
    role's default."""
    if "nccl_env_accelerator" in variables:
        return variables["nccl_env_accelerator"]
    return role_defaults.default_of("nccl_env_accelerator")


def _names_a_key(name: object, table: Mapping[str, Any]) -> bool:
    """Whether ``name`` is a key of ``table``: a list or mapping given as a name ([erdma]) is none, not a crash."""
    return isinstance(name, Hashable) and name in table


def _accelerator(
    host: str, variables: Mapping[str, Any], defaults: Mapping[str, Any], problems: list[str]
) -> Mapping[str, Any]:
    """The settings of nccl_env_accelerator (role nccl_env's table unless the inventory overrides it)."""
    # Set, even to {}, '' or null, the value is the role's (never its default): role nccl_env's check
    # (`nccl_env_accelerator in nccl_env_accelerators`) fails on each of those, so render refuses them too.
    table = variables["nccl_env_accelerators"] if "nccl_env_accelerators" in variables else defaults
    name = accelerator_name(variables)
    if not isinstance(table, Mapping):
        problems.append(f"{host}: nccl_env_accelerators={show(table)} is not valid; allowed: a mapping (role "
                        "nccl_env fails on anything else)")  # fmt: skip
        return {}
    if not _names_a_key(name, table):
        keys = ", ".join(sorted(map(str, table))) or (
            f"no name, since nccl_env_accelerators={show(table)} is empty (role nccl_env fails on every "
            f"nccl_env_accelerator); set nccl_env_accelerators, or leave it unset for role nccl_env's "
            f"({', '.join(sorted(map(str, defaults)))})"
        )
        problems.append(
            f"{host}: nccl_env_accelerator={show(name)} is not a key of nccl_env_accelerators; allowed: {keys}"
        )
        return {}
    chosen = table[name]
    if not isinstance(chosen, Mapping):  # null too: role nccl_env's merge fails on it, never reads it as {}
        problems.append(f"{host}: nccl_env_accelerators[{name}]={show(chosen)} is not valid; allowed: a mapping")
        return {}
    return chosen


@functools.cache
def net_plugin_choices() -> tuple[str, ...]:
    """The values of nccl_plugin_provider role nccl_plugin's argument_specs accept (preflight checks the same)."""
    specs = yaml.safe_load((ROLES_DIR / "nccl_plugin" / "meta" / "argument_specs.yml").read_text()) or {}
    option = specs["argument_specs"]["main"]["options"]["nccl_plugin_provider"]
    return tuple(str(choice) for choice in option["choices"])


def _net_plugin(host: str, variables: Mapping[str, Any], fabric: str, problems: list[str]) -> str | None:
    """The node's NCCL net plugin: the inventory's nccl_plugin_provider, else role nccl_plugin's default for the
    fabric. None (and a line in ``problems`` when the value is bad) when it is not known here."""
    if "nccl_plugin_provider" in variables:
        given = variables["nccl_plugin_provider"]
        choices = net_plugin_choices()
        if not (isinstance(given, str) and given in choices):
            problems.append(
                f"{host}: nccl_plugin_provider={show(given)} is not valid for role nccl_plugin; allowed: "
                f"{', '.join(choices)} (its argument_specs' choices), or unset for the fabric's own"
            )
            return None
        return given
    try:
        plugin = role_defaults.evaluated_default("nccl_plugin_provider", {**variables, "rdmaforge_fabric": fabric})
    except (KeyError, ValueError):  # a template only Ansible can evaluate: the plugin is not known here
        return None
    return str(plugin)


#: The characters no environment value may hold: nccl_env's definition (the settings' own check uses it too).
_CONTROL = nccl_env.CONTROL_CHARACTERS
_CONTROL_ALLOWED = nccl_env.CONTROL_ALLOWED


def _control_problems(host: str, variable: str, env: Mapping[str, Any], keys: Iterable[str] | None = None) -> list[str]:
    """One line per value of ``env`` (those of ``keys``, when given) that holds a control character."""
    chosen = env if keys is None else {key: value for key, value in env.items() if key in keys}
    return [f"{host}: {variable}.{key}={show(value)} holds the control character {show(found.group())}; "
            f"allowed: {_CONTROL_ALLOWED}"
            for key, value in chosen.items()
            if isinstance(value, str) and (found := _CONTROL.search(value))]  # fmt: skip


def _name_problems(host: str, variable: str, names: Iterable[object]) -> list[str]:
    """One line per name in ``names`` that is no environment variable's (nccl_env's rule, asked of the name alone: a
    null value has nothing else to check), named by the variable that set it: 'A=B' reached the containers as A."""
    return [f"{host}: {variable}: {found}" for name in names for found in nccl_env.problems({str(name): None})]


def _text_problems(host: str, variable: str, env: Mapping[str, Any]) -> list[str]:
    """An environment variable holds text: a list or mapping would reach the containers as Python's repr. Named by
    the variable that set it (the merged settings' own check, nccl_env.problems, leaves those keys to this line)."""
    return [f"{host}: {variable}.{problem}" for key, value in env.items()
            if (problem := nccl_env.text_value_problem(key, value)) is not None]  # fmt: skip


def select_device_files(names: Iterable[str]) -> list[str]:
    """rdma_cm first, then uverbsN in numeric order; other names (umad0, issm0, ...) are dropped."""
    chosen = {name.rsplit("/", 1)[-1] for name in names}
    chosen = {name for name in chosen if _RDMA_DEVICE_FILE.match(name)}

    def order(name: str) -> tuple[int, int]:
        match = _UVERBS.match(name)
        return (1, int(match.group(1))) if match else (0, 0)

    return sorted(chosen, key=order)


#: The inventory's GPU count for a node whose fact has none: benchmark and mpi_launch take it too.
DECLARED_GPUS = "rdmaforge_gpus_per_node"


class GpuCount(NamedTuple):
    """A node's GPU count as render reads it."""

    gpus: int | None
    #: Where the count came from (a variable name), or why it is unknown, for messages.
    source: str
    #: A variable was set to no GPU count: its own line names it (``lines``, or read_node_settings' line).
    refused: bool = False
    lines: tuple[str, ...] = ()
    #: What is suspicious but not wrong about the count.
    warnings: tuple[str, ...] = ()


def _given_gpu_count(host: str, given: int, fact: object, declared: object) -> GpuCount:
    """workload_manifests_gpus_per_node against the count benchmark and mpi_launch use (the fact's, else
    rdmaforge_gpus_per_node: the benchmark's ranks, the hostfile's slots). Against rdmaforge_gpus_per_node, two
    counts of the inventory for one node: refused, naming both. Against the GPUs preflight found: a warning, since
    workload_manifests_gpus_per_node is the documented way to correct a count preflight read wrong (gpu_problems)."""
    variable = f"{PREFIX}gpus_per_node"
    counted = known_gpu_count(fact)
    if counted is not None and counted != given:
        return GpuCount(given, variable, warnings=(
            f"{host}: {variable}={given} sizes the jobs, but preflight found {counted} GPUs on the node "
            f"(rdmaforge_node.gpu_count), the count the benchmark and the MPI hostfile (mpi_launch) use; set "
            f"{variable}: null to take it",))  # fmt: skip
    theirs = known_gpu_count(None, declared) if counted is None else None
    if theirs is not None and theirs != given:
        return GpuCount(given, variable, lines=(
            f"{host}: {variable}={given} differs from {DECLARED_GPUS}={theirs}, the count the benchmark and the MPI "
            f"hostfile (mpi_launch) use; allowed: one count: {variable}: null (or {theirs}), or {DECLARED_GPUS}: "
            f"{given}",))  # fmt: skip
    return GpuCount(given, variable)


def _gpu_count(
    host: str, settings: NodeSettings, variables: Mapping[str, Any], options: Mapping[str, Any]
) -> GpuCount:
    """The node's GPU count and where it came from (or why it is unknown). In order: workload_manifests_gpus_per_node,
    the rdmaforge_node fact of preflight, the inventory's rdmaforge_gpus_per_node (node_facts.known_gpu_count, as
    benchmark and mpi_launch read them)."""
    fact = variables.get("rdmaforge_node")
    if settings.gpus_per_node is not None:
        return _given_gpu_count(host, settings.gpus_per_node, fact, variables.get(DECLARED_GPUS))
    given = options.get(f"{PREFIX}gpus_per_node")
    if given is not None:  # set, to no GPU count (-1, 0, 8.5, true): read_node_settings named it
        return GpuCount(None, f"{PREFIX}gpus_per_node={show(given)} is not a GPU count", refused=True)
    counted = known_gpu_count(fact)
    if counted is not None:
        return GpuCount(counted, "rdmaforge_node.gpu_count")
    declared = variables.get(DECLARED_GPUS)
    if declared is not None:
        number = known_gpu_count(None, declared)
        if number is not None and number <= MAX_GPUS:
            return GpuCount(number, DECLARED_GPUS)
        refused = [p.message for p in gpu_count_problems(host, {DECLARED_GPUS: declared})] or [
            f"{host}: {DECLARED_GPUS}={show(declared)} is not a GPU count; allowed: a whole number from 1 to "
            f"{MAX_GPUS}, or null"]  # fmt: skip
        return GpuCount(None, f"{DECLARED_GPUS}={show(declared)} is not a GPU count", True, tuple(refused))
    if isinstance(fact, Mapping):  # preflight ran and could not read the count: unknown, never 0 GPUs
        return GpuCount(None, f"rdmaforge_node.gpu_count is null (preflight could not read the GPU count: "
                              f"gpu_source {fact.get('gpu_source')}) and neither {PREFIX}gpus_per_node nor "
                              f"{DECLARED_GPUS} is set")  # fmt: skip
    return GpuCount(None, f"neither {PREFIX}gpus_per_node nor {DECLARED_GPUS} is set and the rdmaforge_node fact "
                          "of preflight is not available (`rdmaforge render` reads no facts)")  # fmt: skip


def _device_files(
    host: str, fabric: str, settings: NodeSettings, found: list[str] | None, require: bool, cluster: Cluster
) -> tuple[str, ...]:
    listed = settings.rdma_device_files
    rdma = fabrics.is_rdma(fabric)
    variable = f"{PREFIX}rdma_device_files"
    if listed is not None:
        # A path elsewhere (/dev/infiniband_erdma/uverbs0, ../uverbs0) was cut to its name under rdma_dev_dir: the
        # container got another directory's device, or none.
        elsewhere = [n for n in listed if "/" in n and n.rsplit("/", 1)[0].rstrip("/") != settings.rdma_dev_dir]
        if elsewhere:
            cluster.docker_problems.append(
                f"{host}: {variable}={show(list(listed))} names {', '.join(elsewhere)}, outside "
                f"{PREFIX}rdma_dev_dir={settings.rdma_dev_dir}; allowed: bare names (rdma_cm, uverbsN) or paths in "
                f"{settings.rdma_dev_dir}, or set {PREFIX}rdma_dev_dir to the directory of the devices"
            )
        unusable = [n for n in listed if n not in elsewhere and not _RDMA_DEVICE_FILE.match(n.rsplit("/", 1)[-1])]
        if unusable:
            cluster.docker_problems.append(
                f"{host}: {variable}={show(list(listed))} names {', '.join(unusable)}, which NCCL does not "
                f"open; allowed: rdma_cm and uverbsN names (files of {settings.rdma_dev_dir})"
            )
        names = select_device_files(listed)
        source = f"{variable}: {', '.join(names) or 'none'}"
    elif found is not None:
        names = select_device_files(found)
        source = f"found in {settings.rdma_dev_dir}: {', '.join(names) or 'none'}"
    else:
        names, source = [], f"{variable} is not set, and `rdmaforge render` cannot look at the nodes"
    if not rdma:
        if listed:
            cluster.docker_warnings.append(
                f"{host}: {variable} is ignored: rdmaforge_fabric={show(fabric)} uses TCP sockets, not RDMA"
            )
        return ()
    uverbs = [n for n in names if n.startswith("uverbs")]
    if not uverbs:
        message = (
            f"{host}: rdmaforge_fabric={show(fabric)} uses RDMA but the docker container would get no uverbs "
            f"device ({source}), so NCCL would fall back to TCP sockets; "
            f"allowed: the node's uverbsN devices, e.g. {variable}: [rdma_cm, uverbs0, uverbs1]"
        )
        if require:
            cluster.docker_problems.append(message + f", or {PREFIX}require_rdma_devices: false")
        else:
            cluster.docker_warnings.append(message + f" ({PREFIX}require_rdma_devices is false: not an error)")
    elif "rdma_cm" not in names:
        cluster.docker_warnings.append(
            f"{host}: no rdma_cm ({source}); librdmacm (used by eRDMA and by NCCL's RDMA CM setup) needs "
            f"{settings.rdma_dev_dir}/rdma_cm: load the rdma_ucm kernel module on the node"
        )
    return tuple(f"{settings.rdma_dev_dir}/{n}" for n in names)


def build_cluster(
    hosts: Iterable[HostInput],
    default_profiles: Mapping[str, Any],
    default_accelerators: Mapping[str, Any] | None = None,
) -> Cluster:
    """Check every host's inputs and build the nodes; problems and warnings are collected, never raised."""
    inputs = sorted(hosts, key=lambda h: h.name)
    problems: list[str] = []
    if default_accelerators is None:
        default_accelerators = nccl_env_accelerators()
    if not inputs:
        problems.append("cluster: no nodes to render for; allowed: an inventory with hosts in the cluster group")
    problems += cluster_wide_differences({h.name: h.options for h in inputs})
    first = inputs[0] if inputs else HostInput("cluster", {})
    settings = read_settings(first.name, first.options, problems)
    cluster = Cluster(nodes=[], settings=settings, problems=problems)
    cluster.problems += _text_problems(first.name, f"{PREFIX}env", settings.env)
    cluster.problems += _control_problems(first.name, f"{PREFIX}env", settings.env)  # once: it is cluster-wide
    cluster.problems += _name_problems(first.name, f"{PREFIX}env", settings.env)
    # Preflight's rule: one fabric profile per cluster (a job's NCCL settings, its pods' devices, are per cluster).
    mixed = mixed_fabric_problems([(h.name, h.variables.get("rdmaforge_fabric")) for h in inputs])
    cluster.problems += [p.message for p in mixed]
    for host in inputs:
        node_settings = read_node_settings(host.name, host.options, cluster.problems)
        variables = host.variables
        fabric = variables.get("rdmaforge_fabric")
        fabric_issues = fabric_problems(host.name, fabric)
        cluster.problems += [p.message for p in fabric_issues]
        fabric_name = "tcp" if fabric_issues else str(fabric)
        # Set, even to {} or null, the table is the inventory's, never role nccl_env's defaults: the role looks the
        # profile up in it (`nccl_env_profiles[nccl_env_profile] | default({})`), and so does render.
        profiles = variables["nccl_env_profiles"] if "nccl_env_profiles" in variables else default_profiles
        if profiles is None:
            profiles = {}
        profiles_refused = not isinstance(profiles, Mapping)
        if not isinstance(profiles, Mapping):
            cluster.problems.append(f"{host.name}: nccl_env_profiles={show(profiles)} is not valid; allowed: a mapping")
            profiles = {}
        # Unset (or null): the role's default, for the fabric profile checked above (tcp when it is not valid).
        given = variables.get("nccl_env_profile")
        profile = given if given is not None else role_defaults.evaluated_default(
            "nccl_env_profile", {**variables, "rdmaforge_fabric": fabric_name}
        )  # fmt: skip
        if given is not None and not (isinstance(given, str) and given in fabrics.NAMES):
            # Role nccl_env's argument_specs choices (preflight refuses the same): '' and names of one's own too.
            cluster.problems.append(
                f"{host.name}: nccl_env_profile={show(given)} is not valid for role nccl_env; allowed: "
                f"{', '.join(fabrics.NAMES)} (its argument_specs' choices), or unset for the fabric's own"
            )
        elif not _names_a_key(profile, profiles) and not profiles_refused:
            if profiles:
                allowed = ", ".join(sorted(map(str, profiles)))
            else:  # the role gives the hosts no profile settings at all; the containers would get them from nowhere
                allowed = (f"nccl_env_profiles={show(variables.get('nccl_env_profiles'))} has no profile, so role "
                           "nccl_env gives the hosts none of the profile's NCCL settings; set nccl_env_profiles with "
                           f"a {show(profile)} profile, or leave it unset for role nccl_env's")  # fmt: skip
            cluster.problems.append(
                f"{host.name}: nccl_env_profile={show(profile)} is not a profile of nccl_env_profiles; "
                f"allowed: {allowed}"
            )
        overrides = variables.get("nccl_env_overrides")
        overrides = {} if overrides is None else overrides  # '' or 0 is no mapping: role nccl_env's spec refuses it
        if not isinstance(overrides, Mapping):
            cluster.problems.append(
                f"{host.name}: nccl_env_overrides={show(overrides)} is not valid; allowed: a mapping"
            )
            overrides = {}
        cluster.problems += _text_problems(host.name, "nccl_env_overrides", overrides)
        accelerator = _accelerator(host.name, variables, default_accelerators, cluster.problems)
        from_topology = role_defaults.value_of(variables, "nccl_env_ib_hca_from_topology")
        if spec_bool(from_topology) is None:  # 'maybe' read as false without a word; the role's bool refuses it
            cluster.problems.append(f"{host.name}: nccl_env_ib_hca_from_topology={show(from_topology)} is not valid; "
                                    "allowed: true or false (role nccl_env's argument_specs: bool)")  # fmt: skip
            from_topology = False
        rails, missing = nccl_env.topology_settings(from_topology, variables.get("rdmaforge_topology"))
        if missing and "NCCL_IB_HCA" not in overrides:
            # `rdmaforge render` reads no facts: the hosts' nccl.conf has the rail map's value, the files cannot.
            cluster.warnings.append(f"{host.name}: {missing}; the rendered NCCL_IB_HCA is the profile's")
        count = _gpu_count(host.name, node_settings, variables, host.options)
        cluster.problems += count.lines
        cluster.warnings += count.warnings
        gpus = count.gpus
        env = environment(profiles, str(profile), overrides, settings.env, accelerator, rails, gpus)
        named = {key for given in (overrides, settings.env) for key, value in given.items()
                 if nccl_env.text_value_problem(key, value) is not None}  # fmt: skip
        # A control character, named by the variable that set it (workload_manifests_env's were named above).
        controlled = {key for key, value in env.items() if _CONTROL.search(value)}
        chosen_accelerator = accelerator_name(variables)
        layers: list[tuple[str, object]] = [
            ("nccl_env_overrides", overrides), ("rdmaforge_topology", rails or {}),
            (f"nccl_env_accelerators[{chosen_accelerator}]", accelerator),
            (f"nccl_env_profiles[{profile}]", profiles.get(profile) if _names_a_key(profile, profiles) else {}),
        ]  # fmt: skip
        left = controlled - set(settings.env)
        for variable, layer in layers:
            if not isinstance(layer, Mapping):
                continue
            cluster.problems += _control_problems(host.name, variable, env, left & set(layer))
            left -= set(layer)
        # A list or mapping in the profile or the accelerator's settings that reaches the files (nothing above it
        # sets the name) would be written as Python's repr, as one in nccl_env_overrides.
        above: set[str] = {*overrides, *settings.env}
        for variable, layer in layers[2:]:  # the accelerator's, then the profile's
            if isinstance(layer, Mapping):
                kept = {key: value for key, value in layer.items() if key not in above}
                cluster.problems += _text_problems(host.name, variable, kept)
                named |= {key for key, value in kept.items() if nccl_env.text_value_problem(key, value) is not None}
                above |= set(layer)
            elif layer is None and variable.startswith("nccl_env_profiles["):
                cluster.problems.append(f"{host.name}: {variable}=null is not valid; allowed: a mapping (role "
                                        "nccl_env's merge fails on it)")  # fmt: skip
        named |= controlled
        # A name no environment variable may have, named by the variable that set it (workload_manifests_env's above).
        bad_names = {key for key in env if _name_problems(host.name, "", [key])}
        unnamed = bad_names - set(settings.env)
        for variable, layer in layers:
            if isinstance(layer, Mapping):
                cluster.problems += _name_problems(host.name, variable, sorted(unnamed & set(layer), key=str))
                unnamed -= set(layer)
        named |= bad_names
        checked = {key: value for key, value in env.items() if key not in named}  # a line of their own above
        cluster.problems += [f"{host.name}: NCCL settings: {e}" for e in nccl_env.problems(checked)]
        plugin = _net_plugin(host.name, variables, fabric_name, cluster.problems)
        if fabrics.is_rdma(fabric_name):  # preflight's rule (inventory_checks.rdma_fallback_problems), on the files
            on_host = nccl_env.rdma_fallbacks(checked, plugin)
            cluster.problems += [
                f"{host.name}: NCCL settings (rdmaforge_fabric={fabric_name}, nccl_plugin_provider={plugin}): "
                f"{f.why}; allowed: {f.allowed} (nccl_env_overrides, {PREFIX}env), or a net plugin "
                f"(nccl_plugin_provider)" for f in on_host
            ]
            # The plugin is the host's (a directory registered with ld.so): no container mounts it, so the containers
            # are judged as with none, as the ACS check judges its pods.
            named_on_host = {f.setting for f in on_host}
            cluster.container_fallbacks += [
                ContainerFallback(host.name, fabric_name, plugin, f)
                for f in nccl_env.rdma_fallbacks(checked, "none") if f.setting not in named_on_host
            ]
        unknown = nccl_env.unknown_names(env)
        if unknown and spec_bool(role_defaults.value_of(variables, "nccl_env_strict_names")):
            # as role nccl_env (and preflight) refuse them with nccl_env_strict_names: true
            cluster.problems.append(f"{host.name}: {', '.join(unknown)} unknown to NCCL (typo?); allowed with "
                                    "nccl_env_strict_names: true: NCCL's own names (rdmaforge/data/nccl_env_names.txt)")
        elif unknown:
            cluster.warnings.append(
                f"{host.name}: {', '.join(unknown)} unknown to NCCL (typo?); NCCL ignores them "
                f"(see rdmaforge/data/nccl_env_names.txt)"
            )
        # Devices follow the fabric: an invalid one (refused above) has none to judge, not tcp's warnings.
        devices = () if fabric_issues else _device_files(
            host.name, fabric_name, node_settings, host.found_device_files, settings.require_rdma_devices, cluster
        )  # fmt: skip
        cluster.nodes.append(
            Node(
                name=host.name,
                fabric=fabric_name,
                profile=str(profile),
                gpus=gpus,
                gpu_source=count.source,
                gpu_refused=count.refused,
                device_files=devices,
                env=env,
                settings=node_settings,
                nccl_profiles=profiles,
                nccl_overrides=overrides,
                nccl_accelerator=accelerator,
                hugepages={name: variables[name] for name in HUGEPAGES_VARIABLES if name in variables},
            )
        )
    return cluster


def gpu_problems(nodes: Iterable[Node], sized_by_count: Sequence[str], given_gpus: Sequence[str]) -> list[str]:
    """One line per node whose GPU count stops what it renders: unknown while ``sized_by_count`` (the kinds that
    size their job by the count: "an MPIJob") is not empty, or below 1 while that or ``given_gpus`` (the kinds that
    hand the node's GPUs over: "the docker container") is not empty. Each kind named in the one line."""
    problems = []
    for node in nodes:
        if node.gpu_refused:
            continue
        if node.gpus is None and sized_by_count:
            needs = " and ".join(sized_by_count)
            problems.append(
                f"{node.name}: the GPU count is unknown: {node.gpu_source}; {needs} "
                f"{'need' if len(sized_by_count) > 1 else 'needs'} it; "
                f"allowed: {PREFIX}gpus_per_node (or {DECLARED_GPUS}): an integer from 1 to {MAX_GPUS}"
            )
        elif node.gpus is not None and node.gpus < 1 and (sized_by_count or given_gpus):
            kinds = [*sized_by_count, *given_gpus]
            runs = ", ".join(kinds[:-1]) + f" or {kinds[-1]}" if len(kinds) > 1 else kinds[0]
            problems.append(
                f"{node.name}: {node.gpu_source}={node.gpus}: a node without GPUs cannot run {runs}; "
                f"allowed: 1 or more (set {PREFIX}gpus_per_node if the count is wrong)"
            )
    return problems


def container_fallback_problems(cluster: Cluster, containers: Sequence[str]) -> list[str]:
    """One line per node whose NCCL settings would send the ``containers`` rendered ("the docker container", "the
    MPIJob's pods") to TCP sockets although its own net plugin carries RDMA on the host: the plugin is installed on
    the host, which no container sees (it is neither mounted nor in the image), so NCCL there has no plugin."""
    if not containers:
        return []
    where = " and ".join(containers)
    return [
        f"{found.host}: NCCL settings in {where} (rdmaforge_fabric={found.fabric}): {found.fallback.why}; the host's "
        f"net plugin (nccl_plugin_provider={found.plugin}) is installed on the host (registered with ld.so), not in "
        f"{where}, so NCCL there loads none; allowed: {found.fallback.allowed} in the containers "
        f"({PREFIX}env: {{{found.fallback.setting}: null}} leaves the hosts' setting to the hosts, or "
        f"nccl_env_overrides)"
        for found in cluster.container_fallbacks
    ]
