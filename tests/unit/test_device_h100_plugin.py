"""The real AIACC net plugin loaded by real NCCL on one H100 (tests/data/device-h100-plugin, see its README).

Expected values come from the samples' other witnesses: NCCL's own lines (the version and API it printed), the
plugin's WARN line, torch's report of the crash, nccl-tests' command line (``-b 8 -e 128M -f 2``) and the machine's
Python as python.txt printed it.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import recap, same_run_as_text_and_json
from test_device_h100_toolkit import settings as toolkit_settings

from rdmaforge.bench import accelerators
from rdmaforge.bench.e2e import parse_output
from rdmaforge.nccl_tests import parse_file
from rdmaforge.nccl_tests.transport import parse_transport

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "device-h100-plugin"
#: NCCL's line when it has dlopened a net plugin and found its ncclNetPlugin_vN symbol.
LOADED = re.compile(r"NET/Plugin: Loaded net plugin (.+) \(v(\d+)\)$", re.M)


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def test_nccl_2_29_loaded_the_plugin_through_v6_and_its_init_failed_so_nccl_used_sockets() -> None:
    text = sample("all_reduce.txt")
    (name, api), *_ = LOADED.findall(text)
    assert (name, api) == ("NCCL RDMA Plugin V6", "6")
    assert "AIACC LICENSE CHECK FAILED" in text
    transport = parse_transport(text)
    assert transport.nccl_version == "2.29.7"
    assert transport.plugin == name and transport.plugin_result == "init_failed"
    assert transport.plugin_detail == f"Failed to initialize NET plugin {name}"
    assert transport.network == "Socket"


def test_the_file_parser_reads_the_same_transport_and_its_text_and_json_agree() -> None:
    parsed = parse_file(SAMPLES / "all_reduce.txt")
    assert parsed.transport.plugin_result == "init_failed" and parsed.transport.network == "Socket"
    sizes = [8 * 2**i for i in range(25)]  # -b 8 -e 128M -f 2
    text, as_json = same_run_as_text_and_json(SAMPLES / "all_reduce.txt", SAMPLES / "all_reduce.json", sizes)
    assert text.ranks == 1 and text.status == "ok" and as_json.nccl_version == "2.29.7"


def test_the_training_with_torchs_nccl_crashed_after_the_failed_init_and_reports_no_result() -> None:
    text = sample("torch_ddp.txt")
    assert "Signal 11 (SIGSEGV)" in text and "Get License failed!" in text
    transport = parse_transport(text)
    assert transport.nccl_version == "2.28.9" and transport.plugin_result == "init_failed"
    assert parse_output(text) is None


def test_the_e2e_verdict_names_the_failed_init_and_the_licence_check_instead_of_passing() -> None:
    for log in ("all_reduce.txt", "torch_ddp.txt"):
        logs = [accelerators.TrainingLog("N-node", log, sample(log))]
        judged, detail = accelerators.judge_net_plugin("aiacc", "erdma", logs, "nccl")
        assert judged.status == "fail", judged.reason
        assert "did not initialise ('Failed to initialize NET plugin NCCL RDMA Plugin V6')" in judged.reason
        assert "Alibaba Cloud GPU instance type" in judged.reason
        assert detail["plugin_result"] == "init_failed"
    assert "NCCL used Socket" in accelerators.judge_net_plugin(
        "aiacc", "erdma", [accelerators.TrainingLog("N-node", "n.log", sample("all_reduce.txt"))], "nccl"
    )[0].reason


def test_pip_could_not_build_the_sdist_on_python_3_12_and_its_hook_wrote_ld_so_entries_anyway() -> None:
    # Why nccl_plugin no longer runs pip (roles/nccl_plugin/tasks/aiacc_pypi.yml).
    python = sample("python.txt")
    assert "Python 3.12.3" in python and "pip 24.0" in python
    assert "No module named 'setuptools'" in python  # a new venv there has no setuptools
    assert "No module named 'pip'" in sample("plugin1.txt")
    hook_lines = [line for line in sample("check.txt").splitlines() if line.startswith("/etc/ld.so.conf.d/aiacc_")]
    assert len(hook_lines) == 5 and all("aiacc-venv" in line for line in hook_lines)


ROLE = SAMPLES / "role"


def test_the_role_without_pip_installed_and_registered_the_plugin_on_python_3_12_and_a_rerun_changed_nothing() -> None:
    first, second = (recap((ROLE / f"plugin{n}.txt").read_text())["gpu-node"] for n in (1, 2))
    assert first["failed"] == 0 and first["changed"] > 0
    assert second["failed"] == 0 and second["changed"] == 0
    settings = toolkit_settings(ROLE)
    link = f"{settings['nccl_plugin_prefix']}/lib/libnccl-net.so"
    check = (ROLE / "check.txt").read_text()
    assert f"libnccl-net.so (libc6,x86-64) => {link}" in check  # ld.so resolves the role's link
    assert "aiacc_nccl_plugin.conf" not in check  # no entry from the sdist's install hook
    warning = " ".join((ROLE / "plugin1.txt").read_text().split())
    assert "this NCCL is 2.29.7. It will load the plugin through net API v6 (common: v6)" in warning


def test_nccl_found_the_plugin_through_ld_so_and_loaded_it_through_the_version_the_role_predicted() -> None:
    text = (ROLE / "all_reduce.txt").read_text()
    settings = toolkit_settings(ROLE)
    assert f"Successfully loaded external network plugin {settings['nccl_plugin_prefix']}/lib/libnccl-net.so" in text
    (_, api), *_ = LOADED.findall(text)
    predicted = re.search(r"through net API v(\d+)", (ROLE / "plugin1.txt").read_text())
    assert predicted is not None and predicted.group(1) == api
    transport = parse_transport(text)
    assert transport.plugin_result == "init_failed" and transport.network == "Socket"
