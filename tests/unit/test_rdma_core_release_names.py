"""Review round 41b: Debian 13 and Ubuntu 24.04 renamed librdmacm1 to librdmacm1t64 (64-bit time_t). apt installs
the new package for the old name, but dpkg-query finds no package of the old name: every converge of an RDMA node
ran apt again, reset's record named a package that was never installed, and the summary showed no librdmacm.

rdma_core_selected, rendered by Ansible over a real inventory (benchmarks.ansible_vars.RoleRender), names the
library as each release calls it. The new name comes from Debian's trixie archive (main/binary-amd64 Packages:
``Package: librdmacm1t64``, ``Provides: librdmacm1 (= 56.1-1)``, ``Replaces: librdmacm1``), written out here."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.ansible_vars import RoleRender


@pytest.mark.parametrize(("distribution", "major", "librdmacm"), [
    ("Debian", "12", "librdmacm1"), ("Debian", "13", "librdmacm1t64"), ("Ubuntu", "22", "librdmacm1"),
    ("Ubuntu", "24", "librdmacm1t64"),
])  # fmt: skip
def test_the_erdma_set_names_librdmacm_as_the_release_does(tmp_path: Path, distribution: str, major: str,
                                                          librdmacm: str) -> None:  # fmt: skip
    facts = {"os_family": "Debian", "distribution": distribution, "distribution_major_version": major}
    render = RoleRender.build(tmp_path / "inv", "rdma_core", None,
                              {"node1": {"rdmaforge_fabric": "erdma", "rdma_core_extra_packages": ["librdmacm1"],
                                         "ansible_facts": facts}}, "cluster")  # fmt: skip
    selected = render.render("{{ rdma_core_selected }}", "node1", ["node1"])
    # seed 000's Ubuntu list, then the inventory's extra package as written
    assert selected == ["libibverbs1", "ibverbs-providers", "ibverbs-utils", librdmacm, "rdma-core", "librdmacm1"]


def test_the_rpm_family_names_are_unchanged(tmp_path: Path) -> None:
    facts = {"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "24"}
    render = RoleRender.build(tmp_path / "inv", "rdma_core", None,
                              {"node1": {"rdmaforge_fabric": "erdma", "ansible_facts": facts}}, "cluster")  # fmt: skip
    assert render.render("{{ rdma_core_selected }}", "node1", ["node1"]) == ["libibverbs", "rdma-core", "librdmacm",
                                                                           "libibverbs-utils"]  # fmt: skip
