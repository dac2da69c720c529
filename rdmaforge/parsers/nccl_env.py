"""NCCL settings: validation of NCCL_IB_HCA, unknown NCCL_* names, and the /etc/nccl.conf format.

NCCL reads /etc/nccl.conf itself (src/misc/param.cc): one KEY=VALUE per line, '#' comments, the value taken
verbatim up to the end of the line (no quoting), and variables already in the environment win.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ansible.module_utils.parsing.convert_bool import boolean

from rdmaforge.plain_data import show

_DATA = Path(__file__).resolve().parent.parent / "data" / "nccl_env_names.txt"
_INTEGER_PARAMS = _DATA.with_name("nccl_integer_params.txt")
_HCA_ENTRY = re.compile(r"^[A-Za-z0-9_.\-]+(:[0-9]+)?$")
# POSIX's portable environment names: upper and lower case (http_proxy, no_proxy are the usual spellings).
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def known_nccl_names() -> frozenset[str]:
    lines = _DATA.read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def integer_params() -> frozenset[str]:
    """The settings NCCL reads as integers (NCCL_PARAM), from NCCL's source (scripts/extract-nccl-env-names)."""
    lines = _INTEGER_PARAMS.read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def integer_problem(key: str, value: str) -> str | None:
    """Why NCCL would not read ``value`` of the integer setting ``key`` as written: strtoll reads what it can and
    ignores the rest, so NCCL_IB_DISABLE=yes reads as 0 (InfiniBand stays on, the opposite of what was meant) and
    1.5 as 1, with no warning a user sees (an INFO line at most). None for an integer NCCL reads whole."""
    text = value.strip()
    if not text:
        return None  # empty: NCCL keeps its default, as for a setting not given
    match = _STRTOLL.match(text)
    whole = match is not None and match.end() == len(text)
    if whole and nccl_integer(text, default=_OUT_OF_RANGE) != _OUT_OF_RANGE:
        return None
    read = f"read {nccl_integer(text)}" if not whole else "keep its default (the number is out of range)"
    return (f"{key}={value!r}: NCCL reads this setting as an integer (strtoll), so it would {read}; allowed: an "
            "integer (e.g. 0 or 1; a boolean is written as 1 or 0)")


#: NCCL reads these lists character by character (src/misc/utils.cc, parseStringList) and looks for '^' and '=' at
#: the first character only: a blank before or after is part of the first or last name, which then matches no
#: device or interface, and NCCL goes on without the one meant.
_BLANKS = ("{name}={value!r} has a blank before or after it, which NCCL keeps as part of a name (matching no device "
           "or interface) or which hides a leading '^' or '='; allowed: the value without blanks around it")


#: Characters no setting's value may hold: C0 and C1 control characters (tab, newline, carriage return, NUL, NEL...)
#: and Unicode's line and paragraph separators. NCCL's nccl.conf reader drops only a line's final newline
#: (src/misc/param.cc, setEnvFile), so a carriage return stays in the value; systemd's unit reader ends a line at
#: one; YAML readers fold NEL and the separators.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
CONTROL_ALLOWED = "printable text, without tab, newline, carriage return or other control characters"


def list_flags(value: str) -> tuple[bool, bool, str]:
    """``(exclude, exact, list)`` of an NCCL device or interface list (NCCL_IB_HCA, NCCL_SOCKET_IFNAME): NCCL reads
    '^' (exclude) and then '=' (exact names) at the start only (src/os/linux.cc, src/transport/net_ib/init.cc)."""
    exclude = value.startswith("^")
    rest = value[1:] if exclude else value
    exact = rest.startswith("=")
    return exclude, exact, rest[1:] if exact else rest


def parse_ib_hca(value: str) -> tuple[bool, bool, list[tuple[str, int | None]]]:
    """Split an NCCL_IB_HCA value into (exclude, exact, [(device, port|None)]). Raises ValueError when malformed.

    Grammar (NCCL docs): optional '^' (exclude the listed devices), then optional '=' (exact names instead of
    prefixes), then a comma-separated list of device[:port]. An empty value is allowed (it means "no filter").
    """
    if value != value.strip():
        raise ValueError(_BLANKS.format(name="NCCL_IB_HCA", value=value))
    exclude, exact, rest = list_flags(value)
    if not rest:
        if exclude or exact:
            raise ValueError(f"NCCL_IB_HCA={value!r}: '^' or '=' must be followed by device names")
        return False, False, []
    entries: list[tuple[str, int | None]] = []
    for item in rest.split(","):
        if not _HCA_ENTRY.match(item):
            raise ValueError(
                f"NCCL_IB_HCA={value!r}: {item!r} is not 'device' or 'device:port' "
                "(allowed: optional '^' to exclude, optional '=' for exact names, then device[:port] list, "
                "e.g. 'mlx5', '=mlx5_0:1,mlx5_1:1', '^=mlx5_4')"
            )
        name, _, port = item.partition(":")
        if port and int(port) < 1:
            raise ValueError(f"NCCL_IB_HCA={value!r}: port numbers start at 1, got {item!r}")
        entries.append((name, int(port) if port else None))
    return exclude, exact, entries


def text_value_problem(key: object, value: object) -> str | None:
    """Why ``value`` cannot be an environment variable's (or an nccl.conf line's) value: a list or a mapping would
    be written as Python's repr (``NCCL_ALGO=['Ring', 'Tree']``), which NCCL cannot read. None for text, numbers,
    booleans and null."""
    if not isinstance(value, list | Mapping):
        return None
    kind = "list" if isinstance(value, list) else "mapping"
    return (f"{key}={show(value)} is a {kind}, and an environment variable holds text; allowed: a string, number or "
            "boolean (a list of NCCL's as one comma-separated string, e.g. Ring,Tree; null removes the setting)")


#: The NCCL settings that go into an InfiniBand verbs field of fixed width (src/transport/net_ib/connect.cc: the
#: queue pair's timeout and retry count, the address handle's service level, traffic class and GID index) or that
#: NCCL bounds itself, and the values they can hold: (least, most, what). A value outside is cut to the field's
#: width or refused by ibv_modify_qp at the first job, never at the converge (review round 23b). -1 is NCCL's
#: "not set" where its default is -1.
INTEGER_RANGES: dict[str, tuple[int, int, str]] = {
    "NCCL_IB_TIMEOUT": (0, 31, "the verbs ack timeout is 5 bits (4.096 us x 2^value)"),
    "NCCL_IB_RETRY_CNT": (0, 7, "the verbs retry count is 3 bits"),
    "NCCL_IB_SL": (-1, 15, "an InfiniBand service level is 4 bits; -1 leaves NCCL's default"),
    "NCCL_IB_TC": (-1, 255, "the traffic class is 8 bits; -1 leaves NCCL's default"),
    "NCCL_IB_GID_INDEX": (-1, 255, "a GID table index is 8 bits; -1 lets NCCL pick one"),
    "NCCL_IB_QPS_PER_CONNECTION": (1, 128, "at least one queue pair, and NCCL_IB_MAX_QPS (128) at most"),
}


#: NCCL 2.29.7's names (src/init.cc: ncclAlgoStr, ncclProtoStr, ncclFuncStr) for NCCL_ALGO and NCCL_PROTO, which
#: it reads with parseList (src/graph/tuning.cc): ';'-separated entries of [function:][^]name,name..., names and
#: functions without regard to case, only the first entry without a function. An unknown token fails the
#: communicator's init ("Unrecognized element token"; NCCL 2.16 ignored it, narrowing the choice without a word).
NCCL_TOKEN_LISTS: dict[str, tuple[str, ...]] = {
    "NCCL_ALGO": ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"),
    "NCCL_PROTO": ("LL", "LL128", "Simple"),
}
NCCL_FUNCTIONS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")


def token_list_problems(key: str, value: str) -> list[str]:
    """Where ``value`` of NCCL_ALGO or NCCL_PROTO has a token NCCL does not know, read as NCCL's parseList does."""
    names = NCCL_TOKEN_LISTS[key]
    known = {name.lower() for name in names}
    functions = {name.lower() for name in NCCL_FUNCTIONS}
    first, second = names[1], names[0]
    allowed = (f"allowed: [function:][^]name,... entries separated by ';', names among {', '.join(names)}, functions "
               f"among {', '.join(NCCL_FUNCTIONS)} (e.g. '{first},{second}', '^{names[-1]}', "
               f"'AllReduce:{first};Broadcast:{second}')")  # fmt: skip
    found = []
    for index, entry in enumerate(part for part in value.split(";") if part):
        pieces = [piece for piece in entry.split(":") if piece]
        if not pieces:
            continue
        prefix, elements = (pieces[0], pieces[1]) if len(pieces) > 1 else (None, pieces[0])
        if prefix is None and index > 0:
            found.append(f"{key}={value!r}: {entry!r} has no function, which only the first entry may leave out; "
                         f"{allowed}")  # fmt: skip
        elif prefix is not None and prefix.lower() not in functions:
            found.append(f"{key}={value!r}: {prefix!r} is no function NCCL knows; {allowed}")
        unknown = [name for name in elements.lstrip("^").split(",") if name and name.lower() not in known]
        if unknown:
            found.append(f"{key}={value!r}: {', '.join(map(repr, unknown))} is no name NCCL knows, and NCCL fails "
                         f"the communicator's init on it; {allowed}")  # fmt: skip
    return found


#: Settings NCCL 2.29.7 compares with a few words and ignores otherwise (src/debug.cc, strcasecmp: NCCL_DEBUG=1.5
#: logs nothing; src/misc/socket.cc, strcmp: NCCL_SOCKET_FAMILY=ipv4 leaves the family to NCCL): the words, and
#: whether their case counts.
NCCL_KEYWORDS: dict[str, tuple[tuple[str, ...], bool]] = {
    "NCCL_DEBUG": (("VERSION", "WARN", "INFO", "ABORT", "TRACE"), False),
    "NCCL_SOCKET_FAMILY": (("AF_INET", "AF_INET6"), True),
}


#: Path types NCCL 2.29.7's ncclGetLevel takes by name (src/graph/topo.cc: topoPathTypeStr up to SYS; NET and DIS
#: are past its loop), compared with strcmp: case counts. A value with a leading digit is read as an old-style
#: number instead (0-5, more reads as SYS); anything else is ignored and NCCL picks the level itself.
PATH_LEVELS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
#: The settings NCCL reads with ncclGetLevel (src/graph/paths.cc), not NCCL_PARAM: NCCL_P2P_DISABLE with strtol,
#: where only 1 disables (yes, true and 2 leave P2P on), and the two levels.
LEVEL_SETTINGS = frozenset({"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL"})


def level_problem(key: str, value: object) -> str | None:
    """``value`` of a LEVEL_SETTINGS setting that NCCL would not read as meant (an empty one keeps its default)."""
    text = _as_str(value)
    if isinstance(value, bool) or not text.strip():
        return None  # a YAML boolean is written as 1 or 0
    if key == "NCCL_P2P_DISABLE":
        # strtol with base 0, as nccl_integer reads it: '01' and '1.0' are 1; a word is 0, never what was meant
        if _STRTOLL.match(text) and nccl_integer(value) in (0, 1):
            return None
        return (f"{key}={value!r}: NCCL disables peer-to-peer only for exactly 1 and reads anything else as not "
                "disabled (src/graph/paths.cc); allowed: 0 or 1")  # fmt: skip
    if text in PATH_LEVELS or text[:1].isdigit():  # NCCL looks at the first character as written: ' 2' is ignored
        return None
    return (f"{key}={value!r} is no level NCCL reads, and NCCL ignores it (names are compared with their case); "
            f"allowed: {', '.join(PATH_LEVELS)}, or an old-style number 0-5")  # fmt: skip


def keyword_problem(key: str, value: object) -> str | None:
    """``value`` of a NCCL_KEYWORDS setting that NCCL would ignore (an empty one keeps NCCL's default)."""
    words, exact = NCCL_KEYWORDS[key]
    text = str(value)
    if not text or (text in words if exact else text.upper() in words):
        return None
    case = "" if exact else ", in any case"
    return f"{key}={value!r} is no value NCCL reads, and NCCL ignores it; allowed: {', '.join(words)}{case}"


def range_problems(key: str, value: object) -> list[str]:
    """``key``'s value outside INTEGER_RANGES, as NCCL reads it (strtoll: a YAML integer, or text)."""
    least, most, why = INTEGER_RANGES[key]
    number = value if isinstance(value, int) and not isinstance(value, bool) else nccl_integer(value)
    if least <= number <= most:
        return []
    return [f"{key}={value!r}: outside {least}..{most} ({why}); allowed: a whole number from {least} to {most}"]


def problems(env: Mapping[str, object]) -> list[str]:
    """Errors that make a setting unusable: bad names, values NCCL cannot read from nccl.conf (lists, mappings,
    newlines), bad NCCL_IB_HCA or NCCL_SOCKET_IFNAME."""
    errors: list[str] = []
    no_text: set[str] = set()  # keys whose value is a list or mapping: its repr is no value to check further
    controlled: set[str] = set()  # keys whose value holds a control character: named once, for that
    for key, value in env.items():
        if not _ENV_NAME.match(str(key)):
            errors.append(f"{key!r} is not a valid environment variable name (allowed: letters, digits and _, not "
                          "starting with a digit)")
        typed = text_value_problem(key, value)
        if typed is not None:
            errors.append(typed)
            no_text.add(key)
            continue
        control = CONTROL_CHARACTERS.search(str(value)) if value is not None else None
        if control is not None:
            controlled.add(key)
            what = "a newline" if control.group() == "\n" else f"the control character {control.group()!r}"
            errors.append(f"{key}: values cannot contain {what}; allowed: {CONTROL_ALLOWED}")
        if value == NODE_GPU_COUNT:
            errors.append(
                f"{key}={NODE_GPU_COUNT} is the node's GPU count, which is unknown or 0 on this node (preflight's "
                f"rdmaforge_node.gpu_count; `rdmaforge render`: workload_manifests_gpus_per_node); allowed: a node "
                f"with GPUs (rdmaforge_gpus_per_node where preflight cannot count them), or {key} set in "
                "nccl_env_overrides"
            )
    integers = integer_params()
    for key, value in env.items():
        if key in integers and key not in no_text and value is not None and not isinstance(value, (bool, int)):
            problem = integer_problem(str(key), str(value))
            if problem is not None:
                errors.append(problem)
                continue
        if key in INTEGER_RANGES and key not in no_text and value is not None and str(value).strip():
            errors += range_problems(str(key), value)
        if key in NCCL_TOKEN_LISTS and key not in no_text and isinstance(value, str):
            errors += token_list_problems(str(key), value)
        if key in LEVEL_SETTINGS and key not in no_text and key not in controlled and value is not None:
            level = level_problem(str(key), value)
            if level is not None:
                errors.append(level)
        checked = key in NCCL_KEYWORDS and key not in no_text and key not in controlled
        keyword = keyword_problem(str(key), value) if checked else None
        if keyword is not None and value is not None:
            errors.append(keyword)
    hca = env.get("NCCL_IB_HCA")
    if hca is not None and "NCCL_IB_HCA" not in no_text:
        try:
            parse_ib_hca(str(hca))
        except ValueError as exc:
            errors.append(str(exc))
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if ifname is not None and "NCCL_SOCKET_IFNAME" not in no_text:
        family = env.get("NCCL_SOCKET_FAMILY")
        errors += socket_ifname_problems(str(ifname), None if family is None else str(family))
    return errors


#: A Linux interface name: 1-15 characters (IFNAMSIZ), none of them blank, '/' or ':' (Linux refuses those).
_IFNAME_ENTRY = re.compile(r"^[^\s/,:]{1,15}$")
_IFNAME_ALLOWED = ("allowed: optional '^' to exclude, optional '=' for exact names, then a comma-separated list of "
                   "interface names or prefixes, 1-15 characters without blanks, '/' or ':', e.g. 'eth0', "
                   "'=eth0,eth1', '^docker,lo'")


@dataclass(frozen=True)
class SocketIfname:
    """NCCL_SOCKET_IFNAME as NCCL reads it (src/os/linux.cc, ncclOsFindInterfaces; src/misc/utils.cc,
    parseStringList): '^' then '=' at the start only, names split at ',', each cut at a ':' (a port, which an
    interface never has), empty names dropped."""

    exclude: bool
    exact: bool
    names: tuple[str, ...]

    def accepts(self, interface: str) -> bool:
        """matchIfList(name) XOR searchNot: a name is a prefix unless '=' asked for exact names."""
        matched = not self.names or list_matches(interface, self.names, self.exact)
        return matched != self.exclude


def list_matches(name: str, entries: Iterable[str], exact: bool) -> bool:
    """NCCL's matchIfList for one interface or device name: equal to an entry where '=' asked for exact names, else
    starting with one. The one rule for NCCL_SOCKET_IFNAME and NCCL_IB_HCA ('^' then inverts it; the ACS check of
    an mlx5_N device asks the same of names it does not know, in rdmaforge.workloads.acs)."""
    return any(name == entry if exact else name.startswith(entry) for entry in entries)


#: How many names NCCL reads from the list (src/include/socket.h MAX_IFS): the rest are dropped.
SOCKET_IFNAME_MAX_NAMES = 16


def socket_ifname(value: str) -> SocketIfname | None:
    """How NCCL reads the value; None where it ignores the value (one character or none: socket.cc needs two) and
    picks an interface itself."""
    if len(value) <= 1:
        return None
    exclude, exact, rest = list_flags(value)
    names = tuple(name for name in (item.partition(":")[0] for item in rest.split(",")) if name)
    return SocketIfname(exclude, exact, names[:SOCKET_IFNAME_MAX_NAMES])


#: NCCL's own choice without a usable NCCL_SOCKET_IFNAME (socket.cc, ncclFindInterfaces), in its order.
_AUTOMATIC_CHOICE = (SocketIfname(False, False, ("ib",)), SocketIfname(True, False, ("docker", "lo", "virbr")),
                     SocketIfname(False, False, ("docker",)), SocketIfname(False, False, ("lo",)),
                     SocketIfname(False, False, ("virbr",)))


#: NCCL_SOCKET_FAMILY's value that keeps NCCL to IPv6 addresses (socket.cc, ncclEnvSocketFamily), among which it
#: skips loopback ones (linux.cc: IN6_IS_ADDR_LOOPBACK): lo, whose only IPv6 address is ::1, is then never taken.
IPV6_ONLY = "AF_INET6"


def first_socket_interface(value: str | None, interfaces: Sequence[str], family: str | None = None) -> str | None:
    """The interface NCCL bootstraps over: the first of ``interfaces`` (in the kernel's order, lo first) that
    NCCL_SOCKET_IFNAME=``value`` accepts, or NCCL's own choice where the value is unset or ignored. None: NCCL
    finds no socket interface. ``family``: NCCL_SOCKET_FAMILY (AF_INET6 leaves lo out)."""
    if family == IPV6_ONLY:
        interfaces = [name for name in interfaces if name != "lo"]
    chosen = socket_ifname(value or "")
    for reading in (chosen,) if chosen is not None else _AUTOMATIC_CHOICE:
        found = next((name for name in interfaces if reading.accepts(name)), None)
        if found is not None:
            return found
    return None


def _may_name(name: str, exact: bool, pattern: str) -> bool:
    """Whether NCCL_SOCKET_IFNAME's ``name`` (a prefix unless ``exact``) may match an interface of the shell
    ``pattern``: the name itself matches it, or (a prefix) the pattern's fixed start and the name run into each
    other (br matches br-ex)."""
    if fnmatch.fnmatchcase(name, pattern):
        return True
    fixed = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    return not exact and bool(fixed) and (fixed.startswith(name) or name.startswith(fixed))


def node_problems(env: Mapping[str, object], interfaces: Sequence[str], rdma_devices: Sequence[str],
                  unlisted: Sequence[str] = ()) -> list[str]:  # fmt: skip
    """Settings that name what the node does not have, from its own NIC and RDMA device names (preflight's facts;
    an empty list is one not read, and judged on nothing): an NCCL_SOCKET_IFNAME none of ``interfaces`` matches
    (the profiles' eth0 on a node whose NICs are ens*: NCCL's bootstrap finds no socket interface at the first
    job), and an NCCL_IB_HCA that keeps none of ``rdma_devices`` (NCCL then has no IB device, and falls back to
    sockets or fails). Review round 23b: both passed preflight and the converge. ``unlisted``: shell patterns of
    the interfaces the NIC list leaves out (preflight_nic_exclude: bridges, tunnels, container links), which NCCL
    scans all the same: a value that may name one of them is not judged on the list (a management bridge br-ex,
    review round 24). An NCCL_IB_HCA entry with a port excludes that port only: the device's other ports stay."""
    found = []
    value = env.get("NCCL_SOCKET_IFNAME")
    family = env.get("NCCL_SOCKET_FAMILY")
    reading = socket_ifname(value) if isinstance(value, str) else None
    hidden = reading is not None and any(_may_name(name, reading.exact, pattern)
                                         for name in reading.names for pattern in unlisted)  # fmt: skip
    if interfaces and isinstance(value, str) and reading is not None and not hidden:
        if first_socket_interface(value, interfaces, str(family) if family is not None else None) is None:
            found.append(f"NCCL_SOCKET_IFNAME={value!r} matches none of the node's interfaces "
                         f"({', '.join(interfaces)}), so NCCL's bootstrap would find no socket interface; allowed: a "
                         f"value that names one of them, e.g. '{interfaces[0]}'")  # fmt: skip
    hca = env.get("NCCL_IB_HCA")
    if rdma_devices and isinstance(hca, str):
        try:
            exclude, exact, entries = parse_ib_hca(hca)
        except ValueError:
            return found  # its grammar is problems()' to name
        # An excluding entry with a port takes that port only: the device stays (its other ports).
        names = [name for name, port in entries if not (exclude and port is not None)]
        if entries and not [device for device in rdma_devices if list_matches(device, names, exact) != exclude]:
            found.append(f"NCCL_IB_HCA={hca!r} keeps none of the node's RDMA devices ({', '.join(rdma_devices)}), "
                         "so NCCL would have no IB device; allowed: a value that names one of them")  # fmt: skip
    return found


def socket_ifname_problems(value: str, family: str | None = None) -> list[str]:
    """NCCL_SOCKET_IFNAME's grammar (NCCL docs), as NCCL_IB_HCA's without ports: optional '^' (exclude), optional
    '=' (exact names), then a comma-separated list of interface names or prefixes, 16 at most. An entry that is no
    interface name (a blank inside, an empty one NCCL would drop, one longer than a Linux interface name), a value
    NCCL ignores or reads otherwise than it is written, and a value that accepts lo (which comes first, so NCCL
    bootstraps every node over 127.0.0.1, unless ``family``, NCCL_SOCKET_FAMILY, is AF_INET6) all leave NCCL
    without the interface meant: it stops with "no socket interface found" or bootstraps over another. An empty
    value means "not set"."""
    if value != value.strip():
        return [_BLANKS.format(name="NCCL_SOCKET_IFNAME", value=value)]
    if not value:
        return []
    reading = socket_ifname(value)
    if reading is None:
        return [f"NCCL_SOCKET_IFNAME={value!r}: NCCL ignores a value of one character (it reads two or more) and "
                f"picks an interface itself; {_IFNAME_ALLOWED}"]
    items = list_flags(value)[2].split(",")
    if len(items) > SOCKET_IFNAME_MAX_NAMES:
        return [f"NCCL_SOCKET_IFNAME={value!r} lists {len(items)} names, and NCCL reads the first "
                f"{SOCKET_IFNAME_MAX_NAMES} (src/include/socket.h, MAX_IFS): {items[SOCKET_IFNAME_MAX_NAMES]!r} and "
                f"after are dropped; {_IFNAME_ALLOWED}"]
    for item in items:
        if item[:1] in ("^", "="):
            return [f"NCCL_SOCKET_IFNAME={value!r}: {item!r} begins with {item[0]!r}, which NCCL reads as part of "
                    f"the name: '^' and '=' count only at the start of the value, '^' first; {_IFNAME_ALLOWED}"]
        if ":" in item:
            name = item.partition(":")[0]
            read = f"as {name!r} followed by a port number" if name else "as a port without a name, and drops it"
            return [f"NCCL_SOCKET_IFNAME={value!r}: NCCL reads {item!r} {read}, and interfaces have no port (an "
                    f"address label such as eth0:1 is matched by its interface's name); {_IFNAME_ALLOWED}"]
        if not _IFNAME_ENTRY.match(item):
            return [f"NCCL_SOCKET_IFNAME={value!r}: {item!r} is not an interface name ({_IFNAME_ALLOWED})"]
    # NCCL takes the interfaces in the kernel's order, lo first (its index is 1), whatever the list's order.
    if family == IPV6_ONLY and not reading.exclude and set(reading.names) == {"lo"}:
        return [f"NCCL_SOCKET_IFNAME={value!r} names only lo, which NCCL skips under NCCL_SOCKET_FAMILY=AF_INET6 (its "
                "one IPv6 address is ::1), so it finds no socket interface; allowed: the interface the nodes reach "
                "each other over (e.g. eth0)"]
    if reading.accepts("lo") and family != IPV6_ONLY:
        how = "excludes names but not lo" if reading.exclude else "lets NCCL take lo"
        fix = f"lo among the exclusions ({value},lo)" if reading.exclude else "the interface without lo (e.g. eth0)"
        return [f"NCCL_SOCKET_IFNAME={value!r} {how}: NCCL takes the first interface the value accepts in the "
                f"kernel's order, and lo (127.0.0.1) comes first, so the nodes could not reach each other; "
                f"allowed: {fix}"]
    return []


def unknown_names(env: Mapping[str, object], known: frozenset[str] | None = None) -> list[str]:
    """NCCL_* names this NCCL release does not read: usually a typo (NCCL_IB_HCAS, NCCL_SOCKET_IFNAMES)."""
    names = known if known is not None else known_nccl_names()
    return sorted(k for k in env if str(k).startswith("NCCL_") and k not in names)


def topology_settings(enabled: object, topology: object) -> tuple[dict[str, str], str]:
    """nccl_env_ib_hca_from_topology's settings and, when they cannot be had, why: NCCL_IB_HCA naming exactly the
    RDMA devices nearest the node's GPUs, in GPU order (the rail map preflight publishes as rdmaforge_topology), so
    an HCA no GPU is near (storage, a front-end bond: seed 001 says never to give those to NCCL) is left out.
    ({}, "") when not enabled; ({}, reason) on a node without a rail map."""
    if not boolean(enabled, strict=False):  # Ansible's own reading, as the role's `| bool`
        return {}, ""
    rails = topology if isinstance(topology, Mapping) else {}
    order = str(rails.get("nccl_ib_hca") or "")
    if not order:
        why = str(rails.get("reason") or "") or "no rail map is known (rdmaforge_topology unset: run preflight first)"
        return {}, f"nccl_env_ib_hca_from_topology is true, but this node has no GPU-to-NIC rail map: {why}"
    return {"NCCL_IB_HCA": "=" + order}, ""


#: A value that stands for the node's GPU count, the ranks one node runs (one per GPU: mpi_launch's hostfile slots,
#: the MPIJob's slotsPerWorker). nccl_env_accelerators' taco sets LightCC's LIGHT_INTRA_SIZE to it: the ranks of one
#: node, the inner level of LightCC's 2D allreduce. Seed 004 passes LIGHT_INTRA_SIZE=8 with 8 ranks on each of its
#: 8-GPU nodes (mpirun -np 32 -H taco-bench-worker-0:8,...,taco-bench-worker-3:8); a 4-GPU node runs 4.
NODE_GPU_COUNT = "node_gpu_count"


def with_gpu_count(env: Mapping[str, object], gpus: object) -> dict[str, str]:
    """``env`` with each value NODE_GPU_COUNT replaced by the node's GPU count (preflight's rdmaforge_node.gpu_count,
    or workload_manifests_gpus_per_node in rendered manifests). Applied to the merged settings, so a value set in
    nccl_env_overrides wins. With no count of 1 or more the value stays NODE_GPU_COUNT, which problems() refuses."""
    known = isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1
    return {k: str(gpus) if known and v == NODE_GPU_COUNT else _as_str(v) for k, v in env.items()}


def merge(profile: Mapping[str, object], overrides: Mapping[str, object]) -> dict[str, str]:
    """Overrides win; an override of None removes the profile's setting. Values become strings."""
    merged: dict[str, object] = dict(profile)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return {k: _as_str(v) for k, v in sorted(merged.items())}


#: The start of a number as C's strtoll reads it with base 0 (hexadecimal 0x.., octal 0.., decimal), after
#: blanks and a sign; what follows is ignored, as strtoll ignores it.
_STRTOLL = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_INT64_MAX = 2**63 - 1
#: nccl_integer's answer for a number out of strtoll's range (no int64 is this).
_OUT_OF_RANGE = 2**64


def nccl_integer(value: object, default: int = 0) -> int:
    """An integer setting (NCCL_IB_DISABLE, ...) as NCCL reads it (src/misc/param.cc, ncclLoadParam): strtoll with
    base 0, so '0x10' is 16, '010' is 8 and '1abc' is 1; text with no leading number ('true', 'yes') is 0; empty,
    unset or out of range (strtoll's ERANGE) is the setting's default."""
    text = "" if value is None else _as_str(value)
    if not text:
        return default
    match = _STRTOLL.match(text)
    if match is None:
        return 0
    digits = match.group(2)
    number = int(digits, 16 if digits[:2].lower() == "0x" else 8 if len(digits) > 1 and digits[0] == "0" else 10)
    number = -number if match.group(1) == "-" else number
    return number if -_INT64_MAX - 1 <= number <= _INT64_MAX else default


@dataclass(frozen=True)
class Fallback:
    """A setting that sends an RDMA fabric's NCCL traffic over TCP sockets: why, and what else would do."""

    setting: str
    why: str
    allowed: str


def rdma_fallbacks(env: Mapping[str, object], net_plugin: object) -> list[Fallback]:
    """Settings that move an RDMA fabric's NCCL traffic onto TCP sockets without any error (src/net.cc): NCCL_NET
    naming a socket network, or NCCL_IB_DISABLE nonzero when no external net plugin carries RDMA
    (``net_plugin`` none: NCCL's own networks are then IB and Socket, and IB is off). With a plugin (aiacc, harp)
    NCCL_IB_DISABLE turns off only NCCL's internal IB transport, not the plugin's network."""
    found = []
    net = env.get("NCCL_NET")
    if net is not None and "socket" in _as_str(net).lower():  # NCCL compares names with strcasecmp
        found.append(Fallback(
            "NCCL_NET", f"NCCL_NET={show(net)} makes NCCL use a TCP socket network on an RDMA fabric",
            "NCCL_NET unset, or the name of an RDMA network (IB, or the net plugin's)",
        ))  # fmt: skip
    disabled = env.get("NCCL_IB_DISABLE")
    if str(net_plugin) == "none" and nccl_integer(disabled) != 0:
        found.append(Fallback(
            "NCCL_IB_DISABLE",
            f"NCCL_IB_DISABLE={show(disabled)} turns off NCCL's IB (verbs) transport, and with no net plugin to carry "
            "RDMA NCCL would use TCP sockets on an RDMA fabric",
            "NCCL_IB_DISABLE unset or 0",
        ))  # fmt: skip
    return found


def split(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(settings NCCL reads from /etc/nccl.conf, everything else for the login environment)."""
    nccl = {k: v for k, v in env.items() if k.startswith("NCCL_")}
    other = {k: v for k, v in env.items() if not k.startswith("NCCL_")}
    return nccl, other


def render_conf(env: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in sorted(env.items()))


def parse_conf(text: str) -> dict[str, str]:
    """Read nccl.conf the way NCCL's setEnvFile (src/misc/param.cc) does: a line is split at its first '=' and kept
    as it is (blanks and a CR of a CRLF file stay in the name and value: only the newline goes), a line without '='
    is skipped, and the first line of a name wins (NCCL calls setenv without overwriting). NCCL 2.16 sets a line
    that starts with '#' as a variable of that name, which no NCCL setting has: skipped here, as later NCCLs do."""
    result: dict[str, str] = {}
    for line in text.split("\n"):
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        result.setdefault(key, value)
    return result


def _as_str(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def plugin_api_versions(nm_output: str) -> list[int]:
    """NCCL net plugin API versions a library exports, from `nm -D --defined-only` (symbols ncclNetPlugin_vN). A
    library built with a version script prints them as ncclNetPlugin_v8@@VERSION, the default version, which is
    what NCCL's dlsym finds; a hidden version (one @) is not."""
    versions = set()
    for line in nm_output.splitlines():
        match = re.search(r"\sncclNetPlugin_v([0-9]+)(?:@@[^\s@]+)?$", line.strip())
        if match:
            versions.add(int(match.group(1)))
    return sorted(versions)
