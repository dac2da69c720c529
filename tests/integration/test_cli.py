"""Issue 9 on the lab: `rdmaforge provision|verify|doctor|bench|report` for real, and their exit codes for induced
failures: a broken package on one node (2), a node's sshd stopped (3), an MTU
changed on one node (doctor flags it), a node that lost its converged files (verify fails). Every test restores
what it changed: the other tests of the session share the lab."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rdmaforge.lab.node import ssh_answers
from rdmaforge.lab.spec import node_spec
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LAB_NICS, LabHandle, gate_decision

pytestmark = pytest.mark.lab

#: How long a stopped sshd stays down at most: the node's own timer starts it again, so a test killed mid-way still
#: leaves a working lab behind (a test that ends starts it at once, through the lab's console).
SSH_BACK_AFTER = 900


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


def cli(runs: Path | None, *args: str, timeout: int = 1800) -> subprocess.CompletedProcess[str]:
    """`rdmaforge ARGS [--runs-dir RUNS]` as a user runs it (its own process, its exit code, its output)."""
    argv = [sys.executable, "-m", "rdmaforge.cli", *args, *(["--runs-dir", str(runs)] if runs else [])]
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout)
    proc.stdout += proc.stderr
    return proc


def run_dir_of(output: str) -> Path:
    return Path(re.findall(r"; artifacts: (\S+)$", output, re.M)[-1])


def table_rows(output: str, names: list[str]) -> dict[str, list[str]]:
    """Rows of the tables printed at the end, by their first cell (the last table wins)."""
    rows: dict[str, list[str]] = {}
    for line in output.splitlines():
        cells = line.split()
        if cells and cells[0] in names:
            rows[cells[0]] = cells[1:]
    return rows


@pytest.fixture
def victim(converged: LabHandle) -> str:
    """The node a test breaks (the last: the first is the NCCL builder)."""
    return list(converged.nodes)[-1]


def test_provision_converges_the_lab_and_exits_0(converged: LabHandle, runs: Path, tmp_path: Path) -> None:
    junit_path = tmp_path / "provision.xml"
    proc = cli(runs, "provision", "-i", str(converged.inventory), "--junit", str(junit_path))
    assert proc.returncode == ExitCode.OK, proc.stdout[-6000:]
    assert "PLAY [" in proc.stdout and "TASK [" in proc.stdout  # live progress: plain lines, not a terminal
    run_dir = run_dir_of(proc.stdout)
    recap = json.loads((run_dir / "recap.json").read_text())
    # Every node, and localhost (preflight's inventory checks run there).
    assert set(recap["hosts"]) == {*converged.nodes, "localhost"}
    # The CLI drives the same site.yml: a converged lab stays unchanged (the README's idempotence guarantee).
    changed = {host: counts["changed"] for host, counts in recap["hosts"].items()}
    assert changed == dict.fromkeys(recap["hosts"], 0), proc.stdout[-4000:]
    assert list((run_dir / "ansible" / "job_events").glob("*.json")) and (run_dir / "ansible" / "stdout").is_file()
    assert not (run_dir / "env").exists()
    suite = ET.parse(junit_path).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == str(len(recap["hosts"])) and suite.get("failures") == "0"
    # The drift check CI runs: nothing would change on a converged lab, so it passes.
    check = cli(runs, "provision", "-i", str(converged.inventory), "--check", "--fail-on-drift")
    assert check.returncode == ExitCode.OK, check.stdout[-6000:]
    checked = json.loads((run_dir_of(check.stdout) / "recap.json").read_text())
    assert checked["would_change"] == [] and {r["status"] for r in checked["hosts"].values()} == {"ok"}, checked


def test_verify_passes_on_the_converged_lab(converged: LabHandle, runs: Path) -> None:
    proc = cli(runs, "verify", "-i", str(converged.inventory))
    assert proc.returncode == ExitCode.OK, proc.stdout[-4000:]
    rows = table_rows(proc.stdout, list(converged.nodes))
    assert set(rows) == set(converged.nodes)
    # tests/infra per node: 12 node-state + 3 cluster + 2 tuning. The lab inventory accepts its memlock
    # (doctor_accept: the nodes share the controller's limits) and requires no active RDMA port (it has none), so
    # those two are skipped, with the reasons; with no active port there is no rate to judge either, and eRDMA names
    # no link layer to judge the ports' by.
    assert all(cells == ["13", "0", "4", "pass"] for cells in rows.values()), rows
    # the skips per node are named below the table, each with its nodes and reason
    named = proc.stdout[proc.stdout.index("skipped (not judged):"):].splitlines()
    ports = [line for line in named if line.startswith("  test_rdma_ports_active on ")]
    assert len(ports) == 1 and "rdma_require_active_ports is false" in ports[0], named
    assert all(node in ports[0].split(":")[0] for node in converged.nodes), ports
    rates = [line for line in named if line.startswith("  test_rdma_port_rates on ")]
    assert len(rates) == 1 and "not judged: port rates: no active" in rates[0], named
    junit_xml = (run_dir_of(proc.stdout) / "verify" / "junit.xml").read_text()
    assert junit_xml.count("accepted by the inventory (doctor_accept)") >= 2 * len(converged.nodes)
    port_cases = [case for case in ET.fromstring(junit_xml).iter("testcase")
                  if case.get("name", "").startswith("test_rdma_ports_active[")]  # fmt: skip
    assert len(port_cases) == len(converged.nodes)
    for case in port_cases:  # skipped, and saying why: the lab requires no active RDMA port, it has none
        skipped = case.find("skipped")
        assert skipped is not None and "rdma_require_active_ports is false" in (skipped.get("message") or ""), (
            ET.tostring(case, encoding="unicode")
        )


@pytest.fixture
def unconverged(converged: LabHandle, victim: str) -> Iterator[str]:
    """One node without its NCCL settings and memlock drop-in, as before a converge; put back afterwards."""
    moved = ["/etc/nccl.conf", "/etc/security/limits.d/90-rdmaforge-memlock.conf"]
    converged.ssh(victim, " && ".join(f"mv {path} {path}.rdmaforge-test" for path in moved))
    try:
        yield victim
    finally:
        converged.ssh(victim, " ; ".join(f"mv {path}.rdmaforge-test {path}" for path in moved))


def test_verify_fails_on_a_node_that_is_not_converged(converged: LabHandle, runs: Path, unconverged: str) -> None:
    proc = cli(runs, "verify", "-i", str(converged.inventory))
    assert proc.returncode == ExitCode.HOST_FAILED, proc.stdout[-4000:]
    rows = table_rows(proc.stdout, list(converged.nodes))
    # failed, skipped, status (the login's memlock test is skipped in the lab: an accepted deviation)
    assert rows[unconverged][1] == "2" and rows[unconverged][-1] == "FAIL" and rows[unconverged][0] != "0"
    assert all(cells[-1] == "pass" for node, cells in rows.items() if node != unconverged), rows
    assert f"  {unconverged}: test_nccl_conf_holds_the_profile: " in proc.stdout
    assert f"  {unconverged}: test_memlock_drop_in: " in proc.stdout


def in_netns(node: str, command: str) -> str:
    """Run ``command`` in a lab node's network namespace from the controller: a node has no CAP_NET_ADMIN."""
    netns = node_spec(int(node.removeprefix("node")), LAB_NICS).netns
    argv = ["ip", "netns", "exec", netns, "sh", "-c", command]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


@pytest.fixture
def odd_mtu(converged: LabHandle, victim: str) -> Iterator[tuple[str, int]]:
    """One node's second NIC (the lab has eth1 on every node) 100 bytes below its MTU; restored afterwards."""
    before = int(in_netns(victim, "cat /sys/class/net/eth1/mtu"))
    in_netns(victim, f"ip link set eth1 mtu {before - 100}")
    try:
        yield victim, before - 100
    finally:
        in_netns(victim, f"ip link set eth1 mtu {before}")


def test_doctor_is_healthy_on_the_converged_lab(converged: LabHandle, runs: Path) -> None:
    proc = cli(runs, "doctor", "-i", str(converged.inventory))
    assert proc.returncode == ExitCode.OK, proc.stdout[-4000:]
    # Healthy with the lab's accepted deviations (memlock, RDMA devices, huge pages): test_doctor_expectations.py
    assert f"healthy: {len(converged.nodes)} node(s) meet their inventory's expectations and agree" in proc.stdout
    recap = json.loads((run_dir_of(proc.stdout) / "recap.json").read_text())
    assert all(r["changed"] == 0 for r in recap["hosts"].values())  # read-only
    assert {row["nccl"] for row in recap["rows"].values()} != {"none"}  # the converged NCCL build is seen
    # ENIs: the secondary NICs (eth1..), not eth0, which carries the default route
    assert all(row["enis"] == str(LAB_NICS) and row["gpus"] == "0" for row in recap["rows"].values())


def test_doctor_flags_the_node_with_a_different_mtu(converged: LabHandle, runs: Path, odd_mtu: tuple[str, int]) -> None:
    node, mtu = odd_mtu
    proc = cli(runs, "doctor", "-i", str(converged.inventory))
    assert proc.returncode == ExitCode.UNHEALTHY, proc.stdout[-4000:]
    recap = json.loads((run_dir_of(proc.stdout) / "recap.json").read_text())
    assert [(f["host"], f["column"]) for f in recap["findings"]] == [(node, "mtu")]  # skew, the second check
    finding = recap["findings"][0]
    assert f"eth1={mtu}" in finding["value"] and str(mtu) not in finding["expected"]
    assert f"  {node}: MTU is '{finding['value']}' where {len(converged.nodes) - 1} of {len(converged.nodes)} " in (
        proc.stdout
    )


@pytest.fixture
def broken_package(converged: LabHandle, victim: str) -> Iterator[str]:
    """ibverbs-utils (a package rdma_core installs) removed and pinned away, so apt cannot install it."""
    pin = "/etc/apt/preferences.d/rdmaforge-test-broken"
    pinned = r"Package: ibverbs-utils\nPin: release *\nPin-Priority: -1\n"
    converged.ssh(
        victim, f"DEBIAN_FRONTEND=noninteractive apt-get remove -y -q ibverbs-utils && printf '{pinned}' > {pin}"
    )
    try:
        yield victim
    finally:
        converged.ssh(victim, f"rm -f {pin} && DEBIAN_FRONTEND=noninteractive apt-get install -y -q ibverbs-utils")


def test_a_broken_package_on_one_node_exits_2(
    converged: LabHandle, runs: Path, broken_package: str, tmp_path: Path
) -> None:
    junit_path = tmp_path / "broken.xml"
    proc = cli(runs, "provision", "-i", str(converged.inventory), "--limit", broken_package, "--junit", str(junit_path))
    assert proc.returncode == ExitCode.HOST_FAILED, proc.stdout[-6000:]
    assert f"  FAILED {broken_package}: " in proc.stdout and "ibverbs-utils" in proc.stdout
    assert table_rows(proc.stdout, [broken_package])[broken_package][-1] == "FAILED"
    assert ET.parse(junit_path).getroot().find(f".//testcase[@name='{broken_package}']/failure") is not None


@pytest.fixture
def sshd_stopped(converged: LabHandle, victim: str) -> Iterator[str]:
    """sshd stopped on one node and every SSH session to it cut (Ansible's ControlPersist masters included).

    Nothing can reach the node to start it again, so the node does it itself: a systemd timer set first.
    """
    address = converged.nodes[victim]
    converged.ssh(victim, f"systemd-run --quiet --unit=rdmaforge-test-ssh-back --on-active={SSH_BACK_AFTER} "
                          "/usr/bin/systemctl start ssh.service")  # fmt: skip
    # This very session dies with the others (pkill): its exit status is 255.
    stop = "systemctl stop ssh.service; systemctl stop ssh.socket 2>/dev/null; pkill -x sshd-session; pkill -x sshd"
    converged.ssh(victim, stop, check=False)
    assert not ssh_answers(address)
    try:
        yield victim
    finally:
        back = converged.console(victim, "systemctl start ssh.service && systemctl stop rdmaforge-test-ssh-back.timer")
        assert back.returncode == 0, back.stdout + back.stderr
        deadline = time.monotonic() + 120
        while not ssh_answers(address) and time.monotonic() < deadline:
            time.sleep(2)
        assert ssh_answers(address), f"sshd on {victim} did not come back"


def test_a_node_with_sshd_stopped_exits_3(converged: LabHandle, runs: Path, sshd_stopped: str) -> None:
    inventory = str(converged.inventory)
    provision = cli(runs, "provision", "-i", inventory)
    assert provision.returncode == ExitCode.UNREACHABLE, provision.stdout[-6000:]
    assert f"  UNREACHABLE {sshd_stopped}: " in provision.stdout
    assert table_rows(provision.stdout, [sshd_stopped])[sshd_stopped][-1] == "UNREACHABLE"
    # A lost peer is not drift: the nodes still here are in sync with their records, so none converges in full
    # (the MPI launch test, whose outcome depends on every node, is not recorded as the first node's state). The
    # lost node is named as not checked, never counted in sync, and the others run the cluster-wide plays.
    others = [node for node in converged.nodes if node != sshd_stopped]
    said = (run_dir_of(provision.stdout) / "ansible" / "stdout").read_text()
    decision = gate_decision(said)
    assert decision["converge"] == {}, decision
    assert decision["not_checked_unreachable_or_failed"] == [sshd_stopped], decision
    assert sorted(decision["in_sync_skip_their_own_roles"]) == sorted(others), decision
    assert f"  not checked (unreachable or failed before the check): {sshd_stopped}" in provision.stdout
    assert "every node is in sync" not in provision.stdout + said  # neither the CLI's line nor the gate's message
    # Issue 18: the unreachable node is left out and does not hold the others hostage: they are not unreachable,
    # fail nothing and finish site.yml (its last play records the converge). The cluster-wide checks cover the nodes
    # still there and name the lost one as not checked, never as passed.
    rows = table_rows(provision.stdout, others)
    assert "PLAY [Record | what this converge left" in provision.stdout, provision.stdout[-6000:]
    for node in others:
        assert int(rows[node][0]) > 50 and rows[node][3] == "0", (node, rows[node], provision.stdout[-6000:])
        assert rows[node][-1] in ("ok", "changed"), (node, rows[node], provision.stdout[-6000:])
    # ... and the recap repeats those warnings, where the run's outcome is read.
    recap_text = provision.stdout[provision.stdout.rindex("\nhost ") :]
    assert (
        f"  WARNING: SSH trust not checked for {sshd_stopped} (unreachable or failed earlier in this run); "
        f"checked among the {len(others)} other nodes"
    ) in recap_text, recap_text
    assert (
        f"  WARNING: MPI launch tested on {len(others)} of {len(converged.nodes)} nodes; not tested: {sshd_stopped} "
        "(unreachable or failed earlier in this run)"
    ) in recap_text, recap_text
    doctor = cli(runs, "doctor", "-i", inventory)
    assert doctor.returncode == ExitCode.UNREACHABLE, doctor.stdout[-4000:]
    assert f"  {sshd_stopped}: unreachable" in doctor.stdout
    verify = cli(runs, "verify", "-i", inventory)
    assert verify.returncode == ExitCode.UNREACHABLE, verify.stdout[-4000:]
    assert table_rows(verify.stdout, [sshd_stopped])[sshd_stopped] == ["-", "-", "-", "UNREACHABLE"]


@pytest.fixture
def opt_full(converged: LabHandle, victim: str) -> Iterator[str]:
    """/opt on the victim, where NCCL builds, nccl-tests and the plugin's venv go, turned into a small filesystem
    filled to the last byte (a tmpfs mounted over it from the lab's console: the node's root cannot mount)."""
    fill = "mount -t tmpfs -o size=16m rdmaforge-test-full /opt && (head -c 16m /dev/zero > /opt/fill || true)"
    mounted = converged.console(victim, fill)
    assert mounted.returncode == 0, mounted.stdout + mounted.stderr
    try:
        yield victim
    finally:
        undone = converged.console(victim, "umount /opt")
        assert undone.returncode == 0, undone.stdout + undone.stderr


def test_a_node_whose_disk_is_full_fails_before_any_change_and_the_others_converge(
    converged: LabHandle, runs: Path, opt_full: str
) -> None:
    defaults = yaml.safe_load((PROJECT_ROOT / "roles" / "preflight" / "defaults" / "main.yml").read_text())
    need = defaults["preflight_min_free_mb"]["/opt"]
    proc = cli(runs, "provision", "-i", str(converged.inventory))
    assert proc.returncode == ExitCode.HOST_FAILED, proc.stdout[-6000:]
    # Named with the path, the free space measured (none) and the need, from preflight's own check.
    assert f"{opt_full}: /opt is on /opt with 0 MiB free; {need} MiB needed" in proc.stdout, proc.stdout[-6000:]
    rows = table_rows(proc.stdout, list(converged.nodes))
    assert rows[opt_full][-1] == "FAILED" and rows[opt_full][1] == "0", rows  # failed, and changed nothing
    for node in converged.nodes:
        if node != opt_full:
            assert rows[node][-1] in ("ok", "changed") and rows[node][2:4] == ["0", "0"], (node, rows)
    assert converged.ssh(opt_full, "cat /opt/fill | wc -c").stdout.strip() == str(16 * 1024 * 1024)
