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
        return InventoryDraft(copy.deepcopy(self.doc), copy.deepcopy(self.var_files), self.group)

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


def _every_host(lines: list[str]) -> Callable[[Names], dict[str, list[str]]]:
    # The lab has at least two nodes; a and b stand for all of them here.
    return lambda n: {
        n.a: [line.format(host=n.a) for line in lines],
        n.b: [line.format(host=n.b) for line in lines],
    }


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
                "{host}: ssh_trust_group='gpus' is not a group of this node",
                "allowed: one of its groups: ",
                "cluster",
            ]
        ),
        needs_facts=True,
    ),
    Case(
        "nccl-accelerator-unknown",
        lambda d, n: d.set(n.b, "nccl_env_accelerator", "tacoo"),
        lambda n: {
            n.b: [f"{n.b}: nccl_env_accelerator='tacoo' is not a key of nccl_env_accelerators; allowed: none, taco"]
        },
        needs_facts=True,
    ),
    Case(
        "no-cluster-group",
        lambda d, n: d.rename_group("nodes"),
        lambda n: {"localhost": ["the inventory has no hosts in group 'cluster'"]},
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
    assert not re.search(r"^changed: ", output, re.MULTILINE), f"{case.id}: something changed:\n{output[-4000:]}"
    assert "PLAY [Cluster hosts" not in output, f"{case.id}: a later play ran:\n{output[-4000:]}"
    if not case.needs_facts:
        assert "TASK [preflight : Gather facts]" not in output, f"{case.id}: connected before reporting"
