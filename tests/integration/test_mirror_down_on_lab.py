"""Issue 18 on the lab: a package mirror that is down fails only the nodes that need it, with a message naming the
mirror, and a run after it is back converges them; a mirror that accepts connections and never answers ends the
node's apt run after rdmaforge_network_timeout, through rdmaforge's apt settings.

One node loses seed 000's OpenMPI package and apt's package cache (as an operator or a broken image might); then the
lab's mirror server, the nodes' only package source, is stopped and `playbooks/mpi.yml` runs with one try per
download (rdmaforge_network_retries: 0) and the package index kept. The node that must download the package fails,
naming the mirror's URL; the nodes that have it converge in the same run. With the mirror serving again, the same
playbook installs it. Then the same with a server in the mirror's place that accepts and never answers: the node's
apt tries end after the inventory's timeout instead of apt's own minutes.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from rdmaforge.lab import Lab, mirror
from rdmaforge.lab.spec import CONTROLLER_ADDRESS, MIRROR_PORT
from tests.conftest import LAB_NICS, LAB_NODES, LabHandle, SilentServer, recap
from tests.integration.test_nccl_build_on_lab import task_outcomes

pytestmark = pytest.mark.lab

PACKAGE = "openmpi-bin"  # seed 000's OpenMPI, mpi_packages' Debian entry
#: One try per download, and the package index the converge fetched kept (as it is for an hour after a converge by
#: default), so that only a node that must download a package needs the mirror.
ONE_TRY = json.dumps({"rdmaforge_network_retries": 0, "rdmaforge_network_retry_delay": 0,
                      "os_packages_apt_cache_valid_time": 86400})  # fmt: skip


def installed(lab: LabHandle, node: str) -> bool:
    query = lab.ssh(node, f"dpkg-query -W -f '${{db:Status-Status}}' {PACKAGE}", check=False)
    return query.stdout.strip() == "installed"


def assert_only_node_failed_naming_the_mirror(proc: subprocess.CompletedProcess[str], node: str) -> None:
    """``node`` failed, with the mirror's URL in its error; every other node ran the play without failing."""
    output = proc.stdout
    assert proc.returncode != 0, output[-4000:]
    counts = recap(output)
    assert counts[node]["failed"] == 1, counts
    assert all(c["failed"] == 0 and c["unreachable"] == 0 for n, c in counts.items() if n != node), counts
    failure = [line for line in output.splitlines() if line.startswith(f"fatal: [{node}]")]
    assert failure and mirror.MIRROR_URL in failure[0], output[-4000:]


@pytest.fixture
def mirror_stopped(converged: LabHandle) -> Iterator[str]:
    """The last node without the package and the lab's mirror stopped; the mirror serves again afterwards."""
    node = sorted(converged.nodes)[-1]
    # apt keeps the .deb it installed from: without `apt-get clean` the reinstall would not need the mirror.
    converged.ssh(node, f"DEBIAN_FRONTEND=noninteractive apt-get remove -y -q {PACKAGE} && apt-get clean")
    mirror.stop(Lab().paths.state / "mirror.pid")
    try:
        yield node
    finally:
        Lab().up(nodes=LAB_NODES, nics=LAB_NICS)  # serves the mirror again


def test_a_stopped_mirror_fails_only_the_node_that_needs_it_and_names_the_mirror(
    converged: LabHandle, mirror_stopped: str
) -> None:
    lab, node = converged, mirror_stopped
    assert Lab().status().mirror is None  # nothing serves the mirror's address now
    proc = lab.playbook("mpi.yml", "-e", ONE_TRY)
    assert_only_node_failed_naming_the_mirror(proc, node)
    assert not installed(lab, node)
    # The nodes that have every package leave apt out altogether (rdmaforge_packages_pending is empty there).
    assert apt_runs(proc.stdout) == {n: "skipping" for n in lab.nodes if n != node} | {node: "fatal"}

    Lab().up(nodes=LAB_NODES, nics=LAB_NICS)
    again = lab.playbook("mpi.yml", "-e", ONE_TRY)
    assert again.returncode == 0, again.stdout[-4000:]
    assert installed(lab, node)
    assert apt_runs(again.stdout) == {n: "skipping" for n in lab.nodes if n != node} | {node: "changed"}


def apt_runs(output: str) -> dict[str, str]:
    """{node: outcome} of os_packages' apt install in a playbook run."""
    lines = task_outcomes(output, "os_packages : Install packages with apt (package index")
    return {line.split("[", 1)[1].rstrip("]"): line.split(":", 1)[0] for line in lines}


def test_a_silent_mirror_ends_the_nodes_apt_tries_after_the_inventory_timeout(
    converged: LabHandle, mirror_stopped: str
) -> None:
    """In the mirror's place, a server that accepts every connection and sends nothing. The node must fetch the
    package and then, in the role's rescue, the package index: with rdmaforge's apt settings each connection ends
    after rdmaforge_network_timeout (5 s here) and apt does not try again. Without them apt 2.6 waits 30 s per
    connection, tries each file four times and the apt module repeats the index update five times: more than the
    time allowed below."""
    lab, node = converged, mirror_stopped
    silent = SilentServer(CONTROLLER_ADDRESS, MIRROR_PORT)  # mirror.stop returns once the port is free
    try:
        started = time.monotonic()
        proc = lab.playbook("mpi.yml", "-e", ONE_TRY, "-e", json.dumps({"rdmaforge_network_timeout": 5}), timeout=900)
        took = time.monotonic() - started
    finally:
        silent.close()
    assert_only_node_failed_naming_the_mirror(proc, node)
    assert silent.waits and min(silent.waits) >= 4.5 and max(silent.waits) < 15, silent.waits
    assert took < 300, (took, silent.waits)
    assert lab.ssh(node, "cat /etc/rdmaforge/apt.conf").stdout.count('Timeout "5"') == 3

    # The mirror back: the node gets its package and the settings their default again (as the converge recorded them).
    Lab().up(nodes=LAB_NODES, nics=LAB_NICS)
    again = lab.playbook("mpi.yml", "-e", ONE_TRY)
    assert again.returncode == 0, again.stdout[-4000:]
    assert installed(lab, node)
    assert 'Acquire::http::Timeout "30";' in lab.ssh(node, "cat /etc/rdmaforge/apt.conf").stdout
