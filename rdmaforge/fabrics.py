"""The fabric profiles: the one definition of each way rdmaforge connects GPUs across nodes.

A host's ``rdmaforge_fabric`` names one of these profiles. Everything rdmaforge knows about a profile is
here, once: whether NCCL should move data over RDMA or sockets, the NCCL networks that carry it, the link
layer its HCAs report, the per-node line rate the benchmark judges against, the names of the RDMA devices it
brings, and the RDMA userspace packages per OS family. Every consumer derives from this table:

* Python: ``rdmaforge.inventory_checks.FABRICS``, ``rdmaforge.nccl_tests.transport.FABRIC_PROFILES``,
  ``rdmaforge.doctor_checks`` (RDMA fabrics, device patterns), ``rdmaforge.bench.report`` (line rates),
  ``rdmaforge.stored``, ``rdmaforge.workloads``, the testinfra suite (``tests/infra``);
* the roles: the defaults of ``rdma_core_packages``, ``rdma_require_active_ports``, ``benchmark_line_rates``,
  ``nccl_plugin_provider`` and ``benchmark_e2e_net_plugin`` come from the filter
  ``rdmaforge.cluster.rdmaforge_fabric_profiles`` (``filter_plugins/rdmaforge_fabrics.py``), and stay variables an
  inventory may override.

The roles' ``meta/argument_specs.yml`` ``choices`` are static YAML; ``tests/unit/test_fabric_table.py`` fails
when they, or any other copy of the profile names, drift from this table. Stdlib only: filters, the CLI and the
testinfra suite import it on the controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Transport = Literal["rdma", "socket"]
#: Ansible's ``ansible_facts['os_family']`` values rdmaforge supports: Debian covers Ubuntu; RedHat covers
#: CentOS, Rocky and Alibaba Cloud Linux.
OS_FAMILIES: tuple[str, ...] = ("Debian", "RedHat")


@dataclass(frozen=True)
class Packages:
    """RDMA userspace packages to install, per OS family (the rdma_core role's default package sets)."""

    debian: tuple[str, ...] = ()
    redhat: tuple[str, ...] = ()

    def by_family(self) -> dict[str, list[str]]:
        return {"Debian": list(self.debian), "RedHat": list(self.redhat)}


@dataclass(frozen=True)
class FabricProfile:
    """One fabric profile (a value of ``rdmaforge_fabric``)."""

    name: str
    #: What NCCL must use between nodes: rdma (net IB) or socket (a silent fallback to sockets fails on rdma).
    transport: Transport
    #: The NCCL networks (``Using network <name>``, ``via NET/<name>/...``) that carry the profile's traffic, as
    #: fnmatch patterns of NCCL's own names: ``IB`` is NCCL's verbs transport (InfiniBand, RoCE and eRDMA verbs
    #: devices alike), ``IBext*`` the verbs plugins forked from it (NVIDIA's nccl-rdma-sharp-plugins), ``AIACC-*``
    #: the AIACC net plugin's networks (seed 000 installs it on eRDMA; seed 003: it adapts to Alibaba Cloud's VPC,
    #: RDMA and eRDMA networks), ``*Socket*`` NCCL's TCP transport and every plugin's socket variant. Any other
    #: network (AWS Libfabric, for EFA) is not what the profile was built for.
    nccl_networks: tuple[str, ...]
    #: Per-node line rate in Gbit/s: peak bus bandwidth is judged against it.
    line_rate_gbps: int
    #: Where the profile comes from: a seed document's number, or None for a profile of rdmaforge's own.
    seed: str | None
    description: str
    #: ``ibv_devinfo``'s hca_id of the RDMA devices the fabric brings, as an fnmatch pattern (RDMA profiles).
    device_pattern: str | None = None
    #: The link layer every HCA NCCL opens must report, where the profile makes it unambiguous (IB, RoCE).
    link_layer: str | None = None
    #: Whether the ports' rates are the links' own (mlx5 HCAs), so that a node's rails give its line rate
    #: (rdmaforge.bench.line_rate). eRDMA's are virtual: its profile rate stands.
    line_rate_from_ports: bool = False
    packages: Packages = Packages()
    #: The NCCL net plugin the nccl_plugin role installs by default (``nccl_plugin_provider``): aiacc on eRDMA,
    #: as seed 000 installs it there; none elsewhere (HARP, seed 004, is only registered where an inventory asks).
    net_plugin: str = "none"

    @property
    def is_rdma(self) -> bool:
        return self.transport == "rdma"


# Seed 001's eight, plus ibverbs-utils and rdma-core (as on the other RDMA profiles).
_INFINIBAND_DEBIAN = ("infiniband-diags", "perftest", "ibverbs-providers", "libibumad3", "libibverbs1", "libnl-3-200",
                      "libnl-route-3-200", "librdmacm1", "ibverbs-utils", "rdma-core")  # fmt: skip
_INFINIBAND_REDHAT = ("infiniband-diags", "perftest", "libibverbs", "libibumad", "librdmacm", "libibverbs-utils",
                      "rdma-core")  # fmt: skip

#: NCCL's verbs transport and the plugins forked from it (``Using network IBext_v8``).
_VERBS_NETWORKS = ("IB", "IBext*")
#: NCCL's TCP transport and a net plugin's socket variant (``AIACC-2.0-Socket``, seed 003).
_SOCKET_NETWORKS = ("*Socket*",)

#: The profiles, in the order messages and argument specs list them.
PROFILES: tuple[FabricProfile, ...] = (
    FabricProfile(
        name="erdma",
        transport="rdma",
        nccl_networks=("IB", "AIACC-*"),
        line_rate_gbps=160,  # ebmgn7ex: 2 x 80 Gbit/s (issue 7)
        seed="000",
        description="Alibaba Cloud elastic RDMA (eRDMA)",
        device_pattern="erdma*",
        net_plugin="aiacc",
        packages=Packages(  # seed 000's Ubuntu and Alibaba Cloud Linux/CentOS lists
            debian=("libibverbs1", "ibverbs-providers", "ibverbs-utils", "librdmacm1", "rdma-core"),
            redhat=("libibverbs", "rdma-core", "librdmacm", "libibverbs-utils"),
        ),
    ),
    FabricProfile(
        name="infiniband",
        transport="rdma",
        nccl_networks=_VERBS_NETWORKS,
        line_rate_gbps=200,
        seed="001",
        description="native InfiniBand",
        device_pattern="mlx5*",
        link_layer="IB",
        line_rate_from_ports=True,
        packages=Packages(debian=_INFINIBAND_DEBIAN, redhat=_INFINIBAND_REDHAT),
    ),
    FabricProfile(
        name="roce",
        transport="rdma",
        nccl_networks=_VERBS_NETWORKS,
        line_rate_gbps=100,
        seed=None,
        description="RDMA over Converged Ethernet",
        device_pattern="mlx5*",
        link_layer="RoCE",
        line_rate_from_ports=True,
        packages=Packages(
            debian=("rdma-core", "ibverbs-providers", "libibverbs1", "ibverbs-utils", "librdmacm1", "perftest"),
            redhat=("rdma-core", "libibverbs", "libibverbs-utils", "librdmacm", "perftest"),
        ),
    ),
    FabricProfile(
        name="acs_type1",
        transport="rdma",
        nccl_networks=(*_VERBS_NETWORKS, "AIACC-*"),
        line_rate_gbps=200,
        seed="002",
        description="Alibaba ACS GPU pods with RDMA NIC type 1 (GU8TF, GU8TEF, GX8SF): mlx5 NICs in the pod",
        device_pattern="mlx5*",
        line_rate_from_ports=True,
        packages=Packages(
            debian=("rdma-core", "ibverbs-providers", "libibverbs1", "ibverbs-utils", "librdmacm1", "infiniband-diags"),
            redhat=("rdma-core", "libibverbs", "libibverbs-utils", "librdmacm", "infiniband-diags"),
        ),
    ),
    FabricProfile(
        name="acs_type2",
        transport="socket",  # P16EN: NCCL_IB_DISABLE=1, nothing to install
        nccl_networks=_SOCKET_NETWORKS,
        line_rate_gbps=50,
        seed="002",
        description="Alibaba ACS GPU pods with RDMA NIC type 2 (P16EN): NCCL over sockets",
    ),
    FabricProfile(
        name="tcp",
        transport="socket",
        nccl_networks=_SOCKET_NETWORKS,
        line_rate_gbps=25,  # VPC networking
        seed=None,
        description="no RDMA: TCP sockets only",
    ),
)

#: Profile by name.
BY_NAME: dict[str, FabricProfile] = {p.name: p for p in PROFILES}
#: The names, in table order.
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: The profiles whose NCCL traffic must go over RDMA.
RDMA_NAMES: tuple[str, ...] = tuple(p.name for p in PROFILES if p.is_rdma)

#: What ``facts(name)`` can return, per profile.
FACTS: tuple[str, ...] = (
    "transport", "rdma", "line_rate_gbps", "seed", "description", "device_pattern", "link_layer", "packages",
    "line_rate_from_ports", "net_plugin", "port_link_layer",
)  # fmt: skip


def is_rdma(name: object) -> bool:
    """Whether the profile ``name`` moves NCCL traffic over RDMA (False for an unknown name)."""
    profile = BY_NAME.get(str(name))
    return profile is not None and profile.is_rdma


def default_net_plugin(name: object) -> str:
    """The nccl_plugin role's default ``nccl_plugin_provider`` for the profile ``name`` (none for an unknown one)."""
    profile = BY_NAME.get(str(name))
    return profile.net_plugin if profile is not None else "none"


def transports() -> dict[str, Transport]:
    return {p.name: p.transport for p in PROFILES}


def nccl_networks() -> dict[str, tuple[str, ...]]:
    """The NCCL network name patterns each profile accepts (fnmatch, case-sensitive as NCCL prints them)."""
    return {p.name: p.nccl_networks for p in PROFILES}


def line_rates() -> dict[str, int]:
    """Per-node line rate of each profile, Gbit/s."""
    return {p.name: p.line_rate_gbps for p in PROFILES}


def device_patterns() -> dict[str, str]:
    """The RDMA device name pattern of each RDMA profile."""
    return {p.name: p.device_pattern for p in PROFILES if p.device_pattern is not None}


def link_layers() -> dict[str, str]:
    """The link layer of the profiles where it is unambiguous."""
    return {p.name: p.link_layer for p in PROFILES if p.link_layer is not None}


#: A profile's link layer as ibv_devinfo and sysfs print a port's link_layer: RoCE runs over Ethernet.
PORT_LINK_LAYERS = {"IB": "InfiniBand", "RoCE": "Ethernet"}


def port_link_layers() -> dict[str, str]:
    """The link layer each port of a profile must have, as ibv_devinfo prints it (doctor and verify judge it)."""
    return {name: PORT_LINK_LAYERS[layer] for name, layer in link_layers().items()}


def package_table() -> dict[str, dict[str, list[str]]]:
    """``{profile: {os_family: [package, ...]}}``: the rdma_core role's default ``rdma_core_packages``."""
    return {p.name: p.packages.by_family() for p in PROFILES}


#: Libraries Debian 13 and Ubuntu 24.04 renamed in the 64-bit time_t transition: trixie ships librdmacm1t64
#: ("Provides: librdmacm1", "Replaces: librdmacm1"). apt installs it for the old name, but dpkg-query finds no
#: package of the old name, so every converge ran apt again, reset's record named a package that was never there
#: and the summary showed no librdmacm (review round 41b).
T64_RENAMED = {"librdmacm1": "librdmacm1t64"}
#: ``ansible_facts['distribution']`` (lowercase) -> the first major release with the renamed libraries.
T64_SINCE = {"debian": 13, "ubuntu": 24}


def release_names(names: list[str], distribution: str, major_version: object) -> list[str]:
    """``names`` (a profile's Debian-family package set) as ``distribution`` ``major_version`` calls them: the
    libraries of T64_RENAMED under their new names from the release that renamed them on; unchanged elsewhere (any
    other distribution, an unknown version, an RPM family's names)."""
    since = T64_SINCE.get(str(distribution).lower())
    try:
        major = int(str(major_version).split(".", 1)[0])
    except ValueError:
        return list(names)
    if since is None or major < since:
        return list(names)
    return [T64_RENAMED.get(name, name) for name in names]


def facts(fact: str) -> dict[str, object]:
    """``{profile: value}`` for one of ``FACTS``, as plain data (what the roles' filter returns)."""
    if fact not in FACTS:
        raise ValueError(f"unknown fabric profile fact {fact!r}; allowed: {', '.join(FACTS)}")
    if fact == "packages":
        return dict(package_table())
    if fact == "rdma":
        return {p.name: p.is_rdma for p in PROFILES}
    if fact == "port_link_layer":
        return {p.name: PORT_LINK_LAYERS.get(p.link_layer or "") for p in PROFILES}
    return {p.name: getattr(p, fact) for p in PROFILES}
