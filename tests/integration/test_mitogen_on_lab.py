"""`rdmaforge provision --mitogen` on the lab (issue 19): the optional accelerator runs the same site.yml under
mitogen's strategy, and what it does must be what the plain strategy does. Its run of every task repairs a drifted
node and changes nothing else, and the converge record it leaves is the one the plain strategy's fast path
accepts. (Its speed is measured by `make bench`, benchmark converge_scale.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import IN_SYNC, LabHandle
from tests.integration.test_cli import cli, run_dir_of

# make test-heavy, which make bench runs before it measures mitogen's speed (benchmark converge_scale): its run of
# every task on every node costs make test's lab path about 70 s of its 45-minute budget, and the plain strategy,
# the default, is what every other lab test runs.
pytestmark = [pytest.mark.lab, pytest.mark.heavy("the optional accelerator: every task of site.yml on every node")]

#: ansible-core's warning when it loads a strategy from outside ansible.builtin: the run used mitogen's.
THIRD_PARTY_STRATEGY = "Use of strategy plugins not included in ansible.builtin"
DRIFTED = "/etc/nccl.conf"


def changed_per_host(run_dir: Path) -> dict[str, int]:
    recap = json.loads((run_dir / "recap.json").read_text())
    return {host: counts["changed"] for host, counts in recap["hosts"].items()}


def test_mitogen_converges_as_the_plain_strategy_does(converged: LabHandle, tmp_path: Path) -> None:
    nodes = list(converged.nodes)
    reference, victim = nodes[0], nodes[-1]
    inventory = str(converged.inventory)
    role_mode = converged.ssh(reference, f"stat -c %a {DRIFTED}").stdout.strip()
    converged.ssh(victim, f"chmod 0600 {DRIFTED}")

    # Every task of site.yml under mitogen (the fast path off), on a cluster converged but for one file's mode: the
    # drifted node is repaired, and nothing else changes on any node.
    repair = cli(tmp_path, "provision", "-i", inventory, "--mitogen", "-e", "converge_state_fast_path=false")
    assert repair.returncode == ExitCode.OK, repair.stdout[-6000:]
    run_dir = run_dir_of(repair.stdout)
    stdout = (run_dir / "ansible" / "stdout").read_text(errors="replace")
    assert THIRD_PARTY_STRATEGY in stdout, stdout[-3000:]
    assert converged.ssh(victim, f"stat -c %a {DRIFTED}").stdout.strip() == role_mode
    changed = changed_per_host(run_dir)
    assert set(changed) == {*nodes, "localhost"}, changed
    assert changed.pop(victim) > 0 and not any(changed.values()), repair.stdout[-4000:]

    # The record mitogen's run left is the one the plain strategy's fast path checks against.
    plain = cli(tmp_path, "provision", "-i", inventory)
    assert plain.returncode == ExitCode.OK, plain.stdout[-6000:]
    assert IN_SYNC in plain.stdout, plain.stdout[-4000:]
    plain_stdout = (run_dir_of(plain.stdout) / "ansible" / "stdout").read_text(errors="replace")
    assert THIRD_PARTY_STRATEGY not in plain_stdout
