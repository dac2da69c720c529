"""Bad inventories against the real lab: site.yml must stop in preflight, name the host, the variable
and what is allowed, and leave every node exactly as it was (/etc/hosts byte for byte, no
rdmaforge block). The cases come from tests/inventory_cases.py: every one runs locally
(tests/unit/test_preflight_local.py); here, against real nodes, one of each kind (LAB_CASE_IDS), including
one caught from the inventory alone to show that such a run never reaches a node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LabHandle
from inventory_cases import CASES, Case, InventoryDraft, check_case, names_of

pytestmark = pytest.mark.lab

BEGIN = "# BEGIN rdmaforge cluster hosts"
END = "# END rdmaforge cluster hosts"
# Renamed hosts (node1.example, ...) must not leave entries in the project's fact cache.
ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}


def snapshot(lab: LabHandle) -> dict[str, tuple[str, int]]:
    """node -> (sha256 of /etc/hosts, number of rdmaforge BEGIN markers in it)."""
    state = {}
    for node in lab.nodes:
        out = lab.ssh(node, f"sha256sum /etc/hosts; grep -c '^{BEGIN}$' /etc/hosts || true").stdout.split()
        state[node] = (out[0], int(out[-1]))
    return state


@pytest.fixture(scope="module")
def clean_lab(lab: LabHandle) -> Iterator[LabHandle]:
    """The lab is shared by the whole session: if an earlier run of site.yml wrote its block (the session's first
    converge runs in the background from the start), take it out of /etc/hosts first, so that 'no block' below
    means this module's runs wrote none; put /etc/hosts back as it was afterwards, so that the converged lab the
    next modules expect is still converged."""
    saved = "/root/.hosts.before-bad-inventory"
    for node in lab.nodes:
        lab.ssh(node, f"cp /etc/hosts {saved} && sed -i '/^{BEGIN}$/,/^{END}$/d' /etc/hosts")
    yield lab
    for node in lab.nodes:  # written in place: a container's /etc/hosts can be a bind mount
        lab.ssh(node, f"cat {saved} > /etc/hosts && rm {saved}")


@pytest.fixture(scope="module")
def lab_draft(clean_lab: LabHandle) -> InventoryDraft:
    """The lab's generated inventory (hosts.yml and group_vars/), to copy and spoil per case."""
    draft = InventoryDraft.load(clean_lab.inventory)
    assert len(draft.names()) >= 2, "the bad-inventory cases need at least two lab nodes"
    return draft


# make test's budget keeps this to one case per kind of check: an inventory-only one, a role variable checked against
# the node's facts, one checked against another role's variables, and the OS table. (ENI/GPU counts have their own lab
# test in test_tuning_on_lab.py.)
LAB_CASE_IDS = ["unknown-fabric", "ssh-trust-group-unknown", "nccl-accelerator-unknown", "unsupported-os"]
LAB_CASES = [c for c in CASES if c.id in LAB_CASE_IDS]
assert len(LAB_CASES) == len(LAB_CASE_IDS), "a lab case id is not in tests/inventory_cases.py"


@pytest.mark.parametrize("case", LAB_CASES, ids=[c.id for c in LAB_CASES])
def test_bad_inventory_stops_before_any_change(
    case: Case, clean_lab: LabHandle, lab_draft: InventoryDraft, tmp_path: Path
) -> None:
    names = names_of(lab_draft)
    bad = lab_draft.copy()
    case.edit(bad, names)
    inventory = bad.write(tmp_path / "inventory")
    before = snapshot(clean_lab)
    proc = clean_lab.playbook("site.yml", *case.extra, inventory=inventory, env=ENV, timeout=600)
    check_case(case, names, proc.returncode, proc.stdout)
    after = snapshot(clean_lab)
    assert after == before, f"{case.id}: a node changed: {before} -> {after}"
    assert all(markers == 0 for _, markers in after.values()), f"{case.id}: rdmaforge block present: {after}"
