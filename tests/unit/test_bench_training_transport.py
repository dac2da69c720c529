"""NCCL's transport in the N-node training, judged on an RDMA fabric as nccl-tests' is (review round 23a).

Only nccl-tests' logs were read for the transport, and the training's ``Using network`` lines only by the net
plugin check, which runs where a plugin is enabled: on infiniband, roce and acs_type1 (no plugin by default) a
training that fell back to TCP sockets passed on its throughput. The log lines are NCCL's own format
(``host:pid:tid [rank] NCCL INFO Using network <name>``, as in the shared corpus); the networks are NCCL's built-in
IB and Socket transports.
"""

from __future__ import annotations

import json
from pathlib import Path

from rdmaforge.bench.report import render
from tests.unit.test_bench_accelerators import NODES, components, nccl, run_dir


def training_log(host: str, network: str) -> str:
    text = nccl(host, 0, "NCCL version 2.29.7+cuda13.0")
    if network == "Socket":
        text += nccl(host, 0, "NET/Socket : Using [0]eth0:198.18.0.11<0>")
    text += nccl(host, 0, f"Using network {network}")
    return text + "RDMAFORGE_E2E {}\n"


def logs(networks: dict[str, str | None]) -> dict[str, str | None]:
    found: dict[str, str | None] = {"e2e-one-gpu.log": training_log("n1", "IB"),
                                    "e2e-single-node.log": training_log("n1", "IB")}  # fmt: skip
    found |= {f"e2e-multi-node-{n}.log": None if net is None else training_log(n, net) for n, net in networks.items()}
    return found


def judged(tmp_path: Path, networks: dict[str, str | None], **options: object) -> dict:
    options = {"fabric": "infiniband", "net_plugin": "none", **options}
    tmp_path.mkdir(parents=True, exist_ok=True)
    return render(run_dir(tmp_path, logs(networks), **options))  # type: ignore[arg-type]


def test_a_training_that_fell_back_to_sockets_on_infiniband_fails(tmp_path: Path) -> None:
    results = judged(tmp_path, dict.fromkeys(NODES, "Socket"))
    trained = components(results)["e2e transport"]
    assert trained["status"] == "fail" and results["verdict"] == "fail", results["reasons"]
    assert "fabric profile 'infiniband' expects RDMA but NCCL fell back to the Socket transport" in trained["reason"]
    assert trained["value"] == "Socket"


def test_one_node_on_sockets_fails_and_is_named(tmp_path: Path) -> None:
    results = judged(tmp_path, {"n1": "IB", "n2": "Socket"})
    trained = components(results)["e2e transport"]
    assert trained["status"] == "fail", trained
    assert trained["reason"].startswith("e2e-multi-node-n2.log: fabric profile 'infiniband' expects RDMA"), trained


def test_a_training_over_ib_passes_and_the_transport_counts_as_checked(tmp_path: Path) -> None:
    results = judged(tmp_path, dict.fromkeys(NODES, "IB"))
    trained = components(results)["e2e transport"]
    assert trained["status"] == "pass" and results["verdict"] == "pass", results["reasons"]
    assert "NCCL used IB as fabric profile 'infiniband' expects" in trained["reason"]
    assert not [line for line in results.get("not_measured") or [] if "transport was not checked" in line]


def test_a_missing_node_log_is_not_judged(tmp_path: Path) -> None:
    trained = components(judged(tmp_path, {"n1": "IB", "n2": None}))["e2e transport"]
    assert trained["status"] == "not_judged", trained
    assert "e2e-multi-node-n2.log is missing: what its ranks used cannot be told" in trained["reason"]


def test_nothing_is_added_for_gloo_a_socket_fabric_or_where_the_plugin_check_reads_the_lines(tmp_path: Path) -> None:
    assert "e2e transport" not in components(judged(tmp_path / "gloo", dict.fromkeys(NODES, "Socket"),
                                                    backend="gloo", gpus=0))  # fmt: skip
    assert "e2e transport" not in components(judged(tmp_path / "tcp", dict.fromkeys(NODES, "Socket"), fabric="tcp"))
    plugin = components(judged(tmp_path / "aiacc", dict.fromkeys(NODES, "Socket"), fabric="erdma",
                               net_plugin="aiacc"))  # fmt: skip
    assert "e2e transport" not in plugin and plugin["e2e net plugin aiacc"]["status"] == "fail"


def test_a_training_on_one_node_can_fail_but_never_pass(tmp_path: Path) -> None:
    """NCCL prints 'Using network IB' on one node too, where no byte crosses the fabric (review round 24: a one-node
    cluster's e2e transport passed). As for nccl-tests' logs (within_one_node): a fallback fails, IB is not judged."""
    for name, network, status in (("ib", "IB", "not_judged"), ("socket", "Socket", "fail")):
        (tmp_path / name).mkdir()
        run_dir(tmp_path / name, logs({"n1": network}), fabric="infiniband", net_plugin="none")
        run = json.loads((tmp_path / name / "run.json").read_text())
        e2e = json.loads((tmp_path / name / "e2e.json").read_text())
        run["nodes"], run["gpus"] = ["n1"], {"n1": 8}
        e2e["logs"]["multi"] = ["e2e-multi-node-n1.log"]
        (tmp_path / name / "run.json").write_text(json.dumps(run))
        (tmp_path / name / "e2e.json").write_text(json.dumps(e2e))
        trained = components(render(tmp_path / name))["e2e transport"]
        assert trained["status"] == status, trained
        if status == "not_judged":
            assert "every rank ran on n1, so NCCL's traffic stayed inside that node" in trained["reason"], trained
