"""rdmaforge pairwise without hardware: the schedule, the plan, the scoring, the outputs, the GPU path on real
nccl-tests sendrecv output, and iperf3 on loopback."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import socket
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from rdmaforge.lab import impair
from rdmaforge.lab.shell import LabError
from rdmaforge.pairwise import output, plan, schedule, sendrecv
from rdmaforge.pairwise.report import build, main
from rdmaforge.pairwise.score import Measurement, Thresholds, score, score_rail
from rdmaforge.parsers import iperf3

CORPUS = "corpus/nccl-tests"


# --- schedule -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6, 7, 8, 9, 16])
def test_round_robin_covers_every_pair_once_in_disjoint_rounds(count):
    nodes = [f"node{i}" for i in range(1, count + 1)]
    rounds = schedule.round_robin(nodes)
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    seen = []
    for rnd in rounds:
        members = [n for pair in rnd for n in pair]
        assert len(members) == len(set(members)), f"a node twice in one round: {rnd}"
        assert len(rnd) == count // 2  # every node plays except one bye per round when N is odd
        seen += [frozenset(pair) for pair in rnd]
    assert sorted(seen, key=sorted) == sorted({frozenset(p) for p in itertools.combinations(nodes, 2)}, key=sorted)
    assert len(seen) == len(set(seen))


def test_odd_node_count_gives_each_node_exactly_one_bye():
    nodes = ["a", "b", "c", "d", "e"]
    byes = [next(n for n in nodes if all(n not in pair for pair in rnd)) for rnd in schedule.round_robin(nodes)]
    assert sorted(byes) == nodes


def test_random_matchings_are_k_perfect_matchings_and_seeded():
    nodes = [f"n{i}" for i in range(10)]
    rounds = schedule.schedule(nodes, rounds=3, seed=7)
    assert len(rounds) == 3
    for rnd in rounds:
        assert sorted(n for pair in rnd for n in pair) == sorted(nodes)
    assert rounds == schedule.schedule(nodes, rounds=3, seed=7)
    assert rounds != schedule.schedule(nodes, rounds=3, seed=8)


def test_schedule_refuses_what_it_cannot_schedule():
    with pytest.raises(schedule.ScheduleError, match="at least 2 nodes"):
        schedule.round_robin(["node1"])
    with pytest.raises(schedule.ScheduleError, match="repeated: node1"):
        schedule.round_robin(["node1", "node1"])
    with pytest.raises(schedule.ScheduleError, match="--rounds"):
        schedule.schedule(["a", "b"], rounds=-1)


# --- plan -------------------------------------------------------------------------------------------------


def lab_fact(index: int, nics: int = 2, down: tuple[str, ...] = ()) -> dict:
    """An rdmaforge_node fact shaped like a lab node's (addresses as rdmaforge/lab/spec.py gives them, records as
    the nic_facts module gives them)."""
    return {
        "nics": [{"name": f"eth{k}", "ipv4": [{"address": f"198.18.{k}.{10 + index}", "prefixlen": 24}]}
                 for k in range(nics + 1) if f"eth{k}" not in down],
        "default_route_interface": "eth0",
        "gpu_count": 0,
    }  # fmt: skip


def test_plan_takes_every_nic_but_the_default_route_ones():
    facts = {f"node{i}": lab_fact(i) for i in range(1, 5)}
    made = plan.make_plan(facts, "all")
    assert made.rails == ["eth1", "eth2"]
    assert made.addresses["node3"] == {"eth1": "198.18.1.13", "eth2": "198.18.2.13"}
    assert len(made.rounds) == 3


def test_plan_refuses_two_nodes_with_one_rail_address():
    """A cloned static IP: the pair of the two nodes failed to connect (or measured one node) and was named a link
    suspect, where the plan could name the duplicate (review round 21b)."""
    facts = {f"node{i}": lab_fact(i) for i in range(1, 4)}
    facts["node3"]["nics"][2]["ipv4"] = [{"address": "198.18.2.11", "prefixlen": 24}]  # node1's on eth2
    said = r"two nodes have one rail address.*198\.18\.2\.11 on eth2 of node1, node3"
    with pytest.raises(plan.PlanError, match=said):
        plan.make_plan(facts, "all")


def test_plan_names_the_node_and_nic_it_cannot_measure():
    facts = {f"node{i}": lab_fact(i) for i in range(1, 4)}
    facts["node2"] = lab_fact(2, down=("eth2",))
    with pytest.raises(plan.PlanError, match="node2 lacks eth2"):
        plan.make_plan(facts, "all")
    with pytest.raises(plan.PlanError, match=r"node2: no IPv4 address on eth2 \(NICs with an address: eth0, eth1\)"):
        plan.make_plan(facts, "eth1,eth2")
    assert plan.make_plan(facts, "eth1").rails == ["eth1"]


@pytest.mark.parametrize("bad", ["", "all,eth1", "eth1;rm"])
def test_nic_selection_refuses_bad_input(bad):
    with pytest.raises(plan.PlanError, match="--nics"):
        plan.parse_nic_selection(bad)


def test_jobs_give_each_pair_one_server_and_one_client_per_rail():
    facts = {f"node{i}": lab_fact(i) for i in range(1, 5)}
    made = plan.make_plan(facts, "all").to_dict()
    a, b = made["rounds"][0][0]
    serving = plan.jobs(made, 0, b, 5301)
    measuring = plan.jobs(made, 0, a, 5301)
    assert [j["ports"] for j in serving["serve"]] == [[5301, 5302], [5303, 5304]]
    assert serving["measure"] == [] and measuring["serve"] == []
    assert [(j["nic"], j["peer"], j["peer_address"]) for j in measuring["measure"]] == [
        ("eth1", b, made["addresses"][b]["eth1"]),
        ("eth2", b, made["addresses"][b]["eth2"]),
    ]


# --- scoring ----------------------------------------------------------------------------------------------

NODES = ["node1", "node2", "node3", "node4"]


def sweep(
    rate: dict[tuple[str, str, str], float],
    status: dict[tuple[str, str, str], str] | None = None,
    nodes: list[str] = NODES,
    rails: tuple[str, ...] = ("eth1", "eth2"),
    base: float = 0.19,
) -> list[Measurement]:
    """Both directions of every pair on every rail at ``base`` Gb/s, except the (sender, receiver, nic) given."""
    status = status or {}
    out = []
    for a, b in itertools.permutations(nodes, 2):
        for nic in rails:
            st = status.get((a, b, nic), "ok")
            out.append(Measurement(a, b, nic, rate.get((a, b, nic), base) if st == "ok" else None, st))
    return out  # fmt: skip


def suspects_of(measurements, nodes=NODES, rails=("eth1", "eth2"), limits=None):
    scored = score(measurements, nodes, rails, limits or Thresholds())
    return sorted((s.kind, s.node, s.nic) for r in scored for s in r.suspects)


def test_an_even_sweep_has_no_suspect():
    assert suspects_of(sweep({})) == []


def test_a_node_slow_on_one_rail_is_a_node_suspect_on_that_rail_only():
    # node3's eth1 limited (egress shaping: only what node3 sends is slow, as tc tbf does)
    slow = {("node3", p, "eth1"): 0.019 for p in NODES if p != "node3"}
    assert suspects_of(sweep(slow)) == [("node", "node3", "eth1")]


def test_a_slow_pair_between_fine_nodes_is_a_link_suspect():
    slow = {("node1", "node2", "eth2"): 0.02, ("node2", "node1", "eth2"): 0.02}
    assert suspects_of(sweep(slow)) == [("link", "node1<->node2", "eth2")]


def test_an_unreachable_nic_names_its_node():
    status = {}
    for p in ("node1", "node2", "node3"):
        status[("node4", p, "eth2")] = status[(p, "node4", "eth2")] = "unreachable"
    assert suspects_of(sweep({}, status)) == [("node", "node4", "eth2")]


def test_three_nodes_still_tell_node_from_link():
    nodes = ["node1", "node2", "node3"]
    node3 = {("node3", p, "eth1"): 0.02 for p in ("node1", "node2")}
    assert suspects_of(sweep(node3, nodes=nodes), nodes) == [("node", "node3", "eth1")]
    link = {("node1", "node2", "eth1"): 0.02}
    assert suspects_of(sweep(link, nodes=nodes), nodes) == [("link", "node1<->node2", "eth1")]


def test_two_nodes_can_only_blame_the_link_and_only_against_the_line_rate():
    nodes = ["node1", "node2"]
    measured = sweep({}, nodes=nodes, rails=("eth1",), base=40.0)
    assert suspects_of(measured, nodes, ("eth1",)) == []
    limits = Thresholds(line_rate_gbps=100.0, min_line_fraction=0.5)
    assert suspects_of(measured, nodes, ("eth1",), limits) == [("link", "node1<->node2", "eth1")]


def test_a_rail_slow_everywhere_is_named_not_passed():
    """Every pair at 1 Gb/s on a 100 Gb/s rail: no node is worse than its partners, so no node or link is to blame,
    and yet nothing on the rail reaches half its line rate. The rail itself is the suspect, naming every pair's
    nodes; it does not leave any node out of the healthy hostfile (none is worse than another)."""
    limits = Thresholds(line_rate_gbps=100.0, min_line_fraction=0.5)
    measured = sweep({}, rails=("eth1",), base=1.0)
    assert suspects_of(measured, rails=("eth1",), limits=limits) == [("rail", "rail eth1", "eth1")]
    (rail,) = score(measured, NODES, ("eth1",), limits)
    (named,) = rail.suspects
    assert set(named.nodes) == set(NODES) and "6 of 6 pairs slow" in named.evidence, named
    assert "line rate 100 Gb/s" in named.evidence
    # At the line rate nothing is slow.
    assert suspects_of(sweep({}, rails=("eth1",), base=90.0), rails=("eth1",), limits=limits) == []


def test_a_fabric_that_hangs_almost_everywhere_is_named_not_passed():
    """6 nodes, 14 of 15 pairs hung: each node's partners are as bad as it is, so no node suspect; the one pair
    that completed sets the reference. Before, this was 'suspects: none' and every node healthy."""
    nodes = [f"node{i}" for i in range(1, 7)]
    status = {}
    for a, b in itertools.permutations(nodes, 2):
        if {a, b} != {"node1", "node2"}:
            status[(a, b, "eth1")] = "hang"
    found = suspects_of(sweep({}, status, nodes=nodes, rails=("eth1",)), nodes, ("eth1",))
    assert found == [("rail", "rail eth1", "eth1")]
    (rail,) = score(sweep({}, status, nodes=nodes, rails=("eth1",)), nodes, ("eth1",), Thresholds())
    assert "14 of 15 pairs slow" in rail.suspects[0].evidence, rail.suspects


def test_thresholds_are_checked():
    with pytest.raises(ValueError, match="pairwise_slow_ratio"):
        Thresholds(slow_ratio=0).check()
    with pytest.raises(ValueError, match="pairwise_line_rate_gbps"):
        Thresholds(line_rate_gbps=-1).check()
    # NaN compares false with every rate, so no pair was ever below it: judged against nothing, yet printed as the
    # line rate. inf makes every pair slow. Neither is a line rate.
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="pairwise_line_rate_gbps"):
            Thresholds(line_rate_gbps=bad).check()


@pytest.mark.parametrize(
    ("variables", "named"),
    [({"slow_ratio": 0}, "pairwise_slow_ratio must be in (0, 1], got 0.0"),
     ({"line_rate_gbps": "nan"}, "pairwise_line_rate_gbps must be a positive number or null, got nan"),
     ({"line_rate_gbps": "100G"}, "pairwise_line_rate_gbps='100G'"),
     ({"node_fraction": -0.1}, "pairwise_node_fraction must be in [0, 1)")],
)  # fmt: skip
def test_a_threshold_the_report_would_refuse_stops_the_role_before_the_sweep(variables, named):
    """The report checked the thresholds only after every pair had been measured, and its refusal was a failed
    command task (exit 2). The role now asks the same check first, in an assert whose 'pairwise: ' message the CLI
    reads as a refused plan (exit 64)."""
    import yaml

    from filter_plugins.rdmaforge_pairwise import pairwise_threshold_problem
    from rdmaforge.commands.pairwise import is_plan_refusal
    from rdmaforge.paths import PROJECT_ROOT
    from rdmaforge.runner.events import HostProblem

    defaults = {"slow_ratio": 0.5, "node_fraction": 0.5, "line_rate_gbps": None, "min_line_fraction": 0.5}
    assert pairwise_threshold_problem(defaults) == ""
    assert pairwise_threshold_problem({**defaults, "line_rate_gbps": 100}) == ""
    problem = pairwise_threshold_problem({**defaults, **variables})
    assert named in problem
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "pairwise" / "tasks" / "main.yml").read_text())
    names = [task["name"] for task in tasks]
    check = tasks[names.index("Stop when a scoring threshold cannot judge a pair")]
    assert names.index(check["name"]) < names.index("Measure each round (its pairs at the same time, every rail)")
    assert "rdmaforge_pairwise_threshold_problem" in check["vars"]["pairwise_threshold_problem"]
    message = check["ansible.builtin.assert"]["fail_msg"].replace("{{ pairwise_threshold_problem }}", problem)
    assert is_plan_refusal(HostProblem("node1", check["name"], "ansible.builtin.assert", message))


def test_a_rail_that_moved_nothing_is_not_passed():
    """iperf3 can exit 0 with 0 bits/s received: every pair at 0 Gb/s made a reference of 0, nothing was below
    half of it, and the rail had no suspect (exit 0)."""
    measured = sweep({}, rails=("eth1",), base=0.0)
    assert suspects_of(measured, rails=("eth1",)) == [("rail", "rail eth1", "eth1")]
    one = {("node1", "node2", "eth1"): 0.0}
    assert suspects_of(sweep(one, rails=("eth1",)), rails=("eth1",)) == [("link", "node1<->node2", "eth1")]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_a_rate_that_is_not_a_number_of_gbps_is_a_failed_measurement(tmp_path, value):
    """A NaN rate (json.loads reads NaN) compared false with every threshold: the pair was never slow, and a rail
    of NaNs had no suspect. Such a value is a failed measurement that names what was reported."""
    bad = {("node1", "node2", "eth1"): value}
    assert suspects_of(sweep(bad, rails=("eth1",)), rails=("eth1",)) == [("link", "node1<->node2", "eth1")]
    raw = raw_sweep(sweep(bad))
    data = build(json.loads(json.dumps(raw)), tmp_path)
    (pair,) = [p for p in data["pairs"] if (p["a"], p["b"], p["nic"]) == ("node1", "node2", "eth1")]
    assert pair["status"] == "failed" and pair["gbps"] is None and f"not a rate: {value}" in pair["detail"]
    assert [(s["kind"], s["node"], s["nic"]) for s in data["suspects"]] == [("link", "node1<->node2", "eth1")]
    json.loads((tmp_path / "results.json").read_text(), parse_constant=pytest.fail)  # strict JSON: no NaN written
    every = {(a, b, "eth1"): float("nan") for a, b in itertools.permutations(NODES, 2)}
    data = build(raw_sweep(sweep(every)), tmp_path / "all")
    assert data["suspects"] == [] and data["unjudged"] == ["eth1"]


def test_rates_near_the_largest_float_have_a_finite_median_and_reference():
    """The median of two middle values was (a + b) / 2, which overflows for two finite rates near 1e308: the rail's
    reference was inf, every pair slow against it and the rail a suspect. Here node1-node2 moves 1.5e308 Gb/s and
    every other pair 1e308: the nodes' best pairs are 1.5e308 twice and 1e308 twice (reference 1.25e308), the
    six pairs 1.5e308 once and 1e308 five times (median 1e308); no pair is below half the reference. (score() fails
    such rates as implausible before they reach a rail: the arithmetic is checked on score_rail itself.)"""
    fast = {("node1", "node2", "eth1"): 1.5e308, ("node2", "node1", "eth1"): 1.5e308}
    measured = [m if (m.a, m.b, m.nic) in fast else Measurement(m.a, m.b, m.nic, 1e308, m.status)
                for m in sweep(fast, rails=("eth1",))]  # fmt: skip
    rail = score_rail("eth1", measured, NODES, Thresholds())
    assert (rail.reference_gbps, rail.median_gbps, rail.suspects) == (1.25e308, 1e308, [])


# --- outputs ----------------------------------------------------------------------------------------------


def raw_sweep(measurements: list[Measurement]) -> dict:
    facts = {n: lab_fact(i) for i, n in enumerate(NODES, start=1)}
    return {"plan": plan.make_plan(facts, "all").to_dict(), "measurements": [m.to_dict() for m in measurements],
            "thresholds": {"slow_ratio": 0.5, "node_fraction": 0.5, "line_rate_gbps": None},
            "method": "iperf3", "notes": [sendrecv.SKIPPED_NO_GPU], "slots": {n: 1 for n in NODES}}  # fmt: skip


def write_raw(tmp_path: Path, raw: dict | str) -> Path:
    path = tmp_path / "raw.json"
    path.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return path


def test_a_rate_of_400_digits_is_a_failed_measurement_not_a_traceback(tmp_path, capsys):
    """A rate of 400 digits in raw.json is finite JSON but beyond any float (float() raised OverflowError: the
    report was a traceback). Like JSON's 1e400, which reads as inf, it is not a rate: a failed measurement that
    says what was reported, and its pair a suspect."""
    text = json.dumps(raw_sweep(sweep({}))).replace('"gbps": 0.19', '"gbps": ' + "9" * 400, 1)
    assert '"a": "node1", "b": "node2", "nic": "eth1", "gbps": 999' in text  # the first measurement's rate
    assert main([str(write_raw(tmp_path, text)), str(tmp_path / "out")]) == 0
    pairs = json.loads((tmp_path / "out" / "results.json").read_text())["pairs"]
    (pair,) = [p for p in pairs if (p["a"], p["b"], p["nic"]) == ("node1", "node2", "eth1")]
    assert pair["status"] == "failed" and pair["gbps"] is None
    assert pair["detail"] == "not a rate: an integer of 400 digits, beyond a float's range, reported as Gb/s"
    suspects = json.loads(capsys.readouterr().out)["suspects"]
    assert [(s["kind"], s["node"], s["nic"]) for s in suspects] == [("link", "node1<->node2", "eth1")]


def damaged(change: Callable[[dict], object]) -> dict:
    raw = raw_sweep(sweep({}))
    raw["single_stream"] = {"streams": 4, "measurements": [raw["measurements"][0]]}
    change(raw)
    return raw


@pytest.mark.parametrize(("change", "named"), [
    (lambda raw: raw.pop("plan"), "plan: missing (required)"),
    (lambda raw: raw["plan"].update(rounds="all"), "plan.rounds: expected a list"),
    (lambda raw: raw["measurements"][0].pop("a"), "measurements[0].a: missing (required)"),
    (lambda raw: raw["measurements"][0].update(gbps="fast"),
     'measurements[0].gbps: expected any number or null, got "fast"'),
    (lambda raw: raw["measurements"][0].update(round=float("inf")), "measurements[0].round: expected integer"),
    (lambda raw: raw["measurements"][0].update(round="1"), 'measurements[0].round: expected integer, got "1"'),
    (lambda raw: raw["single_stream"].update(streams=float("inf")), "single_stream.streams: expected integer"),
    (lambda raw: raw["single_stream"]["measurements"][0].update(nic=None), "single_stream.measurements[0].nic"),
    (lambda raw: raw["slots"].update(node1=float("inf")), "slots.node1: expected integer or null, got Infinity"),
    (lambda raw: raw["slots"].update(node1=10**30), "slots.node1: must be a count from 0 to 1024"),
    # What the schema alone let through: an empty plan judged nothing and named no suspect (exit 0), a node or
    # NIC outside the plan gave "'x9' is not in list", a repeated node doubled its hostfile slots.
    (lambda raw: raw["plan"].update(rails=[]), "plan.rails: [] names no rail; allowed: the NICs measured"),
    (lambda raw: raw["plan"].update(nodes=[]), "plan.nodes: [] names no node"),
    (lambda raw: raw["plan"]["nodes"].append("node1"), 'plan.nodes[4]: "node1" is listed more than once'),
    (lambda raw: raw["measurements"][0].update(a="x9"), 'measurements[0].a: "x9" is not a node of plan.nodes'),
    (lambda raw: raw["measurements"][0].update(b="node1"), 'measurements[0]: a node measured against itself'),
    (lambda raw: raw["measurements"][0].update(nic="ib0"), 'measurements[0].nic: "ib0" is not a rail of plan.rails'),
    (lambda raw: raw["single_stream"]["measurements"][0].update(b="zz"),
     'single_stream.measurements[0].b: "zz" is not a node of plan.nodes'),
    (lambda raw: raw["plan"]["rounds"][0].append(["node1", "zz"]),
     'plan.rounds[0][2]: ["node1", "zz"] is not two different nodes of plan.nodes'),
    (lambda raw: raw["plan"]["rounds"][0].append(["node1", "node2", "node3"]), "is not two different nodes"),
    (lambda raw: raw["thresholds"].update(line_rate_gbps=10**400),
     "must be numbers (int too large to convert to float): pairwise_slow_ratio=0.5, pairwise_node_fraction=0.5, "
     "pairwise_line_rate_gbps=an integer of 401 digits, beyond a float's range"),
])  # fmt: skip
def test_bad_raw_input_names_the_file_the_field_and_what_is_allowed(tmp_path, capsys, change, named):
    """Each damaged raw.json is refused (64) by a message naming the file, the field and what it must be: before,
    a missing field printed only its name in quotes ('a'), a wrong type Python's words, and an infinite round or
    slot count or a 400-digit threshold raised OverflowError (a traceback)."""
    path = write_raw(tmp_path, json.dumps(damaged(change)))
    assert main([str(path), str(tmp_path / "out")]) == 64
    err = capsys.readouterr().err
    assert str(path) in err and named in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_outputs_put_suspects_first_and_leave_them_out_of_the_hostfile(tmp_path):
    slow = {("node3", p, "eth1"): 0.019 for p in NODES if p != "node3"}
    data = build(raw_sweep(sweep(slow)), tmp_path)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["suspects"] == data["suspects"]
    assert [(s["node"], s["nic"], s["kind"]) for s in on_disk["suspects"]] == [("node3", "eth1", "node")]
    assert {"a", "b", "nic", "gbps", "status"} <= set(on_disk["pairs"][0])
    assert len(on_disk["pairs"]) == 4 * 3 * 2  # ordered pairs x rails
    hosts = [line.split()[0] for line in (tmp_path / "hostfile.healthy").read_text().splitlines()
             if not line.startswith("#")]  # fmt: skip
    assert hosts == ["node1", "node2", "node4"]
    table = (tmp_path / "table.txt").read_text()
    eth1 = table[table.index("eth1:") : table.index("eth2:")]
    assert eth1.splitlines()[2].startswith("*node3")  # the first row of the eth1 matrix is the suspect
    assert "0.02" in eth1 and sendrecv.SKIPPED_NO_GPU in table
    pytest.importorskip("matplotlib")
    for nic in ("eth1", "eth2"):
        assert (tmp_path / f"heatmap-{nic}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_absurd_rate_fails_as_implausible_and_is_shown_in_a_few_digits(tmp_path):
    """Every pair of node1, node2 and node4 on eth1 reported 1.23456e300 Gb/s (a forged or corrupt result: finite,
    so it was taken as a rate), node3's pairs 0.19. The sweep named node3, the one honest node, as the suspect and
    called the others healthy. No link carries more than twice the fastest port a NIC has (1.6 Tbit/s Ethernet,
    the ceiling 3200 Gb/s without pairwise_line_rate_gbps): those measurements fail, so node1, node2 and node4 are
    the suspects, node3 is healthy, and the values are named in a few digits (not 301), with the pair and the
    ceiling, in the notes and the one-stream line."""
    absurd = {(a, b, "eth1"): 1.23456e300 for a, b in itertools.permutations(NODES, 2) if "node3" not in (a, b)}
    raw = raw_sweep(sweep(absurd))
    one = Measurement("node1", "node2", "eth2", 1e300, "ok")
    raw["single_stream"] = {"streams": 4, "measurements": [one.to_dict()]}
    data = build(raw, tmp_path)
    assert [(s["node"], s["nic"], s["kind"]) for s in data["suspects"]] == [
        ("node1", "eth1", "node"), ("node2", "eth1", "node"), ("node4", "eth1", "node")]  # fmt: skip
    assert data["healthy_nodes"] == ["node3"]
    (pair,) = [p for p in data["pairs"] if (p["a"], p["b"], p["nic"]) == ("node1", "node2", "eth1")]
    assert (pair["status"], pair["gbps"]) == ("failed", None)
    assert "node1->node2 on eth1 measured 1.23456e+300 Gb/s, above the ceiling 3200 Gb/s" in pair["detail"]
    table = (tmp_path / "table.txt").read_text()
    assert re.findall(r"[0-9]{12,}", table) == [], table
    assert "note: failed as implausible, above the ceiling 3200 Gb/s" in table
    assert "node1->node2 on eth1 1.23456e+300 Gb/s" in table and "and 2 more" in table  # 6 directions, 4 named
    assert "eth2 node1->node2 not compared: failed (implausible: node1->node2 on eth2 measured 1e+300 Gb/s" in table
    eth1 = table[table.index("eth1:") : table.index("eth2:")].splitlines()
    assert eth1[2].split() == ["*node1", "-", "FAILED", "FAILED", "0.19"]  # the suspects' rows first


#: The ceiling of a rail is twice its line rate (rdmaforge.bench.line_rate.CEILING_FACTOR: one direction of a pair
#: stays below the rail's line rate); without a line rate, twice 1.6 Tbit/s, the fastest port a NIC has.
@pytest.mark.parametrize(("line_rate", "base", "value", "named"), [
    (None, 0.19, 1e308, "node1->node2 on eth1 measured 1e+308 Gb/s, above the ceiling 3200 Gb/s (2 x 1600 Gb/s"),
    (100.0, 90.0, 5000.0,
     "node1->node2 on eth1 measured 5000 Gb/s, above the ceiling 200 Gb/s (2 x pairwise_line_rate_gbps 100)"),
])  # fmt: skip
def test_a_rate_above_the_rails_ceiling_fails_its_pair_naming_the_pair_the_value_and_the_ceiling(
    tmp_path: Path, line_rate: float | None, base: float, value: float, named: str
) -> None:
    """One direction of node1-node2 reported 1e308 Gb/s, or 50 x the configured line rate: the pair was the slower
    direction's (healthy) and the sweep had no suspect. It is a failed measurement now, and its pair a suspect."""
    raw = raw_sweep(sweep({("node1", "node2", "eth1"): value}, base=base))
    raw["thresholds"]["line_rate_gbps"] = line_rate
    assert main([str(write_raw(tmp_path, raw)), str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    (pair,) = [p for p in data["pairs"] if (p["a"], p["b"], p["nic"]) == ("node1", "node2", "eth1")]
    assert (pair["status"], pair["gbps"]) == ("failed", None) and named in pair["detail"], pair
    assert [(s["kind"], s["node"], s["nic"]) for s in data["suspects"]] == [("link", "node1<->node2", "eth1")]
    assert any(named.split(" measured ")[0] in note and "ceiling" in note for note in data["notes"]), data["notes"]


def two_node_raw(measurements: list[dict], line_rate: float, method: str) -> dict:
    made = plan.make_plan({"node1": lab_fact(1, nics=1), "node2": lab_fact(2, nics=1)}, "all").to_dict()
    return {"plan": made, "measurements": measurements, "method": method,
            "thresholds": {"line_rate_gbps": line_rate}}  # fmt: skip


#: The real iperf3 sample (tests/data/iperf3/SOURCES.md): the receiver's 8.887 Gbit/s on loopback, judged against a
#: 10 Gbit/s line rate (ceiling 20); the edited copy reports 50 x the line rate.
IPERF3_SAMPLE = Path(__file__).parents[1] / "data" / "iperf3" / "loopback_2_streams_v3.12.json"
IPERF3_RECEIVED_BPS = "8887059378.254734"


def test_iperf3s_result_above_the_ceiling_is_no_healthy_pair(tmp_path: Path) -> None:
    """iperf3 -J as the pairwise_iperf module reads it: the real sample passes both ways; a copy whose receiver
    reports 500 Gbit/s (50 x pairwise_line_rate_gbps 10) one way was a healthy pair (its slower direction, 8.89
    Gb/s, against the line rate). Now that direction failed, naming the pair, the value and the ceiling; the pair
    is a suspect and neither node is healthy (no pair of them completed)."""
    text = IPERF3_SAMPLE.read_text()
    assert text.count(IPERF3_RECEIVED_BPS) == 1
    real = iperf3.read_result(text, 0, False)
    assert real == {"gbps": 8.8871, "status": "ok", "detail": ""}
    forged_path = tmp_path / "forged.json"
    forged_path.write_text(text.replace(IPERF3_RECEIVED_BPS, str(50 * 10 * 1e9)))
    forged = iperf3.read_result(forged_path.read_text(), 0, False)
    assert forged["status"] == "ok" and forged["gbps"] == 500.0  # iperf3's parser takes it: a number of bits/s

    def directions(forward: dict) -> list[dict]:
        return [dict(forward, a="node1", b="node2", nic="eth1", round=0),
                dict(real, a="node2", b="node1", nic="eth1", round=0)]  # fmt: skip

    honest = build(two_node_raw(directions(real), 10.0, "iperf3"), tmp_path / "honest")
    assert honest["suspects"] == [] and honest["healthy_nodes"] == ["node1", "node2"]
    data = build(two_node_raw(directions(forged), 10.0, "iperf3"), tmp_path / "forged")
    (pair,) = [p for p in data["pairs"] if p["a"] == "node1"]
    assert pair["status"] == "failed" and pair["gbps"] is None
    assert ("node1->node2 on eth1 measured 500 Gb/s, above the ceiling 20 Gb/s (2 x pairwise_line_rate_gbps 10)"
            in pair["detail"])  # fmt: skip
    assert [(s["kind"], s["node"]) for s in data["suspects"]] == [("link", "node1<->node2")]
    assert data["healthy_nodes"] == [] and data["unproven"] == {"node1": ["eth1"], "node2": ["eth1"]}


def test_sendrecv_result_above_the_ceiling_is_no_healthy_pair(shared_dir: Path, tmp_path: Path) -> None:
    """Corpus 05's sendrecv table (peak busbw 13.60 GB/s, 108.8 Gbit/s) passes against a 100 Gbit/s line rate (as
    the benchmark judges that log: tests/unit/test_bench_report.py H100_PAIR_LINE_RATE). A copy whose 8 GiB row
    says 625 GB/s (5000 Gbit/s, 50 x the line rate; the footer's average kept consistent) parses as a whole run and
    was a healthy pair; through the role's filter and the report it is a failed pair now, naming the value."""
    from filter_plugins.rdmaforge_pairwise import pairwise_sendrecv_result

    text = (shared_dir / CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt").read_text()
    row, average = "631816   13.60   13.60", "# Avg bus bandwidth    : 13.5405"
    assert text.count(row) == 1 and text.count(average) == 1
    # The footer is the mean of the 20 halves' busbw (10 rows, out-of-place and in-place).
    forged_path = tmp_path / "forged.txt"
    forged_path.write_text(text.replace(row, "631816   13.60  625.00")
                           .replace(average, f"{average[:-7]}{13.5405 + (625 - 13.60) / 20:.6g}"))  # fmt: skip
    for source, line_rate_ok in ((text, True), (forged_path.read_text(), False)):
        value = pairwise_sendrecv_result(source, 0)
        assert value["status"] == "ok", value
        both = [dict(value, a=a, b=b, nic="eth1", round=0) for a, b in (("node1", "node2"), ("node2", "node1"))]
        data = build(two_node_raw(both, 100.0, "sendrecv_perf"), tmp_path / str(line_rate_ok))
        if line_rate_ok:
            assert value["gbps"] == pytest.approx(13.60 * 8)
            assert data["suspects"] == [] and data["healthy_nodes"] == ["node1", "node2"]
            continue
        assert value["gbps"] == pytest.approx(625 * 8)
        assert [p["status"] for p in data["pairs"]] == ["failed", "failed"]
        assert ("node1->node2 on eth1 measured 5000 Gb/s, above the ceiling 200 Gb/s (2 x pairwise_line_rate_gbps "
                "100)") in data["pairs"][0]["detail"]  # fmt: skip
        assert "peak busbw 625.0 GB/s" in data["pairs"][0]["detail"]  # what sendrecv_perf's table said
        assert [(s["kind"], s["node"]) for s in data["suspects"]] == [("link", "node1<->node2")]
        assert data["healthy_nodes"] == [] and data["unjudged"] == ["eth1"]


def test_a_heat_map_leaves_out_rates_too_large_to_draw_with_a_note_and_no_warning(tmp_path):
    """results whose rates reach 1.5e308 Gb/s (a line rate set absurdly high lets them through the ceiling, or a
    results.json edited by hand): matplotlib's colour scale overflowed ("overflow encountered", RuntimeWarning).
    Such a rate keeps its number in its cell but no colour, and the notes say which it was."""
    pytest.importorskip("matplotlib")
    import warnings

    pairs = [{"a": a, "b": b, "nic": "eth1", "gbps": 1.5e308 if a == "node1" else 0.19, "status": "ok"}
             for a, b in itertools.permutations(NODES, 2)]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning from the plotting fails the test
        files, notes = output.heatmaps({"nics": ["eth1"], "nodes": NODES, "pairs": pairs}, tmp_path)
    assert [f.name for f in files] == ["heatmap-eth1.png"]
    assert (tmp_path / "heatmap-eth1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert notes == ["heatmap-eth1.png: 3 value(s) left out of the plot, not finite or beyond 5e+307: node1->node2 "
                     "1.5e+308 Gb/s, node1->node3 1.5e+308 Gb/s, node1->node4 1.5e+308 Gb/s"]  # fmt: skip


def test_a_node_of_unknown_gpu_count_gets_one_slot_named_as_unknown(tmp_path):
    """The role passes each node's GPU count, null where preflight could not read it (rdmaforge_gpu_counts): the
    hostfile gives it 1 slot and says the count is unknown, not its GPUs (int(None) stopped the report)."""
    raw = {**raw_sweep(sweep({})), "slots": {"node1": 8, "node2": None, "node3": 0, "node4": 8}}
    build(raw, tmp_path)
    lines = (tmp_path / "hostfile.healthy").read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == [
        "node1 slots=8", "node2 slots=1", "node3 slots=1", "node4 slots=8"]  # fmt: skip
    assert "# node2: GPU count unknown (rdmaforge_node.gpu_count null): 1 slot, not its GPUs" in lines


@pytest.mark.parametrize(
    ("node2", "method", "note"),
    [({"gpu_count": 8, "gpu_source": "nvidia-smi"}, "sendrecv", None),
     ({"gpu_count": 0, "gpu_source": "sysfs"}, "iperf3",
      "sendrecv_perf: skipped, no GPU on node2; measured with iperf3"),
     ({"gpu_count": None, "gpu_source": "none"}, "iperf3",
      "sendrecv_perf: skipped, the GPU count of node2 could not be read (rdmaforge_node.gpu_count null); measured "
      "with iperf3")],
)  # fmt: skip
def test_the_sweep_method_takes_an_unknown_gpu_count_for_unknown(node2: dict, method: str, note: str | None) -> None:
    """The role's own choice (roles/pairwise/tasks/main.yml): sendrecv_perf only when every node counted GPUs; a
    node whose count is null is named as such, not as a node without GPUs (the lab's nodes count a real 0)."""
    import yaml
    from ansible.template import trust_as_template

    from rdmaforge.paths import PROJECT_ROOT
    from tests.unit.role_vars import evaluate, role_vars

    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "pairwise" / "tasks" / "main.yml").read_text())
    choose = next(t for t in tasks if t.get("name") == "Choose how pairs are measured")
    task_vars = {k: trust_as_template(v) for k, v in choose["vars"].items()}
    hostvars = {"node1": {"rdmaforge_node": {"gpu_count": 8, "gpu_source": "nvidia-smi"}},
                "node2": {"rdmaforge_node": node2}}  # fmt: skip
    templar = role_vars("pairwise", {}, ansible_play_hosts_all=["node1", "node2"], hostvars=hostvars,
                        pairwise_method="auto", **task_vars)  # fmt: skip
    assert evaluate(templar, "pairwise_auto_method") == method
    notes = choose["ansible.builtin.set_fact"]["pairwise_notes"].strip().removeprefix("{{").removesuffix("}}")
    assert evaluate(templar, notes) == ([note] if note else [])


def test_a_link_suspect_keeps_both_nodes_in_the_hostfile_and_says_so(tmp_path):
    slow = {("node1", "node2", "eth1"): 0.02, ("node2", "node1", "eth1"): 0.02}
    data = build(raw_sweep(sweep(slow)), tmp_path)
    assert data["healthy_nodes"] == NODES
    assert "# kept, but suspect link node1<->node2 on eth1" in (tmp_path / "hostfile.healthy").read_text()


def test_failed_measurements_show_their_status_in_the_matrix():
    status = {("node4", "node1", "eth2"): "hang"}
    facts = {n: lab_fact(i) for i, n in enumerate(NODES, start=1)}
    made = plan.make_plan(facts, "all").to_dict()
    measured = sweep({}, status)
    rails = score(measured, NODES, made["rails"], Thresholds())
    data = output.results(measured, rails, made, Thresholds(), "iperf3")
    assert output.matrix(data, "eth2")[("node4", "node1")] == "HANG"


def test_a_table_without_a_line_rate_says_the_rate_was_not_judged():
    """Every pair at 1 Gb/s and no line rate given: nothing is slower than its peers, so no suspect is named, and
    the table must say that the rate itself was never judged rather than read as a clean bill of health."""
    facts = {n: lab_fact(i) for i, n in enumerate(NODES, start=1)}
    made = plan.make_plan(facts, "all").to_dict()
    measured = sweep({}, base=1.0)
    unset = output.table(output.results(measured, score(measured, NODES, made["rails"], Thresholds()), made,
                                        Thresholds(), "iperf3"))  # fmt: skip
    assert "suspects: none" in unset
    assert "not judged: the line rate (no pairwise_line_rate_gbps)" in unset
    limits = Thresholds(line_rate_gbps=1.0)
    judged = output.table(output.results(measured, score(measured, NODES, made["rails"], limits), made, limits,
                                         "iperf3"))  # fmt: skip
    assert "not judged: the line rate" not in judged


def test_a_node_slower_than_its_peers_but_no_suspect_is_named_with_its_ratio():
    """node3 at 60% of the others on every eth1 pair: no suspect with the default slow_ratio 0.5, as documented,
    but the table names the rail's slowest node and its ratio to the pair median (it was only in results.json)."""
    facts = {n: lab_fact(i) for i, n in enumerate(NODES, start=1)}
    made = plan.make_plan(facts, "all").to_dict()
    slow = {(a, b, "eth1"): 0.19 * 0.6 for a, b in itertools.permutations(NODES, 2) if "node3" in (a, b)}
    measured = sweep(slow)
    text = output.table(output.results(measured, score(measured, NODES, made["rails"], Thresholds()), made,
                                       Thresholds(), "iperf3"))  # fmt: skip
    assert "suspects: none" in text
    eth1 = [m.gbps for m in measured if m.nic == "eth1"]
    ratio = 0.19 * 0.6 / statistics.median(eth1)
    assert (f"slowest node: node3, its median pair 0.11 Gb/s is {ratio:.2f} x the pair median (a pair below 0.5 x "
            "the reference is slow)") in text, text
    assert text.count("slowest node: ") == 2  # one per rail (eth2: all equal, the first by name)


def test_past_32_nodes_the_shown_table_leaves_the_matrix_to_table_txt(tmp_path, capsys):
    """At 1000 nodes a rail's matrix is 9 MB of text, and the CLI and the role's output printed table.txt in full
    (review round 21b). Past output.SHOWN_MATRIX_NODES nodes what they show has one line per rail instead; the file
    keeps every row."""
    nodes = [f"node{i:02d}" for i in range(1, 34)]  # 33
    facts = {n: lab_fact(i) for i, n in enumerate(nodes, start=1)}
    raw = {"plan": plan.make_plan(facts, "eth1").to_dict(),
           "measurements": [m.to_dict() for m in sweep({}, nodes=nodes, rails=("eth1",))],
           "thresholds": {"slow_ratio": 0.5, "node_fraction": 0.5, "line_rate_gbps": 0.2},
           "method": "iperf3", "notes": [], "slots": {n: 1 for n in nodes}}  # fmt: skip
    out = tmp_path / "out"
    assert main([str(write_raw(tmp_path, raw)), str(out)]) == 0
    shown = json.loads(capsys.readouterr().out)["table"]
    assert "(33 x 33 matrix not shown here, more than 32 nodes: it is in table.txt)" in shown, shown
    assert "slowest node: node01" in shown and "suspects: none" in shown
    assert not [line for line in shown.splitlines() if line[1:].startswith("node")]
    full = (out / "table.txt").read_text()
    assert len([line for line in full.splitlines() if line[1:].startswith("node")]) == 33  # a mark, then the row
    # A rail of as many nodes as the limit (here 33 with a limit of 33) shows its matrix.
    small = output.table(json.loads((out / "results.json").read_text()), 33)
    assert "not shown here" not in small and small == full


# --- GPU path: real nccl-tests sendrecv output ------------------------------------------------------------


def test_sendrecv_command_uses_one_rank_per_node_and_the_rail():
    argv = sendrecv.command("node1", "node2", "eth1", "/opt/nccl-tests/build/sendrecv_perf", hcas={"eth1": "mlx5_0"})
    assert argv[:6] == ["mpirun", "--allow-run-as-root", "-np", "2", "-H", "node1:1,node2:1"]
    assert "NCCL_IB_HCA==mlx5_0" in argv and "-g" in argv and argv[argv.index("-g") + 1] == "1"
    socket_argv = sendrecv.command("node1", "node2", "eth2", "sendrecv_perf")
    assert "NCCL_SOCKET_IFNAME==eth2" in socket_argv


def exported(argv: list[str]) -> list[str]:
    """What mpirun exports to the ranks (its -x arguments)."""
    return [argv[i + 1] for i, item in enumerate(argv) if item == "-x"]


def test_each_rail_is_measured_on_its_own_nic_whatever_transport_nccl_would_pick():
    """With only NCCL_SOCKET_IFNAME per rail, NCCL on an RDMA fabric still ran over its IB transport (or the AIACC
    plugin) on the HCA it picked itself, the same for every rail: each rail's result was that HCA's, and a dead
    rail scored healthy. The transport is held to the one that honours the rail's selection (NCCL's env docs:
    NCCL_SOCKET_IFNAME picks IP interfaces, NCCL_IB_HCA RDMA devices; NCCL_NET names the network to use)."""
    mapped = exported(sendrecv.command("node1", "node2", "ib1", "sendrecv_perf", hcas={"ib1": "mlx5_1:1"}))
    assert mapped[:2] == ["NCCL_NET=IB", "NCCL_IB_HCA==mlx5_1:1"], mapped
    unmapped = exported(sendrecv.command("node1", "node2", "ib2", "sendrecv_perf", hcas={"ib1": "mlx5_1:1"}))
    assert unmapped[:2] == ["NCCL_NET=Socket", "NCCL_SOCKET_IFNAME==ib2"], unmapped
    assert not any(item.startswith("NCCL_IB_HCA") for item in unmapped)


def test_sendrecv_peak_from_a_real_two_node_run(shared_dir: Path):
    text = (shared_dir / CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt").read_text()
    result = sendrecv.read_output(text)
    # The file's sendrecv table peaks at 13.61 GB/s in-place and 13.60 GB/s out-of-place (its 8589934592 B row).
    assert result.status == "ok"
    assert result.gbps == pytest.approx(13.60 * 8)


def test_sendrecv_of_an_eight_gpu_pair_after_a_failed_alltoall(shared_dir: Path):
    text = (shared_dir / CORPUS / "03_alltoall_fail_sendrecv_v2.17.6_h100_8gpu_2node.txt").read_text()
    result = sendrecv.read_output(text)
    assert result.status == "ok"  # the alltoall run failed; the sendrecv run after it completed (avg 5.9895)
    assert result.gbps is not None and result.gbps > 5.9895 * 8


def test_a_sendrecv_run_cut_off_after_its_header_is_a_hang(shared_dir: Path):
    text = (shared_dir / CORPUS / "20_alltoall_ok_sendrecv_HANG_v2.17.6_h100_2gpu_2node.txt").read_text()
    result = sendrecv.read_output(text)
    assert result.status == "hang" and result.gbps is None


@pytest.mark.parametrize(("rc", "status", "named"), [(1, "failed", "exited 1"), (124, "hang", "exit 124")])
def test_a_sendrecv_launch_that_exited_non_zero_is_not_ok_whatever_its_table(shared_dir: Path, tmp_path: Path,
                                                                            rc: int, status: str, named: str) -> None:
    """Corpus 05's complete sendrecv table (a peak of 13.60 GB/s) and then mpirun exiting non-zero (a rank failing
    after the table, mpirun's error at teardown, the timeout): through the role's filter, no direction is ok and the
    two-node sweep names its pair, not 'no suspects'."""
    from filter_plugins.rdmaforge_pairwise import pairwise_sendrecv_result

    text = (shared_dir / CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt").read_text()
    exited_0 = pairwise_sendrecv_result(text, 0)
    assert exited_0["status"] == "ok" and exited_0["gbps"] == pytest.approx(13.60 * 8)
    value = pairwise_sendrecv_result(text, rc)
    assert value["status"] == status and value["gbps"] is None and named in value["detail"], value
    facts = {"node1": lab_fact(1, nics=1), "node2": lab_fact(2, nics=1)}
    made = plan.make_plan(facts, "all").to_dict()
    measured = [dict(value, a=a, b=b, nic="eth1", round=0) for a, b in (("node1", "node2"), ("node2", "node1"))]
    data = build({"plan": made, "measurements": measured, "method": "sendrecv_perf"}, tmp_path)
    assert [m["status"] for m in data["pairs"]] == [status, status]
    assert [(s["node"], s["kind"]) for s in data["suspects"]] == [("node1<->node2", "link")]
    assert data["unjudged"] == ["eth1"]


def test_output_without_a_sendrecv_run_is_not_a_measurement():
    assert sendrecv.read_output("mpirun: command not found\n").status == "failed"
    assert sendrecv.read_output("", exit_code=124).status == "hang"


# --- iperf3 (real iperf3 on loopback) ---------------------------------------------------------------------


def test_iperf3_errors_are_classified():
    assert iperf3.read_result('{"error": "unable to connect to server: Connection refused"}', 1, False)["status"] == (
        "unreachable"
    )
    assert iperf3.read_result('{"error": "unable to create a new stream"}', 1, False)["status"] == "failed"
    assert iperf3.read_result("", -1, True)["status"] == "hang"
    assert iperf3.read_result("not json", 1, False)["status"] == "failed"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def iperf3_binary() -> str:
    found = shutil.which("iperf3")
    if found is None:
        pytest.skip("iperf3 is not installed on this machine (apt-get install iperf3)")
    return found


def test_iperf3_on_loopback_measures_and_reports_a_refused_peer(iperf3_binary, tmp_path):
    port = free_port()
    pidfile = tmp_path / "server.pid"
    subprocess.run(iperf3.server_argv(iperf3_binary, "127.0.0.1", "lo", port, str(pidfile), 10), check=True,
                   timeout=120)  # fmt: skip
    # A hang guard, not a speed check: at SCHED_IDLE behind the lab the daemonised server can take seconds to listen.
    deadline = time.monotonic() + 120
    while not iperf3.listening(Path("/proc/net/tcp").read_text(), port):
        assert time.monotonic() < deadline, "the iperf3 server never listened"
        time.sleep(0.05)
    # The -R direction: the server, bound to the address and the device, sends.
    argv = iperf3.client_argv(iperf3_binary, "127.0.0.1", "127.0.0.1", "lo", port, 2, 1, 2000, reverse=True)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    result = iperf3.read_result(proc.stdout, proc.returncode, False)
    assert result["status"] == "ok" and result["gbps"] > 0.1, result
    nobody = iperf3.client_argv(iperf3_binary, "127.0.0.1", "127.0.0.1", "lo", free_port(), 1, 1, 2000, reverse=True)
    refused = subprocess.run(nobody, capture_output=True, text=True, timeout=120)
    assert iperf3.read_result(refused.stdout, refused.returncode, False)["status"] == "unreachable"


# --- lab impair (command lines; the lab test applies them) -----------------------------------------------


def test_impair_rates_and_targets_are_checked():
    assert impair.rate_bits("20mbit") == 20_000_000
    with pytest.raises(ValueError, match="20mbit"):
        impair.rate_bits("20 MB/s")
    with pytest.raises(LabError, match="eth0 carries SSH"):
        impair.resolve(4, 2, "node1", "eth0")
    with pytest.raises(LabError, match="extra NICs: eth1, eth2"):
        impair.resolve(4, 2, "node1", "eth7")
    with pytest.raises(LabError, match="nodes: node1, node2"):
        impair.resolve(2, 2, "node9", "eth1")


def test_impair_all_goes_with_clear_or_a_plain_rate():
    import argparse

    from rdmaforge.commands.lab import _impair_targets

    def targets(**flags):
        args = argparse.Namespace(**{"node": "all", "nic": "all", "clear": False, "rate": None, "to": None, **flags})
        return sorted((t.node.name, t.nic) for t in _impair_targets(args, 2, 2))

    every = [("node1", "eth1"), ("node1", "eth2"), ("node2", "eth1"), ("node2", "eth2")]
    assert targets(clear=True) == every
    assert targets(rate="200mbit") == every
    assert targets(node="node2", rate="200mbit") == [("node2", "eth1"), ("node2", "eth2")]
    for refused in ({"down": True}, {"rate": "20mbit", "to": "node2"}):
        with pytest.raises(ValueError, match="'all' goes with --clear, or with --rate without --to"):
            targets(**refused)


def test_a_link_limit_filters_on_the_peer_address():
    commands = impair.peer_rate_commands("eth1", "20mbit", "198.18.1.12", others="200mbit")
    assert commands[0][:8] == ["tc", "qdisc", "add", "dev", "eth1", "root", "handle", "1:"]
    assert commands[-1][-4:] == ["dst", "198.18.1.12/32", "flowid", "1:10"]
    assert "200mbit" in commands[2]


# --- the command's exit code ------------------------------------------------------------------------------


def run_outcome(failures: dict[str, int], problems: list, dark: dict[str, int] | None = None, rc: int = 2):
    from rdmaforge.runner import execute
    from rdmaforge.runner.events import EventLog
    from rdmaforge.runner.recap import from_stats

    stats = {"ok": {"node1": 5, "node2": 5}, "changed": {}, "failures": failures, "dark": dark or {}, "skipped": {},
             "rescued": {}, "ignored": {}, "processed": {"node1": 1, "node2": 1}}  # fmt: skip
    log = EventLog()
    log.problems = problems
    return execute.Outcome("failed" if rc else "successful", rc, log, from_stats(stats), Path("/nonexistent"), 1.0)


def test_exit_codes_of_the_command():
    from rdmaforge.commands.pairwise import pairwise_exit
    from rdmaforge.runner.events import HostProblem
    from rdmaforge.runner.exit_codes import ExitCode

    verdict = HostProblem(
        "node1", "Fail when suspects are found", "ansible.builtin.fail", "pairwise suspects: node3/eth1"
    )
    refused = HostProblem("node1", "Stop", "ansible.builtin.assert", "pairwise: node2: no IPv4 address on eth9")
    crash = HostProblem("node2", "Measure the round's pairs", "pairwise_iperf", "boom")
    found = {"suspects": [{"node": "node3", "nic": "eth1", "kind": "node", "evidence": "..."}]}
    assert pairwise_exit(run_outcome({"node1": 1}, [verdict]), found) == ExitCode.SUSPECTS
    assert pairwise_exit(run_outcome({}, [], rc=0), {"suspects": []}) == ExitCode.OK
    assert pairwise_exit(run_outcome({"node1": 1}, [refused]), None) == ExitCode.BAD_INPUT
    assert pairwise_exit(run_outcome({"node1": 1, "node2": 1}, [verdict, crash]), found) == ExitCode.HOST_FAILED
    assert pairwise_exit(run_outcome({}, [], dark={"node2": 1}), None) == ExitCode.UNREACHABLE
    assert pairwise_exit(run_outcome({}, [], rc=0), None) == ExitCode.INCOMPLETE


def test_directions_never_measured_are_missing_and_count_against_the_pair(tmp_path):
    measured = [m for m in sweep({}) if not (m.a == "node4" and m.nic == "eth1")]  # node4 left the play
    data = build(raw_sweep(measured), tmp_path)
    missing = [p for p in data["pairs"] if p["status"] == "missing"]
    assert {(p["a"], p["nic"]) for p in missing} == {("node4", "eth1")} and len(missing) == 3
    assert [(s["kind"], s["node"], s["nic"]) for s in data["suspects"]] == [("node", "node4", "eth1")]


def test_a_rail_where_no_pair_completed_is_not_judged(tmp_path):
    status = {(a, b, "eth2"): "unreachable" for a, b in itertools.permutations(NODES, 2)}
    data = build(raw_sweep(sweep({}, status)), tmp_path)
    assert data["suspects"] == [] and data["unjudged"] == ["eth2"]
    table = (tmp_path / "table.txt").read_text()
    assert "suspects: none named" in table and "not judged: eth2" in table


def test_a_node_with_no_completed_pair_on_a_rail_is_not_healthy(tmp_path):
    """Every pair of eth2 unreachable: the rail is not judged, and no node was measured there. The sweep said
    'healthy nodes: node1 node2 node3 node4' and wrote all four into hostfile.healthy. Likewise on eth1 where every
    pair but node1-node2 hung on 6 nodes: the rail is the suspect, and node3 to node6, whose every measurement hung,
    were healthy. A node is healthy only where some pair of it completed, on every rail."""
    unreachable = {(a, b, "eth2"): "unreachable" for a, b in itertools.permutations(NODES, 2)}
    data = build(raw_sweep(sweep({}, unreachable)), tmp_path / "unreachable")
    assert data["unjudged"] == ["eth2"] and data["healthy_nodes"] == []
    hostfile = (tmp_path / "unreachable" / "hostfile.healthy").read_text()
    assert [line for line in hostfile.splitlines() if not line.startswith("#")] == []
    assert "# left out: node1 (no pair of it completed on eth2: not judged)" in hostfile
    table = (tmp_path / "unreachable" / "table.txt").read_text()
    assert "not judged: node1: no pair of it completed on eth2" in table
    from rdmaforge.commands.pairwise import pairwise_exit
    from rdmaforge.runner.exit_codes import ExitCode

    assert pairwise_exit(run_outcome({}, [], rc=0), {"suspects": [], "unproven": {"node3": ["eth2"]}}) == (
        ExitCode.INCOMPLETE
    )

    nodes = [f"node{i}" for i in range(1, 7)]
    hung = {(a, b, "eth1"): "hang" for a, b in itertools.permutations(nodes, 2) if {a, b} != {"node1", "node2"}}
    made = plan.make_plan({n: lab_fact(i, nics=1) for i, n in enumerate(nodes, start=1)}, "all").to_dict()
    measured = [m.to_dict() for m in sweep({}, hung, nodes=nodes, rails=("eth1",))]
    data = build({"plan": made, "measurements": measured, "method": "iperf3"}, tmp_path / "hung")
    assert [s["kind"] for s in data["suspects"]] == ["rail"]
    assert data["healthy_nodes"] == ["node1", "node2"]
    assert data["unproven"] == {n: ["eth1"] for n in nodes[2:]}


def test_a_rail_slow_everywhere_is_a_suspect_in_every_output_and_exits_7(tmp_path):
    from rdmaforge.commands.pairwise import pairwise_exit
    from rdmaforge.runner.events import HostProblem
    from rdmaforge.runner.exit_codes import ExitCode

    raw = raw_sweep(sweep({}, rails=("eth1", "eth2"), base=1.0))
    raw["thresholds"]["line_rate_gbps"] = 100.0
    data = build(raw, tmp_path)
    assert [(s["kind"], s["nic"]) for s in data["suspects"]] == [("rail", "eth1"), ("rail", "eth2")]
    assert data["healthy_nodes"] == NODES  # no node is worse than another
    hostfile = (tmp_path / "hostfile.healthy").read_text()
    assert "# kept, but slow with no node to blame on eth1: 6 of 6 pairs slow" in hostfile
    table = (tmp_path / "table.txt").read_text()
    assert "suspects (2):" in table and "rail (rail-wide)      eth1" in table and "suspects: none" not in table
    verdict = HostProblem("node1", "Fail when suspects are found", "ansible.builtin.fail",
                          "pairwise suspects: rail eth1/eth1, rail eth2/eth2")  # fmt: skip
    assert pairwise_exit(run_outcome({"node1": 1}, [verdict]), data) == ExitCode.SUSPECTS


def test_an_unjudged_rail_exits_incomplete():
    from rdmaforge.commands.pairwise import pairwise_exit
    from rdmaforge.runner.events import HostProblem
    from rdmaforge.runner.exit_codes import ExitCode

    verdict = HostProblem("node1", "Fail when a rail could not be judged", "ansible.builtin.fail",
                          "pairwise incomplete: no pair completed on eth2")  # fmt: skip
    assert pairwise_exit(run_outcome({"node1": 1}, [verdict]), {"suspects": [], "unjudged": ["eth2"]}) == (
        ExitCode.INCOMPLETE
    )


def test_a_node_in_no_pair_of_the_random_rounds_is_not_judged_healthy(tmp_path):
    """--rounds 1 on 5 nodes: one perfect matching pairs 4 of them, the fifth sits the only round out. Every
    measured pair was fine, and the sweep said 'suspects: none', exit 0, and listed the never-measured node in
    hostfile.healthy."""
    from rdmaforge.commands.pairwise import pairwise_exit, verdict_case
    from rdmaforge.runner.exit_codes import ExitCode

    nodes = [*NODES, "node5"]
    facts = {n: lab_fact(i) for i, n in enumerate(nodes, start=1)}
    made = plan.make_plan(facts, "eth1", rounds=1, seed=0).to_dict()
    (left_out,) = set(nodes) - {n for pair in made["rounds"][0] for n in pair}
    measured = [m for m in sweep({}, nodes=nodes, rails=("eth1",)) if left_out not in (m.a, m.b)]
    raw = {**raw_sweep(measured), "plan": made, "slots": {n: 1 for n in nodes}}
    data = build(raw, tmp_path)
    assert data["suspects"] == [] and data["unjudged"] == [] and data["unmeasured"] == [left_out]
    assert data["healthy_nodes"] == [n for n in nodes if n != left_out]
    hostfile = (tmp_path / "hostfile.healthy").read_text()
    assert f"# left out: {left_out} (not measured" in hostfile and f"\n{left_out} slots" not in hostfile
    table = (tmp_path / "table.txt").read_text()
    assert "suspects: none named" in table and f"not judged: {left_out}: in no pair of the 1 round(s)" in table
    assert pairwise_exit(run_outcome({}, [], rc=0), data) == ExitCode.INCOMPLETE
    case = verdict_case(data)
    assert case.outcome == "error" and f"{left_out} (in no pair: not measured)" in case.message
    # The round-robin schedule pairs every node: nothing is left out.
    full = build({**raw_sweep(sweep({}, nodes=nodes, rails=("eth1",))), "plan": plan.make_plan(facts, "eth1")
                  .to_dict()}, tmp_path / "full")  # fmt: skip
    assert full["unmeasured"] == [] and full["healthy_nodes"] == nodes
    # With no line rate the level of the pairs is not judged (exit 5); with one, this sweep is judged in full.
    assert pairwise_exit(run_outcome({}, [], rc=0), full) == ExitCode.INCOMPLETE
    assert pairwise_exit(run_outcome({}, [], rc=0), {**full, "line_rate_unjudged": False}) == ExitCode.OK


def test_seed_003s_one_stream_check_is_shown_beside_the_multi_stream_rate_and_not_judged(tmp_path):
    """The role measures the first pair again with one stream; the report sets each direction beside the sweep's
    multi-stream rate. Nothing is judged by it: a slow single stream names no suspect and changes no exit."""
    raw = raw_sweep(sweep({}))
    single = [Measurement("node1", "node2", "eth1", 0.05, "ok"), Measurement("node2", "node1", "eth1", None, "hang",
                                                                             detail="killed after 15 s")]  # fmt: skip
    raw["single_stream"] = {"streams": 4, "measurements": [m.to_dict() for m in single]}
    data = build(raw, tmp_path)
    assert data["suspects"] == [] and data["unjudged"] == []
    first, second = data["single_stream"]
    assert (first["single_gbps"], first["multi_gbps"], first["streams"]) == (0.05, 0.19, 4)
    assert first["share"] == pytest.approx(0.05 / 0.19)
    assert second["share"] is None and second["status"] == "hang"
    table = (tmp_path / "table.txt").read_text()
    assert "one TCP stream (seed 003; measured, not judged): eth1 node1->node2 0.05 Gb/s, 26% of its 4-stream " \
           "0.19 Gb/s" in table  # fmt: skip
    assert "one TCP stream (seed 003): eth1 node2->node1 not compared: hang (killed after 15 s)" in table
    # A sweep without the check (sendrecv, one stream, or switched off) has none.
    assert build(raw_sweep(sweep({})), tmp_path / "none")["single_stream"] == []


# --- a pair measured more than once, a slow majority, too few rounds (exploratory findings) -------------------


def test_a_direction_measured_in_several_rounds_is_judged_by_its_worst():
    """--rounds K repeats pairs: a hang or a slow run in one round was hidden by a later good one (the last
    measurement of a direction won), and the sweep said no suspect."""
    good = sweep({}, rails=("eth1",), base=90.0)
    hang = [Measurement("node1", "node2", "eth1", None, "hang", round=0)]
    slow = [Measurement("node1", "node2", "eth1", 9.0, "ok", round=0)]
    for earlier in (hang, slow):
        later = [Measurement(m.a, m.b, m.nic, m.gbps, m.status, round=1) for m in good]
        assert suspects_of(earlier + later, rails=("eth1",)) == [("link", "node1<->node2", "eth1")]
    # and the matrix shows what was judged, not the last round
    results = output.results(hang + good, score(hang + good, NODES, ("eth1",), Thresholds()),
                             {"nodes": NODES, "rails": ["eth1"], "rounds": []}, Thresholds(), "iperf3")  # fmt: skip
    assert output.matrix(results, "eth1")[("node1", "node2")] == "HANG"
    assert output.matrix(results, "eth1")[("node2", "node1")] == "90.00"


def test_a_slow_majority_is_not_the_norm():
    """5 nodes: node1-node3 reach 10 Gb/s with anyone, node4-node5 100 Gb/s between them. The median of each node's
    fastest pair (10) made the slow majority the reference: no suspect, exit 0. The rail's fastest pair shows what it
    carries; the slow pairs cannot be pinned on one node or link, so the rail is the suspect."""
    nodes = [f"node{i}" for i in range(1, 6)]
    rates = {(a, b, "eth1"): 100.0 for a, b in (("node4", "node5"), ("node5", "node4"))}
    measured = sweep(rates, nodes=nodes, rails=("eth1",), base=10.0)
    assert suspects_of(measured, nodes, ("eth1",)) == [("rail", "rail eth1", "eth1")]
    (rail,) = score(measured, nodes, ("eth1",), Thresholds())
    assert rail.reference_gbps == 100.0
    assert ("rail reference 100.00 Gb/s, its fastest pair: most nodes' fastest pair (10.00 Gb/s, the median) is "
            "below 0.5 x it") in rail.suspects[0].evidence  # fmt: skip
    # a fastest pair within 1/slow_ratio of the others keeps the median reference (an even rail stays clean)
    rates = {(a, b, "eth1"): 18.0 for a, b in (("node4", "node5"), ("node5", "node4"))}
    assert suspects_of(sweep(rates, nodes=nodes, rails=("eth1",), base=10.0), nodes, ("eth1",)) == []


def test_a_pair_alone_in_its_round_cannot_blame_either_node():
    """One random round on 4 nodes: node1-node2 slow, node3-node4 fine. Neither node1 nor node2 has another pair,
    so nothing shows which is slow: before, both were node suspects 'whose partners' other pairs are fine' and
    both left the hostfile. Now the pair is a link suspect that says why it cannot tell."""
    measured = [Measurement(a, b, "eth1", 10.0 if {a, b} == {"node1", "node2"} else 90.0, "ok")
                for a, b in (("node1", "node2"), ("node2", "node1"), ("node3", "node4"), ("node4", "node3"))]
    (rail,) = score(measured, NODES, ("eth1",), Thresholds())
    assert [(s.kind, s.node) for s in rail.suspects] == [("link", "node1<->node2")]
    assert "neither node has another pair on this rail (too few rounds): cannot tell which" in rail.suspects[0].evidence


@pytest.mark.parametrize(("status", "gbps", "why"), [
    ("ok", None, "no rate reported"),
    ("OK", 0.19, 'status "OK" is none of ok, failed, hang, unreachable, missing'),
    ("passed", 0.19, 'status "passed" is none of'),
    ("", 0.19, 'status "" is none of'),
])  # fmt: skip
def test_a_measurement_that_is_no_known_result_is_shown_failed(tmp_path, status, gbps, why):
    """It was judged failed but shown as OK (the matrix) or 'n1-n2 ok' (the evidence)."""
    measured = sweep({})
    measured[0] = Measurement(measured[0].a, measured[0].b, measured[0].nic, gbps, status)
    data = build(raw_sweep(measured), tmp_path)
    (pair,) = [p for p in data["pairs"] if (p["a"], p["b"], p["nic"]) == (measured[0].a, measured[0].b, "eth1")]
    assert pair["status"] == "failed" and why in pair["detail"], pair
    assert [(s["kind"], s["evidence"].split(" (")[0]) for s in data["suspects"]] == [("link", "node1-node2 failed")]
    assert output.matrix(data, "eth1")[("node1", "node2")] == "FAILED"


def test_a_pair_slow_only_against_the_line_rate_says_so():
    nodes = ["node1", "node2"]
    limits = Thresholds(line_rate_gbps=100.0, min_line_fraction=0.5)
    (rail,) = score(sweep({}, nodes=nodes, rails=("eth1",), base=10.0), nodes, ("eth1",), limits)
    (link,) = rail.suspects
    assert "(rail reference 10.00 Gb/s, below 0.5 x line rate 100 Gb/s)" in link.evidence, link.evidence


def test_a_multi_stream_run_at_zero_is_not_called_incomplete():
    line = output.single_stream_lines([{"nic": "eth1", "a": "n1", "b": "n2", "streams": 4, "single_gbps": 1.0,
                                        "multi_gbps": 0.0, "share": None, "status": "ok", "detail": ""}])  # fmt: skip
    assert line == ["one TCP stream (seed 003): eth1 n1->n2 not compared: the 4-stream run moved 0 Gb/s"]


def test_a_second_sweep_into_the_same_output_directory_is_scored_again(tmp_path: Path) -> None:
    """roles/pairwise/tasks/report.yml for real, twice into one pairwise_output_dir (fake nodes on this machine,
    their measurements given): the scoring task had `creates: results.json`, so the second sweep was not scored,
    its raw.json sat beside the first sweep's results, and the play failed on the skipped task's empty output."""
    from conftest import local_inventory, run_playbook

    inventory = local_inventory(tmp_path / "hosts.yml", NODES)
    out = tmp_path / "sweep"
    facts = {n: lab_fact(i) for i, n in enumerate(NODES, start=1)}

    def sweep_into(measured: list[Measurement], name: str) -> subprocess.CompletedProcess[str]:
        by_node = {n: [m.to_dict() for m in measured if m.a == n] for n in NODES}
        playbook = tmp_path / f"{name}.yml"
        playbook.write_text(yaml.safe_dump([{
            "name": "pairwise's report", "hosts": "all", "gather_facts": False,
            "vars": {"by_node": by_node, "pairwise_plan": plan.make_plan(facts, "all").to_dict(),
                     "pairwise_use": "iperf3", "pairwise_notes": [], "pairwise_nodes": NODES,
                     "pairwise_output_dir": str(out), "pairwise_fail_on_suspects": False},
            "tasks": [
                {"name": "Take the node's measurements",
                 "ansible.builtin.set_fact": {"pairwise_measured": "{{ by_node[inventory_hostname] }}"}},
                {"name": "Report", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.pairwise",
                                                                    "tasks_from": "report"}},
            ],
        }]))  # fmt: skip
        return run_playbook(str(playbook), inventory=inventory, env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=600)

    first = sweep_into(sweep({}), "first")
    assert first.returncode == 0, first.stdout[-3000:]
    assert json.loads((out / "results.json").read_text())["suspects"] == []
    # These nodes have no rdmaforge_node fact: their GPU counts are unknown, null in raw.json's slots (the report
    # refused that, exit 64: every sweep of nodes whose GPUs preflight could not count failed there).
    assert json.loads((out / "raw.json").read_text())["slots"] == dict.fromkeys(NODES)
    healthy = (out / "hostfile.healthy").read_text()
    assert "# node1: GPU count unknown (rdmaforge_node.gpu_count null): 1 slot" in healthy, healthy
    slow = {(a, b, "eth1"): 0.01 for a, b in itertools.permutations(NODES, 2) if "node3" in (a, b)}
    second = sweep_into(sweep(slow), "second")
    assert second.returncode == 0, second.stdout[-3000:]
    suspects = json.loads((out / "results.json").read_text())["suspects"]
    assert [(s["node"], s["nic"]) for s in suspects] == [("node3", "eth1")], suspects


def test_a_node_lost_before_the_sweep_is_named_as_lost_not_as_lacking_preflight(tmp_path: Path) -> None:
    """A node unreachable at the start has no rdmaforge_node fact: the sweep stopped with 'no rdmaforge_node fact
    (preflight) for ghost', sending the user to a preflight that would not help. The stop names it as lost."""
    from conftest import local_inventory, run_playbook

    ghost = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1}
    inventory = local_inventory(tmp_path / "hosts.yml", ["node1", "node2"], others={"ghost": ghost})
    playbook = tmp_path / "sweep.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "pairwise with a node lost", "hosts": "all", "gather_facts": False,
        "tasks": [
            {"name": "Reach the nodes", "ansible.builtin.ping": {}},
            {"name": "Publish the facts", "ansible.builtin.set_fact": {"rdmaforge_node": "{{ fact }}"},
             "vars": {"fact": lab_fact(1)}},
            {"name": "Sweep", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.pairwise"}},
        ],
    }]))  # fmt: skip
    proc = run_playbook(str(playbook), inventory=inventory, env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=600)
    assert proc.returncode != 0, proc.stdout[-3000:]
    said = " ".join(proc.stdout.split())
    assert "no rdmaforge_node fact (preflight) for ghost; ghost unreachable or failed earlier in this run" in said, (
        said[-3000:])  # fmt: skip


# --- review round 17a ------------------------------------------------------------------------------------------


def test_a_fleet_slow_alike_without_a_line_rate_is_not_judged(tmp_path: Path) -> None:
    """Every pair at 1 Gb/s with no pairwise_line_rate_gbps (the default): the pairs agree, so no suspect, and the
    sweep exited 0 with every node 'healthy' though the table said the line rate was not judged; results.json did
    not say so. Now it says so and the command exits 5; with a line rate the same sweep names the rail (exit 7)."""
    from rdmaforge.commands.pairwise import kept_nodes_label, pairwise_exit, verdict_case
    from rdmaforge.runner.exit_codes import ExitCode

    data = build(raw_sweep(sweep({}, base=1.0)), tmp_path / "none")
    assert data["suspects"] == [] and data["line_rate_unjudged"] is True
    assert pairwise_exit(run_outcome({}, [], rc=0), data) == ExitCode.INCOMPLETE
    case = verdict_case(data)
    assert case.outcome == "error" and "not judged: the line rate (no pairwise_line_rate_gbps)" in case.message
    assert kept_nodes_label(data).startswith("nodes with no suspect (not judged")
    assert "not judged: the line rate" in (tmp_path / "none" / "table.txt").read_text()
    raw = raw_sweep(sweep({}, base=1.0))
    raw["thresholds"]["line_rate_gbps"] = 100
    judged = build(raw, tmp_path / "judged")
    assert judged["line_rate_unjudged"] is False
    assert [s["kind"] for s in judged["suspects"]] == ["rail", "rail"]
    assert pairwise_exit(run_outcome({}, [], rc=0), judged) == ExitCode.SUSPECTS
    assert kept_nodes_label(judged).startswith("nodes kept")


def test_a_true_line_rate_is_refused_before_the_sweep() -> None:
    """pairwise_line_rate_gbps: true (YAML's yes) passed the checks before the sweep (float(True) is 1.0), then the
    report refused raw.json after the whole sweep, exit 2. Both checks refuse it now, naming it."""
    from rdmaforge import inventory_checks
    from rdmaforge.pairwise.report import thresholds_from

    with pytest.raises(ValueError, match="pairwise_line_rate_gbps=true is not a number"):
        thresholds_from({"line_rate_gbps": True})
    (problem,) = inventory_checks.pairwise_threshold_problems("node1", {"pairwise_line_rate_gbps": True})
    assert problem.variable == "pairwise_line_rate_gbps" and "is not a number" in problem.message


def test_a_timeout_shorter_than_a_measurement_is_refused() -> None:
    """pairwise_iperf_seconds=60 under the default pairwise_timeout of 30: every measurement was killed and recorded
    as a hang, and on two nodes the pair was named a suspect link."""
    from rdmaforge import inventory_checks

    (problem,) = inventory_checks.pairwise_timeout_problems("node1", {"pairwise_iperf_seconds": 60})
    assert problem.variable == "pairwise_timeout"
    assert ("pairwise_timeout=30 is shorter than one iperf3 measurement takes (pairwise_iperf_seconds=60, and 5 s "
            "to start and report): every iperf3 pair would be recorded as a hang; allowed: at least 65 seconds"
            ) in problem.message  # fmt: skip
    assert inventory_checks.pairwise_timeout_problems("node1", {"pairwise_iperf_seconds": 25}) == []  # 25+5=30
    # seed-like settings that work: 10 s per direction under a 15 s timeout
    assert inventory_checks.pairwise_timeout_problems("node1", {"pairwise_iperf_seconds": 10,
                                                                "pairwise_timeout": 15}) == []  # fmt: skip
    assert inventory_checks.pairwise_timeout_problems("node1", {"pairwise_iperf_seconds": 60,
                                                                "pairwise_method": "sendrecv"}) == []  # fmt: skip


def test_a_node_with_one_slow_pair_is_no_node_suspect() -> None:
    """--rounds on 5 nodes left node5 one pair, with node2, and it was slow; node2's other pairs were fine. node5 was
    named a node suspect and left out of hostfile.healthy on that one pair, which cannot tell the node from the link.
    The pair is named as a link now, saying which node had no other pair."""
    nodes = ["node1", "node2", "node3", "node4", "node5"]
    measured = [m for m in sweep({}, nodes=nodes, rails=("eth1",)) if "node5" not in (m.a, m.b)]
    measured += [Measurement("node5", "node2", "eth1", 0.02, "ok"), Measurement("node2", "node5", "eth1", 0.02, "ok")]
    (rail,) = score(measured, nodes, ["eth1"], Thresholds())
    assert [(s.kind, s.node) for s in rail.suspects] == [("link", "node2<->node5")], rail.suspects
    assert "node5 has no other pair on this rail: cannot tell the link from node5" in rail.suspects[0].evidence


def test_a_node_that_failed_its_own_preflight_is_a_host_failure_not_bad_input() -> None:
    """node2 failed preflight (free space), so the plan's check stopped on its missing facts: the command said 64
    (bad input) where the README's table says 2 (a host failed)."""
    from rdmaforge.commands.pairwise import pairwise_exit
    from rdmaforge.runner.events import HostProblem
    from rdmaforge.runner.exit_codes import ExitCode

    space = HostProblem("node2", "Check free space", "ansible.builtin.assert", "node2: 1 GiB free under /opt")
    refused = HostProblem("node1", "Check the plan", "ansible.builtin.assert",
                          "pairwise: no rdmaforge_node fact (preflight) for node2; node2 unreachable or failed earlier")
    assert pairwise_exit(run_outcome({"node1": 1, "node2": 1}, [space, refused]), None) == ExitCode.HOST_FAILED
    assert pairwise_exit(run_outcome({"node1": 1}, [refused]), None) == ExitCode.BAD_INPUT


def test_a_repeated_pair_missing_from_a_later_round_is_missing_there(tmp_path: Path) -> None:
    """--rounds K can schedule a pair in two rounds: measured in round 0 and never in round 1, it read as ok and
    healthy (the README says a direction counts by its worst round)."""
    facts = {n: lab_fact(i, nics=1) for i, n in enumerate(("node1", "node2"), start=1)}
    made = plan.make_plan(facts, "all").to_dict()
    made["rounds"] = [[["node1", "node2"]], [["node1", "node2"]]]
    measured = [Measurement(a, b, "eth1", 0.19, "ok", 0).to_dict() for a, b in (("node1", "node2"), ("node2", "node1"))]
    data = build({"plan": made, "measurements": measured, "method": "iperf3"}, tmp_path)
    assert sorted((p["round"], p["status"]) for p in data["pairs"]) == [(0, "ok"), (0, "ok"), (1, "missing"),
                                                                       (1, "missing")]  # fmt: skip
    # The pair counts by its worst round, missing: named (two nodes: cannot tell which), neither node healthy.
    assert [(s["kind"], s["node"]) for s in data["suspects"]] == [("link", "node1<->node2")]
    assert "missing" in data["suspects"][0]["evidence"] and data["healthy_nodes"] == []


def test_a_sendrecv_run_whose_two_ranks_were_on_one_host_is_no_measurement(shared_dir: Path) -> None:
    """Both `#  Rank` lines naming one host: NVLink or shared memory inside one machine was measured, not the rail
    (two inventory names for one machine). It read as ok at the table's peak."""
    text = (shared_dir / CORPUS / "05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt").read_text()
    assert sendrecv.read_output(text, 0).status == "ok"
    hosts = re.findall(r"^#\s+Rank\s+\d+ .*?on\s+(\S+)", text, re.M)
    assert len(set(hosts)) == 2, hosts
    one_host = text.replace(hosts[-1], hosts[0])
    result = sendrecv.read_output(one_host, 0)
    assert result.status == "failed" and f"both ranks ran on {hosts[0]}" in result.detail, result


# --- scale (review round 21b): the figures are `make bench`'s (benchmarks/sweep_report_scale.py) -------------


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[16:24]  # the IHDR chunk's width and height
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


def test_a_heat_map_of_many_nodes_stays_a_size_any_viewer_opens(tmp_path: Path) -> None:
    """At 0.9 inch a node the map of 200 nodes took 9 GB to draw, and 730 nodes ran out of memory before
    results.json was written. Past 64 nodes the map keeps its largest size and counts the nodes on its axes."""
    pytest.importorskip("matplotlib")
    names = [f"node{i}" for i in range(1, 71)]
    facts = {n: lab_fact(i, nics=1) for i, n in enumerate(names, start=1)}
    made = plan.make_plan(facts, "all").to_dict()
    data = build({"plan": made, "measurements": [m.to_dict() for m in sweep({}, nodes=names, rails=("eth1",))],
                  "method": "iperf3"}, tmp_path)  # fmt: skip
    width, height = png_size(tmp_path / "heatmap-eth1.png")
    assert width <= output.HEATMAP_INCHES * 100 and height <= output.HEATMAP_INCHES * 100, (width, height)
    assert any("heatmap-eth1.png: 70 nodes, more than 64" in note for note in data["notes"]), data["notes"]
    assert data["suspects"] == [] and len(data["pairs"]) == 70 * 69


def test_a_heat_map_that_cannot_be_drawn_costs_no_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_memory(*_: object) -> None:
        raise MemoryError()

    monkeypatch.setattr(output, "heatmaps", out_of_memory)
    data = build(raw_sweep(sweep({})), tmp_path)
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["suspects"] == data["suspects"] == [] and "heat maps not drawn: MemoryError: " in written["notes"]
    assert (tmp_path / "table.txt").is_file() and (tmp_path / "hostfile.healthy").is_file()


def test_a_sweep_whose_results_the_report_could_not_read_is_refused_before_it_starts() -> None:
    """Review round 27c: 1000 nodes on 8 rails measured for hours, then the report refused its raw.json (over 1 GiB).
    The plan says so before anything is measured, and what to do; K random rounds of the same nodes fit."""
    def facts(nodes: int, rails: int) -> dict:
        def nic(i: int, k: int) -> dict:
            return {"name": f"eth{k + 1}", "ipv4": [{"address": f"10.{k}.{i // 250}.{i % 250 + 1}"}]}

        return {f"node{i:04d}": {"nics": [nic(i, k) for k in range(rails)], "default_route_interface": "eth0"}
                for i in range(nodes)}  # fmt: skip

    with pytest.raises(plan.PlanError, match=r"1000 nodes on 8 rail\(s\) in 999 rounds is 7992000 measurements"):
        plan.make_plan(facts(1000, 8), "all")
    assert len(plan.make_plan(facts(1000, 8), "all", rounds=20).rounds) == 20
    assert len(plan.make_plan(facts(1000, 1), "all").rounds) == 999


@pytest.mark.parametrize("case", ["rates", "one-slow-one-failed", "all-failed", "all-zero", "one-node", "huge"])
def test_the_heat_map_colours_each_cell_as_imshow_does(case: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The heat map is coloured before matplotlib scales it (one byte a channel: imshow's float path took 430 MB at
    1,000 nodes). Each cell must get the colour imshow itself gives the same rates with vmin 0 and a colour bar (the
    oracle: matplotlib's own float path), an unmeasured cell (NaN) included. Review round 32: a rail where every
    rate is 0 coloured its empty diagonal as a rate."""
    matplotlib = pytest.importorskip("matplotlib")
    import numpy

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = ["n1"] if case == "one-node" else ["n1", "n2", "n3"]

    def rate(a: str, b: str) -> tuple[float | None, str]:
        if case == "all-failed" or (case == "one-slow-one-failed" and (a, b) == ("n3", "n1")):
            return None, "failed"
        if case == "all-zero":
            return 0.0, "ok"
        if case == "huge" and a == "n1":
            return 1e308, "ok"  # too large to colour: left out of the map, named in a note
        return (30.0 if "n2" in (a, b) and case == "one-slow-one-failed" else 90.0 + len(a + b)), "ok"

    pairs = [{"a": a, "b": b, "nic": "eth1", "gbps": rate(a, b)[0], "status": rate(a, b)[1]}
             for a in nodes for b in nodes if a != b]  # fmt: skip
    drawn: list[object] = []
    real_imshow = matplotlib.axes.Axes.imshow

    def recording(self: object, data: object, *args: object, **kwargs: object) -> object:
        drawn.append(data)
        return real_imshow(self, data, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "imshow", recording)
    output.heatmaps({"nics": ["eth1"], "nodes": nodes, "pairs": pairs}, tmp_path)
    (coloured,) = drawn
    # The oracle: the rates as a float map (NaN where nothing is drawn, 0 for a failed pair), imshow's own colours.
    index = {name: i for i, name in enumerate(nodes)}
    values = numpy.full((len(nodes), len(nodes)), numpy.nan)
    for pair in pairs:
        if pair["status"] != "ok":
            values[index[pair["a"]], index[pair["b"]]] = 0.0
        elif pair["gbps"] < 1e300:
            values[index[pair["a"]], index[pair["b"]]] = pair["gbps"]
    monkeypatch.setattr(matplotlib.axes.Axes, "imshow", real_imshow)
    fig, ax = plt.subplots()
    image = ax.imshow(values, cmap="viridis", vmin=0, interpolation="nearest")
    fig.colorbar(image, ax=ax)
    expected = image.to_rgba(image.get_array(), bytes=True)
    plt.close(fig)
    got = numpy.asarray(coloured)
    assert numpy.array_equal(got, expected), (case, got[..., :3], expected[..., :3])


@pytest.mark.parametrize(("args", "message"), [
    ({"mode": "serve", "jobs": [{"nic": "lo", "bind": "127.0.0.1"}]}, "jobs[0] has no ports; mode=serve needs nic, "
                                                                      "bind, ports"),
    ({"mode": "serve", "jobs": [{"nic": "lo", "bind": "127.0.0.1", "ports": 45123}]}, "jobs[0].ports=45123; allowed: "
                                                                                      "a list of TCP ports"),
    ({"mode": "measure", "node": "n1", "jobs": [{"peer": "n2", "nic": "lo", "bind": "127.0.0.1"}]},
     "jobs[0] has no peer_address, port_forward, port_reverse; mode=measure needs"),
    ({"mode": "stop", "pid_dir": "/nonexistent/rdmaforge"}, "pid_dir=/nonexistent/rdmaforge is not a directory"),
])  # fmt: skip
def test_the_iperf_module_names_a_job_key_it_lacks(args: dict, message: str) -> None:
    """A job without a key raised KeyError (a traceback), and mode=stop without its pid_dir FileNotFoundError
    (review round 37c). Check mode: nothing is started either way."""
    from tests.unit.adhoc import run_module

    refused = run_module("pairwise_iperf", args, "--check")
    assert refused.rc == 2 and refused.result["msg"].startswith(message), refused.result
