"""The node_probe module, run for real by ``ansible localhost``: preflight's and doctor's node probe in one module run.

A fake sysfs tree (one NIC, one RDMA device, one NVIDIA GPU on the PCI bus), a fake ``ip`` and fake GPU tools
answering what a real H100 answered (tests/data/device-h100/probe.txt) stand in for a GPU node. The values expected
are those fakes' own; the three modules node_probe stands for (rdma_devices, nic_facts, gpu_topology) are tested
against real captures in their own test files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import PY38, run_module

PROBE = (PROJECT_ROOT / "tests" / "data" / "device-h100" / "probe.txt").read_text()


def section(name: str) -> str:
    return PROBE.split(f"== {name}\n", 1)[1].split("\n== ", 1)[0]


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """tmp_path/sys: NIC eth9, RDMA device mlx5_0 (port 1 active at 200 Gb/s), an NVIDIA 3D controller at
    0000:17:00.0; tmp_path/ip: iproute2 answering with eth9's address and the default route through it."""
    sys_root = tmp_path / "sys"
    nic = sys_root / "class" / "net" / "eth9"
    nic.mkdir(parents=True)
    for name, value in (("ifindex", "2"), ("address", "02:00:00:00:00:09"), ("mtu", "9000"), ("operstate", "up")):
        (nic / name).write_text(value + "\n")
    (sys_root / "class" / "net" / "lo").mkdir()
    port = sys_root / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    for name, value in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("link_layer", "InfiniBand"),
                        ("rate", "200 Gb/sec (4X HDR)")):  # fmt: skip
        (port / name).write_text(value + "\n")
    gpu = sys_root / "bus" / "pci" / "devices" / "0000:17:00.0"
    gpu.mkdir(parents=True)
    (gpu / "vendor").write_text("0x10de\n")
    (gpu / "class").write_text("0x030200\n")
    addr = [{"ifindex": 2, "ifname": "eth9", "addr_info": [{"family": "inet", "local": "10.9.0.2", "prefixlen": 24}]}]
    (tmp_path / "addr.json").write_text(json.dumps(addr))
    (tmp_path / "route.json").write_text('[{"dst":"default","gateway":"10.9.0.1","dev":"eth9","flags":[]}]')
    executable(tmp_path / "ip", f"""#!/bin/sh
case "$*" in
  "-j addr show") cat "{tmp_path / "addr.json"}" ;;
  "-j route show default") cat "{tmp_path / "route.json"}" ;;
  *) exit 2 ;;
esac
""")
    return tmp_path


def h100_driver(directory: Path) -> Path:
    """nvidia-smi answering -L and the compute capability query as the H100 did; anything else fails."""
    directory.mkdir()
    (directory / "L.txt").write_text(section("nvidia-smi -L"))
    (directory / "caps.txt").write_text("9.0\n")  # the compute_cap column of the recorded --query-gpu CSV
    return executable(directory / "nvidia-smi", f"""#!/bin/sh
case "$*" in
  "-L") cat "{directory / "L.txt"}" ;;
  "--query-gpu=compute_cap --format=csv,noheader") cat "{directory / "caps.txt"}" ;;
  *) exit 9 ;;
esac
""")


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a real nvidia-smi would answer topo -m here")
def test_one_run_reads_the_gpu_tools_rdma_devices_nics_rails_and_free_space(node: Path) -> None:
    caps = section("nvidia-smi --query-gpu").splitlines()
    assert caps[1].split(", ")[caps[0].split(", ").index("compute_cap")] == "9.0"  # what caps.txt says
    driver = h100_driver(node / "driver")
    executable(node / "driver" / "lspci", "#!/bin/sh\nexit 7\n")  # found, and not asked: nvidia-smi answers
    args = {"tool_dirs": [str(node / "driver"), str(node / "nowhere")], "sys_root": str(node / "sys"),
            "ip_path": str(node / "ip"), "df_paths": [str(node)]}  # fmt: skip
    run = run_module("node_probe", args, "--check", python=PY38 if PY38.exists() else None)
    assert run.rc == 0, run.result
    result = run.result
    assert result["changed"] is False
    assert result["tool_files"] == [str(node / "driver" / "lspci"), str(driver)]
    assert result["tools"] == {"nvidia_smi": str(driver), "lspci": str(node / "driver" / "lspci")}
    assert result["nvidia_smi"] == {"cmd": [str(driver), "-L"], "rc": 0, "stdout": section("nvidia-smi -L").rstrip(),
                                    "stderr": ""}  # fmt: skip
    assert (result["compute_caps"]["cmd"][1:], result["compute_caps"]["stdout"]) == (
        ["--query-gpu=compute_cap", "--format=csv,noheader"],
        "9.0",
    )
    assert result["lspci"]["skipped"] is True
    # df on the same path as the shell runs it: the same filesystem and mount point (its free space moves)
    df = subprocess.run(["df", "-P", "-k", str(node)], capture_output=True, text=True, check=True).stdout
    assert result["df"]["rc"] == 0 and result["df"]["cmd"][1:] == ["-P", "-k", str(node)]
    assert [(line.split()[0], line.split()[-1]) for line in result["df"]["stdout"].splitlines()] == [
        (line.split()[0], line.split()[-1]) for line in df.splitlines()
    ]
    # nvidia-smi is not on PATH, so the rails come from the fake PCI tree: a GPU, and an RDMA device not linked to it
    assert result["topology"]["source"] == "sysfs" and result["topology"]["gpus"] == ["GPU0"]
    assert result["sysfs_gpus"] == 1
    assert [device["name"] for device in result["rdma"]["devices"]] == ["mlx5_0"]
    (rdma_port,) = result["rdma"]["devices"][0]["ports"]
    assert (rdma_port["state"], rdma_port["rate_gbps"]) == ("PORT_ACTIVE", 200.0)
    assert result["rdma"]["source"] == "sysfs"
    (nic,) = result["nics"]["nics"]
    assert (nic["name"], nic["mac"], nic["mtu"], nic["default_route"]) == ("eth9", "02:00:00:00:00:09", 9000, True)
    assert nic["ipv4"][0]["address"] == "10.9.0.2" and result["nics"]["default_route_interface"] == "eth9"
    assert result["ansible_facts"] == {
        "rdmaforge_topology": result["topology"],
        "rdma_devices": result["rdma"]["devices"],
        "nics": result["nics"]["nics"],
        "default_route_interface": "eth9",
    }


def test_without_nvidia_smi_lspci_answers_and_a_nic_probe_that_fails_fails_nothing(node: Path) -> None:
    tools = node / "tools"
    tools.mkdir()
    lspci = executable(tools / "lspci", '#!/bin/sh\necho "17:00.0 \\"0302\\" \\"10de\\" \\"2330\\""\n')
    (tools / "nvidia-smi").write_text("")  # not executable: a broken driver install answers nothing
    # iproute2 older than 4.14 (no -j): not the inventory's mistake, so the node is not failed
    old_ip = executable(node / "old-ip", "#!/bin/sh\necho 'Option \"-j\" is unknown, try \"ip -help\".' >&2\n"
                                         "exit 255\n")
    run = run_module("node_probe", {"tool_dirs": [str(tools)], "sys_root": str(node / "sys"),
                                    "ip_path": str(old_ip)})  # fmt: skip
    assert run.rc == 0, run.result
    result = run.result
    assert result["nvidia_smi"]["rc"] != 0 and result["compute_caps"]["skipped"] is True
    assert result["lspci"] == {"cmd": [str(lspci), "-n", "-mm"], "rc": 0, "stdout": '17:00.0 "0302" "10de" "2330"',
                               "stderr": ""}  # fmt: skip
    assert result["df"]["skipped"] is True
    # nic_facts' own failure, kept for rdmaforge_node.nics_error; the node is not failed and has no NIC facts
    assert result["nics"] == {"failed": True, "msg": f"{old_ip} -j addr show failed with exit status 255: Option "
                              '"-j" is unknown, try "ip -help". (JSON output needs iproute2 4.14 or later)'}
    assert sorted(result["ansible_facts"]) == ["rdma_devices", "rdmaforge_topology"]


def hanging_tool(path: Path) -> tuple[Path, Path]:
    """A tool that never answers, with a part the kill cannot reach (the stand-in for a process stuck in the kernel,
    which SIGKILL does not end): a child in a session of its own that keeps the tool's stdout open. Returns the tool
    and the file the unkillable part writes its pid to (the test ends it)."""
    stuck = path.parent / (path.name + ".stuck-pid")
    executable(path, f"""#!/bin/sh
echo "$*" >> "{path}.calls"
setsid sh -c 'echo $$ > "{stuck}"; exec sleep 3600' &
exec sleep 3600
""")
    return path, stuck


def end_stuck(stuck: Path) -> None:
    if stuck.exists() and stuck.read_text().strip():
        subprocess.run(["kill", "-9", stuck.read_text().strip()], check=False)


def test_a_gpu_tool_that_never_answers_is_killed_at_the_deadline_and_read_as_failing(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvidia-smi on a GPU that fell off the bus hangs while sshd answers: before command_timeout the probe, its
    task, the run and the inventory's lock waited for ever (run_module's 600 s guard ends this test then)."""
    tools = node / "tools"
    tools.mkdir()
    _, stuck = hanging_tool(tools / "nvidia-smi")
    executable(tools / "lspci", '#!/bin/sh\necho "17:00.0 \\"0302\\" \\"10de\\" \\"2330\\""\n')
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")  # where the rail map looks for nvidia-smi too
    try:
        run = run_module("node_probe", {"tool_dirs": [str(tools)], "sys_root": str(node / "sys"),
                                        "ip_path": str(node / "ip"), "command_timeout": 2})  # fmt: skip
    finally:
        end_stuck(stuck)
    assert run.rc == 0, run.result
    result = run.result
    assert result["nvidia_smi"] == {"cmd": [str(tools / "nvidia-smi"), "-L"], "rc": 124, "stdout": "",
                                    "stderr": f"{tools / 'nvidia-smi'} did not answer within 2 s (killed)"}  # fmt: skip
    # read as a driver that does not answer: lspci is asked, and its GPU counted
    assert result["compute_caps"]["skipped"] is True
    assert result["lspci"]["rc"] == 0 and result["lspci"]["stdout"] == '17:00.0 "0302" "10de" "2330"'
    (nic,) = result["nics"]["nics"]  # the other probes went on
    assert nic["name"] == "eth9"
    # asked once: the rail map's nvidia-smi topo -m is not waited for again, the PCI tree answers
    assert (tools / "nvidia-smi.calls").read_text() == "-L\n"
    assert result["topology"]["source"] == "sysfs"


def test_a_command_timeout_below_one_second_is_refused(node: Path) -> None:
    run = run_module("node_probe", {"sys_root": str(node / "sys"), "command_timeout": 0})
    assert run.rc != 0
    assert run.result["msg"] == "command_timeout must be a whole number of seconds, 1 or more; got 0"


def test_an_ip_path_that_is_not_an_executable_is_named_apart(node: Path) -> None:
    """Review round 37c, left open then: a typo in preflight_ip_path was read as a node without iproute2, so the
    probe succeeded with no NIC list and only the checks needing NICs (if any) said anything. It is named apart
    now, for preflight to refuse with the settings (tests/inventory_cases.py, ip-path-typo), not failed here: a
    failed probe would stop that node alone, before the settings gate that stops every node."""
    run = run_module("node_probe", {"sys_root": str(node / "sys"), "ip_path": str(node / "no-ip")})
    assert run.rc == 0, run.result
    said = f"ip_path={node / 'no-ip'} is not an executable file"
    assert run.result["ip_path_problem"] == said and run.result["nics"] == {"failed": True, "msg": said}
    fine = run_module("node_probe", {"sys_root": str(node / "sys"), "ip_path": str(node / "ip")})
    assert fine.rc == 0 and fine.result["ip_path_problem"] is None, fine.result
