"""What the benchmark role records for the report, evaluated from its real tasks (roles/benchmark/tasks/*.yml) with
the role's defaults, vars and filters, as Ansible would: thresholds (empty is None, never 0), the refusal of a
threshold of 0 or less, the nodes' host names in run.json and every training run's exit in e2e.json.

The lab has no GPU and its bench runs only on CPUs, so these values are checked here for the shapes the lab cannot
produce. Registered results have the shape of ansible.builtin.command's and async_status's return values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.template import trust_as_template

from rdmaforge import inventory_checks
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.role_vars import role_vars

TASKS = PROJECT_ROOT / "roles" / "benchmark" / "tasks"
NODES = ["node1", "node2"]


def task(file: str, name: str) -> dict[str, Any]:
    tasks = yaml.safe_load((TASKS / file).read_text())
    found: dict[str, Any] = next(t for t in tasks if t.get("name") == name)
    return found


def evaluate(text: str, **inventory: Any) -> Any:
    """A task's templated value for two nodes of eight GPUs (each with its facts), with ``inventory`` on top."""
    hostvars: dict[str, dict[str, Any]] = {
        name: {"rdmaforge_node": {"gpu_count": 8}, "ansible_facts": {"hostname": f"gpu-{name}"}} for name in NODES
    }
    given = {"ansible_play_hosts_all": NODES, "hostvars": hostvars, "inventory_hostname": NODES[0], **inventory}
    return role_vars("benchmark", {}, **given).template(trust_as_template(text))


def run_json(field: str) -> str:
    recorded: str = task("report.yml", "Record what was asked for this run")["vars"]["benchmark_run"][field]
    return recorded


def e2e_json(field: str) -> str:
    recorded: str = task("e2e.yml", "Keep the e2e result on the controller")["vars"]["benchmark_e2e_result"][field]
    return recorded


@pytest.mark.parametrize(("value", "recorded"), [(None, None), ("", None), (0.9, 0.9), ("0.85", 0.85)])
def test_an_empty_threshold_is_recorded_as_none_never_0(value: object, recorded: float | None) -> None:
    """Empty means not judged (README); as 0.0 it passed every run, 0 GB/s included."""
    assert evaluate(run_json("min_efficiency"), benchmark_min_efficiency=value) == recorded
    assert evaluate(e2e_json("min_linearity"), benchmark_e2e_min_linearity=value) == recorded
    # The intra-node floor defaults to the cross-node one, empty included.
    assert evaluate(e2e_json("min_intra_node_linearity"), benchmark_e2e_min_linearity=value) == recorded


def threshold_check(**inventory: Any) -> Any:
    check = task("main.yml", "Check the benchmark's thresholds and e2e counts")
    return evaluate(check["vars"]["benchmark_threshold_problems"], **inventory)


def test_a_threshold_of_0_or_less_is_refused_naming_the_variable() -> None:
    assert threshold_check() == []  # the defaults
    assert threshold_check(benchmark_min_efficiency=None, benchmark_e2e_min_linearity="") == []
    assert threshold_check(benchmark_min_efficiency=0) == [
        "node1: benchmark_min_efficiency=0 is not allowed; allowed: a number above 0 and at most 1, or empty (null "
        'or "": reported, not judged)'
    ]
    problems = threshold_check(benchmark_e2e_min_linearity=-0.5, benchmark_min_efficiency=1.5)
    assert [p.split("=")[0] for p in problems] == [
        "node1: benchmark_min_efficiency",
        "node1: benchmark_e2e_min_linearity",
        "node1: benchmark_e2e_min_intra_node_linearity",  # its default is benchmark_e2e_min_linearity
    ]
    assert "allowed: a number above 0, or empty" in problems[1]


@pytest.mark.parametrize(("variable", "value"), [
    ("benchmark_e2e_steps", 0), ("benchmark_e2e_steps", -3), ("benchmark_e2e_batch_size", 0),
    ("benchmark_e2e_warmup_steps", -1), ("benchmark_e2e_steps", "many"),
])  # fmt: skip
def test_an_e2e_count_below_its_least_is_refused_before_anything_trains(variable: str, value: object) -> None:
    """0 measured steps trained the whole warm-up (400 steps) and then failed; a batch of 0 trained nothing and failed
    as "the 1-node run measured no throughput". Both the role (a value from -e) and preflight refuse them now."""
    (problem,) = threshold_check(**{variable: value})
    assert problem.startswith(f"node1: {variable}={value!r} is not allowed; allowed: a whole number of "), problem
    assert [p.message for p in inventory_checks.e2e_count_problems("node1", {variable: value})] == [problem]
    assert threshold_check(benchmark_e2e_warmup_steps=0) == []  # no warm-up is allowed


def test_run_json_records_each_nodes_host_name_from_its_facts() -> None:
    """nccl-tests' Rank lines name the host (gethostname up to its first dot, the facts' ``hostname``)."""
    assert evaluate(run_json("hostnames")) == {"node1": "gpu-node1", "node2": "gpu-node2"}
    without_facts = {"node1": {"rdmaforge_node": {"gpu_count": 8}}, "node2": {"rdmaforge_node": {"gpu_count": 8}}}
    assert evaluate(run_json("hostnames"), hostvars=without_facts) == {"node1": None, "node2": None}


#: Why nccl-tests and the e2e training do not run when node2's GPU count is unknown: what to set is named.
UNKNOWN_NODE2 = (
    "the GPU count of node2 could not be read (rdmaforge_node.gpu_count null: nvidia-smi, lspci and the PCI tree in "
    "sysfs gave none) and rdmaforge_gpus_per_node is not set for it, so how many ranks to run is unknown; set "
    "rdmaforge_gpus_per_node (host_vars or group_vars) to the node's GPU count"
)


def nccl_skip_reasons(node2: dict[str, Any]) -> Any:
    """Why the role skips nccl-tests (its "Decide whether nccl-tests can run" task) when node1 has eight GPUs and
    its binaries, and node2 has the fact ``node2``."""
    decide = task("nccl_tests.yml", "Decide whether nccl-tests can run")
    hostvars = {"node1": {"rdmaforge_node": {"gpu_count": 8, "gpu_source": "nvidia-smi"},
                          "benchmark_nccl_binary": {"stat": {"exists": True}}},
                "node2": {"rdmaforge_node": node2}}  # fmt: skip
    task_vars = {name: trust_as_template(value) for name, value in decide["vars"].items()}
    return evaluate("{{ benchmark_nccl_skip_reasons }}", hostvars=hostvars, **task_vars)


@pytest.mark.parametrize(
    ("node2", "reasons"),
    [({"gpu_count": 8, "gpu_source": "nvidia-smi"}, []),
     # the lab: no pciutils, no GPU in the PCI tree in sysfs: a measured 0
     ({"gpu_count": 0, "gpu_source": "sysfs"}, ["no GPU on node2 (rdmaforge_node.gpu_count=0)"]),
     ({"gpu_count": None, "gpu_source": "none"},
      [UNKNOWN_NODE2])],
)  # fmt: skip
def test_nccl_tests_skipped_for_an_unknown_gpu_count_says_so_not_no_gpu(node2: dict[str, Any],
                                                                         reasons: list[str]) -> None:  # fmt: skip
    """A node whose GPUs nothing could count (no nvidia-smi, no lspci, no PCI tree: gpu_source none) was skipped as
    "no GPU on node2 (rdmaforge_node.gpu_count=0)", a count that was never measured."""
    assert nccl_skip_reasons(node2) == reasons
    hostvars = {"node1": {"rdmaforge_node": {"gpu_count": 8}}, "node2": {"rdmaforge_node": node2}}
    counts = evaluate(run_json("gpus"), hostvars=hostvars)
    assert counts["node2"] == node2["gpu_count"]  # run.json: null for the unknown count, never 0


def test_a_fact_that_kept_0_for_an_uncounted_node_is_unknown_too() -> None:
    """A fact of an earlier rdmaforge (gpu_count 0 with gpu_source none, never counted) is read as unknown."""
    old = {"gpu_count": 0, "gpu_source": "none"}
    assert "the GPU count of node2 could not be read" in nccl_skip_reasons(old)[0]
    hostvars = {"node1": {"rdmaforge_node": {"gpu_count": 8}}, "node2": {"rdmaforge_node": old}}
    assert evaluate(run_json("gpus"), hostvars=hostvars) == {"node1": 8, "node2": None}


def command_result(rc: int, stderr: str = "", stdout: str = "") -> dict[str, Any]:
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "changed": False, "failed": False}


def async_result(rc: int | None, stderr: str = "") -> dict[str, Any]:
    if rc is None:  # still running when the wait ended (benchmark_timeout)
        return {"finished": 0, "started": 1, "ansible_job_id": "j1", "failed": False}
    return {"finished": 1, "started": 1, "ansible_job_id": "j1", **command_result(rc, stderr)}


def e2e_error(one: dict[str, Any], single: dict[str, Any], multi: list[dict[str, Any]]) -> Any:
    placed = zip(NODES, multi, strict=True)
    hostvars: dict[str, dict[str, Any]] = {name: {"benchmark_e2e_multi": result} for name, result in placed}
    hostvars["node1"] |= {"benchmark_e2e_one": one, "benchmark_e2e_single": single}
    return evaluate(e2e_json("error"), hostvars=hostvars)


SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
TRACE = "Traceback (most recent call last):\n  File \"ddp_train.py\", line 1\nRuntimeError: NCCL error: unhandled"


def test_e2e_json_records_every_training_runs_failure() -> None:
    ok = command_result(0, stdout='RDMAFORGE_E2E {"world_size": 1}')
    assert e2e_error(SKIPPED, ok, [async_result(0), async_result(0)]) is None
    # The 1-node run is the reference of the linearity: its failure was not recorded before.
    failed_single = command_result(1, TRACE, stdout='RDMAFORGE_E2E {"world_size": 1}')
    assert e2e_error(SKIPPED, failed_single, [async_result(0), async_result(0)]) == (
        "the 1-node run on node1 exited 1: RuntimeError: NCCL error: unhandled"
    )
    assert e2e_error(command_result(134), ok, [async_result(0), async_result(1, TRACE)]) == (
        "the 1-GPU run on node1 exited 134; the N-node run on node2 exited 1: RuntimeError: NCCL error: unhandled"
    )
    assert e2e_error(SKIPPED, ok, [async_result(0), async_result(None)]) == (
        "the N-node run on node2 did not finish before the benchmark's timeout"
    )
    # Killed by Ansible's async wrapper at benchmark_timeout: what async_wrapper writes for its job (msg 'Timeout
    # exceeded', no rc), with `failed` cleared by the wait's failed_when: false. It counted as a clean run.
    killed = {"finished": 1, "started": 1, "ansible_job_id": "j1", "msg": "Timeout exceeded", "child_pid": 42,
              "failed": False}  # fmt: skip
    assert e2e_error(SKIPPED, ok, [async_result(0), killed]) == (
        "the N-node run on node2 ended without an exit status: Timeout exceeded"
    )



@pytest.mark.parametrize("name", ["Train on one GPU (the reference for linearity within a node)",
                                  "Train on one node (the reference for linearity across nodes)"])
def test_the_reference_trainings_are_bounded_and_a_hang_is_named(name: str) -> None:
    """Only the N-node run had a bound (async, benchmark_timeout): a 1-GPU or 1-node run that hung in NCCL's start
    left the play waiting for ever (fuzz 14). Both run under timeout(1) with benchmark_timeout, and its exit 124 is
    named as a run that did not finish."""
    argv = evaluate(task("e2e.yml", name)["ansible.builtin.command"]["argv"],
                    benchmark_timeout=600, rdmaforge_node={"gpu_count": 8})  # fmt: skip
    assert argv[:3] == ["timeout", "--kill-after=30", "600"] and argv[3].endswith("/bin/torchrun"), argv
    hung = {**command_result(124), "cmd": argv}
    ok = command_result(0, stdout='RDMAFORGE_E2E {"world_size": 1}')
    assert e2e_error(SKIPPED, hung, [async_result(0), async_result(0)]) == (
        "the 1-node run on node1 did not finish within benchmark_timeout (timeout exited 124)"
    )
    assert e2e_error({**command_result(124), "cmd": ["/venv/bin/torchrun"]}, ok, [async_result(0), async_result(0)]) \
        == "the 1-GPU run on node1 exited 124"  # fmt: skip


def test_each_collectives_exit_code_is_recorded() -> None:
    """The report fails a collective whose launch exited non-zero; the role records each loop item's rc (the shape
    of a looped ansible.builtin.command's registered result); an item that did not run has none."""
    runs = {"results": [{"item": "all_reduce", "rc": 0}, {"item": "all_gather", "rc": 124},
                        {"item": "broadcast", "skipped": True}]}  # fmt: skip
    recorded = evaluate(run_json("nccl_exit_codes"), benchmark_nccl_runs=runs)
    assert recorded == {"all_reduce": 0, "all_gather": 124}
    assert evaluate(run_json("nccl_exit_codes")) == {}  # nccl-tests never launched


# --- the e2e training's processes per node: one per GPU, never one for a count that is unknown -------------------


def e2e_decision(node2: dict[str, Any]) -> Any:
    """The role's "Decide whether the e2e benchmark can run" when node1 has eight GPUs and node2 the variables
    ``node2`` (its fact, and any rdmaforge_gpus_per_node of the inventory)."""
    decide = task("main.yml", "Decide whether the e2e benchmark can run")["ansible.builtin.set_fact"]
    hostvars = {"node1": {"rdmaforge_node": {"gpu_count": 8, "gpu_source": "nvidia-smi"}}, "node2": node2}
    return {key: evaluate(value, hostvars=hostvars) for key, value in decide["benchmark_e2e_run"].items()}


def e2e_nproc(node: dict[str, Any]) -> Any:
    """torchrun's --nproc-per-node on a node with the variables ``node``."""
    return evaluate("{{ benchmark_e2e_nproc }}", **node)


@pytest.mark.parametrize(
    ("node2", "nproc"),
    [({"rdmaforge_node": {"gpu_count": None, "gpu_source": "none"}}, None),
     # a fact of an earlier rdmaforge that kept 0 for a node nothing counted
     ({"rdmaforge_node": {"gpu_count": 0, "gpu_source": "none"}}, None),
     ({}, None),  # no preflight fact at all
     ({"rdmaforge_node": {"gpu_count": None, "gpu_source": "none"}, "rdmaforge_gpus_per_node": 0}, None)],
)  # fmt: skip
def test_e2e_is_skipped_naming_a_node_of_unknown_gpu_count(node2: dict[str, Any], nproc: int | None) -> None:
    """Such a node trained with 1 process as if it had one GPU (or none), and the linearity was judged on it: a
    pass no one measured. The training is skipped, the node and the variable to set are named."""
    assert e2e_decision(node2) == {"status": "skipped", "reason": UNKNOWN_NODE2}
    assert e2e_nproc(node2) == nproc


@pytest.mark.parametrize(
    ("node2", "nproc"),
    [({"rdmaforge_node": {"gpu_count": 8, "gpu_source": "nvidia-smi"}}, 8),
     # the lab: a measured 0 (sysfs) trains one gloo process on the CPU
     ({"rdmaforge_node": {"gpu_count": 0, "gpu_source": "sysfs"}}, 1),
     # the inventory's count stands in for one preflight could not read; a count read on the node wins over it
     ({"rdmaforge_node": {"gpu_count": None, "gpu_source": "none"}, "rdmaforge_gpus_per_node": 4}, 4),
     ({"rdmaforge_node": {"gpu_count": 2, "gpu_source": "lspci"}, "rdmaforge_gpus_per_node": 4}, 2)],
)  # fmt: skip
def test_e2e_runs_one_process_per_known_gpu(node2: dict[str, Any], nproc: int) -> None:
    assert e2e_decision(node2) == {"status": "ran", "reason": None}
    assert e2e_nproc(node2) == nproc


def test_run_json_records_why_e2e_was_skipped() -> None:
    skipped = {"status": "skipped", "reason": UNKNOWN_NODE2}
    assert evaluate(run_json("e2e"), benchmark_e2e_run=skipped) == skipped
    assert evaluate(run_json("e2e")) == {"status": "skipped", "reason": "benchmark_e2e is false"}


def test_nccl_tests_slots_are_the_nodes_gpu_counts_an_unknown_one_left_null() -> None:
    """One rank per GPU; a node of unknown count is no 0 (map('int') made it one) but null: nccl-tests is skipped
    for it (test_nccl_tests_skipped_for_an_unknown_gpu_count_says_so_not_no_gpu)."""
    hostvars = {"node1": {"rdmaforge_node": {"gpu_count": 8, "gpu_source": "nvidia-smi"}},
                "node2": {"rdmaforge_node": {"gpu_count": None, "gpu_source": "none"}}}  # fmt: skip
    assert evaluate("{{ benchmark_mpi_slots }}", hostvars=hostvars) == [8, None]
    hostvars["node2"]["rdmaforge_gpus_per_node"] = 4
    assert evaluate("{{ benchmark_mpi_slots }}", hostvars=hostvars) == [8, 4]


def test_seed_003s_variables_reach_the_training_runs() -> None:
    """benchmark_e2e_env was a role variable (above the inventory): seed 003's AIACC_BUCKET_TUNE_DISABLE=1 could not
    reach the training, and nccl_env_overrides only reaches login shells (fuzz 14). benchmark_e2e_extra_env adds it;
    the role's own settings stay."""
    env = evaluate("{{ benchmark_e2e_env }}", benchmark_e2e_extra_env={"AIACC_BUCKET_TUNE_DISABLE": "1",
                                                                        "NCCL_DEBUG": "WARN"})  # fmt: skip
    assert env["AIACC_BUCKET_TUNE_DISABLE"] == "1" and env["NCCL_DEBUG"] == "INFO" and env["OMP_NUM_THREADS"] == "1"


def test_the_n_node_result_is_read_from_whichever_node_printed_it() -> None:
    """torchrun's global rank 0 prints the result line, and c10d rendezvous does not promise rank 0 to the first
    node: read from the first node alone, a run whose rank 0 landed on node2 had no N-node result and failed
    (review round 19a)."""
    line = 'RDMAFORGE_E2E {"world_size": 16, "nodes": 2, "percentiles": {}}'
    outputs = {"node1": {"benchmark_e2e_multi": {"stdout": "[rank8] training\n", "rc": 0}},
               "node2": {"benchmark_e2e_multi": {"stdout": f"[rank0] training\n{line}\n", "rc": 0}}}  # fmt: skip
    assert evaluate(e2e_json("multi"), hostvars=outputs, benchmark_nodes=NODES) == {
        "world_size": 16, "nodes": 2, "percentiles": {}}
    # rank 0 on the first node, the other node's output after it (the lab's case: the result was lost once)
    first = {"node1": outputs["node2"], "node2": {"benchmark_e2e_multi": {"stdout": "[rank1] done\n", "rc": 0}}}
    assert evaluate(e2e_json("multi"), hostvars=first, benchmark_nodes=NODES)["world_size"] == 16
    nothing = {"node1": outputs["node1"], "node2": outputs["node1"]}
    assert evaluate(e2e_json("multi"), hostvars=nothing, benchmark_nodes=NODES) is None
    # a node without the registered result (the play lost it) is read as no output, not a template error
    assert evaluate(e2e_json("multi"), hostvars={"node1": {}, **{"node2": outputs["node2"]}},
                    benchmark_nodes=NODES)["world_size"] == 16  # fmt: skip


@pytest.mark.parametrize("printer", ["node1", "node2"])
def test_the_n_node_result_is_read_as_ansible_reads_it(tmp_path: Path, printer: str) -> None:
    """The same expression in a real ansible-playbook run of two local hosts, each with an output registered as the
    role registers it (Ansible's templating differs from a bare templar: a first version joined the outputs with
    '\\n', which Ansible kept as a backslash and an n, and the lab's result was lost)."""
    import subprocess
    import sys

    from conftest import run_playbook

    line = 'RDMAFORGE_E2E {"world_size": 2, "nodes": 2, "percentiles": {}}'
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {name: local for name in NODES}}}))
    out = tmp_path / "multi.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "vars": {"benchmark_nodes": NODES},
        "tasks": [
            {"name": "Train", "register": "benchmark_e2e_multi", "changed_when": False, "ansible.builtin.command": {
                "argv": ["printf", "%s\\n", "[rank] training", f"{{{{ {line!r} if inventory_hostname == "
                         f"{printer!r} else 'done' }}}}"]}},
            {"name": "Read", "run_once": True, "ansible.builtin.copy": {
                "content": "{{ multi | to_json }}", "dest": str(out), "mode": "0644"},
             "vars": {"multi": e2e_json("multi")}}]}], sort_keys=False))  # fmt: skip
    proc: subprocess.CompletedProcess[str] = run_playbook(str(playbook), inventory=inventory, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert json.loads(out.read_text()) == {"world_size": 2, "nodes": 2, "percentiles": {}}
