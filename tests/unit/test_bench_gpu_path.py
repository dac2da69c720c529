"""The benchmark role's GPU path (roles/benchmark/tasks/nccl_tests.yml, then the report) run by Ansible end to end
on two fake local nodes. The lab has no GPU, so its bench never takes this path; here the nodes' rdmaforge_node
facts say 1 GPU each, and mpirun and sendrecv_perf are stand-ins (test doubles for the GPU job): mpirun records its
arguments and prints corpus 05's real two-node sendrecv output, whose ranks ran on cnode2-001 and cnode2-002, the
host names the nodes' facts are given. What is real: the role's tasks, the mpirun argv it builds, the raw log kept
on the controller, run.json and the report's verdict from the same code as `rdmaforge report`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from conftest import LOCAL_NODE, run_playbook

CORPUS = "corpus/nccl-tests/05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt"
#: The pair's line rate the bench report tests judge corpus 05 against (tests/unit/test_bench_report.py).
LINE_RATE_GBPS = 100


def stand_ins(tmp_path: Path, corpus: Path) -> tuple[Path, Path]:
    """A bin directory with mpirun (records its argv, prints the corpus log) and the nccl-tests directory the role
    looks for (sendrecv_perf, which answers -h without JSON)."""
    bin_dir, tests_bin = tmp_path / "bin", tmp_path / "nccl-tests" / "bin"
    bin_dir.mkdir()
    tests_bin.mkdir(parents=True)
    calls = tmp_path / "mpirun.argv"
    (bin_dir / "mpirun").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {calls}\ncat {corpus}\n")
    (tests_bin / "sendrecv_perf").write_text("#!/bin/sh\necho 'USAGE: sendrecv_perf [-b minbytes] ...'\n")
    for script in (bin_dir / "mpirun", tests_bin / "sendrecv_perf"):
        script.chmod(0o755)
    return bin_dir, tests_bin


def test_the_gpu_path_runs_on_the_nodes_gpus_and_judges_its_log(shared_dir: Path, tmp_path: Path) -> None:
    corpus = shared_dir / CORPUS
    ranks_on = sorted(set(re.findall(r"#\s+Rank\s+\d+ .*? on\s+(\S+) device", corpus.read_text())))
    assert ranks_on == ["cnode2-001", "cnode2-002"], ranks_on  # the hosts the sample's ranks ran on
    bin_dir, tests_bin = stand_ins(tmp_path, corpus)
    node = {"gpu_count": 1, "gpu_source": "nvidia-smi", "nics": [], "default_route_interface": "eth0",
            "rdma_devices": [], "rdma_source": "none"}  # fmt: skip
    hosts = {"node1": {**LOCAL_NODE, "rdmaforge_node": node, "host_name": ranks_on[0]},
             "node2": {**LOCAL_NODE, "rdmaforge_node": node, "host_name": ranks_on[1]}}  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    artifacts = tmp_path / "artifacts"
    playbook = tmp_path / "bench.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Benchmark two fake GPU nodes", "hosts": "cluster", "gather_facts": False,
        "environment": {"PATH": f"{bin_dir}:/usr/bin:/bin"},
        "pre_tasks": [{"name": "The host name each node's facts give (nccl-tests names each rank's host so)",
                       "ansible.builtin.set_fact": {"ansible_facts": {"hostname": "{{ host_name }}"}}}],
        "roles": [{"role": "rdmaforge.cluster.benchmark"}],
    }]))  # fmt: skip
    settings = {"rdmaforge_fabric": "infiniband", "benchmark_collectives": ["sendrecv"],
                "benchmark_nccl_tests_bin": str(tests_bin), "benchmark_e2e": False,
                "benchmark_line_rate_gbps": LINE_RATE_GBPS, "benchmark_line_rate_from_ports": False,
                "benchmark_artifacts_dir": str(artifacts), "benchmark_mpirun_args": []}  # fmt: skip
    proc = run_playbook(str(playbook), "-e", json.dumps(settings), inventory=inventory,
                        env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=600)  # fmt: skip
    (run_dir,) = artifacts.iterdir()
    argv = (tmp_path / "mpirun.argv").read_text().split("\n")
    # One rank per GPU of each node (1 + 1), on the benchmark's nodes only, seed 000's flags.
    assert argv[argv.index("-np") + 1] == "2", argv
    assert argv[argv.index("--host") + 1] == "node1:1,node2:1", argv
    # seed 000's -b 1B, as nccl-tests' parsesize reads it (it refuses 1B: test_nccl_tests_sizes.py)
    assert argv[argv.index(str(tests_bin / "sendrecv_perf")) + 1:][:2] == ["-b", "1"], argv
    kept = (run_dir / "nccl-sendrecv.log").read_text()
    assert kept.startswith(corpus.read_text().rstrip("\n")), "the raw log is kept whole (the command's stdout)"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["gpus"] == {"node1": 1, "node2": 1} and run["hostnames"] == {"node1": ranks_on[0], "node2": ranks_on[1]}
    assert run["nccl"]["status"] == "ran" and run["nccl_exit_codes"] == {"sendrecv": 0}
    results = json.loads((run_dir / "results.json").read_text())
    sendrecv = next(c for c in results["components"] if c["name"] == "nccl-tests sendrecv")
    # 05's sendrecv peaks at 13.60 GB/s out-of-place: above 80% of 100 Gbit/s (12.5 GB/s)
    assert sendrecv["status"] == "pass" and sendrecv["value"] == 13.6, sendrecv
    # 05 holds no NCCL INFO lines (the sample ran without NCCL_DEBUG=INFO): the transport cannot be told, so the
    # verdict is incomplete, never a pass, and the role fails the play for it (benchmark_fail_on_verdict).
    assert "NCCL INFO" not in corpus.read_text()
    transport = next(c for c in results["components"] if c["name"] == "transport")
    assert transport["status"] == "not_judged" and "no NCCL INFO lines" in transport["reason"], transport
    assert results["verdict"] == "incomplete"
    assert proc.returncode != 0 and "verdict" in proc.stdout.lower(), proc.stdout[-3000:]
