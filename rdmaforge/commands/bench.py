"""`rdmaforge bench -i INVENTORY`: run playbooks/bench.yml, then judge the run with the benchmark report.

The run is rendered once, by the role, with the same code as `rdmaforge report` (rdmaforge.bench.report.render),
and its results travel as facts: `benchmark_results` (results.json, verdict included) and `benchmark_artifacts`
(where the files are; copied into this command's run directory). Exit 0 pass, 4 fail, 5 incomplete (a required
component skipped or not judged). For plain ansible-playbook users the role fails its play on a non-pass verdict;
this command turns that off (benchmark_fail_on_verdict=false), so every failed task here is a broken host.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from rdmaforge.bench import baseline
from rdmaforge.bench.verdict import (
    EXIT_CODES,
    GROUPS,
    THRESHOLDS,
    TOLERANCE,
    describe,
    threshold_problem,
    tolerance_problem,
)
from rdmaforge.errors import CannotRun
from rdmaforge.paths import playbook
from rdmaforge.runner import command, execute, junit
from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.extravars import ExtraVars, merged

NAME = "bench"
#: The fact roles/benchmark publishes when it refuses a baseline that cannot be read, before measuring anything.
BASELINE_PROBLEM_FACT = "benchmark_baseline_problem"


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="benchmark the cluster (playbooks/bench.yml) and judge it; exit 4 fail, 5 incomplete",
        description="Runs playbooks/bench.yml through ansible-runner with live progress, copies the benchmark's "
        "results into the run directory (benchmark/), judges every component (nccl-tests per collective, the "
        "transport, e2e, the baseline) and prints what was and was not measured. The verdict is pass only when "
        "every required component passed against a threshold; fail when one failed; incomplete when a required "
        "one was skipped or had no threshold. Thresholds are the benchmark role's variables, e.g. "
        "-e benchmark_min_efficiency=0.9, -e benchmark_e2e_min_linearity=0.8, -e benchmark_baseline=FILE. "
        "`rdmaforge report RUN_DIR` re-renders a stored run.",
        codes=(ExitCode.BELOW_THRESHOLD, ExitCode.INCOMPLETE),
    )
    command.add_target_arguments(parser)
    parser.add_argument("--require", metavar="COMPONENTS",
                        help=f"comma-separated components that must pass ({', '.join(GROUPS)}); default: "
                        "nccl-tests and its transport on nodes with GPUs, e2e when enabled, accelerator (ACSpeed, "
                        "the NCCL net plugin in the training logs) when enabled on nodes with GPUs, baseline when "
                        "given (with --require too)")  # fmt: skip
    command.add_output_arguments(parser)
    parser.set_defaults(func=run)


def bad_input(message: str) -> int:
    print(f"rdmaforge {NAME}: {message}", file=sys.stderr)
    return int(ExitCode.BAD_INPUT)


def required_components(text: str | None) -> list[str] | None:
    """--require's list; ValueError naming what is allowed."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in GROUPS]
    if unknown or not names:
        raise ValueError(f"--require {text!r}: unknown component(s) {', '.join(unknown) or '(none given)'}; "
                         f"allowed: {', '.join(GROUPS)}")  # fmt: skip
    return names


def bench_exit(outcome: execute.Outcome, verdict: str | None) -> ExitCode:
    """Unreachable (3) and hosts failing for other reasons (2) outrank the verdict; then the verdict decides. A
    baseline the role refused before measuring anything is bad input (64). A clean play without a verdict (none
    published: `--tags` that ran none of the role's tasks) judged nothing: incomplete (5), never success."""
    base = command.playbook_exit(outcome)
    if base in (ExitCode.UNREACHABLE, ExitCode.INTERRUPTED, ExitCode.ERROR, ExitCode.BAD_INPUT):
        return base
    if outcome.events.fact(BASELINE_PROBLEM_FACT):
        return ExitCode.BAD_INPUT
    if any(recap.failed for recap in outcome.recaps.values()):
        return ExitCode.HOST_FAILED
    if verdict in EXIT_CODES:
        return EXIT_CODES[verdict]
    return ExitCode.INCOMPLETE if base == ExitCode.OK else base


def collect_results(outcome: execute.Outcome, run_dir: Path) -> tuple[Path | None, dict[str, Any] | None]:
    """Copy the benchmark's run directory into ours; the results (and their verdict) are the play's published
    fact ``benchmark_results``: the run is rendered once, by the role. (None, None) when it published none."""
    source = outcome.events.fact("benchmark_artifacts")
    results = outcome.events.fact("benchmark_results")
    if not source or not isinstance(results, dict) or not (Path(source) / "run.json").is_file():
        return None, None
    target = run_dir / "benchmark"
    shutil.copytree(source, target)
    return target, results


def verdict_case(results: dict[str, Any] | None) -> junit.Case:
    if results is None:
        return junit.Case("benchmark verdict", f"rdmaforge.{NAME}", outcome="error", message="no benchmark results")
    reasons = "; ".join(results.get("reasons") or [])
    status = str(results["verdict"])
    outcome = {"pass": "passed", "incomplete": "skipped"}.get(status, "failed")
    details = "\n".join([*(f"not measured: {line}" for line in results.get("not_measured") or []),
                         *(describe(c) for c in results.get("components") or [])])  # fmt: skip
    return junit.Case("benchmark verdict", f"rdmaforge.{NAME}", outcome=outcome,
                      message=f"{status}: {reasons}" if reasons else status, details=details)  # fmt: skip


def print_verdict(results: dict[str, Any], results_dir: Path, session: command.Session) -> None:
    out = session.out
    print(f"\nbenchmark verdict: {results['verdict']}", file=out)
    for reason in results.get("reasons") or []:
        print(f"  {reason}", file=out)
    for line in results.get("not_measured") or []:
        print(f"  not measured: {line}", file=out)
    print("measured:", file=out)
    for component in results.get("components") or []:
        print(f"  {describe(component)}", file=out)
    print(f"benchmark results: {results_dir} (rdmaforge report {session.run_dir})", file=out)


def run(args: argparse.Namespace) -> int:
    try:
        variables = command.check_arguments(args)
        require = required_components(args.require)
    except CannotRun as exc:
        return command.cannot_run(NAME, str(exc), args)
    except ValueError as exc:
        return bad_input(str(exc))
    for variable, at_most in THRESHOLDS.items():  # 0 or less would pass anything; the role refuses it too
        value = merged(variables).get(variable)
        templated = isinstance(value, str) and "{{" in value  # the role checks it once Ansible has templated it
        if not templated and (problem := threshold_problem(value, at_most)) is not None:
            return bad_input(f"{variable}={value!r} (from -e): {problem}")
    tolerance = merged(variables).get(TOLERANCE)
    # A tolerance without -e benchmark_baseline is not refused here, unlike report --tolerance: the inventory's
    # group_vars may name the baseline, which only the role sees (the role's default tolerance is set either way).
    if tolerance is not None and not (isinstance(tolerance, str) and "{{" in tolerance):
        if (problem := tolerance_problem(tolerance)) is not None:
            return bad_input(f"{TOLERANCE}={tolerance!r} (from -e): {problem}")
    given = merged(variables).get("benchmark_baseline")
    if given:
        try:  # before anything runs: a baseline that cannot be compared with is an error, never ignored
            baseline.load(str(given))
        except baseline.BaselineError as exc:
            return bad_input(f"{exc} (from -e benchmark_baseline)")
        # The role runs on the controller from the project root: an absolute path means the same file there.
        variables = [*variables, ExtraVars(inline={"benchmark_baseline": str(Path(str(given)).resolve())})]
    if require is not None:
        variables = [*variables, ExtraVars(inline={"benchmark_required": require})]
    # The verdict comes back as the benchmark_results fact and becomes this command's exit code; a failed task for
    # it would be one more thing to tell apart from a broken host.
    variables = [*variables, ExtraVars(inline={"benchmark_fail_on_verdict": False})]
    session = command.start(args, NAME)
    request = execute.Request(inventory=args.inventory, playbook=playbook("bench.yml"), limit=args.limit,
                              tags=args.tags, check=args.check, diff=args.diff, extra_vars=variables,
                              verbosity=args.verbose, **command.ansible_options(args))  # fmt: skip
    outcome = command.run_playbook(session, request)
    results_dir, results = collect_results(outcome, session.run_dir)
    verdict = str(results["verdict"]) if results else None
    if results is not None and results_dir is not None:
        print_verdict(results, results_dir, session)
    elif command.playbook_exit(outcome) == ExitCode.OK:
        print("\nbenchmark verdict: not judged: the play published no benchmark results", file=session.out)
    code = bench_exit(outcome, verdict)
    hosts = command.host_cases(outcome, f"rdmaforge.{NAME}")
    record = {**command.outcome_record(outcome), "benchmark": {"verdict": verdict, "results": str(results_dir),
              "components": (results or {}).get("components")}}  # fmt: skip
    return command.finish(session, args, code, [*hosts, verdict_case(results)], record)
