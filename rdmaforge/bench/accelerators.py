"""Whether the training accelerators the inventory enables were really used, read from the e2e training logs.

Two accelerators of seed 003 (AIACC-ACSpeed) print a line when they are in use:

- ACSpeed's PyTorch layer (``aiacc-c10d-plugin``): seed 003 says that a training started with ACSpeed has
  initialised it when the log shows ``AIACC-2.0 ACSpeed c10d-plugin init``.
- The NCCL net plugin (``nccl_plugin_provider``; AIACC's libnccl-net.so): with ``NCCL_DEBUG=INFO`` NCCL prints
  ``NET/Plugin: Loaded net plugin <name>`` and ``Using network <name>``. Seed 003 shows ``AIACC-2.0-Socket``;
  the AIACC 2.0.1 library names its networks ``AIACC-2.0-RDMA``, ``AIACC-2.0-Socket`` and their ``-V5``/``-V6``
  variants (strings of the released binary). Those NCCL lines are read by rdmaforge.nccl_tests.transport, the
  same reader as for nccl-tests' logs.

An enabled accelerator whose line is absent from a log that exists is a failure; with a log missing or empty (the
role writes a blank file when a node's output is missing) it is not judged, even when another node's log shows
the line: nothing shows what ran on that node. Neither is ever a pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rdmaforge import fabrics
from rdmaforge.bench.verdict import Component
from rdmaforge.nccl_tests.transport import SOCKET, is_socket, merge_transports, parse_transport
from rdmaforge.text import listed

GROUP = "accelerator"
#: Seed 003's line; the version is allowed to differ (AIACC-2.0 today).
ACSPEED_INIT = re.compile(r"AIACC-\d+(?:\.\d+)* ACSpeed c10d-plugin init")
ACSPEED_LINE = "AIACC-2.0 ACSpeed c10d-plugin init"
#: Seed 003: the autotuner takes 200-400 iterations, about 950 with bucket tuning, which ACSpeed v1.1.0 turns on by
#: default (AIACC_BUCKET_TUNE_DISABLE=1 turns it off); the seed recommends a warm-up of 400 for the former.
ACSPEED_WARMUP_STEPS = 950
ACSPEED_WARMUP_STEPS_WITHOUT_BUCKET_TUNING = 400
#: How each net plugin provider names its networks in ``Using network``. A provider not listed here counts as
#: used when NCCL used a network it does not have built in (IB, Socket): the registered plugin's.
PLUGIN_NETWORK_PREFIXES = {"aiacc": "AIACC"}
#: Why a provider's plugin may load and then fail to initialise, as far as it is known.
PLUGIN_INIT_HINTS = {
    "aiacc": "AIACC's library checks for an Alibaba Cloud GPU instance type (from the instance metadata service, "
    "100.100.100.200) when NCCL initialises it; on any other machine it cannot initialise: set "
    "nccl_plugin_provider: none there",
}
_BUILTIN_NETWORKS = ("IB", SOCKET)


@dataclass(frozen=True)
class TrainingLog:
    """One training log: which run it belongs to, its file name, and its text (None when the file is missing)."""

    run: str  # "1-GPU", "1-node" or "N-node"
    name: str
    text: str | None
    #: Why a log that is there was not read (text None): it cannot be read, or is too large.
    unread: str | None = None

    @property
    def blank(self) -> str | None:
        """Why the log has nothing to read ("missing", "empty", "unreadable (...)"), or None when it has text."""
        if self.text is None:
            return self.unread or "missing"
        return None if self.text.strip() else "empty"


def _blank_logs(logs: Sequence[TrainingLog]) -> list[str]:
    """'NAME is missing' / 'NAME is empty' for each log with nothing to read."""
    return [f"{log.name} is {log.blank}" for log in logs if log.blank]


def acspeed_lines(text: str) -> list[str]:
    """The lines of ``text`` that say ACSpeed's c10d plugin initialised (one per rank that prints it)."""
    return [line.strip() for line in text.splitlines() if ACSPEED_INIT.search(line)]


#: The torch releases seed 003 gives for ACSpeed's features, as (first, last) (major, minor): its bucket tuning (on by
#: default), its CPU affinity (with torch.distributed.run/launch) and its single-node optimisation.
ACSPEED_TORCH_RANGES = {
    "bucket tuning": ((1, 8), (1, 13)),
    "CPU affinity": ((1, 8), (1, 12)),
    "single-node optimisation": ((1, 6), (1, 9)),
}


def acspeed_torch_note(torch_version: str | None) -> str:
    """A note naming the ACSpeed features seed 003 does not give for the training's torch release; '' when every
    feature's range holds it, or the release is unknown."""
    found = re.match(r"(\d+)\.(\d+)", torch_version or "")
    if found is None:
        return ""
    release = (int(found.group(1)), int(found.group(2)))
    outside = [f"{feature} {low[0]}.{low[1]} to {high[0]}.{high[1]}"
               for feature, (low, high) in ACSPEED_TORCH_RANGES.items() if not low <= release <= high]  # fmt: skip
    if not outside:
        return ""
    return (f"note: the training ran torch {torch_version}; seed 003 gives ACSpeed's {', '.join(outside)}: those "
            "features may not apply to this run")


def judge_acspeed(
    logs: Sequence[TrainingLog], warmup_steps: int | None, torch_version: str | None = None
) -> tuple[Component, dict[str, Any]]:
    """ACSpeed's init line must appear in every training run (any node's log of that run: whether every rank prints
    it is not documented), and every log of the run must have text (a missing or empty one is not judged). A torch
    release outside what seed 003 gives for ACSpeed's features is noted (acspeed_torch_note), never judged."""
    component = Component("e2e acspeed", GROUP, "fail", "", threshold=f"'{ACSPEED_LINE}' in every training run")
    counts = {log.name: len(acspeed_lines(log.text)) for log in logs if log.text is not None and not log.blank}
    missing = [log.name for log in logs if log.blank]
    detail = {"enabled": True, "init_lines": counts, "missing_logs": missing}
    component.value = f"{sum(counts.values())} init lines"
    if not logs:
        component.status, component.reason = "not_judged", "no training log to read (the e2e run left none)"
        return component, detail
    runs = list(dict.fromkeys(log.run for log in logs))
    without: list[str] = []  # runs whose logs all have text and none has the line
    unknown: list[str] = []  # runs with a log missing or empty
    for run in runs:
        mine = [log for log in logs if log.run == run]
        blank = _blank_logs(mine)
        if blank:
            found = listed(log.name for log in mine if counts.get(log.name))
            unknown.append(f"{run} run ({listed(blank)}" + (f"; the line is in {found})" if found else ")"))
        elif not any(counts.get(log.name) for log in mine):
            without.append(f"{run} run ({listed(log.name for log in mine)})")
    if without:
        component.reason = (f"ACSpeed is enabled but its '{ACSPEED_LINE}' line is absent from the "
                            f"{', '.join(without)}: the training ran without ACSpeed")  # fmt: skip
    elif unknown:
        component.status = "not_judged"
        component.reason = (f"a log missing or empty for the {'; '.join(unknown)}: whether ACSpeed ran on every node "
                            "cannot be told")  # fmt: skip
    else:
        component.status = "pass"
        component.reason = f"'{ACSPEED_LINE}' found in every training run ({', '.join(runs)})"
        if warmup_steps is not None and warmup_steps < ACSPEED_WARMUP_STEPS:
            component.reason += (f"; note: {warmup_steps} warm-up steps, fewer than the about {ACSPEED_WARMUP_STEPS} "
                                 "seed 003 gives for ACSpeed's bucket tuning, which is on by default: the measured "
                                 "steps may include ACSpeed's autotuning (with AIACC_BUCKET_TUNE_DISABLE=1 in "
                                 f"benchmark_e2e_extra_env, {ACSPEED_WARMUP_STEPS_WITHOUT_BUCKET_TUNING} are enough)")
    note = acspeed_torch_note(torch_version)
    if note:
        component.reason += f"; {note}"
        detail["torch"] = torch_version
    return component, detail


def _is_plugin_network(provider: str, network: str) -> bool:
    prefix = PLUGIN_NETWORK_PREFIXES.get(provider)
    return network.startswith(prefix) if prefix else network not in _BUILTIN_NETWORKS


def judge_net_plugin(
    provider: str, fabric: str, logs: Sequence[TrainingLog], backend: str | None
) -> tuple[Component, dict[str, Any]]:
    """The net plugin must have carried the N-node training's traffic on every node: each node's log must show a
    ``Using network`` line, and every one must name the plugin's network. A node whose log is missing or empty is not
    judged (nothing shows what its ranks used); one node's log is never evidence for another's."""
    prefix = PLUGIN_NETWORK_PREFIXES.get(provider)
    expected = f"Using network {prefix}-*" if prefix else "Using network <the plugin's, not IB or Socket>"
    component = Component(f"e2e net plugin {provider}", GROUP, "fail", "", threshold=expected)
    detail: dict[str, Any] = {"provider": provider, "missing_logs": [log.name for log in logs if log.blank]}
    if backend is not None and backend != "nccl":
        component.status = "skipped"
        component.reason = f"the training used {backend}, not NCCL (no GPU), so no NCCL net plugin could be used"
        return component, detail
    present = [log for log in logs if not log.blank]
    blank = _blank_logs(logs)
    if not present:
        component.status = "not_judged"
        component.reason = "no N-node training log to read" + (f" ({listed(blank)})" if blank else "")
        return component, detail
    per_log = {log.name: parse_transport(log.text or "") for log in present}
    transport = merge_transports(per_log.values())
    networks = transport.all_networks
    detail.update({"networks": networks, "plugin": transport.plugin, "plugin_result": transport.plugin_result,
                   "plugin_detail": transport.plugin_detail, "info_lines": transport.info_lines})  # fmt: skip
    component.value = ", ".join(networks) or None
    theirs = [name for name in networks if _is_plugin_network(provider, name)]
    others = [name for name in networks if name not in theirs]
    where = listed(log.name for log in present)
    silent = [name for name, read in per_log.items() if not read.all_networks]  # no 'Using network' line
    elsewhere = [name for name, read in per_log.items() if any(n in others for n in read.all_networks)]
    if transport.plugin_result == "init_failed":
        used = ", ".join(networks) or "no network (the log ends before NCCL chose one)"
        hint = f". {PLUGIN_INIT_HINTS[provider]}" if provider in PLUGIN_INIT_HINTS else ""
        component.reason = (f"NCCL loaded the {provider} net plugin ({transport.plugin}) but it did not initialise "
                            f"('{transport.plugin_detail}'); NCCL used {used}{hint}")  # fmt: skip
    elif transport.plugin_result in ("failed", "not_found"):
        component.reason = f"NCCL did not load the {provider} net plugin: {transport.plugin_detail}"
    elif transport.info_lines == 0:
        component.reason = (f"no NCCL INFO line in {where}: NCCL_DEBUG=INFO was not in effect, so nothing shows "
                            f"that the {provider} plugin was used")  # fmt: skip
    elif not networks:
        component.reason = f"no 'Using network' line in {where}: nothing shows that the {provider} plugin was used"
    elif others:
        some = f"on some ranks (others used {', '.join(theirs)})" if theirs else "instead"
        component.reason = (f"the {provider} net plugin is enabled but NCCL used {', '.join(others)} {some} "
                            f"({listed(elsewhere)})")  # fmt: skip
    elif fabrics.is_rdma(fabric) and any(is_socket(name) for name in theirs):
        component.reason = (f"the {provider} plugin carried the traffic over TCP ({', '.join(theirs)}), but fabric "
                            f"profile '{fabric}' expects RDMA")  # fmt: skip
    elif silent:
        component.reason = (f"no 'Using network' line in {', '.join(silent)}: nothing shows that the {provider} plugin "
                            f"was used there (NCCL used {', '.join(theirs)} in the other logs)")  # fmt: skip
    elif blank:
        component.status = "not_judged"
        component.reason = (f"NCCL used {', '.join(theirs)} in {where}, but the log of {', '.join(blank)}: what its "
                            "ranks used cannot be told")  # fmt: skip
    else:
        component.status = "pass"
        component.reason = f"NCCL used the {provider} net plugin's network {', '.join(theirs)} ({where})"
    return component, detail


def expectations(run: Mapping[str, Any]) -> tuple[bool, str]:
    """(ACSpeed enabled, net plugin provider) from run.json's ``accelerators``; (False, "none") without it."""
    asked = run.get("accelerators")
    if not isinstance(asked, Mapping):
        return False, "none"
    provider = str(asked.get("net_plugin") or "none").strip() or "none"
    return bool(asked.get("acspeed")), provider
