"""`rdmaforge doctor`: one row per node from the files playbooks/doctor.yml writes, each node judged against what
its inventory implies, and the skew between nodes.

First check: every node against its own expectations (rdmaforge.doctor_checks): memlock of a non-interactive
login, the RDMA devices and ACTIVE ports its fabric needs, GPU count, huge pages reserved and configured, ENI
MTUs, the NCCL build, the net plugin, the clock. Nodes that are all wrong in the same way are not healthy.

Second check: the skew across nodes. For each column the value most nodes have is taken as the expected one and
the nodes that differ are flagged; when no value has a majority every node of that column is flagged, since
there is no telling which one is right. "healthy" is printed only when nothing is a problem. Pure functions:
the command reads the files and prints what they return.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from rdmaforge import doctor_checks
from rdmaforge.doctor_checks import Check, CheckStatus
from rdmaforge.parsers.rdma_devinfo import active_port_rates
from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.recap import render_table
from rdmaforge.terminal import escaped
from rdmaforge.text import fixed, named_first

#: Columns of the table, in order, with their headers.
COLUMNS = {
    "rdma": "RDMA devices",
    "ports": "ports",
    "rates": "port rates (Gb/s)",
    "mtu": "MTU",
    "memlock": "memlock",
    "hugepages": "hugepages",
    "gpus": "GPUs",
    "enis": "ENIs",
    "nccl": "NCCL",
    "plugin": "plugin",
    "clock": "clock",
}
#: Columns where the nodes must agree (the clock is judged against a limit instead: it always differs a little).
#: Ports are judged one by one (every port must be active), so they are not compared as a column; their rates are:
#: a node whose every rail trained down agrees with itself, not with its peers.
SKEW_COLUMNS = ("rdma", "rates", "mtu", "memlock", "hugepages", "gpus", "enis", "nccl", "plugin")
DEFAULT_MAX_CLOCK_OFFSET = 1.0  # seconds; the measurement includes one SSH hop of latency


@dataclass(frozen=True)
class Finding:
    host: str
    column: str
    value: str
    expected: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Diagnosis:
    rows: dict[str, dict[str, str]]
    findings: list[Finding] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    #: Every check of every node that answered, against its inventory (doctor_checks).
    checks: list[Check] = field(default_factory=list)
    #: Nodes the run covered whose result doctor could not read, and why: nothing was judged there.
    not_judged: dict[str, str] = field(default_factory=dict)

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if c.status == "problem"]

    @property
    def unmeasured(self) -> list[Check]:
        """Checks the inventory expects something of whose value the node did not give (no GPU count, no clock):
        not judged, so the node is not proven healthy."""
        return [c for c in self.checks if c.status == "not_checked" and c.expected is not None]

    @property
    def exit_code(self) -> ExitCode:
        if self.unreachable:
            return ExitCode.UNREACHABLE
        if any(f.column == "check" for f in self.findings):
            return ExitCode.HOST_FAILED  # doctor could not read a node: nothing was judged there
        # A problem measured on a node that was judged outranks a node without a result (review round 21b: a script
        # that reruns on 5 "inconclusive" hid a memlock of 64 KiB); pairwise ranks its suspects alike (7 over 5).
        if self.findings or self.problems:
            return ExitCode.UNHEALTHY
        if self.not_judged or not self.rows:
            return ExitCode.INCOMPLETE  # a node without a result, or no node at all: nothing proves it healthy
        return ExitCode.INCOMPLETE if self.unmeasured else ExitCode.OK

    def flagged(self, host: str, column: str) -> bool:
        return any(f.host == host and f.column == column for f in self.findings)

    def columns_of(self, host: str) -> list[str]:
        """The columns a finding names for ``host``."""
        return [f.column for f in self.findings if f.host == host]

    def status(self, host: str, column: str) -> CheckStatus | None:
        """The worst status of the checks shown in a column: problem, then accepted."""
        statuses = {c.status for c in self.checks if c.host == host and CHECK_COLUMN.get(c.check) == column}
        for status in ("problem", "accepted"):
            if status in statuses:
                return status
        return None

    def per_node(self) -> dict[str, dict[str, Any]]:
        """`rdmaforge doctor --json`: each node's checks and skew findings, and its own verdict."""
        nodes: dict[str, dict[str, Any]] = {}
        unmeasured_hosts = {c.host for c in self.unmeasured}  # once: a fleet has thousands of checks
        for host in self.rows:
            checks = [c for c in self.checks if c.host == host]
            skew = [f.to_dict() for f in self.findings if f.host == host]
            bad = any(c.status == "problem" for c in checks) or bool(skew)
            status = "problem" if bad else "not_judged" if host in unmeasured_hosts else "ok"
            nodes[host] = {"status": status, "row": self.rows[host],
                           "checks": {c.check: {k: v for k, v in c.to_dict().items() if k not in ("host", "check")}
                                      for c in checks},
                           "findings": skew}  # fmt: skip
        for host in self.unreachable:
            nodes[host] = {"status": "unreachable", "row": None, "checks": {}, "findings": []}
        for host, reason in self.not_judged.items():
            nodes[host] = {"status": "not_judged", "reason": reason, "row": None, "checks": {}, "findings": []}
        return nodes


#: The table column each check marks.
CHECK_COLUMN = {"rdma": "rdma", "port_rate": "rdma", "memlock": "memlock", "mtu": "mtu", "hugepages": "hugepages",
                "hugepages_boot": "hugepages", "gpus": "gpus", "nccl": "nccl", "plugin": "plugin",
                "plugin_host": "plugin", "clock": "clock"}  # fmt: skip
#: Table width limit: the table fits a 120-column terminal or CI log.
TABLE_WIDTH = 120
#: The printed table's columns (the RDMA cell also shows the ports, and is marked when their rates are off; the JSON
#: and recap keep every full value, the rates included).
TABLE = {"rdma": "RDMA", "mtu": "MTU", "memlock": "memlock", "hugepages": "pages", "gpus": "GPUs", "enis": "ENIs",
         "nccl": "NCCL", "plugin": "plugin", "clock": "clock"}  # fmt: skip


# --- one node ---------------------------------------------------------------------------------------------


def clock_offset(lines: Sequence[str]) -> float | None:
    """Node time minus controller time from the two numbers doctor.yml's clock task prints; None when there are not
    two, or the difference is no finite number (a "nan" passes every limit: no comparison with it is true)."""
    numbers = []
    for line in lines:
        try:
            numbers.append(float(str(line).strip()))
        except ValueError:
            continue  # sudo or a login banner may add lines
    offset = numbers[-1] - numbers[-2] if len(numbers) >= 2 else None
    return offset if offset is not None and math.isfinite(offset) else None


def gpu_count(node: Mapping[str, Any]) -> int | None:
    """GPUs as preflight counts them (doctor_checks.gpu_reading); None when nothing answered (not 0 GPUs)."""
    return doctor_checks.gpu_reading(node)[0]


def port_states(node: Mapping[str, Any]) -> tuple[str, list[str]]:
    """("2/2 active", []) or ("1/2 active", ["mlx5_1:1 PORT_DOWN (DISABLED)"]); ("-", []) without devices."""
    total, inactive = 0, []
    for device in node.get("rdma_devices") or []:
        for port in device.get("ports") or []:
            total += 1
            if port.get("state") != "PORT_ACTIVE":
                physical = f" ({port['physical_state']})" if port.get("physical_state") else ""
                inactive.append(f"{device.get('name')}:{port.get('port')} {port.get('state')}{physical}")
    if total == 0:
        return "-", []
    return f"{total - len(inactive)}/{total} active", inactive


def port_rates(node: Mapping[str, Any]) -> str:
    """The active ports' link rates in Gb/s, each once ("200", "100,200"); "-" when none is known."""
    rates = {rate for _, rate in active_port_rates(node.get("rdma_devices")) if rate is not None}
    return ",".join(f"{rate:g}" for rate in sorted(rates)) or "-"


def mtu_summary(node: Mapping[str, Any]) -> str:
    """One number when every NIC has it, else name=mtu for each NIC."""
    nics = sorted(node.get("nics") or [], key=lambda n: str(n.get("name")))
    values = {n.get("mtu") for n in nics}
    if not nics:
        return "-"
    if len(values) == 1:
        return str(values.pop())
    return " ".join(f"{n.get('name')}={n.get('mtu')}" for n in nics)


def page_size(kb: int) -> str:
    for unit, size in (("G", 1024**2), ("M", 1024)):
        if kb % size == 0:
            return f"{kb // size}{unit}"
    return f"{kb}k"


def hugepages_summary(node: Mapping[str, Any]) -> str:
    """Reserved pools, e.g. "50x1G", or "0" when none is reserved."""
    pools = (node.get("hugepages") or {}).get("by_size") or {}
    reserved = []
    sized = [(kb, pool) for kb, pool in pools.items() if str(kb).isdigit()]  # the kernel names them in kB
    for kb, pool in sorted(sized, key=lambda item: int(item[0])):
        pages = int(pool.get("nr") or 0)
        if pages > 0:
            reserved.append(f"{pages}x{page_size(int(kb))}")
    return " ".join(reserved) or "0"


def nccl_summary(node: Mapping[str, Any]) -> str:
    """The installed build's id (version, CUDA, archs, function set), else the library's version, else none."""
    manifest, damaged = doctor_checks.build_manifest(node)
    if damaged:
        return "damaged"
    if manifest.get("id"):
        return str(manifest["id"]).removeprefix("nccl-")
    if manifest.get("version"):
        return str(manifest["version"])
    versions = [name.removeprefix("libnccl.so.") for name in node.get("nccl_libs") or [] if name.count(".") >= 4]
    return max(versions, key=len) if versions else "none"


#: A table cell whose value the node did not give (memlock, GPUs, clock): never a value skew compares.
NOT_READ = doctor_checks.NOT_READ

_AIACC_DIR = re.compile(r"/aiacc-(\d[^/]*)/")


def plugin_summary(node: Mapping[str, Any]) -> str:
    if not node.get("plugin_present"):
        return "none"
    target = node.get("plugin_target")
    # nccl_plugin unpacks AIACC's library under <prefix>/aiacc-<version>/ (nccl_plugin_aiacc_dir).
    aiacc = _AIACC_DIR.search(str(target or ""))
    if aiacc:
        return f"aiacc {aiacc.group(1)}"
    return f"-> {target}" if target else "present"


def eni_count(node: Mapping[str, Any]) -> str:
    """The node's secondary NICs, by the eni role's rule (doctor_checks.eni_names): not the NIC of the default route,
    which every node has and no GPU gets; those eni_interfaces names are counted only where the node has them."""
    if node.get("nics_error"):
        return NOT_READ
    present = {str(n.get("name")) for n in node.get("nics") or []}
    return str(len([name for name in doctor_checks.eni_names(node) if name in present]))


def node_row(node: Mapping[str, Any]) -> dict[str, str]:
    """The table row of one node, every value a string (what is compared across nodes)."""
    devices = [str(d.get("name")) for d in node.get("rdma_devices") or []]
    ports, _ = port_states(node)
    offset = clock_offset(node.get("clock") or [])
    memlock = node.get("memlock")
    gpus = gpu_count(node)
    return {
        "rdma": ",".join(devices) if devices else "none",
        "ports": ports,
        "rates": port_rates(node),
        "mtu": mtu_summary(node),
        "memlock": str(memlock).strip() if memlock is not None else NOT_READ,
        "hugepages": hugepages_summary(node),
        "gpus": NOT_READ if gpus is None else str(gpus),
        "enis": eni_count(node),
        "nccl": nccl_summary(node),
        "plugin": plugin_summary(node),
        "clock": f"{fixed(offset, 3, signed=True)}s" if offset is not None else NOT_READ,
    }


# --- across nodes -----------------------------------------------------------------------------------------


def majority(values: Iterable[str]) -> str | None:
    """The value more nodes have than any other; None on a tie."""
    ranked = Counter(values).most_common()
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


#: A cell that holds no reading: not read ("?"), or nothing of its kind reported ("-": no port rate known, no NIC).
NO_READING = (NOT_READ, "-")


def find_skew(rows: Mapping[str, Mapping[str, str]], columns: Sequence[str] = SKEW_COLUMNS) -> list[Finding]:
    """Nodes whose value differs from the majority's, column by column. A cell with no reading ("?", "-": no rate
    reported) is no value: it never makes the majority (two unread GPU counts outvoted the node that counted 8; two
    nodes with no rate outvoted the one that measured 200, review round 41a) and is no skew itself (its node's check
    says it was not read)."""
    findings = []
    for column in columns:
        values = {host: row[column] for host, row in rows.items() if column in row and row[column] not in NO_READING}
        if len(set(values.values())) <= 1:
            continue
        expected = majority(values.values())
        for host, value in values.items():
            if value != expected:
                findings.append(Finding(host, column, value, expected, skew_reason(column, value, expected, values)))
    return findings


def skew_reason(column: str, value: str, expected: str | None, values: Mapping[str, str]) -> str:
    if expected is None:
        spread = "; ".join(
            f"{v!r} on {', '.join(h for h in values if values[h] == v)}" for v in dict.fromkeys(values.values())
        )
        return f"{COLUMNS[column]} differs across nodes with no majority: {spread}"
    agree = sum(1 for v in values.values() if v == expected)
    return f"{COLUMNS[column]} is {value!r} where {agree} of {len(values)} nodes have {expected!r}"


def port_findings(host: str, node: Mapping[str, Any], row: Mapping[str, str]) -> list[Finding]:
    """Inactive RDMA ports on a node whose fabric does not use RDMA (on RDMA fabrics the rdma check judges them)."""
    if doctor_checks.fabric_of(node) in doctor_checks.RDMA_FABRICS:
        return []
    _, inactive = port_states(node)
    return [Finding(host, "ports", row["ports"], None, f"RDMA port not active: {port}") for port in inactive]


def clock_check(node: Mapping[str, Any], row: Mapping[str, str], max_offset: float) -> Any:
    """The clock check's judge; ValueError for a limit that is no finite number of seconds, 0 or more: against nan
    every offset would pass (no comparison with nan is true)."""
    if not (isinstance(max_offset, int | float) and math.isfinite(max_offset) and max_offset >= 0):
        raise ValueError(f"the clock offset limit must be a finite number of seconds, 0 or more, got {max_offset!r}")

    def judge() -> tuple[CheckStatus, str, str | None, str]:
        offset = clock_offset(node.get("clock") or [])
        if offset is None:
            return "not_checked", NOT_READ, f"within {max_offset}s", "the node's clock could not be read"
        bound = f"within {max_offset}s"
        if abs(offset) > max_offset:
            return "problem", row["clock"], bound, f"clock is {row['clock']} off the controller's (limit {max_offset}s)"
        return "ok", row["clock"], bound, f"clock {row['clock']} off the controller's"

    return judge


def diagnose(
    nodes: Mapping[str, Mapping[str, Any]],
    unreachable: Iterable[str] = (),
    failed: Mapping[str, str] | None = None,
    max_clock_offset: float = DEFAULT_MAX_CLOCK_OFFSET,
    not_judged: Mapping[str, str] | None = None,
) -> Diagnosis:
    """Rows, every node's checks against its inventory, and skew across nodes; ``failed`` maps a host to a failed
    doctor task, ``not_judged`` a host the run covered to why its result could not be read (no file, not JSON)."""
    rows = {host: node_row(node) for host, node in nodes.items()}
    findings: list[Finding] = []
    checks: list[Check] = []
    for host, node in nodes.items():
        findings += port_findings(host, node, rows[host])
        checks += doctor_checks.judge_node(host, node, rows[host], gpu_count(node),
                                           clock_check(node, rows[host], max_clock_offset))  # fmt: skip
        for name in doctor_checks.unknown_acceptances(node):
            findings.append(Finding(host, "accept", name, None, f"doctor_accept names {name!r}, which is not a check; "
                                    f"allowed: {', '.join(doctor_checks.CHECKS)}"))  # fmt: skip
    checks = peerless(checks, rows)
    findings += find_skew(rows)
    for host, message in (failed or {}).items():
        findings.append(Finding(host, "check", "failed", None, f"a doctor check failed: {message}"))
    hosts = list(rows)
    findings.sort(key=lambda f: (_position(hosts, f.host), _position(list(COLUMNS), f.column)))
    return Diagnosis(rows, findings, sorted(set(unreachable)), checks, dict(not_judged or {}))


def _position(items: list[str], item: str) -> int:
    return items.index(item) if item in items else len(items)


MARKS = {"problem": " !", "accepted": " *"}


def cell(diagnosis: Diagnosis, host: str, column: str, row: Mapping[str, str]) -> str:
    value = display(column, row[column])
    if column == "rdma" and row.get("ports", "-") != "-":
        value += " " + row["ports"].removesuffix(" active")
    if diagnosis.flagged(host, column) or (column == "rdma" and {"ports", "rates"} & set(diagnosis.columns_of(host))):
        return value + " !"
    return value + MARKS.get(diagnosis.status(host, column) or "", "")


def agreement(rows: Mapping[str, Mapping[str, str]]) -> tuple[list[str], dict[str, str]]:
    """The skew columns the healthy line may say the nodes agree on (ports are judged per node, the clock against a
    limit): those every node has a reading in, and at least two nodes. The others were not compared, and are
    returned with why: the nodes with no reading ("?", "-"; review round 21b: "agree on port rates" where no node had
    one), or no other node (review round 41a: one node "agreed on GPUs" with none)."""
    agreed, not_compared = [], {}
    for column in SKEW_COLUMNS:
        unread = [host for host, row in rows.items() if row.get(column, NOT_READ) in NO_READING]
        if unread:
            not_compared[COLUMNS[column]] = f"no reading on {named_first(unread, 5)}"
        elif len(rows) < 2:
            not_compared[COLUMNS[column]] = "no other node to compare with"
        else:
            agreed.append(COLUMNS[column])
    return agreed, not_compared


def listed(words: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def peerless(checks: Sequence[Check], rows: Mapping[str, Mapping[str, str]]) -> list[Check]:
    """``checks``, where one whose only expectation is the other nodes' value (a GPU count the inventory does not
    set, a node's one port rate without rdma_core_min_port_rate_gbps) is held to that, as unmeasured, when no other
    node has a reading to compare with: nothing judged it (review round 41a: `--limit node1` with 7 GPUs was healthy,
    exit 0). Where another node has one, the skew check judges it."""
    held = {"gpus": ("gpus", doctor_checks.OTHER_NODES_COUNT), "port_rate": ("rates", doctor_checks.OTHER_NODES_RATES)}
    read = {column: [host for host, row in rows.items() if row.get(column, NOT_READ) not in NO_READING]
            for column, _ in held.values()}  # fmt: skip
    result = []
    for check in checks:
        column, expected = held.get(check.check, ("", ""))
        # Not checked for want of an expectation, with a reading of its own, and the only reading of its column.
        if column and check.status == "not_checked" and check.expected is None and read[column] == [check.host]:
            check = replace(check, expected=expected,
                            reason=f"{check.reason}; no other node has a reading to compare with")  # fmt: skip
        result.append(check)
    return result


def unjudged_parts(checks: Sequence[Check]) -> dict[str, list[str]]:
    """What ok checks left unjudged (Check.not_judged), each with the nodes, in the nodes' order."""
    parts: dict[str, list[str]] = {}
    for check in checks:
        if check.status == "ok" and check.not_judged and check.host not in parts.get(check.not_judged, []):
            parts.setdefault(check.not_judged, []).append(check.host)
    return parts


def render(diagnosis: Diagnosis) -> str:
    """The table (" !" a problem, " *" an accepted deviation), then each node's checks that are not ok, the skew
    findings, and the verdict line."""
    header = ["node", *TABLE.values()]
    table = [[one_line(host), *(one_line(cell(diagnosis, host, c, row)) for c in TABLE)]
             for host, row in diagnosis.rows.items()]  # fmt: skip
    table += [[host, "UNREACHABLE", *("-" for _ in list(TABLE)[1:])] for host in diagnosis.unreachable]
    lines = [render_table(table, header) if table else "no node answered", "! problem   * accepted deviation", ""]
    # Each line one line: a node's value with a line break in it (a plugin path, a manifest id) printed a line of
    # its own, which could read as a verdict (review round 21b).
    lines += [one_line(f"  {host}: unreachable") for host in diagnosis.unreachable]
    lines += [one_line(f"  {host}: not judged: {reason}") for host, reason in diagnosis.not_judged.items()]
    for status in ("problem", "accepted", "not_checked"):
        for check in (c for c in diagnosis.checks if c.status == status):
            expected = f" (expected {check.expected})" if check.expected else ""
            label = status.replace("_", " ")
            lines.append(one_line(f"  {check.host}: {check.check} {label}: {check.actual}{expected}: {check.reason}"))
    # An ok check a part of which the inventory left unjudged (a DOWN rail with rdma_require_active_ports false).
    lines += [one_line(f"  {c.host}: {c.check} ok, in part not judged: {c.reason}") for c in diagnosis.checks
              if c.status == "ok" and doctor_checks.PARTLY_NOT_JUDGED in c.reason]  # fmt: skip
    lines += [one_line(f"  {f.host}: {f.reason}") for f in diagnosis.findings]
    partly = unjudged_parts(diagnosis.checks)
    lines += [f"  not judged on {len(hosts)} node(s) ({', '.join(hosts)}): {what}" for what, hosts in partly.items()]
    counts = doctor_checks.summarize(diagnosis.checks)
    tally = f"{counts['ok']} ok, {counts['accepted']} accepted, {counts['not_checked']} not checked"
    skew = len([f for f in diagnosis.findings if f.column not in ("check", "accept")])
    found = f"{counts['problem']} problem(s) against the inventory, {skew} skew finding(s)"
    missing = diagnosis.not_judged
    if diagnosis.exit_code == ExitCode.OK:
        unjudged = f"; not judged: {'; '.join(partly)}" if partly else ""
        agreed, not_compared = agreement(diagnosis.rows)
        why: dict[str, list[str]] = {}
        for column, reason in not_compared.items():
            why.setdefault(reason, []).append(column)
        unread = "".join(f"; {listed(columns)} not compared: {reason}" for reason, columns in why.items())
        agree = f" and agree on {listed(agreed)}" if agreed else ""
        lines.append(f"\nhealthy: {len(diagnosis.rows)} node(s) meet their inventory's expectations{agree} "
                     f"({tally}){unjudged}{unread}")  # fmt: skip
    elif diagnosis.exit_code == ExitCode.INCOMPLETE and not missing and diagnosis.rows:
        unread = ", ".join(f"{c.host} {c.check}" for c in diagnosis.unmeasured)
        # "or compared": a value held only to the other nodes' (a GPU count with none in the inventory) was read,
        # and had no other node's reading to be compared with.
        lines.append(f"\nnot judged: {len(diagnosis.unmeasured)} check(s) could not be measured, or compared with "
                     f"another node ({unread}); nothing else is a problem ({tally})")  # fmt: skip
    elif diagnosis.exit_code == ExitCode.INCOMPLETE and not missing:
        lines.append("\nnot judged: doctor read no node's result, so no node is judged healthy")
    elif diagnosis.exit_code == ExitCode.INCOMPLETE:
        lines.append(f"\nnot judged: {len(missing)} node(s) without a result ({', '.join(missing)}); on the "
                     f"{len(diagnosis.rows)} judged: {found} ({tally})")  # fmt: skip
    else:
        failed = len([f for f in diagnosis.findings if f.column == "check"])
        unknown = len([f for f in diagnosis.findings if f.column == "accept"])
        more = (f", {failed} doctor task(s) failed" if failed else "") + (
            f", {unknown} doctor_accept entr{'y' if unknown == 1 else 'ies'} naming no check" if unknown else "")
        lines.append(f"\nnot healthy: {found}{more}, {len(diagnosis.unreachable)} unreachable, {len(missing)} not "
                     f"judged ({tally})")  # fmt: skip
    return "\n".join(lines)


def one_line(text: str) -> str:
    return escaped(text, one_line=True)


def display(column: str, value: str) -> str:
    """A table cell short enough for 120 columns: versions, not paths (the JSON keeps the full values)."""
    if column == "nccl":
        parts = value.split("-")
        if len(parts) >= 2 and parts[1].startswith("cuda"):
            return f"{parts[0]} cu{parts[1].removeprefix('cuda')}"
        return value
    if column == "plugin" and value.startswith("-> "):
        return value.rsplit("/", 1)[-1]
    if column == "rdma" and value != "none":
        families = Counter(name.rstrip("0123456789").rstrip("_") or name for name in value.split(","))
        return " ".join(f"{family} x{count}" for family, count in families.items())
    if column == "mtu" and "=" in value:
        nics = dict(item.rsplit("=", 1) for item in value.split())  # the MTU after the last '=' (a=b is a name)
        common = Counter(nics.values()).most_common(1)[0][0]
        return " ".join([common, *(f"{name}={mtu}" for name, mtu in nics.items() if mtu != common)])
    return value
