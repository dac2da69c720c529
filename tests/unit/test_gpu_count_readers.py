"""Every role reads a node's GPU count as rdmaforge.node_facts.known_gpu_count does (the filter
rdmaforge_known_gpu_count): null when preflight could not count the GPUs (gpu_source none), when a fact of an
earlier rdmaforge kept 0 for such a node, or when there is no fact. Read as 0 it is a false "no GPU" that plans
pages for 0 GPUs, or passes a one-NIC-per-GPU check no one judged.

The roles' real task expressions are evaluated with their defaults, vars and filters, as Ansible would; the facts
are the shapes preflight publishes (roles/preflight/README.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.template import trust_as_template

from rdmaforge.paths import PROJECT_ROOT
from tests.unit.role_vars import role_vars

UNKNOWN = {"gpu_count": None, "gpu_source": "none"}  # preflight could not count them
OLD_UNKNOWN = {"gpu_count": 0, "gpu_source": "none"}  # the same, as an earlier rdmaforge kept it
#: Facts whose count is unknown: the two above, and a fact without a count.
UNKNOWN_FACTS = [pytest.param(UNKNOWN, id="null"), pytest.param(OLD_UNKNOWN, id="old-0-none"),
                 pytest.param({}, id="no-count")]  # fmt: skip


def tasks_of(role: str, file: str) -> list[dict[str, Any]]:
    """A tasks file's tasks, those inside blocks included."""
    found: list[dict[str, Any]] = []

    def walk(items: list[dict[str, Any]]) -> None:
        for item in items:
            found.append(item)
            walk(item.get("block") or [])

    walk(yaml.safe_load((PROJECT_ROOT / "roles" / role / "tasks" / file).read_text()))
    return found


def task(role: str, file: str, name: str) -> dict[str, Any]:
    return next(t for t in tasks_of(role, file) if t.get("name") == name)


def evaluate(role: str, text: Any, **variables: Any) -> Any:
    """``text`` (a task's value) on node1, with the role's defaults and vars and ``variables``; a task's own vars
    are given as text, templated when read, as Ansible does."""
    given = {"inventory_hostname": "node1", **variables}
    facts = given.pop("ansible_facts", {})
    return role_vars(role, facts, **given).template(trust_as_template(text) if isinstance(text, str) else text)


# --- hugepages: seed 004's rule needs the GPU count ----------------------------------------------------------------


def hugepages_pages(fact: dict[str, Any] | None, count: object = None) -> Any:
    detect = task("hugepages", "detect.yml", "Work out the boot loader and the kernel arguments")
    given = {"hugepages_count": count} | ({"rdmaforge_node": fact} if fact is not None else {})
    return evaluate("hugepages", detect["ansible.builtin.set_fact"]["hugepages_pages"], **given)


@pytest.mark.parametrize(
    ("fact", "pages"),
    [({"gpu_count": 8, "gpu_source": "nvidia-smi"}, 50),  # seed 004: 50 on an 8-GPU node
     ({"gpu_count": 4, "gpu_source": "lspci"}, 30),  # otherwise GPUs x 5 + 10
     ({"gpu_count": 0, "gpu_source": "sysfs"}, 10)],  # a measured 0
)  # fmt: skip
def test_hugepages_plans_seed_004s_pages_for_a_counted_node(fact: dict[str, Any], pages: int) -> None:
    assert hugepages_pages(fact) == pages


@pytest.mark.parametrize("fact", [*UNKNOWN_FACTS, pytest.param(None, id="no-fact")])
def test_hugepages_plans_no_pages_for_an_unknown_count_and_refuses_it(fact: dict[str, Any] | None) -> None:
    """The old fact's 0 (and a fact without a count) planned 10 pages, the rule's for 0 GPUs."""
    pages = hugepages_pages(fact)
    assert pages is None
    assert hugepages_pages(fact, 20) == 20  # hugepages_count set: no GPU count needed
    refuse = task("hugepages", "validate.yml", "Refuse hosts without a boot loader configuration")
    checks = refuse["ansible.builtin.assert"]
    given = {"hugepages_enabled": True, "hugepages_pages": pages, "hugepages_boot": {"kind": "grub", "reason": ""}}
    assert not all(evaluate("hugepages", "{{ " + that + " }}", **given) for that in checks["that"])
    message = " ".join(str(evaluate("hugepages", checks["fail_msg"], **given)).split())
    assert "hugepages_count is null (seed 004's rule: pages by GPU count) and the node's GPU count is unknown" in (
        message
    )


def test_hugepages_memory_message_names_the_gpus_the_rule_counted() -> None:
    check = task("hugepages", "validate.yml", "Refuse more huge pages than the node's memory allows")
    given = {"hugepages_pages": 30, "rdmaforge_node": {"gpu_count": 4, "gpu_source": "lspci"},
             "ansible_facts": {"memtotal_mb": 16384}}  # fmt: skip
    problem = evaluate("hugepages", check["vars"]["_problem"], **given)
    assert "hugepages_count=null (seed 004's rule for 4 GPU(s): 30 pages)" in problem


# --- eni: one secondary NIC per GPU --------------------------------------------------------------------------------

ETH0 = {"name": "eth0", "default_route": True}


def eni_problem(fact: dict[str, Any], file: str, **variables: Any) -> Any:
    check = task("eni", file, "Check one secondary NIC per GPU")
    given = {"eni_enabled": True, "eni_per_gpu": True, "rdmaforge_node": fact, **variables}
    local = {name: trust_as_template(value) for name, value in check.get("vars", {}).items()}
    return evaluate("eni", check["vars"]["_problem"], **given, **local)


@pytest.mark.parametrize("fact", UNKNOWN_FACTS)
@pytest.mark.parametrize("file", ["validate.yml", "main.yml"])
def test_eni_per_gpu_is_not_ok_for_an_unknown_count(fact: dict[str, Any], file: str) -> None:
    """A node with no secondary NIC whose count was the old fact's 0 (or none at all, read as 0) passed: 0 NICs for
    0 GPUs."""
    node = {**fact, "nics": [ETH0], "default_route_interface": "eth0"}
    problem = eni_problem(node, file, eni_selected=[])
    assert problem.startswith("node1: eni_per_gpu is true, so every GPU needs its own secondary NIC, but the node's "
                              "GPU count is unknown")  # fmt: skip


def test_eni_per_gpu_holds_for_a_counted_node() -> None:
    nics = [ETH0, {"name": "eth1"}, {"name": "eth2"}]
    node = {"gpu_count": 2, "gpu_source": "nvidia-smi", "nics": nics, "default_route_interface": "eth0"}
    assert eni_problem(node, "validate.yml") == ""
    assert eni_problem(node, "main.yml", eni_selected=["eth1", "eth2"]) == ""
    assert "1 secondary NIC(s) (eth1) and 2 GPU(s) (from nvidia-smi)" in eni_problem(
        node, "main.yml", eni_selected=["eth1"]
    )


# --- cluster_summary and nccl_env ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fact", "gpus"),
    [({"gpu_count": 8, "gpu_source": "nvidia-smi"}, 8), ({"gpu_count": 0, "gpu_source": "sysfs"}, 0),
     (UNKNOWN, None), (OLD_UNKNOWN, None)],
)  # fmt: skip
def test_the_summary_records_an_unknown_count_as_null(fact: dict[str, Any], gpus: int | None) -> None:
    """summary.json printed the old fact's 0 as "0 GPUs"; null is printed "GPU count unknown"."""
    assemble = task("cluster_summary", "assemble.yml", "Assemble this node's summary")
    assert evaluate("cluster_summary", assemble["ansible.builtin.set_fact"]["cluster_summary_node"]["gpus"],
                    rdmaforge_node=fact) == gpus  # fmt: skip


@pytest.mark.parametrize(
    ("fact", "light_intra_size"),
    [({"gpu_count": 4, "gpu_source": "lspci"}, "4"),
     ({"gpu_count": "8", "gpu_source": "nvidia-smi"}, "8"),  # a fact an older Ansible templated to text
     (UNKNOWN, "node_gpu_count"), (OLD_UNKNOWN, "node_gpu_count")],  # unreplaced: nccl_env_problems refuses it
)  # fmt: skip
def test_taco_light_intra_size_is_the_known_count(fact: dict[str, Any], light_intra_size: str) -> None:
    compute = task("nccl_env", "validate.yml", "Compute the NCCL settings in force")
    settings = evaluate("nccl_env", compute["ansible.builtin.set_fact"]["nccl_env_in_force"], rdmaforge_node=fact,
                        nccl_env_accelerator="taco", nccl_env_topology={"settings": {}})  # fmt: skip
    assert settings["LIGHT_INTRA_SIZE"] == light_intra_size


@pytest.mark.parametrize("fact", [UNKNOWN, OLD_UNKNOWN])
def test_taco_takes_the_inventorys_count_where_preflight_could_not_count(fact: dict[str, Any]) -> None:
    """rdmaforge_gpus_per_node stands in for a node whose GPUs preflight cannot count (README): the hostfile,
    the benchmark and render took it, nccl_env refused taco on that node ('a node with GPUs')."""
    compute = task("nccl_env", "validate.yml", "Compute the NCCL settings in force")
    settings = evaluate("nccl_env", compute["ansible.builtin.set_fact"]["nccl_env_in_force"], rdmaforge_node=fact,
                        nccl_env_accelerator="taco", nccl_env_topology={"settings": {}},
                        rdmaforge_gpus_per_node=8)  # fmt: skip
    assert settings["LIGHT_INTRA_SIZE"] == "8"
    counted = evaluate("nccl_env", compute["ansible.builtin.set_fact"]["nccl_env_in_force"],
                       rdmaforge_node={"gpu_count": 4, "gpu_source": "lspci"}, nccl_env_accelerator="taco",
                       nccl_env_topology={"settings": {}}, rdmaforge_gpus_per_node=8)  # fmt: skip
    assert counted["LIGHT_INTRA_SIZE"] == "4"  # a count read on the node wins


# --- no other reading ----------------------------------------------------------------------------------------------

_EXPRESSION = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
_STRING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def direct_reads(root: Path) -> list[str]:
    """Jinja expressions of the roles, playbooks and filter docs' examples that read the fact's ``gpu_count``
    themselves (``rdmaforge_node.gpu_count``, ``['rdmaforge_node', 'gpu_count']``), messages and comments aside."""
    files = [*root.glob("roles/*/*/*.yml"), *root.glob("roles/*/templates/*"), *root.glob("playbooks/*.yml"),
             *root.glob("filter_plugins/*.yml")]  # fmt: skip
    found = []
    for path in sorted(files):
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        for match in _EXPRESSION.finditer(text):
            bare = _STRING.sub("''", match.group(0))
            if re.search(r"\.gpu_count\b", bare) or "'gpu_count'" in match.group(0):
                found.append(f"{path.relative_to(root)}: {' '.join(match.group(0).split())[:120]}")
    return found


def test_no_role_reads_the_fact_s_count_but_through_the_shared_reader() -> None:
    """`rdmaforge_node.gpu_count | default(0)` took an unknown count for no GPU; read it with
    rdmaforge.cluster.rdmaforge_known_gpu_count (one node) or rdmaforge_gpu_counts (several)."""
    assert direct_reads(PROJECT_ROOT) == []
