"""Huge pages that do not fit the node: hugepages_count x hugepages_size against the node's memory (refused by
preflight after facts, before any change), and a count below 1 while hugepages_enabled is true (refused from the
inventory alone, the value shown). Seed 004 reserves 50 one-GiB pages on an 8-GPU node through GRUB, then reboots:
a count the node cannot hold is on the kernel command line of every later boot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge import inventory_checks as checks
from rdmaforge import role_defaults, tuning
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.redefined_defaults import redefine_default

SEED_004_PAGES = 50  # 1 GiB pages on an 8-GPU node (seed 004's GRUB line: hugepages=50)
DEFAULTS = role_defaults.defaults("hugepages")


def test_the_documented_limit_is_half_the_memory() -> None:
    assert DEFAULTS["hugepages_max_memory_fraction"] == 0.5
    spec = yaml.safe_load((PROJECT_ROOT / "roles" / "hugepages" / "meta" / "argument_specs.yml").read_text())
    option = spec["argument_specs"]["main"]["options"]["hugepages_max_memory_fraction"]
    assert option["type"] == "float" and option["default"] == 0.5


def test_seed_004_pages_fit_a_node_with_twice_their_memory() -> None:
    # 50 GiB of pages on a node with 128 GiB (ansible_memtotal_mb 128000: a little less than 131072)
    assert tuning.hugepages_memory_problem("gpu1", SEED_004_PAGES, "1G", 128000, 0.5, None, 8) == ""
    # seed 004's pod asks 100Gi of ordinary memory beside its 50Gi of pages: 150 GiB (153600 MiB) holds both
    assert tuning.hugepages_memory_problem("gpu1", SEED_004_PAGES, "1G", 153600, 0.5, None, 8) == ""


def test_seed_004_pages_on_a_node_with_64_gib_are_refused_naming_everything() -> None:
    problem = tuning.hugepages_memory_problem("gpu1", SEED_004_PAGES, "1G", 64000, 0.5, None, 8)
    assert problem.startswith("gpu1: hugepages_count=null (seed 004's rule for 8 GPU(s): 50 pages) x hugepages_size=1G")
    assert "reserves 51200 MiB at boot" in problem  # 50 x 1024
    assert "hugepages_max_memory_fraction=0.5 of the node's 64000 MiB of memory (ansible_memtotal_mb)" in problem
    assert "allowed: at most 31 pages of 1G (31744 MiB) on this node" in problem  # 32000 MiB / 1024, rounded down
    assert "lower hugepages_count, or raise hugepages_max_memory_fraction" in problem


def test_a_count_larger_than_the_memory_is_refused() -> None:
    problem = tuning.hugepages_memory_problem("gpu1", 600, "1G", 515000, 0.5, 600, 8)
    assert problem.startswith("gpu1: hugepages_count=600 x hugepages_size=1G reserves 614400 MiB at boot")
    assert "allowed: at most 251 pages of 1G" in problem  # 257500 MiB / 1024


def test_2m_pages_and_a_raised_limit() -> None:
    # 25600 pages of 2 MiB are seed 004's 50 GiB
    assert tuning.hugepages_memory_problem("gpu1", 25600, "2M", 128000, 0.5, 25600) == ""
    assert "at most 16000 pages of 2M (32000 MiB)" in tuning.hugepages_memory_problem(
        "gpu1", 25600, "2M", 64000, 0.5, 25600
    )
    assert tuning.hugepages_memory_problem("gpu1", SEED_004_PAGES, "1G", 64000, 0.9, None, 8) == ""


def test_a_node_whose_memory_is_unknown_is_not_judged() -> None:
    assert tuning.hugepages_memory_problem("gpu1", SEED_004_PAGES, "1G", None, 0.5) == ""


# --- from the inventory alone --------------------------------------------------------------------------------


def lines(values: dict[str, Any]) -> list[str]:
    return [p.message for p in checks.hugepages_problems("gpu1", values)]


@pytest.mark.parametrize(("count", "shown"), [(0, "0"), (-4, "-4"), ("0", "'0'"), ("-2", "'-2'"), (0.0, "0.0"),
                                            ("-5.0", "'-5.0'")])  # fmt: skip
def test_a_count_below_one_while_enabled_is_refused_showing_it(count: object, shown: str) -> None:
    for enabled in (True, "true", "yes"):
        assert lines({"hugepages_enabled": enabled, "hugepages_count": count}) == [
            f"gpu1: hugepages_count={shown} is not allowed while hugepages_enabled is true; allowed: a whole number "
            "of pages above 0, or null for seed 004's rule (50 on an 8-GPU node, otherwise GPUs x 5 + 10); "
            "0 only with hugepages_enabled: false"
        ]


@pytest.mark.parametrize(
    "values",
    [
        {"hugepages_enabled": False, "hugepages_count": 0},
        {"hugepages_enabled": "false", "hugepages_count": 0},
        {"hugepages_count": 0},  # hugepages_enabled's default is false
        {"hugepages_enabled": True, "hugepages_count": None},
        {"hugepages_enabled": True, "hugepages_count": SEED_004_PAGES},
        {"hugepages_enabled": True, "hugepages_max_memory_fraction": 0.9},
        {"hugepages_enabled": True, "hugepages_max_memory_fraction": "0.75"},
    ],
)
def test_allowed_values_are_not_problems(values: dict[str, Any]) -> None:
    assert lines(values) == []


@pytest.mark.parametrize(("value", "shown"), [(0, "0"), (1, "1"), (1.5, "1.5"), (None, "null"), ("half", "'half'")])
def test_a_share_of_the_memory_outside_0_and_1_is_refused(value: object, shown: str) -> None:
    assert lines({"hugepages_max_memory_fraction": value}) == [
        f"gpu1: hugepages_max_memory_fraction={shown} is not allowed; allowed: a number above 0 and below 1, the "
        "largest share of the node's memory huge pages may take (default 0.5)"
    ]


def test_the_refusal_names_the_default_the_role_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    redefine_default(tmp_path, monkeypatch, "hugepages", "hugepages_max_memory_fraction", 0.4)
    (line,) = lines({"hugepages_max_memory_fraction": 2})
    assert line.endswith("huge pages may take (default 0.4)")


def test_the_inventory_report_names_the_count_once() -> None:
    node = checks.NodeInput("gpu1", "192.0.2.1", "erdma", values={"hugepages_enabled": True, "hugepages_count": -1})
    assert checks.inventory_report([node]) == {
        "gpu1": [
            "gpu1: hugepages_count=-1 is not allowed while hugepages_enabled is true; allowed: a whole number of "
            "pages above 0, or null for seed 004's rule (50 on an 8-GPU node, otherwise GPUs x 5 + 10); 0 only with "
            "hugepages_enabled: false"
        ]
    }


# --- preflight's check after facts, run for real --------------------------------------------------------------


def memtotal_mb() -> int:
    """This machine's memory as Ansible reports it (ansible_memtotal_mb: MemTotal in kB // 1024)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


def run_validate_tasks(tmp_path: Path, chosen: list[str], play_vars: dict[str, Any],
                       gather_subset: list[str]) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The tasks named ``chosen`` of roles/hugepages/tasks/validate.yml, on this machine (a local host, gpu-a)."""
    block = yaml.safe_load((PROJECT_ROOT / "roles" / "hugepages" / "tasks" / "validate.yml").read_text())[0]["block"]
    tasks = [t for t in block if t["name"] in chosen]
    assert len(tasks) == len(chosen), [t["name"] for t in block]
    play = [{"name": "validate", "hosts": "all", "gather_facts": True, "gather_subset": gather_subset,
             "vars": play_vars, "tasks": tasks}]  # fmt: skip
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"), "ANSIBLE_CACHE_PLUGIN": "memory",
           "ANSIBLE_NOCOLOR": "1"}  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "gpu-a,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)]  # fmt: skip
    return subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


def run_memory_check(tmp_path: Path, play_vars: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """validate.yml's memory task, on this machine's gathered facts."""
    role_vars = {"hugepages_size": "1G", "hugepages_max_memory_fraction": DEFAULTS["hugepages_max_memory_fraction"],
                 "rdmaforge_node": {"gpu_count": 8}}  # fmt: skip
    return run_validate_tasks(tmp_path, ["Refuse more huge pages than the node's memory allows"],
                              {**role_vars, **play_vars}, ["!all", "hardware"])  # fmt: skip


def test_preflight_refuses_a_count_larger_than_the_node_s_memory(tmp_path: Path) -> None:
    memory = memtotal_mb()
    count = memory // 1024 + 1  # one GiB page more than the whole memory
    proc = run_memory_check(tmp_path, {"hugepages_count": count, "hugepages_pages": count})
    assert proc.returncode != 0, proc.stdout[-3000:]
    output = " ".join(proc.stdout.split())
    assert f"gpu-a: hugepages_count={count} x hugepages_size=1G reserves {count * 1024} MiB at boot" in output
    assert f"of the node's {memory} MiB of memory (ansible_memtotal_mb)" in output
    assert f"allowed: at most {memory // 2 // 1024} pages of 1G" in output


def test_preflight_passes_a_count_that_fits(tmp_path: Path) -> None:
    proc = run_memory_check(tmp_path, {"hugepages_count": 1, "hugepages_pages": 1, "hugepages_size": "2M"})
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_a_count_written_as_a_whole_float_is_that_many_pages() -> None:
    """The argument spec's int takes 40.0 and "40.0" (Ansible's check_type_int); the role's page count took
    int("40.0") and stopped. Every reading of a count is plain_data.whole_number now."""
    for written in (40, 40.0, "40.0", "40"):
        assert tuning.hugepages_count(8, written) == 40  # type: ignore[arg-type]
        assert tuning.hugepages_pages_for(None, written) == 40  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hugepages_count='forty' is not a whole number of pages"):
        tuning.hugepages_count(8, "forty")  # type: ignore[arg-type]



# --- 1 GiB pages on a CPU without them ----------------------------------------------------------------------------


def run_cpu_check(tmp_path: Path, flags: str, size: str = "1G") -> subprocess.CompletedProcess[str]:
    """validate.yml's two CPU tasks on this machine (x86_64: the lab's), the CPU's flags read from a file here."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: fpu vme {flags} lm\n\nprocessor\t: 1\nflags\t\t: fpu {flags}\n")
    tasks = ["Read whether the CPU can map 1 GiB pages", "Refuse 1 GiB pages on a CPU without them"]
    return run_validate_tasks(tmp_path, tasks, {"hugepages_size": size, "hugepages_cpuinfo": str(cpuinfo)}, ["!all"])


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the pdpe1gb flag is x86's; this machine is not x86_64")
def test_1g_pages_on_an_x86_cpu_without_pdpe1gb_are_refused_before_any_change(tmp_path: Path) -> None:
    """Without the flag the kernel ignores hugepagesz=1G: the role edited GRUB, rebooted the cluster for no page, and
    the 1G hugetlbfs mount failed at every boot (review round 19b)."""
    refused = run_cpu_check(tmp_path, "pse pse36")
    assert refused.returncode != 0
    said = " ".join(refused.stdout.split())
    assert "gpu-a: hugepages_size is 1G, but this x86 CPU lacks the pdpe1gb flag" in said and "Allowed:" in said
    assert run_cpu_check(tmp_path, "pse pdpe1gb").returncode == 0
    assert run_cpu_check(tmp_path, "pse pse36", size="2M").returncode == 0  # 2 MiB pages need no such flag
