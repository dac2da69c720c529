"""Converge cost against cluster size: first converge and no-op `rdmaforge provision` for N lab nodes.

For each N (default 1, 4, 8, 16; RDMAFORGE_BENCH_SCALE="1,4" to choose) the lab is brought up with N nodes and 2
extra NICs each, then timed: the first converge (NCCL from the controller cache), a no-op `rdmaforge provision`
(must take the fast path), and `rdmaforge provision --check --diff`. At 4 nodes the same site.yml also runs with
Ansible's defaults (no pipelining, 5 forks, linear strategy, no fact cache), with the fast path and without it
(every task, as before the fast path existed). From 2 nodes on, one node's /etc/nccl.conf is made drift (its mode)
and `rdmaforge provision` repairs it: the nodes in sync skip their own roles and, the drift being the node's own,
the cluster-wide plays too (per-node fast path); at 4 nodes the same repair also runs with
converge_state_fast_path_per_node=false, where every node converges in full. Last, one more lab node (running, idle,
outside the inventory until then) joins the inventory and `rdmaforge provision` converges it: the new node converges
in full, the others (in sync, recorded for the smaller cluster) run only the cluster-wide plays. When mitogen is
installed (the optional accelerator, `--mitogen`), the lab is then made afresh at the same size and timed again
under mitogen's strategy: the first converge and a no-op.

Targets (issue 19): no-op at 4 nodes < 20 s and at least 2x faster than site.yml with Ansible's defaults; no-op at
16 nodes <= 2.5x no-op at 1 node; first converge at 16 <= 3x first converge at 1; --check --diff no slower than the
no-op (10% or 1 s, whichever is larger, for timing noise); with --mitogen the same 16/1 ratio, and each first
converge faster than the plain one. A target whose sizes the run leaves out (RDMAFORGE_BENCH_SCALE without 4, or
without 1 or 16) is printed as not judged, never dropped. Writes the curve as JSON and PNG under artifacts/bench/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Result, not_judged
from rdmaforge.lab import Lab
from rdmaforge.lab import inventory as lab_inventory
from rdmaforge.lab.spec import MAX_NODES
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner import accelerator

BIN = PROJECT_ROOT / ".venv" / "bin"
IN_SYNC = "fast path: every node is in sync with its last complete converge"
ANSIBLE_DEFAULTS = {
    "ANSIBLE_PIPELINING": "False",
    "ANSIBLE_FORKS": "5",
    "ANSIBLE_STRATEGY": "linear",
    "ANSIBLE_CACHE_PLUGIN": "memory",
}


def sizes() -> list[int]:
    return [int(n) for n in os.environ.get("RDMAFORGE_BENCH_SCALE", "1,4,8,16").split(",") if n.strip()]


def _busy_cpu_s() -> float:
    """CPU seconds this machine has spent busy (every process: the controller, the lab nodes, their SSH)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


#: CPU seconds of the last _timed() run: "controller" (the command's own processes: the CLI, ansible-playbook and
#: its workers) and "machine" (the whole machine meanwhile: the lab nodes share its cores with the controller).
LAST_CPU: dict[str, float] = {}


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    before, busy = os.times(), _busy_cpu_s()
    started = time.monotonic()
    proc = subprocess.run(
        argv, cwd=PROJECT_ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=3600
    )
    seconds = time.monotonic() - started
    after = os.times()
    LAST_CPU["controller"] = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    LAST_CPU["machine"] = _busy_cpu_s() - busy
    return seconds, proc


def _ansible_output(proc: subprocess.CompletedProcess[str]) -> str:
    """Ansible's own output of a `rdmaforge provision` run (the CLI prints progress; the artifacts keep it)."""
    match = re.search(r"artifacts: (\S+)", proc.stdout + proc.stderr)
    stdout = Path(match.group(1)) / "ansible" / "stdout" if match else None
    return stdout.read_text(errors="replace") if stdout and stdout.is_file() else proc.stdout


def provision(inventory: Path, *extra: str) -> tuple[float, bool, subprocess.CompletedProcess[str]]:
    seconds, proc = _timed([str(BIN / "rdmaforge"), "provision", "-i", str(inventory), *extra])
    if proc.returncode != 0:
        raise RuntimeError(f"rdmaforge provision {' '.join(extra)} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return seconds, IN_SYNC in _ansible_output(proc), proc


def plain_site(inventory: Path, *extra: str) -> tuple[float, bool]:
    argv = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(PROJECT_ROOT / "playbooks" / "site.yml"), *extra]
    seconds, proc = _timed(argv, ANSIBLE_DEFAULTS)
    if proc.returncode != 0:
        raise RuntimeError(f"ansible-playbook site.yml exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return seconds, IN_SYNC in proc.stdout


PER_NODE = "node(s) in sync skip their own roles"
#: ... and, the drift being the drifted node's own (a file's mode), the cluster-wide plays as well.
LOCAL_DRIFT = "node(s) in sync skip their own roles and the cluster-wide plays"
DRIFTED_FILE = "/etc/nccl.conf"


def drift_and_repair(lab: Lab, inventory: Path, node: str, *extra: str) -> tuple[float, bool]:
    """Seconds `rdmaforge provision` takes to repair one drifted node, and whether it took the per-node path and
    left the file as the role writes it."""
    ssh = lab.ssh_argv(node)
    subprocess.run([*ssh, f"chmod 0600 {DRIFTED_FILE}"], check=True, timeout=60)
    seconds, _, proc = provision(inventory, *extra)
    mode = subprocess.run([*ssh, f"stat -c %a {DRIFTED_FILE}"], capture_output=True, text=True, timeout=60).stdout
    repaired = mode.strip() == "644"
    return seconds, repaired and ((LOCAL_DRIFT in proc.stdout) if not extra else (PER_NODE not in proc.stdout))


def add_node(lab: Lab, n: int) -> tuple[float, bool]:
    """Seconds `rdmaforge provision` takes once node n + 1 (running since the start, outside the inventory) joins
    the inventory, and whether only that node converged in full while the n others skipped their own roles."""
    seconds, _, proc = provision(lab.inventory_path)
    said = proc.stdout
    return seconds, "converge: 1 node(s) differ" in said and f"{n} node(s) in sync skip their own roles" in said


def measure(n: int) -> dict[str, Any]:
    lab = Lab()
    lab.down()
    # From 2 nodes on, one more node runs from the start, outside the inventory, to be added last: growing the lab
    # later would rewrite the lab's own /etc/hosts block on every node, a change no real cluster makes when it
    # gains a node (the converge would rightly see it as drift on every node).
    # At the lab's largest size there is no room for that node: no node is added there.
    spare = 2 <= n < MAX_NODES
    lab.up(nodes=n + 1 if spare else n, nics=2)
    with tempfile.TemporaryDirectory(prefix="converge-scale-") as spare_dir:
        inventory = lab.inventory_path
        if spare:
            inventory = lab_inventory.without(lab.inventory_path, f"node{n + 1}", Path(spare_dir) / "inventory")
        row = runs(lab, n, inventory, spare)
    if mitogen_installed():
        # Bare nodes again, the same size, for the accelerator's first converge.
        lab.down()
        lab.up(nodes=n, nics=2)
        row.update(mitogen_runs(lab.inventory_path))
    print(json.dumps(row), flush=True)
    return row


def mitogen_installed() -> bool:
    try:
        accelerator.strategy_dir()
    except accelerator.NotInstalled:
        return False
    return True


def mitogen_runs(inventory: Path) -> dict[str, Any]:
    """The first converge and a no-op under `--mitogen`, on bare nodes (the lab made afresh)."""
    row: dict[str, Any] = {}
    row["mitogen_first_converge_s"], _, _ = provision(inventory, "--mitogen")
    row["mitogen_first_controller_cpu_s"] = round(LAST_CPU["controller"], 2)
    row["mitogen_first_machine_cpu_s"] = round(LAST_CPU["machine"], 2)
    row["mitogen_noop_s"], row["mitogen_noop_fast_path"], _ = provision(inventory, "--mitogen")
    return row


def runs(lab: Lab, n: int, inventory: Path, spare: bool) -> dict[str, Any]:
    """The timed runs on a lab of n nodes in ``inventory`` (and, with ``spare``, one more to be added last)."""
    row: dict[str, Any] = {"nodes": n}
    row["first_converge_s"], _, _ = provision(inventory)
    # The first converge's CPU likewise: each lab node installs its own packages and plugin venv on these shared
    # cores, so the nodes' share bounds how flat the first converge can be here (measured, not judged).
    row["first_controller_cpu_s"] = round(LAST_CPU["controller"], 2)
    row["first_machine_cpu_s"] = round(LAST_CPU["machine"], 2)
    row["noop_s"], row["noop_fast_path"], _ = provision(inventory)
    # Where the no-op's CPU went. On this machine the lab nodes run on the controller's own cores, so their share
    # (the module each node runs, its SSH session) lengthens the controller's wall time as the lab grows; on a
    # real cluster each node spends it on its own CPU.
    row["noop_controller_cpu_s"] = round(LAST_CPU["controller"], 2)
    row["noop_machine_cpu_s"] = round(LAST_CPU["machine"], 2)
    row["check_diff_s"], row["check_diff_fast_path"], _ = provision(inventory, "--check", "--diff")
    if n == 4:
        row["ansible_defaults_noop_s"], row["ansible_defaults_fast_path"] = plain_site(inventory)
        row["ansible_defaults_full_noop_s"], _ = plain_site(inventory, "-e", "converge_state_fast_path=false")
    if n >= 2:
        row["drift_one_s"], row["drift_one_ok"] = drift_and_repair(lab, inventory, f"node{n}")
    if n == 4:
        row["drift_one_all_nodes_s"], row["drift_one_all_nodes_ok"] = drift_and_repair(
            lab, inventory, f"node{n}", "-e", "converge_state_fast_path_per_node=false"
        )
    if spare:
        row["node_added_s"], row["node_added_ok"] = add_node(lab, n)
    return row


def plot(rows: list[dict[str, Any]], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no PNG: matplotlib is not installed"
    nodes = [r["nodes"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(nodes, [r["first_converge_s"] for r in rows], marker="o", label="first converge (NCCL cached)")
    ax.plot(nodes, [r["noop_s"] for r in rows], marker="o", label="no-op provision (fast path)")
    ax.plot(nodes, [r["check_diff_s"] for r in rows], marker="x", linestyle="--", label="--check --diff")
    mitogen = [r for r in rows if "mitogen_first_converge_s" in r]
    if mitogen:
        ax.plot([r["nodes"] for r in mitogen], [r["mitogen_first_converge_s"] for r in mitogen], marker="^",
                label="first converge, --mitogen")  # fmt: skip
    drift = [r for r in rows if "drift_one_s" in r]
    if drift:
        ax.plot([r["nodes"] for r in drift], [r["drift_one_s"] for r in drift], marker="s", label="one node drifted")
    ax.set_xlabel("lab nodes")
    ax.set_ylabel("seconds")
    ax.set_title("rdmaforge provision on the lab (2 cores)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


def targets(rows: list[dict[str, Any]]) -> list[Result]:
    by = {r["nodes"]: r for r in rows}
    results: list[Result] = []
    for r in rows:
        results.append(
            Result(
                f"no-op provision, {r['nodes']} node(s)", round(r["noop_s"], 1), "s", "fast path taken",
                r["noop_fast_path"], f"first converge {r['first_converge_s']:.0f} s",
            )
        )  # fmt: skip
        if "drift_one_s" in r:
            results.append(
                Result(
                    f"one node drifted, {r['nodes']} nodes: repair", round(r["drift_one_s"], 1), "s",
                    "repaired; the others skip their own roles and the cluster-wide plays", r["drift_one_ok"],
                )
            )  # fmt: skip
        if "node_added_s" in r:
            first = f"; first converge of 1 node {by[1]['first_converge_s']:.0f} s" if 1 in by else ""
            results.append(
                Result(
                    f"one node added to {r['nodes']}: converge", round(r["node_added_s"], 1), "s",
                    "only the new node converges in full", r["node_added_ok"],
                    f"first converge of {r['nodes']} nodes {r['first_converge_s']:.0f} s{first}",
                )
            )  # fmt: skip
        results.append(
            Result(
                f"--check --diff, {r['nodes']} node(s)", round(r["check_diff_s"], 1), "s", "<= no-op +10%/1 s",
                r["check_diff_fast_path"] and r["check_diff_s"] <= r["noop_s"] + max(1.0, r["noop_s"] * 0.1),
            )
        )  # fmt: skip
        if "mitogen_first_converge_s" in r:
            results.append(
                Result(
                    f"first converge with --mitogen, {r['nodes']} node(s)", round(r["mitogen_first_converge_s"], 1),
                    "s", "faster than the plain strategy's", r["mitogen_first_converge_s"] < r["first_converge_s"],
                    f"plain {r['first_converge_s']:.1f} s; no-op with --mitogen {r['mitogen_noop_s']:.1f} s"
                    f" (fast path {r['mitogen_noop_fast_path']})",
                )
            )  # fmt: skip
    if 4 not in by:
        why = "size 4 not in this run"
        results += [not_judged("no-op provision, 4 nodes", "s", "< 20 s", why),
                    not_judged("site.yml with Ansible's defaults / no-op provision, 4 nodes", "x", ">= 2", why)]
    else:
        four = by[4]
        results.append(Result("no-op provision, 4 nodes", round(four["noop_s"], 1), "s", "< 20 s", four["noop_s"] < 20))
        if "ansible_defaults_noop_s" in four:
            ratio = four["ansible_defaults_noop_s"] / four["noop_s"]
            results.append(
                Result(
                    "site.yml with Ansible's defaults / no-op provision, 4 nodes", round(ratio, 2), "x", ">= 2",
                    ratio >= 2,
                    f"defaults {four['ansible_defaults_noop_s']:.1f} s"
                    f" (fast path {four['ansible_defaults_fast_path']});"
                    f" defaults with every task run {four['ansible_defaults_full_noop_s']:.1f} s",
                )
            )  # fmt: skip
        if "drift_one_all_nodes_s" in four:
            results.append(
                Result(
                    "one node drifted, 4 nodes: repair with every node converged",
                    round(four["drift_one_all_nodes_s"], 1), "s",
                    "repaired (converge_state_fast_path_per_node=false, for comparison)",
                    four["drift_one_all_nodes_ok"], f"per-node {four['drift_one_s']:.1f} s",
                )
            )  # fmt: skip
    missing = [str(n) for n in (1, 16) if n not in by]
    if missing:
        # RDMAFORGE_BENCH_SCALE left a size of the ratio out: the ratio is not measured, and says so.
        why = f"size{'s' if len(missing) > 1 else ''} {' and '.join(missing)} not in this run"
        results += [not_judged("no-op 16 nodes / 1 node", "x", "<= 2.5", why),
                    not_judged("first converge 16 nodes / 1 node", "x", "<= 3", why)]
    else:
        noop = by[16]["noop_s"] / by[1]["noop_s"]
        first = by[16]["first_converge_s"] / by[1]["first_converge_s"]
        results.append(
            Result(
                "no-op 16 nodes / 1 node", round(noop, 2), "x", "<= 2.5", noop <= 2.5, cpu_detail(by[1], by[16], "noop")
            )
        )
        results.append(
            Result(
                "first converge 16 nodes / 1 node", round(first, 2), "x", "<= 3", first <= 3,
                cpu_detail(by[1], by[16], "first"),
            )
        )  # fmt: skip
        if "mitogen_first_converge_s" in by[1] and "mitogen_first_converge_s" in by[16]:
            mitogen = by[16]["mitogen_first_converge_s"] / by[1]["mitogen_first_converge_s"]
            results.append(
                Result(
                    "first converge 16 nodes / 1 node, --mitogen", round(mitogen, 2), "x", "<= 3", mitogen <= 3,
                    cpu_detail(by[1], by[16], "mitogen_first"),
                )
            )  # fmt: skip
    return results


def cpu_detail(one: dict[str, Any], many: dict[str, Any], run: str) -> str:
    """A run's CPU at both sizes (``run``: "noop" or "first"), for the ratio's line (measured, not judged: the
    target is on wall time)."""
    controller, machine = f"{run}_controller_cpu_s", f"{run}_machine_cpu_s"
    if controller not in one or controller not in many:
        return ""
    parts = []
    for row in (one, many):
        nodes_cpu = row[machine] - row[controller]
        parts.append(
            f"{row['nodes']} node(s): controller {row[controller]:.1f} s CPU, lab nodes and the rest {nodes_cpu:.1f} s"
        )
    ratio = many[controller] / max(one[controller], 0.01)
    return "; ".join(parts) + f"; controller CPU {ratio:.2f}x (not judged)"


def run() -> list[Result]:
    rows = [measure(n) for n in sizes()]
    out = PROJECT_ROOT / "artifacts" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    (out / f"converge-scale-{stamp}.json").write_text(json.dumps(rows, indent=2) + "\n")
    png = plot(rows, out / f"converge-scale-{stamp}.png")
    results = targets(rows)
    results.append(Result("converge curve written", len(rows), "N", "JSON and PNG", png.endswith(".png"), png))
    return results
