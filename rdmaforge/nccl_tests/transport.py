"""What NCCL used to move data between nodes, from its NCCL_DEBUG=INFO lines, and whether that is what
the cluster's fabric profile expects.

A silent fallback to TCP sockets is the commonest reason a freshly built RDMA cluster is slow: NCCL does
not fail when libibverbs or the HCAs are unusable, it prints ``Using network Socket`` and carries on.
``verdict()`` turns that into a failure when the fabric profile expects RDMA, and so is a network the profile does
not name (rdmaforge.fabrics' ``nccl_networks``: AWS Libfabric under an InfiniBand profile is another fabric).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

from rdmaforge import fabrics
from rdmaforge.hostnames import short_name
from rdmaforge.nccl_tests.lines import clean_lines, find_nccl_line

Expectation = Literal["rdma", "socket"]
VerdictStatus = Literal["ok", "warn", "fail", "unknown"]
PluginResult = Literal["loaded", "not_found", "failed", "init_failed"]

#: What each fabric profile expects NCCL to use between nodes (rdmaforge.fabrics' transports).
FABRIC_PROFILES: dict[str, Expectation] = fabrics.transports()
#: Link layer the HCAs must report for profiles where it is unambiguous.
_EXPECTED_LINK_LAYER = fabrics.link_layers()
#: The NCCL networks each profile accepts (fnmatch patterns of ``Using network`` names).
_ACCEPTED_NETWORKS = fabrics.nccl_networks()
SOCKET = "Socket"
_BUILTIN_NETWORKS = ("IB", SOCKET)


def is_socket(network: str) -> bool:
    """Whether a ``Using network`` name is TCP: NCCL's own ``Socket``, and a net plugin's socket fallback
    (``AIACC-2.0-Socket``, the line seed 003 points at, or any other ``*-Socket``): every one names it so."""
    return SOCKET in network

# Messages arrive stripped; ``(.+?)\s*$`` would be quadratic on a long run of inner spaces.
_USING_NETWORK = re.compile(r"^Using network (.+)$")
# ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:10.0.0.1<0>``; merged devices print
# ``[0]{mlx5_0:1/IB, mlx5_1:1/IB}``; plugins forked from net_ib (IBext) print the same.
_IB_USING = re.compile(r"^NET/IB\w* ?: Using(?P<devices>.*?)(?:;|$)")
# The look-behind starts a name only at a token start, so a long name-like run costs one scan, not one per char.
_HCA = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]+):(\d+)/(IB|RoCE|UNSPECIFIED)")
_SOCKET_USING = re.compile(r"^NET/Socket ?: Using (.*)")
_SOCKET_IF = re.compile(r"\[\d+\]([^\s:<\[]+):")
_IB_PROBLEM = re.compile(
    r"^(?:NET/IB\w* ?: (?:No device found|Unable to open device|.*\bfailed\b)|Failed to open libibverbs)"
)
_GDR_USE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for GPU\b")
_GDR_HCA = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA\b")
_VIA_NET = re.compile(r"\bvia NET/(?P<net>[^/]+)/\d+(?P<rest>\S*)")
_ENV_SET = re.compile(r"^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\.?$")
_VERSION = re.compile(r"^NCCL version (\d+\.\d+\.\d+)")
_PLUGIN_LOADED = re.compile(r"^NET/Plugin ?: Loaded net plugin (.+?)(?: \(v\d+\))?$")
_OFI_PLUGIN = re.compile(r"^NET/OFI Using (aws-ofi-nccl \S+)")
_PLUGIN_NOT_FOUND = re.compile(
    r"^NET/Plugin ?: (?:.*No plugin found|Could not find: libnccl-net|Using internal network plugin"
    r"|.*cannot open shared object file: No such file)"
)
_PLUGIN_FAILED = re.compile(r"^NET/Plugin ?: Plugin load.*returned")
# NCCL 2.28+: a plugin that loaded but whose init() failed (NCCL then tries its internal IB and Socket, which it
# reports the same way: only the loaded plugin's name counts). Seen with AIACC 2.0.1 outside Alibaba Cloud.
_PLUGIN_INIT_FAILED = re.compile(r"^Failed to initialize NET plugin (.+?)\s*$")
_PLUGIN_OUTCOMES: tuple[tuple[re.Pattern[str], PluginResult], ...] = (
    (_PLUGIN_NOT_FOUND, "not_found"),
    (_PLUGIN_FAILED, "failed"),
)
# Worst first: one rank that failed to load the plugin is what matters.
_PLUGIN_SEVERITY: tuple[PluginResult, ...] = ("failed", "init_failed", "not_found", "loaded")


@dataclass(frozen=True)
class Hca:
    """An RDMA device port that NCCL's IB transport opened."""

    name: str
    port: int
    link_layer: str  # IB, RoCE (Ethernet) or UNSPECIFIED

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "port": self.port, "link_layer": self.link_layer}


@dataclass
class Transport:
    """Evidence about NCCL's network transport found in a log (several ranks, maybe several files)."""

    #: NCCL INFO/WARN lines seen: 0 means NCCL_DEBUG=INFO was off and nothing can be said.
    info_lines: int = 0
    #: ``Using network X`` values in order of appearance (X: IB, Socket, or a plugin's name).
    networks: list[str] = field(default_factory=list)
    hcas: list[Hca] = field(default_factory=list)
    socket_interfaces: list[str] = field(default_factory=list)
    #: Why NCCL's IB transport was unusable (``Failed to open libibverbs.so``, ``No device found``).
    ib_problems: list[str] = field(default_factory=list)
    #: ``NCCL_X set by environment to Y`` lines.
    env: dict[str, str] = field(default_factory=dict)
    nccl_version: str | None = None
    plugin_results: list[PluginResult] = field(default_factory=list)
    plugin_name: str | None = None
    plugin_detail: str | None = None
    #: Connections through the network with / without GPUDirect RDMA (``via NET/IB/0/GDRDMA``).
    gdr_connections: int = 0
    host_connections: int = 0
    #: ``GPU Direct RDMA Enabled|Disabled for GPU .. / HCA ..`` (what NCCL decided) and ``... for HCA``
    #: (what the NIC supports); channel lines win over both.
    gdr_enabled: int = 0
    gdr_disabled: int = 0
    gdr_hca_enabled: int = 0
    gdr_hca_disabled: int = 0
    #: Networks named by channel lines (``via NET/<name>/<dev>``).
    channel_networks: list[str] = field(default_factory=list)

    @property
    def all_networks(self) -> list[str]:
        """Every network the log names: ``Using network`` values, then the channel lines' others. A channel
        through NET/Socket is TCP traffic whatever network another rank's ``Using network`` line named."""
        return self.networks + [name for name in self.channel_networks if name not in self.networks]

    @property
    def network(self) -> str | None:
        """The network every rank used; ``"mixed"`` when ranks disagree; None when unknown."""
        networks = self.all_networks
        if not networks:
            return None
        return networks[0] if len(networks) == 1 else "mixed"

    @property
    def rdma(self) -> bool | None:
        """True when every rank used an RDMA network, False when any used sockets, None when unknown."""
        networks = self.all_networks
        if not networks:
            return None
        return not any(is_socket(name) for name in networks)

    @property
    def gdr(self) -> str | None:
        """``on``, ``off``, ``mixed`` or None (no evidence); the most direct evidence present decides."""
        for enabled, disabled in (
            (self.gdr_connections, self.host_connections),
            (self.gdr_enabled, self.gdr_disabled),
            (self.gdr_hca_enabled, self.gdr_hca_disabled),
        ):
            if enabled or disabled:
                return "mixed" if enabled and disabled else ("on" if enabled else "off")
        return None

    @property
    def plugin_result(self) -> PluginResult | None:
        """The worst plugin load result over all ranks."""
        for result in _PLUGIN_SEVERITY:
            if result in self.plugin_results:
                return result
        # Old NCCL says nothing on success, but a network NCCL does not have built in came from a plugin.
        return "loaded" if self._plugin_network() else None

    @property
    def plugin(self) -> str | None:
        """The network plugin's name, when one was loaded."""
        return self.plugin_name or self._plugin_network()

    def _plugin_network(self) -> str | None:
        return next((name for name in self.all_networks if name not in _BUILTIN_NETWORKS), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "network": self.network,
            "networks": list(self.all_networks),
            "rdma": self.rdma,
            "hcas": [hca.to_dict() for hca in self.hcas],
            "gdr": self.gdr,
            "nccl_version": self.nccl_version,
            "plugin": {"result": self.plugin_result, "name": self.plugin, "detail": self.plugin_detail},
            "socket_interfaces": list(self.socket_interfaces),
            "ib_problems": list(self.ib_problems),
            "env": dict(self.env),
            "info_lines": self.info_lines,
        }


def parse_transport(text: str) -> Transport:
    """Transport evidence from every NCCL INFO/WARN line of ``text`` (a text log; JSON has none)."""
    transport = Transport()
    for line in clean_lines(text):
        nccl = find_nccl_line(line)
        if nccl is not None:
            transport.info_lines += 1
            read_message(transport, nccl.message)
    return transport


#: Every reader's anchored pattern starts with one of these; the unanchored ones need "via NET/" or
#: "GPU Direct RDMA" in the message. (_fastrows.c, message_relevant, keeps the same list.)
_MESSAGE_STARTS = (
    "Using network", "NET/IB", "NET/Socket", "NET/Plugin", "NET/OFI Using aws-ofi-nccl", "NCCL",
    "Failed to open libibverbs", "Failed to initialize NET plugin",
)  # fmt: skip


def read_message(transport: Transport, message: str) -> None:
    """Record what one NCCL INFO/WARN message says about the transport (the text parser calls it per line)."""
    if not (message.startswith(_MESSAGE_STARTS) or "via NET/" in message or "GPU Direct RDMA" in message):
        return  # no reader's pattern can match: most INFO lines (rings, trees, P2P channels) end here
    # The first three readers' patterns are anchored at _FIRST_STARTS: other messages (the many ``via NET/``
    # channel lines) start at _read_gdr, with the same result.
    for reader in _READERS if message.startswith(_FIRST_STARTS) else _LATER_READERS:
        if reader(transport, message):
            return


def _read_network(transport: Transport, message: str) -> bool:
    match = _USING_NETWORK.match(message)
    if match is None:
        return False
    _add(transport.networks, match.group(1))
    return True


def _read_hcas(transport: Transport, message: str) -> bool:
    match = _IB_USING.match(message)
    if match is None:
        return False
    for name, port, link_layer in _HCA.findall(match.group("devices")):
        hca = Hca(name=name, port=int(port), link_layer=link_layer)
        if hca not in transport.hcas:
            transport.hcas.append(hca)
    return True


def _read_socket(transport: Transport, message: str) -> bool:
    match = _SOCKET_USING.match(message)
    if match is None:
        return False
    for name in _SOCKET_IF.findall(match.group(1)):
        _add(transport.socket_interfaces, name)
    return True


def _read_gdr(transport: Transport, message: str) -> bool:
    if "via NET/" not in message and "GPU Direct RDMA" not in message:
        return False  # what each of its patterns requires
    via = _VIA_NET.search(message)
    if via is not None:
        _add(transport.channel_networks, via.group("net"))
        if "GDRDMA" in via.group("rest"):
            transport.gdr_connections += 1
        else:
            transport.host_connections += 1
        return True
    use = _GDR_USE.search(message)
    if use is not None:
        if use.group(1) == "Enabled":
            transport.gdr_enabled += 1
        else:
            transport.gdr_disabled += 1
        return True
    hca = _GDR_HCA.search(message)
    if hca is not None:
        if hca.group(1) == "Enabled":
            transport.gdr_hca_enabled += 1
        else:
            transport.gdr_hca_disabled += 1
        return True
    return False


def add_channels(transport: Transport, networks: list[str], gdr: int, host: int) -> None:
    """What _read_gdr records for channel lines (``via NET/<net>/<n>``), gathered by the C accelerator."""
    for name in networks:
        _add(transport.channel_networks, name)
    transport.gdr_connections += gdr
    transport.host_connections += host


def _read_plugin(transport: Transport, message: str) -> bool:
    if not message.startswith(_PLUGIN_STARTS):
        return False  # how each of its patterns starts
    loaded = _PLUGIN_LOADED.match(message) or _OFI_PLUGIN.match(message)
    if loaded is not None:
        transport.plugin_results.append("loaded")
        transport.plugin_name = transport.plugin_name or loaded.group(1)
        transport.plugin_detail = transport.plugin_detail or message
        return True
    for pattern, result in _PLUGIN_OUTCOMES:
        if pattern.match(message):
            transport.plugin_results.append(result)
            transport.plugin_detail = transport.plugin_detail or message
            return True
    init_failed = _PLUGIN_INIT_FAILED.match(message)
    if init_failed is not None and init_failed.group(1) == transport.plugin_name:
        transport.plugin_results.append("init_failed")
        transport.plugin_detail = message  # the cause, where "Loaded net plugin" was recorded first
        return True
    return False


def _read_misc(transport: Transport, message: str) -> bool:
    if not message.startswith(_MISC_STARTS):
        return False  # how each of its patterns starts
    env = _ENV_SET.match(message)
    if env is not None:
        transport.env.setdefault(env.group(1), env.group(2))
        return True
    version = _VERSION.match(message)
    if version is not None:
        transport.nccl_version = transport.nccl_version or version.group(1)
        return True
    if _IB_PROBLEM.match(message):
        _add(transport.ib_problems, message)
        return True
    return False


_FIRST_STARTS = ("Using network", "NET/IB", "NET/Socket")
#: The beginnings _read_plugin's and _read_misc's anchored patterns require.
_PLUGIN_STARTS = ("NET/Plugin", "NET/OFI Using ", "Failed to initialize NET plugin ")
_MISC_STARTS = ("NCCL_", "NCCL version ", "NET/IB", "Failed to open libibverbs")
_LATER_READERS = (_read_gdr, _read_plugin, _read_misc)
_READERS = (_read_network, _read_hcas, _read_socket, *_LATER_READERS)


def _add(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


def merge_transports(transports: Iterable[Transport]) -> Transport:
    """One Transport holding the evidence of several (one per file of a cluster run)."""
    merged = Transport()
    for item in transports:
        merged.info_lines += item.info_lines
        for target, source in (
            (merged.networks, item.networks),
            (merged.socket_interfaces, item.socket_interfaces),
            (merged.ib_problems, item.ib_problems),
            (merged.channel_networks, item.channel_networks),
        ):
            for value in source:
                _add(target, value)
        merged.hcas.extend(hca for hca in item.hcas if hca not in merged.hcas)
        for key, value in item.env.items():
            merged.env.setdefault(key, value)
        merged.nccl_version = merged.nccl_version or item.nccl_version
        merged.plugin_results.extend(item.plugin_results)
        merged.plugin_name = merged.plugin_name or item.plugin_name
        merged.plugin_detail = merged.plugin_detail or item.plugin_detail
        merged.gdr_connections += item.gdr_connections
        merged.host_connections += item.host_connections
        merged.gdr_enabled += item.gdr_enabled
        merged.gdr_disabled += item.gdr_disabled
        merged.gdr_hca_enabled += item.gdr_hca_enabled
        merged.gdr_hca_disabled += item.gdr_hca_disabled
    return merged


@dataclass(frozen=True)
class TransportVerdict:
    """Whether the transport NCCL used matches the fabric profile."""

    status: VerdictStatus
    fabric: str
    expected: Expectation
    messages: tuple[str, ...]

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "fabric": self.fabric,
            "expected": self.expected,
            "messages": list(self.messages),
        }


def verdict(transport: Transport, expected_fabric: str) -> TransportVerdict:
    """Judge ``transport`` against a fabric profile; ValueError for a profile that does not exist."""
    expected = FABRIC_PROFILES.get(expected_fabric)
    if expected is None:
        raise ValueError(f"unknown fabric profile {expected_fabric!r}; known: {', '.join(FABRIC_PROFILES)}")
    networks = transport.all_networks
    if not networks:
        why = "no NCCL INFO lines" if transport.info_lines == 0 else "no 'Using network' line"
        message = f"cannot check the transport: {why} (run nccl-tests with NCCL_DEBUG=INFO)"
        return TransportVerdict("unknown", expected_fabric, expected, (message,))
    if expected == "rdma":
        status, messages = _judge_rdma(transport, expected_fabric)
    else:
        status, messages = _judge_socket(transport, expected_fabric)
    return TransportVerdict(status, expected_fabric, expected, tuple(messages))


def within_one_node(transport: Transport, expected_fabric: str, hosts: Sequence[str]) -> TransportVerdict:
    """The verdict of a log whose every run kept its ranks on one node (``hosts``: those nodes, one per run or
    shared). Such a log can fail but never pass: a fallback NCCL named there (sockets where RDMA is expected, IB
    unusable) is what a job across nodes would have used too, while 'Using network IB' proves nothing of a fabric
    no byte crossed. Unknown then, whatever network NCCL named. ValueError for a profile that does not exist."""
    judged = verdict(transport, expected_fabric)
    if judged.failed:
        return judged
    expected = judged.expected
    where = (f"every rank ran on {hosts[0]}, so NCCL's traffic stayed inside that node" if len(hosts) == 1 else
             f"each run's ranks all ran on one node ({', '.join(hosts)}), so NCCL's traffic stayed inside a node")
    message = (f"cannot check the transport: {where} (NVLink, PCIe or shared memory) and never used the fabric; run "
               "on two nodes or more")  # fmt: skip
    return TransportVerdict("unknown", expected_fabric, expected, (message,))


def without_hosts(transport: Transport, expected_fabric: str) -> TransportVerdict:
    """The verdict of a log whose ``#  Rank`` lines name no host: as within_one_node, it can fail but never pass,
    since nothing shows its ranks ran on two nodes (NCCL names its network on a single node too)."""
    judged = verdict(transport, expected_fabric)
    if judged.failed or judged.status == "unknown":  # a failure stands; no evidence keeps its own reason
        return judged
    message = ("cannot check the transport: the log's '#  Rank' lines name no host, so nothing shows NCCL's traffic "
               "crossed nodes (NCCL names its network on a single node too)")  # fmt: skip
    return TransportVerdict("unknown", expected_fabric, judged.expected, (message,))


class OneNodeRuns:
    """Folds a log's runs (their ``#  Rank`` hosts, in order) into the nodes they kept to: ``hosts`` is the list of
    them while every run so far ran all its ranks on one node, None once a run spanned two nodes or named none
    (then the log's INFO lines may speak of the fabric). Two single-node jobs on two nodes are still no fabric
    traffic: the union of their hosts is not a run across them."""

    def __init__(self) -> None:
        self.hosts: list[str] | None = []
        self.runs = 0
        self.crossed = False  # whether any run's Rank lines named two hosts or more

    def add(self, rank_hosts: Mapping[int, str]) -> None:
        self.runs += 1
        distinct = {short_name(host) for host in rank_hosts.values()}
        self.crossed = self.crossed or len(distinct) >= 2
        if self.hosts is None:
            return
        if len(distinct) != 1:
            self.hosts = None
            return
        host = next(iter(distinct))
        if host not in self.hosts:
            self.hosts.append(host)

    @property
    def kept_to(self) -> list[str] | None:
        """The nodes, when at least one run was seen and each kept to one node; else None."""
        return self.hosts if self.runs and self.hosts else None

    @property
    def unplaced(self) -> bool:
        """Whether runs were seen, none of them shows its ranks on two nodes or more, and not every one names the
        node it kept to (kept_to): runs whose ``#  Rank`` lines name no host, alone or beside one-node runs. Every
        nccl-tests log of the corpus names them; a log without is edited or cut (review rounds 34a, 35)."""
        return self.runs > 0 and not self.crossed and self.kept_to is None

    def verdict(self, transport: Transport, expected_fabric: str) -> TransportVerdict:
        """The verdict of the log these runs are from: as a log of one node's ranks (within_one_node) when every run
        kept to one named node, as a log without hosts (without_hosts) when no run shows two nodes otherwise, else
        from its evidence alone. nccl-report and the benchmark report both judge through it."""
        if self.kept_to is not None:
            return within_one_node(transport, expected_fabric, self.kept_to)
        if self.unplaced:
            return without_hosts(transport, expected_fabric)
        return verdict(transport, expected_fabric)


class RunsWithoutInfoLines:
    """Folds a log's runs into those whose table came without NCCL INFO lines of their own while another run of the
    same log printed some: a rerun appended without NCCL_DEBUG=INFO, whose transport the log's INFO lines (an earlier
    run's) do not show. Where no run printed any, the log simply has no evidence, and is judged as such.
    `rdmaforge nccl-report` (every run of a file) and the benchmark report (each collective's judged run) use it."""

    def __init__(self) -> None:
        self._silent: list[str] = []
        self._evidenced = False

    def add(self, label: str, has_table: bool, info_lines: int | None) -> None:
        if has_table and info_lines == 0:
            self._silent.append(label)
        self._evidenced = self._evidenced or bool(info_lines)

    @property
    def borrowed(self) -> list[str]:
        """The labels of the runs whose transport the log's INFO lines do not show (empty where none printed any)."""
        return list(self._silent) if self._evidenced else []


#: Worst first: one log's fallback fails several logs' verdict; one log without evidence leaves it unknown.
VERDICT_ORDER: tuple[VerdictStatus, ...] = ("fail", "unknown", "warn", "ok")


def verdict_of_logs(
    logs: Sequence[tuple[str, Transport]],
    expected_fabric: str,
    placement: Mapping[str, OneNodeRuns] | None = None,
) -> TransportVerdict:
    """One verdict over several logs (one per collective, as a cluster run writes them), each judged from its own
    evidence: one log's 'Using network IB' says nothing of a log cut before NCCL's INFO lines. The worst of them
    (combined_verdict), with each message prefixed by its log's name; a single log's verdict as it is.

    ``placement``: log name -> where its runs' ranks ran (OneNodeRuns.verdict). NCCL prints 'Using network IB' on
    a single node too, and its ranks then talk over NVLink, PCIe or shared memory: a log of one node's ranks, or one
    whose Rank lines name no host (review round 34a: one host's INFO lines passed), says nothing of the fabric."""
    judged = [
        (name, placement[name].verdict(transport, expected_fabric) if placement and name in placement
         else verdict(transport, expected_fabric))
        for name, transport in logs
    ]  # fmt: skip
    if not judged:
        return verdict(Transport(), expected_fabric)  # no log: no evidence (unknown)
    messages = [f"{name}: {message}" for name, one in judged for message in one.messages]
    return combined_verdict([one for _, one in judged], messages)


def combined_verdict(judged: Sequence[TransportVerdict], messages: Sequence[str]) -> TransportVerdict:
    """One verdict over several logs' own verdicts (one fabric profile): the worst status by VERDICT_ORDER, with
    ``messages`` (each caller words them: nccl-report per file, the bench report per reason). A single log's
    verdict is returned as it is. ValueError for no verdict: no log is no evidence, which the caller words."""
    if not judged:
        raise ValueError("combined_verdict needs at least one log's verdict")
    if len(judged) == 1:
        return judged[0]
    first = judged[0]
    worst = min((one.status for one in judged), key=VERDICT_ORDER.index)
    return TransportVerdict(worst, first.fabric, first.expected, tuple(messages))


def _judge_rdma(transport: Transport, fabric: str) -> tuple[VerdictStatus, list[str]]:
    networks = transport.all_networks
    rdma_networks = [name for name in networks if not is_socket(name)]
    socket_networks = [name for name in networks if is_socket(name)]
    if socket_networks:
        where = f"on some ranks (others used {', '.join(rdma_networks)})" if rdma_networks else "on every rank"
        named = "" if socket_networks == [SOCKET] else f" ({', '.join(socket_networks)})"
        message = (
            f"fabric profile '{fabric}' expects RDMA but NCCL fell back to the Socket transport (TCP){named} {where}"
        )
        return "fail", [message + _fallback_causes(transport)]
    foreign = [name for name in rdma_networks if not accepts(fabric, name)]
    if foreign:
        others = [name for name in rdma_networks if name not in foreign]
        where = f" on some ranks (others used {', '.join(others)})" if others else ""
        plugin = f" (net plugin {transport.plugin})" if transport.plugin and transport.plugin not in foreign else ""
        message = (f"fabric profile '{fabric}' expects NCCL network {_accepted(fabric)} but NCCL used "
                   f"{', '.join(foreign)}{plugin}{where}: not the fabric the profile was built for")  # fmt: skip
        return "fail", [message]
    messages = [f"NCCL used {', '.join(rdma_networks)} as fabric profile '{fabric}' expects"]
    status: VerdictStatus = "ok"
    odd = _hcas_on_other_link_layer(transport, fabric)
    if odd:
        status = "warn"
        messages.append(f"HCAs with a link layer other than {_EXPECTED_LINK_LAYER[fabric]}: {', '.join(odd)}")
    if transport.gdr in ("off", "mixed"):
        status = "warn"
        messages.append(f"GPUDirect RDMA is {transport.gdr}: some traffic is staged through host memory")
    return status, messages


def _hcas_on_other_link_layer(transport: Transport, fabric: str) -> list[str]:
    # An InfiniBand cluster whose NCCL opened a RoCE port (or the reverse) picked the wrong NIC.
    wanted = _EXPECTED_LINK_LAYER.get(fabric)
    if wanted is None:
        return []
    return [f"{h.name}:{h.port}/{h.link_layer}" for h in transport.hcas if h.link_layer != wanted]


def accepts(fabric: str, network: str) -> bool:
    """Whether NCCL's network ``network`` is one fabric profile ``fabric`` expects (rdmaforge.fabrics)."""
    return any(fnmatchcase(network, pattern) for pattern in _ACCEPTED_NETWORKS.get(fabric, ()))


def _accepted(fabric: str) -> str:
    *first, last = _ACCEPTED_NETWORKS[fabric]
    return f"{', '.join(first)} or {last}" if first else last


def _judge_socket(transport: Transport, fabric: str) -> tuple[VerdictStatus, list[str]]:
    rdma_networks = [name for name in transport.all_networks if not accepts(fabric, name)]
    if rdma_networks:
        message = (
            f"fabric profile '{fabric}' expects the Socket transport (NCCL_IB_DISABLE=1) but NCCL used "
            f"{', '.join(rdma_networks)}"
        )
        return "fail", [message]
    return "ok", [f"NCCL used the Socket transport as fabric profile '{fabric}' expects"]


def _fallback_causes(transport: Transport) -> str:
    causes = list(transport.ib_problems)
    if transport.env.get("NCCL_IB_DISABLE", "0").strip() not in ("", "0"):
        causes.append(f"NCCL_IB_DISABLE={transport.env['NCCL_IB_DISABLE']}")
    if transport.plugin_result in ("failed", "init_failed") and transport.plugin_detail:
        causes.append(transport.plugin_detail)
    return f"; cause: {'; '.join(causes)}" if causes else ""
