"""Filters of the benchmark role; the logic lives in rdmaforge.bench."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    from rdmaforge.bench import environment
    from rdmaforge.bench.e2e import parse_output
    from rdmaforge.bench.line_rate import node_line_rate
    from rdmaforge.bench.verdict import optional_float
    from rdmaforge.inventory_checks import e2e_count_problems
    from rdmaforge.inventory_checks import threshold_problems as _threshold_problems
    from rdmaforge.nccl_tests.sizes import nccl_tests_size
    from rdmaforge.node_facts import known_gpu_count
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def _gpu_count(host: str, hostvars: Mapping[str, Mapping[str, Any]]) -> int | None:
    # The count ranks are planned by: the fact's, else the inventory's rdmaforge_gpus_per_node (as the cluster's
    # hostfile takes it), else unknown.
    found = hostvars[host]
    return known_gpu_count(found.get("rdmaforge_node"), found.get("rdmaforge_gpus_per_node"))


def nodes_without_gpus(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Hosts whose preflight fact counted no GPU (a measured 0: the lab's nodes count 0 from sysfs)."""
    return [h for h in hosts if _gpu_count(h, hostvars) == 0]


def nodes_gpu_unknown(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Hosts whose GPU count is unknown: no preflight fact, or one whose count is null (gpu_source none: nvidia-smi,
    lspci and the PCI tree in sysfs all failed), and no rdmaforge_gpus_per_node in the inventory. Never taken for
    hosts without GPUs."""
    return [h for h in hosts if _gpu_count(h, hostvars) is None]


def gpu_counts(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, int | None]:
    """Each host's GPU count from its preflight fact (else the inventory's rdmaforge_gpus_per_node), for run.json
    and the ranks per node; None (unknown, never 0) for a host without either, so that a baseline is not made from
    it and the verdict does not take the node for a CPU-only one."""
    return {host: _gpu_count(host, hostvars) for host in hosts}


def processes_per_node(gpus: Sequence[Any], gpus_per_process: Any) -> list[int]:
    """nccl-tests processes per node, in ``gpus``' order: each process drives ``gpus_per_process`` GPUs (-g), so a
    node of 8 GPUs at -g 2 runs 4 (it ran 8, which asked nccl-tests for devices 0-15 on an 8-GPU node)."""
    per = max(int(gpus_per_process), 1)
    return [int(count) // per for count in gpus]


def gpus_per_process_misfits(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]],
                             gpus_per_process: Any) -> list[str]:  # fmt: skip
    """``host (N GPUs)`` for each host whose known GPU count ``gpus_per_process`` does not divide."""
    per = max(int(gpus_per_process), 1)
    counts = gpu_counts(hosts, hostvars)
    return [f"{host} ({count} GPUs)" for host, count in counts.items() if count is not None and count % per]


def port_line_rates(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], fabric: str) -> dict[str, Any]:
    """Each host's line rate from its rails (the benchmark's ``benchmark_ports`` read), for run.json; hosts whose
    ports were not read are left out, and with none read the result is empty (the configured rate stands)."""
    rates: dict[str, Any] = {}
    for host in hosts:
        read = hostvars[host].get("benchmark_ports")
        if not isinstance(read, Mapping) or "devices" not in read:
            continue
        gpus = _gpu_count(host, hostvars) or 0  # unknown: every active port counts (a higher bar, never lower)
        expected = hostvars[host].get("rdma_core_expected_ports") or []
        rates[host] = node_line_rate(read.get("devices") or [], fabric, gpus,
                                     [str(spec) for spec in expected] if isinstance(expected, list) else [])
    return rates


def _last_line(text: Any) -> str:
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


#: timeout(1)'s exit when it stopped the command (roles/benchmark: benchmark_e2e_timeout).
TIMED_OUT = 124


def _bounded(result: Mapping[str, Any]) -> bool:
    """Whether the run was started under timeout(1) (its argv, as the command module reports it)."""
    cmd = result.get("cmd")
    return isinstance(cmd, list) and bool(cmd) and str(cmd[0]).rsplit("/", 1)[-1] == "timeout"


def e2e_error(nodes: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why the e2e training failed, for e2e.json's ``error``: each run that exited non-zero or did not finish (the
    1-GPU and 1-node runs on the first node, the N-node run on every node), with its last line of output; None when
    every run that ran exited 0. A run with a result line but a non-zero exit failed all the same."""
    if not nodes:
        return None
    first = hostvars[nodes[0]]
    runs = [("1-GPU", nodes[0], first.get("benchmark_e2e_one"))]
    runs += [("1-node", nodes[0], first.get("benchmark_e2e_single"))]
    runs += [("N-node", node, hostvars[node].get("benchmark_e2e_multi")) for node in nodes]
    failures = []
    for label, node, result in runs:
        if not isinstance(result, Mapping) or result.get("skipped"):
            continue
        if "rc" not in result and not result.get("finished", True):
            failures.append(f"the {label} run on {node} did not finish before the benchmark's timeout")
            continue
        if "rc" not in result:
            # Finished without an exit status: Ansible's async wrapper killed the job at its time limit ("Timeout
            # exceeded"; the wait's failed_when: false clears `failed`), or the task itself failed. That run did
            # not end well, whatever another node's rank printed (review round 23a).
            why = _last_line(result.get("msg")) or "no exit status"
            failures.append(f"the {label} run on {node} ended without an exit status: {why}")
            continue
        rc = result.get("rc")
        if rc is None or rc == 0:
            continue
        if rc == TIMED_OUT and _bounded(result):
            failures.append(f"the {label} run on {node} did not finish within benchmark_timeout (timeout exited {rc})")
            continue
        why = _last_line(result.get("stderr")) or _last_line(result.get("msg")) or _last_line(result.get("stdout"))
        failures.append(f"the {label} run on {node} exited {rc}" + (f": {why}" if why else ""))
    return "; ".join(failures) or None


def hostnames(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, str | None]:
    """Each host's host name from its gathered facts (``hostname``: up to the first dot, as nccl-tests names the
    host of each rank), None where no facts were gathered; for run.json."""
    found: dict[str, str | None] = {}
    for host in hosts:
        facts = hostvars[host].get("ansible_facts") or {}
        name = facts.get("hostname") or facts.get("nodename")
        found[host] = str(name) if name else None
    return found


def threshold(value: Any) -> float | None:
    """A benchmark threshold for run.json and e2e.json: the number, or None (not judged) when it is empty."""
    return optional_float(value)


def threshold_problems(values: Mapping[str, Any], host: str) -> list[str]:
    """One line per benchmark threshold of ``values`` that is not allowed (0 or less, not a number), and per e2e
    step or batch count below its least: preflight's rules, for a value given to `rdmaforge bench` with -e."""
    return [problem.message for problem in [*_threshold_problems(host, values), *e2e_count_problems(host, values)]]


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_nodes_without_gpus": nodes_without_gpus,
            "rdmaforge_nodes_gpu_unknown": nodes_gpu_unknown,
            "rdmaforge_gpu_counts": gpu_counts,
            "rdmaforge_processes_per_node": processes_per_node,
            "rdmaforge_gpus_per_process_misfits": gpus_per_process_misfits,
            "rdmaforge_port_line_rates": port_line_rates,
            "rdmaforge_e2e_result": parse_output,
            "rdmaforge_e2e_error": e2e_error,
            "rdmaforge_nccl_tests_size": nccl_tests_size,
            "rdmaforge_hostnames": hostnames,
            "rdmaforge_threshold": threshold,
            "rdmaforge_threshold_problems": threshold_problems,
            "rdmaforge_pip_requirement_name": environment.requirement_name,
            "rdmaforge_pip_requirement_met": environment.requirement_met,
        }
