"""Checks that an inventory describes a cluster rdmaforge can build, as plain functions.

This module is the one implementation of these rules. The preflight role calls it through
``filter_plugins/rdmaforge_inventory.py``; the CLI and the tests import it directly. It has no
Ansible imports, so it only sees plain values: strings, numbers, lists and mappings.

Every problem is reported as one line that a person can act on without reading code::

    node2: rdmaforge_fabric='ethernet' is not a known fabric profile; allowed: erdma, infiniband, ...

that is: the host, the variable, the bad value, and what is allowed.
"""

from __future__ import annotations

import difflib
import functools
import ipaddress
import json
import re
import shlex
import socket
import string
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaforge import batch_size, fabrics, fast_yaml, nccl_build, paths, role_defaults, tuning
from rdmaforge.bench.verdict import (
    THRESHOLDS,
    TOLERANCE,
    TOLERANCE_ALLOWED,
    threshold_allowed,
    threshold_problem,
    tolerance_problem,
)
from rdmaforge.hostnames import short_name
from rdmaforge.nccl_tests.sizes import size_bytes
from rdmaforge.parsers import nccl_env
from rdmaforge.plain_data import ansible_bool, plain, show, spec_bool, whole_number
from rdmaforge.stored import MAX_GPUS

#: Fabric profiles, one per way the seeds connect GPUs across nodes (defined in rdmaforge.fabrics).
FABRICS: tuple[str, ...] = fabrics.NAMES

#: An option's type in an argument spec -> how a message names what is allowed.
_TYPE_WORDS: dict[str, str] = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "path": "a path",
    "list": "a list",
    "dict": "a mapping",
    "raw": "any value",
    "bytes": "a size such as 10M",
    "bits": "a size such as 10Mb",
    "jsonarg": "a JSON string",
    "json": "a JSON string",
}

#: The same, for the elements of a list.
_ELEMENT_WORDS: dict[str, str] = {
    "bool": "booleans",
    "int": "integers",
    "float": "numbers",
    "str": "strings",
    "path": "paths",
    "dict": "mappings",
    "list": "lists",
    "raw": "values",
}

#: The longest a host name can be: a DNS name of 253 characters, in labels of 63 (RFC 1035).
MAX_HOSTNAME, MAX_LABEL = 253, 63
_LABEL = re.compile(rf"^[A-Za-z0-9](?:[A-Za-z0-9-]{{0,{MAX_LABEL - 2}}}[A-Za-z0-9])?$")
_HOSTNAME_RULE = (
    f"an RFC 1123 host name: dot-separated labels of 1-{MAX_LABEL} letters, digits or hyphens, "
    f"not starting or ending with a hyphen, {MAX_HOSTNAME} characters at most"
)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one host. ``message`` is the full line, starting with the host."""

    host: str
    variable: str
    message: str

    def __str__(self) -> str:
        return self.message


# --- rendering -------------------------------------------------------------------------------------


def _did_you_mean(value: object, choices: Sequence[str]) -> str:
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value.lower(), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _choices(option: Mapping[str, object]) -> list[object]:
    choices = option.get("choices")
    if isinstance(choices, Sequence) and not isinstance(choices, str):
        return list(choices)
    return []


def describe_option(option: Mapping[str, object]) -> str:
    """What an argument-spec option accepts, in words: its choices, or its type."""
    choices = _choices(option)
    if choices:
        return ", ".join(c if isinstance(c, str) else show(c) for c in choices)
    kind = str(option.get("type", "str"))
    words = _TYPE_WORDS.get(kind, f"a value of type {kind}")
    elements = option.get("elements")
    if kind == "list" and elements:
        words += f" of {_ELEMENT_WORDS.get(str(elements), str(elements) + ' values')}"
    return words


# --- names and addresses ---------------------------------------------------------------------------


def looks_like_ipv4(text: str) -> bool:
    """True for anything shaped like a dotted quad, valid or not (``300.1.2.3`` included)."""
    return bool(re.fullmatch(r"[0-9]+(?:\.[0-9]+){3}", text))


def is_ipv4(text: str) -> bool:
    """A valid dotted-quad IPv4 address (no leading zeros, no CIDR suffix)."""
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def is_hostname(text: str) -> bool:
    """RFC 1123 host name (a trailing dot, as in a fully qualified DNS name, is accepted)."""
    name = text[:-1] if text.endswith(".") else text
    if not name or len(name) > MAX_HOSTNAME:
        return False
    return all(_LABEL.match(label) for label in name.split("."))


def long_name_problems(host: str) -> list[Problem]:
    """A name longer than any host's, named shortened (the line stays readable). Checked before Ansible reads the
    inventory where that can be (rdmaforge render, the commands' arguments): Ansible's fact cache, a file named after
    the host, stops on a name this long with "File name too long" before any check of preflight runs."""
    # A range (node[001:999]) stands for names as long as its longer end.
    name = _HOST_RANGE.sub(lambda m: "x" * max(len(m["start"]), len(m["end"])), host.removesuffix("."))
    longest = max(len(label) for label in name.split("."))
    if len(name) <= MAX_HOSTNAME and longest <= MAX_LABEL:
        return []
    what = f"is {len(name)} characters long" if len(name) > MAX_HOSTNAME else f"has a label of {longest} characters"
    shown = host if len(host) <= 60 else f"{host[:40]}...{host[-10:]}"
    return [Problem(host, "inventory_hostname", f"{shown}: the host name {what}; allowed: at most {MAX_HOSTNAME} "
                                                f"characters, in dot-separated labels of at most {MAX_LABEL} (a DNS "
                                                "name)")]  # fmt: skip


#: Ansible's host ranges, numeric (``[01:50]``, ``[1:9:2]``) or alphabetic (``[a:f]``).
_HOST_RANGE = re.compile(r"\[(?P<start>[0-9]+|[a-zA-Z]):(?P<end>[0-9]+|[a-zA-Z])(?::[0-9]+)?\]")
#: An INI section header (``[gpu]``, ``[gpu:vars]``, ``[cluster:children]``), as Ansible's ini plugin matches it.
_INI_SECTION = re.compile(r"^\[(?P<group>[^:\]\s]+)(?::(?P<kind>\w+))?\]\s*(?:[#;].*)?$")
#: An INI host line's port (``node1:2222``); an IPv6 address keeps its colons.
_INI_PORT = re.compile(r"^(?P<host>.+):[0-9]+$")


def ini_inventory_hosts(text: str) -> list[str]:
    """The host names (range patterns unexpanded) of an INI inventory as Ansible's ini plugin reads it: the first
    word of each line outside ``[group:vars]`` and ``[group:children]`` sections, without a ``:port``."""
    found = [_ini_host_name(line.split(None, 1)[0]) for _, kind, line in _ini_lines(text) if kind == "hosts"]
    return list(dict.fromkeys(found))


def _ini_lines(text: str) -> Iterator[tuple[str, str, str]]:
    """``(group, kind, line)`` for each line of an INI inventory that is neither blank, a comment nor a section
    header: the section's group (``ungrouped`` before any) and kind (``hosts``, ``vars``, ``children``)."""
    group, kind = "ungrouped", "hosts"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        section = _INI_SECTION.match(line)
        if section is not None:
            group, kind = section["group"], section["kind"] or "hosts"
            continue
        yield group, kind, line


def _ini_host_name(first: str) -> str:
    """The host name (or range pattern) of an INI host line's first word, without its ``:port``."""
    port = _INI_PORT.match(first)
    has_port = port is not None and ":" not in _HOST_RANGE.sub("", port["host"])
    return port["host"] if port is not None and has_port else first


def ini_inventory_settings(text: str) -> list[tuple[str, str | None, str | None]]:
    """``(variable, group, host)`` for each variable an INI inventory sets, as Ansible's ini plugin reads it: a
    ``[group:vars]`` line's ``name=value`` for the group, a host line's ``name=value`` words for each host it names
    (a range expanded; one too large to expand stands for its group)."""
    found: list[tuple[str, str | None, str | None]] = []
    for group, kind, line in _ini_lines(text):
        if kind == "vars" and "=" in line:
            found.append((line.split("=", 1)[0].strip(), group, None))
        elif kind == "hosts":
            try:
                words = shlex.split(line, comments=True)
            except ValueError:  # an unbalanced quote: Ansible refuses the file; the words still name the variables
                words = line.split()
            names = [word.split("=", 1)[0] for word in words[1:] if "=" in word]
            if not names:
                continue
            hosts = expand_host_range(_ini_host_name(words[0]))
            found += [(name, None, host) for host in hosts for name in names] if hosts else [
                (name, group, None) for name in names]
    return found


#: The most names expand_host_range lists.
_MAX_EXPANDED = 100_000


def expand_host_range(pattern: str) -> list[str]:
    """The host names an inventory's range pattern stands for (``node[01:03]`` -> node01, node02, node03;
    ``[a:c]``; a step ``[1:9:2]``), as Ansible expands them; [] for more than _MAX_EXPANDED names."""
    match = _HOST_RANGE.search(pattern)
    if match is None:
        return [pattern]
    start, end = match["start"], match["end"]
    step_text = match.group(0)[1:-1].split(":")[2:]
    step = int(step_text[0]) if step_text and step_text[0] else 1
    if start.isdigit() != end.isdigit() or step < 1:
        return [pattern]  # Ansible refuses it: the name is checked as written
    if start.isdigit():
        width = len(start) if start.startswith("0") and len(start) > 1 else 0
        if (int(end) - int(start)) // step >= _MAX_EXPANDED:
            return []
        items = [str(number).zfill(width) for number in range(int(start), int(end) + 1, step)]
    else:
        letters = string.ascii_letters
        items = list(letters[letters.index(start):letters.index(end) + 1:step])
    head, rest = pattern[:match.start()], expand_host_range(pattern[match.end():])
    if not rest or len(items) * len(rest) > _MAX_EXPANDED:
        return []
    return [f"{head}{item}{name}" for item in items for name in rest]


def yaml_inventory_hosts(data: object) -> list[object]:
    """The host names of a YAML inventory (``group: {hosts: {name: vars}, children: {group: ...}}``) as YAML read
    them, keys that are no string included; none for a plugin's configuration. Each group mapping is walked once:
    YAML aliases can make the tree a graph, or a loop."""
    found: list[object] = []
    seen: set[int] = set()

    def walk(group: object) -> None:
        if not isinstance(group, Mapping) or id(group) in seen:
            return
        seen.add(id(group))
        hosts, children = group.get("hosts"), group.get("children")
        found.extend(hosts if isinstance(hosts, Mapping) else ())
        for child in children.values() if isinstance(children, Mapping) else ():
            walk(child)

    if isinstance(data, Mapping) and "plugin" not in data:
        for group in data.values():
            walk(group)
    return list(dict.fromkeys(found))  # a host in several groups, once


def node_name_problems(host: str) -> list[Problem]:
    """The inventory name must be a host name: it goes into /etc/hosts, hostfiles and NCCL logs."""
    if looks_like_ipv4(host) or is_ipv6(host):
        return [
            Problem(
                host,
                "inventory_hostname",
                f"{host}: inventory_hostname={show(host)} is an address, not a node name; "
                f"allowed: {_HOSTNAME_RULE}, such as node1 (put the address in ansible_host)",
            )
        ]
    if not is_hostname(host):
        return [
            Problem(
                host,
                "inventory_hostname",
                f"{host}: inventory_hostname={show(host)} is not a valid node name; allowed: {_HOSTNAME_RULE}",
            )
        ]
    address = _resolver_address(host)
    if address is not None:
        # The resolver (glibc's inet_aton) reads such a name as an address before any lookup: ssh, mpirun and the
        # peers' /etc/hosts would reach that address, not the node.
        return [
            Problem(
                host,
                "inventory_hostname",
                f"{host}: inventory_hostname={show(host)} is read as the address {address} by the resolver, not as a "
                f"name; allowed: {_HOSTNAME_RULE}, not all digits (nor hexadecimal), such as node1",
            )
        ]
    return []


def _resolver_address(name: str) -> str | None:
    """The IPv4 address the C library's inet_aton reads ``name`` as (``10.5`` is 10.0.0.5, ``1`` is 0.0.0.1), if any."""
    try:
        return socket.inet_ntoa(socket.inet_aton(name.removesuffix(".")))
    except (OSError, ValueError):
        return None


def localhost_node_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A node named for the controller (localhost, localhost.localdomain) that Ansible reaches over a network: its
    inventory entry replaces Ansible's implicit localhost, so every task rdmaforge delegates to the controller (its
    caches, the NCCL build) would run on that node over SSH instead."""
    name = host.lower().removesuffix(".")
    if not (name == "localhost" or name.startswith("localhost.")):
        return []
    if str(values.get("ansible_connection", "")).strip() == "local":
        return []  # the controller itself, as a node of a one-machine cluster
    return [Problem(host, "inventory_hostname",
                    f"{host}: inventory_hostname={show(host)} is Ansible's name for the controller, and this node is "
                    f"reached over {values.get('ansible_connection') or 'ssh'}: the tasks rdmaforge runs on the "
                    f"controller (delegate_to: localhost) would run on it instead; allowed: another node name (the "
                    f"node's own host name), or ansible_connection: local for the controller itself")]  # fmt: skip


def _machine_local(address: object) -> bool:
    """A loopback (127/8) or link-local (169.254/16) IPv4 address: one only the machine itself, or its link, reaches."""
    if not isinstance(address, str) or not is_ipv4(address):
        return False
    ip = ipaddress.IPv4Address(address)
    return ip.is_loopback or ip.is_link_local


def local_address_problems(nodes: Sequence[NodeInput]) -> list[Problem]:
    """A node reached at a loopback or link-local address in a cluster whose other nodes are not: the address goes
    into every peer's /etc/hosts, hostfile and SSH trust, where it names the peer itself (127.0.0.1 node2 on node1)
    or nothing (review round 23b). A cluster all on loopback is a test on one machine, and left alone."""
    local = [n for n in nodes if n.address is not None and _machine_local(n.address)]
    if not local or len(local) == len([n for n in nodes if n.address is not None]):
        return []
    return [Problem(n.name, "ansible_host", f"{n.name}: ansible_host={show(n.address)} is a loopback or link-local "
                                            "address, which names each peer itself (or nothing) in their /etc/hosts, "
                                            "hostfile and SSH trust; allowed: an address the other nodes reach this "
                                            "node at")  # fmt: skip
            for n in local if n.in_play]


def address_problems(host: str, address: object) -> list[Problem]:
    """``ansible_host`` must be an IPv4 address or a DNS name (IPv6 node addresses are not supported yet)."""
    allowed = "an IPv4 address such as 172.20.20.145, or a DNS host name"
    if not isinstance(address, str) or not address.strip():
        return [
            Problem(
                host,
                "ansible_host",
                f"{host}: ansible_host={show(address)} is not an address; allowed: {allowed}",
            )
        ]
    if is_ipv6(address):
        return [
            Problem(
                host,
                "ansible_host",
                f"{host}: ansible_host={show(address)} is an IPv6 address, which rdmaforge does not "
                f"support for nodes yet; allowed: {allowed}",
            )
        ]
    if looks_like_ipv4(address):
        if not is_ipv4(address):
            return [
                Problem(
                    host,
                    "ansible_host",
                    f"{host}: ansible_host={show(address)} is not a valid IPv4 address (four numbers from 0 to 255, "
                    f"without leading zeros); allowed: {allowed}",
                )
            ]
        ip = ipaddress.IPv4Address(address)
        # No machine answers as one of these (0.0.0.0/8 is "this network", the rest reach many or none): every peer's
        # /etc/hosts, hostfile and SSH trust would name no node.
        if ip.is_unspecified or ip in ipaddress.IPv4Network("0.0.0.0/8") or ip.is_multicast or ip.is_reserved:
            return [
                Problem(
                    host,
                    "ansible_host",
                    f"{host}: ansible_host={show(address)} is no address of one machine (this-network, multicast, "
                    f"reserved or broadcast); allowed: {allowed}",
                )
            ]
        return []
    if not is_hostname(address):
        return [
            Problem(
                host,
                "ansible_host",
                f"{host}: ansible_host={show(address)} is neither an IPv4 address nor a valid host name"
                f"{_address_hint(address)}; allowed: {allowed}",
            )
        ]
    return []


def _address_hint(address: str) -> str:
    """What a common mistake in ``ansible_host`` should have been: a network or a port written with the address."""
    head, sep, tail = address.partition("/")
    if sep and is_ipv4(head) and tail.isdigit():
        return f" (a network prefix: write the address alone, {head})"
    head, sep, tail = address.rpartition(":")
    if sep and (is_ipv4(head) or is_hostname(head)) and tail.isdigit():
        return f" (a port: write {head} and put {tail} in ansible_port)"
    return ""


@dataclass(frozen=True)
class NodeAddress:
    """A node as the cross-host checks see it. ``address`` is None when ``ansible_host`` is unset."""

    name: str
    address: str | None

    @property
    def effective_address(self) -> str:
        """Where Ansible connects: ``ansible_host``, or the inventory name when that is unset."""
        return self.address if self.address is not None else self.name

    @property
    def address_variable(self) -> str:
        return "ansible_host" if self.address is not None else "inventory_hostname"


def _normalise(text: str) -> str:
    return text.strip().lower().removesuffix(".")


def duplicate_problems(nodes: Sequence[NodeAddress]) -> list[Problem]:
    """Short names and addresses must be unique across the cluster; every node involved gets a line."""
    problems: list[Problem] = []
    by_short: dict[str, list[NodeAddress]] = {}
    by_address: dict[str, list[NodeAddress]] = {}
    for node in nodes:
        by_short.setdefault(_normalise(short_name(node.name)), []).append(node)
        by_address.setdefault(_normalise(node.effective_address), []).append(node)
    for group in by_short.values():
        for node in group if len(group) > 1 else ():
            others = ", ".join(o.name for o in group if o is not node)
            problems.append(
                Problem(
                    node.name,
                    "inventory_hostname",
                    f"{node.name}: inventory_hostname={show(node.name)} has the short name "
                    f"{short_name(node.name)!r}, which {others} also has; "
                    f"allowed: a name whose first label no other node uses "
                    f"(short names go into /etc/hosts and MPI hostfiles)",
                )
            )
    for group in by_address.values():
        for node in group if len(group) > 1 else ():
            others = ", ".join(o.name for o in group if o is not node)
            problems.append(
                Problem(
                    node.name,
                    node.address_variable,
                    f"{node.name}: {node.address_variable}={show(node.effective_address)} "
                    f"is also the address of {others}; "
                    f"allowed: an address no other node uses (each node needs its own)",
                )
            )
    return problems


# --- fabric ----------------------------------------------------------------------------------------


def fabric_problems(host: str, fabric: object) -> list[Problem]:
    """``rdmaforge_fabric`` must name a known profile. ``None`` means unset (or set to null)."""
    allowed = ", ".join(FABRICS)
    if fabric is None or fabric == "":
        return [
            Problem(
                host,
                "rdmaforge_fabric",
                f"{host}: rdmaforge_fabric is not set; every node needs a fabric profile; allowed: {allowed}",
            )
        ]
    if fabric not in FABRICS:
        return [
            Problem(
                host,
                "rdmaforge_fabric",
                f"{host}: rdmaforge_fabric={show(fabric)} is not a known fabric profile"
                f"{_did_you_mean(fabric, FABRICS)}; allowed: {allowed}",
            )
        ]
    return []


def mixed_fabric_problems(nodes: Sequence[tuple[str, object]], group: str = "cluster") -> list[Problem]:
    """Every node of the cluster group must use one fabric profile: a training job's NCCL settings are per
    cluster. Each node whose known profile differs from the majority's gets a line (on a tie the first
    node's profile is the majority); unset or unknown profiles are left to ``fabric_problems``."""
    known = [(name, fabric) for name, fabric in nodes if isinstance(fabric, str) and fabric in FABRICS]
    counts: dict[str, int] = {}
    for _, fabric in known:
        counts[fabric] = counts.get(fabric, 0) + 1
    if len(counts) < 2:
        return []
    # dicts keep insertion order, so max() returns the first node's profile among equal counts
    majority = max(counts, key=lambda fabric: counts[fabric])
    holders = ", ".join(name for name, fabric in known if fabric == majority)
    return [
        Problem(
            name,
            "rdmaforge_fabric",
            f"{name}: rdmaforge_fabric={show(fabric)} differs from the rest of the cluster "
            f"({majority!r} on {holders}); allowed: one fabric profile for every node of group {group}",
        )
        for name, fabric in known
        if fabric != majority
    ]


#: Settings one training job reads on every node alike: each node's torchrun gets its own host's values, while rank 0
#: computes the job's samples per step from its own batch size, and ranks that train different step counts hang.
CLUSTER_WIDE = ("benchmark_e2e_batch_size", "benchmark_e2e_steps", "benchmark_e2e_warmup_steps", "benchmark_e2e_port")
#: Settings a run_once task reads for the whole cluster (the benchmark's mpirun, the pairwise method, mpirun's launch
#: check, the SSH mesh check, the erdma key's check on the controller), from the first node: another node's value
#: was not used there, without a word (review round 36d).
READ_ONCE = ("benchmark_collectives", "benchmark_timeout", "pairwise_method", "mpi_launch_timeout",
             "ssh_trust_check_by", "rdma_repos_erdma_gpg_fingerprint")  # fmt: skip
#: Batch sizes: a rolling play has one (its serial), taken from the first node of the play.
ROLLOUT_WIDE = batch_size.VARIABLES
#: What names the one NCCL build and nccl-tests build of the cluster (built once, on the builder, from the first
#: node's values; each node installs the build its own values name), and what every rank's NCCL must agree on (the
#: net plugin, the accelerator's NCCL_ALGO): a node that differs got another NCCL, or failed at its install after
#: eight plays had changed it, and mixed builds or algorithms hang collectives (review round 23b). The prefix root
#: may differ: each node installs under its own.
BUILD_WIDE = (
    "nccl_build_source", "nccl_build_version", "nccl_build_git_url", "nccl_build_git_ref", "nccl_build_git_commit",
    "nccl_build_tarball_url", "nccl_build_tarball_sha256", "nccl_cuda_archs", "nccl_build_only_funcs",
    "nccl_tests_enabled", "nccl_tests_source", "nccl_tests_version", "nccl_tests_git_url", "nccl_tests_git_ref",
    "nccl_tests_git_commit", "nccl_tests_tarball_url", "nccl_tests_tarball_sha256", "nccl_tests_mpi",
    "nccl_tests_make_extra_args", "nccl_tests_binaries", "nccl_plugin_provider", "nccl_env_accelerator",
)  # fmt: skip


def _build_value(values: Mapping[str, object], variable: str) -> object:
    """A BUILD_WIDE variable's value, a default as the role computes it for the node (nccl_plugin_provider's
    follows the fabric); a default that cannot be computed here stays its template (not compared). nccl_cuda_archs
    is role nccl_build's without its prefix."""
    if variable in values:
        return values[variable]
    owner = "nccl_build" if variable == "nccl_cuda_archs" else None
    try:
        return role_defaults.evaluated_default(variable, values, owner)
    except (KeyError, ValueError):
        return role_defaults.defaults("nccl_build").get(variable) if variable == "nccl_cuda_archs" else "{{ }}"


_BOOL_WORDS = frozenset({"true", "false", "yes", "no", "on", "off"})


@functools.lru_cache(maxsize=4)
def _numeric_options(roles_dir: str) -> frozenset[str]:
    """The role options whose argument spec takes a number (int or float)."""
    options = merged_argument_specs(discover_argument_specs(roles_dir))["options"]
    return frozenset(name for name, option in options.items() if option.get("type") in ("int", "float"))


def _compared_form(variable: str, value: object) -> object:
    """What the role makes of ``value``: a number option's 60, "60" and 60.0 are one number; a key fingerprint is
    compared without its blanks and in capitals, as roles/rdma_repos checks it (review round 36e: both were refused
    as different values)."""
    if variable == "rdma_repos_erdma_gpg_fingerprint" and isinstance(value, str):
        return re.sub(r"\s", "", value).upper()
    if variable in _numeric_options(str(paths.ROLES_DIR)) and not isinstance(value, bool):
        try:
            return float(str(value).strip())
        except ValueError:
            return str(value)
    return str(value)


def _differs(value: object, reference: object, variable: str = "") -> bool:
    """Two nodes' values of one cluster-wide variable differ: 32 and "32" (-e, an INI host line) are one value, so
    are true and "true" or "yes" (review round 24), and 60.0 and 60 where ``variable`` takes a number; a template is
    the role's to evaluate, not compared."""
    if _templated(value) or _templated(reference):
        return False

    def boolean(item: object) -> bool:
        return isinstance(item, bool) or isinstance(item, str) and item.lower() in _BOOL_WORDS

    if boolean(value) and boolean(reference):
        return ansible_bool(value) != ansible_bool(reference)
    return _compared_form(variable, value) != _compared_form(variable, reference)


def cluster_wide_problems(nodes: Sequence[NodeInput], group: str = "cluster") -> list[Problem]:
    """A CLUSTER_WIDE setting that differs between the nodes (host_vars, or groups of their own): each node whose value
    differs from the first node's gets a line naming both."""
    if len(nodes) < 2:
        return []
    # (variables, a node's value, why one value): the batch sizes have no role default (1 is the plays' own).
    kinds: tuple[tuple[Sequence[str], Callable[[Mapping[str, object], str], object], str], ...] = (
        (CLUSTER_WIDE, role_defaults.value_of, "one training job runs on them all"),
        (READ_ONCE, role_defaults.value_of, "a run_once task reads the first node's value for the whole cluster"),
        (ROLLOUT_WIDE, lambda values, variable: values.get(variable, 1), "a rolling play has one batch size"),
        (BUILD_WIDE, _build_value, "one NCCL build, plugin and algorithm for every rank"),
    )
    first, found = nodes[0], []
    for variables, value_of, why in kinds:
        for variable in variables:
            if not any(variable in node.values for node in nodes):
                continue  # the role's default on every node: one value (and no default evaluated 1,000 times)
            reference = value_of(first.values, variable)
            for node in nodes[1:]:
                value = value_of(node.values, variable)
                if node.in_play and _differs(value, reference, variable):
                    found.append(Problem(node.name, variable, f"{node.name}: {variable}={show(value)} differs from "
                                                              f"{first.name}'s {show(reference)}; allowed: one value "
                                                              f"for every node of group {group} ({why})"))  # fmt: skip
    return found


# --- hosts the playbooks leave out ----------------------------------------------------------------

#: The group every playbook after preflight targets (playbooks/*.yml: hosts: cluster, or the nodes of cluster the
#: fast path did not leave out).
PLAYBOOK_GROUP = "cluster"
#: Ansible's names for the controller itself (its implicit localhost): listed in an inventory, it is the controller
#: the hosts: localhost plays run on, not a node.
LOCALHOST_NAMES = ("localhost", "127.0.0.1", "::1")


def outside_group_problems(groups: Mapping[str, Sequence[str]], target: str = PLAYBOOK_GROUP) -> list[Problem]:
    """Every host of the inventory outside ``target`` (in ``ungrouped``, or only in other groups): no playbook
    converges it, and a run would end green without a word about it (an ``nccl_builder`` outside the cluster is not
    used either). ``groups`` is Ansible's ``groups``. An error, like the empty cluster group preflight.yml refuses:
    the node was meant to be in the cluster, and a training job would start without it."""
    members = set(groups.get(target) or [])
    found = []
    for host in groups.get("all") or []:
        if host in members or host in LOCALHOST_NAMES:
            continue
        where = sorted(name for name, hosts in groups.items() if name != "all" and host in (hosts or []))
        found.append(
            Problem(
                host,
                "groups",
                f"{host}: is in group{'s' if len(where) > 1 else ''} {', '.join(where) or 'ungrouped'}, not in group "
                f"{target}, which the playbooks "
                f"target: no playbook would converge it; allowed: every node under all.children.{target}.hosts (or "
                f"in a group inside {target}); take any other host out of this inventory",
            )
        )
    return found


# --- whole numbers ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WholeNumber:
    """The range of a whole-number variable (``most`` None: no upper bound) and, in words, what it counts."""

    least: int
    most: int | None = None
    what: str | None = None

    @property
    def allowed(self) -> str:
        counted = f" of {self.what}" if self.what else ""
        if self.most is None:
            return f"a whole number{counted}, {self.least} or more"
        return f"a whole number{counted} from {self.least} to {self.most}"


#: Whole-number variables a role uses as a count, a duration or a port -> their range. The argument specs' int takes
#: -1 and 0, and a word given where a role's type is raw, which then failed on the nodes after other roles had
#: changed them: a lock poll of 0 divided by zero at the reboot, an e2e batch of 0 trained nothing and read as a
#: hardware verdict.
WHOLE_NUMBERS: dict[str, WholeNumber] = {
    # every download and package task: a huge value would hold a dead mirror's failure for hours, a negative one
    # makes Ansible skip the task's retries silently
    "rdmaforge_network_retries": WholeNumber(0, 20),
    "rdmaforge_network_retry_delay": WholeNumber(0, 300),
    "rdmaforge_network_timeout": WholeNumber(5, 3600),
    # a node's read-only probes: 0 or a negative value failed the probe module on every node, after preflight
    # at most 300: the six tools of a node's probe, all hung, stay well within ansible.cfg's task_timeout (3600)
    "rdmaforge_command_timeout": WholeNumber(5, 300),
    # the e2e benchmark: 0 steps trained the whole warm-up and failed the component
    "benchmark_e2e_steps": WholeNumber(1, None, "measured training steps"),
    "benchmark_e2e_warmup_steps": WholeNumber(0, None, "warm-up steps"),
    "benchmark_e2e_batch_size": WholeNumber(1, None, "samples per rank per step"),
    "benchmark_e2e_port": WholeNumber(1, 65535, "a TCP port"),
    "benchmark_iterations": WholeNumber(1, None, "timed iterations"),
    # nccl-tests -f: below 2 it steps by -i (1 MiB) instead, 512 sizes where 2 gives 30, and times out
    "benchmark_step_factor": WholeNumber(2, None, "the size step factor (nccl-tests -f)"),
    "benchmark_warmup_iterations": WholeNumber(0, None, "warm-up iterations"),
    "benchmark_gpus_per_process": WholeNumber(1, None, "GPUs per process"),
    "benchmark_timeout": WholeNumber(1, None, "seconds"),
    # the rolling reboot (roles/hugepages/tasks/reboot.yml): the lock's retries are wait // poll
    "hugepages_reboot_timeout": WholeNumber(1, 86400, "seconds"),
    "hugepages_reboot_lock_wait": WholeNumber(0, 86400, "seconds"),
    "hugepages_reboot_lock_poll": WholeNumber(1, 3600, "seconds between looks"),
    "hugepages_reboot_lock_stale_after": WholeNumber(60, 604800, "seconds"),
    "nccl_build_timeout": WholeNumber(1, None, "seconds"),
    # 0 timed out every command of the fast path's check and its record alike (library/converge_state.py)
    "converge_state_command_timeout": WholeNumber(1, 3600, "seconds"),
    # make -j0 or -j-4 failed on the builder, in the nccl play (review round 23b); a template stays the role's
    "nccl_build_jobs": WholeNumber(1, 1024, "parallel make jobs"),
    "pairwise_iperf_streams": WholeNumber(1, 128, "parallel streams"),
    "pairwise_iperf_seconds": WholeNumber(1, 3600, "seconds"),
    "pairwise_port_base": WholeNumber(1024, 65000, "the first TCP port of the sweep"),
    "pairwise_timeout": WholeNumber(1, None, "seconds"),
    "mpi_launch_timeout": WholeNumber(5, 3600, "seconds"),
    "ssh_trust_check_peers": WholeNumber(0, None, "peers each node checks (0: every peer)"),
    "ssh_trust_check_parallel": WholeNumber(1, None, "connections at a time"),
}
#: The e2e benchmark's counts (the benchmark role checks them again where it runs: filter_plugins/rdmaforge_bench).
E2E_COUNTS = ("benchmark_e2e_steps", "benchmark_e2e_warmup_steps", "benchmark_e2e_batch_size")


def whole_number_problems(
    host: str, values: Mapping[str, object], names: Iterable[str] = WHOLE_NUMBERS
) -> list[Problem]:
    """Each variable of ``names`` set to no whole number in its WHOLE_NUMBERS range."""
    found = []
    for variable in names:
        if variable not in values:
            continue
        value = values[variable]
        if isinstance(value, str) and _templated_text(value):
            continue  # its result is what counts: the role's own check has it
        bounds = WHOLE_NUMBERS[variable]
        number = whole_number(value)
        if number is None or number < bounds.least or (bounds.most is not None and number > bounds.most):
            message = f"{host}: {variable}={show(value)} is not allowed; allowed: {bounds.allowed}"
            found.append(Problem(host, variable, message))
    return found


def e2e_count_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """An e2e step or batch count below its least, or no whole number (the argument spec's int takes -1 and 0)."""
    return whole_number_problems(host, values, E2E_COUNTS)


def number_table_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """The values of the tables of numbers: free MiB per absolute path (preflight read a word with int() on the node,
    after connecting, and crashed; a relative path is no place df can measure) and line rates per fabric profile
    (a word became 0.0 and the fabric's default rate judged the run instead)."""
    found = []
    for variable in ("preflight_min_free_mb", "preflight_builder_free_mb"):
        table = values.get(variable)
        for path, mib in table.items() if isinstance(table, Mapping) else ():
            number = whole_number(mib)
            if not str(path).startswith("/") or number is None or number < 0:
                found.append(Problem(host, variable, f"{host}: {variable}.{path}={show(mib)} is not allowed; allowed: "
                                                     "an absolute path of the node, to a whole number of MiB, 0 or "
                                                     "more"))  # fmt: skip
    rates = values.get("benchmark_line_rates")
    for profile, rate in rates.items() if isinstance(rates, Mapping) else ():
        if _templated(rate):
            continue
        if not _is_positive_number(rate):
            found.append(Problem(host, "benchmark_line_rates", f"{host}: benchmark_line_rates.{profile}={show(rate)} "
                                                               "is not allowed; allowed: a positive number of Gbit/s"))
    return found


def _is_positive_number(value: object) -> bool:
    """A number above 0 and finite, as float() reads it (text too); never a boolean. NaN is none."""
    try:
        number = None if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return number is not None and 0 < number < float("inf")


#: The pairwise report's scoring thresholds (rdmaforge.pairwise.score.Thresholds), by their role variables.
PAIRWISE_THRESHOLDS = ("slow_ratio", "node_fraction", "line_rate_gbps", "min_line_fraction")


def pairwise_threshold_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """The pairwise report's own check of its thresholds (the role makes it before the sweep, after connecting), on
    the values the inventory sets: one line naming each variable out of its range."""
    from rdmaforge.pairwise.report import thresholds_from

    given = {key: values[f"pairwise_{key}"] for key in PAIRWISE_THRESHOLDS if f"pairwise_{key}" in values}
    if not given or any(_templated(value) for value in given.values()):
        return []
    thresholds = {key: role_defaults.value_of(values, f"pairwise_{key}") for key in PAIRWISE_THRESHOLDS}
    try:
        thresholds_from(thresholds).check()
    except (TypeError, ValueError) as exc:
        variable = next((f"pairwise_{key}" for key in given if f"pairwise_{key}" in str(exc)), "pairwise thresholds")
        return [Problem(host, variable, f"{host}: {exc} (the pairwise report's thresholds)")]
    return []


#: Seconds an iperf3 measurement needs beyond its -t (start, the JSON result's transfer).
PAIRWISE_TIMEOUT_MARGIN = 5


def pairwise_timeout_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A measurement timeout that cuts every iperf3 run short: each pair would be recorded as a hang, blamed on the
    fabric (on two nodes, a suspect link) instead of the settings."""
    names = ("pairwise_timeout", "pairwise_iperf_seconds", "pairwise_connect_timeout_ms")
    if not any(name in values for name in names) or role_defaults.value_of(values, "pairwise_method") == "sendrecv":
        return []
    timeout, seconds = (whole_number(role_defaults.value_of(values, name)) for name in names[:2])
    if timeout is None or seconds is None:
        return []  # no whole number: whole_number_problems names it
    least = seconds + PAIRWISE_TIMEOUT_MARGIN  # (the connect timeout only counts for a peer that never answers)
    if timeout >= least:
        return []
    return [Problem(host, "pairwise_timeout", f"{host}: pairwise_timeout={timeout} is shorter than one iperf3 "
                    f"measurement takes (pairwise_iperf_seconds={seconds}, and {PAIRWISE_TIMEOUT_MARGIN} s to start "
                    f"and report): every iperf3 pair would be recorded as a hang; allowed: at least {least} seconds "
                    "(or pairwise_method: sendrecv, on GPU nodes, where iperf3 does not run)")]


def batch_size_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A rolling play's batch size (rdmaforge.batch_size) that Ansible's serial would read as something else: -e
    rdmaforge_reboot_serial=0 rebooted every node at once, a word failed at the reboot after the first huge-page play
    had changed every node's kernel arguments."""
    return [Problem(host, variable, f"{host}: {refusal}") for variable in batch_size.VARIABLES
            if variable in values and (refusal := batch_size.problem(variable, values[variable]))]  # fmt: skip


#: Numbers that must be positive when set (null leaves them unset), with what is allowed, in words.
POSITIVE_NUMBERS: dict[str, str] = {
    "rdma_core_min_port_rate_gbps": "a positive number of Gbit/s (100 for EDR, 200 for HDR, 400 for NDR), or null",
    # A whole number: preflight's argument spec types it int. 0 is no count to stand in: preflight counts a node
    # without GPUs itself (sysfs), and rdmaforge.node_facts.known_gpu_count would ignore it.
    "rdmaforge_gpus_per_node": "a whole number of GPUs of 1 or more (the node's count where preflight cannot read "
    "it), or null",
    # The benchmark's expectation: a word became 0.0 (`| float`) and the report silently judged by the fabric
    # profile's rate instead.
    "benchmark_line_rate_gbps": "a positive number of Gbit/s per node (the line rate the benchmark judges by)",
}


#: Where grub-mkconfig reads drop-ins of /etc/default/grub (Debian's and Ubuntu's GRUB: ${sysconfdir}/default/grub.d).
GRUB_DROPIN_DIR = "/etc/default/grub.d"


def grub_dropin_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """hugepages_grub_dropin was checked only by the kernel_cmdline module in the hugepages play, after cluster_hosts
    had changed the node; a relative name passed even that (the module's directory check read '.') and wrote a
    file GRUB never reads, and /etc/grub.d/ (the scripts' directory) is a common mix-up (review round 23b)."""
    value = values.get("hugepages_grub_dropin")
    if not isinstance(value, str) or not value or _templated(value):
        return []
    directory, _, name = value.rpartition("/")
    if directory == GRUB_DROPIN_DIR and name.endswith(".cfg") and len(name) > len(".cfg"):
        return []
    return [Problem(host, "hugepages_grub_dropin", f"{host}: hugepages_grub_dropin={show(value)} is not a file "
                                                    f"grub-mkconfig reads; allowed: {GRUB_DROPIN_DIR}/<name>.cfg, or "
                                                    "empty to edit /etc/default/grub")]  # fmt: skip


#: nccl-tests' message sizes (-b, -e): read as nccl-tests reads them (rdmaforge.nccl_tests.sizes).
BENCHMARK_SIZES = ("benchmark_min_bytes", "benchmark_max_bytes")


def benchmark_size_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A size nccl-tests cannot read ('8X', '1.5G') stopped each collective with "invalid size specified" on the
    nodes, and a smallest size above the largest measured nothing (review round 23b)."""
    found, sizes, given = [], {}, {}
    for variable in BENCHMARK_SIZES:
        value = given[variable] = values.get(variable, role_defaults.default_of(variable))
        if _templated(value):
            continue
        try:
            sizes[variable] = size_bytes(value)
        except ValueError as exc:
            found.append(Problem(host, variable, f"{host}: {variable}={show(value)} is not allowed: {exc}"))
    if len(sizes) == 2 and sizes["benchmark_min_bytes"] > sizes["benchmark_max_bytes"]:
        found.append(Problem(host, "benchmark_min_bytes",
                             f"{host}: benchmark_min_bytes={show(given['benchmark_min_bytes'])} is above "
                             f"benchmark_max_bytes={show(given['benchmark_max_bytes'])}"
                             f"{'' if 'benchmark_max_bytes' in values else ' (its default)'}, so nccl-tests would "
                             "measure no size; allowed: a smallest size up to the largest"))  # fmt: skip
    return found


def positive_number_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A rate of 0, a negative one or a word would make the port check meaningless or fail on every node."""
    found = []
    for variable, allowed in POSITIVE_NUMBERS.items():
        if variable not in values or values[variable] is None or _templated(values[variable]):
            continue
        value = values[variable]
        if not _is_positive_number(value):
            message = f"{host}: {variable}={show(value)} is not allowed; allowed: {allowed}"
            found.append(Problem(host, variable, message))
    return found


#: Variables that count a node's GPUs -> the least count allowed. Above stored.MAX_GPUS (the bound of the GPU counts
#: in run.json and summary.json) a count is a typo, not a machine: rendered into --nproc-per-node or slotsPerWorker it
#: would fail only once a job starts.
GPU_COUNTS: dict[str, int] = {
    "rdmaforge_gpus_per_node": 1,
    "workload_manifests_gpus_per_node": 1,
    "doctor_expected_gpus": 0,
    # The hostfile's slots for a node without a GPU count: 0 or -1 were written as slots=0 / slots=-1.
    "mpi_launch_default_slots": 1,
}
#: What a count of GPU_COUNTS counts, where it is not GPUs.
_COUNTED = {"mpi_launch_default_slots": "MPI slots"}


def gpu_count_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A GPU count above MAX_GPUS or below its least: the argument spec's int takes -1, which doctor would compare
    every node's count with and rendering would put into --nproc-per-node. rdmaforge_gpus_per_node's own line,
    positive_number_problems', runs first and wins; a value that is no number is the argument spec's to name."""
    found = []
    for variable, least in GPU_COUNTS.items():
        value = values.get(variable)
        if isinstance(value, bool):  # the spec's int takes true as 1; doctor then said "true is no count"
            found.append(Problem(host, variable, f"{host}: {variable}={show(value)} is not allowed; allowed: a whole "
                                                 f"number from {least} to {MAX_GPUS}, or null"))  # fmt: skip
            continue
        number = whole_number(value)
        if number is not None and number > MAX_GPUS:
            message = (f"{host}: {variable}={show(value)} is more {_COUNTED.get(variable, 'GPUs')} than a node has; "
                       "allowed: a whole number "
                       f"from {least} to {MAX_GPUS}, or null")  # fmt: skip
            found.append(Problem(host, variable, message))
        elif number is not None and number < least:
            message = (f"{host}: {variable}={show(value)} is not allowed; allowed: a whole number from {least} to "
                       f"{MAX_GPUS}, or null")  # fmt: skip
            found.append(Problem(host, variable, message))
    return found


def hugepages_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """Huge page settings wrong without any fact about the node (roles/hugepages): a count below 1 while
    hugepages_enabled is true (the kernel would get hugepages=0, or a negative count), and a share of the memory
    outside (0, 1). Whether the pages fit the node's memory needs its facts: roles/hugepages/tasks/validate.yml."""
    found = []
    count = values.get("hugepages_count")
    number = whole_number(count)
    if ansible_bool(role_defaults.value_of(values, "hugepages_enabled")) and number is not None and number < 1:
        found.append(
            Problem(
                host,
                "hugepages_count",
                f"{host}: hugepages_count={show(count)} is not allowed while hugepages_enabled is true; allowed: a "
                "whole number of pages above 0, or null for seed 004's rule (50 on an 8-GPU node, otherwise GPUs x 5 "
                "+ 10); 0 only with hugepages_enabled: false",
            )
        )
    if "hugepages_max_memory_fraction" in values:
        value = values["hugepages_max_memory_fraction"]
        try:
            fraction = None if isinstance(value, bool) or value is None else float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            fraction = None
        if fraction is None or not 0 < fraction < 1:
            found.append(
                Problem(
                    host,
                    "hugepages_max_memory_fraction",
                    f"{host}: hugepages_max_memory_fraction={show(value)} is not allowed; allowed: a number above 0 "
                    "and below 1, the largest share of the node's memory huge pages may take (default "
                    f"{show(role_defaults.default_of('hugepages_max_memory_fraction'))})",
                )
            )
    return found


# --- ENIs (roles/eni) --------------------------------------------------------------------------------

#: eni_mtu's range. 68 is IPv4's least MTU (RFC 791; Linux takes IPv4 off a link set below it). 9216 is the largest
#: jumbo frame in common use: data-centre switches' and cloud NICs' limit (AWS ENA's max_mtu; Alibaba's eRDMA jumbo
#: frames are 8500), so a larger MTU would be refused by `ip link set mtu` on the ENIs this role is for.
ENI_MTU_RANGE = (68, 9216)
#: Linux routing table ids are 32-bit (RT_TABLE_MAX); 0 is RT_TABLE_UNSPEC, 253-255 the kernel's default, main and
#: local tables (/etc/iproute2/rt_tables): a secondary NIC's table there would take over the node's own routes.
ROUTE_TABLE_MAX = 2**32 - 1
RESERVED_ROUTE_TABLES = range(253, 256)
#: ip rule priorities are 32-bit too; 32766 and 32767 are the kernel's rules for the main and default tables (0, its
#: rule for the local table, is below the least allowed): a secondary NIC's rule there would be ordered among them.
RULE_PRIORITY_MAX = 2**32 - 1
RESERVED_RULE_PRIORITIES = range(32766, 32768)
_ENI_ADDRESS_ALLOWED = ("an IPv4 address with its prefix length, such as 10.0.1.5/24 (ADDRESS/PREFIX; a bare "
                        "address is taken as /32)")  # fmt: skip


def _ipv4_interface(address: object) -> ipaddress.IPv4Interface | None:
    """An eni_addresses value as tuning.eni_plan reads it (ipaddress.IPv4Interface: its address and subnet); None
    when the plan would raise on it. Only text: an integer IPv4Interface would take is no address anyone means."""
    try:
        return ipaddress.IPv4Interface(address) if isinstance(address, str) else None
    except ValueError:
        return None


def eni_address_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """eni_addresses and eni_gateways as the eni role's plan (tuning.eni_plan) reads them: an address IPv4Interface
    takes, a gateway IPv4Address takes ('' or null: none) and, where both are given, in the address's subnet.
    Otherwise the plan raises, or stops the role, after the roles before it changed the nodes. One line per NIC
    (its variable ``eni_addresses.eth1``): a value that is no mapping is the argument spec's to name."""
    found = []
    addresses, gateways = values.get("eni_addresses"), values.get("eni_gateways")
    addresses = addresses if isinstance(addresses, Mapping) else {}
    listed = role_defaults.value_of(values, "eni_interfaces")
    if isinstance(listed, list) and listed and ansible_bool(role_defaults.value_of(values, "eni_enabled")):
        # The role configures the listed NICs only: an address for another (eth9 for eth1) was ignored silently.
        nics = ", ".join(map(str, listed))
        for nic in (n for n in addresses if n not in listed):
            message = (f"{host}: eni_addresses names {nic}, which is not in eni_interfaces ({nics}), so the eni role "
                       f"would never use it; allowed: a NIC of eni_interfaces, or add {nic} there")
            found.append(Problem(host, f"eni_addresses.{nic}", message))
    interfaces = {nic: _ipv4_interface(value) for nic, value in addresses.items()}
    for nic, value in addresses.items():
        interface = interfaces[nic]
        if interface is None:
            message = f"{host}: eni_addresses.{nic}={show(value)} is not allowed; allowed: {_ENI_ADDRESS_ALLOWED}"
            found.append(Problem(host, f"eni_addresses.{nic}", message))
            continue
        unusable = _unusable_host_address(interface)
        if unusable:
            message = (f"{host}: eni_addresses.{nic}={show(value)} is {unusable}, which no NIC can use as its "
                       f"address; allowed: {_ENI_ADDRESS_ALLOWED}")  # fmt: skip
            found.append(Problem(host, f"eni_addresses.{nic}", message))
    for nic, value in gateways.items() if isinstance(gateways, Mapping) else ():
        if value is None or value == "":
            continue
        variable = f"eni_gateways.{nic}"
        if not (isinstance(value, str) and is_ipv4(value)):
            message = (f"{host}: {variable}={show(value)} is not allowed; allowed: an IPv4 address in the NIC's "
                       "subnet, such as 10.0.1.1 (the eni role routes IPv4 only), or '' for none")  # fmt: skip
            found.append(Problem(host, variable, message))
            continue
        own = interfaces.get(nic)
        if own is None:
            continue
        network = own.network
        if ipaddress.IPv4Address(value) not in network:
            message = (f"{host}: {variable}={show(value)} is outside {nic}'s subnet {network} (eni_addresses.{nic}="
                       f"{show(addresses[nic])}); allowed: an address in {network}, or '' for none")  # fmt: skip
            found.append(Problem(host, variable, message))
        else:
            # The kernel refuses a route via the NIC's own address (and no router answers at the subnet's network or
            # broadcast address): the eni role wrote the files, reloaded the network and failed its own check.
            what = ("the NIC's own address" if ipaddress.IPv4Address(value) == own.ip
                    else _unusable_host_address(ipaddress.IPv4Interface(f"{value}/{network.prefixlen}")))  # fmt: skip
            if what:
                router = ("'' for none (a /32 address has no other host on its subnet)" if network.num_addresses == 1
                          else f"another host address in {network} (the subnet's router), or '' for none")  # fmt: skip
                message = (f"{host}: {variable}={show(value)} is {what} (eni_addresses.{nic}={show(addresses[nic])}), "
                           f"which cannot be its gateway; allowed: {router}")  # fmt: skip
                found.append(Problem(host, variable, message))
    return found


def _unusable_host_address(interface: ipaddress.IPv4Interface) -> str:
    """Why ``interface``'s address can be no host's on its subnet ('' when it can): the subnet's network or
    broadcast address (prefixes up to /30; /31 and /32 have neither), loopback, multicast, unspecified."""
    address, network = interface.ip, interface.network
    if address.is_loopback:
        return "a loopback address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "the unspecified address"
    if network.prefixlen <= 30 and address == network.network_address:
        return f"the network address of {network}"
    if network.prefixlen <= 30 and address == network.broadcast_address:
        return f"the broadcast address of {network}"
    return ""


def eni_duplicate_problems(nodes: Sequence[NodeInput]) -> list[Problem]:
    """The same secondary-NIC address on two NICs of the cluster, or one that is a node's ansible_host: both nodes
    would answer for it on the subnet, and the policy routes of one would send the other's traffic to it. Only nodes
    with eni_enabled, and their NICs in eni_interfaces when it lists them (the role configures no other)."""
    owners: dict[str, list[str]] = {}  # address -> where it is set, in words
    for node in nodes:
        if node.address and is_ipv4(node.address):
            owners.setdefault(node.address, []).append(f"{node.name}'s ansible_host")
    for node in nodes:
        if ansible_bool(role_defaults.value_of(node.values, "eni_enabled")) is not True:
            continue
        addresses = node.values.get("eni_addresses")
        listed = role_defaults.value_of(node.values, "eni_interfaces")
        for nic, value in addresses.items() if isinstance(addresses, Mapping) else ():
            interface = _ipv4_interface(value)
            if interface is None or (isinstance(listed, list) and listed and nic not in listed):
                continue
            owners.setdefault(str(interface.ip), []).append(f"{node.name}'s eni_addresses.{nic}")
    found = []
    in_play = {n.name for n in nodes if n.in_play}
    for address, where in owners.items():
        if len(where) < 2 or not any("eni_addresses" in w for w in where):
            continue  # a duplicate ansible_host alone is duplicate_problems' to name
        for entry in where:
            host, _, variable = entry.partition("'s ")
            if host in in_play and variable.startswith("eni_addresses"):
                others = ", ".join(w for w in where if w != entry)
                found.append(Problem(host, variable, f"{host}: {variable} is {address}, which is also {others}; "
                                                     "allowed: an address no other NIC or node of the cluster has"))
    return found


def eni_number_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """eni_mtu within ENI_MTU_RANGE (null: the role's rule), and eni_route_table_base such that every secondary
    NIC's table (the base, +1 per NIC: tuning.eni_plan) is a routing table id Linux has and does not reserve. The
    NICs are counted from eni_interfaces where it lists them; found by pattern, they are known only from the node's
    facts, so the base must then leave room for tuning.ENI_SPAN of them, the tables reset counts as the role's.
    A value that is no whole number is the argument spec's to name."""
    found = []
    mtu = values.get("eni_mtu")
    number = whole_number(mtu)
    low, high = ENI_MTU_RANGE
    if number is not None and not low <= number <= high:
        message = (f"{host}: eni_mtu={show(mtu)} is not allowed; allowed: a whole number from {low} (IPv4's least "
                   f"MTU) to {high} (the largest jumbo frame), or null for the role's 8500 (erdma with jumbo frames) "
                   "or 1400")  # fmt: skip
        found.append(Problem(host, "eni_mtu", message))
    interfaces = values.get("eni_interfaces")
    listed = isinstance(interfaces, list) and len(interfaces) > 0
    count = len(interfaces) if isinstance(interfaces, list) and listed else tuning.ENI_SPAN
    nics = (
        f"the {count} NIC(s) of eni_interfaces"
        if listed
        else f"up to {count} secondary NICs (eni_interfaces lists none: their count is known only on the node)"
    )
    found += _id_range_problems(host, "eni_route_table_base", values, count, nics, ROUTE_TABLE_MAX,
                                RESERVED_ROUTE_TABLES, "routing tables", "table is a Linux routing table id",
                                "the kernel's default, main and local tables")  # fmt: skip
    found += _id_range_problems(host, "eni_rule_priority_base", values, count, nics, RULE_PRIORITY_MAX,
                                RESERVED_RULE_PRIORITIES, "rule priorities", "rule's priority is a Linux rule priority",
                                "the kernel's rules for the main and default tables")  # fmt: skip
    return found


#: A dpkg architecture name (amd64, arm64, i386, ppc64el, s390x...).
_DPKG_ARCH = re.compile(r"[a-z0-9][a-z0-9-]*\Z")


def repository_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """The erdma repository's URLs and architectures go into a deb822 .sources file and a .repo file line by line:
    a newline in one would add a field of its own (Trusted: yes, gpgcheck=0). Each URL must be one word (yum's
    $releasever and $basearch are allowed), each architecture a dpkg architecture name. Unset: the role's own."""
    found = []
    for variable in ("rdma_repos_erdma_apt_url", "rdma_repos_erdma_yum_baseurl"):
        if variable not in values:
            continue
        url = values[variable]
        # is_download_url already refuses blanks and newlines; isprintable the other control characters.
        if not (is_download_url(url) and isinstance(url, str) and url.isprintable()):
            message = (f"{host}: {variable}={show(url)} is not allowed; allowed: one http(s), ftp or file URL "
                       "without blanks, newlines or other control characters")  # fmt: skip
            found.append(Problem(host, variable, message))
    architectures = values.get("rdma_repos_erdma_apt_architectures")
    if isinstance(architectures, list):
        bad = [a for a in architectures if not (isinstance(a, str) and _DPKG_ARCH.match(a))]
        if bad or not architectures:
            message = (f"{host}: rdma_repos_erdma_apt_architectures={show(architectures)} is not allowed; allowed: "
                       "one or more dpkg architecture names such as amd64 or arm64")  # fmt: skip
            found.append(Problem(host, "rdma_repos_erdma_apt_architectures", message))
    return found


def eni_interface_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """eni_interfaces naming a NIC twice passed one-ENI-per-GPU with one NIC for two GPUs, and planned two tables and
    two rules for it (netplan's keys twice, two .network contents for one file): refused, naming the NIC."""
    interfaces = values.get("eni_interfaces")
    if not isinstance(interfaces, list):
        return []  # text or a mapping is the argument spec's to name
    twice = [name for name, seen in Counter(map(str, interfaces)).items() if seen > 1]
    if not twice:
        return []
    message = (f"{host}: eni_interfaces={show(interfaces)} lists {', '.join(twice)} more than once; allowed: each "
               "secondary NIC once (one routing table and one rule per NIC)")  # fmt: skip
    return [Problem(host, "eni_interfaces", message)]


def _id_range_problems(
    host: str,
    variable: str,
    values: Mapping[str, object],
    count: int,
    nics: str,
    most: int,
    reserved: range,
    noun: str,
    each: str,
    reserved_words: str,
) -> list[Problem]:
    """``variable`` is the first of ``count`` consecutive ids (one per NIC: tuning.eni_plan), which must all lie in
    1..``most`` outside ``reserved``. A value that is no whole number is the argument spec's to name."""
    base = values.get(variable)
    number = whole_number(base)
    if number is None:
        return []
    first, last = number, number + count - 1
    reserved_low, reserved_high = reserved[0], reserved[-1]
    if first >= 1 and last <= most and not (first <= reserved_high and last >= reserved_low):
        return []
    # below the reserved ids (when the NICs fit there), or above them
    ranges = [f"from 1 to {reserved_low - count}"] if reserved_low - count >= 1 else []
    ranges.append(f"from {reserved_high + 1} to {most - count + 1}")
    message = (f"{host}: {variable}={show(base)} is not allowed: {nics} would use {noun} {first} to {last}; allowed: "
               f"a whole number {' or '.join(ranges)}, so that every {each} (1 to {most}) other than "
               f"{reserved_low}-{reserved_high} ({reserved_words})")  # fmt: skip
    return [Problem(host, variable, message)]


def threshold_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """The benchmark's thresholds (rdmaforge.bench.verdict.THRESHOLDS) must be above 0 or empty: a threshold of 0 or
    less would pass anything (0 GB/s included); empty is the way to report a component without judging it."""
    found = []
    for variable, at_most in THRESHOLDS.items():
        if variable in values and threshold_problem(values[variable], at_most) is not None:
            message = (f"{host}: {variable}={show(values[variable])} is not allowed; allowed: "
                       f"{threshold_allowed(at_most)}")  # fmt: skip
            found.append(Problem(host, variable, message))
    if TOLERANCE in values and tolerance_problem(values[TOLERANCE]) is not None:
        message = f"{host}: {TOLERANCE}={show(values[TOLERANCE])} is not allowed; allowed: {TOLERANCE_ALLOWED}"
        found.append(Problem(host, TOLERANCE, message))
    return found


# --- nccl-tests binaries -----------------------------------------------------------------------------


def nccl_tests_make_args_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """An extra make argument that sets one of the variables rdmaforge puts on nccl-tests' make line (MPI=0,
    BIN_FILES_LIST=...): make takes the last assignment, so it overrode the inventory's value unseen, and the build
    id and manifest named what was not built. Refused, naming the variable that decides it."""
    extra = values.get("nccl_tests_make_extra_args")
    found = []
    for argument in extra if isinstance(extra, list) else []:
        name = str(argument).partition("=")[0].strip()
        if "=" in str(argument) and name in nccl_build.NCCL_TESTS_MAKE_VARIABLES:
            decided_by = nccl_build.NCCL_TESTS_MAKE_VARIABLES[name]
            message = (f"{host}: nccl_tests_make_extra_args={show(extra)} sets {name}, which rdmaforge sets from "
                       f"{decided_by}; allowed: other make variables (set {decided_by} instead)")  # fmt: skip
            found.append(Problem(host, "nccl_tests_make_extra_args", message))
            break
    return found


#: Paths that go onto a make command line as NAME=PATH, where nccl-tests' and NCCL's Makefiles use them unquoted
#: (-I$(MPI_HOME)/include): a blank splits the path into two words, and the build fails an hour in.
MAKE_PATHS = ("nccl_build_cuda_home", "nccl_build_prefix_root", "nccl_tests_nccl_home", "nccl_tests_mpi_home")


def make_path_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A MAKE_PATHS value with a blank in it (nccl_tests_mpi_home: each OS family's path), and mpi_prefix where
    mpi_install_method is prefix: nccl-tests' MPI_HOME is then that OpenMPI's prefix."""
    found = []
    prefix = role_defaults.value_of(values, "mpi_install_method") == "prefix"
    for variable in (*MAKE_PATHS, "mpi_prefix") if prefix else MAKE_PATHS:
        value = values.get(variable)
        paths = list(value.values()) if isinstance(value, Mapping) else [value]
        blank = [str(path) for path in paths if isinstance(path, str) and any(c.isspace() for c in path)]
        if blank:
            message = (f"{host}: {variable}={show(value)} has a blank in {show(blank[0])}, and the Makefiles use it "
                       "unquoted (it would split into two words); allowed: a path without blanks (a link to the "
                       "directory)")  # fmt: skip
            found.append(Problem(host, variable, message))
    return found


def nccl_tests_binaries_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A partial nccl-tests build (nccl_tests_binaries) whose names make cannot take, or that leaves out a binary the
    benchmark (benchmark_collectives) or pairwise's GPU path (sendrecv) would run: found here, not by a benchmark
    that finds no binary after a build. An empty list builds every binary; a list of another type is the argument
    spec's to name."""
    binaries = role_defaults.value_of(values, "nccl_tests_binaries")
    if not isinstance(binaries, list) or not binaries:
        return []
    allowed = ("allowed: a list of collectives as nccl-tests' src/Makefile BIN_FILES_LIST names them (all_reduce "
               "builds all_reduce_perf), or [] for every binary of the release")  # fmt: skip
    bad = [name for name in binaries if not isinstance(name, str) or name.endswith("_perf")
           or not nccl_build.NCCL_TESTS_BINARY.fullmatch(name)]  # fmt: skip
    if bad:
        hint = "; without the _perf suffix" if any(str(name).endswith("_perf") for name in bad) else ""
        message = f"{host}: nccl_tests_binaries={show(binaries)}: {show(bad[0])} is not allowed; {allowed}{hint}"
        return [Problem(host, "nccl_tests_binaries", message)]
    if not ansible_bool(role_defaults.value_of(values, "nccl_tests_enabled")):
        return []
    needed: dict[str, str] = {}
    if ansible_bool(role_defaults.value_of(values, "benchmark_nccl_tests")):
        collectives = role_defaults.value_of(values, "benchmark_collectives")
        for name in collectives if isinstance(collectives, list) else []:
            needed.setdefault(str(name), f"benchmark_collectives={show(collectives)}")
    method = role_defaults.value_of(values, "pairwise_method")
    if method != "iperf3":
        needed.setdefault("sendrecv", f"pairwise_method={show(method)} (sendrecv_perf on GPU nodes)")
    missing = [(name, why) for name, why in needed.items() if name not in binaries]
    return [
        Problem(
            host,
            "nccl_tests_binaries",
            f"{host}: nccl_tests_binaries={show(binaries)} leaves out {name}, which {why} runs; add {name}, or set "
            "nccl_tests_binaries: [] to build every binary",
        )  # fmt: skip
        for name, why in missing
    ]


# --- renamed variables ---------------------------------------------------------------------------

#: Role variables that were renamed: old name -> the name that replaced it. An inventory that still sets the old
#: name would otherwise be ignored without a word.
RENAMED_VARIABLES: dict[str, str] = {
    "doctor_nic_exclude": "preflight_nic_exclude",
    "doctor_ip_path": "preflight_ip_path",
}


#: The variables whose values become environment variables (nccl.conf lines, the containers' env, the benchmark's
#: trainings).
ENV_MAPPINGS = ("nccl_env_overrides", "workload_manifests_env", "benchmark_e2e_extra_env")


def env_value_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A list or mapping in nccl_env_overrides (or workload_manifests_env) would be written to nccl.conf as Python's
    repr (``NCCL_ALGO=['Ring', 'Tree']``): refused here, before any connection, in the words render uses
    (nccl_env.text_value_problem). A value that is no mapping at all is the argument spec's to name."""
    found = []
    for variable in ENV_MAPPINGS:
        env = values.get(variable)
        for key, value in env.items() if isinstance(env, Mapping) else ():
            problem = nccl_env.text_value_problem(key, value)
            if problem is not None:
                found.append(Problem(host, variable, f"{host}: {variable}.{problem}"))
    # The profile and accelerator entries the node uses, set in the inventory: null fails role nccl_env's merge, a
    # list value is written as Python's repr (rdmaforge render refuses the same).
    chosen = (("nccl_env_profiles", "nccl_env_profile"), ("nccl_env_accelerators", "nccl_env_accelerator"))
    for table, chooser in chosen:
        entries = values.get(table)
        try:
            name = role_defaults.evaluated_value_of(values, chooser)
        except (KeyError, ValueError):  # a template Python cannot evaluate: the role's check stays
            continue
        if not isinstance(entries, Mapping) or not isinstance(name, str) or name not in entries:
            continue
        entry = entries[name]
        if not isinstance(entry, Mapping):
            found.append(Problem(host, table, f"{host}: {table}[{name}]={show(entry)} is not valid; allowed: a "
                                              "mapping of settings ({} for none)"))  # fmt: skip
            continue
        found += [Problem(host, table, f"{host}: {table}[{name}].{problem}") for key, value in entry.items()
                  if (problem := nccl_env.text_value_problem(key, value)) is not None]  # fmt: skip
    return found


def _mapping_of(values: Mapping[str, object], variable: str) -> Mapping[str, Any]:
    """A role variable's mapping value (its default when unset); {} for anything else, which its argument spec names."""
    value = role_defaults.value_of(values, variable)
    return value if isinstance(value, Mapping) else {}


def fact_free_role_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """Role checks that need no fact, made with the inventory's, before any node is connected to: the roles'
    validate.yml (which preflight runs after gathering facts) holds them too, for a role run on its own. Late, they
    were never shown where a node was unreachable, and came after every node was connected to."""
    found = []
    accelerators = _mapping_of(values, "nccl_env_accelerators")
    accelerator = role_defaults.value_of(values, "nccl_env_accelerator")
    if accelerators and isinstance(accelerator, str) and not _templated_text(accelerator) \
            and accelerator not in accelerators:  # fmt: skip
        found.append(Problem(host, "nccl_env_accelerator",
                             f"{host}: nccl_env_accelerator={show(accelerator)} is not a key of nccl_env_accelerators"
                             f"{_did_you_mean(accelerator, [str(k) for k in accelerators])}; allowed: "
                             f"{', '.join(map(str, accelerators))}"))  # fmt: skip
    profiles = values.get("nccl_env_profiles")
    if isinstance(profiles, Mapping) and values.get("rdmaforge_fabric") in fabrics.NAMES:
        try:
            profile = role_defaults.evaluated_value_of(values, "nccl_env_profile")
        except (KeyError, ValueError):  # a template Python cannot evaluate: the role's check stays
            profile = None
        # The role looks the profile up with `| default({})`: an inventory's table without it gave the hosts none of
        # the profile's NCCL settings, without a word (render refused it; now both do).
        if isinstance(profile, str) and profile not in profiles:
            have = ", ".join(map(str, profiles)) or "none (the table is empty)"
            found.append(Problem(host, "nccl_env_profiles",
                                 f"{host}: nccl_env_profiles has no profile {profile!r} (nccl_env_profile), so role "
                                 f"nccl_env would give this node none of its NCCL settings; allowed: a table with a "
                                 f"{profile!r} profile (it has {have}), or leave nccl_env_profiles unset for the "
                                 "role's"))  # fmt: skip
    # The same rule as roles/nccl_build/tasks/validate.yml (a role run on its own, -e): nccl_build.arch_list_problem.
    archs = values.get("nccl_cuda_archs")
    if isinstance(archs, list) and (why := nccl_build.arch_list_problem(
            archs, role_defaults.value_of(values, "nccl_build_new_archs"))):  # fmt: skip
        found.append(Problem(host, "nccl_cuda_archs", f"{host}: nccl_cuda_archs={show(archs)} is not allowed; {why}"))
    return found


def every_role_default(roles_dir: str | Path) -> Iterator[tuple[str, str, Any]]:
    """(role, variable, documented default) of every role's defaults/main.yml under ``roles_dir``, in role order: the
    one walk the checks that derive a set of variables from the roles' defaults share."""
    for path in sorted(Path(roles_dir).glob("*/defaults/main.yml")):
        role = path.parent.parent.name
        for name, value in role_defaults.defaults(role, roles_dir=roles_dir).items():
            yield role, str(name), value


def _is_absolute_path(value: object) -> bool:
    return isinstance(value, str) and value.startswith("/")


@functools.lru_cache(maxsize=4)
def node_paths(roles_dir: str) -> dict[str, str]:
    """Variable -> its documented default, for every role variable that is a path on the node: its default is an
    absolute path (a mapping of them, per OS family), or a template the roles evaluate to one (nccl_tests_nccl_home
    from nccl_build_prefix_root). Read from the roles' defaults, so a path variable added later is covered. Controller
    paths are templates of the collection's filters (rdmaforge_workspace_path) and are not in it."""
    found: dict[str, str] = {}
    for role, name, value in every_role_default(roles_dir):
        shown = value
        if isinstance(value, str) and _templated_text(value) and "rdmaforge." not in value:
            try:
                shown = role_defaults.evaluated_default(name, {}, role)
            except (KeyError, ValueError):
                continue
        paths = list(shown.values()) if isinstance(shown, Mapping) and shown else [shown]
        if all(_is_absolute_path(item) for item in paths):
            found[name] = show(shown)
    return found


def relative_path_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A node path given relative (``mpi_prefix: opt/openmpi``) or empty: a module would resolve it against the
    remote user's working directory (its home, or / under become) and install, link or write somewhere else than the
    rest of the cluster looks. Refused before any node is touched."""
    found = []
    for variable, default in node_paths(str(paths.ROLES_DIR)).items():
        if variable not in values:
            continue
        value = values[variable]
        items = list(value.values()) if isinstance(value, Mapping) else [value]
        wrong = [item for item in items if isinstance(item, str) and not _templated_text(item)
                 and not _is_absolute_path(item)]  # fmt: skip
        if wrong:
            message = (f"{host}: {variable}={show(value)} is not an absolute path on the node ({show(wrong[0])}); "
                       f"allowed: an absolute path, such as the default {default}")  # fmt: skip
            found.append(Problem(host, variable, message))
    return found


def rdma_core_profile_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """rdma_core_profile set to another fabric than the node's: the node would get that fabric's packages while
    nccl_env, doctor, bench and verify judge it by rdmaforge_fabric (two definitions of one node's fabric)."""
    fabric, profile = values.get("rdmaforge_fabric"), values.get("rdma_core_profile")
    if "rdma_core_profile" not in values or _templated(profile) or fabric not in fabrics.NAMES or profile == fabric:
        return []
    return [Problem(host, "rdma_core_profile",
                    f"{host}: rdma_core_profile={show(profile)} differs from rdmaforge_fabric={show(fabric)}: the node "
                    f"would get another fabric's RDMA packages while every other role and check judges it as "
                    f"{fabric}; allowed: leave rdma_core_profile unset (it follows rdmaforge_fabric), or "
                    f"{show(fabric)}; add packages with rdma_core_extra_packages")]  # fmt: skip


def group_name_problems(host: str, values: Mapping[str, object], groups: Mapping[str, Sequence[str]]) -> list[Problem]:
    """A variable that names the group a role works on, set to a group with no hosts: cluster_hosts then wrote no
    /etc/hosts lines and said nothing, mpi_launch wrote an empty hostfile."""
    found = []
    for variable in group_variables(str(paths.ROLES_DIR)):
        name = values.get(variable)
        if not isinstance(name, str) or _templated_text(name) or groups.get(name):
            continue
        having = sorted(g for g, hosts in groups.items() if g not in ("all", "ungrouped") and hosts)
        found.append(Problem(host, variable, f"{host}: {variable}={show(name)} names no group with hosts"
                                             f"{_did_you_mean(name, having)}; allowed: a group of the inventory: "
                                             f"{', '.join(having)}"))  # fmt: skip
    return found


@functools.lru_cache(maxsize=4)
def group_variables(roles_dir: str) -> tuple[str, ...]:
    """The variables that name the group a role works on: every role default whose name ends in _group
    (cluster_hosts_group, preflight_cluster_group, ...), read from the roles so that a role added later is covered."""
    return tuple(sorted(name for _, name, _ in every_role_default(roles_dir) if name.endswith("_group")))


def rdma_fallback_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """On an RDMA fabric, NCCL settings that send its traffic over TCP sockets without an error
    (nccl_env.rdma_fallback_problems): the settings in force (profile, accelerator, overrides, as role nccl_env
    merges them) against the node's net plugin. Named by the variable that brought the setting: nccl_env_overrides,
    the accelerator's, or the profile's (nccl_env_profile: tcp on an infiniband node)."""
    if not fabrics.is_rdma(values.get("rdmaforge_fabric")):
        return []
    try:
        profile = role_defaults.evaluated_value_of(values, "nccl_env_profile")
        provider = role_defaults.evaluated_value_of(values, "nccl_plugin_provider")
    except (KeyError, ValueError):  # a template Python cannot evaluate: Ansible's role check stays
        return []
    profiles = _mapping_of(values, "nccl_env_profiles")
    accelerators = _mapping_of(values, "nccl_env_accelerators")
    accelerator_name = role_defaults.value_of(values, "nccl_env_accelerator")
    layers: list[tuple[str, object]] = [
        (f"nccl_env_profile={show(profile)}", profiles.get(profile) if isinstance(profile, str) else None),
        (f"nccl_env_accelerator={show(accelerator_name)}",
         accelerators.get(accelerator_name) if isinstance(accelerator_name, str) else None),
        ("nccl_env_overrides", _mapping_of(values, "nccl_env_overrides")),
    ]  # fmt: skip
    env: dict[str, str] = {}
    source: dict[str, str] = {}
    for name, layer in layers:
        if not isinstance(layer, Mapping):
            continue
        env = nccl_env.merge(env, layer)
        source.update({str(key): name for key in layer})
    found = []
    fabric = values.get("rdmaforge_fabric")
    for fallback in nccl_env.rdma_fallbacks(env, provider):
        origin = source.get(fallback.setting, "nccl_env_overrides")
        found.append(Problem(
            host, origin.split("=", 1)[0],
            f"{host}: {origin} (rdmaforge_fabric={fabric}, nccl_plugin_provider={provider}): {fallback.why}; "
            f"allowed: {fallback.allowed}{_OTHER_WAYS.get(fallback.setting, '')}",
        ))  # fmt: skip
    return found


#: What else keeps a setting's RDMA fabric off sockets, on hosts (rdma_fallback_problems).
_OTHER_WAYS = {"NCCL_IB_DISABLE": ", a net plugin (nccl_plugin_provider: aiacc or harp), or a socket fabric "
                                  "(rdmaforge_fabric: tcp)"}  # fmt: skip


def doctor_accept_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """doctor_accept maps a doctor check to the reason its deviation is accepted. The argument spec's dict also takes
    "memlock=reason" text, which reached doctor as no mapping, so nothing was accepted and the line named a check
    "(not a mapping)"; a key that is no check accepted nothing; an empty reason accepted a deviation without one."""
    if "doctor_accept" not in values or values["doctor_accept"] is None:
        return []
    from rdmaforge.doctor_checks import CHECKS  # the checks doctor runs: one list

    given = values["doctor_accept"]
    allowed = f"a mapping of doctor checks ({', '.join(CHECKS)}) to the reason each is accepted"
    if not isinstance(given, Mapping):
        why = f"doctor_accept={show(given)} is not a mapping; allowed: {allowed} (in YAML, or -e with JSON)"
        return [Problem(host, "doctor_accept", f"{host}: {why}")]
    found = []
    for check, reason in given.items():
        if check not in CHECKS:
            why = f"doctor_accept names {show(check)}, which is no doctor check{_did_you_mean(check, CHECKS)}"
            found.append(Problem(host, "doctor_accept", f"{host}: {why}; allowed: {allowed}"))
        elif not isinstance(reason, str) or not reason.strip():
            why = f"doctor_accept.{check}={show(reason)} gives no reason"
            found.append(Problem(host, "doctor_accept", f"{host}: {why}; allowed: {allowed} (text that says why)"))
    return found


#: List variables whose empty value would make a check pass having checked nothing, and what each must hold.
NON_EMPTY_LISTS = {"ssh_trust_check_by": "address, name, or both (ssh_trust_check: false turns the check off)"}


def empty_list_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """ssh_trust_check_by: [] passed its argument spec (no element is a bad choice), so the SSH check probed no
    pair and passed: refused, naming what it must hold."""
    return [Problem(host, name, f"{host}: {name}=[] names nothing to check by; allowed: {allowed}")
            for name, allowed in NON_EMPTY_LISTS.items() if values.get(name) == []]  # fmt: skip


def renamed_variable_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A renamed variable set under its old name (its value would be ignored)."""
    return [
        Problem(host, old, f"{host}: {old} was renamed to {new}; set {new} instead (the old name is ignored)")
        for old, new in RENAMED_VARIABLES.items()
        if old in values
    ]


# --- versions --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionedSource:
    """A variable naming what a role builds from (a git ref, a tarball URL), used when the role's ``source``
    variable is ``in_use``, and the ``version`` variable it must agree with."""

    variable: str
    source: str
    in_use: str
    version: str


def versioned_sources() -> list[VersionedSource]:
    """The git pins' refs and the downloads' URLs that name a version (GIT_PINS, DOWNLOADS): one list of the
    roles' sources, so a check names the source variable and value a role really uses."""
    refs = [VersionedSource(p.ref, p.source, p.in_use, p.version) for p in GIT_PINS]
    urls = [VersionedSource(d.url, d.source, d.in_use, d.version) for d in DOWNLOADS if d.url and d.version]
    return refs + urls


#: major.minor.patch at the start of a tag or file name or after - or _ (so cuda12.4 in a name is not one)
_VERSION = re.compile(r"(?:^|[-_])v?([0-9]+\.[0-9]+\.[0-9]+)(?![0-9.])")


def version_in(source: str) -> str | None:
    """The dotted version a git tag (``v2.21.5-1``) or a tarball's file name (``nccl-2.21.5-1.tar.gz``) names."""
    name = source.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"\.(?:tar\.[a-z0-9]+|tgz|txz|zip)$", "", name)
    match = _VERSION.search(name)
    return match.group(1) if match else None


def version_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A version and the git ref or tarball it is built from must agree: the version names the install prefix
    and the cached package, so a ref of another version would install one NCCL under another's name.
    A source the inventory sets is compared with the version in use, the inventory's or else the role's default (a
    tarball of another release with the version left at its default was built and installed under the default's
    name); a source without a version in its name is not checked. The source in use is the inventory's, else the
    role's default (rdmaforge.role_defaults)."""
    found = []
    for each in versioned_sources():
        source = values.get(each.variable)
        if not isinstance(source, str):
            continue  # the role's default source, which names its default version
        version = role_defaults.value_of(values, each.version)
        if not is_release(version):
            continue  # release_problems' to name (or a template): no source could be of that version
        in_use = role_defaults.value_of(values, each.source)
        if in_use != each.in_use:
            continue
        named = version_in(source)
        if named is not None and named != str(version):
            found.append(
                Problem(
                    host,
                    each.variable,
                    f"{host}: {each.variable}={show(source)} is version {named}, but {each.version}={show(version)} "
                    f"and {each.source}={show(in_use)} builds from {each.variable}; allowed: {each.variable} of "
                    f"version {version} (or set {each.version}: {named!r})",
                )
            )
    return found


#: A release as the roles take it: MAJOR.MINOR.PATCH in digits. nccl_build's check reads it with
#: nccl_build.version_code, and the default refs are made of it (v2.29.7-1, v2.17.8): from 'v2.29.7-1' the role would
#: check out 'vv2.29.7-1-1'.
_RELEASE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


def is_release(value: object) -> bool:
    """MAJOR.MINOR.PATCH in digits, as text (a YAML number such as 2.29 is none)."""
    return isinstance(value, str) and _RELEASE.fullmatch(value) is not None


def release_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A version the inventory sets for a git-pinned source (GIT_PINS) must be a release number: any other text makes
    a tag that does not exist (or, unpinned, a checkout that fails on the builder after the nodes were changed), and
    ncclGetVersion's check cannot read it. Whatever the source: the version also names the build and its prefix."""
    found = []
    for pin in GIT_PINS:
        if pin.version not in values or is_release(values[pin.version]):
            continue
        default, ref = role_defaults.default_of(pin.version), pin.default_ref
        message = (f"{host}: {pin.version}={show(values[pin.version])} is not allowed; allowed: a release number, "
                   f"MAJOR.MINOR.PATCH in digits such as {show(default)}, without the tag's v or suffix (the role "
                   f"makes {pin.ref}={show(ref)} of {show(default)})")  # fmt: skip
        found.append(Problem(host, pin.version, message))
    return found


_NCCL_SERIES = re.compile(r"[0-9]+(\.[0-9]+){1,2}")


def documented_nccl_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """nccl_plugin_documented_nccl is [lowest, highest] NCCL release as text: a YAML number loses what a version
    needs (2.10 is the float 2.1, which the argument spec turns into '2.1'), so NCCL 2.9 would be outside
    [2.8, 2.1] and warned of, and 2.10 itself judged as 2.1."""
    given = values.get("nccl_plugin_documented_nccl")
    if "nccl_plugin_documented_nccl" not in values or given == []:
        return []
    if (
        isinstance(given, list)
        and len(given) == 2
        and all(isinstance(v, str) and _NCCL_SERIES.fullmatch(v) for v in given)
    ):
        return []
    message = (f"{host}: nccl_plugin_documented_nccl={show(given)} is not allowed; allowed: [] or two NCCL releases "
               "as quoted text, lowest first, such as ['2.8', '2.16'] (unquoted, 2.10 is the number 2.1)")  # fmt: skip
    return [Problem(host, "nccl_plugin_documented_nccl", message)]


# --- pinned git commits ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GitPin:
    """A git source pinned to a commit: the ref must check out ``commit`` (roles/build_once fails otherwise).
    The fields name the role's variables; their values are the role's defaults (rdmaforge.role_defaults)."""

    commit: str  # the commit variable
    ref: str  # the ref variable
    source: str  # the role's source variable
    in_use: str  # the value of ``source`` that builds from the ref
    version: str  # the version variable the ref names
    switch: str | None = None  # the role's on/off variable, when it has one

    def ref_of(self, values: Mapping[str, object]) -> str | None:
        """The ref the build checks out for a host whose variables are ``values``: the inventory's, else the role's
        default ref evaluated for them (rdmaforge.role_defaults: made of the version, whatever its Jinja);
        None when that is not a ref to compare (not a string, or a default needing what no inventory holds)."""
        try:
            ref = role_defaults.evaluated_value_of(values, self.ref)
        except ValueError:
            return None
        return ref if isinstance(ref, str) else None

    @property
    def default_ref(self) -> str | None:
        return self.ref_of({})

    @property
    def default_commit(self) -> str:
        return str(role_defaults.default_of(self.commit))


#: The roles' pinned git sources.
GIT_PINS: tuple[GitPin, ...] = (
    GitPin("nccl_build_git_commit", "nccl_build_git_ref", "nccl_build_source", "git", "nccl_build_version"),
    GitPin(
        "nccl_tests_git_commit",
        "nccl_tests_git_ref",
        "nccl_tests_source",
        "git",
        "nccl_tests_version",
        "nccl_tests_enabled",
    ),
)

_GIT_COMMIT = re.compile(r"[0-9a-fA-F]{40}")


def git_commit_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A pinned commit must be a full commit id (or empty: unpinned); a git module given a short or misspelled one
    would fail only on the builder, after the nodes were changed. And a ref other than the default one, with the
    commit left at the default ref's, would fail the build's commit check on the builder: refused here first."""
    found = []
    for pin in GIT_PINS:
        if pin.commit in values:
            value = values[pin.commit]
            if not (isinstance(value, str) and (value == "" or _GIT_COMMIT.fullmatch(value))):
                found.append(
                    Problem(
                        host,
                        pin.commit,
                        f"{host}: {pin.commit}={show(value)} is not allowed; allowed: a full commit id, 40 "
                        f"hexadecimal digits as `git rev-parse '<tag>^{{commit}}'` prints them (quoted in YAML), or "
                        "'' to build the ref unpinned",
                    )
                )
            continue
        if role_defaults.value_of(values, pin.source) != pin.in_use:
            continue
        if pin.switch is not None and not ansible_bool(role_defaults.value_of(values, pin.switch)):
            continue
        if pin.version in values and not is_release(values[pin.version]):
            continue  # release_problems names the version: the ref made of it is no tag to look up a commit of
        ref, default_ref = pin.ref_of(values), pin.default_ref
        # A ref still holding a template (an inventory value not rendered here) is not judged.
        if ref is None or default_ref is None or "{{" in ref or ref == default_ref:
            continue
        found.append(
            Problem(
                host,
                pin.commit,
                f"{host}: {pin.commit} is left at {pin.default_commit!r}, the commit of {default_ref}, but the "
                f"build checks out {pin.ref}={show(ref)}; allowed: set {pin.commit} to the commit of {ref} (git "
                f"rev-parse '{ref}^{{commit}}', verified out of band), or '' to build it unpinned",
            )
        )
    return found


# --- downloads -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Download:
    """A file a role downloads and checks against a pinned sha256, used when ``source`` is ``in_use``."""

    url: str | None  # the URL variable (None: the role's URL is not the inventory's to set)
    sha256: str
    source: str
    in_use: str
    switch: str | None = None  # the role's on/off variable, when it has one
    version: str | None = None  # the version variable the URL's file name names, when the role has one


#: The pinned downloads, as their roles' defaults name them (their defaults are the roles').
DOWNLOADS: tuple[Download, ...] = (
    Download(
        "nccl_build_tarball_url",
        "nccl_build_tarball_sha256",
        "nccl_build_source",
        "tarball",
        version="nccl_build_version",
    ),
    Download(
        "nccl_tests_tarball_url",
        "nccl_tests_tarball_sha256",
        "nccl_tests_source",
        "tarball",
        "nccl_tests_enabled",
        version="nccl_tests_version",
    ),
    Download(None, "nccl_plugin_aiacc_package_sha256", "nccl_plugin_aiacc_source", "package"),
)

#: sha256 pins with a shipped default, checked when the inventory sets them.
SHA256_PINS: tuple[str, ...] = ("nccl_plugin_aiacc_sdist_sha256", "nccl_plugin_aiacc_library_sha256")
#: URLs with a shipped default that get_url fetches, checked when the inventory sets them (the tarballs' are
#: DOWNLOADS', checked where their source is in use): one in the wrong form failed only at its download, after
#: earlier roles had changed the nodes.
URL_PINS: tuple[str, ...] = ("rdma_repos_erdma_gpg_key_url", "nccl_plugin_aiacc_sdist_url", "nccl_plugin_aiacc_deb_url",
                             "nccl_plugin_aiacc_rpm_url")  # fmt: skip
#: Repositories git clones, checked when the inventory sets them.
GIT_URL_PINS: tuple[str, ...] = ("nccl_build_git_url", "nccl_tests_git_url")
_GIT_URL_ALLOWED = ("a URL git clones: https://, http://, ssh://, git:// or file:// with a host or path, "
                    "user@host:path, or an absolute path")  # fmt: skip
#: A key fingerprint as rdma_repos compares it: 40 hexadecimal digits once blanks are gone (gpg prints it in groups).
_FINGERPRINT = re.compile(r"[0-9A-Fa-f]{40}")


def is_git_url(value: object) -> bool:
    """What git clone takes: a URL of a transport git has, the scp-like user@host:path, or an absolute path."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        return False
    scheme, found, rest = value.partition("://")
    if found:
        return scheme.lower() in ("https", "http", "ssh", "git", "file") and bool(rest.strip("/"))
    if value.startswith("/"):
        return True
    return re.fullmatch(r"[^@/:]+@[^/:]+:.+", value) is not None

_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHA256_ALLOWED = "64 lower-case hexadecimal digits, as sha256sum prints them"
_URL_ALLOWED = "an http://, https:// or ftp:// URL with a host, or a file:// URL"


def is_download_url(value: object) -> bool:
    """What get_url can fetch: http(s) or ftp with a host, or a local file:// path; no spaces."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        return False
    scheme, _, rest = value.partition("://")
    if scheme.lower() == "file":
        return rest.startswith("/")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    return scheme.lower() in ("http", "https", "ftp") and bool(host.split(":", 1)[0])


def download_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """A download in use needs a fetchable URL and a sha256 that get_url and ``stat`` can compare: otherwise the
    role fails only after earlier roles have changed the nodes. The AIACC package is used only where the plugin
    provider is aiacc (the fabric profile's net plugin by default: aiacc on erdma)."""
    found = []
    provider = role_defaults.evaluated_value_of(values, "nccl_plugin_provider")
    for download in DOWNLOADS:
        source = role_defaults.value_of(values, download.source)
        if source != download.in_use or (download.source.startswith("nccl_plugin_") and provider != "aiacc"):
            continue
        if download.switch is not None and not ansible_bool(role_defaults.value_of(values, download.switch)):
            continue
        used = f"{download.source}={show(source)}"
        url = role_defaults.value_of(values, download.url) if download.url is not None else None
        if download.url is not None and not is_download_url(url):
            message = f"{host}: {download.url}={show(url)} is not a download URL, but {used} downloads it"
            found.append(Problem(host, download.url, f"{message}; allowed: {_URL_ALLOWED}"))
        sha256 = role_defaults.value_of(values, download.sha256)
        if not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
            message = f"{host}: {download.sha256}={show(sha256)} is not a sha256, but {used} needs one"
            found.append(Problem(host, download.sha256, f"{message}; allowed: {_SHA256_ALLOWED}"))
    for variable in SHA256_PINS:
        value = values.get(variable)
        if variable in values and not (isinstance(value, str) and _SHA256.fullmatch(value)):
            message = f"{host}: {variable}={show(value)} is not a sha256"
            found.append(Problem(host, variable, f"{message}; allowed: {_SHA256_ALLOWED}"))
    for variable in URL_PINS:
        value = values.get(variable)
        if variable in values and not _templated(value) and not is_download_url(value):
            found.append(Problem(host, variable, f"{host}: {variable}={show(value)} is not a download URL; allowed: "
                                                 f"{_URL_ALLOWED}"))  # fmt: skip
    for variable in GIT_URL_PINS:
        value = values.get(variable)
        if variable in values and not _templated(value) and not is_git_url(value):
            found.append(Problem(host, variable, f"{host}: {variable}={show(value)} is not a repository git can "
                                                 f"clone; allowed: {_GIT_URL_ALLOWED}"))  # fmt: skip
    fingerprint = values.get("rdma_repos_erdma_gpg_fingerprint")
    blanks_gone = re.sub(r"\s", "", fingerprint) if isinstance(fingerprint, str) else ""
    if isinstance(fingerprint, str) and fingerprint.strip() and not _FINGERPRINT.fullmatch(blanks_gone):
        found.append(Problem(host, "rdma_repos_erdma_gpg_fingerprint",
                             f"{host}: rdma_repos_erdma_gpg_fingerprint={show(fingerprint)} is not a key fingerprint; "
                             "allowed: the key's full fingerprint, 40 hexadecimal digits (blanks between groups as "
                             "gpg prints them are fine), or '' to have the role print the fingerprint it finds"))
    return found


# --- pip hash pinning --------------------------------------------------------------------------------

#: One requirement of pip's hash-checking mode: name (extras allowed), ==version, one or more sha256 hashes.
_HASHED_REQUIREMENT = re.compile(
    r"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:\[[A-Za-z0-9._,-]*\])?==(?P<version>[^\s;=]+)"
    r"(?:\s+--hash=sha256:[0-9a-f]{64})+"
)
_HASHED_ALLOWED = (
    "one package a line, `name==version --hash=sha256:<64 lower-case hexadecimal digits>` (one --hash per wheel), "
    "every package of the environment included (pip's --require-hashes), or [] for no hash check"
)


def _pip_name(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_hash_problems(host: str, values: Mapping[str, object]) -> list[Problem]:
    """benchmark_e2e_torch_requirements: every line a pinned, hashed requirement (a malformed one would make pip
    fail on every node, or worse, a hash pip does not read would pin nothing), and a line for the torch of
    benchmark_e2e_torch (the lines replace it)."""
    variable = "benchmark_e2e_torch_requirements"
    if variable not in values:
        return []
    lines = values[variable]
    if not isinstance(lines, list):
        return [Problem(host, variable, f"{host}: {variable}={show(lines)} is not allowed; allowed: a list, "
                                        f"{_HASHED_ALLOWED}")]  # fmt: skip
    found = []
    pinned: dict[str, str] = {}
    for index, line in enumerate(lines):
        match = _HASHED_REQUIREMENT.fullmatch(line.strip()) if isinstance(line, str) else None
        if match is None:
            message = f"{host}: {variable}[{index}]={show(line)} is not allowed; allowed: {_HASHED_ALLOWED}"
            found.append(Problem(host, variable, message))
        else:
            pinned[_pip_name(match["name"])] = match["version"]
    if found or not lines:
        return found
    torch = role_defaults.value_of(values, "benchmark_e2e_torch")
    wanted = re.fullmatch(r"\s*torch\s*==\s*(\S+)\s*", torch) if isinstance(torch, str) else None
    if "torch" not in pinned or (wanted is not None and pinned["torch"] != wanted[1]):
        have = f"torch=={pinned['torch']}" if "torch" in pinned else "no torch"
        want = f"a line for torch=={wanted[1]}" if wanted else "a line for torch"
        found.append(
            Problem(
                host,
                variable,
                f"{host}: {variable} pins {have}, but benchmark_e2e_torch={show(torch)} is what the benchmark "
                f"installs; allowed: {want}, hashed like the others",
            )
        )
    return found


# --- misspelled variables --------------------------------------------------------------------------


@dataclass(frozen=True)
class VariableNames:
    """``settable``: what an inventory sets for the roles (their options and defaults, and the variables checked
    here); ``mentioned``: every such-shaped name the roles, playbooks and rdmaforge's code use (facts included)."""

    settable: frozenset[str]
    mentioned: frozenset[str]


_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
#: A stretch of the characters _NAME matches, with an underscore in it. _NAME never matches across another character,
#: so it finds the same names in these stretches alone, with far fewer places to start from.
_NAME_STRETCH = re.compile(r"[a-z0-9_]*_[a-z0-9_]*")
#: How close a name must be to one of ours to be called a misspelling of it (difflib's ratio).
_MISSPELLING_CUTOFF = 0.85


def variable_names(roles_dir: str | Path) -> VariableNames:
    """The names the misspelling check knows, from the roles beside preflight (and their playbooks)."""
    return _variable_names(str(Path(roles_dir).resolve()))


@functools.lru_cache(maxsize=8)
def _variable_names(roles_dir: str) -> VariableNames:
    """Read once per process (a run): about 0.2 s for every role, playbook and module of rdmaforge."""
    roles = Path(roles_dir)
    settable = {"rdmaforge_fabric", *WHOLE_NUMBERS, *POSITIVE_NUMBERS, *GPU_COUNTS, *THRESHOLDS}
    settable.update(merged_argument_specs(discover_argument_specs(roles))["options"])
    settable.update(name for _, name, _ in every_role_default(roles))
    files = [*roles.rglob("*.y*ml"), *roles.parent.joinpath("playbooks").glob("*.y*ml")]
    files += Path(__file__).parent.rglob("*.py")
    mentioned = set(settable)
    for path in files:
        mentioned.update(names_in(path.read_text(errors="replace")))
    return VariableNames(frozenset(settable), frozenset(mentioned))


@functools.lru_cache(maxsize=4)
def role_own_variables(roles_dir: str) -> dict[str, str]:
    """Variable -> where a role sets it itself, for the names that are no setting (in no role's defaults or argument
    specs): a role's vars/main.yml, which outranks an inventory's value, and what its tasks set_fact or register,
    which overwrites it as the role runs. An inventory that sets one changes nothing (review round 23b: eni_selected
    or nccl_plugin_lib_dir in group_vars, ignored without a word)."""
    roles = Path(roles_dir)
    settable = variable_names(roles).settable
    found: dict[str, str] = {}
    for path in sorted(roles.glob("*/vars/main.yml")):
        data = fast_yaml.load(path.read_text())
        for name in data if isinstance(data, dict) else ():
            found.setdefault(str(name), paths.role_file_shown(path))
    for path in sorted([*roles.glob("*/tasks/*.yml"), *roles.glob("*/handlers/*.yml")]):
        where = paths.role_file_shown(path)
        for name in _names_set_by(fast_yaml.load(path.read_text())):
            found.setdefault(name, where)
    return {name: where for name, where in found.items() if name not in settable and not name.startswith("_")}


def _names_set_by(tasks: object) -> Iterator[str]:
    """The names a task list's set_fact and register set, blocks included."""
    for task in tasks if isinstance(tasks, list) else ():
        if not isinstance(task, dict):
            continue
        for key in ("ansible.builtin.set_fact", "set_fact"):
            facts = task.get(key)
            yield from (str(name) for name in (facts if isinstance(facts, dict) else ()) if name != "cacheable")
        if isinstance(task.get("register"), str):
            yield task["register"]
        for key in ("block", "rescue", "always"):
            yield from _names_set_by(task.get(key))


def role_own_variable_problem(where: str, variable: str, own: Mapping[str, str]) -> str | None:
    """The line for an inventory that sets a role's own variable (role_own_variables), or None."""
    if variable not in own:
        return None
    source = own[variable]
    how = ("which outranks an inventory's value, so this value would be ignored" if source.endswith("/vars/main.yml")
           else "as its tasks run, so this value would be overwritten, or taken for the role's own state")  # fmt: skip
    return (f"{where}: {variable} is no setting: the role sets it itself ({source}), {how}; allowed: leave it out (a "
            "role's settings are the variables of its defaults/main.yml; ansible-playbook's -e outranks both)")


def names_in(text: str) -> list[str]:
    """``_NAME.findall(text)``, in about a third of the time: preflight's misspelling check reads all of rdmaforge's
    roles, playbooks and modules this way, once per run (about 0.1 s of CPU less)."""
    return _NAME.findall(" ".join(_NAME_STRETCH.findall(text)))


#: The prefix of LightCC's settings (seed 004's taco), which role nccl_env writes beside NCCL's.
LIGHTCC_PREFIX = "LIGHT_"


def nccl_setting_problem(host: str, variable: str, value: object, known: frozenset[str]) -> Problem | None:
    """An NCCL setting written as an inventory variable (seeds 001 and 002 give them as `export NCCL_IB_HCA=...`):
    nothing reads a variable of that name, so the profile's value stays in /etc/nccl.conf without a word (review
    round 23b: NCCL_IB_HCA=mlx5 at the top of group_vars left seed 001's storage HCAs in use). Caught where the
    name, in any case, is one NCCL reads (nccl_ib_hca), or has LightCC's prefix. Another NCCL_ name is no setting
    to move there (seed 003's NCCL_HOME is a build path: review round 24), and is the misspelling check's."""
    upper = variable.upper()
    if not (upper in known or upper.startswith(LIGHTCC_PREFIX)):
        return None
    whose = "a LightCC" if upper.startswith(LIGHTCC_PREFIX) else "an NCCL"
    message = (f"{host}: {variable} is {whose} setting, not a variable rdmaforge reads, so its value would be "
               f"ignored; allowed: nccl_env_overrides: {{{upper}: {show(value)}}} (role nccl_env writes it to "
               "/etc/nccl.conf on every node it applies to)")  # fmt: skip
    return Problem(host, variable, message)


@functools.lru_cache(maxsize=1)
def _role_names() -> tuple[str, ...]:
    """The roles' names, longest first (nccl_build is tried before a shorter name it starts with)."""
    return tuple(sorted((p.name for p in paths.ROLES_DIR.iterdir() if (p / "tasks").is_dir()), key=len, reverse=True))


def _role_prefix(name: str) -> str:
    """The role whose name ``name`` starts with, else its first word."""
    return next((role for role in _role_names() if name.startswith(f"{role}_")), name.split("_", 1)[0])


@functools.lru_cache(maxsize=8)
def _split_after_prefix(settable: frozenset[str]) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """Each variable of ours, sorted, with its prefix and the words after it: computed once per set of names."""
    return tuple((name, prefix, tuple(name[len(prefix) + 1 :].split("_")))
                 for name in sorted(settable) for prefix in (_role_prefix(name),))  # fmt: skip


def one_word_apart(variable: str, settable: frozenset[str]) -> list[str]:
    """The variable of ours that ``variable`` is with one word added or left out after the same prefix (NCCL's
    archs variable with "build" added after "nccl", a size with "gb" added): below difflib's cutoff, and ignored
    without a word (review round 23b). The prefix is the role's whole name (ssh_trust, not ssh: a user's own
    ssh_user is no misspelling of role ssh_trust's user variable; review round 24), or the first word of a
    variable no role's name begins. (No such name is written here: the names this code mentions count as read.)"""
    for name, prefix, theirs in _split_after_prefix(settable):
        if not variable.startswith(f"{prefix}_"):
            continue
        words = tuple(variable[len(prefix) + 1 :].split("_"))
        if abs(len(theirs) - len(words)) != 1 or not all(words) or not all(theirs):
            continue
        longer, shorter = (words, theirs) if len(words) > len(theirs) else (theirs, words)
        if any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer))):
            return [name]
    return []


@functools.lru_cache(maxsize=8192)
def closest_variable(variable: str, settable: frozenset[str]) -> str | None:
    """The variable of ours ``variable`` (lower case) misspells: difflib's closest at _MISSPELLING_CUTOFF, else one
    one word apart; None for neither. Cached: every node of a group carries the same group_vars names, and the
    two lookups over every variable of ours cost about 0.5 ms a name (30 ms a node before, 30 s at 1,000 nodes)."""
    close = difflib.get_close_matches(variable, settable, n=1, cutoff=_MISSPELLING_CUTOFF) or one_word_apart(
        variable, settable)
    return close[0] if close else None


def misspelled_variable_problems(host: str, values: Mapping[str, object], names: VariableNames) -> list[Problem]:
    """A variable that nothing of rdmaforge reads, but close to one that is read: its value would be ignored
    without a word (rdmaforge_fabric with two letters swapped). A name not close to one of ours is left alone: it
    may be the user's own; Ansible's (``ansible_*``) are Ansible's to check."""
    found = []
    known_nccl = nccl_env.known_nccl_names()
    for variable in values:
        if not isinstance(variable, str) or variable.startswith("ansible_"):
            continue
        # Before the names the roles mention: nccl_ib_hca is a key of a fact there, never a variable that is read.
        setting = None if variable in names.settable else nccl_setting_problem(host, variable, values[variable],
                                                                                known_nccl)  # fmt: skip
        if setting is not None:
            found.append(setting)
            continue
        if variable in names.mentioned:
            continue
        # Lower case first: RDMAFORGE_FABRIC is a variable of its own to Ansible, never rdmaforge_fabric.
        close = closest_variable(variable.lower(), names.settable)
        if close:
            found.append(
                Problem(
                    host,
                    variable,
                    f"{host}: {variable} is not a variable rdmaforge reads, so its value would be ignored "
                    f"(did you mean {close!r}?); allowed: a variable of a role's defaults/main.yml or "
                    f"meta/argument_specs.yml, such as {close}",
                )
            )
    return found


# --- operating system ------------------------------------------------------------------------------


def _os_table(table: Mapping[str, object]) -> dict[str, list[str]]:
    """Normalise a {distribution: [versions]} table; versions may have been written as numbers."""
    normal: dict[str, list[str]] = {}
    for name, versions in table.items():
        if isinstance(versions, str | int | float):
            versions = [versions]
        normal[str(name)] = [str(v) for v in versions] if isinstance(versions, Iterable) else []
    return normal


def _os_listing(table: Mapping[str, Sequence[str]]) -> str:
    return "; ".join(f"{name} {', '.join(versions)}" for name, versions in table.items()) or "none"


def _os_matches(table: Mapping[str, Sequence[str]], distribution: str, version: str, major: str) -> bool:
    versions = table.get(distribution, ())
    return version in versions or major in versions


def os_problems(
    host: str,
    distribution: str,
    version: str,
    major_version: str,
    supported: Mapping[str, object],
    legacy: Mapping[str, object] | None = None,
) -> tuple[list[Problem], list[str]]:
    """Is this OS in the supported table (fine), the legacy table (a warning), or neither (a problem)?

    A table maps ``ansible_distribution`` to versions; a version matches either the full
    ``ansible_distribution_version`` (``22.04``) or the major one (``12``, ``9``).
    """
    table = _os_table(supported)
    legacy_table = _os_table(legacy or {})
    seen = f"ansible_distribution={show(distribution)} ansible_distribution_version={show(version)}"
    if _os_matches(table, distribution, version, major_version):
        return [], []
    if _os_matches(legacy_table, distribution, version, major_version):
        return [], [
            f"{host}: {seen} is a legacy OS (preflight_legacy_os): rdmaforge accepts it but does not "
            f"test it; tested: {_os_listing(table)}"
        ]
    return [
        Problem(
            host,
            "ansible_distribution",
            f"{host}: {seen} is not a supported OS; allowed: {_os_listing(table)} "
            f"(add it to preflight_supported_os to try it anyway)",
        )
    ], []


# --- role argument specs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RoleSpec:
    """The options of one role's ``main`` entry point, from its meta/argument_specs.yml."""

    role: str
    path: str
    options: dict[str, dict[str, object]]


def discover_argument_specs(roles_dir: str | Path) -> list[RoleSpec]:
    """Every ``<roles_dir>/*/meta/argument_specs.y[a]ml`` with a ``main`` entry point, sorted by role.

    Discovered, not listed, so that a role added later is validated without touching preflight.
    A spec file that is not valid YAML raises: a broken spec is a bug to fix, not to skip.
    """
    specs = []
    for path in sorted(Path(roles_dir).glob("*/meta/argument_specs.y*ml")):
        if path.suffix not in (".yml", ".yaml"):
            continue
        options = _main_options(str(path.resolve()), path.stat().st_mtime_ns)
        if options is not None:
            specs.append(RoleSpec(role=path.parent.parent.name, path=str(path), options=dict(options)))
    return specs


@functools.lru_cache(maxsize=128)
def _main_options(path: str, mtime_ns: int) -> dict[str, dict[str, object]] | None:
    """The ``main`` entry point's options of one spec file (None without one). Cached by path and mtime: the
    filter_preload callback parses them once in the controller, and every worker forked for a node inherits
    them instead of parsing them again."""
    del mtime_ns  # part of the cache key only: an edited file is parsed again
    data = fast_yaml.load(Path(path).read_text()) or {}
    main = (data.get("argument_specs") or {}).get("main")
    return dict(main.get("options") or {}) if isinstance(main, Mapping) else None


def merged_argument_specs(specs: Sequence[RoleSpec]) -> dict[str, dict[str, Any]]:
    """Every role's options in one spec, and the role that owns each option: ``{options, owners}``.

    Preflight validates them in one ``validate_argument_spec`` call per node instead of one per role: a loop of
    16 roles costs Ansible a task execution per role and node, about as much as the rest of a no-op run's
    per-node work. Role options are prefixed with their role, so no two roles own the same name; a clash raises.
    """
    options: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for spec in specs:
        for name, option in spec.options.items():
            if name in owners:
                raise ValueError(f"option {name} is in the argument specs of both {owners[name]} and {spec.role}")
            options[name] = option
            owners[name] = spec.role
    return {"options": options, "owners": owners}


def argspec_errors(options: Mapping[str, Mapping[str, Any]], values: Mapping[str, object]) -> list[str]:
    """Ansible's own check of a role spec (what ``validate_argument_spec`` runs) against the options ``values`` sets.

    Preflight runs it on the controller for every node, from ``hostvars`` (inventory, group and extra vars): one
    task for the cluster instead of a task execution per node. The values are made plain data first: the
    validator's deep copy of Ansible's lazy containers took 0.7 s a node."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # only the roles' filters need Ansible

    given = {name: plain(values[name]) for name in options if name in values}
    validator = ArgumentSpecValidator(dict(options))
    return [str(e) for e in validator.validate(given, validate_role_argument_spec=True).error_messages]


_MISSING = re.compile(r"^missing required arguments: (?P<names>[^:]+?)(?: found in .*)?$")
_PLAIN_KINDS = ("is of type", "must be one of", "must be one or more of", "Elements value for option")


def argspec_problems(
    host: str,
    role: str,
    errors: Sequence[str],
    options: Mapping[str, Mapping[str, object]],
    values: Mapping[str, object],
    owners: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Turn ``validate_argument_spec``'s error strings into lines naming host, role, variable, value.

    Ansible's own messages name the variable but neither the host nor (for type errors) what is
    allowed. Each message is matched to the top-level option it mentions; sub-option errors keep
    Ansible's wording, since it says where inside the value the problem is. ``owners`` (option -> role,
    for preflight's one validation of every role's merged spec) names the role of each option; an
    option it does not name, and an error naming no option, get ``role``.
    """
    problems: list[Problem] = []

    def owner(name: str | None) -> tuple[str, str]:
        found = (owners or {}).get(name, role) if name else role
        return found, paths.as_installed(f"roles/{found}/meta/argument_specs.yml")

    # Ansible reports a list element's conversion error twice: alone, then inside "Elements value for option
    # ...". The one that names the option is enough.
    errors = [e for e in errors if not any(e != other and e in other for other in errors)]
    for error in errors:
        missing = _MISSING.match(error)
        if missing and " found in " not in error:
            for name in (n.strip() for n in missing.group("names").split(",")):
                option = options.get(name, {})
                owning, spec_file = owner(name)
                problems.append(
                    Problem(
                        host,
                        name,
                        f"{host}: {name} is not set, but role {owning} requires it; "
                        f"allowed: {describe_option(option)} (see {spec_file})",
                    )
                )
            continue
        name = _mentioned_option(error, options)
        owning, spec_file = owner(name)
        if name is None:
            problems.append(Problem(host, "?", f"{host}: role {owning}: {error} (see {spec_file})"))
            continue
        option = options[name]
        value = values.get(name)
        plain = any(kind in error for kind in _PLAIN_KINDS) and " found in " not in error
        detail = "" if plain else f": {error}"
        hint = _did_you_mean(value, [str(c) for c in _choices(option)])
        problems.append(
            Problem(
                host,
                name,
                f"{host}: {name}={show(value)} is not valid for role {owning}{detail}{hint}; "
                f"allowed: {describe_option(option)} (see {spec_file})",
            )
        )
    return problems


def shape_problems(
    host: str,
    role: str,
    options: Mapping[str, Mapping[str, object]],
    values: Mapping[str, object],
    owners: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Values whose shape Ansible's argument spec accepts while the role cannot use it:

    - a list option given as text (``rdma_core_expected_ports: mlx5_0``, ``-e nccl_cuda_archs=sm_80``): the spec
      splits it at commas for its check only, and the role's loops and joins read it one character at a time;
    - a mapping option given as text (``eni_addresses: eth1=10.0.1.5/24`` or JSON): converted for the check only,
      the eni role then failed with a TypeError after earlier roles had changed the nodes, and nccl_env merged a
      string;
    - null for a list or mapping option whose role's default is not null: it passed the spec for some options
      (nccl_cuda_archs, nccl_env_overrides) and failed later on ``| length`` or ``.items()``. Where null is the
      role's own default (an option that is off or found on the node), it stays allowed;
    - a boolean word the spec reads as true and the role's ``| bool`` as false (``y``, ``t``, `` yes``).

    Each refused with what to write instead."""
    from ansible.module_utils.common.validation import check_type_dict

    found = []
    for name, option in options.items():
        if name not in values:
            continue
        value, kind = values[name], option.get("type")
        owning = (owners or {}).get(name, role)
        if kind == "list" and isinstance(value, str) and not _templated_text(value):
            items = [item.strip() for item in value.split(",")]
            found.append(Problem(host, name, f"{host}: {name}={show(value)} is text where role {owning} takes a list "
                                             f"(its loops would read it one character at a time); allowed: "
                                             f"{describe_option(option)}, e.g. {json.dumps(items)} (YAML in the "
                                             f"inventory, or -e as JSON: -e '{json.dumps({name: items})}')"))
        elif kind == "dict" and isinstance(value, str) and not _templated_text(value):
            try:
                example = f", e.g. -e '{json.dumps({name: check_type_dict(value)})}' or the same as YAML"
            except (TypeError, ValueError):
                example = ""
            found.append(Problem(host, name, f"{host}: {name}={show(value)} is text where role {owning} takes a "
                                             f"mapping; allowed: {describe_option(option)}{example}"))  # fmt: skip
        elif kind == "bool" and isinstance(value, str) and spec_bool(value) is True and not ansible_bool(value):
            # Ansible's check_type_bool takes y, t and padded words for true; a role's `| bool` reads only
            # yes/on/true/1 as true, so `hugepages_enabled: y` passed the spec and withdrew the huge pages.
            found.append(Problem(host, name, f"{host}: {name}={show(value)} passes role {owning}'s argument spec as "
                                             "true, but the role's tasks read it as false; allowed: true or false "
                                             "(or yes/no, on/off, 1/0)"))  # fmt: skip
        elif kind in ("dict", "list") and value is None:
            default = role_defaults.defaults(owning).get(name)  # the owning role's: not every name has its prefix
            if default is not None:
                what = "a mapping" if kind == "dict" else "a list"
                found.append(Problem(host, name, f"{host}: {name}=null is not {what}, which role {owning} takes (its "
                                                 f"default is {show(default)}); allowed: {describe_option(option)}, "
                                                 f"or leave it unset for the default"))  # fmt: skip
    return found


def _templated(value: object) -> bool:
    return isinstance(value, str) and _templated_text(value)


def _templated_text(value: str) -> bool:
    """Text Ansible still templates (a raw value read from an inventory file): its result is what counts."""
    return "{{" in value or "{%" in value


def _mentioned_option(error: str, options: Mapping[str, object]) -> str | None:
    """The top-level option an error is about: the one named earliest in the message."""
    found: list[tuple[int, str]] = []
    for name in options:
        match = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", error)
        if match:
            found.append((match.start(), name))
    return min(found)[1] if found else None


def first_per_variable(problems: Iterable[Problem]) -> list[Problem]:
    """One line per (host, variable): a dedicated check runs first and its wording wins over the
    generic argument-spec line for the same variable."""
    seen: set[tuple[str, str]] = set()
    kept: list[Problem] = []
    for problem in problems:
        key = (problem.host, problem.variable)
        if problem.variable != "?" and key in seen:
            continue
        seen.add(key)
        kept.append(problem)
    return kept


# --- the whole inventory ---------------------------------------------------------------------------


@dataclass
class ArgspecResult:
    """One ``validate_argument_spec`` run: the options it checked and the errors it found. ``role`` names their
    role; ``owners`` (option -> role) does per option when the run checked several roles' merged options."""

    role: str
    errors: list[str]
    options: Mapping[str, Mapping[str, object]]
    owners: Mapping[str, str] = field(default_factory=dict)


@dataclass
class NodeInput:
    """What the inventory says about one node. ``values`` reads its variables (hostvars works)."""

    name: str
    address: str | None
    fabric: object
    values: Mapping[str, object] = field(default_factory=dict)
    argspecs: list[ArgspecResult] = field(default_factory=list)
    in_play: bool = True


def inventory_report(
    nodes: Sequence[NodeInput],
    group: str = "cluster",
    names: VariableNames | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, list[str]]:
    """Every inventory problem of every node, as host -> lines; nothing here needs a connection.

    Per-node checks (fabric, name, address, role variables, and with ``names`` misspelled variables) run for the
    nodes in the play; the
    uniqueness and one-fabric checks cover every node given (the hosts of ``group``), so a ``--limit``
    run still sees its peers. With ``groups`` (Ansible's), every host outside the group the playbooks target is
    reported too (it is in no play: preflight prints its lines with the run's stop).
    """
    found: list[Problem] = []
    for node in nodes:
        if not node.in_play:
            continue
        found += fabric_problems(node.name, node.fabric)
        found += long_name_problems(node.name)  # before node_name_problems: its line wins, the name shortened
        found += node_name_problems(node.name)
        found += localhost_node_problems(node.name, node.values)
        found += whole_number_problems(node.name, node.values)
        found += batch_size_problems(node.name, node.values)
        found += number_table_problems(node.name, node.values)
        found += positive_number_problems(node.name, node.values)
        found += benchmark_size_problems(node.name, node.values)
        found += grub_dropin_problems(node.name, node.values)
        found += gpu_count_problems(node.name, node.values)
        found += hugepages_problems(node.name, node.values)
        found += eni_address_problems(node.name, node.values)
        found += eni_number_problems(node.name, node.values)
        found += eni_interface_problems(node.name, node.values)
        found += repository_problems(node.name, node.values)
        found += documented_nccl_problems(node.name, node.values)
        found += threshold_problems(node.name, node.values)
        found += env_value_problems(node.name, node.values)
        found += rdma_fallback_problems(node.name, node.values)
        found += doctor_accept_problems(node.name, node.values)
        found += empty_list_problems(node.name, node.values)
        found += renamed_variable_problems(node.name, node.values)
        found += release_problems(node.name, node.values)
        found += version_problems(node.name, node.values)
        found += download_problems(node.name, node.values)
        found += git_commit_problems(node.name, node.values)
        found += pip_hash_problems(node.name, node.values)
        found += nccl_tests_binaries_problems(node.name, node.values)
        found += nccl_tests_make_args_problems(node.name, node.values)
        found += make_path_problems(node.name, node.values)
        found += relative_path_problems(node.name, node.values)
        found += rdma_core_profile_problems(node.name, node.values)
        found += fact_free_role_problems(node.name, node.values)
        if groups is not None:
            found += group_name_problems(node.name, node.values, groups)
        if names is not None:
            found += misspelled_variable_problems(node.name, node.values, names)
        if node.address is not None:
            found += address_problems(node.name, node.address)
        for result in node.argspecs:
            found += argspec_problems(node.name, result.role, result.errors, result.options, node.values, result.owners)
            # After Ansible's own line, which wins for a text that is no allowed choice either (its did-you-mean).
            found += shape_problems(node.name, result.role, result.options, node.values, result.owners)
        # After Ansible's line for a value of the wrong type (its wording, "allowed: a number"), which wins.
        found += pairwise_threshold_problems(node.name, node.values)
        found += pairwise_timeout_problems(node.name, node.values)
    found += duplicate_problems([NodeAddress(n.name, n.address) for n in nodes])
    found += local_address_problems(nodes)
    found += eni_duplicate_problems(nodes)
    found += cluster_wide_problems(nodes, group)
    in_play = {n.name for n in nodes if n.in_play}
    found += [p for p in mixed_fabric_problems([(n.name, n.fabric) for n in nodes], group) if p.host in in_play]
    if groups is not None:
        found += outside_group_problems(groups)
    report: dict[str, list[str]] = {}
    for problem in first_per_variable(found):
        report.setdefault(problem.host, []).append(problem.message)
    return report


# --- /etc/hosts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostsEntry(NodeAddress):
    """A node for /etc/hosts: its name and address, and the IPv4 its facts report (if known)."""

    default_ipv4: str | None = None


def etc_hosts_lines(nodes: Sequence[HostsEntry]) -> tuple[list[str], list[str]]:
    """``address<TAB>name [short]`` lines for /etc/hosts, and the problems that prevent writing them.

    /etc/hosts needs IP addresses. A node whose ``ansible_host`` (or inventory name) is a DNS name
    falls back to the IPv4 address of its default route, from gathered facts; without those facts
    there is nothing correct to write, so it is a problem rather than a guess.
    """
    lines: list[str] = []
    problems: list[str] = []
    owner: dict[str, str] = {}  # address -> the first node written with it
    for node in nodes:
        address = node.effective_address
        if not is_ipv4(address):
            if node.default_ipv4 and is_ipv4(node.default_ipv4):
                address = node.default_ipv4
                # Behind NAT every node's default route can have one address (Vagrant's 10.0.2.15): /etc/hosts would
                # send every peer's name to one machine.
                if address in owner:
                    given = f"{node.address_variable}={show(node.effective_address)}"
                    problems.append(
                        f"{node.name}: {given} is a DNS name, and the IPv4 of the node's default route ({address}, "
                        f"ansible_default_ipv4) is also {owner[address]}'s; allowed: an IPv4 address no other node "
                        "has in ansible_host, or cluster_hosts_manage: false"
                    )
                    continue
            else:
                problems.append(
                    f"{node.name}: {node.address_variable}={show(address)} is not an IPv4 address and "
                    f"the node's facts (ansible_default_ipv4) are unknown; "
                    f"allowed: an IPv4 address in ansible_host, "
                    f"a DNS name once facts are known (site.yml gathers them in preflight, for the nodes of its "
                    f"--limit only: a node outside it needs facts in the cache, so run once without --limit), "
                    f"or cluster_hosts_manage: false"
                )
                continue
        owner.setdefault(address, node.name)
        names = [node.name] if short_name(node.name) == node.name else [node.name, short_name(node.name)]
        lines.append(f"{address}\t{' '.join(names)}")
    return lines, problems


def parse_df(output: str) -> list[tuple[str, int]]:
    """``df -P -k PATH...`` -> [(mount point, free MiB)], one per path, in the order the paths were given.

    POSIX output has one line per argument after the header: filesystem, 1024-blocks, used, available,
    capacity, mount point (which may contain spaces, so it is everything after the capacity column).
    """
    rows: list[tuple[str, int]] = []
    for line in output.splitlines()[1:]:
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[3].isdigit():
            rows.append((fields[5], int(fields[3]) // 1024))
    return rows


def free_space_problems(
    host: str, paths: Sequence[str], df_output: str, needs: Mapping[str, object], df_error: str = ""
) -> list[str]:
    """Where a node lacks the free space its packages and builds need; paths on one filesystem add up. ``df_error``,
    df's stderr, says why a path was not measured (no such directory, or a df killed on a stale NFS mount)."""
    rows = parse_df(df_output)
    if len(rows) != len(paths):
        why = " ".join(df_error.split())
        return [f"{host}: cannot measure free space of {', '.join(paths)} (df answered {len(rows)} of them"
                f"{': ' + why if why else ''})"]  # fmt: skip
    by_mount: dict[str, list[tuple[str, int]]] = {}
    free: dict[str, int] = {}
    for index, path in enumerate(paths):
        mount, mib = rows[index]
        by_mount.setdefault(mount, []).append((path, int(str(needs[path]))))
        free[mount] = mib
    problems = []
    for mount, wants in by_mount.items():
        total = sum(mib for _, mib in wants)
        if free[mount] < total:
            listing = ", ".join(f"{path} {mib}" for path, mib in wants)
            names = " and ".join(path for path, _ in wants)
            problems.append(
                f"{host}: {names} {'are' if len(wants) > 1 else 'is'} on {mount} with {free[mount]} MiB free; "
                f"{total} MiB needed (MiB per path: {listing}; preflight_min_free_mb, preflight_builder_free_mb)"
            )
    return problems
