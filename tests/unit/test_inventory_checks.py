"""rdmaforge.inventory_checks: the rules preflight enforces, as plain functions."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import inventory_checks as checks
from rdmaforge import paths, role_defaults, tuning
from rdmaforge.hostnames import short_name
from rdmaforge.inventory_checks import (
    FABRICS,
    ArgspecResult,
    HostsEntry,
    NodeAddress,
    NodeInput,
    Problem,
)
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.redefined_defaults import redefine_default

ALLOWED_FABRICS = "allowed: erdma, infiniband, roce, acs_type1, acs_type2, tcp"


def messages(problems: list[Problem]) -> list[str]:
    return [p.message for p in problems]


# --- fabric ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fabric", FABRICS)
def test_every_known_fabric_passes(fabric: str) -> None:
    assert checks.fabric_problems("node1", fabric) == []


def test_unknown_fabric_names_host_value_and_allowed() -> None:
    assert messages(checks.fabric_problems("node2", "ethernet")) == [
        f"node2: rdmaforge_fabric='ethernet' is not a known fabric profile; {ALLOWED_FABRICS}"
    ]


def test_fabric_close_to_a_known_one_gets_a_suggestion() -> None:
    (message,) = messages(checks.fabric_problems("node2", "Infiniband"))
    assert "(did you mean 'infiniband'?)" in message


@pytest.mark.parametrize("value", [None, ""])
def test_unset_fabric(value: object) -> None:
    assert messages(checks.fabric_problems("node3", value)) == [
        f"node3: rdmaforge_fabric is not set; every node needs a fabric profile; {ALLOWED_FABRICS}"
    ]


def test_fabric_of_wrong_type() -> None:
    (message,) = messages(checks.fabric_problems("node1", ["erdma"]))
    assert message.startswith('node1: rdmaforge_fabric=["erdma"] is not a known fabric profile')


def test_fabrics_match_the_preflight_argument_spec() -> None:
    spec = yaml.safe_load((PROJECT_ROOT / "roles/preflight/meta/argument_specs.yml").read_text())
    assert tuple(spec["argument_specs"]["main"]["options"]["rdmaforge_fabric"]["choices"]) == FABRICS


# --- names and addresses ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["node1", "erdma-node1", "gpu-01.dc1.example.com", "n", "a" * 63, "Node1", "node1.example.com."]
)
def test_valid_host_names(name: str) -> None:
    assert checks.is_hostname(name)
    assert checks.node_name_problems(name) == []


@pytest.mark.parametrize(
    "name", ["node_1", "-node1", "node1-", "a" * 64, "", "node..1", "gpu node", "nöde1", ("a" * 60 + ".") * 5]
)
def test_invalid_host_names(name: str) -> None:
    assert not checks.is_hostname(name)


def test_invalid_node_name_message() -> None:
    (message,) = messages(checks.node_name_problems("node_2"))
    assert message.startswith("node_2: inventory_hostname='node_2' is not a valid node name; allowed: an RFC 1123")


LONG_NAME_RULE = "allowed: at most 253 characters, in dot-separated labels of at most 63 (a DNS name)"


@pytest.mark.parametrize(("name", "line"), [
    ("a" * 300, f"{'a' * 40}...{'a' * 10}: the host name is 300 characters long; {LONG_NAME_RULE}"),
    (("b" * 62 + ".") * 4 + "c" * 2,
     f"{'b' * 40}...{'b' * 7}.cc: the host name is 254 characters long; {LONG_NAME_RULE}"),
    ("n" + "x" * 63 + ".lab",
     f"n{'x' * 39}...{'x' * 6}.lab: the host name has a label of 64 characters; {LONG_NAME_RULE}"),
])  # fmt: skip
def test_a_name_longer_than_any_hosts_is_refused_shortened(name: str, line: str) -> None:
    """Ansible's fact cache, a file named after the host, fails on such a name before preflight runs: render and the
    commands refuse it from the inventory file, naming it shortened (a 300-character line helps nobody)."""
    assert messages(checks.long_name_problems(name)) == [line]
    nodes = [NodeInput(name, "10.0.0.1", "erdma")]
    assert checks.inventory_report(nodes) == {name: [line]}  # preflight: this line, not the generic one


@pytest.mark.parametrize("name", [("b" * 62 + ".") * 4 + "c", "a" * 63, "node1.example.com."])
def test_a_name_of_the_longest_a_host_can_have_passes(name: str) -> None:
    assert checks.long_name_problems(name) == []


def test_yaml_inventory_hosts_walks_children_once_and_keeps_what_yaml_read() -> None:
    data = yaml.safe_load(
        "all:\n  hosts: {a: null}\n  children:\n    cluster: &c\n      hosts: {123: null, yes: null, b: {x: 1}}\n"
        "      children: {again: *c}\n    gpu:\n      hosts: {b: null, ~: null}\n"
    )
    assert checks.yaml_inventory_hosts(data) == ["a", 123, True, "b", None]
    assert checks.yaml_inventory_hosts({"plugin": "aws_ec2", "hosts": {"a": None}}) == []


@pytest.mark.parametrize("name", ["172.20.20.145", "300.1.1.1", "fd00::1"])
def test_address_as_node_name(name: str) -> None:
    (message,) = messages(checks.node_name_problems(name))
    assert f"inventory_hostname='{name}' is an address, not a node name" in message
    assert "put the address in ansible_host" in message


def test_short_name() -> None:
    assert short_name("node1.example.com") == "node1"
    assert short_name("node1") == "node1"


@pytest.mark.parametrize("address", ["172.20.20.145", "198.18.0.11", "node1.example.com", "localhost"])
def test_valid_addresses(address: str) -> None:
    assert checks.address_problems("node1", address) == []


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("172.20.20.300", "is not a valid IPv4 address"),
        ("172.020.20.1", "is not a valid IPv4 address"),
        ("fd00::1", "is an IPv6 address"),
        ("bad_host", "is neither an IPv4 address nor a valid host name"),
        ("", "is not an address"),
        (None, "is not an address"),
    ],
)
def test_invalid_addresses(address: object, expected: str) -> None:
    (message,) = messages(checks.address_problems("node1", address))
    assert message.startswith("node1: ansible_host=")
    assert expected in message
    assert "allowed: an IPv4 address" in message


@pytest.mark.parametrize(
    ("address", "hint"),
    [
        ("10.0.0.2/24", "(a network prefix: write the address alone, 10.0.0.2)"),
        ("10.0.0.2:2222", "(a port: write 10.0.0.2 and put 2222 in ansible_port)"),
        ("node2.example:22", "(a port: write node2.example and put 22 in ansible_port)"),
        ("10.0.0.02", "(four numbers from 0 to 255, without leading zeros)"),
        ("10.0.0.256", "(four numbers from 0 to 255, without leading zeros)"),
    ],
)
def test_address_mistakes_say_what_to_write_instead(address: str, hint: str) -> None:
    (message,) = messages(checks.address_problems("node2", address))
    assert message.startswith(f"node2: ansible_host={address!r} is ")
    assert hint in message
    assert message.endswith("allowed: an IPv4 address such as 172.20.20.145, or a DNS host name")


def test_unique_nodes_have_no_duplicates() -> None:
    nodes = [NodeAddress("node1", "10.0.0.1"), NodeAddress("node2", "10.0.0.2"), NodeAddress("node3", None)]
    assert checks.duplicate_problems(nodes) == []


def test_duplicate_address_is_reported_for_every_node_involved() -> None:
    nodes = [
        NodeAddress("node1", "10.0.0.1"),
        NodeAddress("node2", "10.0.0.1"),
        NodeAddress("node3", "10.0.0.3"),
    ]
    assert messages(checks.duplicate_problems(nodes)) == [
        "node1: ansible_host='10.0.0.1' is also the address of node2; "
        "allowed: an address no other node uses (each node needs its own)",
        "node2: ansible_host='10.0.0.1' is also the address of node1; "
        "allowed: an address no other node uses (each node needs its own)",
    ]


def test_duplicate_address_between_ansible_host_and_a_bare_name() -> None:
    nodes = [NodeAddress("node1.example.com", None), NodeAddress("node2", "NODE1.example.com.")]
    found = messages(checks.duplicate_problems(nodes))
    assert "node1.example.com: inventory_hostname='node1.example.com' is also the address of node2" in found[0]
    assert "node2: ansible_host='NODE1.example.com.' is also the address of node1.example.com" in found[1]


def test_duplicate_short_name_ignores_case_and_domain() -> None:
    nodes = [NodeAddress("node1", "10.0.0.1"), NodeAddress("Node1.rack2", "10.0.0.2")]
    found = messages(checks.duplicate_problems(nodes))
    assert len(found) == 2
    assert found[1].startswith(
        "Node1.rack2: inventory_hostname='Node1.rack2' has the short name 'Node1', which node1 also has; allowed:"
    )


# --- operating system ------------------------------------------------------------------------------

SUPPORTED = {"Debian": ["11", "12", "13"], "Ubuntu": ["20.04", "22.04", "24.04"], "Rocky": ["8", "9"]}
LEGACY = {"CentOS": ["7"]}


@pytest.mark.parametrize(
    ("distribution", "version", "major"),
    [("Debian", "12.11", "12"), ("Ubuntu", "22.04", "22"), ("Rocky", "9.4", "9")],
)
def test_supported_os(distribution: str, version: str, major: str) -> None:
    assert checks.os_problems("node1", distribution, version, major, SUPPORTED, LEGACY) == ([], [])


def test_ubuntu_matches_on_the_full_version_only() -> None:
    problems, _ = checks.os_problems("node1", "Ubuntu", "22.10", "22", SUPPORTED, LEGACY)
    assert len(problems) == 1


def test_unsupported_os_lists_what_is_allowed() -> None:
    problems, warnings = checks.os_problems("node1", "Fedora", "40", "40", SUPPORTED, LEGACY)
    assert warnings == []
    assert messages(problems) == [
        "node1: ansible_distribution='Fedora' ansible_distribution_version='40' is not a supported OS; "
        "allowed: Debian 11, 12, 13; Ubuntu 20.04, 22.04, 24.04; Rocky 8, 9 "
        "(add it to preflight_supported_os to try it anyway)"
    ]


def test_legacy_os_is_a_warning() -> None:
    problems, warnings = checks.os_problems("node1", "CentOS", "7.9", "7", SUPPORTED, LEGACY)
    assert problems == []
    assert warnings[0].startswith(
        "node1: ansible_distribution='CentOS' ansible_distribution_version='7.9' is a legacy OS"
    )


def test_os_versions_written_as_numbers_still_match() -> None:
    assert checks.os_problems("node1", "Debian", "12.5", "12", {"Debian": [12]}) == ([], [])
    assert checks.os_problems("node1", "Debian", "12.5", "12", {"Debian": 12}) == ([], [])


def test_shipped_os_table_covers_the_documented_platforms() -> None:
    defaults = role_defaults.defaults("preflight")
    table = defaults["preflight_supported_os"]
    for distribution, version, major in [
        ("Debian", "13.1", "13"),
        ("Ubuntu", "24.04", "24"),
        ("RedHat", "9.4", "9"),
        ("AlmaLinux", "8.10", "8"),
        ("Alibaba", "3", "3"),
        ("Alinux", "3", "3"),
    ]:
        assert checks.os_problems("n", distribution, version, major, table) == ([], [])
    legacy = defaults["preflight_legacy_os"]
    assert checks.os_problems("n", "CentOS", "7.9", "7", table, legacy)[1]
    assert checks.os_problems("n", "Alibaba", "2.1903", "2", table, legacy)[1]


# --- argument specs --------------------------------------------------------------------------------

OPTIONS = {
    "cluster_hosts_manage": {"type": "bool", "default": True},
    "cluster_hosts_group": {"type": "str"},
    "rdmaforge_fabric": {"type": "str", "required": True, "choices": list(FABRICS)},
    "nccl_env": {"type": "list", "elements": "dict"},
}


def test_argspec_type_error() -> None:
    errors = [
        "argument 'cluster_hosts_manage' is of type str and we were unable to convert to bool: "
        "The value 'maybe' is not a valid boolean."
    ]
    found = checks.argspec_problems("node2", "cluster_hosts", errors, OPTIONS, {"cluster_hosts_manage": "maybe"})
    assert messages(found) == [
        "node2: cluster_hosts_manage='maybe' is not valid for role cluster_hosts; allowed: true or false "
        "(see roles/cluster_hosts/meta/argument_specs.yml)"
    ]


def test_argspec_missing_required() -> None:
    errors = ["missing required arguments: rdmaforge_fabric"]
    (found,) = checks.argspec_problems("node2", "preflight", errors, OPTIONS, {})
    assert found.variable == "rdmaforge_fabric"
    assert found.message.startswith(
        f"node2: rdmaforge_fabric is not set, but role preflight requires it; {ALLOWED_FABRICS}"
    )


def test_argspec_choice_error_suggests() -> None:
    errors = ["value of rdmaforge_fabric must be one of: erdma, infiniband, roce, acs_type1, acs_type2, tcp, got: roc"]
    (message,) = messages(checks.argspec_problems("node1", "preflight", errors, OPTIONS, {"rdmaforge_fabric": "roc"}))
    assert message.startswith("node1: rdmaforge_fabric='roc' is not valid for role preflight (did you mean 'roce'?)")


def test_argspec_sub_option_error_keeps_ansible_detail() -> None:
    errors = [
        "Elements value for option 'nccl_env' is of type str and we were unable to convert to dict: "
        "dictionary requested, could not parse JSON or key=value"
    ]
    (message,) = messages(checks.argspec_problems("node1", "nccl", errors, OPTIONS, {"nccl_env": ["x"]}))
    assert message.startswith('node1: nccl_env=["x"] is not valid for role nccl; allowed: a list of mappings')


def test_argspec_unrecognised_error_is_kept_whole() -> None:
    (message,) = messages(checks.argspec_problems("node1", "nccl", ["something odd"], OPTIONS, {}))
    assert message == "node1: role nccl: something odd (see roles/nccl/meta/argument_specs.yml)"


def test_describe_option() -> None:
    assert checks.describe_option({"type": "list", "elements": "str"}) == "a list of strings"
    assert checks.describe_option({"type": "int"}) == "an integer"
    assert checks.describe_option({"choices": ["a", 1]}) == "a, 1"
    assert checks.describe_option({}) == "a string"


def test_discovers_every_role_spec_in_the_checkout() -> None:
    specs = {s.role: s for s in checks.discover_argument_specs(PROJECT_ROOT / "roles")}
    assert {"preflight", "cluster_hosts"} <= set(specs)
    assert "rdmaforge_fabric" in specs["preflight"].options
    assert specs["cluster_hosts"].options["cluster_hosts_manage"]["type"] == "bool"


def test_discovery_skips_roles_without_a_main_entry_point(tmp_path: Path) -> None:
    (tmp_path / "a" / "meta").mkdir(parents=True)
    (tmp_path / "a" / "meta" / "argument_specs.yml").write_text("argument_specs: {other: {options: {}}}\n")
    (tmp_path / "b" / "meta").mkdir(parents=True)
    (tmp_path / "b" / "meta" / "argument_specs.yaml").write_text("argument_specs: {main: {options: {b_x: {}}}}\n")
    assert [(s.role, list(s.options)) for s in checks.discover_argument_specs(tmp_path)] == [("b", ["b_x"])]


def test_merged_specs_keep_each_options_role_and_refuse_a_name_two_roles_declare() -> None:
    specs = [
        checks.RoleSpec("a", "roles/a/meta/argument_specs.yml", {"a_x": {"type": "int"}}),
        checks.RoleSpec("b", "roles/b/meta/argument_specs.yml", {"b_y": {"type": "bool"}, "b_z": {}}),
    ]
    merged = checks.merged_argument_specs(specs)
    assert merged["options"] == {"a_x": {"type": "int"}, "b_y": {"type": "bool"}, "b_z": {}}
    assert merged["owners"] == {"a_x": "a", "b_y": "b", "b_z": "b"}
    clash = specs + [checks.RoleSpec("c", "roles/c/meta/argument_specs.yml", {"b_z": {}})]
    with pytest.raises(ValueError, match="b_z is in the argument specs of both b and c"):
        checks.merged_argument_specs(clash)


def test_the_checkouts_role_specs_merge_without_a_clash() -> None:
    specs = checks.discover_argument_specs(PROJECT_ROOT / "roles")
    merged = checks.merged_argument_specs(specs)
    assert len(merged["options"]) == sum(len(s.options) for s in specs)
    assert merged["owners"]["rdmaforge_fabric"] == "preflight"
    assert merged["owners"]["cluster_hosts_manage"] == "cluster_hosts"


def test_errors_of_the_merged_spec_name_the_role_that_owns_each_option() -> None:
    """One validation of every role's options; each problem line must still name the role that owns it."""
    owners = {"rdmaforge_fabric": "preflight", "cluster_hosts_manage": "cluster_hosts", "nccl_env": "nccl"}
    errors = [
        "missing required arguments: rdmaforge_fabric, cluster_hosts_manage",
        "Elements value for option 'nccl_env' is of type str and we were unable to convert to dict: "
        "dictionary requested, could not parse JSON or key=value",
        "something odd",
    ]
    found = checks.argspec_problems("node1", "*", errors, OPTIONS, {"nccl_env": ["x"]}, owners)
    assert [p.variable for p in found] == ["rdmaforge_fabric", "cluster_hosts_manage", "nccl_env", "?"]
    fabric, manage, env, odd = messages(found)
    assert fabric.startswith("node1: rdmaforge_fabric is not set, but role preflight requires it")
    assert fabric.endswith("(see roles/preflight/meta/argument_specs.yml)")
    assert manage.startswith("node1: cluster_hosts_manage is not set, but role cluster_hosts requires it")
    assert manage.endswith("(see roles/cluster_hosts/meta/argument_specs.yml)")
    assert env.startswith('node1: nccl_env=["x"] is not valid for role nccl')
    assert env.endswith("(see roles/nccl/meta/argument_specs.yml)")
    assert odd == "node1: role *: something odd (see roles/*/meta/argument_specs.yml)"
    argspec = ArgspecResult("*", errors, OPTIONS, owners)
    nodes = [NodeInput("node1", "10.0.0.1", "erdma", values={"nccl_env": ["x"]}, argspecs=[argspec])]
    lines = checks.inventory_report(nodes)["node1"]
    required = "node1: cluster_hosts_manage is not set, but role cluster_hosts requires it"
    assert any(line.startswith(required) for line in lines)
    assert any(line.startswith('node1: nccl_env=["x"] is not valid for role nccl') for line in lines)


# --- the whole inventory ---------------------------------------------------------------------------


def test_inventory_report_groups_by_host_and_prefers_the_dedicated_check() -> None:
    argspec = ArgspecResult("preflight", ["value of rdmaforge_fabric must be one of: erdma, got: ethernet"], OPTIONS)
    nodes = [
        NodeInput("node1", "10.0.0.1", "erdma"),
        NodeInput("node2", "10.0.0.1", "ethernet", values={"rdmaforge_fabric": "ethernet"}, argspecs=[argspec]),
        NodeInput("node3", "10.0.0.3", "ethernet", in_play=False),
    ]
    problems = checks.inventory_report(nodes)
    assert list(problems) == ["node2", "node1"]
    assert problems["node2"] == [
        f"node2: rdmaforge_fabric='ethernet' is not a known fabric profile; {ALLOWED_FABRICS}",
        "node2: ansible_host='10.0.0.1' is also the address of node1; "
        "allowed: an address no other node uses (each node needs its own)",
    ]
    assert problems["node1"][0].startswith("node1: ansible_host='10.0.0.1' is also the address of node2")


def test_inventory_report_of_a_good_cluster_is_empty() -> None:
    nodes = [
        NodeInput("erdma-node1", "172.20.20.145", "erdma"),
        NodeInput("erdma-node2", "172.20.20.143", "erdma"),
    ]
    assert checks.inventory_report(nodes) == {}


def test_one_fabric_for_the_whole_cluster() -> None:
    nodes = [("node1", "erdma"), ("node2", "roce"), ("node3", "erdma")]
    assert messages(checks.mixed_fabric_problems(nodes)) == [
        "node2: rdmaforge_fabric='roce' differs from the rest of the cluster ('erdma' on node1, node3); "
        "allowed: one fabric profile for every node of group cluster"
    ]


def test_mixed_fabric_tie_goes_to_the_first_node_and_names_the_group() -> None:
    nodes = [("a", "tcp"), ("b", "infiniband"), ("c", "infiniband"), ("d", "tcp")]
    assert messages(checks.mixed_fabric_problems(nodes, "gpus")) == [
        "b: rdmaforge_fabric='infiniband' differs from the rest of the cluster ('tcp' on a, d); "
        "allowed: one fabric profile for every node of group gpus",
        "c: rdmaforge_fabric='infiniband' differs from the rest of the cluster ('tcp' on a, d); "
        "allowed: one fabric profile for every node of group gpus",
    ]


def test_mixed_fabric_ignores_unset_and_unknown_profiles() -> None:
    # those get fabric_problems' own line; one valid profile among them is no conflict
    assert checks.mixed_fabric_problems([("a", "erdma"), ("b", None), ("c", "ethernet"), ("d", ["roce"])]) == []
    assert checks.mixed_fabric_problems([("a", "erdma"), ("b", "erdma")]) == []
    assert checks.mixed_fabric_problems([]) == []


def test_inventory_report_compares_fabrics_with_nodes_outside_the_play() -> None:
    nodes = [
        NodeInput("node1", "10.0.0.1", "erdma", in_play=False),
        NodeInput("node2", "10.0.0.2", "erdma", in_play=False),
        NodeInput("node3", "10.0.0.3", "tcp"),
    ]
    assert checks.inventory_report(nodes, "gpu") == {
        "node3": [
            "node3: rdmaforge_fabric='tcp' differs from the rest of the cluster ('erdma' on node1, node2); "
            "allowed: one fabric profile for every node of group gpu"
        ]
    }
    # a --limit run of the odd node out is refused; one of the majority is not blamed for it
    nodes = [NodeInput("node1", "10.0.0.1", "erdma"), NodeInput("node3", "10.0.0.3", "tcp", in_play=False),
             NodeInput("node2", "10.0.0.2", "erdma", in_play=False)]  # fmt: skip
    assert checks.inventory_report(nodes) == {}


def _inventory_filter() -> Any:
    path = PROJECT_ROOT / "filter_plugins/rdmaforge_inventory.py"
    spec = importlib.util.spec_from_file_location("_rdmaforge_inventory", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_filter_keeps_the_inventory_order_and_reads_the_group_name() -> None:
    # Ansible's union filter hands the hosts over in no particular order
    groups = {"gpus": ["n1", "n2", "n3", "n4"]}
    hostvars = {
        name: {"ansible_host": f"10.0.0.{i}", "rdmaforge_fabric": fabric, "groups": groups,
               "preflight_cluster_group": "gpus"}
        for i, (name, fabric) in enumerate([("n1", "roce"), ("n2", "tcp"), ("n3", "tcp"), ("n4", "roce")], 1)
    }  # fmt: skip
    report = _inventory_filter().inventory_report(hostvars, ["n3", "n4", "n2", "n1"], ["n1", "n2", "n3", "n4"])
    assert report == {
        "problems": {
            host: [
                f"{host}: rdmaforge_fabric='tcp' differs from the rest of the cluster ('roce' on n1, n4); "
                "allowed: one fabric profile for every node of group gpus"
            ]
            for host in ("n2", "n3")
        },
        "warnings": [],
    }


def test_filter_names_the_group_the_preflight_role_defaults_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # hostvars hold no role defaults: an inventory that leaves preflight_cluster_group unset gets role preflight's
    redefine_default(tmp_path, monkeypatch, "preflight", "preflight_cluster_group", "gpus")
    hostvars = {name: {"ansible_host": f"10.0.0.{i}", "rdmaforge_fabric": fabric, "groups": {"gpus": ["n1", "n2"]}}
                for i, (name, fabric) in enumerate([("n1", "roce"), ("n2", "tcp")], 1)}  # fmt: skip
    report = _inventory_filter().inventory_report(hostvars, ["n2", "n1"], ["n1", "n2"])
    assert report["problems"]["n2"] == [
        "n2: rdmaforge_fabric='tcp' differs from the rest of the cluster ('roce' on n1); allowed: one fabric profile "
        "for every node of group gpus"
    ]


def test_an_element_error_is_reported_once() -> None:
    options = {"paths": {"type": "list", "elements": "dict"}}
    errors = [
        "dictionary requested, could not parse JSON or key=value",
        "Elements value for option 'paths' is of type str and we were unable to convert to dict: "
        "dictionary requested, could not parse JSON or key=value",
    ]
    assert messages(checks.argspec_problems("node1", "r", errors, options, {"paths": ["/sys"]})) == [
        'node1: paths=["/sys"] is not valid for role r; allowed: a list of mappings '
        "(see roles/r/meta/argument_specs.yml)"
    ]


# --- versions --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "version"),
    [
        ("v2.21.5-1", "2.21.5"),
        ("v2.17.8", "2.17.8"),
        ("https://github.com/NVIDIA/nccl/archive/refs/tags/v2.29.7-1.tar.gz", "2.29.7"),
        ("http://198.18.0.1:8080/nccl/nvidia-nccl_2.29.7-1.orig.tar.gz", "2.29.7"),
        ("https://mirror.example/nccl-tests-2.19.6.tar.gz", "2.19.6"),
        ("master", None),
        ("3b5c1f0e9d", None),
        ("release-2.21", None),
        ("https://mirror.example/nccl-src-cuda12.4.1.tar.gz", None),
    ],
)
def test_version_in_a_tag_or_tarball_name(source: str, version: str | None) -> None:
    assert checks.version_in(source) == version


def test_git_ref_of_another_version_is_refused() -> None:
    values = {"nccl_build_version": "2.29.7", "nccl_build_git_ref": "v2.21.5-1"}
    assert messages(checks.version_problems("node2", values)) == [
        "node2: nccl_build_git_ref='v2.21.5-1' is version 2.21.5, but nccl_build_version='2.29.7' and "
        "nccl_build_source='git' builds from nccl_build_git_ref; allowed: nccl_build_git_ref of version 2.29.7 (or "
        "set nccl_build_version: '2.21.5')"
    ]


def test_a_source_of_another_version_than_the_roles_default_is_refused() -> None:
    """The version left at the role's default (fuzz 13b): a tarball of another release was accepted, then built and
    installed under the default version's name. The default comes from roles/nccl_build/defaults/main.yml."""
    import yaml as _yaml

    from rdmaforge.paths import ROLES_DIR

    default = _yaml.safe_load((ROLES_DIR / "nccl_build" / "defaults" / "main.yml").read_text())["nccl_build_version"]
    values = {"nccl_build_source": "tarball", "nccl_build_tarball_url": NCCL_TARBALL}
    (message,) = messages(checks.version_problems("node1", values))
    assert message == (
        f"node1: nccl_build_tarball_url={NCCL_TARBALL!r} is version 2.21.5, but nccl_build_version={default!r} and "
        "nccl_build_source='tarball' builds from nccl_build_tarball_url; allowed: nccl_build_tarball_url of version "
        f"{default} (or set nccl_build_version: '2.21.5')"
    )
    assert checks.version_problems("node1", {**values, "nccl_build_version": "2.21.5"}) == []


def test_tarball_of_another_version_is_refused_only_when_it_is_the_source() -> None:
    values = {
        "nccl_tests_version": "2.17.8",
        "nccl_tests_tarball_url": "https://mirror.example/nccl-tests-2.13.9.tar.gz",
        "nccl_tests_git_ref": "v2.17.8",
    }
    assert checks.version_problems("node1", values) == []  # source: git (the role's default)
    (message,) = messages(checks.version_problems("node1", {**values, "nccl_tests_source": "tarball"}))
    assert message == (
        "node1: nccl_tests_tarball_url='https://mirror.example/nccl-tests-2.13.9.tar.gz' is version 2.13.9, "
        "but nccl_tests_version='2.17.8' and nccl_tests_source='tarball' builds from nccl_tests_tarball_url; "
        "allowed: nccl_tests_tarball_url of version 2.17.8 (or set nccl_tests_version: '2.13.9')"
    )


def test_the_source_in_use_is_the_roles_default_where_the_inventory_sets_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With role nccl_tests building from its tarball by default, an inventory that sets no nccl_tests_source has
    its tarball judged, not its git ref; the message names the source variable and the value that chose it."""
    redefine_default(tmp_path, monkeypatch, "nccl_tests", "nccl_tests_source", "tarball")
    values = {
        "nccl_tests_version": "2.17.8",
        "nccl_tests_tarball_url": "https://mirror.example/nccl-tests-2.13.9.tar.gz",
        "nccl_tests_git_ref": "v2.11.0",
    }
    (problem,) = checks.version_problems("node1", values)
    assert problem.variable == "nccl_tests_tarball_url"
    assert "nccl_tests_source='tarball' builds from nccl_tests_tarball_url" in problem.message
    assert checks.version_problems("node1", {**values, "nccl_tests_source": "git"})[0].variable == "nccl_tests_git_ref"


def test_every_role_source_with_a_version_is_compared() -> None:
    """The sources compared are the roles' own: each source variable's value is one of its argument_specs choices,
    and each role that sets a version has its git ref and its tarball URL compared with it."""
    specs = {}
    for path in paths.ROLES_DIR.glob("*/meta/argument_specs.yml"):
        specs.update(yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"])
    compared = {(s.version, s.variable) for s in checks.versioned_sources()}
    for each in checks.versioned_sources():
        assert each.in_use in specs[each.source]["choices"], each
    versions = [name for name in specs if name.startswith("nccl_") and name.endswith("_version")]
    assert versions
    for version in versions:
        role = version.removesuffix("_version")
        if f"{role}_git_ref" in specs:
            assert (version, f"{role}_git_ref") in compared
        if f"{role}_tarball_url" in specs:
            assert (version, f"{role}_tarball_url") in compared


def test_matching_or_unversioned_sources_pass() -> None:
    assert checks.version_problems("n", {"nccl_build_version": "2.29.7", "nccl_build_git_ref": "v2.29.7-1"}) == []
    assert checks.version_problems("n", {"nccl_build_version": "2.29.7", "nccl_build_git_ref": "master"}) == []
    # no version in the inventory: the role's default (2.29.7) is the version in use, and the ref is another's
    (message,) = messages(checks.version_problems("n", {"nccl_build_git_ref": "v2.21.5-1"}))
    assert message.startswith("n: nccl_build_git_ref='v2.21.5-1' is version 2.21.5, but nccl_build_version=")


def test_lab_inventory_versions_agree(tmp_path: Path) -> None:
    """The inventory `rdmaforge lab up` writes (generated here into tmp_path, as a clean clone has none yet)."""
    from rdmaforge.lab import inventory, packages, spec
    from rdmaforge.lab.mirror import Mirror

    paths = spec.LabPaths(state=tmp_path / "state", cache=tmp_path / "cache", inventory_dir=tmp_path / "inv")
    served = Mirror(
        tmp_path / "www", "AB" * 20, packages.NCCL_SOURCE.name, "0" * 64, packages.NCCL_TESTS_TARBALL, "1" * 64
    )
    inventory.write(paths, [spec.node_spec(1, 1)], served)
    mirror = yaml.safe_load((paths.inventory_dir / "group_vars/all/mirror.yml").read_text())
    assert checks.version_problems("node1", mirror) == []
    assert checks.version_in(mirror["nccl_build_tarball_url"]) == str(mirror["nccl_build_version"])


# --- /etc/hosts ------------------------------------------------------------------------------------


def test_etc_hosts_lines() -> None:
    lines, problems = checks.etc_hosts_lines(
        [
            HostsEntry("node1", "10.0.0.1"),
            HostsEntry("node2.rack1.example", "10.0.0.2"),
            HostsEntry("node3.example", "node3.example", default_ipv4="10.0.0.3"),
        ]
    )
    assert problems == []
    assert lines == [
        "10.0.0.1\tnode1",
        "10.0.0.2\tnode2.rack1.example node2",
        "10.0.0.3\tnode3.example node3",
    ]


def test_etc_hosts_never_sends_two_names_to_one_fallback_address() -> None:
    """Nodes addressed by DNS name fall back to their default route's IPv4; behind NAT (Vagrant's 10.0.2.15) that is
    one address for all, and /etc/hosts sent every peer's name to one machine without a word."""
    nat = [HostsEntry(f"node{i}.example", f"node{i}.example", default_ipv4="10.0.2.15") for i in (1, 2, 3)]
    lines, problems = checks.etc_hosts_lines(nat)
    assert lines == ["10.0.2.15\tnode1.example node1"]
    assert problems == [
        f"node{i}.example: ansible_host='node{i}.example' is a DNS name, and the IPv4 of the node's default route "
        "(10.0.2.15, ansible_default_ipv4) is also node1.example's; allowed: an IPv4 address no other node has in "
        "ansible_host, or cluster_hosts_manage: false" for i in (2, 3)
    ]


def test_etc_hosts_needs_an_ipv4_address() -> None:
    lines, problems = checks.etc_hosts_lines([HostsEntry("node1", None), HostsEntry("node2", "10.0.0.2")])
    assert lines == ["10.0.0.2\tnode2"]
    assert problems[0].startswith("node1: inventory_hostname='node1' is not an IPv4 address")
    assert "cluster_hosts_manage: false" in problems[0]
    # A node outside --limit has no facts gathered by this run: "site.yml gathers them" alone would not help.
    assert "for the nodes of its --limit only: a node outside it needs facts in the cache, so run once without " \
           "--limit" in problems[0]  # fmt: skip


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {"rdmaforge_fabric": "erdma", "cluster_hosts_manage": "maybe"},
            "node2: cluster_hosts_manage='maybe' is not valid for role x; allowed: true or false",
        ),
        ({}, "node2: rdmaforge_fabric is not set, but role x requires it; " + ALLOWED_FABRICS),
        (
            {"rdmaforge_fabric": "ib"},
            "node2: rdmaforge_fabric='ib' is not valid for role x; " + ALLOWED_FABRICS,
        ),
        (
            {"rdmaforge_fabric": "erdma", "nccl_env": "a"},
            "node2: nccl_env='a' is not valid for role x; allowed: a list of mappings",
        ),
    ],
)
def test_argspec_problems_understand_ansibles_own_messages(values: dict, expected: str) -> None:
    """Feed the messages of the validator behind validate_argument_spec, so that an ansible-core
    upgrade that rewords them shows up here."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    errors = ArgumentSpecValidator(OPTIONS).validate(values).error_messages
    found = messages(checks.argspec_problems("node2", "x", errors, OPTIONS, values))
    assert len(found) == 1, (errors, found)
    assert found[0].startswith(expected), (errors, found)


# `df -P -k /opt /var/cache /var/tmp` as printed on this machine, and with /var/tmp on a small tmpfs.
DF_ONE_DISK = """Filesystem     1024-blocks     Used Available Capacity Mounted on
/dev/vda         264212084 30433628  75957284      29% /
/dev/vda         264212084 30433628  75957284      29% /
/dev/vda         264212084 30433628  75957284      29% /
"""
DF_SMALL_TMP = """Filesystem     1024-blocks     Used Available Capacity Mounted on
/dev/vda          20480000 19660800    819200      96% /
/dev/vda          20480000 19660800    819200      96% /
tmpfs               102400        0    102400       0% /var/tmp
"""
NEEDS = {"/opt": 1024, "/var/cache": 512, "/var/tmp": 4096}


def test_enough_free_space_is_no_problem() -> None:
    assert checks.free_space_problems("node1", list(NEEDS), DF_ONE_DISK, NEEDS) == []


def test_paths_on_one_filesystem_add_up_and_the_message_has_the_numbers() -> None:
    problems = checks.free_space_problems("node1", list(NEEDS), DF_SMALL_TMP, NEEDS)
    assert problems == [
        "node1: /opt and /var/cache are on / with 800 MiB free; 1536 MiB needed (MiB per path: /opt 1024, "
        "/var/cache 512; preflight_min_free_mb, preflight_builder_free_mb)",
        "node1: /var/tmp is on /var/tmp with 100 MiB free; 4096 MiB needed (MiB per path: /var/tmp 4096; "
        "preflight_min_free_mb, preflight_builder_free_mb)",
    ]


def test_a_path_df_cannot_read_is_named() -> None:
    short = "\n".join(DF_ONE_DISK.splitlines()[:2]) + "\n"  # df: /nowhere: No such file or directory
    assert checks.free_space_problems("n", ["/opt", "/nowhere"], short, {"/opt": 1, "/nowhere": 1}) == [
        "n: cannot measure free space of /opt, /nowhere (df answered 1 of them)"
    ]


def test_a_df_that_did_not_answer_says_why() -> None:
    """df on a stale NFS mount, killed at node_probe's command_timeout: its stderr is the reason."""
    killed = "/usr/bin/df did not answer within 60 s (killed)"
    assert checks.free_space_problems("n", ["/opt"], "", {"/opt": 1}, killed + "\n") == [
        f"n: cannot measure free space of /opt (df answered 0 of them: {killed})"
    ]


# --- benchmark thresholds --------------------------------------------------------------------------


def test_a_benchmark_threshold_of_0_or_less_is_an_inventory_error() -> None:
    """A threshold of 0 passed every run (0 GB/s included); empty (null or "") reports without judging."""
    good = {"benchmark_min_efficiency": 0.85, "benchmark_e2e_min_linearity": None,
            "benchmark_e2e_min_intra_node_linearity": ""}  # fmt: skip
    assert checks.threshold_problems("node1", good) == []
    bad = {"benchmark_min_efficiency": 0, "benchmark_e2e_min_linearity": -1,
           "benchmark_e2e_min_intra_node_linearity": "x"}  # fmt: skip
    assert messages(checks.threshold_problems("node1", bad)) == [
        "node1: benchmark_min_efficiency=0 is not allowed; allowed: a number above 0 and at most 1, or empty (null or "
        '"": reported, not judged)',
        'node1: benchmark_e2e_min_linearity=-1 is not allowed; allowed: a number above 0, or empty (null or "": '
        "reported, not judged)",
        "node1: benchmark_e2e_min_intra_node_linearity='x' is not allowed; allowed: a number above 0, or empty (null "
        'or "": reported, not judged)',
    ]
    nodes = [NodeInput("node1", "10.0.0.1", "erdma", values={"benchmark_min_efficiency": 1.2})]
    assert checks.inventory_report(nodes)["node1"][0].startswith("node1: benchmark_min_efficiency=1.2 is not allowed")


@pytest.mark.parametrize("value", [5, -0.1, 1, "abc", True])
def test_a_regression_tolerance_that_is_no_fraction_is_an_inventory_error(value: object) -> None:
    """run.json takes a tolerance from 0 to below 1; anything else failed only after the benchmark had run."""
    assert checks.threshold_problems("node1", {"benchmark_regression_tolerance": 0.1}) == []
    assert checks.threshold_problems("node1", {"benchmark_regression_tolerance": "0"}) == []
    assert messages(checks.threshold_problems("node1", {"benchmark_regression_tolerance": value})) == [
        f"node1: benchmark_regression_tolerance={checks.show(value)} is not allowed; allowed: a fraction from 0 to "
        "below 1 (0.1 is 10%)"
    ]


# --- downloads -------------------------------------------------------------------------------------

# sha256sum of an empty file: a well-known value, not one the code under test computed.
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
NCCL_TARBALL = "https://github.com/NVIDIA/nccl/archive/refs/tags/v2.21.5-1.tar.gz"


def report_of(**values: object) -> list[str]:
    node = NodeInput("node1", None, "erdma", values={"rdmaforge_fabric": "erdma", **values})
    return checks.inventory_report([node]).get("node1", [])


@pytest.mark.parametrize("role", ["nccl_build", "nccl_tests"])
def test_a_tarball_source_needs_a_url_and_a_sha256_before_any_node_is_touched(role: str) -> None:
    assert report_of(**{f"{role}_source": "tarball"}) == [
        f"node1: {role}_tarball_url='' is not a download URL, but {role}_source='tarball' downloads it; "
        "allowed: an http://, https:// or ftp:// URL with a host, or a file:// URL",
        f"node1: {role}_tarball_sha256='' is not a sha256, but {role}_source='tarball' needs one; "
        "allowed: 64 lower-case hexadecimal digits, as sha256sum prints them",
    ]


@pytest.mark.parametrize(
    ("url", "sha256"),
    [
        ("htps:/github.com/NVIDIA/nccl.tar.gz", EMPTY_SHA256),  # a mistyped scheme
        ("github.com/NVIDIA/nccl/archive/refs/tags/v2.21.5-1.tar.gz", EMPTY_SHA256),  # no scheme
        (NCCL_TARBALL, EMPTY_SHA256[:63]),  # one digit lost in the copy
        (NCCL_TARBALL, EMPTY_SHA256.upper()),  # stat's checksum, compared with it, is lower-case
        (NCCL_TARBALL, f"sha256:{EMPTY_SHA256}"),  # get_url's checksum form, prefixed again by the role
        (NCCL_TARBALL, 12345),
    ],
)
def test_a_malformed_download_is_refused(url: str, sha256: object) -> None:
    lines = report_of(nccl_tests_source="tarball", nccl_tests_tarball_url=url, nccl_tests_tarball_sha256=sha256,
                      nccl_tests_version="2.21.5")  # the version the URL names: only the download is wrong
    assert len(lines) == 1
    assert lines[0].startswith("node1: nccl_tests_tarball_")


def test_a_well_formed_download_passes_and_an_unused_one_is_not_checked() -> None:
    assert report_of(nccl_build_source="tarball", nccl_build_tarball_url=NCCL_TARBALL,
                     nccl_build_tarball_sha256=EMPTY_SHA256, nccl_build_version="2.21.5") == []  # fmt: skip
    assert report_of(nccl_build_tarball_url="", nccl_build_tarball_sha256="todo") == []  # git is the default source


def test_the_aiacc_package_needs_its_sha256_where_aiacc_is_the_provider() -> None:
    # seed 000's package source on an erdma cluster (aiacc is the provider there unless the inventory says otherwise)
    assert report_of(nccl_plugin_aiacc_source="package") == [
        "node1: nccl_plugin_aiacc_package_sha256='' is not a sha256, but nccl_plugin_aiacc_source='package' needs "
        "one; allowed: 64 lower-case hexadecimal digits, as sha256sum prints them"
    ]
    assert report_of(nccl_plugin_aiacc_source="package", nccl_plugin_provider="none") == []
    assert report_of(nccl_plugin_aiacc_source="package", nccl_plugin_aiacc_package_sha256=EMPTY_SHA256) == []


def test_the_plugin_provider_the_inventory_does_not_set_is_the_nccl_plugin_roles_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nccl_plugin_provider's default is role nccl_plugin's Jinja, evaluated for the node, not restated: with the
    role's default changed to aiacc on roce only, the AIACC package is checked on roce and not on erdma; the
    inventory's value still wins."""
    redefine_default(tmp_path, monkeypatch, "nccl_plugin", "nccl_plugin_provider",
                     "{{ 'aiacc' if rdmaforge_fabric | default('tcp') == 'roce' else 'none' }}")  # fmt: skip
    no_sha256 = ("node1: nccl_plugin_aiacc_package_sha256='' is not a sha256, but nccl_plugin_aiacc_source='package' "
                 "needs one; allowed: 64 lower-case hexadecimal digits, as sha256sum prints them")  # fmt: skip
    assert report_of(nccl_plugin_aiacc_source="package") == []  # erdma
    assert report_of(nccl_plugin_aiacc_source="package", rdmaforge_fabric="roce") == [no_sha256]
    assert report_of(nccl_plugin_aiacc_source="package", nccl_plugin_provider="aiacc") == [no_sha256]


def test_a_pinned_plugin_sha256_the_inventory_sets_is_checked() -> None:
    assert report_of(nccl_plugin_aiacc_library_sha256=EMPTY_SHA256) == []
    assert report_of(nccl_plugin_aiacc_library_sha256=EMPTY_SHA256.upper()) == [
        f"node1: nccl_plugin_aiacc_library_sha256='{EMPTY_SHA256.upper()}' is not a sha256; "
        "allowed: 64 lower-case hexadecimal digits, as sha256sum prints them"
    ]


def test_a_switched_off_role_downloads_nothing_so_its_tarball_is_not_checked() -> None:
    # the lab's nccl-tests: a tarball source, switched off (rdmaforge/lab/inventory.py)
    assert report_of(nccl_tests_enabled=False, nccl_tests_source="tarball") == []
    assert report_of(nccl_tests_enabled="no", nccl_tests_source="tarball") == []
    assert len(report_of(nccl_tests_enabled="yes", nccl_tests_source="tarball")) == 2


# --- nccl-tests binaries ----------------------------------------------------------------------------

BINARIES_ALLOWED = ("allowed: a list of collectives as nccl-tests' src/Makefile BIN_FILES_LIST names them (all_reduce "
                    "builds all_reduce_perf), or [] for every binary of the release")  # fmt: skip


def test_nccl_tests_binaries_hold_what_the_benchmark_and_pairwise_run() -> None:
    assert report_of(nccl_tests_binaries=[]) == []
    assert report_of(nccl_tests_binaries=["all_reduce", "sendrecv"]) == []  # the defaults' collective and pairwise's
    assert report_of(nccl_tests_binaries=["all_gather"], benchmark_collectives=["all_gather"],
                     pairwise_method="iperf3") == []  # fmt: skip
    assert report_of(nccl_tests_binaries=["sendrecv"], benchmark_nccl_tests=False) == []
    assert report_of(nccl_tests_binaries=["sendrecv"], nccl_tests_enabled=False) == []
    assert report_of(nccl_tests_binaries=["sendrecv"], benchmark_collectives=["all_reduce", "broadcast"]) == [
        'node1: nccl_tests_binaries=["sendrecv"] leaves out all_reduce, which benchmark_collectives=["all_reduce", '
        '"broadcast"] runs; add all_reduce, or set nccl_tests_binaries: [] to build every binary'
    ]  # one line per variable: the first one left out
    assert report_of(nccl_tests_binaries=["all_reduce"], pairwise_method="sendrecv") == [
        "node1: nccl_tests_binaries=[\"all_reduce\"] leaves out sendrecv, which pairwise_method='sendrecv' "
        "(sendrecv_perf on GPU nodes) runs; add sendrecv, or set nccl_tests_binaries: [] to build every binary"
    ]


@pytest.mark.parametrize("name", ["all_reduce_perf", "all reduce", "AllReduce", "$(shell id)", "", 3])
def test_an_nccl_tests_binary_make_cannot_take_is_refused(name: object) -> None:
    hint = "; without the _perf suffix" if name == "all_reduce_perf" else ""
    value = [name, "sendrecv"]
    shown = checks.show(value)
    assert report_of(nccl_tests_binaries=value) == [
        f"node1: nccl_tests_binaries={shown}: {checks.show(name)} is not allowed; {BINARIES_ALLOWED}{hint}"
    ]


# --- pinned git commits ------------------------------------------------------------------------------

#: The commits of the default tags, read from NVIDIA's repositories (git rev-parse 'v2.29.7-1^{commit}' in
#: NVIDIA/nccl, 'v2.17.8^{commit}' in NVIDIA/nccl-tests).
NCCL_V2_29_7_1 = "b91894bd5b190c874d98a017f93f5daa515b65d0"
NCCL_TESTS_V2_17_8 = "81463c58d093dba403c28c28cd050ea948e9e1ba"
GIT_COMMIT_ALLOWED = (
    "allowed: a full commit id, 40 hexadecimal digits as `git rev-parse '<tag>^{commit}'` prints them (quoted in "
    "YAML), or '' to build the ref unpinned"
)


@pytest.mark.parametrize(
    ("role", "tag", "commit"),
    [("nccl_build", "v2.29.7-1", NCCL_V2_29_7_1), ("nccl_tests", "v2.17.8", NCCL_TESTS_V2_17_8)],
)
def test_the_default_git_sources_are_pinned_to_the_commits_of_their_tags(role: str, tag: str, commit: str) -> None:
    assert role_defaults.defaults(role)[f"{role}_git_commit"] == commit
    spec = yaml.safe_load((PROJECT_ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    assert spec["argument_specs"]["main"]["options"][f"{role}_git_commit"]["default"] == commit
    # the ref preflight takes the default commit for: the role's default ref, made of its default version
    (pin,) = [p for p in checks.GIT_PINS if p.commit == f"{role}_git_commit"]
    assert pin.default_ref == tag


@pytest.mark.parametrize(
    "value",
    [
        NCCL_V2_29_7_1[:7],  # the short id git log --oneline prints
        f"{NCCL_V2_29_7_1}0",  # 41 digits
        "v2.29.7-1",  # the tag itself
        NCCL_V2_29_7_1.replace("b", "g", 1),  # not hexadecimal
        12345,  # an unquoted all-digit id, read by YAML as a number
        None,
    ],
)
def test_a_malformed_git_commit_is_refused(value: object) -> None:
    shown = repr(value) if isinstance(value, str) else "null" if value is None else str(value)
    assert report_of(nccl_build_git_commit=value) == [
        f"node1: nccl_build_git_commit={shown} is not allowed; {GIT_COMMIT_ALLOWED}"
    ]


def test_a_full_commit_or_empty_passes() -> None:
    assert report_of(nccl_build_git_commit=NCCL_V2_29_7_1, nccl_tests_git_commit=NCCL_TESTS_V2_17_8) == []
    assert report_of(nccl_build_git_commit="", nccl_tests_git_commit="") == []
    assert report_of(nccl_tests_git_commit=NCCL_TESTS_V2_17_8.upper()) == []  # the role compares it lower-cased


def test_another_ref_with_the_default_commit_is_refused_before_any_node_is_touched() -> None:
    # the build would check out v2.30.3-1 and find a commit other than v2.29.7-1's
    assert report_of(nccl_build_version="2.30.3") == [
        f"node1: nccl_build_git_commit is left at {NCCL_V2_29_7_1!r}, the commit of v2.29.7-1, but the build checks "
        "out nccl_build_git_ref='v2.30.3-1'; allowed: set nccl_build_git_commit to the commit of v2.30.3-1 (git "
        "rev-parse 'v2.30.3-1^{commit}', verified out of band), or '' to build it unpinned"
    ]
    (message,) = report_of(nccl_tests_git_ref="master")
    assert message.startswith(f"node1: nccl_tests_git_commit is left at {NCCL_TESTS_V2_17_8!r}, the commit of v2.17.8")
    # the same ref as the default's, a commit of its own, an unpinned build, a tarball, nccl-tests switched off
    assert report_of(nccl_build_version="2.29.7", nccl_build_git_ref="v2.29.7-1") == []
    assert report_of(nccl_build_version="2.30.3", nccl_build_git_commit="0123456789abcdef" * 2 + "01234567") == []
    assert report_of(nccl_build_git_ref="v2.30.3-1", nccl_build_git_commit="", nccl_build_version="2.30.3") == []
    assert report_of(nccl_build_source="tarball", nccl_build_tarball_url=NCCL_TARBALL,
                     nccl_build_tarball_sha256=EMPTY_SHA256, nccl_build_version="2.21.5") == []  # fmt: skip
    assert report_of(nccl_tests_enabled=False, nccl_tests_version="2.19.6") == []


def test_a_default_ref_not_made_of_the_version_is_the_ref_of_every_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # roles whose nccl_build defaults to a branch: a new version alone checks out the same ref, with its commit
    for path in paths.ROLES_DIR.glob("*/defaults/main.yml"):
        copy = tmp_path / path.relative_to(paths.ROLES_DIR)
        copy.parent.mkdir(parents=True)
        copy.write_text(path.read_text().replace('nccl_build_git_ref: "v{{ nccl_build_version }}-1"',
                                                 "nccl_build_git_ref: master"))  # fmt: skip
    monkeypatch.setattr(paths, "ROLES_DIR", tmp_path)
    assert checks.git_commit_problems("node1", {"nccl_build_version": "2.30.3"}) == []
    (problem,) = checks.git_commit_problems("node1", {"nccl_build_git_ref": "v2.30.3-1"})
    assert problem.message.startswith(f"node1: nccl_build_git_commit is left at {NCCL_V2_29_7_1!r}, the commit of "
                                      "master, but the build checks out nccl_build_git_ref='v2.30.3-1'")  # fmt: skip


@pytest.mark.parametrize("template", ["{{ 'v' ~ nccl_build_version ~ '-1' }}", "v{{nccl_build_version}}-1"])
def test_the_default_ref_is_the_roles_jinja_evaluated_not_a_text_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str
) -> None:
    """The ref a version alone checks out is the role's default ref evaluated for it: a replace of the text
    "{{ nccl_build_version }}" missed these spellings of the same ref and left a template, which the check skipped
    (a new version with the old pinned commit passed)."""
    redefine_default(tmp_path, monkeypatch, "nccl_build", "nccl_build_git_ref", template)
    (pin,) = [p for p in checks.GIT_PINS if p.ref == "nccl_build_git_ref"]
    assert pin.default_ref == "v2.29.7-1"
    (message,) = report_of(nccl_build_version="2.30.3")
    assert message.startswith(f"node1: nccl_build_git_commit is left at {NCCL_V2_29_7_1!r}, the commit of v2.29.7-1, "
                              "but the build checks out nccl_build_git_ref='v2.30.3-1'")  # fmt: skip
    assert report_of(nccl_build_version="2.29.7") == []


#: What the roles take for a version: the release nccl_build's default tag v2.29.7-1 is made of.
RELEASE_ALLOWED = (
    "allowed: a release number, MAJOR.MINOR.PATCH in digits such as '2.29.7', without the tag's v or suffix (the "
    "role makes nccl_build_git_ref='v2.29.7-1' of '2.29.7')"
)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("v2.29.7-1", "'v2.29.7-1'"),  # the tag: the role would check out vv2.29.7-1-1
        ("2.29", "'2.29'"),
        ("2.x", "'2.x'"),
        ("latest", "'latest'"),
        (2.29, "2.29"),  # unquoted in YAML: a number
        (" 2.29.7", "' 2.29.7'"),
    ],
)
def test_a_version_that_is_no_release_is_refused_as_such_pinned_or_not(value: object, shown: str) -> None:
    """With the default commit, the commit check blamed the commit for the ref a malformed version makes; unpinned,
    nothing was refused and the checkout of a tag that does not exist failed on the builder, mid-converge."""
    line = f"node1: nccl_build_version={shown} is not allowed; {RELEASE_ALLOWED}"
    assert report_of(nccl_build_version=value) == [line]
    assert report_of(nccl_build_version=value, nccl_build_git_commit="") == [line]
    assert report_of(nccl_build_version=value, nccl_build_source="tarball", nccl_build_tarball_url=NCCL_TARBALL,
                     nccl_build_tarball_sha256=EMPTY_SHA256) == [line]  # fmt: skip
    (tests,) = report_of(nccl_tests_version=value)
    assert tests.startswith(f"node1: nccl_tests_version={shown} is not allowed; allowed: a release number")
    # a release keeps the commit check's line, and passes unpinned
    (message,) = report_of(nccl_build_version="2.30.3")
    assert message.startswith("node1: nccl_build_git_commit is left at ")
    assert report_of(nccl_build_version="2.30.3", nccl_build_git_commit="") == []


# --- pip hash pinning ----------------------------------------------------------------------------------

HASH_A = "a" * 64
HASH_B = "0123456789abcdef" * 4
HASHED_ALLOWED = (
    "allowed: one package a line, `name==version --hash=sha256:<64 lower-case hexadecimal digits>` (one --hash per "
    "wheel), every package of the environment included (pip's --require-hashes), or [] for no hash check"
)


def test_the_benchmark_installs_torch_unpinned_by_default() -> None:
    assert role_defaults.defaults("benchmark")["benchmark_e2e_torch_requirements"] == []  # documented: no hash check
    spec = yaml.safe_load((PROJECT_ROOT / "roles" / "benchmark" / "meta" / "argument_specs.yml").read_text())
    assert spec["argument_specs"]["main"]["options"]["benchmark_e2e_torch_requirements"]["default"] == []


def test_hash_pinned_requirements_pass() -> None:
    assert report_of(benchmark_e2e_torch_requirements=[]) == []
    assert report_of(benchmark_e2e_torch_requirements=[
        f"torch==2.13.0 --hash=sha256:{HASH_A} --hash=sha256:{HASH_B}",
        f"typing_extensions==4.12.2 --hash=sha256:{HASH_B}",
        f"jinja2[i18n]==3.1.4 --hash=sha256:{HASH_A}",
    ]) == []  # fmt: skip
    assert report_of(benchmark_e2e_torch="torch==2.12.0",
                     benchmark_e2e_torch_requirements=[f"torch==2.12.0 --hash=sha256:{HASH_A}"]) == []  # fmt: skip


@pytest.mark.parametrize(
    "line",
    [
        "torch==2.13.0",  # no hash: pip's --require-hashes refuses it on every node
        f"torch==2.13.0 --hash=sha256:{HASH_A[:63]}",  # a digit lost in the copy
        f"torch==2.13.0 --hash=sha256:{HASH_A.upper()}",  # pip hash prints lower case
        f"torch==2.13.0 --hash=md5:{HASH_A[:32]}",  # not a sha256
        f"torch>=2.13 --hash=sha256:{HASH_A}",  # hash-checking mode needs == pins
        f"torch==2.13.0 \\ --hash=sha256:{HASH_A}",  # pip-compile's line continuation, not joined
        12345,
    ],
)
def test_a_malformed_hash_pinned_requirement_is_refused(line: object) -> None:
    shown = repr(line) if isinstance(line, str) else str(line)
    assert report_of(benchmark_e2e_torch_requirements=[f"torch==2.13.0 --hash=sha256:{HASH_A}", line]) == [
        f"node1: benchmark_e2e_torch_requirements[1]={shown} is not allowed; {HASHED_ALLOWED}"
    ]


def test_hash_pinned_requirements_must_be_a_list_and_name_the_torch_the_benchmark_installs() -> None:
    assert report_of(benchmark_e2e_torch_requirements=f"torch==2.13.0 --hash=sha256:{HASH_A}") == [
        f"node1: benchmark_e2e_torch_requirements='torch==2.13.0 --hash=sha256:{HASH_A}' is not allowed; allowed: a "
        f"list, {HASHED_ALLOWED.removeprefix('allowed: ')}"
    ]
    assert report_of(benchmark_e2e_torch_requirements=[f"torch==2.12.0 --hash=sha256:{HASH_A}"]) == [
        "node1: benchmark_e2e_torch_requirements pins torch==2.12.0, but benchmark_e2e_torch='torch==2.13.0' is what "
        "the benchmark installs; allowed: a line for torch==2.13.0, hashed like the others"
    ]
    (message,) = report_of(benchmark_e2e_torch_requirements=[f"numpy==2.1.0 --hash=sha256:{HASH_A}"])
    assert message.startswith("node1: benchmark_e2e_torch_requirements pins no torch, but ")


# --- misspelled variables ----------------------------------------------------------------------------

ROLES = PROJECT_ROOT / "roles"


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("rdmaforge_fabirc", "rdmaforge_fabric"),  # inventories/example/group_vars/all/fabric.yml's variable
        ("hugepages_enabeld", "hugepages_enabled"),  # inventories/example/group_vars/all/hugepages.yml's
        ("hugepage_count", "hugepages_count"),
        ("eni_per_gpus", "eni_per_gpu"),  # inventories/example/group_vars/all/eni.yml's
        ("cluster_host_manage", "cluster_hosts_manage"),  # inventories/example/group_vars/all/cluster_hosts.yml's
        ("rdmaforge_network_retry", "rdmaforge_network_retries"),  # .../network.yml's
    ],
)
def test_a_misspelled_variable_of_ours_is_named_with_the_one_meant(typo: str, meant: str) -> None:
    names = checks.variable_names(ROLES)
    node = NodeInput("node1", None, "erdma", values={"rdmaforge_fabric": "erdma", typo: True})
    assert checks.inventory_report([node], names=names) == {
        "node1": [
            f"node1: {typo} is not a variable rdmaforge reads, so its value would be ignored (did you mean "
            f"{meant!r}?); allowed: a variable of a role's defaults/main.yml or meta/argument_specs.yml, "
            f"such as {meant}"
        ]
    }


def test_the_names_found_in_a_text_are_those_the_name_pattern_finds_in_it() -> None:
    """names_in looks only at stretches of name characters holding an underscore: the same names as the plain
    pattern (lower-case words joined by underscores), on names that start after a digit, an upper-case or a non-ASCII
    letter, end at an upper-case one or at doubled underscores, and on every file the misspelling check reads."""
    pattern = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
    tricky = ["9abc_def", "Xfoo_bar", "abc_DEF", "__x_y__z", "a_b_c__d e_f", "foo_bar.baz_qux(x_1)", "é_a_b x__ _a_"]
    files = [*ROLES.rglob("*.y*ml"), *(PROJECT_ROOT / "playbooks").glob("*.y*ml")]
    files += Path(checks.__file__).parent.rglob("*.py")
    for text in [*tricky, *(path.read_text(errors="replace") for path in files)]:
        assert checks.names_in(text) == pattern.findall(text), text[:200]


def test_the_example_inventory_and_foreign_variables_have_no_misspelling() -> None:
    names = checks.variable_names(ROLES)
    example = PROJECT_ROOT / "inventories" / "example" / "group_vars" / "all"
    values: dict[str, object] = {}
    for path in sorted(example.glob("*.yml")):
        values.update(yaml.safe_load(path.read_text()) or {})
    # a user's own variables, Ansible's, and role variables the roles set for themselves
    values.update(my_team="ml", ansible_user="root", ansible_port=22, hugepages_pages=50, nccl_env_in_force={})
    assert checks.misspelled_variable_problems("node1", values, names) == []


@pytest.mark.parametrize(("value", "shown"), [(0, "0"), (-8, "-8"), ("none", "'none'")])
def test_a_declared_gpu_count_below_1_is_refused(value: object, shown: str) -> None:
    """rdmaforge_gpus_per_node stands in for a count preflight could not read; 0 or less would be ignored, and the
    node's count stay unknown, without a word."""
    nodes = [NodeInput("node1", "10.0.0.1", "erdma", values={"rdmaforge_gpus_per_node": value})]
    assert checks.inventory_report(nodes) == {
        "node1": [
            f"node1: rdmaforge_gpus_per_node={shown} is not allowed; allowed: a whole number of GPUs of 1 or more (the "
            "node's count where preflight cannot read it), or null"
        ]
    }
    declared = [NodeInput("node1", "10.0.0.1", "erdma", values={"rdmaforge_gpus_per_node": 8})]
    assert checks.inventory_report(declared) == {}


@pytest.mark.parametrize(("variable", "least"), [("rdmaforge_gpus_per_node", 1),
                                                 ("workload_manifests_gpus_per_node", 1), ("doctor_expected_gpus", 0)])
@pytest.mark.parametrize(("value", "shown"), [(1025, "1025"), (10**23, "100000000000000000000000"), ("2000", "'2000'"),
                                            (2000.0, "2000.0"), ("4096.0", "'4096.0'")])  # fmt: skip
def test_a_gpu_count_above_1024_is_refused(variable: str, least: int, value: object, shown: str) -> None:
    """1024 GPUs a node is the bound of every GPU count rdmaforge stores: 10**23 is a typo, which render would put into
    --nproc-per-node and a provision into the hostfile."""
    nodes = [NodeInput("node1", "10.0.0.1", "erdma", values={variable: value})]
    assert checks.inventory_report(nodes) == {
        "node1": [f"node1: {variable}={shown} is more GPUs than a node has; allowed: a whole number from {least} to "
                  "1024, or null"]  # fmt: skip
    }
    most = [NodeInput("node1", "10.0.0.1", "erdma", values={variable: 1024})]
    assert checks.inventory_report(most) == {}


def test_preflights_filter_refuses_a_gpu_count_above_1024() -> None:
    """The preflight role (and so provision) reads the inventory report through the filter: the same bound applies."""
    hostvars = {"n1": {"ansible_host": "10.0.0.1", "rdmaforge_fabric": "tcp", "groups": {"cluster": ["n1"]},
                       "workload_manifests_gpus_per_node": 2048}}  # fmt: skip
    report = _inventory_filter().inventory_report(hostvars, ["n1"], ["n1"])
    assert report == {"problems": {"n1": ["n1: workload_manifests_gpus_per_node=2048 is more GPUs than a node has; "
                                          "allowed: a whole number from 1 to 1024, or null"]},
                      "warnings": []}  # fmt: skip


@pytest.mark.parametrize(("variable", "least"), [("workload_manifests_gpus_per_node", 1), ("doctor_expected_gpus", 0)])
@pytest.mark.parametrize("below", [1, 2, 10**6])
def test_a_gpu_count_below_the_least_is_refused(variable: str, least: int, below: int) -> None:
    """doctor_expected_gpus: 0 says a node has no GPU (the lab's); -1 is no count, yet the argument spec's int took
    it. A manifest's GPUs per node are 1 or more (null takes the node's count)."""
    for value in (least - below, str(least - below)):  # from the inventory, and from -e
        shown = repr(value) if isinstance(value, str) else str(value)
        assert report_of(**{variable: value}) == [
            f"node1: {variable}={shown} is not allowed; allowed: a whole number from {least} to 1024, or null"
        ]
    assert report_of(**{variable: least}) == []
    assert report_of(**{variable: None}) == []


# --- ENIs ------------------------------------------------------------------------------------------

ENI_ADDRESS_ALLOWED = (
    "allowed: an IPv4 address with its prefix length, such as 10.0.1.5/24 (ADDRESS/PREFIX; a bare address is taken "
    "as /32)"
)
ENI_GATEWAY_ALLOWED = (
    "allowed: an IPv4 address in the NIC's subnet, such as 10.0.1.1 (the eni role routes IPv4 only), or '' for none"
)
#: A node with one secondary NIC, as nic_facts records it, for the eni role's own plan.
ENI_NICS = [{"name": "eth1", "mac": "aa:01", "ipv4": [{"address": "10.0.1.5", "prefixlen": 24}]}]


def _eni_plan(addresses: dict[str, object] | None = None, gateways: dict[str, object] | None = None) -> object:
    return tuning.eni_plan("node1", ENI_NICS, ["eth1"], 1001, 1001, 1400, addresses, gateways)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "shown"),
    [("999.1.1.1", "'999.1.1.1'"), ("10.0.1.5/33", "'10.0.1.5/33'"), ("fd00::5/64", "'fd00::5/64'"),
     ("10.0.1.5/24/24", "'10.0.1.5/24/24'"), ("", "''"), (None, "null")],
)  # fmt: skip
def test_an_eni_address_the_roles_plan_cannot_read_is_refused(value: object, shown: str) -> None:
    # the eni role's plan cannot read it (a problem of its own now, mid-converge): the reason preflight refuses it
    plan = _eni_plan(addresses={"eth1": value})
    assert plan["enis"] == [] and plan["problems"]  # type: ignore[index]
    assert report_of(eni_addresses={"eth2": "10.0.2.5/24", "eth1": value}) == [
        f"node1: eni_addresses.eth1={shown} is not allowed; {ENI_ADDRESS_ALLOWED}"
    ]
    # what the plan reads passes: a prefix length, a netmask, a bare address (/32)
    for good, prefixlen in (("10.0.1.9/24", 24), ("10.0.1.9/255.255.0.0", 16), ("10.0.1.9", 32)):
        assert _eni_plan(addresses={"eth1": good})["enis"][0]["prefixlen"] == prefixlen  # type: ignore[index]
        assert report_of(eni_addresses={"eth1": good}) == []


@pytest.mark.parametrize(
    ("value", "shown"),
    [("not-an-ip", "'not-an-ip'"), ("10.0.1.256", "'10.0.1.256'"), ("fd00::1", "'fd00::1'"),
     ("10.0.1.1/24", "'10.0.1.1/24'")],
)  # fmt: skip
def test_an_eni_gateway_that_is_no_ipv4_address_is_refused(value: str, shown: str) -> None:
    plan = _eni_plan(gateways={"eth1": value})
    assert plan["enis"] == [] and plan["problems"]  # type: ignore[index]
    assert report_of(eni_gateways={"eth1": value}) == [
        f"node1: eni_gateways.eth1={shown} is not allowed; {ENI_GATEWAY_ALLOWED}"
    ]


def test_an_eni_gateway_outside_the_subnet_of_its_planned_address_is_refused() -> None:
    addresses = {"eth1": "10.0.1.5/24"}
    assert _eni_plan(addresses, {"eth1": "10.0.2.1"})["problems"]  # type: ignore[index]
    assert report_of(eni_addresses=addresses, eni_gateways={"eth1": "10.0.2.1"}) == [
        "node1: eni_gateways.eth1='10.0.2.1' is outside eth1's subnet 10.0.1.0/24 (eni_addresses.eth1='10.0.1.5/24'); "
        "allowed: an address in 10.0.1.0/24, or '' for none"
    ]
    # in the subnet; none; a NIC whose address is the node's own (known only from its facts)
    assert report_of(eni_addresses=addresses, eni_gateways={"eth1": "10.0.1.1", "eth2": "", "eth3": None}) == []
    assert report_of(eni_gateways={"eth1": "10.0.2.1"}) == []


ENI_MTU_ALLOWED = (
    "allowed: a whole number from 68 (IPv4's least MTU) to 9216 (the largest jumbo frame), or null for the role's "
    "8500 (erdma with jumbo frames) or 1400"
)


@pytest.mark.parametrize(("value", "shown"), [(100000, "100000"), (9217, "9217"), (67, "67"), (0, "0"), (-1, "-1"),
                                              ("65536", "'65536'")])  # fmt: skip
def test_an_eni_mtu_outside_ipv4s_least_and_the_largest_jumbo_frame_is_refused(value: object, shown: str) -> None:
    assert report_of(eni_mtu=value) == [f"node1: eni_mtu={shown} is not allowed; {ENI_MTU_ALLOWED}"]
    for good in (68, 1400, 1500, 8500, 9000, 9001, 9216, "9000", None):  # real links' MTUs, and the role's rule
        assert report_of(eni_mtu=good) == []


#: Linux's routing table ids: 32-bit, 0 unspecified, 253-255 the kernel's default, main and local tables.
TABLE_MAX = 2**32 - 1
TABLES_ALLOWED = (
    f"so that every table is a Linux routing table id (1 to {TABLE_MAX}) other than 253-255 (the kernel's default, "
    "main and local tables)"
)


@pytest.mark.parametrize("base", [-1, 0, 100, 253, 2**40, TABLE_MAX - 254])
def test_an_eni_table_base_whose_256_tables_leave_linuxs_ids_or_take_the_kernels_is_refused(base: int) -> None:
    """Without eni_interfaces the NICs are found on the node: the base must leave room for the 256 tables (base + NIC
    index) that reset counts as the role's."""
    last = base + 255
    assert report_of(eni_route_table_base=base) == [
        f"node1: eni_route_table_base={base} is not allowed: up to 256 secondary NICs (eni_interfaces lists none: "
        f"their count is known only on the node) would use routing tables {base} to {last}; allowed: a whole number "
        f"from 256 to {TABLE_MAX - 255}, {TABLES_ALLOWED}"
    ]
    for good in (1001, 256, TABLE_MAX - 255, "5000"):  # the default, the first and last bases that fit, from -e
        assert report_of(eni_route_table_base=good) == []


@pytest.mark.parametrize(
    ("base", "tables"),
    [(252, "252 to 253"), (253, "253 to 254"), (255, "255 to 256"), (0, "0 to 1"),
     (TABLE_MAX, f"{TABLE_MAX} to {TABLE_MAX + 1}")],
)  # fmt: skip
def test_the_tables_of_the_listed_enis_are_the_ones_checked(base: int, tables: str) -> None:
    listed = ["eth1", "eth2"]
    assert report_of(eni_route_table_base=base, eni_interfaces=listed) == [
        f"node1: eni_route_table_base={base} is not allowed: the 2 NIC(s) of eni_interfaces would use routing tables "
        f"{tables}; allowed: a whole number from 1 to 251 or from 256 to {TABLE_MAX - 1}, {TABLES_ALLOWED}"
    ]
    for good in (1, 251, 256, TABLE_MAX - 1):  # two tables below 253, or above 255 and up to the last id
        assert report_of(eni_route_table_base=good, eni_interfaces=listed) == []


#: ip rule priorities: 32-bit, 0 the kernel's rule for the local table, 32766 and 32767 its rules for main and default
#: (`ip rule list` on any Linux host).
PRIORITY_MAX = 2**32 - 1
PRIORITIES_ALLOWED = (
    f"so that every rule's priority is a Linux rule priority (1 to {PRIORITY_MAX}) other than 32766-32767 (the "
    "kernel's rules for the main and default tables)"
)


@pytest.mark.parametrize("base", [-1, 0, 32600, 32766, 2**40, PRIORITY_MAX - 254])
def test_an_eni_rule_priority_base_whose_rules_leave_linuxs_priorities_or_sit_among_the_kernels_is_refused(
    base: int,
) -> None:
    """Unchecked until now: a base of 32600 put the 167th NIC's rule at the main table's own priority."""
    assert report_of(eni_rule_priority_base=base) == [
        f"node1: eni_rule_priority_base={base} is not allowed: up to 256 secondary NICs (eni_interfaces lists none: "
        f"their count is known only on the node) would use rule priorities {base} to {base + 255}; allowed: a whole "
        f"number from 1 to {32766 - 256} or from 32768 to {PRIORITY_MAX - 255}, {PRIORITIES_ALLOWED}"
    ]
    for good in (1001, 1, 32766 - 256, 32768, PRIORITY_MAX - 255, "5000"):  # the default, the edges, from -e
        assert report_of(eni_rule_priority_base=good) == []
    listed = ["eth1", "eth2"]
    assert report_of(eni_rule_priority_base=32765, eni_interfaces=listed) == [
        "node1: eni_rule_priority_base=32765 is not allowed: the 2 NIC(s) of eni_interfaces would use rule priorities "
        f"32765 to 32766; allowed: a whole number from 1 to 32764 or from 32768 to {PRIORITY_MAX - 1}, "
        f"{PRIORITIES_ALLOWED}"
    ]


@pytest.mark.parametrize(("variable", "value", "shown"), [
    ("nccl_env_overrides", {"NCCL_ALGO": ["Ring", "Tree"]}, 'NCCL_ALGO=["Ring", "Tree"] is a list'),
    ("nccl_env_overrides", {"NCCL_PROTO": {"a": 1}}, 'NCCL_PROTO={"a": 1} is a mapping'),
    ("workload_manifests_env", {"LIGHT_INTRA_SIZE": [8]}, "LIGHT_INTRA_SIZE=[8] is a list"),
])  # fmt: skip
def test_an_environment_value_that_is_no_text_is_refused_before_any_connection(
    variable: str, value: dict[str, Any], shown: str
) -> None:
    """The role wrote such a value into /etc/nccl.conf as Python's repr (NCCL_ALGO=['Ring', 'Tree']); render refused
    it, provision went on to connect. Refused by the inventory report now, in render's words."""
    nodes = [NodeInput("node1", "10.0.0.1", "erdma", values={variable: value})]
    assert checks.inventory_report(nodes) == {
        "node1": [f"node1: {variable}.{shown}, and an environment variable holds text; allowed: a string, number or "
                  "boolean (a list of NCCL's as one comma-separated string, e.g. Ring,Tree; null removes the setting)"]
    }  # fmt: skip
    fine = [NodeInput("node1", "10.0.0.1", "erdma", values={variable: {"NCCL_ALGO": "Ring,Tree", "NCCL_X": 1}})]
    assert checks.inventory_report(fine) == {}



def test_an_ssh_check_by_nothing_is_refused() -> None:
    """ssh_trust_check_by: [] passed the argument spec (no element is a bad choice) and the SSH check then probed
    no pair and passed."""
    nodes = [NodeInput("node1", "10.0.0.1", "tcp", values={"ssh_trust_check_by": []})]
    assert checks.inventory_report(nodes) == {"node1": [
        "node1: ssh_trust_check_by=[] names nothing to check by; allowed: address, name, or both (ssh_trust_check: "
        "false turns the check off)"]}  # fmt: skip
    fine = [NodeInput("node1", "10.0.0.1", "tcp", values={"ssh_trust_check_by": ["name"]})]
    assert checks.inventory_report(fine) == {}


@pytest.mark.parametrize("address", ["0.0.0.0", "0.1.2.3", "255.255.255.255", "224.0.0.1", "240.0.0.1"])
def test_an_address_no_one_machine_answers_as_is_refused(address: str) -> None:
    """They passed as IPv4 addresses: every peer's /etc/hosts, hostfile and SSH trust would then name no node."""
    assert [p.message for p in checks.address_problems("node1", address)] == [
        f"node1: ansible_host='{address}' is no address of one machine (this-network, multicast, reserved or "
        "broadcast); allowed: an IPv4 address such as 172.20.20.145, or a DNS host name"
    ]
    assert checks.address_problems("node1", "198.18.0.2") == []


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("rdma_repos_erdma_apt_url", "https://mirrors.aliyun.com/erdma/apt/ubuntu\nTrusted: yes"),
        ("rdma_repos_erdma_apt_url", "mirrors.aliyun.com/erdma"),
        ("rdma_repos_erdma_yum_baseurl", "https://mirrors.aliyun.com/erdma/yum\ngpgcheck=0"),
        ("rdma_repos_erdma_apt_architectures", ["amd64\nTrusted: yes"]),
        ("rdma_repos_erdma_apt_architectures", []),
    ],
)
def test_a_repository_value_that_would_add_a_field_is_refused(variable: str, value: object) -> None:
    """The erdma repository's URL and architectures are written into a deb822 .sources file (and the baseurl into
    a .repo file) line by line: a newline added a field of its own, such as Trusted: yes or gpgcheck=0."""
    found = checks.repository_problems("node1", {variable: value})
    assert [p.variable for p in found] == [variable]
    assert found[0].message.startswith(f"node1: {variable}=")
    # The role's own defaults pass (yum's $releasever included).
    defaults = role_defaults.defaults("rdma_repos")
    assert checks.repository_problems("node1", {k: defaults[k] for k in (
        "rdma_repos_erdma_apt_url", "rdma_repos_erdma_yum_baseurl", "rdma_repos_erdma_apt_architectures")}) == []


@pytest.mark.parametrize("given", [[2.8, 2.10], ["2.8"], "2.8-2.16", ["2.8", "2.x"], [None, "2.16"]])
def test_documented_nccl_releases_must_be_quoted_text(given: object) -> None:
    """[2.8, 2.10] unquoted reached the role as ['2.8', '2.1'] (YAML floats, turned into text by the argument
    spec): NCCL 2.9 was warned of as outside the vendor's range."""
    found = checks.documented_nccl_problems("node1", {"nccl_plugin_documented_nccl": given})
    assert [p.variable for p in found] == ["nccl_plugin_documented_nccl"]
    assert "allowed: [] or two NCCL releases as quoted text" in found[0].message
    assert checks.documented_nccl_problems("node1", {"nccl_plugin_documented_nccl": ["2.8", "2.10"]}) == []
    assert checks.documented_nccl_problems("node1", {"nccl_plugin_documented_nccl": []}) == []


def test_version_in_range_reads_ascii_digits_only() -> None:
    from rdmaforge.parsers.nccl_net_api import version_in_range

    assert version_in_range("2.9.6", "2.8", "2.10") and not version_in_range("2.9.6", "2.8", "2.1")
    # '²' passed str.isdigit() and int() raised; None raised AttributeError: both read as no number now.
    assert version_in_range("2.²", "2", "3") and version_in_range("2.29.7", "2.8", None) is True


@pytest.mark.parametrize("slots", [0, -1, 100000])
def test_mpi_default_slots_are_a_whole_number_a_node_can_run(slots: int) -> None:
    """mpi_launch_default_slots: 0 or -1 was written into the hostfile as slots=0 / slots=-1 (the argument spec's
    int takes both), and mpirun then refused the hostfile far from the cause."""
    found = checks.gpu_count_problems("node1", {"mpi_launch_default_slots": slots})
    assert [p.variable for p in found] == ["mpi_launch_default_slots"]
    assert checks.gpu_count_problems("node1", {"mpi_launch_default_slots": 1}) == []


def test_a_make_path_with_a_blank_is_refused_before_anything_is_built() -> None:
    """nccl-tests' Makefile uses MPI_HOME unquoted (-I$(MPI_HOME)/include): '/opt/my mpi' compiled with
    '-I/opt/my mpi/include', two words, and the build failed after NCCL's, with a make error naming no variable."""
    (line,) = report_of(nccl_tests_mpi_home={"Debian": "/opt/my mpi", "RedHat": "/usr/lib64/openmpi"})
    assert line.startswith("node1: nccl_tests_mpi_home={") and "has a blank in '/opt/my mpi'" in line, line
    assert report_of(nccl_build_cuda_home="/usr/local/cuda 13") != []
    assert report_of(nccl_build_cuda_home="/usr/local/cuda-13.0", nccl_tests_mpi_home={"Debian": "/usr/lib"}) == []
    # with mpi_install_method: prefix, MPI_HOME is mpi_prefix (review round 41b)
    (line,) = report_of(mpi_install_method="prefix", mpi_prefix="/opt/open mpi")
    assert line.startswith("node1: mpi_prefix='/opt/open mpi' has a blank in '/opt/open mpi'"), line
    assert report_of(mpi_prefix="/opt/open mpi") == []  # the distribution's MPI: not on the make line


# Batch sizes and whole numbers found by an exploratory round (fuzz 13b): each was accepted, then failed on the
# nodes after other roles had changed them.


@pytest.mark.parametrize("variable", ["rdmaforge_reboot_serial", "rdmaforge_upgrade_serial"])
@pytest.mark.parametrize(("value", "shown"), [(0, "0"), ("0", '"0"'), (-1, "-1"), ("abc", '"abc"'),
                                              ("150%", '"150%"'), ("25%\n", '"25%\\n"'), (True, "true")])  # fmt: skip
def test_a_batch_size_ansible_reads_as_another_is_refused(variable: str, value: object, shown: str) -> None:
    """Ansible's serial reads 0 or less as one batch of every host (ansible/executor/playbook_executor.py): -e
    rdmaforge_reboot_serial=0 would reboot the whole cluster at once."""
    assert report_of(**{variable: value}) == [
        f"node1: {variable}={shown}: allowed: a whole number of nodes per batch, at least 1 (e.g. 2), or a percentage "
        "of the cluster from 1% to 100% (e.g. 25%)"
    ]


@pytest.mark.parametrize("value", [1, "3", "10%", "100%"])
def test_a_batch_size_of_nodes_or_a_share_is_accepted(value: object) -> None:
    assert report_of(rdmaforge_reboot_serial=value) == []


@pytest.mark.parametrize(
    ("variable", "value", "allowed"),
    [
        # reboot.yml's lock wait divides by the poll: 0 failed at the reboot, after every node's kernel arguments
        ("hugepages_reboot_lock_poll", 0, "a whole number of seconds between looks from 1 to 3600"),
        ("hugepages_reboot_timeout", -1, "a whole number of seconds from 1 to 86400"),
        ("ssh_trust_check_peers", -1, "a whole number of peers each node checks (0: every peer), 0 or more"),
        ("ssh_trust_check_parallel", 0, "a whole number of connections at a time, 1 or more"),
        ("pairwise_iperf_streams", 0, "a whole number of parallel streams from 1 to 128"),
        ("pairwise_port_base", 70000, "a whole number of the first TCP port of the sweep from 1024 to 65000"),
        ("benchmark_e2e_port", 0, "a whole number of a TCP port from 1 to 65535"),
        ("benchmark_iterations", "lots", "a whole number of timed iterations, 1 or more"),
        ("nccl_build_timeout", 0, "a whole number of seconds, 1 or more"),
    ],
)
def test_a_count_duration_or_port_out_of_its_range_is_refused(variable: str, value: object, allowed: str) -> None:
    assert report_of(**{variable: value}) == [f"node1: {variable}={value!r} is not allowed; allowed: {allowed}"]


def report_with_specs(**values: object) -> list[str]:
    """report_of with preflight's validation of every role's argument spec (as roles/preflight runs it)."""
    from rdmaforge.paths import ROLES_DIR

    merged = checks.merged_argument_specs(checks.discover_argument_specs(ROLES_DIR))
    node_values = {"rdmaforge_fabric": "erdma", **values}
    result = checks.ArgspecResult("preflight", checks.argspec_errors(merged["options"], node_values),
                                  merged["options"], merged["owners"])  # fmt: skip
    node = NodeInput("node1", None, "erdma", values=node_values, argspecs=[result])
    return checks.inventory_report([node]).get("node1", [])


@pytest.mark.parametrize(
    ("variable", "value", "role", "example"),
    [
        # the eni role failed with a TypeError (rdmaforge/tuning.py) after earlier roles had changed the nodes
        ("eni_addresses", "eth1=10.0.1.5/24", "eni", '{"eni_addresses": {"eth1": "10.0.1.5/24"}}'),
        ("nccl_env_overrides", "NCCL_DEBUG=INFO", "nccl_env", '{"nccl_env_overrides": {"NCCL_DEBUG": "INFO"}}'),
        ("eni_gateways", '{"eth1": "10.0.1.1"}', "eni", '{"eni_gateways": {"eth1": "10.0.1.1"}}'),
    ],
)
def test_a_mapping_given_as_text_is_refused(variable: str, value: str, role: str, example: str) -> None:
    lines = [line for line in report_with_specs(**{variable: value}) if line.startswith(f"node1: {variable}=")]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"node1: {variable}={value!r} is text where role {role} takes a mapping; allowed: ")
    assert f"e.g. -e '{example}'" in lines[0]


@pytest.mark.parametrize(("variable", "role", "what"), [("nccl_cuda_archs", "nccl_build", "a list"),
                                                         ("nccl_env_overrides", "nccl_env", "a mapping"),
                                                         ("preflight_supported_os", "preflight", "a mapping")])
def test_null_for_a_list_or_mapping_with_a_default_is_refused(variable: str, role: str, what: str) -> None:
    lines = [line for line in report_with_specs(**{variable: None}) if line.startswith(f"node1: {variable}=")]
    assert len(lines) == 1 and lines[0].startswith(f"node1: {variable}=null is not {what}, which role {role} takes "
                                                   "(its default is "), lines  # fmt: skip


def test_null_where_the_roles_default_is_null_stays_allowed() -> None:
    # workload_manifests_rdma_device_files: null (the default) means "the files found on the node"
    assert not [line for line in report_with_specs(workload_manifests_rdma_device_files=None)
                if "workload_manifests_rdma_device_files" in line]  # fmt: skip


@pytest.mark.parametrize(("name", "address"), [("1", "0.0.0.1"), ("10.5", "10.0.0.5"), ("127.1", "127.0.0.1"),
                                               ("0x7f000001", "127.0.0.1")])  # fmt: skip
def test_a_node_name_the_resolver_reads_as_an_address_is_refused(name: str, address: str) -> None:
    """glibc's inet_aton reads these as addresses (socket.gethostbyname('10.5') is 10.0.0.5): ssh, mpirun and the
    peers' /etc/hosts would reach that address, not the node."""
    node = NodeInput(name, "198.18.0.10", "erdma", values={"rdmaforge_fabric": "erdma"})
    assert checks.inventory_report([node])[name] == [
        f"{name}: inventory_hostname={name!r} is read as the address {address} by the resolver, not as a name; "
        f"allowed: {checks._HOSTNAME_RULE}, not all digits (nor hexadecimal), such as node1"
    ]


@pytest.mark.parametrize("name", ["node.1", "gpu-001", "a1", "1a"])
def test_names_with_digits_that_are_no_address_stay_allowed(name: str) -> None:
    node = NodeInput(name, "198.18.0.10", "erdma", values={"rdmaforge_fabric": "erdma"})
    assert checks.inventory_report([node]).get(name) is None


@pytest.mark.parametrize("name", ["localhost", "localhost.localdomain", "LOCALHOST"])
def test_a_node_named_for_the_controller_and_reached_over_ssh_is_refused(name: str) -> None:
    node = NodeInput(name, "198.18.0.10", "erdma", values={"rdmaforge_fabric": "erdma", "ansible_host": "198.18.0.10"})
    (line,) = checks.inventory_report([node])[name]
    assert line.startswith(f"{name}: inventory_hostname={name!r} is Ansible's name for the controller, and this node "
                           "is reached over ssh: the tasks rdmaforge runs on the controller (delegate_to: localhost) "
                           "would run on it instead; allowed: ")  # fmt: skip
    local = NodeInput(name, "127.0.0.1", "erdma", values={"rdmaforge_fabric": "erdma", "ansible_connection": "local"})
    assert checks.inventory_report([local]).get(name) is None  # the controller itself, a one-machine cluster


def test_an_unknown_accelerator_is_refused_before_any_node_is_touched() -> None:
    """nccl_env's validate.yml refused it only after preflight had connected and gathered facts: with a node
    unreachable, never. The allowed names are the keys of the role's table (roles/nccl_env/defaults/main.yml)."""
    defaults = yaml.safe_load((paths.ROLES_DIR / "nccl_env" / "defaults" / "main.yml").read_text())
    table = defaults["nccl_env_accelerators"]
    assert "taco" in table
    assert report_of(nccl_env_accelerator="tacoo") == [
        "node1: nccl_env_accelerator='tacoo' is not a key of nccl_env_accelerators (did you mean 'taco'?); allowed: "
        f"{', '.join(table)}"
    ]
    assert report_of(nccl_env_accelerator="taco") == []


@pytest.mark.parametrize("archs", [[], ["sm80"], ["compute_90"], [80]])
def test_cuda_archs_nccl_build_refuses_are_refused_before_any_node_is_touched(archs: list[object]) -> None:
    assert report_of(nccl_cuda_archs=archs) == [
        f"node1: nccl_cuda_archs={json.dumps(archs)} is not allowed; allowed: a non-empty list of sm_NN names, such as "
        "['sm_80', 'sm_90']"
    ]


@pytest.mark.parametrize("variable", ["cluster_hosts_group", "mpi_launch_group", "ssh_trust_group",
                                      "preflight_cluster_group", "cluster_summary_group"])  # fmt: skip
def test_a_group_variable_naming_no_group_is_refused(variable: str) -> None:
    """cluster_hosts_group: nodes (no such group) wrote no /etc/hosts lines and said nothing."""
    groups = {"all": ["node1"], "ungrouped": [], "cluster": ["node1"], "gpus": ["node1"], "empty": []}
    node = NodeInput("node1", None, "erdma", values={"rdmaforge_fabric": "erdma", variable: "nodes"})
    assert checks.inventory_report([node], groups=groups)["node1"] == [
        f"node1: {variable}='nodes' names no group with hosts; allowed: a group of the inventory: cluster, gpus"
    ]
    node.values[variable] = "gpus"  # type: ignore[index]
    assert checks.inventory_report([node], groups=groups).get("node1") is None


def eni_node(name: str, address: str, **values: object) -> NodeInput:
    return NodeInput(name, address, "erdma", values={"rdmaforge_fabric": "erdma", "eni_enabled": True,
                                                     "eni_interfaces": ["eth1"], **values})  # fmt: skip


def test_a_secondary_nic_address_of_two_nodes_is_refused() -> None:
    """The same eni_addresses in group_vars gave every node 10.0.1.5 (fuzz 13b): accepted, then an address conflict
    on the VPC subnet."""
    nodes = [eni_node(f"node{i}", f"198.18.0.{i}", eni_addresses={"eth1": "10.0.1.5/24"}) for i in (1, 2)]
    assert checks.inventory_report(nodes) == {
        "node1": ["node1: eni_addresses.eth1 is 10.0.1.5, which is also node2's eni_addresses.eth1; allowed: an "
                  "address no other NIC or node of the cluster has"],
        "node2": ["node2: eni_addresses.eth1 is 10.0.1.5, which is also node1's eni_addresses.eth1; allowed: an "
                  "address no other NIC or node of the cluster has"],
    }


def test_a_secondary_nic_address_that_is_another_nodes_address_is_refused() -> None:
    nodes = [eni_node("node1", "198.18.0.1", eni_addresses={"eth1": "198.18.0.2/24"}), eni_node("node2", "198.18.0.2")]
    assert checks.inventory_report(nodes) == {
        "node1": ["node1: eni_addresses.eth1 is 198.18.0.2, which is also node2's ansible_host; allowed: an address no "
                  "other NIC or node of the cluster has"],
    }


def test_distinct_or_unused_secondary_nic_addresses_pass() -> None:
    nodes = [eni_node(f"node{i}", f"198.18.0.{i}", eni_addresses={"eth1": f"10.0.1.{i}/24"}) for i in (1, 2)]
    assert checks.inventory_report(nodes) == {}
    off = [eni_node(f"node{i}", f"198.18.0.{i}", eni_addresses={"eth1": "10.0.1.5/24"}, eni_enabled=False)
           for i in (1, 2)]
    assert checks.inventory_report(off) == {}


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("rdma_repos_erdma_gpg_key_url", "mirrors.aliyun.com/erdma/GPGKEY", "is not a download URL"),
        ("nccl_plugin_aiacc_sdist_url", "files.pythonhosted.org/x.tar.gz", "is not a download URL"),
        ("nccl_plugin_aiacc_deb_url", "not a url", "is not a download URL"),
        ("nccl_build_git_url", "not a url", "is not a repository git can clone"),
        ("nccl_tests_git_url", "ftp:/x", "is not a repository git can clone"),
        ("rdma_repos_erdma_gpg_fingerprint", "ABCD 1234", "is not a key fingerprint"),
    ],
)
def test_a_url_or_fingerprint_in_the_wrong_form_is_refused(variable: str, value: str, words: str) -> None:
    (line,) = report_of(**{variable: value})
    assert line.startswith(f"node1: {variable}={value!r} {words}; allowed: "), line


def test_the_roles_default_urls_and_the_labs_pass(tmp_path: Path) -> None:
    """Every URL variable's shipped default (the roles' defaults, templates rendered) and the lab's values."""
    from rdmaforge.lab import inventory, packages, spec
    from rdmaforge.lab.mirror import Mirror

    values = {name: role_defaults.evaluated_value_of({"nccl_plugin_aiacc_version": "2.0.1", "ansible_facts":
                                                      {"pkg_mgr": "apt"}}, name)
              for name in (*checks.URL_PINS, *checks.GIT_URL_PINS)}  # fmt: skip
    fingerprint = "0123 4567 89AB CDEF 0123  4567 89AB CDEF 0123 4567"  # as gpg prints one
    assert report_of(**values, rdma_repos_erdma_gpg_fingerprint=fingerprint) == []
    paths_ = spec.LabPaths(state=tmp_path / "state", cache=tmp_path / "cache", inventory_dir=tmp_path / "inv")
    served = Mirror(tmp_path / "www", "AB" * 20, packages.NCCL_SOURCE.name, "0" * 64, packages.NCCL_TESTS_TARBALL,
                    "1" * 64)  # fmt: skip
    inventory.write(paths_, [spec.node_spec(1, 1)], served)
    lab: dict[str, Any] = {}
    for path in sorted((paths_.inventory_dir / "group_vars").rglob("*.yml")):
        lab.update(yaml.safe_load(path.read_text()) or {})
    assert checks.download_problems("node1", lab) == []


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        ("preflight_min_free_mb", {"/opt": "lots"}, "preflight_min_free_mb./opt='lots' is not allowed; allowed: an "
                                                   "absolute path of the node, to a whole number of MiB, 0 or more"),
        ("preflight_min_free_mb", {"/opt": -5}, "preflight_min_free_mb./opt=-5 is not allowed"),
        ("preflight_builder_free_mb", {"var/lib": 4096}, "preflight_builder_free_mb.var/lib=4096 is not allowed"),
        ("benchmark_line_rates", {"erdma": "fast"}, "benchmark_line_rates.erdma='fast' is not allowed; allowed: a "
                                                    "positive number of Gbit/s"),
        ("benchmark_line_rate_gbps", "fast", "benchmark_line_rate_gbps='fast' is not allowed; allowed: a positive "
                                             "number of Gbit/s per node"),
        ("benchmark_line_rate_gbps", -100, "benchmark_line_rate_gbps=-100 is not allowed"),
    ],
)
def test_numbers_in_tables_and_the_line_rate_are_checked(variable: str, value: object, line: str) -> None:
    """preflight's free-space check read a word with int() after connecting, and crashed; benchmark_line_rate_gbps:
    fast became 0.0 and the report judged by the fabric profile's rate instead (fuzz 13b)."""
    (found,) = report_of(**{variable: value})
    assert found.startswith(f"node1: {line}"), found


def test_the_shipped_number_tables_pass() -> None:
    values = {name: role_defaults.default_of(name) for name in ("preflight_min_free_mb", "preflight_builder_free_mb")}
    assert report_of(**values, benchmark_line_rates={"erdma": 200, "tcp": 25.5}, benchmark_line_rate_gbps="400") == []


@pytest.mark.parametrize(("variable", "value"), [("benchmark_e2e_batch_size", 64), ("benchmark_e2e_warmup_steps", 0),
                                                 ("benchmark_e2e_steps", 100), ("benchmark_e2e_port", 29600)])
def test_a_training_setting_that_differs_between_nodes_is_refused(variable: str, value: int) -> None:
    """Each node's torchrun got its own host's values: rank 0 computed the job's samples per step from its own batch,
    and ranks training different step counts hang (fuzz 14)."""
    default = role_defaults.default_of(variable)
    nodes = [NodeInput("node1", "198.18.0.1", "erdma", values={"rdmaforge_fabric": "erdma"}),
             NodeInput("node2", "198.18.0.2", "erdma", values={"rdmaforge_fabric": "erdma", variable: value})]
    assert checks.inventory_report(nodes) == {"node2": [
        f"node2: {variable}={value} differs from node1's {default!r}; allowed: one value for every node of group "
        "cluster (one training job runs on them all)"]}  # fmt: skip
    same = [NodeInput(n, f"198.18.0.{i}", "erdma", values={"rdmaforge_fabric": "erdma", variable: str(value)})
            for i, n in enumerate(("node1", "node2"), 1)]
    assert checks.inventory_report(same) == {}


@pytest.mark.parametrize(("variable", "value"), [
    ("nccl_build_version", "2.21.5"), ("nccl_cuda_archs", ["sm_90"]), ("nccl_build_only_funcs", "AllReduce"),
    ("nccl_build_git_commit", "0" * 40), ("nccl_tests_version", "2.13.9"), ("nccl_plugin_provider", "none"),
    ("nccl_env_accelerator", "taco"),
])  # fmt: skip
def test_a_build_setting_that_differs_between_nodes_is_refused(variable: str, value: object) -> None:
    """NCCL is built once from the first node's values, and each node installs the build its own values name: a node
    with another version or archs failed at its install after eight plays had changed it, or got another NCCL; a
    plugin or NCCL_ALGO on some ranks only hangs collectives (review round 23b). Only benchmark_e2e_* were checked."""
    role = "nccl_build" if variable == "nccl_cuda_archs" else variable.split("_")[0] + "_" + variable.split("_")[1]
    # node1's value: the role's default as the role computes it for an erdma node (the plugin's follows the fabric)
    default = role_defaults.evaluated_default(variable, {"rdmaforge_fabric": "erdma"}, role)
    nodes = [NodeInput("node1", "198.18.0.1", "erdma", values={"rdmaforge_fabric": "erdma"}),
             NodeInput("node2", "198.18.0.2", "erdma", values={"rdmaforge_fabric": "erdma", variable: value})]
    report = checks.inventory_report(nodes)
    assert set(report) == {"node2"}, report
    assert (f"node2: {variable}={checks.show(value)} differs from node1's {checks.show(default)}; allowed: one value "
            "for every node of group cluster (one NCCL build, plugin and algorithm for every rank)") in report["node2"]
    same = [NodeInput(n, f"198.18.0.{i}", "erdma", values={"rdmaforge_fabric": "erdma", variable: value})
            for i, n in enumerate(("node1", "node2"), 1)]
    assert not [line for lines in checks.inventory_report(same).values() for line in lines if "differs from" in line]


@pytest.mark.parametrize(("variable", "first", "other"), [
    ("benchmark_timeout", 600, "600.0"), ("benchmark_timeout", "600", 600.0), ("benchmark_e2e_steps", 100, " 100"),
    ("rdma_repos_erdma_gpg_fingerprint", "0123 4567 89AB CDEF 0123  4567 89AB CDEF 0123 4567",
     "0123456789abcdef0123456789abcdef01234567"),
])  # fmt: skip
def test_one_value_written_two_ways_is_one_value_cluster_wide(variable: str, first: object, other: object) -> None:
    """60 and 60.0 of a number option are the number the role uses on both nodes, and a fingerprint with gpg's blanks
    or in lowercase is the one roles/rdma_repos compares: each was refused as a difference (review round 36e)."""
    nodes = [NodeInput("node1", "198.18.0.1", "erdma", values={"rdmaforge_fabric": "erdma", variable: first}),
             NodeInput("node2", "198.18.0.2", "erdma", values={"rdmaforge_fabric": "erdma", variable: other})]
    assert not [line for lines in checks.inventory_report(nodes).values() for line in lines if "differs from" in line]


@pytest.mark.parametrize(("variable", "first", "other"), [
    ("benchmark_timeout", 600, "601"), ("benchmark_timeout", "600", 601.0), ("nccl_build_git_ref", "2.2", "2.20"),
    ("rdma_repos_erdma_gpg_fingerprint", "0123456789ABCDEF0123456789ABCDEF01234567",
     "0123456789ABCDEF0123456789ABCDEF01234568"),
])  # fmt: skip
def test_values_that_differ_still_differ_cluster_wide(variable: str, first: object, other: object) -> None:
    """A text option's "2.2" and "2.20" are two git refs, not one number."""
    nodes = [NodeInput("node1", "198.18.0.1", "erdma", values={"rdmaforge_fabric": "erdma", variable: first}),
             NodeInput("node2", "198.18.0.2", "erdma", values={"rdmaforge_fabric": "erdma", variable: other})]
    lines = checks.inventory_report(nodes).get("node2", [])
    assert any(line.startswith(f"node2: {variable}={checks.show(other)} differs from node1's") for line in lines), lines


@pytest.mark.parametrize("factor", [1, 0, -2])
def test_a_size_step_factor_below_2_is_refused(factor: int) -> None:
    """nccl-tests -f 1 (or less) steps by -i, 1 MiB: 512 sizes where -f 2 gives 30, a certain timeout (review 38b)."""
    (found,) = report_of(benchmark_step_factor=factor)
    assert found.startswith(f"node1: benchmark_step_factor={factor} is not allowed; allowed: a whole number"), found


def test_a_boolean_gpu_count_is_refused() -> None:
    """doctor_expected_gpus: true passed (the spec's int takes true as 1), and doctor later said it is no count."""
    assert report_of(doctor_expected_gpus=True) == [
        f"node1: doctor_expected_gpus=true is not allowed; allowed: a whole number from 0 to {checks.MAX_GPUS}, or null"
    ]


def test_a_variable_in_the_wrong_case_is_named() -> None:
    """RDMAFORGE_FABRIC is another variable to Ansible: its value was ignored without a word."""
    names = checks.variable_names(paths.ROLES_DIR)
    node = NodeInput("node1", None, "erdma", values={"rdmaforge_fabric": "erdma", "RDMAFORGE_FABRIC": "roce"})
    (line,) = checks.inventory_report([node], names=names)["node1"]
    assert line.startswith("node1: RDMAFORGE_FABRIC is not a variable rdmaforge reads, so its value would be ignored "
                           "(did you mean 'rdmaforge_fabric'?)")  # fmt: skip


@pytest.mark.parametrize("variable", ["NCCL_IB_HCA", "nccl_ib_hca", "NCCL_SOCKET_IFNAME", "LIGHT_INTRA_SIZE"])
def test_an_nccl_setting_written_as_a_variable_is_refused_naming_nccl_env_overrides(variable: str) -> None:
    """Seeds 001 and 002 give NCCL settings as `export NCCL_IB_HCA=...`; written at the top of group_vars they were
    read by nothing, and the profile's value stayed in /etc/nccl.conf without a word (review round 23b)."""
    names = checks.variable_names(paths.ROLES_DIR)
    node = NodeInput("node1", None, "erdma", values={"rdmaforge_fabric": "erdma", variable: "mlx5"})
    whose = "a LightCC" if variable.startswith("LIGHT_") else "an NCCL"
    assert checks.inventory_report([node], names=names)["node1"] == [
        f"node1: {variable} is {whose} setting, not a variable rdmaforge reads, so its value would be ignored; "
        f"allowed: nccl_env_overrides: {{{variable.upper()}: 'mlx5'}} (role nccl_env writes it to /etc/nccl.conf on "
        "every node it applies to)"]  # fmt: skip
    # A name of the user's own is left alone, and so is an NCCL_ name NCCL does not read (seed 003's NCCL_HOME is a
    # build path, no setting to move into nccl.conf: review round 24).
    for own in ("nccl_my_own_setting", "NCCL_HOME"):
        mine = NodeInput("node1", None, "erdma", values={"rdmaforge_fabric": "erdma", own: "/root/nccl/build/"})
        assert checks.inventory_report([mine], names=names) == {}, own


def test_a_profile_table_without_the_nodes_profile_is_refused() -> None:
    """The role looks the profile up with `| default({})`: an inventory's nccl_env_profiles without the node's
    profile (or an empty one) gave the hosts no NCCL settings without a word, while render refused it."""
    assert report_of(nccl_env_profiles={"tcp": {"NCCL_IB_DISABLE": "1"}}) == [
        "node1: nccl_env_profiles has no profile 'erdma' (nccl_env_profile), so role nccl_env would give this node "
        "none of its NCCL settings; allowed: a table with a 'erdma' profile (it has tcp), or leave nccl_env_profiles "
        "unset for the role's"
    ]
    (line,) = report_of(nccl_env_profiles={})
    assert "(it has none (the table is empty))" in line
    assert report_of(nccl_env_profiles={"erdma": {}}) == []
    assert report_of(nccl_env_profiles={"tcp": {}}, nccl_env_profile="tcp") == []


def test_a_list_in_the_benchmarks_extra_environment_is_refused() -> None:
    """benchmark_e2e_extra_env (2a6eb9a) becomes the trainings' environment: a list would reach it as Python's repr."""
    (line,) = report_of(benchmark_e2e_extra_env={"AIACC_AUTOTUNE_PERF_MODE": ["time", "filter"]})
    assert line.startswith("node1: benchmark_e2e_extra_env.AIACC_AUTOTUNE_PERF_MODE=[\"time\", \"filter\"] is a list, "
                           "and an environment variable holds text")  # fmt: skip
    assert report_of(benchmark_e2e_extra_env={"AIACC_BUCKET_TUNE_DISABLE": "1", "AIACC_CPU_BINDING_ENABLE": 1}) == []


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("pairwise_slow_ratio", -1, "pairwise_slow_ratio must be in (0, 1], got -1"),
    ("pairwise_min_line_fraction", 2, "pairwise_min_line_fraction must be in (0, 1], got 2"),
    ("pairwise_line_rate_gbps", "fast", "the scoring thresholds must be numbers"),
])  # fmt: skip
def test_pairwise_thresholds_the_report_refuses_are_refused_before_any_node_is_touched(
    variable: str, value: object, says: str
) -> None:
    """The pairwise role checked them only before its sweep, after preflight had connected to every node."""
    (line,) = report_of(**{variable: value})
    assert line.startswith(f"node1: {says}") and line.endswith("(the pairwise report's thresholds)"), line
    assert report_of(pairwise_slow_ratio=0.6, pairwise_line_rate_gbps=None) == []


def test_an_address_for_a_nic_the_role_does_not_configure_is_refused() -> None:
    """eni_interfaces: [eth1] with eni_addresses: {eth9: ...} (a typo) was ignored silently (fuzz 13b)."""
    values = {"eni_enabled": True, "eni_interfaces": ["eth1"], "eni_addresses": {"eth9": "10.0.9.5/24"}}
    assert report_of(**values) == [
        "node1: eni_addresses names eth9, which is not in eni_interfaces (eth1), so the eni role would never use it; "
        "allowed: a NIC of eni_interfaces, or add eth9 there"
    ]
    assert report_of(**{**values, "eni_interfaces": []}) == []  # found on the node by pattern: not known here
    assert report_of(**{**values, "eni_enabled": False}) == []


@pytest.mark.parametrize(
    ("variable", "value", "default"),
    [
        ("mpi_prefix", "opt/openmpi", "'/usr/local'"),
        ("nccl_build_prefix_root", "", "'/opt/nccl'"),
        ("nccl_env_conf_path", "./nccl.conf", "'/etc/nccl.conf'"),
        ("nccl_tests_nccl_home", "opt/nccl/current", "'/opt/nccl/current'"),
    ],
)
def test_a_node_path_given_relative_is_refused_before_any_node_is_touched(variable: str, value: str,
                                                                          default: str) -> None:
    """A module resolves a relative path against the remote user's working directory: the node would install or
    write where the rest of the cluster does not look. The defaults named are the roles' own (defaults/main.yml)."""
    assert report_of(**{variable: value}) == [
        f"node1: {variable}={value!r} is not an absolute path on the node ({value!r}); allowed: an absolute path, "
        f"such as the default {default}"
    ]


def test_a_relative_path_in_a_per_os_mapping_of_node_paths_is_refused() -> None:
    value = {"Debian": "/usr/lib/x86_64-linux-gnu/openmpi", "RedHat": "usr/lib64/openmpi"}
    (line,) = report_of(nccl_tests_mpi_home=value)
    assert line.startswith("node1: nccl_tests_mpi_home=")
    assert "is not an absolute path on the node ('usr/lib64/openmpi')" in line


@pytest.mark.parametrize("value", ["/opt/openmpi", "{{ some_root }}/openmpi"])
def test_absolute_and_templated_node_paths_pass(value: str) -> None:
    assert report_of(mpi_prefix=value) == []


def test_controller_paths_may_be_relative() -> None:
    """benchmark_artifacts_dir is on the controller (under the workspace): not a node path."""
    assert report_of(benchmark_artifacts_dir="artifacts/mine") == []


def test_rdma_core_profile_naming_another_fabric_is_refused() -> None:
    assert report_of(rdma_core_profile="infiniband") == [
        "node1: rdma_core_profile='infiniband' differs from rdmaforge_fabric='erdma': the node would get another "
        "fabric's RDMA packages while every other role and check judges it as erdma; allowed: leave "
        "rdma_core_profile unset (it follows rdmaforge_fabric), or 'erdma'; add packages with "
        "rdma_core_extra_packages"
    ]


@pytest.mark.parametrize("value", ["erdma", "{{ rdmaforge_fabric }}"])
def test_rdma_core_profile_following_the_fabric_passes(value: str) -> None:
    assert report_of(rdma_core_profile=value) == []


def test_one_batch_size_per_rolling_play() -> None:
    """A rolling play has one serial: a node of its own batch size (host_vars) would be ignored for the first node's."""
    nodes = [NodeInput(f"node{i}", None, "erdma", values={"rdmaforge_fabric": "erdma", **extra})
             for i, extra in ((1, {}), (2, {"rdmaforge_reboot_serial": 4}))]  # fmt: skip
    assert checks.inventory_report(nodes).get("node2") == [
        "node2: rdmaforge_reboot_serial=4 differs from node1's 1; allowed: one value for every node of group cluster "
        "(a rolling play has one batch size)"
    ]


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"nccl_env_profiles": {"erdma": None}}, "n1: nccl_env_profiles[erdma]=null is not valid; allowed: a mapping"),
        ({"nccl_env_profiles": {"erdma": {"NCCL_ALGO": ["Ring", "Tree"]}}},
         'n1: nccl_env_profiles[erdma].NCCL_ALGO=["Ring", "Tree"] is a list'),
        ({"nccl_env_accelerator": "taco", "nccl_env_accelerators": {"none": {}, "taco": {"NCCL_ALGO": ["Ring"]}}},
         'n1: nccl_env_accelerators[taco].NCCL_ALGO=["Ring"] is a list'),
        ({"nccl_env_accelerators": {"none": None}}, "n1: nccl_env_accelerators[none]=null is not valid"),
    ],
)  # fmt: skip
def test_the_profile_and_accelerator_a_node_uses_are_checked_like_the_overrides(values: dict, says: str) -> None:
    """Review round 17b: a null entry failed role nccl_env's merge on the node, after other roles had run; a list was
    written to nccl.conf as Python's repr. Refused before any connection now, in render's words."""
    found = checks.env_value_problems("n1", {"rdmaforge_fabric": "erdma", **values})
    assert [p.message for p in found if says in p.message], found
    # an entry the node does not use is not its problem
    assert checks.env_value_problems("n1", {"rdmaforge_fabric": "erdma",
                                                      "nccl_env_profiles": {"erdma": {}, "tcp": None}}) == []


@pytest.mark.parametrize("jobs", ["many", 0, -4])
def test_make_jobs_that_make_refuses_are_refused_before_any_change(jobs: object) -> None:
    """nccl_build_jobs (type raw, for its template default) took any value: make -j0 or -j-4 failed on the builder
    in the nccl play, after eight plays had changed the nodes (review round 23b)."""
    assert report_of(nccl_build_jobs=jobs) == [
        f"node1: nccl_build_jobs={checks.show(jobs)} is not allowed; allowed: a whole number of parallel make jobs "
        "from 1 to 1024"]  # fmt: skip
    assert report_of(nccl_build_jobs="{{ ansible_facts['processor_vcpus'] }}") == []
    assert report_of(nccl_build_jobs=8) == []


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.1.1", "169.254.0.5"])
def test_a_loopback_or_link_local_node_among_others_is_refused(address: str) -> None:
    """The address goes into every peer's /etc/hosts, hostfile and SSH trust: 127.0.0.1 node2 on node1 sends
    node1's ssh and mpirun to itself (review round 23b). A cluster all on loopback (one machine) is left alone."""
    nodes = [NodeInput("node1", "198.18.0.1", "erdma", values={"rdmaforge_fabric": "erdma"}),
             NodeInput("node2", address, "erdma", values={"rdmaforge_fabric": "erdma"})]  # fmt: skip
    assert checks.inventory_report(nodes) == {"node2": [
        f"node2: ansible_host='{address}' is a loopback or link-local address, which names each peer itself (or "
        "nothing) in their /etc/hosts, hostfile and SSH trust; allowed: an address the other nodes reach this node "
        "at"]}  # fmt: skip
    alone = [NodeInput(f"node{i}", f"127.0.0.{i}", "erdma", values={"rdmaforge_fabric": "erdma"}) for i in (1, 2)]
    assert checks.inventory_report(alone) == {}


@pytest.mark.parametrize(("variable", "ours"), [("nccl_build_cuda_archs", "nccl_cuda_archs"),
                                                ("hugepages_size_gb", "hugepages_size"),
                                                ("eni_enabled_extra", "eni_enabled")])  # fmt: skip
def test_a_role_variable_one_word_apart_is_named(variable: str, ours: str) -> None:
    """Below difflib's 0.85 these passed without a word: a user giving the H100 nodes their arch in a name with
    "build" added kept the default archs (review round 23b)."""
    names = checks.variable_names(paths.ROLES_DIR)
    node = NodeInput("node1", None, "erdma", values={"rdmaforge_fabric": "erdma", variable: 1})
    (line,) = checks.inventory_report([node], names=names)["node1"]
    assert line.startswith(f"node1: {variable} is not a variable rdmaforge reads, so its value would be ignored (did "
                           f"you mean {ours!r}?)"), line  # fmt: skip
    # Not the role's whole prefix (ssh_user is no misspelling of role ssh_trust's ssh_trust_user: review round 24),
    # or more than one word apart.
    for mine in ("build_jobs", "my_cluster_name", "rdma_fabric", "ssh_user", "cluster_group", "build_name",
                 "workload_image", "nccl_source", "nccl_prefix", "os_names", "rdma_profile"):  # fmt: skip
        other = NodeInput("node1", None, "erdma", values={"rdmaforge_fabric": "erdma", mine: 1})
        assert checks.inventory_report([other], names=names) == {}, mine


def test_build_wide_values_that_mean_the_same_are_one_value() -> None:
    """true and "true" (group_vars and an INI host line) are one value; a template is the role's to evaluate
    (review round 24: both were refused as differing)."""
    base = {"rdmaforge_fabric": "erdma"}
    pairs = [({"nccl_tests_enabled": True}, {"nccl_tests_enabled": "true"}),
             ({}, {"nccl_plugin_provider": "{{ 'aiacc' }}"}),
             ({"nccl_build_version": 2.29}, {"nccl_build_version": "2.29"})]  # fmt: skip
    for first, second in pairs:
        nodes = [NodeInput("node1", "198.18.0.1", "erdma", values={**base, **first}),
                 NodeInput("node2", "198.18.0.2", "erdma", values={**base, **second})]  # fmt: skip
        assert not [line for lines in checks.inventory_report(nodes).values() for line in lines
                    if "differs from node1's" in line], (first, second)  # fmt: skip
    differ = [NodeInput("node1", "198.18.0.1", "erdma", values={**base, "nccl_tests_mpi": True}),
              NodeInput("node2", "198.18.0.2", "erdma", values={**base, "nccl_tests_mpi": "no"})]  # fmt: skip
    assert "node2: nccl_tests_mpi='no' differs from node1's true" in checks.inventory_report(differ)["node2"][0]


@pytest.mark.parametrize("dropin", ["60-hugepages.cfg", "/etc/default/grub.d/60-hugepages",
                                    "/etc/grub.d/60-hugepages.cfg", "/etc/default/grub.d/sub/60.cfg"])  # fmt: skip
def test_a_grub_dropin_grub_mkconfig_does_not_read_is_refused(dropin: str) -> None:
    """grub-mkconfig reads /etc/default/grub.d/*.cfg (Debian's and Ubuntu's GRUB); a relative name passed even the
    module's own check and wrote a file GRUB never reads (review round 23b)."""
    assert report_of(hugepages_grub_dropin=dropin) == [
        f"node1: hugepages_grub_dropin={checks.show(dropin)} is not a file grub-mkconfig reads; allowed: "
        "/etc/default/grub.d/<name>.cfg, or empty to edit /etc/default/grub"]  # fmt: skip
    assert report_of(hugepages_grub_dropin="/etc/default/grub.d/60-rdmaforge-hugepages.cfg") == []
    assert report_of(hugepages_grub_dropin="") == []


def test_a_smallest_size_above_the_largest_names_the_largest_even_as_the_default() -> None:
    """nccl-tests measures no size when -b is above -e. With benchmark_max_bytes unset the message said
    'benchmark_max_bytes=null' (review round 36d): it names the default, seed 000's -e 512M."""
    from rdmaforge.inventory_checks import benchmark_size_problems

    default = benchmark_size_problems("n1", {"benchmark_min_bytes": "1G"})
    assert [p.message for p in default] == [
        "n1: benchmark_min_bytes='1G' is above benchmark_max_bytes='512M' (its default), so nccl-tests would measure "
        "no size; allowed: a smallest size up to the largest"]  # fmt: skip
    given = benchmark_size_problems("n1", {"benchmark_min_bytes": "1G", "benchmark_max_bytes": "1M"})
    assert [p.message for p in given] == [
        "n1: benchmark_min_bytes='1G' is above benchmark_max_bytes='1M', so nccl-tests would measure no size; "
        "allowed: a smallest size up to the largest"]  # fmt: skip
    assert benchmark_size_problems("n1", {"benchmark_min_bytes": "1", "benchmark_max_bytes": "512M"}) == []
