"""Issue 16 on the lab: the NCCL/plugin pairing decided from the binaries - the real libnccl built on the lab
(NCCL 2.29.7, whose loader knows net API v6..v11) and the real AIACC 2.0.1 plugin (exports v2..v6) - and a
plugin NCCL cannot load refused before it is linked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LabHandle, assert_no_changes, recap

pytestmark = pytest.mark.lab

PLUGIN_LINK = "/opt/rdmaforge/nccl-plugin/lib/libnccl-net.so"
H100_LOG = Path(__file__).resolve().parents[1] / "data" / "device-h100-plugin" / "all_reduce.txt"


def test_aiacc_with_nccl_2_29_is_loaded_through_v6_with_a_warning(converged: LabHandle) -> None:
    node = next(iter(converged.nodes))
    proc = converged.playbook("nccl_plugin.yml", "--limit", node)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert_no_changes(proc.stdout)
    out = " ".join(proc.stdout.split())
    # Seed 000 documents AIACC for NCCL 2.8.x-2.16.x; the cluster's build is 2.29.7.
    assert "is documented for NCCL 2.8-2.16; this NCCL is 2.29.7" in out, out[-3000:]
    # The version read from the lab's binaries is the one NCCL 2.29.7 itself reported loading the same plugin
    # through on a real H100 (tests/data/device-h100-plugin).
    on_gpu = re.search(r"NCCL INFO NET/Plugin: Loaded net plugin .+ \(v(\d+)\)$", H100_LOG.read_text(), re.M)
    assert on_gpu is not None and "NCCL version 2.29.7" in H100_LOG.read_text()
    assert f"through net API v{on_gpu.group(1)} (common: v{on_gpu.group(1)})" in out


def test_a_plugin_without_a_common_api_version_is_refused_before_any_change(
    converged: LabHandle, tmp_path: Path
) -> None:
    node = next(iter(converged.nodes))
    # A test double for a plugin built against an older NCCL: it exports only ncclNetPlugin_v5.
    source = tmp_path / "fake_plugin_v5.c"
    source.write_text('struct fake_net { const char *name; };\nstruct fake_net ncclNetPlugin_v5 = {"fake-v5"};\n')
    library = tmp_path / "libfake-net-v5-only.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    remote = "/root/libfake-net-v5-only.so"
    scp = [
        "scp", "-i", str(converged.ssh_key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={converged.known_hosts}", str(library), f"root@{converged.nodes[node]}:{remote}",
    ]  # fmt: skip
    subprocess.run(scp, check=True, capture_output=True, timeout=60)
    before = converged.ssh(node, f"readlink {PLUGIN_LINK}").stdout.strip()
    try:
        proc = converged.playbook(
            "nccl_plugin.yml", "--limit", node,
            "-e", "nccl_plugin_provider=harp", "-e", f"nccl_plugin_harp_lib={remote}",
        )  # fmt: skip
        out = " ".join(proc.stdout.split())
        assert proc.returncode != 0, out[-3000:]
        assert (
            "loads net plugin API v6, v7, v8, v9, v10, v11, but /root/libfake-net-v5-only.so exports v5: "
            "no common version" in out
        ), out[-3000:]
        assert "Nothing was linked or registered" in out
        assert recap(proc.stdout)[node]["changed"] == 0
        assert converged.ssh(node, f"readlink {PLUGIN_LINK}").stdout.strip() == before
    finally:
        converged.ssh(node, f"rm -f {remote}", check=False)
