"""Review round 41b: Debian 13 and Ubuntu 24.04 renamed librdmacm1 to librdmacm1t64 (64-bit time_t). apt installs
the new package for the old name, but dpkg-query finds no package of the old name: every converge of an RDMA node
ran apt again, reset's record named a package that was never installed, and the summary showed no librdmacm.

rdma_core_selected, as the role's own defaults and vars define it, is templated by a real ansible-playbook run over
fake nodes on this machine (no connection: only variables), one node per distribution release. The new name comes
from Debian's trixie archive (main/binary-amd64 Packages: ``Package: librdmacm1t64``, ``Provides: librdmacm1
(= 56.1-1)``, ``Replaces: librdmacm1``), written out here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from conftest import LOCAL_NODE, run_playbook

from rdmaforge.paths import PROJECT_ROOT

ROLE = PROJECT_ROOT / "roles" / "rdma_core"
#: Seed 000's Ubuntu list (the erdma profile) and seed 000's Alibaba Cloud Linux/CentOS list.
SEED_DEBIAN = ["libibverbs1", "ibverbs-providers", "ibverbs-utils", "librdmacm1", "rdma-core"]
SEED_REDHAT = ["libibverbs", "rdma-core", "librdmacm", "libibverbs-utils"]
#: node -> (facts, the packages expected).
NODES = {
    "debian12": ({"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12"},
                 [*SEED_DEBIAN]),
    "debian13": ({"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "13"},
                 [*SEED_DEBIAN[:3], "librdmacm1t64", "rdma-core"]),
    "ubuntu22": ({"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "22"},
                 [*SEED_DEBIAN]),
    "ubuntu24": ({"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "24"},
                 [*SEED_DEBIAN[:3], "librdmacm1t64", "rdma-core"]),
    "rocky9": ({"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "9"},
               [*SEED_REDHAT]),
    # A play that sets only os_family (tests/playbooks/dnf_path.yml takes a Debian node for RedHat-family so): the
    # undefined distribution fact failed the role; without it no release renamed anything.
    "os_family_only": ({"os_family": "Debian"}, [*SEED_DEBIAN]),
}  # fmt: skip


def test_each_release_gets_librdmacm_by_its_own_name(tmp_path: Path) -> None:
    hosts = {name: {**LOCAL_NODE, "node_facts": facts, "rdmaforge_fabric": "erdma"}
             for name, (facts, _) in NODES.items()}  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    playbook = tmp_path / "selected.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "all", "gather_facts": False,
        "vars": {"ansible_facts": "{{ node_facts }}"},  # as dnf_path.yml gives a play its facts
        "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
        "tasks": [{"ansible.builtin.debug": {"msg": "SELECTED {{ rdma_core_selected | to_json }}"}}],
    }]))  # fmt: skip
    proc = run_playbook(str(playbook), inventory=inventory, env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:]
    found = {host: json.loads(text.replace('\\"', '"'))
             for host, text in re.findall(r'ok: \[(\w+)\] => \{\s*"msg": "SELECTED (.*)"\s*\}', proc.stdout)}
    assert found == {name: packages for name, (_, packages) in NODES.items()}, proc.stdout[-4000:]
