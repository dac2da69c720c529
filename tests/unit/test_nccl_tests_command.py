"""The nccl-tests run the benchmark role composes, against seed 000's own command line (run.sh).

The lab has no GPU, so the run itself never happens in `make test` (docs/seed-coverage.md 000.26-000.29). Here the
role's real task (its argv expression in roles/benchmark/tasks/nccl_tests.yml, the role's defaults and filters) is
evaluated for seed 000's cluster, two nodes of eight GPUs, and compared flag by flag with the seed's line.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT
from tests.unit.role_vars import evaluate, role_vars

SEED_000 = "000_ef36f584565cda0e.txt"
TASK = "Run each collective across the benchmark's nodes (seed 000's flags)"


def seed_run_line(shared_dir: Path) -> str:
    """The seed's run.sh as one line: NP=... mpirun ... ./build/all_reduce_perf ...; line continuations removed."""
    text = (shared_dir / "seeds" / SEED_000).read_text()
    line = next(line for line in text.splitlines() if "mpirun" in line and "all_reduce_perf" in line)
    return line.replace("\\ ", " ")


def seed_addresses(shared_dir: Path) -> list[str]:
    """The two eRDMA instances' private addresses seed 000 writes into its hostfile.txt."""
    text = (shared_dir / "seeds" / SEED_000).read_text()
    found = re.search(r"^(?:\d{1,3}\.){3}\d{1,3}(?:[ \t]+(?:\d{1,3}\.){3}\d{1,3})*$", text, re.M)
    assert found, "seed 000 has no line of addresses (its hostfile.txt)"
    return found.group(0).split()


def composed(gpus_per_node: int, nodes: int, addresses: list[str] | None = None, **inventory: Any) -> list[str]:
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "benchmark" / "tasks" / "nccl_tests.yml").read_text())
    task = next(t for t in tasks if t.get("name") == TASK)
    names = [f"node{i}" for i in range(1, nodes + 1)]
    hostvars: dict[str, dict[str, Any]] = {name: {"rdmaforge_node": {"gpu_count": gpus_per_node}} for name in names}
    for name, address in zip(names, addresses or [], strict=False):
        hostvars[name]["ansible_host"] = address
    given = {
        "ansible_play_hosts_all": names,
        "hostvars": hostvars,
        "item": "all_reduce",
        "benchmark_nccl_help": {"stdout": "", "stderr": ""},  # an nccl-tests without -J
    }
    templar = role_vars("benchmark", {}, **{**given, **inventory})
    argv = evaluate(templar, task["ansible.builtin.command"]["argv"].strip().removeprefix("{{").removesuffix("}}"))
    return [str(a) for a in argv]


def contains(argv: list[str], part: list[str]) -> bool:
    return any(argv[i : i + len(part)] == part for i in range(len(argv) - len(part) + 1))


@pytest.fixture
def seed(shared_dir: Path) -> dict[str, Any]:
    line = seed_run_line(shared_dir)
    settings = dict(re.findall(r"\b(NP|NPER)=(\d+)", line))
    tokens = shlex.split(line[line.index("mpirun") :])
    binary = next(i for i, t in enumerate(tokens) if t.endswith("/all_reduce_perf"))
    return {"np": settings["NP"], "nper": settings["NPER"], "mpirun": tokens[1:binary], "perf": tokens[binary + 1 :]}


def test_the_composed_run_is_seed_000s(seed: dict[str, Any], shared_dir: Path) -> None:
    # Seed 000's cluster: NP=16 ranks, NPER=8 per node, so two nodes of eight GPUs, at its hostfile's addresses.
    nodes = int(seed["np"]) // int(seed["nper"])
    addresses = seed_addresses(shared_dir)
    assert len(addresses) == nodes
    argv = composed(int(seed["nper"]), nodes, addresses)
    mpirun = argv.index("mpirun")
    binary = next(i for i, t in enumerate(argv) if t.endswith("/all_reduce_perf"))
    # nccl-tests' own flags, every one with the seed's value, in the seed's order, but -b: nccl-tests' parsesize
    # refuses the seed's 1B (B is no unit to it; test_nccl_tests_sizes.py runs the real function), and 1 byte is 1.
    perf = list(seed["perf"])
    assert perf[perf.index("-b") + 1] == "1B"
    perf[perf.index("-b") + 1] = "1"
    assert argv[binary + 1 :] == perf
    launcher = argv[mpirun + 1 : binary]
    assert contains(launcher, ["-np", seed["np"]])
    # The seed's mpirun options, each with its value. Placement: the seed says -npernode and a hostfile of the
    # nodes; rdmaforge's --host gives each of the benchmark's nodes <GPUs> slots, the same eight ranks per node.
    options = [t for t in seed["mpirun"] if not t.startswith("$")]
    pairs = []
    i = 0
    while i < len(options):
        flag = options[i]
        if flag in ("-np", "-npernode", "--hostfile"):
            i += 2
            continue
        takes = flag in ("-x", "--bind-to") or flag == "-mca"
        pairs.append(options[i : i + (3 if flag == "-mca" else 2 if takes else 1)])
        i += len(pairs[-1])
    assert ["--allow-run-as-root"] in pairs and ["-x", "NCCL_DEBUG=INFO"] in pairs
    missing = [pair for pair in pairs if not contains(launcher, pair)]
    assert not missing, (missing, launcher)
    assert contains(launcher, ["--host", ",".join(f"{a}:{seed['nper']}" for a in addresses)])
    assert "--hostfile" not in launcher
    # Bounded: a hung run ends at benchmark_timeout (SIGINT first, so nccl-tests can print what it has).
    assert argv[:mpirun] == ["timeout", "--signal=INT", "--kill-after=30", "3600"]


def test_ranks_follow_the_inventory_gpus(seed: dict[str, Any]) -> None:
    argv = composed(4, 3, benchmark_collectives=["all_reduce"])
    assert contains(argv, ["-np", "12"])
    # The JSON goes into the private directory the role's tempfile task made (mkdtemp), not a guessable /tmp name.
    with_json = composed(
        8, 2, benchmark_nccl_help={"stdout": "  -J,--output_file <file>", "stderr": ""}, benchmark_run_id="r1",
        benchmark_nccl_json_dir={"path": "/tmp/rdmaforge-nccl-json-k2x9q"},
    )  # fmt: skip
    assert with_json[-2:] == ["-J", "/tmp/rdmaforge-nccl-json-k2x9q/nccl-all_reduce.json"]


def test_gpus_per_process_divides_the_processes_not_the_gpus() -> None:
    """-g 2 on nodes of 8 GPUs: 4 processes a node, each driving 2 GPUs (nccl-tests' ranks are still the 16 GPUs).
    The run launched 8 processes a node, which asked nccl-tests for devices 0-15 of an 8-GPU node (review 38b)."""
    argv = composed(8, 2, ["198.18.0.11", "198.18.0.12"], benchmark_gpus_per_process=2)
    assert contains(argv, ["-np", "8"]) and contains(argv, ["-g", "2"])
    assert contains(argv, ["--host", "198.18.0.11:4,198.18.0.12:4"]), argv


def test_a_gpus_per_process_that_does_not_divide_a_nodes_gpus_skips_nccl_tests_naming_it() -> None:
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "benchmark" / "tasks" / "nccl_tests.yml").read_text())
    decide = next(t for t in tasks if t.get("name") == "Decide whether nccl-tests can run")
    hostvars = {"node1": {"rdmaforge_node": {"gpu_count": 8}, "benchmark_nccl_binary": {"stat": {"exists": True}}},
                "node2": {"rdmaforge_node": {"gpu_count": 6}}}  # fmt: skip
    templar = role_vars("benchmark", {}, ansible_play_hosts_all=["node1", "node2"], hostvars=hostvars,
                        benchmark_gpus_per_process=4, **decide["vars"])  # fmt: skip
    reasons = evaluate(templar, decide["vars"]["benchmark_nccl_skip_reasons"].strip().removeprefix("{{")
                       .removesuffix("}}"))  # fmt: skip
    assert reasons == ["benchmark_gpus_per_process=4 (nccl-tests -g) does not divide the GPU count of node2 (6 GPUs); "
                       "allowed: a divisor of every node's GPU count, such as 1"], reasons  # fmt: skip


def test_a_limited_run_launches_on_its_own_nodes_only(shared_dir: Path) -> None:
    """Under --limit the play's hosts are some of the cluster's: mpirun gets exactly them, never the cluster's
    hostfile (every node of the group), so no rank lands on a node the run left out."""
    cluster = ["node1", "node2", "node3"]
    addresses = seed_addresses(shared_dir) + ["172.20.20.147"]  # a third node beside seed 000's two
    placed = zip(cluster, addresses, strict=True)
    hostvars = {n: {"rdmaforge_node": {"gpu_count": 8}, "ansible_host": a} for n, a in placed}
    argv = composed(8, 2, ansible_play_hosts_all=["node3", "node1"], hostvars=hostvars,
                    groups={"cluster": cluster})  # fmt: skip
    assert contains(argv, ["-np", "16"])
    assert contains(argv, ["--host", f"{addresses[0]}:8,{addresses[2]}:8"]) and "--hostfile" not in argv
    by_name = composed(4, 2, ansible_play_hosts_all=["node2", "node1"], mpi_launch_hostfile_by="name",
                       hostvars={n: {"rdmaforge_node": {"gpu_count": 4}, "ansible_host": a}
                                 for n, a in zip(cluster, addresses, strict=True)})  # fmt: skip
    assert contains(by_name, ["--host", "node1:4,node2:4"]) and contains(by_name, ["-np", "8"])


def test_mpirun_runs_as_the_user_ssh_trust_gave_the_key_and_from_rank_0s_node() -> None:
    """Review round 38b: the benchmark's and the pairwise sweep's mpirun ran as root (the plays become root), while
    role ssh_trust gives the key only to ssh_trust_user, whom mpi_launch's smoke test runs as: with another user, no
    rank started and a healthy cluster failed. And the -J results were written on --host's first node (sorted by
    name) but fetched from run_once's (the play's first): lost where the two differ."""
    for role, file in (("benchmark", "nccl_tests.yml"), ("pairwise", "round_sendrecv.yml")):
        tasks = yaml.safe_load((PROJECT_ROOT / "roles" / role / "tasks" / file).read_text())
        launching = [t for t in tasks if "mpirun" in str(t.get("ansible.builtin.command", {}).get("argv", ""))
                     or "sendrecv_argv" in str(t.get("vars", {}))]  # fmt: skip
        assert launching and all(t.get("become_user") == f"{{{{ {role}_mpi_user }}}}" for t in launching), role
        for given, user in (({}, "root"), ({"ssh_trust_user": "trainer"}, "trainer"),
                            ({"ssh_trust_user": "trainer", "mpi_launch_user": "mpi"}, "mpi")):  # fmt: skip
            assert evaluate(role_vars(role, {}, **given), f"{role}_mpi_user") == user, (role, given)
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "benchmark" / "tasks" / "nccl_tests.yml").read_text())
    on_rank_0 = [t["name"] for t in tasks if "json" in t["name"].lower() or t["name"] == TASK]
    assert len(on_rank_0) == 5, on_rank_0  # -h, the directory, the run, the fetch, the removal
    assert all(t.get("delegate_to") == "{{ benchmark_first }}" for t in tasks if t["name"] in on_rank_0)
