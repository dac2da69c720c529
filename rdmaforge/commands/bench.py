"""`rdmaforge bench -i INVENTORY`: run playbooks/bench.yml, then judge the run with the benchmark report.

The verdict comes from the same code as `rdmaforge report` (rdmaforge.bench.report.render), applied to a copy
of the benchmark's run directory inside this command's run directory. It travels as a fact: the role publishes
where its run directory is (`benchmark_artifacts`), this command reads and judges the files there. Exit 0 pass,
4 fail, 5 incomplete (a required component skipped or not judged). The role also fails its play on a non-pass
verdict (for plain ansible-playbook users); that task is the verdict, not a broken host.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from rdmaforge.bench import baseline
from rdmaforge.bench.report import render
from rdmaforge.bench.verdict import EXIT_CODES, GROUPS, describe
from rdmaforge.paths import playbook
from rdmaforge.runner import command, execute, junit
from rdmaforge.runner.events import FAIL_ACTIONS, HostProblem
from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.extravars import ExtraVars, merged

NAME = "bench"
#: The benchmark role's last task (roles/benchmark/tasks/report.yml) fails the play on a non-pass verdict.
VERDICT_TASK = "Fail when the benchmark verdict is not pass"
#: Its first task (roles/benchmark/tasks/main.yml) refuses a baseline set in the inventory that cannot be read.
BASELINE_TASK = "Check the baseline to compare with"


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
    )
    command.add_target_arguments(parser)
    parser.add_argument("--require", metavar="COMPONENTS",
                        help=f"comma-separated components that must pass ({', '.join(GROUPS)}); default: "
                        "nccl-tests and its transport on nodes with GPUs, e2e when enabled, baseline when "
                        "given")  # fmt: skip
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


def is_verdict_failure(problem: HostProblem) -> bool:
    return not problem.unreachable and problem.action in FAIL_ACTIONS and problem.task == VERDICT_TASK


def bench_exit(outcome: execute.Outcome, verdict: str | None) -> ExitCode:
    """Unreachable (3) and hosts failing for other reasons (2) outrank the verdict; then the verdict decides. A
    baseline the role refused before measuring anything is bad input (64)."""
    base = command.playbook_exit(outcome)
    if base in (ExitCode.UNREACHABLE, ExitCode.INTERRUPTED, ExitCode.ERROR):
        return base
    if any(p.task == BASELINE_TASK and not p.unreachable for p in outcome.events.problems):
        return ExitCode.BAD_INPUT
    excused = {p.host: 0 for p in outcome.events.problems}
    for problem in outcome.events.problems:
        excused[problem.host] += 1 if is_verdict_failure(problem) else 0
    if any(recap.failed > excused.get(host, 0) for host, recap in outcome.recaps.items()):
        return ExitCode.HOST_FAILED
    if verdict in EXIT_CODES:
        return EXIT_CODES[verdict]
    return base


def collect_results(outcome: execute.Outcome, run_dir: Path) -> tuple[Path | None, dict[str, Any] | None]:
    """Copy the benchmark's run directory into ours and re-render it there; (None, None) when it made none."""
    source = outcome.events.fact("benchmark_artifacts")
    if not source or not (Path(source) / "run.json").is_file():
        return None, None
    target = run_dir / "benchmark"
    shutil.copytree(source, target)
    return target, render(target)


def verdict_case(results: dict[str, Any] | None) -> junit.Case:
    if results is None:
        return junit.Case("benchmark verdict", f"rdmaforge.{NAME}", outcome="error", message="no benchmark results")
    reasons = "; ".join(results.get("reasons") or [])
    status = str(results["verdict"])
    outcome = {"pass": "passed", "incomplete": "skipped"}.get(status, "failed")
    details = "\n".join(describe(c) for c in results.get("components") or [])
    return junit.Case("benchmark verdict", f"rdmaforge.{NAME}", outcome=outcome,
                      message=f"{status}: {reasons}" if reasons else status, details=details)  # fmt: skip


def print_verdict(results: dict[str, Any], results_dir: Path, session: command.Session) -> None:
    out = session.out
    print(f"\nbenchmark verdict: {results['verdict']}", file=out)
    for reason in results.get("reasons") or []:
        print(f"  {reason}", file=out)
    print("measured:", file=out)
    for component in results.get("components") or []:
        print(f"  {describe(component)}", file=out)
    print(f"benchmark results: {results_dir} (rdmaforge report {session.run_dir})", file=out)


def run(args: argparse.Namespace) -> int:
    try:
        variables = command.check_arguments(args)
        require = required_components(args.require)
    except command.UsageError as exc:
        return command.usage_error(NAME, str(exc))
    except ValueError as exc:
        return bad_input(str(exc))
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
    session = command.start(args, NAME)
    request = execute.Request(inventory=args.inventory, playbook=playbook("bench.yml"), limit=args.limit,
                              tags=args.tags, check=args.check, diff=args.diff, extra_vars=variables,
                              verbosity=args.verbose)  # fmt: skip
    outcome = command.run_playbook(session, request)
    try:
        results_dir, results = collect_results(outcome, session.run_dir)
    except baseline.BaselineError as exc:
        print(f"rdmaforge {NAME}: {exc}", file=session.out)
        return command.finish(session, args, ExitCode.BAD_INPUT, [], command.outcome_record(outcome))
    verdict = str(results["verdict"]) if results else None
    if results is not None and results_dir is not None:
        print_verdict(results, results_dir, session)
    code = bench_exit(outcome, verdict)
    # The verdict's own failed task is reported in the verdict case, not as a broken host.
    hosts = command.host_cases(outcome, f"rdmaforge.{NAME}", ignore=is_verdict_failure)
    record = {**command.outcome_record(outcome), "benchmark": {"verdict": verdict, "results": str(results_dir),
              "components": (results or {}).get("components")}}  # fmt: skip
    return command.finish(session, args, code, [*hosts, verdict_case(results)], record)
