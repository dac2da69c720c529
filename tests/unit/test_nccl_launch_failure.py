"""A launcher's report that a rank of the job failed (OpenMPI's mpirun, PRRTE's prterun, Slurm's srun and
slurmstepd), printed into the log after or instead of the table: the run failed, whatever table it printed
(review round 33b: such logs were `ok`, exit 0). The wording is the launchers' own; the runs are the corpus's."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaforge.nccl_tests import parse_text

LOG_05 = "corpus/nccl-tests/05_alltoall_sendrecv_v2.17.6_h100_2gpu_2node.txt"
RULE = "-" * 74

#: What each launcher prints (OpenMPI 4/5, PRRTE, Slurm), and the error the run then carries.
LAUNCHER_LINES = {
    "mpirun signal": (
        [RULE, "mpirun noticed that process rank 1 with PID 381003 on node cnode2-002 exited on signal 11 "
               "(Segmentation fault).", RULE],
        "mpirun noticed that process rank 1 with PID 381003 on node cnode2-002 exited on signal 11",
    ),
    "mpirun exit code": (
        [RULE, "Primary job  terminated normally, but 1 process returned", "a non-zero exit code. Per user-direction, "
         "the job has been aborted.", RULE, RULE, "mpirun detected that one or more processes exited with non-zero "
         "status, thus causing", "the job to be terminated. The first process to do so was:", RULE],
        "Primary job  terminated normally, but 1 process returned",
    ),
    "prterun": (
        ["prterun detected that one or more processes exited with non-zero status,"],
        "prterun detected that one or more processes exited with non-zero status",
    ),
    "srun exit code": (
        ["srun: error: cnode2-002: task 1: Exited with exit code 1"],
        "srun: error: cnode2-002: task 1: Exited with exit code 1",
    ),
    "slurm time limit": (
        ["slurmstepd: error: *** STEP 123.0 ON cnode2-001 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***"],
        "*** STEP 123.0 ON cnode2-001 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***",
    ),
}


def first_run(shared_dir: Path) -> str:
    """05's first run (alltoall), from its version line to its 'concluded' line: a clean, whole run."""
    text = (shared_dir / LOG_05).read_text()
    end = "# Collective test concluded: alltoall_perf\n"
    return text[text.index("# nccl-tests version") : text.index(end) + len(end)]


def test_the_clean_run_is_ok(shared_dir, engine):
    (run,) = parse_text(first_run(shared_dir))
    assert run.status == "ok" and run.errors == []


@pytest.mark.parametrize("launcher", sorted(LAUNCHER_LINES))
def test_a_launcher_failure_after_the_table_fails_the_run(shared_dir, engine, launcher):
    lines, error = LAUNCHER_LINES[launcher]
    (run,) = parse_text(first_run(shared_dir) + "\n".join(lines) + "\n")
    assert run.status == "failed"
    assert run.errors[0].startswith(error), run.errors


def test_a_job_aborted_before_any_output_is_a_failed_run(engine):
    lines, error = LAUNCHER_LINES["srun exit code"]
    (run,) = parse_text("\n".join(lines) + "\n")
    assert run.status == "failed" and run.errors == [error]


@pytest.mark.parametrize(
    "line",
    [
        "mpirun -np 2 -H node1,node2 ./build/all_reduce_perf -b 8 -e 128M",  # a command line, not a failure
        "srun: error: Unable to allocate resources: Requested nodes are busy",  # no task failed
        "the job was CANCELLED by the user before it started",
    ],
)
def test_other_launcher_lines_are_no_failure(shared_dir, engine, line):
    (run,) = parse_text(first_run(shared_dir) + line + "\n")
    assert run.status == "ok", run.errors
