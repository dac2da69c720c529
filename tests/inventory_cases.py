"""Bad inventories that preflight must reject, shared by the local test (fake hosts on this machine)
and the lab test (real nodes over SSH): each case edits a copy of a good inventory and names the
lines preflight must print, per host."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FABRICS_ALLOWED = "allowed: erdma, infiniband, roce, acs_type1, acs_type2, tcp"


@dataclass
class InventoryDraft:
    """A YAML inventory (``all.children.<group>.hosts``) plus its group_vars/host_vars files, editable."""

    doc: dict[str, Any]
    var_files: dict[str, dict[str, Any]] = field(default_factory=dict)  # relative path -> mapping
    group: str = "cluster"
    #: relative path -> text written as is, after everything else (for files that are not valid YAML)
    raw_files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, hosts_yml: Path) -> InventoryDraft:
        """Read an inventory directory: hosts.yml and every YAML file under group_vars/ and host_vars/."""
        doc = yaml.safe_load(hosts_yml.read_text())
        var_files = {}
        for sub in ("group_vars", "host_vars"):
            for path in sorted((hosts_yml.parent / sub).rglob("*")):
                if path.is_file() and path.suffix in (".yml", ".yaml"):
                    var_files[str(path.relative_to(hosts_yml.parent))] = yaml.safe_load(path.read_text()) or {}
        return cls(doc, var_files)

    def copy(self) -> InventoryDraft:
        return InventoryDraft(copy.deepcopy(self.doc), copy.deepcopy(self.var_files), self.group, dict(self.raw_files))

    @property
    def hosts(self) -> dict[str, Any]:
        return self.doc["all"]["children"][self.group]["hosts"]

    def names(self) -> list[str]:
        return list(self.hosts)

    def host_vars(self, host: str) -> dict[str, Any]:
        if self.hosts[host] is None:
            self.hosts[host] = {}
        return self.hosts[host]

    def address(self, host: str) -> str:
        return str(self.host_vars(host).get("ansible_host", host))

    def set(self, host: str, name: str, value: object) -> None:
        self.host_vars(host)[name] = value

    def rename(self, old: str, new: str) -> None:
        """Rename a host, keeping its variables (and its ansible_host, so it stays reachable)."""
        hosts = self.doc["all"]["children"][self.group]["hosts"]
        self.doc["all"]["children"][self.group]["hosts"] = {
            (new if name == old else name): hvars for name, hvars in hosts.items()
        }

    def rename_group(self, new: str) -> None:
        children = self.doc["all"]["children"]
        children[new] = children.pop(self.group)
        self.group = new

    def pop_everywhere(self, name: str) -> object:
        """Remove a variable from every vars file and group/host entry; returns one value it had."""
        found: object = None
        for data in [
            *self.var_files.values(),
            self.doc["all"].get("vars") or {},
            self.doc["all"]["children"][self.group].get("vars") or {},
            *self.hosts.values(),
        ]:
            if isinstance(data, dict) and name in data:
                found = data.pop(name)
        return found

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for relative, data in self.var_files.items():
            target = directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
        hosts_yml = directory / "hosts.yml"
        hosts_yml.write_text("---\n" + yaml.safe_dump(self.doc, sort_keys=False))
        for relative, text in self.raw_files.items():
            (directory / relative).write_text(text)
        return hosts_yml


@dataclass(frozen=True)
class Names:
    """The first two nodes of the inventory under test, and the first one's address."""

    a: str
    b: str
    addr_a: str


@dataclass(frozen=True)
class Case:
    id: str
    edit: Callable[[InventoryDraft, Names], None]
    #: host -> substrings its failure message must contain
    expect: Callable[[Names], dict[str, list[str]]]
    extra: tuple[str, ...] = ()
    #: False: caught from the inventory alone, before Ansible connects to any node
    needs_facts: bool = False
    #: substrings the run's whole output must contain (for what Ansible reports outside a host's failure)
    output: Callable[[Names], list[str]] = lambda n: []


def _rename_b(new: Callable[[Names], str]) -> Callable[[InventoryDraft, Names], None]:
    return lambda draft, n: draft.rename(n.b, new(n))


def _missing_fabric(draft: InventoryDraft, n: Names) -> None:
    value = draft.pop_everywhere("rdmaforge_fabric")
    for host in draft.names():
        if host != n.b:
            draft.set(host, "rdmaforge_fabric", value)


def _several(draft: InventoryDraft, n: Names) -> None:
    draft.set(n.b, "rdmaforge_fabric", "ethernet")
    draft.set(n.b, "cluster_hosts_manage", "maybe")
    draft.set(n.b, "ansible_host", n.addr_a)


def _set_everywhere(name: str, value: object) -> Callable[[InventoryDraft, Names], None]:
    def edit(draft: InventoryDraft, n: Names) -> None:
        for host in draft.names():
            draft.set(host, name, value)

    return edit


def _set_everywhere_many(values: dict[str, object]) -> Callable[[InventoryDraft, Names], None]:
    def edit(draft: InventoryDraft, n: Names) -> None:
        for host in draft.names():
            for name, value in values.items():
                draft.set(host, name, value)

    return edit


def _role_own_variables(draft: InventoryDraft, n: Names) -> None:
    """A role's vars/main.yml name in group_vars, and what a role's set_fact sets in one host's entry."""
    draft.var_files.setdefault(f"group_vars/{draft.group}.yml", {})["nccl_plugin_lib_dir"] = "/opt/plugins"
    draft.set(n.b, "eni_selected", ["eth1"])


def _every_host(lines: list[str]) -> Callable[[Names], dict[str, list[str]]]:
    # The lab has at least two nodes; a and b stand for all of them here.
    return lambda n: {
        n.a: [line.format(host=n.a) for line in lines],
        n.b: [line.format(host=n.b) for line in lines],
    }


def _mixed_fabric(draft: InventoryDraft, n: Names) -> None:
    for host in draft.names():
        draft.set(host, "rdmaforge_fabric", "erdma")
    draft.set(n.b, "rdmaforge_fabric", "roce")


def _same_address_everywhere(draft: InventoryDraft, n: Names) -> None:
    for host in draft.names():
        draft.set(host, "ansible_host", n.addr_a)


def _misindented_hosts_yml(draft: InventoryDraft, n: Names) -> None:
    """hosts.yml with one of node b's variables indented one space less than the other: a YAML syntax error."""
    lines = ("---\n" + yaml.safe_dump(draft.doc, sort_keys=False)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{n.b}:")
    indent = len(lines[start]) - len(lines[start].lstrip()) + 2  # of its variables
    lines.insert(start + 2, " " * (indent - 1) + "ansible_port: 22")
    draft.raw_files["hosts.yml"] = "\n".join(lines) + "\n"


def _host_listed_twice(draft: InventoryDraft, n: Names) -> None:
    """hosts.yml listing node b twice, first with node a's address (an entry pasted for a new node and not renamed):
    Ansible's default warns and keeps one node b, with the last entry's variables."""
    lines = ("---\n" + yaml.safe_dump(draft.doc, sort_keys=False)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{n.b}:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    lines[start:start] = [" " * indent + f"{n.b}:", " " * (indent + 2) + f"ansible_host: {n.addr_a}"]
    draft.raw_files["hosts.yml"] = "\n".join(lines) + "\n"


def _eni_per_gpu(draft: InventoryDraft, n: Names) -> None:
    # three secondary NICs named, on a node without three GPUs (the fake and the lab nodes have none)
    draft.set(n.b, "eni_enabled", True)
    draft.set(n.b, "eni_per_gpu", True)
    draft.set(n.b, "eni_interfaces", ["eth1", "eth2", "eth3"])


def _eni_the_node_lacks(draft: InventoryDraft, n: Names) -> None:
    # an inventory copied from nodes whose NICs are named otherwise (seed 004's eth1..; RHEL and Ubuntu say ens*)
    draft.set(n.b, "eni_enabled", True)
    draft.set(n.b, "eni_interfaces", ["rdmaforge-none0"])


def _socket_interface_the_node_lacks(draft: InventoryDraft, n: Names) -> None:
    # the seeds' NCCL_SOCKET_IFNAME names their own NICs; a node whose NICs are named otherwise has none of them
    draft.set(n.b, "nccl_env_overrides", {"NCCL_SOCKET_IFNAME": "=rdmaforge-none0"})


def _hosts_outside_cluster(draft: InventoryDraft, n: Names) -> None:
    # one host left ungrouped, one only in other groups (a builder outside the cluster is not used either)
    draft.doc["all"]["hosts"] = {"stray-node": {"ansible_host": "192.0.2.77"}}
    draft.doc["all"]["children"]["spare"] = {"hosts": {"spare-node": {"ansible_host": "192.0.2.78"}}}
    draft.doc["all"]["children"]["nccl_builder"] = {"hosts": {"spare-node": None}}


def _role_value(host: str, name: str, value: str, role: str, allowed: str) -> list[str]:
    """The line the argument-spec check prints for one variable of one role."""
    return [
        f"{host}: {name}={value} is not valid for role {role}",
        f"allowed: {allowed} (see roles/{role}/meta/argument_specs.yml)",
    ]


def _one_role_value(
    name: str, value: object, shown: str, role: str, allowed: str
) -> tuple[Callable[[InventoryDraft, Names], None], Callable[[Names], dict[str, list[str]]]]:
    """A case's edit and expectation: node b sets ``name`` to ``value``, which role ``role`` refuses."""
    return (lambda d, n: d.set(n.b, name, value)), (lambda n: {n.b: _role_value(n.b, name, shown, role, allowed)})


UNSUPPORTED_OS = json.dumps({"preflight_supported_os": {"NoSuchOS": ["1"]}, "preflight_legacy_os": {}})

CASES: list[Case] = [
    Case(
        "unknown-fabric",
        lambda d, n: d.set(n.b, "rdmaforge_fabric", "ethernet"),
        lambda n: {n.b: [f"{n.b}: rdmaforge_fabric='ethernet' is not a known fabric profile; {FABRICS_ALLOWED}"]},
    ),
    Case(
        "fabric-wrong-case",
        lambda d, n: d.set(n.a, "rdmaforge_fabric", "eRDMA"),
        lambda n: {
            n.a: [
                f"{n.a}: rdmaforge_fabric='eRDMA' is not a known fabric profile (did you mean 'erdma'?)",
                FABRICS_ALLOWED,
            ]
        },
    ),
    Case(
        "missing-fabric",
        _missing_fabric,
        lambda n: {n.b: [f"{n.b}: rdmaforge_fabric is not set", FABRICS_ALLOWED]},
    ),
    Case(
        "duplicate-address",
        lambda d, n: d.set(n.b, "ansible_host", n.addr_a),
        lambda n: {
            n.a: [f"{n.a}: ansible_host='{n.addr_a}' is also the address of {n.b}"],
            n.b: [
                f"{n.b}: ansible_host='{n.addr_a}' is also the address of {n.a}",
                "allowed: an address no other node uses",
            ],
        },
    ),
    Case(
        "duplicate-short-name",
        _rename_b(lambda n: f"{n.a}.example"),
        lambda n: {
            f"{n.a}.example": [
                f"{n.a}.example: inventory_hostname='{n.a}.example' has the short name '{n.a}', which {n.a} also has",
                "allowed: a name whose first label no other node uses",
            ],
            n.a: [f"{n.a}: inventory_hostname='{n.a}' has the short name '{n.a}'"],
        },
    ),
    Case(
        "invalid-node-name",
        _rename_b(lambda n: f"{n.b}_gpu"),
        lambda n: {
            f"{n.b}_gpu": [
                f"{n.b}_gpu: inventory_hostname='{n.b}_gpu' is not a valid node name",
                "allowed: an RFC 1123 host name",
            ]
        },
    ),
    Case(
        "address-as-node-name",
        _rename_b(lambda n: "10.255.0.2"),
        lambda n: {
            "10.255.0.2": [
                "10.255.0.2: inventory_hostname='10.255.0.2' is an address, not a node name",
                "allowed: an RFC 1123 host name",
                "put the address in ansible_host",
            ]
        },
    ),
    Case(
        "invalid-ipv4",
        lambda d, n: d.set(n.b, "ansible_host", "198.18.0.300"),
        lambda n: {
            n.b: [
                f"{n.b}: ansible_host='198.18.0.300' is not a valid IPv4 address",
                "allowed: an IPv4 address",
            ]
        },
    ),
    Case(
        "ipv6-address",
        lambda d, n: d.set(n.b, "ansible_host", "fd00::2"),
        lambda n: {n.b: [f"{n.b}: ansible_host='fd00::2' is an IPv6 address", "allowed: an IPv4 address"]},
    ),
    Case(
        "bool-variable-of-another-role",
        lambda d, n: d.set(n.b, "cluster_hosts_manage", "maybe"),
        lambda n: {
            n.b: [f"{n.b}: cluster_hosts_manage='maybe' is not valid for role cluster_hosts; allowed: true or false"]
        },
    ),
    Case(
        "dict-variable-of-preflight",
        _set_everywhere("preflight_supported_os", "Debian 12"),
        _every_host(["{host}: preflight_supported_os='Debian 12' is not valid for role preflight; allowed: a mapping"]),
    ),
    Case(
        "several-problems-one-host",
        _several,
        lambda n: {
            n.b: [
                f"{n.b}: rdmaforge_fabric='ethernet' is not a known fabric profile",
                f"{n.b}: cluster_hosts_manage='maybe' is not valid for role cluster_hosts",
                f"{n.b}: ansible_host='{n.addr_a}' is also the address of {n.a}",
            ]
        },
    ),
    Case(
        # Ansible's argument spec splits text at commas and passes it; the role would loop over its characters.
        "list-variable-given-as-text",
        lambda d, n: d.set(n.b, "nccl_cuda_archs", "sm_80,sm_90"),
        lambda n: {
            n.b: [
                f"{n.b}: nccl_cuda_archs='sm_80,sm_90' is text where role nccl_build takes a list",
                'allowed: a list of strings, e.g. ["sm_80", "sm_90"]',
            ],
        },
    ),
    Case(
        # Review round 36: the argument spec takes y (and t, padded words) for true, the role's `| bool` for false:
        # hugepages_enabled: y passed and the hugepages role withdrew the node's huge pages.
        "bool-word-the-role-reads-as-false",
        lambda d, n: d.set(n.b, "hugepages_enabled", "y"),
        lambda n: {n.b: [f"{n.b}: hugepages_enabled='y' passes role hugepages's argument spec as true, but the "
                         "role's tasks read it as false; allowed: true or false (or yes/no, on/off, 1/0)"]},
    ),
    Case(
        # Review round 36d: the benchmark's mpirun runs once, with the first node's list: node b's was never used.
        "setting-read-once-differs",
        lambda d, n: d.set(n.b, "benchmark_collectives", ["all_reduce", "all_gather"]),
        lambda n: {n.b: [f'{n.b}: benchmark_collectives=["all_reduce", "all_gather"] differs from {n.a}\'s '
                         '["all_reduce"]; allowed: one value for every node of group cluster (a run_once task '
                         "reads the first node's value for the whole cluster)"]},
    ),
    Case(
        "e2e-steps-zero",
        lambda d, n: d.set(n.a, "benchmark_e2e_steps", 0),
        lambda n: {n.a: [f"{n.a}: benchmark_e2e_steps=0 is not allowed; allowed: a whole number of measured training "
                         "steps, 1 or more"]},
    ),
    Case(
        # make takes the last assignment: MPI=0 after rdmaforge's MPI=1 built without MPI, the id saying otherwise
        "nccl-tests-extra-args-override",
        _set_everywhere("nccl_tests_make_extra_args", ["CUDARTLIB=cudart_static", "MPI=0"]),
        _every_host(["{host}: nccl_tests_make_extra_args=[\"CUDARTLIB=cudart_static\", \"MPI=0\"] sets MPI, which "
                     "rdmaforge sets from nccl_tests_mpi; allowed: other make variables (set nccl_tests_mpi instead)"]),
    ),
    Case(
        "hugepages-size-not-allowed",
        lambda d, n: d.set(n.b, "hugepages_size", "1GB"),
        lambda n: {
            n.b: [f"{n.b}: hugepages_size='1GB' is not valid for role hugepages", "allowed: 1G, 2M"],
        },
    ),
    Case(
        "eni-backend-unknown",
        _set_everywhere("eni_backend", "systemd"),
        _every_host(
            [
                "{host}: eni_backend='systemd' is not valid for role eni",
                "allowed: auto, networkd, netplan, networkmanager",
            ]
        ),
    ),
    Case(
        "ssh-trust-group-unknown",
        _set_everywhere("ssh_trust_group", "gpus"),
        _every_host(
            [
                "{host}: ssh_trust_group='gpus' names no group with hosts",
                "allowed: a group of the inventory: ",
                "cluster",
            ]
        ),
        # refused with the inventory's checks; ssh_trust's validate.yml, after facts, keeps it for the role alone
    ),
    Case(
        "nccl-accelerator-unknown",
        lambda d, n: d.set(n.b, "nccl_env_accelerator", "tacoo"),
        lambda n: {
            n.b: [f"{n.b}: nccl_env_accelerator='tacoo' is not a key of nccl_env_accelerators (did you mean "
                  "'taco'?); allowed: none, taco"]
        },  # fmt: skip
    ),
    Case(
        # Review round 42: a typo here was read as a node without iproute2, then (6573732) failed that node's probe
        # alone while the other nodes were converged; now refused with the settings, stopping every node.
        "ip-path-typo",
        lambda d, n: d.set(n.b, "preflight_ip_path", "/usr/sbin/no-such-ip"),
        lambda n: {
            n.b: [f'{n.b}: preflight_ip_path="/usr/sbin/no-such-ip": ip_path=/usr/sbin/no-such-ip is not an '
                  "executable file; allowed: the path of iproute2's ip on this node, or empty to look ip up on PATH"]
        },  # fmt: skip
        needs_facts=True,
    ),
    Case(
        "renamed-doctor-variable",
        lambda d, n: d.set(n.b, "doctor_ip_path", "/usr/sbin/ip"),
        lambda n: {
            n.b: [f"{n.b}: doctor_ip_path was renamed to preflight_ip_path; set preflight_ip_path instead "
                  "(the old name is ignored)"]
        },  # fmt: skip
    ),
    Case(
        # Neither this machine nor a lab node is an Alibaba Cloud ECS instance (their DMI product name says so or is
        # not readable); the lab's inventory allows the plugin there, which node b takes back.
        "aiacc-outside-alibaba-cloud",
        # (the provider on every node: it is one value for the cluster, BUILD_WIDE)
        lambda d, n: (
            *[d.set(host, "nccl_plugin_provider", "aiacc") for host in d.names()],
            d.set(n.b, "nccl_plugin_aiacc_outside_alibaba_cloud", False),
        ),
        lambda n: {
            n.b: [
                f"{n.b}: nccl_plugin_provider=aiacc, but this host's DMI product name is ",
                "not 'Alibaba Cloud ECS': the AIACC plugin checks its licence with Alibaba Cloud's metadata service",
                "Allowed on this host: nccl_plugin_provider none or harp, or nccl_plugin_aiacc_outside_alibaba_cloud "
                "true to install it anyway",
            ]
        },
        needs_facts=True,  # nccl_plugin's validate.yml reads the DMI product name preflight gathered
    ),
    Case(
        # Neither this machine nor a lab node has a GPU, so neither has a rail map to take NCCL_IB_HCA from.
        "ib-hca-from-topology-without-gpus",
        lambda d, n: d.set(n.b, "nccl_env_ib_hca_from_topology", True),
        lambda n: {
            n.b: [
                f"{n.b}: nccl_env_ib_hca_from_topology is true, but this node has no GPU-to-NIC rail map: no GPU on "
                "this node",
                "Allowed: nccl_env_ib_hca_from_topology false on this node",
            ]
        },
        needs_facts=True,  # nccl_env's validate.yml reads the rail map preflight's node probe published
    ),
    Case(
        "ssh-check-parallel-zero",
        lambda d, n: d.set(n.b, "ssh_trust_check_parallel", 0),
        # Refused with the inventory's checks, before any node is connected to (ssh_trust's validate.yml, which
        # preflight runs after gathering facts, holds the same rule for playbooks/ssh_check.yml alone).
        lambda n: {n.b: [f"{n.b}: ssh_trust_check_parallel=0 is not allowed; allowed: a whole number of connections "
                         "at a time, 1 or more"]},
    ),
    Case(
        "network-retries-out-of-range",
        lambda d, n: d.set(n.b, "rdmaforge_network_retries", 1000),
        lambda n: {
            n.b: [f"{n.b}: rdmaforge_network_retries=1000 is not allowed; allowed: a whole number from 0 to 20"]
        },
    ),
    Case(
        "network-timeout-too-short",
        lambda d, n: d.set(n.a, "rdmaforge_network_timeout", 1),
        lambda n: {
            n.a: [f"{n.a}: rdmaforge_network_timeout=1 is not allowed; allowed: a whole number from 5 to 3600"]
        },
    ),
    # The ranges the roles' argument_specs state (hugepages: "60 to 604800"; mpi_launch: "5 to 3600").
    Case(
        "reboot-lock-stale-after-a-minute-short",
        lambda d, n: d.set(n.b, "hugepages_reboot_lock_stale_after", 59),
        lambda n: {
            n.b: [f"{n.b}: hugepages_reboot_lock_stale_after=59 is not allowed; allowed: a whole number of seconds "
                  "from 60 to 604800"]
        },  # fmt: skip
    ),
    Case(
        "mpi-launch-timeout-past-an-hour",
        lambda d, n: d.set(n.a, "mpi_launch_timeout", 3601),
        lambda n: {n.a: [f"{n.a}: mpi_launch_timeout=3601 is not allowed; allowed: a whole number of seconds from 5 "
                         "to 3600"]},  # fmt: skip
    ),
    Case(
        "command-timeout-zero",
        lambda d, n: d.set(n.b, "rdmaforge_command_timeout", 0),
        lambda n: {
            n.b: [f"{n.b}: rdmaforge_command_timeout=0 is not allowed; allowed: a whole number from 5 to 300"]
        },
    ),
    Case(
        "network-retry-delay-not-a-number",
        lambda d, n: d.set(n.a, "rdmaforge_network_retry_delay", "five"),
        lambda n: {n.a: [f"{n.a}: rdmaforge_network_retry_delay='five'"]},
    ),
    Case(
        "misspelled-variable",
        lambda d, n: d.set(n.b, "hugepages_enabeld", True),
        lambda n: {
            n.b: [
                f"{n.b}: hugepages_enabeld is not a variable rdmaforge reads, so its value would be ignored "
                "(did you mean 'hugepages_enabled'?)"
            ]
        },
    ),
    Case(
        "no-cluster-group",
        lambda d, n: d.rename_group("nodes"),
        lambda n: {"localhost": ["the inventory has no hosts in group 'cluster'"]},
    ),
    Case(
        "cluster-group-renamed-by-preflight-cluster-group",
        lambda d, n: (d.rename_group("gpus"), d.var_files.update({"group_vars/all/group.yml": {
            "preflight_cluster_group": "gpus"}})),
        lambda n: {"localhost": ["the inventory has no hosts in group 'cluster' (preflight_cluster_group=\"gpus\" "
                                 "names the group for the roles in a playbook of your own: rdmaforge's playbooks run "
                                 "on group 'cluster' by name)"]},
    ),
    Case(
        "unsupported-os",
        lambda d, n: None,
        _every_host(
            [
                "{host}: ansible_distribution=",
                "is not a supported OS; allowed: NoSuchOS 1",
                "add it to preflight_supported_os",
            ]
        ),
        extra=("-e", UNSUPPORTED_OS),
        needs_facts=True,
    ),
    # --- one fabric per cluster, versions ------------------------------------------------------
    Case(
        "mixed-fabric",
        _mixed_fabric,
        lambda n: {
            n.b: [
                f"{n.b}: rdmaforge_fabric='roce' differs from the rest of the cluster ('erdma' on {n.a}, ",
                "allowed: one fabric profile for every node of group cluster",
            ]
        },
    ),
    Case(
        "fabric-list",
        lambda d, n: d.set(n.b, "rdmaforge_fabric", ["erdma", "tcp"]),
        lambda n: {n.b: [f'{n.b}: rdmaforge_fabric=["erdma", "tcp"] is not a known fabric profile; {FABRICS_ALLOWED}']},
    ),
    Case(
        "fabric-misspelled",
        lambda d, n: d.set(n.b, "rdmaforge_fabric", "infinband"),
        lambda n: {
            n.b: [
                f"{n.b}: rdmaforge_fabric='infinband' is not a known fabric profile (did you mean 'infiniband'?)",
                FABRICS_ALLOWED,
            ]
        },
    ),
    Case(
        "fabric-left-blank",
        lambda d, n: d.set(n.b, "rdmaforge_fabric", None),
        lambda n: {n.b: [f"{n.b}: rdmaforge_fabric is not set; every node needs a fabric profile", FABRICS_ALLOWED]},
    ),
    Case(
        "nccl-git-ref-of-another-version",
        _set_everywhere_many({"nccl_build_version": "2.29.7", "nccl_build_git_ref": "v2.21.5-1"}),
        _every_host(
            [
                "{host}: nccl_build_git_ref='v2.21.5-1' is version 2.21.5, but nccl_build_version='2.29.7'",
                "and nccl_build_source='git' builds from nccl_build_git_ref; allowed: nccl_build_git_ref of version "
                "2.29.7 (or set nccl_build_version: '2.21.5')",
            ]
        ),
    ),
    Case(
        "nccl-git-commit-abbreviated",
        _set_everywhere("nccl_build_git_commit", "b91894b"),
        _every_host(
            [
                "{host}: nccl_build_git_commit='b91894b' is not allowed; allowed: a full commit id, 40 hexadecimal "
                "digits as `git rev-parse '<tag>^{{commit}}'` prints them (quoted in YAML), or '' to build the ref "
                "unpinned",
            ]
        ),
    ),
    Case(
        "nccl-tests-tarball-of-another-version",
        _set_everywhere_many(
            {
                "nccl_tests_source": "tarball",
                "nccl_tests_version": "2.17.8",
                "nccl_tests_tarball_url": "https://mirror.example/nccl-tests-2.13.9.tar.gz",
            }
        ),
        _every_host(
            [
                "{host}: nccl_tests_tarball_url='https://mirror.example/nccl-tests-2.13.9.tar.gz' is version 2.13.9, "
                "but nccl_tests_version='2.17.8'",
                "and nccl_tests_source='tarball' builds from nccl_tests_tarball_url; allowed: nccl_tests_tarball_url "
                "of version 2.17.8 (or set nccl_tests_version: '2.13.9')",
            ]
        ),
    ),
    Case(
        "nccl-tests-binaries-without-pairwise-sendrecv",
        _set_everywhere("nccl_tests_binaries", ["all_reduce"]),
        _every_host(
            [
                "{host}: nccl_tests_binaries=[\"all_reduce\"] leaves out sendrecv, which pairwise_method='auto' "
                "(sendrecv_perf on GPU nodes) runs; add sendrecv, or set nccl_tests_binaries: [] to build every binary",
            ]
        ),
    ),
    Case(
        "node-path-relative",
        lambda d, n: d.set(n.b, "mpi_prefix", "opt/openmpi"),
        lambda n: {
            n.b: [
                f"{n.b}: mpi_prefix='opt/openmpi' is not an absolute path on the node ('opt/openmpi'); allowed: an "
                "absolute path, such as the default '/usr/local'",
            ]
        },
    ),
    Case(
        "rdma-core-profile-of-another-fabric",
        lambda d, n: d.set(n.b, "rdma_core_profile", "infiniband"),
        lambda n: {n.b: [f"{n.b}: rdma_core_profile='infiniband' differs from rdmaforge_fabric="]},
    ),
    # --- addresses ---------------------------------------------------------------------------------
    Case(
        "address-with-prefix-length",
        lambda d, n: d.set(n.b, "ansible_host", "127.0.0.2/8"),
        lambda n: {
            n.b: [
                f"{n.b}: ansible_host='127.0.0.2/8' is neither an IPv4 address nor a valid host name "
                "(a network prefix: write the address alone, 127.0.0.2)",
                "allowed: an IPv4 address such as 172.20.20.145, or a DNS host name",
            ]
        },
    ),
    Case(
        "address-with-port",
        lambda d, n: d.set(n.b, "ansible_host", "127.0.0.2:2222"),
        lambda n: {
            n.b: [
                f"{n.b}: ansible_host='127.0.0.2:2222' is neither an IPv4 address nor a valid host name "
                "(a port: write 127.0.0.2 and put 2222 in ansible_port)",
                "allowed: an IPv4 address",
            ]
        },
    ),
    Case(
        "ipv4-leading-zero",
        lambda d, n: d.set(n.b, "ansible_host", "127.0.0.02"),
        lambda n: {
            n.b: [
                f"{n.b}: ansible_host='127.0.0.02' is not a valid IPv4 address "
                "(four numbers from 0 to 255, without leading zeros)",
                "allowed: an IPv4 address",
            ]
        },
    ),
    Case(
        "address-empty",
        lambda d, n: d.set(n.b, "ansible_host", ""),
        lambda n: {n.b: [f"{n.b}: ansible_host='' is not an address", "allowed: an IPv4 address"]},
    ),
    Case(
        "address-copied-to-every-node",
        _same_address_everywhere,
        lambda n: {
            # every node names all the others, in no particular order
            n.a: [f"{n.a}: ansible_host='{n.addr_a}' is also the address of ", n.b, "allowed: an address"],
            n.b: [f"{n.b}: ansible_host='{n.addr_a}' is also the address of ", n.a, "allowed: an address"],
        },
    ),
    # Ansible's own error (ansible.cfg: any_unparsed_is_failed): no play runs, the parse error names the line. Before,
    # Ansible warned and went on without the file's hosts, and preflight said only that 'cluster' had none.
    Case(
        "malformed-hosts-yml",
        _misindented_hosts_yml,
        lambda n: {},
        output=lambda n: ["Failed to parse inventory", "hosts.yml:", "ansible_port: 22",
                          "Completely failed to parse inventory source"],
    ),
    # A host listed twice: Ansible kept one node (the second entry's address) with a warning; ansible.cfg makes it
    # an error naming file and line (review round 29b).
    Case(
        "host-listed-twice",
        _host_listed_twice,
        lambda n: {},
        output=lambda n: [f"Found duplicate mapping key '{n.b}'", "hosts.yml:",
                          "Completely failed to parse inventory source"],
    ),
    # --- wrong types and values of role variables (every role's meta/argument_specs.yml) -------------
    Case(
        "int-given-a-duration",
        *_one_role_value("nccl_tests_timeout", "30s", "'30s'", "nccl_tests", "an integer"),
    ),
    Case("int-given-a-list", *_one_role_value("hugepages_count", [50], "[50]", "hugepages", "an integer")),
    # (variables without a range check of their own, whose line would name the range instead)
    Case("int-given-a-fraction", *_one_role_value("os_packages_apt_cache_valid_time", 2.5, "2.5", "os_packages",
                                                  "an integer")),
    Case("int-given-a-word", *_one_role_value("workload_manifests_pytorchjob_rdzv_port", "all", "'all'",
                                              "workload_manifests", "an integer")),
    Case("bool-given-a-list", *_one_role_value("eni_enabled", [True], "[true]", "eni", "true or false")),
    Case(
        "bool-given-a-word",
        *_one_role_value("converge_state_fast_path_per_node", "sometimes", "'sometimes'", "converge_state",
                         "true or false"),  # fmt: skip
    ),
    Case(
        "float-given-a-percentage",
        # benchmark_regression_tolerance was the example until it got its own rule (a fraction below 1).
        *_one_role_value("pairwise_slow_ratio", "10%", "'10%'", "pairwise", "a number"),
    ),
    # A benchmark threshold may be empty (reported, not judged), so it is no plain float: its own rule names it.
    Case(
        "threshold-given-a-percentage",
        lambda d, n: d.set(n.b, "benchmark_min_efficiency", "80%"),
        lambda n: {n.b: [f"{n.b}: benchmark_min_efficiency='80%' is not allowed; allowed: a number above 0 and at "
                         'most 1, or empty (null or "": reported, not judged)']},
    ),
    Case("dict-given-an-address", *_one_role_value("eni_addresses", "10.0.0.2", "'10.0.0.2'", "eni", "a mapping")),
    Case(
        "dict-given-a-quoted-mapping",
        *_one_role_value("preflight_min_free_mb", "/opt: 1024", "'/opt: 1024'", "preflight", "a mapping"),
    ),
    # Validated from hostvars on the controller: an -e value reaches every node's check, as the inventory's does.
    Case(
        "role-value-given-by-extra-vars",
        lambda d, n: None,
        lambda n: {h: _role_value(h, "pairwise_slow_ratio", "'10%'", "pairwise", "a number") for h in (n.a, n.b)},
        extra=("-e", json.dumps({"pairwise_slow_ratio": "10%"})),
    ),
    Case(
        "dict-given-a-list",
        *_one_role_value("nccl_env_overrides", ["NCCL_DEBUG=INFO"], '["NCCL_DEBUG=INFO"]', "nccl_env", "a mapping"),
    ),
    Case(
        "list-given-a-dict",
        *_one_role_value(
            "os_packages_names", {"vim": "present"}, '{"vim": "present"}', "os_packages", "a list of strings"
        ),
    ),
    Case(
        "list-of-dicts-given-strings",
        *_one_role_value(
            "workload_manifests_mpijob_host_paths", ["/sys"], '["/sys"]', "workload_manifests", "a list of mappings"
        ),
    ),
    Case(
        "list-value-not-a-choice",
        *_one_role_value(
            "workload_manifests_kinds",
            ["docker", "k8s"],
            '["docker", "k8s"]',
            "workload_manifests",
            "docker, acs, mpijob, pytorchjob",
        ),
    ),
    Case(
        "list-given-a-misspelled-word",
        *_one_role_value(
            "benchmark_collectives",
            "allreduce",
            "'allreduce'",
            "benchmark",
            "all_reduce, all_gather, reduce_scatter, alltoall, sendrecv, broadcast, reduce, gather, scatter, hypercube",
        ),
    ),
    Case("int-not-a-choice", *_one_role_value("benchmark_check", 2, "2", "benchmark", "0, 1")),
    Case(
        "plugin-misspelled",
        *_one_role_value("nccl_plugin_provider", "aiac", "'aiac'", "nccl_plugin", "aiacc, harp, none"),
    ),
    Case(
        "install-method-not-a-choice",
        *_one_role_value("mpi_install_method", "source", "'source'", "mpi", "distro, prefix"),
    ),
    Case(
        "network-retry-delay-negative",
        lambda d, n: d.set(n.b, "rdmaforge_network_retry_delay", -5),
        lambda n: {
            n.b: [f"{n.b}: rdmaforge_network_retry_delay=-5 is not allowed; allowed: a whole number from 0 to 300"]
        },
    ),
    Case(
        "min-port-rate-zero",
        lambda d, n: d.set(n.a, "rdma_core_min_port_rate_gbps", 0),
        lambda n: {
            n.a: [f"{n.a}: rdma_core_min_port_rate_gbps=0 is not allowed; allowed: a positive number of Gbit/s "
                  "(100 for EDR, 200 for HDR, 400 for NDR), or null"]
        },  # fmt: skip
    ),
    Case(
        "min-port-rate-with-a-unit",
        lambda d, n: d.set(n.b, "rdma_core_min_port_rate_gbps", "200G"),
        lambda n: {n.b: [f"{n.b}: rdma_core_min_port_rate_gbps='200G' is not allowed; allowed: a positive number"]},
    ),
    # A count below 1 would put hugepages=0 (or a negative count) on the kernel command line: refused before any
    # connection, the value shown; 0 stays allowed with hugepages_enabled: false (the good inventory's default).
    Case(
        "hugepages-count-zero-while-enabled",
        _set_everywhere_many({"hugepages_enabled": True, "hugepages_count": 0}),
        _every_host(["{host}: hugepages_count=0 is not allowed while hugepages_enabled is true; allowed: a whole "
                     "number of pages above 0, or null for seed 004's rule"]),  # fmt: skip
    ),
    Case(
        "hugepages-count-negative-by-extra-vars",
        lambda d, n: None,
        _every_host(["{host}: hugepages_count='-2' is not allowed while hugepages_enabled is true"]),
        extra=("-e", "hugepages_enabled=true", "-e", "hugepages_count=-2"),
    ),
    Case(
        "hugepages-max-memory-fraction-all-of-it",
        lambda d, n: d.set(n.b, "hugepages_max_memory_fraction", 1),
        lambda n: {n.b: [f"{n.b}: hugepages_max_memory_fraction=1 is not allowed; allowed: a number above 0 and "
                         "below 1"]},  # fmt: skip
    ),
    # The eni role's plan raised on these (or stopped) mid-converge, after the roles before it had changed the nodes.
    Case(
        "eni-address-not-ipv4",
        lambda d, n: d.set(n.b, "eni_addresses", {"eth1": "999.1.1.1"}),
        lambda n: {n.b: [f"{n.b}: eni_addresses.eth1='999.1.1.1' is not allowed; allowed: an IPv4 address with its "
                         "prefix length, such as 10.0.1.5/24"]},  # fmt: skip
    ),
    Case(
        "eni-gateway-not-an-address",
        lambda d, n: d.set(n.b, "eni_gateways", {"eth1": "not-an-ip"}),
        lambda n: {n.b: [f"{n.b}: eni_gateways.eth1='not-an-ip' is not allowed; allowed: an IPv4 address in the NIC's "
                         "subnet"]},  # fmt: skip
    ),
    Case(
        "eni-gateway-outside-the-subnet",
        lambda d, n: (d.set(n.b, "eni_addresses", {"eth1": "10.0.1.5/24"}),
                      d.set(n.b, "eni_gateways", {"eth1": "10.0.2.1"})),  # fmt: skip
        lambda n: {n.b: [f"{n.b}: eni_gateways.eth1='10.0.2.1' is outside eth1's subnet 10.0.1.0/24"]},
    ),
    # Review round 36d: accepted, then the kernel refused the route (its own address as the gateway) or the NIC's
    # address was no host's, after the network files were written and reloaded.
    Case(
        "eni-gateway-is-the-nics-own-address",
        lambda d, n: (d.set(n.b, "eni_addresses", {"eth1": "10.0.1.5/24"}),
                      d.set(n.b, "eni_gateways", {"eth1": "10.0.1.5"})),  # fmt: skip
        lambda n: {n.b: [f"{n.b}: eni_gateways.eth1='10.0.1.5' is the NIC's own address (eni_addresses.eth1="
                         "'10.0.1.5/24'), which cannot be its gateway; allowed: another host address in 10.0.1.0/24"]},
    ),
    Case(
        "eni-address-is-the-broadcast-address",
        lambda d, n: d.set(n.b, "eni_addresses", {"eth1": "10.0.1.255/24"}),
        lambda n: {n.b: [f"{n.b}: eni_addresses.eth1='10.0.1.255/24' is the broadcast address of 10.0.1.0/24, which "
                         "no NIC can use as its address"]},  # fmt: skip
    ),
    Case(
        "eni-mtu-above-any-jumbo-frame",
        lambda d, n: d.set(n.b, "eni_mtu", 100000),
        lambda n: {n.b: [f"{n.b}: eni_mtu=100000 is not allowed; allowed: a whole number from 68 (IPv4's least MTU) to "
                         "9216"]},  # fmt: skip
    ),
    Case(
        "eni-route-table-base-negative",
        lambda d, n: d.set(n.a, "eni_route_table_base", -1),
        lambda n: {n.a: [f"{n.a}: eni_route_table_base=-1 is not allowed", "would use routing tables -1 to ",
                         "other than 253-255 (the kernel's default, main and local tables)"]},  # fmt: skip
    ),
    # The tag's spelling as the version: the role would check out vv2.29.7-1-1; the default commit is not the culprit.
    Case(
        "nccl-version-given-the-tag",
        lambda d, n: d.set(n.b, "nccl_build_version", "v2.29.7-1"),
        lambda n: {n.b: [f"{n.b}: nccl_build_version='v2.29.7-1' is not allowed; allowed: a release number, "
                         "MAJOR.MINOR.PATCH in digits such as '2.29.7'"]},  # fmt: skip
    ),
    Case(
        "doctor-expected-gpus-negative",
        lambda d, n: d.set(n.b, "doctor_expected_gpus", -1),
        lambda n: {n.b: [f"{n.b}: doctor_expected_gpus=-1 is not allowed; allowed: a whole number from 0 to 1024, or "
                         "null"]},  # fmt: skip
    ),
    # A host outside group cluster is in no play: it would never be converged, and the run would end green.
    Case(
        "host-outside-the-cluster-group",
        _hosts_outside_cluster,
        lambda n: {
            h: [
                "not run: the inventory has problems on hosts outside the play (below); no node was changed:\n",
                "\nstray-node: is in group ungrouped, not in group cluster, which the playbooks target: no playbook "
                "would converge it; allowed: every node under all.children.cluster.hosts (or in a group inside "
                "cluster); take any other host out of this inventory",
                "\nspare-node: is in groups nccl_builder, spare, not in group cluster",
            ]
            for h in (n.a, n.b)
        },
    ),
    # --- caught once the nodes' facts are known ----------------------------------------------------------
    Case(
        "nccl-cuda-arch-without-sm",
        lambda d, n: d.set(n.b, "nccl_cuda_archs", ["80"]),
        lambda n: {
            n.b: [f'{n.b}: nccl_cuda_archs=["80"] is not allowed; allowed: a non-empty list of sm_NN names']
        },  # fmt: skip
    ),
    Case(
        # sm_10 has the form but no nvcc of CUDA 8 or later builds it: it failed only at nccl_build's detect step,
        # after every role before it had changed the nodes.
        "nccl-cuda-arch-no-nvcc-builds",
        lambda d, n: d.set(n.a, "nccl_cuda_archs", ["sm_80", "sm_10"]),
        lambda n: {
            n.a: [f'{n.a}: nccl_cuda_archs=["sm_80", "sm_10"] is not allowed; sm_10 is not a GPU arch that nvcc '
                  "(CUDA 8 to 13.0) builds; allowed: sm_30, sm_32"]
        },  # fmt: skip
    ),
    Case(
        "eni-count-differs-from-gpu-count",
        _eni_per_gpu,
        lambda n: {
            n.b: [
                f"{n.b}: eni_per_gpu is true, so every GPU needs its own secondary NIC, "
                "but the node has 3 secondary NIC(s) (eth1, eth2, eth3)",
                "or set eni_per_gpu: false",
            ]
        },
        needs_facts=True,
    ),
    Case(
        "eni-interface-the-node-lacks",
        _eni_the_node_lacks,
        lambda n: {n.b: [f"{n.b}: eni_interfaces lists rdmaforge-none0, which the node does not have"]},
        needs_facts=True,
    ),
    Case(
        "role-own-variables",
        _role_own_variables,
        lambda n: {
            n.a: [f"{n.a}: ", "nccl_plugin_lib_dir is no setting: the role sets it itself "
                  "(roles/nccl_plugin/vars/main.yml), which outranks an inventory's value"],
            n.b: ["nccl_plugin_lib_dir is no setting", "eni_selected is no setting: the role sets it itself "
                  "(roles/eni/tasks/main.yml), as its tasks run, so this value would be overwritten"],
        },
    ),
    Case(
        "socket-interface-the-node-lacks",
        _socket_interface_the_node_lacks,
        lambda n: {n.b: [f"{n.b}: NCCL_SOCKET_IFNAME='=rdmaforge-none0' matches none of the node's interfaces (",
                         "so NCCL's bootstrap would find no socket interface"]},  # fmt: skip
        needs_facts=True,
    ),
]


def names_of(draft: InventoryDraft) -> Names:
    a, b = draft.names()[:2]
    return Names(a=a, b=b, addr_a=draft.address(a))


_FATAL = re.compile(r"^fatal: \[(?P<host>[^\]]+)\]: FAILED! => (?P<json>\{.*\})$", re.MULTILINE)


def failure_messages(output: str) -> dict[str, str]:
    """host -> the ``msg`` of its ``fatal: [host]: FAILED! => {...}`` line."""
    return {m["host"]: str(json.loads(m["json"]).get("msg", "")) for m in _FATAL.finditer(output)}


def check_case(case: Case, names: Names, returncode: int, output: str) -> None:
    """The run failed, every expected host failed with every expected line, and nothing changed."""
    assert returncode != 0, f"{case.id}: the run passed:\n{output[-4000:]}"
    failures = failure_messages(output)
    for host, lines in case.expect(names).items():
        assert host in failures, f"{case.id}: no failure for {host}; failures: {failures}\n{output[-4000:]}"
        for line in lines:
            assert line in failures[host], f"{case.id}: {host} lacks {line!r}; its message:\n{failures[host]}"
    for line in case.output(names):
        assert line in output, f"{case.id}: the output lacks {line!r}:\n{output[-4000:]}"
    assert not re.search(r"^changed: ", output, re.MULTILINE), f"{case.id}: something changed:\n{output[-4000:]}"
    assert "PLAY [Cluster hosts" not in output, f"{case.id}: a later play ran:\n{output[-4000:]}"
    if not case.needs_facts:
        # the role's name is printed with or without its collection prefix (rdmaforge.cluster.preflight)
        assert not re.search(r"^TASK \[(?:rdmaforge\.cluster\.)?preflight : Gather facts\]", output, re.M), (
            f"{case.id}: connected before reporting"
        )
