"""Which nodes a benchmark's nccl-tests log ran on, against the nodes its run.json names: a log whose ranks all ran
on one host is no result of a run of two nodes, however run.json spells them, and its transport is judged as
nccl-report judges it (one node can fail the transport, never pass it). Logs are written as nccl-tests 2.17 prints
them (tests/unit/test_nccl_report.py's lines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rdmaforge.bench.report import render
from tests.unit.test_nccl_report import FOOTER_1M, HEAD_1M, ROW_1M


def log_on(*hosts: str, network: str = "IB") -> str:
    """One all_reduce run whose two ranks ran on ``hosts`` (one host: both ranks there)."""
    first, second = (hosts[0], hosts[0]) if len(hosts) == 1 else hosts
    head = HEAD_1M.replace("on    node-01", f"on    {first}").replace("on    node-02", f"on    {second}")
    return head + f"{first}:10001:10001 [0] NCCL INFO Using network {network}\n" + ROW_1M + "\n" + FOOTER_1M


def run_dir(tmp_path: Path, log: str, nodes: list[str], fabric: str = "infiniband", **more: Any) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "nccl-all_reduce.log").write_text(log)
    run = {"fabric": fabric, "nodes": nodes, "gpus": {node: 1 for node in nodes}, "min_efficiency": 0.1,
           "line_rate_gbps": 100, "nccl": {"status": "ran", "collectives": ["all_reduce"]}, **more}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(run))
    return tmp_path


def component(results: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in results["components"] if c["name"] == name]
    return found  # type: ignore[no-any-return]


def test_the_two_ranks_of_two_nodes_pass_and_the_fixture_can_pass(tmp_path: Path) -> None:
    results = render(run_dir(tmp_path, log_on("node-01", "node-02"), ["node-01", "node-02"]))
    assert results["verdict"] == "pass", results["reasons"]
    assert component(results, "transport")["status"] == "pass"


def test_two_node_names_of_one_host_do_not_make_a_one_host_log_a_two_node_result(tmp_path: Path) -> None:
    """Without hostnames in run.json, the nodes' short names are compared with the Rank lines' hosts: two names of
    one host (node-01, node-01.example.net) made the set of one host equal the set of the run's nodes: pass."""
    results = render(run_dir(tmp_path, log_on("node-01"), ["node-01", "node-01.example.net"]))
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "fail", nccl
    assert "the ranks ran on 1 host(s) (node-01), the run has 2 nodes" in nccl["reason"]
    assert results["verdict"] == "fail"


def test_a_node_listed_twice_is_not_judged(tmp_path: Path) -> None:
    results = render(run_dir(tmp_path, log_on("node-01"), ["node-01", "node-01"], hostnames={"node-01": "node-01"},
                             gpus={"node-01": 2}))
    nccl = component(results, "nccl-tests all_reduce")
    assert nccl["status"] == "not_judged", nccl
    assert "run.json lists node node-01 more than once (2 entries)" in nccl["reason"]
    assert results["verdict"] != "pass"


def test_the_transport_of_a_one_node_log_is_not_judged_as_nccl_report_judges_it(tmp_path: Path) -> None:
    """'Using network IB' with both ranks on node-01: the report's transport component passed while nccl-report
    said unknown for the same log; with nccl-tests optional the run passed on that transport alone."""
    one_node = {"gpus": {"node-01": 2}}
    results = render(run_dir(tmp_path / "ib", log_on("node-01"), ["node-01"], required=["transport"], **one_node))
    transport = component(results, "transport")
    assert transport["status"] == "not_judged", transport
    assert "every rank ran on node-01" in transport["reason"]
    assert results["verdict"] == "incomplete"
    socket = render(run_dir(tmp_path / "socket", log_on("node-01", network="Socket"), ["node-01"], **one_node))
    assert component(socket, "transport")["status"] == "fail"  # a fallback on one node is a fallback
    assert socket["verdict"] == "fail"


def test_run_json_and_e2e_json_with_a_byte_order_mark_are_read(tmp_path: Path) -> None:
    """Their schema check reads a UTF-8 BOM (an editor's); the report then read them again without it and stopped
    with a traceback (exit 70)."""
    path = run_dir(tmp_path, log_on("node-01", "node-02"), ["node-01", "node-02"])
    training = {"world_size": 1, "nodes": 1, "backend": "nccl", "warmup_steps": 400,
                "percentiles": {p: {"samples_per_s": 100.0} for p in ("p50", "p75", "p90", "p95")}}  # fmt: skip
    multi = {**training, "world_size": 2, "nodes": 2,
             "percentiles": {p: {"samples_per_s": 190.0} for p in ("p50", "p75", "p90", "p95")}}  # fmt: skip
    e2e = {"single": training, "multi": multi, "min_linearity": 0.8, "ranks_per_node": 1}
    (path / "e2e.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(e2e).encode())
    run = path / "run.json"
    run.write_bytes(b"\xef\xbb\xbf" + run.read_bytes())
    results = render(path)
    assert component(results, "e2e")["status"] == "pass"
    assert results["verdict"] == "pass", results["reasons"]


def test_requiring_nccl_tests_requires_its_transport_check(tmp_path: Path) -> None:
    """`bench --require nccl-tests,e2e` (the README's example) left the transport optional: a log without NCCL INFO
    lines, whose busbw may have gone over TCP, passed. The transport comes with nccl-tests unless made optional."""
    silent = log_on("node-01", "node-02").replace("node-01:10001:10001 [0] NCCL INFO Using network IB\n", "")
    results = render(run_dir(tmp_path / "a", silent, ["node-01", "node-02"], required=["nccl-tests"]))
    transport = component(results, "transport")
    assert (transport["status"], transport["required"]) == ("not_judged", True), transport
    assert results["verdict"] == "incomplete"
    optional = render(run_dir(tmp_path / "b", silent, ["node-01", "node-02"], required=["nccl-tests"],
                              optional=["transport"]))  # fmt: skip
    assert optional["verdict"] == "pass", optional["reasons"]  # dropped on purpose, and named not judged
    assert component(optional, "transport")["required"] is False
