"""Issue 18 on the lab: a package mirror that is down fails only the nodes that need it, with a message naming the
mirror, and a run after it is back converges them.

One node loses seed 000's OpenMPI package and apt's package cache (as an operator or a broken image might); then the
lab's mirror server, the nodes' only package source, is stopped and `playbooks/mpi.yml` runs with one try per
download (rdmaforge_network_retries: 0) and the package index kept. The node that must download the package fails,
naming the mirror's URL; the nodes that have it converge in the same run. With the mirror serving again, the same
playbook installs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from rdmaforge.lab import Lab, mirror
from tests.conftest import LAB_NICS, LAB_NODES, LabHandle, recap

# Heavy only for make test's 45-minute budget on 2 cores (about a minute); make test-heavy runs it.
pytestmark = [pytest.mark.lab, pytest.mark.heavy("a minute of playbooks and a mirror restart")]

PACKAGE = "openmpi-bin"  # seed 000's OpenMPI, mpi_packages' Debian entry
#: One try per download, and the package index the converge fetched kept (as it is for an hour after a converge by
#: default), so that only a node that must download a package needs the mirror.
ONE_TRY = json.dumps({"rdmaforge_network_retries": 0, "rdmaforge_network_retry_delay": 0,
                      "os_packages_apt_cache_valid_time": 86400})  # fmt: skip


def installed(lab: LabHandle, node: str) -> bool:
    query = lab.ssh(node, f"dpkg-query -W -f '${{db:Status-Status}}' {PACKAGE}", check=False)
    return query.stdout.strip() == "installed"


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
    assert proc.returncode != 0, proc.stdout[-4000:]
    counts = recap(proc.stdout)
    assert counts[node]["failed"] == 1, counts
    assert all(c["failed"] == 0 and c["unreachable"] == 0 for n, c in counts.items() if n != node), counts
    failure = [line for line in proc.stdout.splitlines() if line.startswith(f"fatal: [{node}]")]
    assert failure and mirror.MIRROR_URL in failure[0], proc.stdout[-4000:]
    assert not installed(lab, node)

    Lab().up(nodes=LAB_NODES, nics=LAB_NICS)
    again = lab.playbook("mpi.yml", "-e", ONE_TRY)
    assert again.returncode == 0, again.stdout[-4000:]
    assert installed(lab, node)
