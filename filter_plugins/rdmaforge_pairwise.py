"""Filters of the pairwise role; the logic lives in rdmaforge.pairwise."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    from rdmaforge.pairwise import plan as pairwise_plan_module
    from rdmaforge.pairwise import sendrecv
    from rdmaforge.pairwise.report import thresholds_from
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


def pairwise_plan(
    hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], nics: Any, rounds: int, seed: int
) -> dict[str, Any]:
    """The sweep's plan (rails, addresses, rounds) from each host's rdmaforge_node fact; {"error": why} if none."""
    missing = [h for h in hosts if not isinstance(hostvars[h].get("rdmaforge_node"), Mapping)]
    if missing:
        return {"error": f"no rdmaforge_node fact (preflight) for {', '.join(sorted(missing))}"}
    facts = {h: hostvars[h]["rdmaforge_node"] for h in hosts}
    try:
        return pairwise_plan_module.make_plan(facts, nics, int(rounds), int(seed)).to_dict()
    except pairwise_plan_module.PlanError as exc:
        return {"error": str(exc)}


def pairwise_jobs(plan: Mapping[str, Any], round_index: int, host: str, port_base: int) -> dict[str, Any]:
    return pairwise_plan_module.jobs(plan, int(round_index), host, int(port_base))


def pairwise_sendrecv_argv(job: Mapping[str, Any], host: str, options: Mapping[str, Any]) -> list[str]:
    """mpirun + sendrecv_perf for one measure job of this host (1 rank on each node of the pair). The rail's RDMA
    port: ``options.hcas`` (the inventory's map), else the port both nodes' ``options.netdevs`` (host -> its
    rdmaforge_node.rdma_netdevs) give the NIC."""
    netdevs = options.get("netdevs") or {}
    hcas = sendrecv.pair_hcas(options.get("hcas") or {}, netdevs.get(host), netdevs.get(str(job["peer"])))
    return sendrecv.command(host, str(job["peer"]), str(job["nic"]), str(options["binary"]),
                            hcas=hcas, min_bytes=str(options["min_bytes"]),
                            max_bytes=str(options["max_bytes"]), iterations=int(options["iterations"]),
                            extra_mpirun_args=list(options.get("mpirun_args") or []))  # fmt: skip


def pairwise_socket_rails(rails: Sequence[str], explicit: Mapping[str, str] | None,
                          netdevs: Mapping[str, Mapping[str, str] | None]) -> list[str]:  # fmt: skip
    """Why a rail's pairs would be measured over TCP on an RDMA fabric (rdmaforge.pairwise.sendrecv.socket_rails)."""
    return sendrecv.socket_rails([str(nic) for nic in rails], explicit, netdevs)


def pairwise_sendrecv_result(stdout: str, rc: int) -> dict[str, Any]:
    """The launch's output and exit status (124: timeout's): a non-zero status is never an ok measurement."""
    result = sendrecv.read_output(stdout or "", exit_code=int(rc))
    return {"gbps": result.gbps, "status": result.status, "detail": result.detail}


def pairwise_sendrecv_measurements(runs: Any, host: str, round_index: int) -> list[dict[str, Any]]:
    """The round's measurements (both directions of each launch) from the registered results of its command loop."""
    listed = runs if isinstance(runs, list) else []
    return sendrecv.measurements([run for run in listed if isinstance(run, Mapping)], host, int(round_index))


def pairwise_threshold_problem(thresholds: Mapping[str, Any]) -> str:
    """Why the scoring thresholds cannot judge a pair (the report's own check), or "" when they can."""
    try:
        thresholds_from(dict(thresholds)).check()
    except (TypeError, ValueError) as exc:
        return str(exc)
    return ""


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_pairwise_plan": pairwise_plan,
            "rdmaforge_pairwise_jobs": pairwise_jobs,
            "rdmaforge_pairwise_sendrecv_argv": pairwise_sendrecv_argv,
            "rdmaforge_pairwise_socket_rails": pairwise_socket_rails,
            "rdmaforge_pairwise_sendrecv_result": pairwise_sendrecv_result,
            "rdmaforge_pairwise_sendrecv_measurements": pairwise_sendrecv_measurements,
            "rdmaforge_pairwise_threshold_problem": pairwise_threshold_problem,
        }
