"""rdmaforge's parsers and verdicts on real output of one H100 (tests/data/device-h100, see its README).

Expected values come from the samples' other witnesses: the CSV of ``nvidia-smi --query-gpu`` for the GPU count,
the command line (``-b 8 -e 256M -f 2``) for the row count, nccl-tests' text output for its own ``-J`` file.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import same_run_as_text_and_json

from rdmaforge.bench.e2e import parse_output
from rdmaforge.bench.report import render
from rdmaforge.nccl_tests import parse_file
from rdmaforge.node_facts import count_nvidia_smi_gpus
from rdmaforge.parsers import gpu_topology

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "device-h100"


def section(name: str) -> str:
    text = (SAMPLES / "probe.txt").read_text()
    return text.split(f"== {name}\n", 1)[1].split("\n== ", 1)[0]


def test_nvidia_smi_list_counts_the_gpus_the_query_lists() -> None:
    query_rows = section("nvidia-smi --query-gpu").strip().splitlines()[1:]  # CSV header, then one row per GPU
    assert count_nvidia_smi_gpus(section("nvidia-smi -L")) == len(query_rows) == 1


def test_topology_matrix_with_ansi_header_and_no_nic() -> None:
    topo = section("nvidia-smi topo -m")
    assert "\x1b[4m" in topo  # the real driver underlines the header: the parser must see through it
    parsed = gpu_topology.parse_topo_matrix(topo)
    assert parsed["gpus"] == ["GPU0"] and parsed["nics"] == []
    rails = gpu_topology.rail_map(parsed)
    assert rails["nccl_ib_hca"] == "" and "no RDMA device" in str(rails["reason"])


def test_all_reduce_text_and_its_json_file_give_the_same_run() -> None:
    sizes = [8 * 2**i for i in range(26)]  # -b 8 -e 256M -f 2
    text, as_json = same_run_as_text_and_json(SAMPLES / "all_reduce.txt", SAMPLES / "all_reduce.json", sizes)
    one_rank = zip(text.rows, as_json.rows, strict=True)
    assert all(a.out_of_place.busbw == b.out_of_place.busbw == 0.0 for a, b in one_rank)  # busbw of one rank: 0
    assert text.ranks == 1 and text.status == "ok"
    assert text.nccl_version == as_json.nccl_version == "2.29.7"


def test_all_gather_and_sendrecv_of_one_rank_parse() -> None:
    runs = parse_file(SAMPLES / "more_perf.txt").runs
    assert [r.collective for r in runs] == ["all_gather", "sendrecv"]
    assert all(r.status == "ok" and r.ranks == 1 for r in runs)


def test_the_e2e_benchmark_ran_on_the_gpu_with_nccl() -> None:
    result = parse_output((SAMPLES / "torch_ddp.txt").read_text())
    assert result is not None
    assert (result["backend"], result["device"], result["world_size"], result["steps"]) == ("nccl", "cuda", 1, 30)


def bench_run(tmp_path: Path, log: Path, nodes: list[str], gpus: int, fabric: str = "erdma") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "nccl-all_reduce.log").write_bytes(log.read_bytes())
    run = {
        "fabric": fabric,
        "nodes": nodes,
        "gpus": {node: gpus for node in nodes},
        "min_efficiency": 0.8,
        "nccl": {"status": "ran", "collectives": ["all_reduce"]},
    }
    (tmp_path / "run.json").write_text(json.dumps(run))
    return tmp_path


def nccl_component(results: dict[str, object]) -> dict[str, object]:
    (found,) = [c for c in results["components"] if c["name"] == "nccl-tests all_reduce"]  # type: ignore[attr-defined]
    return found  # type: ignore[no-any-return]


def test_one_rank_on_one_h100_is_not_judged_against_the_fabric(tmp_path: Path) -> None:
    # The machine had no RDMA device: NCCL used sockets, right for tcp, a failure for eRDMA.
    results = render(bench_run(tmp_path / "tcp", SAMPLES / "all_reduce.txt", ["gpu1"], 1, fabric="tcp"))
    nccl = nccl_component(results)
    assert nccl["status"] == "not_judged" and "one rank" in str(nccl["reason"])
    assert results["verdict"] == "incomplete"
    erdma = render(bench_run(tmp_path / "erdma", SAMPLES / "all_reduce.txt", ["gpu1"], 1))
    assert nccl_component(erdma)["status"] == "not_judged"
    assert erdma["verdict"] == "fail" and [r.split(":")[0] for r in erdma["reasons"]] == ["transport"]


def test_many_gpus_of_one_node_never_pass_for_the_fabric(tmp_path: Path, shared_dir: Path) -> None:
    # One DGX-2, 12 V100s in one process: bus bandwidth over NVSwitch, no network at all. Against eRDMA's line
    # rate it used to pass. Credited to a run of two nodes it fails: its Rank lines name one host, the job did not
    # span the run's nodes (it used to be judged against the fabric as if it had).
    log = shared_dir / "corpus" / "nccl-tests" / "07_multi_v2.0-era_v100_12gpu_dgx2_allgather_oob4.txt"
    one = render(bench_run(tmp_path / "one", log, ["dgx2"], 12))
    nccl = nccl_component(one)
    assert nccl["status"] == "not_judged" and "on one node (dgx2)" in str(nccl["reason"])
    assert one["verdict"] != "pass"
    two = render(bench_run(tmp_path / "two", log, ["a", "b"], 6))
    assert nccl_component(two)["status"] == "fail" and two["verdict"] == "fail"
    assert "the job did not span the run's nodes" in str(nccl_component(two)["reason"])


def test_doctor_on_a_real_hopper_node_with_an_sm80_build_names_the_arch_to_add() -> None:
    from rdmaforge import doctor

    node = json.loads((SAMPLES.parent / "device-h200" / "doctor-node.json").read_text())
    # Witnesses inside the file: nvidia-smi listed one GPU and answered compute capability 9.0; the installed
    # manifest says sm_80.
    assert node["nvidia_smi"].count("GPU 0:") == 1 and node["compute_caps"].strip() == "9.0"
    assert node["nccl_manifest"]["archs"] == ["sm_80"]
    checks = {c.check: c for c in doctor.diagnose({"gpu-node": node}).checks}
    assert checks["gpus"].status == "ok" and checks["gpus"].actual == "1"
    assert checks["nccl"].status == "problem" and checks["nccl"].expected == "an arch for compute capability 9.0"
    assert "add sm_90 to nccl_cuda_archs" in checks["nccl"].reason
