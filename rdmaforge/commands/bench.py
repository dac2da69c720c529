"""`rdmaforge bench -i INVENTORY`: run playbooks/bench.yml, then judge the run with the benchmark report.

The verdict comes from the same code as `rdmaforge report` (rdmaforge.bench.report.render), applied to a copy
of the benchmark's run directory inside this command's run directory: exit 4 when a result is below its
threshold. The benchmark role fails its play on such a verdict; that failure is the verdict, not a broken host.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from rdmaforge.bench.report import render
from rdmaforge.paths import playbook
from rdmaforge.runner import command, execute, junit
from rdmaforge.runner.events import HostProblem
from rdmaforge.runner.exit_codes import ExitCode

NAME = "bench"
#: The benchmark role's last task fails the play with "benchmark <status>: <reasons>".
FAIL_ACTIONS = {"fail", "ansible.builtin.fail", "ansible.legacy.fail"}
#: How a verdict maps to the exit code once the hosts themselves are fine.
VERDICT_EXIT = {"pass": ExitCode.OK, "skipped": ExitCode.OK, "fail": ExitCode.HOST_FAILED,
                "below_threshold": ExitCode.BELOW_THRESHOLD}  # fmt: skip


def register(subparsers: Any) -> None:
    parser = command.add_parser(
        subparsers,
        NAME,
        help="benchmark the cluster (playbooks/bench.yml) and judge it; exit 4 below the threshold",
        description="Runs playbooks/bench.yml through ansible-runner with live progress, copies the benchmark's "
        "results into the run directory (benchmark/), re-renders them with the report's verdict and prints it. "
        "Thresholds are the benchmark role's variables, e.g. -e benchmark_min_efficiency=0.9 or "
        "-e benchmark_e2e_min_linearity=0.8. `rdmaforge report RUN_DIR` re-renders a stored run.",
    )
    command.add_target_arguments(parser)
    command.add_output_arguments(parser)
    parser.set_defaults(func=run)


def is_verdict_failure(problem: HostProblem) -> bool:
    return not problem.unreachable and problem.action in FAIL_ACTIONS and problem.message.startswith("benchmark ")


def bench_exit(outcome: execute.Outcome, verdict: str | None) -> ExitCode:
    """Unreachable (3) and hosts failing for other reasons (2) outrank the verdict; then the verdict decides."""
    base = command.playbook_exit(outcome)
    if base in (ExitCode.UNREACHABLE, ExitCode.INTERRUPTED, ExitCode.ERROR):
        return base
    excused = {p.host: 0 for p in outcome.events.problems}
    for problem in outcome.events.problems:
        excused[problem.host] += 1 if is_verdict_failure(problem) else 0
    if any(recap.failed > excused.get(host, 0) for host, recap in outcome.recaps.items()):
        return ExitCode.HOST_FAILED
    if verdict in VERDICT_EXIT:
        return VERDICT_EXIT[verdict]
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
    verdict = results["verdict"]
    reasons = "; ".join(verdict.get("reasons") or [])
    status = str(verdict["status"])
    outcome = {"pass": "passed", "skipped": "skipped"}.get(status, "failed")
    return junit.Case("benchmark verdict", f"rdmaforge.{NAME}", outcome=outcome, message=f"{status}: {reasons}")


def run(args: argparse.Namespace) -> int:
    try:
        variables = command.check_arguments(args)
    except command.UsageError as exc:
        return command.usage_error(NAME, str(exc))
    session = command.start(args, NAME)
    request = execute.Request(inventory=args.inventory, playbook=playbook("bench.yml"), limit=args.limit,
                              tags=args.tags, check=args.check, diff=args.diff, extra_vars=variables,
                              verbosity=args.verbose)  # fmt: skip
    outcome = command.run_playbook(session, request)
    results_dir, results = collect_results(outcome, session.run_dir)
    verdict = str(results["verdict"]["status"]) if results else None
    if results is not None and results_dir is not None:
        print(f"\nbenchmark verdict: {verdict}", file=session.out)
        for reason in results["verdict"].get("reasons") or []:
            print(f"  {reason}", file=session.out)
        print(f"benchmark results: {results_dir} (rdmaforge report {session.run_dir})", file=session.out)
    code = bench_exit(outcome, verdict)
    # The verdict's own failed task is reported in the verdict case, not as a broken host.
    hosts = command.host_cases(outcome, f"rdmaforge.{NAME}", ignore=is_verdict_failure)
    record = {**command.outcome_record(outcome), "benchmark": {"verdict": verdict, "results": str(results_dir)}}
    return command.finish(session, args, code, [*hosts, verdict_case(results)], record)
