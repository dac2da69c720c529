"""Transport detection from NCCL_DEBUG=INFO lines and the verdict against a fabric profile.

Synthetic lines follow NCCL's own format strings (``NET/IB : Using%s %s; OOB %s:%s``,
``Using network %s``, ``GPU Direct RDMA %s for GPU ...``, ``... via NET/%s/%d[/GDRDMA]``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaforge.cli import main
from rdmaforge.nccl_tests import (
    FABRIC_PROFILES,
    Hca,
    merge_reports,
    parse,
    parse_file,
    parse_transport,
    verdict,
)
from rdmaforge.nccl_tests.transport import TransportVerdict, combined_verdict, merge_transports
from rdmaforge.runner.exit_codes import ExitCode

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "nccl-tests"
needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(),
    reason=f"{CORPUS} is absent: the nccl-tests corpus lives in ../shared beside the checkout",
)


def info(message: str, host: str = "node-01", rank: int = 0) -> str:
    return f"{host}:4242:4300 [{rank}] NCCL INFO {message}\n"


IB_GDR = (
    info("Bootstrap : Using ib0:10.0.0.1<0>")
    + info("NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file")
    + info("NET/Plugin: Using internal network plugin.")
    + info("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>")
    + info("Using network IB")
    + info("NCCL version 2.18.3+cuda12.2")
    + info("GPU Direct RDMA Enabled for GPU 18000 / HCA 0 (distance 3 <= 4), read 1")
    + info("Channel 00/0 : 0[18000] -> 8[18000] [send] via NET/IB/0/GDRDMA")
    + info("Channel 00/0 : 8[18000] -> 0[18000] [receive] via NET/IB/0/GDRDMA")
)
ROCE_NO_GDR = (
    info("NET/IB : Using [0]mlx5_2:1/RoCE ; OOB eth0:192.168.1.10<0>")
    + info("Using network IB")
    + info("GPU Direct RDMA Disabled for GPU 3b000 / HCA 0 (distance 5 > 4)")
    + info("Channel 01/0 : 0[3b000] -> 1[3b000] [send] via NET/IB/0")
)
SOCKET_IB_DISABLED = (
    info("NCCL_IB_DISABLE set by environment to 1.")
    + info("NET/Socket : Using [0]eth0:192.168.1.10<0> [1]eth1:10.1.0.10<0>")
    + info("Using network Socket")
    + info("Channel 00/0 : 0[3b000] -> 1[3b000] [send] via NET/Socket/0")
)


def test_infiniband_with_gdr() -> None:
    transport = parse_transport(IB_GDR)
    assert transport.to_dict() == {
        "network": "IB",
        "networks": ["IB"],
        "rdma": True,
        "hcas": [
            {"name": "mlx5_0", "port": 1, "link_layer": "IB"},
            {"name": "mlx5_1", "port": 1, "link_layer": "IB"},
        ],
        "gdr": "on",
        "nccl_version": "2.18.3",
        "plugin": {
            "result": "not_found",
            "name": None,
            "detail": "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: "
            "No such file",
        },
        "socket_interfaces": [],
        "ib_problems": [],
        "env": {},
        "info_lines": 9,
    }
    assert verdict(transport, "infiniband").status == "ok"


def test_roce_without_gdr_warns() -> None:
    transport = parse_transport(ROCE_NO_GDR)
    assert transport.hcas == [Hca("mlx5_2", 1, "RoCE")]
    assert transport.gdr == "off"
    judged = verdict(transport, "roce")
    assert judged.status == "warn"
    assert judged.messages == (
        "NCCL used IB as fabric profile 'roce' expects",
        "GPUDirect RDMA is off: some traffic is staged through host memory",
    )


def test_link_layer_mismatch_warns() -> None:
    judged = verdict(parse_transport(IB_GDR), "roce")
    assert judged.status == "warn"
    assert "HCAs with a link layer other than RoCE: mlx5_0:1/IB, mlx5_1:1/IB" in judged.messages


def test_merged_virtual_devices() -> None:
    text = info("NET/IB : Using [0]{mlx5_0:1/IB, mlx5_1:1/IB} [1]mlx5_4:1/IB [RO]; OOB ib0:10.0.0.1<0>")
    assert [h.name for h in parse_transport(text).hcas] == ["mlx5_0", "mlx5_1", "mlx5_4"]


@pytest.mark.parametrize("fabric", ["erdma", "infiniband", "roce", "acs_type1"])
def test_socket_fallback_fails_rdma_profiles(fabric: str) -> None:
    judged = verdict(parse_transport(SOCKET_IB_DISABLED), fabric)
    assert judged.failed
    assert judged.messages == (
        f"fabric profile '{fabric}' expects RDMA but NCCL fell back to the Socket transport (TCP) "
        "on every rank; cause: NCCL_IB_DISABLE=1",
    )


@pytest.mark.parametrize("fabric", ["acs_type2", "tcp"])
def test_socket_profiles(fabric: str) -> None:
    assert verdict(parse_transport(SOCKET_IB_DISABLED), fabric).status == "ok"
    judged = verdict(parse_transport(IB_GDR), fabric)
    assert judged.failed
    assert judged.messages == (
        f"fabric profile '{fabric}' expects the Socket transport (NCCL_IB_DISABLE=1) but NCCL used IB",
    )


def test_fabric_profiles() -> None:
    assert FABRIC_PROFILES == {
        "erdma": "rdma",
        "infiniband": "rdma",
        "roce": "rdma",
        "acs_type1": "rdma",
        "acs_type2": "socket",
        "tcp": "socket",
    }
    with pytest.raises(ValueError, match="unknown fabric profile"):
        verdict(parse_transport(IB_GDR), "carrier-pigeon")


def test_some_ranks_on_sockets() -> None:
    text = info("Using network IB", "node-01") + info("Using network Socket", "node-02")
    transport = parse_transport(text)
    assert (transport.network, transport.rdma) == ("mixed", False)
    judged = verdict(transport, "infiniband")
    assert judged.failed
    assert "on some ranks (others used IB)" in judged.messages[0]


def test_a_socket_channel_under_using_network_ib_fails() -> None:
    """'Using network IB' names the network NCCL picked; a channel line through NET/Socket is TCP traffic all the
    same (another rank's fallback, another communicator): the IB verdict must not stand on the first line alone."""
    text = (
        info("Using network IB", "node-01")
        + info("Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA", "node-01")
        + info("Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0", "node-02", rank=1)
    )
    transport = parse_transport(text)
    assert transport.all_networks == ["IB", "Socket"]
    assert (transport.network, transport.rdma) == ("mixed", False)
    judged = verdict(transport, "infiniband")
    assert judged.failed
    assert "fell back to the Socket transport (TCP) on some ranks (others used IB)" in judged.messages[0]


def test_a_socket_channel_fails_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same log through nccl-report (the C accelerator reads its channel lines when it is built)."""
    log = tmp_path / "all_reduce.log"
    rows = "".join(
        f"{size:>12} {size // 4:>12}     float     sum      -1    100.0   {size / 100e3:6.2f}   {size / 100e3:6.2f}"
        f"       0    100.0   {size / 100e3:6.2f}   {size / 100e3:6.2f}       0\n"
        for size in (1048576, 2097152)
    )
    log.write_text(
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 1 iters: 1 agg iters: 1 "
        "validation: 1 graph: 0\n#\n# Using devices\n"
        "#  Rank  0 Group  0 Pid   4242 on    node-01 device  0 [0x18] NVIDIA A100-SXM4-80GB\n"
        "#  Rank  1 Group  0 Pid   4243 on    node-02 device  0 [0x18] NVIDIA A100-SXM4-80GB\n"
        + info("Using network IB", "node-01")
        + info("Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0", "node-02", rank=1)
        + "#\n#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)"
        "  (GB/s)  (GB/s)\n" + rows + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 15.7286 \n#\n"
    )
    code = main(["nccl-report", str(log), "--fabric", "infiniband", "--json"])
    out = capsys.readouterr().out
    assert code != ExitCode.OK, out
    transport = json.loads(out)["transport"]
    assert transport["networks"] == ["IB", "Socket"]
    assert transport["verdict"]["status"] == "fail"


def test_external_plugin() -> None:
    text = info("NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)") + info("Using network IBext_v8")
    transport = parse_transport(text)
    assert transport.to_dict()["plugin"] == {
        "result": "loaded",
        "name": "NCCL RDMA Plugin v8",
        "detail": "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)",
    }
    assert verdict(transport, "infiniband").status == "ok"


def test_channel_lines_alone_name_the_network() -> None:
    transport = parse_transport(info("Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0(1)/GDRDMA"))
    assert (transport.network, transport.gdr) == ("IB", "on")


def test_unknown_without_info_lines() -> None:
    judged = verdict(parse_transport("# nThread 1 nGpus 1\n"), "infiniband")
    assert judged.status == "unknown"
    assert judged.messages == ("cannot check the transport: no NCCL INFO lines (run nccl-tests with NCCL_DEBUG=INFO)",)
    assert verdict(parse_transport(info("Bootstrap : Using ib0:10.0.0.1<0>")), "roce").status == "unknown"


def test_mpi_tagged_and_glued_lines() -> None:
    tagged = "[1,1]<stdout>:" + info("Using network IB", "node-02")
    glued = "     1048576        262144     float     sum      -1" + info("Using network Socket")
    transport = parse_transport(tagged + glued)
    assert transport.networks == ["IB", "Socket"]


def test_merge() -> None:
    merged = merge_transports([parse_transport(IB_GDR), parse_transport(ROCE_NO_GDR)])
    assert merged.networks == ["IB"]
    assert [h.name for h in merged.hcas] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert merged.gdr == "mixed"
    assert merged.info_lines == 13
    report = merge_reports([parse(IB_GDR), parse(SOCKET_IB_DISABLED)])
    assert report.transport.network == "mixed"


# -- the corpus -------------------------------------------------------------------------------------------


@needs_corpus
def test_efa_plugin_network() -> None:
    transport = parse_file(CORPUS / "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt").transport
    assert transport.to_dict() == {
        "network": "AWS Libfabric",
        "networks": ["AWS Libfabric"],
        "rdma": True,
        "hcas": [],
        "gdr": "off",
        "nccl_version": "2.12.7",
        "plugin": {
            "result": "loaded",
            "name": "aws-ofi-nccl 1.5.0aws",
            "detail": "NET/OFI Using aws-ofi-nccl 1.5.0aws",
        },
        "socket_interfaces": [],
        "ib_problems": [],
        "env": {"NCCL_SHM_DISABLE": "0"},
        "info_lines": 48,  # 47 INFO lines + the bare "NCCL version" line
    }


@needs_corpus
def test_efa_plugin_inferred_from_network_name() -> None:
    transport = parse_file(CORPUS / "08_allreduce_v2.0-era_v100_16gpu_2node_efa_ncclinfo.txt").transport
    assert (transport.network, transport.plugin_result, transport.plugin) == (
        "AWS Libfabric",
        "loaded",
        "AWS Libfabric",
    )
    assert (transport.nccl_version, transport.gdr, transport.info_lines) == ("2.6.4", "off", 594)


@needs_corpus
def test_silent_socket_fallback_in_corpus() -> None:
    transport = parse_file(CORPUS / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt").transport
    assert (transport.network, transport.rdma, transport.plugin_result) == ("Socket", False, "not_found")
    assert transport.ib_problems == ["Failed to open libibverbs.so[.1]"]
    assert transport.socket_interfaces == ["eth0"]
    assert (transport.nccl_version, transport.info_lines) == ("2.11.4", 38)
    judged = verdict(transport, "infiniband")
    assert judged.failed
    assert judged.messages == (
        "fabric profile 'infiniband' expects RDMA but NCCL fell back to the Socket transport (TCP) "
        "on every rank; cause: Failed to open libibverbs.so[.1]",
    )


@needs_corpus
def test_single_node_socket_log() -> None:
    name = "13_allreduce_v2.13-2.14.0_5090_2gpu_ncclinfo_ncclwarn_testncclfailure.txt"
    transport = parse_file(CORPUS / name).transport
    assert (transport.network, transport.gdr, transport.nccl_version) == ("Socket", None, "2.25.1")
    assert transport.socket_interfaces == ["enp227s0f0", "enxfe1dc2e063ea"]
    assert transport.plugin_detail == "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."
    assert transport.info_lines == 56  # 51 INFO + 5 WARN


@needs_corpus
@pytest.mark.parametrize(
    "name",
    [
        "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt",
        "03_alltoall_fail_sendrecv_v2.17.6_h100_8gpu_2node.txt",
        "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt",
        "07_multi_v2.0-era_v100_12gpu_dgx2_allgather_oob4.txt",
        "14_allreduce_v2.17.8_gh200_8gpu_2node_testcudafailure.txt",
        "16_allreduce_v1.0_p100_8gpu_ncclfailure.txt",
        "20_alltoall_ok_sendrecv_HANG_v2.17.6_h100_2gpu_2node.txt",
        "22_alltoall_v2.0-2.9_a100_8gpu_c0_NA_blank-redop_SANITIZED.txt",
    ],
)
def test_logs_without_nccl_debug(name: str) -> None:
    transport = parse_file(CORPUS / name).transport
    assert (transport.info_lines, transport.network) == (0, None)
    assert verdict(transport, "infiniband").status == "unknown"


@needs_corpus
def test_cli_fabric_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(CORPUS / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt")
    assert main(["nccl-report", "--json", "--fabric", "infiniband", log]) == ExitCode.BELOW_THRESHOLD
    data = json.loads(capsys.readouterr().out)
    assert data["runs"][0]["status"] == "ok"
    assert data["transport"]["verdict"]["status"] == "fail"
    assert main(["nccl-report", "--fabric", "tcp", log]) == 0
    out = capsys.readouterr().out
    assert "verdict (tcp): OK" in out


@needs_corpus
def test_each_log_is_judged_from_its_own_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    """File 10 shows NCCL on sockets, file 05 has no NCCL INFO line (INDEX.md): as two collectives' logs of one
    tcp run, 10's evidence says nothing of 05's, so the verdict is unknown (5), naming 05; 10 alone is ok."""
    socket = str(CORPUS / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt")
    silent = str(CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt")
    assert main(["nccl-report", "--json", "--fabric", "tcp", socket, silent]) == ExitCode.INCOMPLETE
    judged = json.loads(capsys.readouterr().out)["transport"]["verdict"]
    assert judged["status"] == "unknown"
    assert any(m.startswith(f"{silent}: cannot check the transport: no NCCL INFO lines") for m in judged["messages"])
    assert any(m.startswith(f"{socket}: ") for m in judged["messages"])
    # On infiniband, 10's fallback to sockets fails the pair, whatever 05 shows.
    assert main(["nccl-report", "--fabric", "infiniband", silent, socket]) == ExitCode.BELOW_THRESHOLD
    assert "verdict (infiniband): FAIL" in capsys.readouterr().out


def judged_as(status: str, fabric: str) -> TransportVerdict:
    return TransportVerdict(status, fabric, FABRIC_PROFILES[fabric], (f"{status} log",))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("statuses", "fabric", "worst"),
    [
        # test_each_log_is_judged_from_its_own_evidence (and test_bench_report's two collectives): 10 ok, 05 silent
        (("ok", "unknown"), "tcp", "unknown"),
        (("unknown", "fail"), "infiniband", "fail"),  # the same pair on infiniband: 10's fallback fails it
        (("warn",), "roce", "warn"),  # test_warn_transport_is_not_a_pass: RoCE with GPUDirect RDMA off
        (("unknown",), "infiniband", "unknown"),  # test_unknown_transport_is_not_a_pass: file 02
    ],
)  # fmt: skip
def test_the_verdict_over_several_logs_is_their_worst(statuses: tuple[str, ...], fabric: str, worst: str) -> None:
    """The one rule nccl-report (per file) and the bench report (per collective) share; each words the messages."""
    judged = [judged_as(status, fabric) for status in statuses]
    for order in (judged, judged[::-1]):
        combined = combined_verdict(order, ["worded by the caller"])
        assert (combined.status, combined.fabric, combined.expected) == (worst, fabric, FABRIC_PROFILES[fabric])
        # One log's verdict is kept as it is, its own messages; several get the caller's.
        assert combined.messages == (judged[0].messages if len(judged) == 1 else ("worded by the caller",))
    with pytest.raises(ValueError, match="at least one"):
        combined_verdict([], [])


# -- the verdict's exit code: only an ok verdict is a pass --------------------------------------------------


@needs_corpus
def test_unknown_transport_is_not_a_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """File 02 has no NCCL INFO line (INDEX.md): nothing shows the transport, so the verdict proves nothing (5)."""
    log = str(CORPUS / "02_multi_v2.17.8_h100_80gpu_10node_5colls.txt")
    assert main(["nccl-report", "--fabric", "infiniband", log]) == ExitCode.INCOMPLETE
    assert "verdict (infiniband): UNKNOWN" in capsys.readouterr().out
    assert main(["nccl-report", log]) == ExitCode.OK  # every run ok, and no verdict asked for


@needs_corpus
def test_warn_transport_is_not_a_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """File 05's runs are clean (INDEX.md); with RoCE INFO lines whose GPUDirect RDMA is off before its first run,
    that run's verdict warns. Its second run (sendrecv) printed no INFO lines of its own: the first run's lines say
    nothing of it, so the file's verdict is unknown (it was WARN, the first run's evidence standing for both)."""
    log = tmp_path / "roce.log"
    log.write_text(ROCE_NO_GDR + (CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt").read_text())
    assert main(["nccl-report", "--fabric", "roce", str(log)]) == ExitCode.INCOMPLETE
    out = capsys.readouterr().out
    assert "verdict (roce): UNKNOWN" in out
    assert f"{log}: NCCL used IB as fabric profile 'roce' expects" in out and "GPUDirect RDMA is off" in out, out
    assert f"{log}, run 2 (sendrecv): cannot check the transport: no NCCL INFO lines" in out, out
    assert main(["nccl-report", str(log)]) == ExitCode.OK


# -- each profile names the NCCL networks it accepts (rdmaforge.fabrics) ------------------------------------


def efa_with_gdr(tmp_path: Path) -> Path:
    """File 01 (AWS EFA through aws-ofi-nccl) with its channels on GPUDirect RDMA, as the audit made it."""
    text = (CORPUS / "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt").read_text()
    path = tmp_path / "efa_gdr.txt"
    path.write_text(text.replace("via NET/AWS Libfabric/0", "via NET/AWS Libfabric/0/GDRDMA"))
    return path


@needs_corpus
@pytest.mark.parametrize(
    ("fabric", "accepted"),
    [("infiniband", "IB or IBext*"), ("roce", "IB or IBext*"), ("erdma", "IB or AIACC-*"),
     ("acs_type1", "IB, IBext* or AIACC-*")],
)  # fmt: skip
def test_a_foreign_network_fails_an_rdma_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fabric: str, accepted: str
) -> None:
    transport = parse_file(efa_with_gdr(tmp_path)).transport
    assert (transport.network, transport.gdr) == ("AWS Libfabric", "on")
    judged = verdict(transport, fabric)
    assert judged.status == "fail"
    assert judged.messages == (
        f"fabric profile '{fabric}' expects NCCL network {accepted} but NCCL used AWS Libfabric "
        "(net plugin aws-ofi-nccl 1.5.0aws): not the fabric the profile was built for",
    )
    assert main(["nccl-report", "--fabric", fabric, str(tmp_path / "efa_gdr.txt")]) == ExitCode.BELOW_THRESHOLD
    assert f"verdict ({fabric}): FAIL" in capsys.readouterr().out


@needs_corpus
def test_the_efa_plugin_log_is_not_an_ib_pass() -> None:
    """File 08 (EFA, NCCL 2.6.4) names its network only in channel lines: still not InfiniBand."""
    transport = parse_file(CORPUS / "08_allreduce_v2.0-era_v100_16gpu_2node_efa_ncclinfo.txt").transport
    assert verdict(transport, "infiniband").status == "fail"


@pytest.mark.parametrize(
    ("fabric", "network"),
    [("infiniband", "IB"), ("roce", "IB"), ("acs_type1", "IB"), ("erdma", "IB"), ("infiniband", "IBext_v8"),
     ("erdma", "AIACC-2.0-RDMA"), ("erdma", "AIACC-2.0-RDMA-V6"), ("acs_type1", "AIACC-2.0-RDMA")],
)  # fmt: skip
def test_the_networks_each_rdma_profile_accepts(fabric: str, network: str) -> None:
    """IB: NCCL's verbs transport; IBext_v8: nccl-rdma-sharp-plugins; AIACC-2.0-RDMA[-V6]: strings of the AIACC
    2.0.1 library (tests/unit/test_bench_accelerators.py)."""
    assert verdict(parse_transport(info(f"Using network {network}")), fabric).status == "ok"


@pytest.mark.parametrize(
    ("fabric", "network"),
    [("infiniband", "AIACC-2.0-RDMA"), ("roce", "AIACC-2.0-RDMA"), ("erdma", "IBext_v8"), ("infiniband", "ib")],
)
def test_a_network_of_another_fabric_fails(fabric: str, network: str) -> None:
    judged = verdict(parse_transport(info(f"Using network {network}")), fabric)
    assert judged.status == "fail"
    assert f"but NCCL used {network}" in judged.messages[0]


def test_a_foreign_network_on_some_ranks_fails() -> None:
    text = info("Using network IB", "node-01") + info("Using network AWS Libfabric", "node-02")
    judged = verdict(parse_transport(text), "infiniband")
    assert judged.status == "fail"
    assert judged.messages[0].endswith("used AWS Libfabric on some ranks (others used IB): not the fabric the profile "
                                       "was built for")  # fmt: skip


@needs_corpus
@pytest.mark.parametrize("accelerated", [True, False])
def test_each_run_counts_the_info_lines_printed_for_it(accelerated: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log's NCCL INFO lines belong to the run they follow the start of: 01 alone has all of its own; with its
    table run again without them appended (a rerun without NCCL_DEBUG=INFO), the second run has none. The same with
    and without the parser's C accelerator."""
    from rdmaforge.nccl_tests import accel, parse

    if not accelerated:
        monkeypatch.setattr(accel, "fast", None)

    text = (CORPUS / "01_allreduce_v2.13_efa_2node_mpirun_ncclinfo.txt").read_text()
    own = sum(1 for line in text.splitlines() if "NCCL INFO" in line)  # "NCCL version" is no INFO line
    (alone,) = parse(text).runs
    assert own > 0 and alone.info_lines == own
    rerun = "\n".join(line for line in text.splitlines() if "NCCL INFO" not in line) + "\n"
    first, second = parse(text + rerun).runs
    assert (first.info_lines, second.info_lines) == (own, 0)



@needs_corpus
@pytest.mark.parametrize("accelerated", [True, False])
def test_nccl_words_quoted_in_a_comment_or_a_shell_trace_are_no_evidence(
    accelerated: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review round 34a: 10 (a socket run) with its NCCL INFO lines taken out and a comment quoting one line of
    NCCL's, prefix and all, or a set -x trace of a grep for it: nccl-report --fabric infiniband said OK, "NCCL used
    IB", exit 0. Only a line that is NCCL's own counts; the same line behind a launcher's tag still does."""
    from rdmaforge.nccl_tests import accel

    if not accelerated:
        monkeypatch.setattr(accel, "fast", None)
    text = (CORPUS / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt").read_text()
    bare = "\n".join(line for line in text.splitlines() if "NCCL INFO" not in line) + "\n"
    said = "ip-10-0-139-244:1465:1465 [0] NCCL INFO Using network IB"
    quoted = tmp_path / "quoted.log"
    quoted.write_text(f"#   Note: {said}\n#{said}\n++ echo '{said}'\n"
                      f"+ grep -q 'NCCL INFO Using network IB' log && echo ok\n{bare}")  # fmt: skip
    assert main(["nccl-report", "--fabric", "infiniband", str(quoted)]) == ExitCode.INCOMPLETE
    out = capsys.readouterr().out
    assert "verdict (infiniband): UNKNOWN" in out and "network IB" not in out, out[-2000:]
    tagged = tmp_path / "tagged.log"  # torchrun --tee's tag before NCCL's own line: NCCL speaking
    tagged.write_text(f"[default0]:{said}\n{bare}")
    main(["nccl-report", "--fabric", "infiniband", str(tagged)])
    assert "transport: network IB" in capsys.readouterr().out


@needs_corpus
def test_a_log_whose_rank_lines_name_no_host_cannot_pass_the_fabric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review round 34a: a log without its '#  Rank' lines was judged from its INFO lines alone, and passed though
    nothing showed its ranks ran on two nodes (NCCL names its network on one node too). 10 (two nodes over sockets)
    passes --fabric tcp; without its Rank lines it is unknown (exit 5), as a log of one node's ranks is."""
    text = (CORPUS / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt").read_text()
    whole, unplaced = tmp_path / "whole.log", tmp_path / "unplaced.log"
    whole.write_text(text)
    unplaced.write_text("\n".join(line for line in text.splitlines() if not line.startswith("#   Rank")) + "\n")
    assert main(["nccl-report", "--fabric", "tcp", str(whole)]) == ExitCode.OK
    capsys.readouterr()
    assert main(["nccl-report", "--fabric", "tcp", str(unplaced)]) == ExitCode.INCOMPLETE
    out = capsys.readouterr().out
    assert "verdict (tcp): UNKNOWN" in out and "'#  Rank' lines name no host" in out, out[-1500:]
    # Review round 35: a run of one node's ranks before it (a spliced log) made the log pass again: no run of it
    # shows two nodes either.
    lines = text.splitlines()
    first_host = next(line for line in lines if line.startswith("#   Rank  0"))
    one_node = "\n".join(line for line in lines if not line.startswith("#   Rank  1")) + "\n"
    assert first_host in one_node
    mixed = tmp_path / "mixed.log"
    mixed.write_text(one_node + unplaced.read_text())
    assert main(["nccl-report", "--fabric", "tcp", str(mixed)]) == ExitCode.INCOMPLETE
    assert "verdict (tcp): UNKNOWN" in capsys.readouterr().out
