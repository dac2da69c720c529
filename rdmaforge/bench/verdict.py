"""Per-component benchmark verdicts and the overall verdict built from them.

Every component of a run (nccl-tests per collective, the transport check, the e2e benchmark, the training
accelerators, the baseline comparisons) gets one status:

- ``pass``: measured, and the measurement met its threshold;
- ``fail``: measured and below its threshold, or the run itself failed (crash, hang, fallback to sockets);
- ``skipped``: did not run (the reason says why);
- ``not_judged``: ran, but no threshold applies, so nothing was proven.

The overall verdict is ``fail`` when any component failed (a measured failure is never hidden, required or
not), ``incomplete`` when a required component was skipped or not judged or when nothing passed at all, and
``pass`` only when every required component passed against a threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.text import distinct, fixed

Status = Literal["pass", "fail", "skipped", "not_judged"]
Overall = Literal["pass", "fail", "incomplete"]

#: Component groups a user can require or make optional (`--require`, benchmark_required/benchmark_optional).
GROUPS = ("nccl-tests", "transport", "e2e", "accelerator", "baseline")

#: The exit code of each overall verdict (one table: rdmaforge/runner/exit_codes.py).
EXIT_CODES: dict[str, ExitCode] = {
    "pass": ExitCode.OK,
    "fail": ExitCode.BELOW_THRESHOLD,
    "incomplete": ExitCode.INCOMPLETE,
}


#: The benchmark's thresholds (roles/benchmark variables) and the highest value each allows (None: no upper bound).
#: Empty (null or "") means the component is reported but not judged; 0 or less would pass anything, 0 GB/s too.
THRESHOLDS: dict[str, float | None] = {
    "benchmark_min_efficiency": 1.0,  # a fraction of the line rate
    "benchmark_e2e_min_linearity": None,  # seed 003's 0.8; a super-linear floor is the user's choice
    "benchmark_e2e_min_intra_node_linearity": None,
}


def optional_float(value: Any) -> float | None:
    """A threshold as written in run.json, e2e.json or a role variable: None, "", "none" and "null" mean no
    threshold (not judged); anything else is a number (ValueError or TypeError when it is not one)."""
    if value is None or str(value).strip().lower() in ("", "none", "null"):
        return None
    return float(value)


def threshold_allowed(at_most: float | None) -> str:
    """What a threshold allows, in words."""
    upper = f" and at most {at_most:g}" if at_most is not None else ""
    return f'a number above 0{upper}, or empty (null or "": reported, not judged)'


#: The allowed drop against a baseline (a fraction): the run.json it is written into takes 0 to below 1 only.
TOLERANCE = "benchmark_regression_tolerance"
TOLERANCE_ALLOWED = "a fraction from 0 to below 1 (0.1 is 10%)"


def tolerance_problem(value: Any) -> str | None:
    """Why ``value`` cannot be the regression tolerance, or None. Checked before a benchmark runs: run.json's schema
    refused 5 (or -1) only when the report was written after the whole benchmark, and ``"abc" | float`` was 0."""
    if isinstance(value, bool):
        return f"must be {TOLERANCE_ALLOWED}"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return f"must be {TOLERANCE_ALLOWED}"
    return None if math.isfinite(number) and 0 <= number < 1 else f"must be {TOLERANCE_ALLOWED}"


def threshold_problem(value: Any, at_most: float | None) -> str | None:
    """Why ``value`` cannot be a threshold (in the words of threshold_allowed), or None when it can be one."""
    problem = f"must be {threshold_allowed(at_most)}"
    if isinstance(value, bool):
        return problem
    try:
        number = optional_float(value)
    except (TypeError, ValueError):
        return problem
    if number is None:
        return None
    if not math.isfinite(number) or number <= 0 or (at_most is not None and number > at_most):
        return problem
    return None


@dataclass
class Component:
    name: str
    group: str
    status: Status
    reason: str
    threshold: float | str | None = None
    value: float | str | None = None
    unit: str = ""
    #: What it ran on, in words (e.g. "gloo on CPU, 3 nodes x 1 rank"); empty when it did not run.
    on: str = ""
    required: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def required_groups(run: Mapping[str, Any], present: Iterable[str], gpu_nodes: Iterable[str] = ()) -> set[str]:
    """The groups that must pass: run.json's ``required`` when given (nccl-tests bringing its transport check, a
    baseline given bringing its comparison), else the defaults, minus ``optional``.

    Defaults: nccl-tests (and its transport check) unless the run says some node has no GPU; e2e when it is
    enabled (or, in a hand-made run.json without that key, when it ran); accelerator (ACSpeed, the NCCL net
    plugin seen in the training logs) when one is enabled, e2e is required and no node lacks a GPU (without one
    the training uses gloo, not NCCL); baseline when one was given. ``gpu_nodes``: the run's nodes its own logs show
    running a GPU rank (an nccl-tests ``#  Rank`` line, a training on nccl): each has a GPU, whatever ``gpus`` says
    (a count of 0 there dropped the nccl-tests and transport requirements of a run whose GPUs ran them).
    """
    explicit = [str(g) for g in run.get("required") or []]
    if explicit:
        required = set(explicit)
        if "nccl-tests" in required:
            # A busbw is the fabric's only over the fabric's transport: requiring nccl-tests requires its transport
            # check (a log without NCCL INFO lines passed `--require nccl-tests,e2e`); `optional` can still drop it.
            required.add("transport")
        if run.get("baseline"):
            # A baseline given is a comparison asked for: an explicit list that leaves it out does not make it
            # optional (it passed 'not judged (not required)'); only ``optional`` does (review round 36).
            required.add("baseline")
    else:
        required = set()
        gpus = run.get("gpus")
        nodes = run.get("nodes")
        ran = {str(n) for n in nodes} if isinstance(nodes, list) else None
        # A node whose count is unknown (null) is not taken for a CPU-only one: nccl-tests stays required. Only the
        # run's nodes count: a key of another node (a run.json edited or spliced) never drops a requirement.
        recorded = gpus.items() if isinstance(gpus, Mapping) else []
        ranked = {str(n) for n in gpu_nodes}
        known = [
            int(n)
            for host, n in recorded
            if n is not None and (ran is None or str(host) in ran) and str(host) not in ranked
        ]
        every_node_has_gpus = not (known and min(known) == 0)
        if every_node_has_gpus:
            required |= {"nccl-tests", "transport"}
        e2e_enabled = run.get("e2e_enabled")
        if e2e_enabled or (e2e_enabled is None and "e2e" in set(present)):
            required.add("e2e")
            asked = run.get("accelerators")
            enabled = isinstance(asked, Mapping) and (
                asked.get("acspeed") or str(asked.get("net_plugin") or "none") != "none"
            )
            if enabled and every_node_has_gpus:
                required.add("accelerator")
        if run.get("baseline"):
            required.add("baseline")
    return required - {str(g) for g in run.get("optional") or []}


def mark_required(components: Sequence[Component], required: set[str]) -> None:
    for component in components:
        component.required = component.group in required


def overall(components: Sequence[Component], required: set[str]) -> tuple[Overall, list[str]]:
    """The overall verdict and its reasons, one line per component that is not a required pass."""
    reasons = [f"{c.name}: {c.status}: {c.reason}" for c in components if c.status == "fail"]
    if reasons:
        return "fail", reasons
    missing = [c for c in components if c.required and c.status != "pass"]
    reasons = [f"{c.name} (required): {c.status.replace('_', ' ')}: {c.reason}" for c in missing]
    groups = {c.group for c in components}
    reasons += [f"{group} (required): no result at all" for group in sorted(required - groups)]
    if reasons:
        return "incomplete", reasons
    if not any(c.status == "pass" for c in components):
        return "incomplete", ["nothing was measured against a threshold"]
    return "pass", []


def describe(component: Mapping[str, Any]) -> str:
    """One line in words: what was and was not measured, and on what."""
    required = "required" if component.get("required") else "not required"
    status = str(component.get("status", "?"))
    text = f"{component.get('name')}: {status.replace('_', ' ')} ({required})"
    value, threshold, unit = component.get("value"), component.get("threshold"), component.get("unit") or ""
    suffix = f" {unit}" if unit else ""
    shown_value, shown_threshold = _number(value), _number(threshold)
    if isinstance(value, (int, float)) and isinstance(threshold, (int, float)):
        shown_value, shown_threshold = distinct(float(value), float(threshold), shown_value, shown_threshold)
    if value is not None:
        text += f", {shown_value}{suffix}"
    if isinstance(threshold, (int, float)):
        text += f" against {shown_threshold}{suffix}"
    elif threshold is not None:
        text += f", expected {threshold}"
    if component.get("on"):
        text += f", on {component['on']}"
    if component.get("reason"):
        text += f": {component['reason']}"
    return text


def _number(value: Any) -> str:
    if isinstance(value, float):
        return fixed(value) if abs(value) >= 100 else f"{value:.3g}"
    return str(value)
