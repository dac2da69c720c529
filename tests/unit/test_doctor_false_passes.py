"""`rdmaforge doctor` never says healthy for what it did not measure (review round 15b, F1-F5, F7, F8, F13).

The nodes are test_doctor's healthy 8-GPU InfiniBand node (its inventory expects 8 GPUs, ENIs at 9000, 50 pages of
1G), changed one field at a time as a real node gives it: a driver that does not answer, a clock or a GPU count
that could not be read, devices only the kernel lists, a rate not reported."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_doctor import NODE, cluster, port

from rdmaforge import doctor
from rdmaforge.commands import doctor as doctor_command
from rdmaforge.runner.exit_codes import ExitCode

#: lspci -n -mm lines of 8 NVIDIA 3D controllers (class 0302, vendor 10de), as node_probe asks for them.
LSPCI_8_GPUS = "\n".join(f'{17 + i:02x}:00.0 "0302" "10de" "2330" -ra1 "10de" "16c1"' for i in range(8))


def checks_of(nodes: dict[str, dict[str, Any]]) -> dict[tuple[str, str], doctor.Check]:
    return {(c.host, c.check): c for c in doctor.diagnose(nodes).checks}


def test_gpus_on_the_bus_with_no_driver_answering_are_a_problem_not_8_ok() -> None:
    """F1: nvidia-smi failed (its output None), lspci still lists the 8 cards: 'gpus: ok, 8 GPU(s)' was printed,
    and the NCCL arch check was left out without a word."""
    nodes = cluster(2)
    nodes["node2"].update(nvidia_smi=None, compute_caps=None, lspci=LSPCI_8_GPUS)
    diagnosis = doctor.diagnose(nodes)
    gpus = checks_of(nodes)["node2", "gpus"]
    assert (gpus.status, gpus.actual, gpus.expected) == ("problem", "8", "8")
    assert gpus.reason.startswith("nvidia-smi did not answer, while lspci sees 8 NVIDIA GPU(s)")
    assert diagnosis.exit_code == ExitCode.UNHEALTHY
    nccl = checks_of(nodes)["node2", "nccl"]
    assert nccl.status == "not_checked" and ("the GPUs' compute capabilities were not read, so whether the build's "
                                             "archs cover them was not checked") in nccl.reason  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "check", "expected"),
    [
        ("nvidia_smi", None, "gpus", "8"),  # no tool answered: lspci None too (NODE), no sysfs count
        ("clock", ["1700000000.1", "%N"], "clock", "within 1.0s"),  # date printed %N: no number
        ("nics_error", "ip -j link: not found", "mtu", "ENIs at 9000"),
    ],
)
def test_an_expectation_whose_value_was_not_read_is_not_judged_never_healthy(
    field: str, value: object, check: str, expected: str
) -> None:
    """F2: with an expectation (8 GPUs, the clock limit, the ENI MTU) and no reading, doctor said 'healthy: ... meet
    their inventory's expectations', exit 0, the node's status ok."""
    nodes = cluster(3)
    nodes["node2"][field] = value
    diagnosis = doctor.diagnose(nodes)
    found = checks_of(nodes)["node2", check]
    assert (found.status, found.expected) == ("not_checked", expected)
    assert diagnosis.exit_code == ExitCode.INCOMPLETE
    text = doctor.render(diagnosis)
    assert "healthy:" not in text.replace("not healthy", "")
    (verdict,) = [line for line in text.splitlines() if line.startswith("not judged: ")]
    # (an unknown GPU count leaves the huge page plans, which follow it, unmeasured too)
    assert "check(s) could not be measured, or compared with another node (" in verdict
    assert f"node2 {check}" in verdict and "node1" not in verdict and "nothing else is a problem" in verdict
    assert f"  node2: {check} not checked: {found.actual} (expected {expected}): " in text
    per_node = diagnosis.per_node()
    assert per_node["node2"]["status"] == "not_judged" and per_node["node1"]["status"] == "ok"
    (case,) = [c for c in doctor_command.host_cases(diagnosis, {}) if c.name == "node2"]
    assert case.outcome == "skipped" and case.message.startswith("not judged: ")
    assert f"{check} (expected {expected}): {found.reason}" in case.details.splitlines()


def test_nothing_to_compare_with_is_still_healthy() -> None:
    """The other side of F2: a check with no expectation (a tcp fabric has no memlock rule, no GPU count set) is
    named as not checked and does not hold the verdict back."""
    nodes = cluster(2)
    for node in nodes.values():
        node["inventory"] = {**node["inventory"], "doctor_expected_gpus": None}
    diagnosis = doctor.diagnose(nodes)
    gpus = checks_of(nodes)["node1", "gpus"]
    assert (gpus.status, gpus.expected) == ("not_checked", None)
    assert diagnosis.exit_code == ExitCode.OK


def test_rdma_devices_only_the_kernel_lists_are_a_problem() -> None:
    """F3: ibv_devinfo missing (or listing none), the devices read from /sys/class/infiniband with ACTIVE ports:
    NCCL opens devices through libibverbs, which sees none; doctor said '2 device(s), 2 port(s) ACTIVE'."""
    nodes = cluster(2)
    nodes["node2"].update(rdma_source="sysfs", rdma_tool_present=False)
    nodes["node1"].update(rdma_source="ibv_devinfo", rdma_tool_present=True)
    found = checks_of(nodes)
    assert found["node1", "rdma"].status == "ok"
    assert found["node2", "rdma"].status == "problem"
    assert "only the kernel lists them (/sys/class/infiniband): ibv_devinfo is not installed" in found["node2",
                                                                                                          "rdma"].reason


def test_a_port_whose_rate_was_not_reported_leaves_the_rates_not_judged() -> None:
    """F4: two ports at 200 Gb/s and a third with no rate: 'ok' with the gap inside a reason never printed (verify's
    suite already calls it not judged)."""
    nodes = cluster(2)
    devices = nodes["node2"]["rdma_devices"]
    devices.append({"name": "mlx5_2", "ports": [{**port(1), "rate_gbps": None}]})
    for node in nodes.values():
        node["rdma_devices"] = copy.deepcopy(devices)
    diagnosis = doctor.diagnose(nodes)
    rate = checks_of(nodes)["node2", "port_rate"]
    assert rate.status == "not_checked" and rate.expected is not None and "mlx5_2:1" in rate.reason
    assert diagnosis.exit_code == ExitCode.INCOMPLETE


def test_a_down_rail_the_inventory_does_not_judge_is_still_printed() -> None:
    """F5: rdma_require_active_ports false: the DOWN rail was named only inside an ok reason no output showed."""
    nodes = cluster(2)
    for node in nodes.values():
        node["inventory"] = {**node["inventory"], "rdma_require_active_ports": False}
    nodes["node2"]["rdma_devices"][1]["ports"] = [port(1, "PORT_DOWN", "DISABLED")]
    text = doctor.render(doctor.diagnose(nodes))
    assert "  node2: rdma ok, in part not judged: " in text and "mlx5_1:1 PORT_DOWN" in text


def test_an_acceptance_never_covers_a_value_that_was_not_read() -> None:
    """F7: doctor_accept memlock (the lab's 64 KiB) accepted a node whose `ulimit -l` gave nothing."""
    nodes = cluster(2)
    for node in nodes.values():
        node["inventory"] = {**node["inventory"], "doctor_accept": {"memlock": "lab containers run with 64 KiB"}}
        node["memlock"] = "64"
    nodes["node2"]["memlock"] = None
    found = checks_of(nodes)
    assert found["node1", "memlock"].status == "accepted"
    assert found["node2", "memlock"].status == "problem"
    assert "not accepted (doctor_accept's memlock covers a measured value" in found["node2", "memlock"].reason


def test_the_inventorys_gpus_per_node_is_an_expectation() -> None:
    """F8: rdmaforge_gpus_per_node: 8 and a fleet reading 0 GPUs everywhere was 'healthy' (no doctor_expected_gpus,
    so nothing to compare with)."""
    nodes = cluster(2)
    for node in nodes.values():
        node["inventory"] = {**node["inventory"], "doctor_expected_gpus": None, "rdmaforge_gpus_per_node": 8}
        node["nvidia_smi"] = ""  # the driver answers and lists no GPU
        node["lspci"] = ""
    gpus = checks_of(nodes)["node1", "gpus"]
    assert (gpus.status, gpus.actual, gpus.expected) == ("problem", "0", "8")
    assert "rdmaforge_gpus_per_node" in gpus.reason


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("clock", [1700000000.1, 1700000000.2]),  # numbers, which the shape allows
        ("hugepages", {"by_size": {"hugepages-2048kB": {"nr": 1}}}),  # the directory's name, not its kB
        ("nics", [{"mtu": 9000}]),  # no name
    ],
)
def test_a_result_the_shape_allows_never_crashes_the_run(tmp_path: Path, field: str, value: object) -> None:
    """F13: each crashed the whole doctor run (internal error, exit 70): no node got a verdict. Now the file is either
    refused by the shape check (that node not judged, named) or judged."""
    node = {**copy.deepcopy(NODE), field: value}
    (tmp_path / "node1.json").write_text(json.dumps(node))
    nodes, unread = doctor_command.read_nodes(tmp_path, ["node1"])
    if unread:
        assert "is not what doctor.yml writes" in unread["node1"]
        return
    text = doctor.render(doctor.diagnose(nodes))
    assert "node1" in text


def test_an_interrupted_run_gives_no_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """F11b: Ctrl-C after two healthy nodes were read printed 'healthy: 2 node(s) ...' above exit 130."""
    import yaml

    from rdmaforge.cli import main
    from rdmaforge.runner import execute
    from rdmaforge.runner.events import EventLog
    from rdmaforge.runner.recap import from_stats

    def fake_run(request: Any, run_dir: Path, on_event: Any = None, scrubbed: Any = None,
                 read: Any = None) -> execute.Outcome:  # fmt: skip
        output = Path(request.extra_vars[-1].inline["doctor_output_dir"])
        output.mkdir(parents=True, exist_ok=True)
        for host, node in cluster(2).items():
            (output / f"{host}.json").write_text(json.dumps(node))
        log = EventLog()
        log.handle({"event": "playbook_on_stats", "event_data": {"ok": {"node1": 3, "node2": 3}, "failures": {},
                                                                 "dark": {}, "processed": {"node1": 1, "node2": 1}}})
        return execute.Outcome("canceled", 130, log, from_stats(log.stats, log.hosts), run_dir / "ansible", 0.1)

    monkeypatch.setattr(execute, "run", fake_run)
    inventory = tmp_path / "hosts.yml"
    hosts = {f"node{i}": {"ansible_host": f"127.0.0.{i}", "ansible_port": 9} for i in (1, 2)}
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    code = main(["doctor", "-i", str(inventory), "--runs-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert code == ExitCode.INTERRUPTED, out
    assert "healthy:" not in out and "not judged: the run was interrupted before every node was read" in out, out


def test_a_memlock_answer_that_is_no_number_is_not_read_and_not_accepted() -> None:
    """F12: a login banner read as the limit printed 'memlock ... is Last login: Mon Jan  1 KiB'; the lab's
    acceptance (64 KiB) would have accepted it."""
    nodes = cluster(2)
    for node in nodes.values():
        node["inventory"] = {**node["inventory"], "doctor_accept": {"memlock": "lab containers run with 64 KiB"}}
    nodes["node2"]["memlock"] = "Last login: Mon Jan  1 00:00:00 2024"
    memlock = checks_of(nodes)["node2", "memlock"]
    assert (memlock.status, memlock.actual) == ("problem", "?")
    assert memlock.reason.startswith("`ulimit -l` of a non-interactive login answered 'Last login: Mon Jan  1")


def test_a_plugin_whose_symbols_nm_could_not_read_is_not_judged() -> None:
    """F12: nm not installed (the role's task does not fail) read as 'the plugin exports no ncclNetPlugin_vN
    symbol: NCCL would not load it', a measured fault that was never measured."""
    nodes = cluster(2)
    nodes["node2"]["plugin_symbols"] = None  # as the role writes it when nm did not run
    plugin = checks_of(nodes)["node2", "plugin"]
    assert plugin.status == "not_checked" and plugin.expected is not None
    assert plugin.reason.startswith("the plugin's symbols could not be read (nm did not run")
    nodes["node2"]["plugin_symbols"] = ""  # nm ran and listed nothing: the plugin exports none
    assert checks_of(nodes)["node2", "plugin"].status == "problem"


def test_memlock_read_for_another_user_than_the_training_one_is_not_judged() -> None:
    """Round 27a: doctor read `ulimit -l` of its own SSH login (ansible_user), and called it the training login's:
    with ops logging in (limits.d's '*' line: unlimited) and training as root (no root line: 64 KiB), doctor said ok
    for a node RDMA could not pin memory on."""
    nodes = cluster(2)
    for node in nodes.values():
        node.update(memlock="unlimited", memlock_user="ops", training_user="root")
    nodes["node1"]["training_user"] = "ops"  # the same user: judged as before
    checks = checks_of(nodes)
    assert (checks["node1", "memlock"].status, checks["node1", "memlock"].actual) == ("ok", "unlimited")
    memlock = checks["node2", "memlock"]
    assert memlock.status == "not_checked" and memlock.expected == "unlimited"
    assert memlock.reason.startswith("`ulimit -l` was read for the login user 'ops', not for the training user 'root'")


# --- review round 41a ---------------------------------------------------------------------------------------------


def test_a_two_rail_node_with_one_rate_not_reported_is_not_judged() -> None:
    """Two rails, one rate not reported: with one rate left there was nothing to compare, the check was not_checked
    with no expectation, and the run said healthy, exit 0 (with three rails it was already not judged). So did a
    fleet none of whose rates was reported."""
    nodes = cluster(3)
    nodes["node2"]["rdma_devices"][1]["ports"][0]["rate_gbps"] = None
    diagnosis = doctor.diagnose(nodes)
    rate = checks_of(nodes)["node2", "port_rate"]
    assert rate.status == "not_checked" and rate.expected is not None and "mlx5_1:1" in rate.reason
    assert diagnosis.exit_code == ExitCode.INCOMPLETE, doctor.render(diagnosis)
    assert diagnosis.per_node()["node2"]["status"] == "not_judged"
    assert "healthy:" not in doctor.render(diagnosis).replace("not healthy", "")
    for node in nodes.values():
        for device in node["rdma_devices"]:
            device["ports"][0]["rate_gbps"] = None
    diagnosis = doctor.diagnose(nodes)
    assert {c.expected is not None for c in diagnosis.checks if c.check == "port_rate"} == {True}
    assert diagnosis.exit_code == ExitCode.INCOMPLETE, doctor.render(diagnosis)


@pytest.mark.parametrize(
    ("check", "inventory", "change", "shown", "outcome"),
    [
        # rdma_core_min_port_rate_gbps set, the lab's slower rails accepted, and no rate reported: still a problem
        ("port_rate", {"rdma_core_min_port_rate_gbps": 200}, {"rate_gbps": None},
         "mlx5_0:1 rate unknown, mlx5_1:1 rate unknown", ("problem", ExitCode.UNHEALTHY)),
        # the AIACC plugin off ECS accepted, and the DMI product name not readable with no declaration that the host
        # is outside Alibaba Cloud: whether it is an ECS instance is not known, so not judged
        ("plugin_host", {}, {"dmi_product_name": None}, "not readable", ("not_checked", ExitCode.INCOMPLETE)),
    ],
)
def test_an_acceptance_never_covers_a_value_shown_as_text_that_was_not_read(
    check: str, inventory: dict[str, Any], change: dict[str, Any], shown: str, outcome: tuple[str, ExitCode]
) -> None:
    """Review round 41a: only "?" was refused; an unread rate shows as "... rate unknown" and a DMI name as "not
    readable", and doctor_accept accepted them: healthy, exit 0."""
    nodes = cluster(2)
    for node in nodes.values():
        node["inventory"] = {**node["inventory"], **inventory, "doctor_accept": {check: "the lab's known deviation"}}
        node["rdma_devices"] = [{"name": f"mlx5_{i}", "ports": [port(1, rate=100.0)]} for i in (0, 1)]
        node["dmi_product_name"] = "Standard PC (Q35 + ICH9, 2009)"  # a KVM guest: measured, not an ECS instance
    assert checks_of(nodes)["node1", check].status == "accepted"  # a measured deviation is accepted
    for key, value in change.items():
        if key == "rate_gbps":
            for device in nodes["node2"]["rdma_devices"]:
                device["ports"][0]["rate_gbps"] = value
        else:
            nodes["node2"][key] = value
    found = checks_of(nodes)["node2", check]
    assert (found.status, found.actual) == (outcome[0], shown)
    if outcome[0] == "problem":
        said = f"not accepted (doctor_accept's {check} covers a measured value, and this one was not read)"
        assert said in found.reason
    assert doctor.diagnose(nodes).exit_code == outcome[1]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        # the registered link left dangling (its aiacc-2.0.1 directory removed): stat follows it to nothing
        ({"plugin_files": [{"exists": False}, {"exists": False}]}, "which does not exist (a dangling link)"),
        # the ld.so cache gives NCCL no libnccl-net.so
        ({"ld_cache_nccl": ["\tlibnccl.so.2 (libc6,x86-64) => /opt/nccl/current/lib/libnccl.so.2"]},
         "the ld.so cache has no libnccl-net.so"),
    ],
)
def test_a_plugin_fault_measured_beside_symbols_nm_could_not_read_is_a_problem(
    change: dict[str, Any], said: str
) -> None:
    """Review round 41a: nm not run (symbols None) returned not_checked before the link and the ld.so cache were
    compared: a dangling plugin link was "nothing else is a problem", exit 5, not a problem, exit 6."""
    nodes = cluster(2)
    nodes["node2"].update(plugin_symbols=None, plugin_expected=NODE["plugin_target"], **change)
    plugin = checks_of(nodes)["node2", "plugin"]
    assert plugin.status == "problem" and said in plugin.reason, plugin
    assert doctor.diagnose(nodes).exit_code == ExitCode.UNHEALTHY
