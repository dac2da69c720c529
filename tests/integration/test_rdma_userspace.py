"""Issue 3 on the lab: erdma repo from the signed lab mirror, RDMA userspace, OpenMPI, the real AIACC plugin,
NCCL settings per profile. (Idempotence and check mode
with every role run: test_fast_path.py.)"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess

import pytest

from tests.conftest import LabHandle, aiacc_library_from_mirror, assert_no_changes

pytestmark = pytest.mark.lab

ERDMA_DEBIAN_PACKAGES = ["libibverbs1", "ibverbs-providers", "ibverbs-utils", "librdmacm1", "rdma-core"]


def test_erdma_source_is_deb822_with_signed_by_keyring(converged: LabHandle) -> None:
    for node in converged.nodes:
        source = converged.ssh(node, "cat /etc/apt/sources.list.d/erdma.sources").stdout
        assert "Suites: bookworm/erdma" in source
        assert "Signed-By: /etc/apt/keyrings/erdma.gpg" in source
        assert "URIs: http://198.18.0.1:8080/erdma/apt/debian" in source
        keyring = converged.ssh(node, "stat -c '%a %U' /etc/apt/keyrings/erdma.gpg").stdout.split()
        assert keyring == ["644", "root"]
        assert (
            converged.ssh(
                node,
                "test ! -e /etc/apt/trusted.gpg.d/erdma.gpg && test ! -e /etc/apt/sources.list.d/erdma.list",
                check=False,
            ).returncode
            == 0
        )


def test_erdma_repository_is_used_and_verified(converged: LabHandle) -> None:
    node = next(iter(converged.nodes))
    # Seed 000.17: `deb [ arch=amd64 ] .../erdma/apt/ubuntu focal/erdma main`.
    source = converged.ssh(node, "cat /etc/apt/sources.list.d/erdma.sources").stdout
    assert re.search(r"^Architectures: amd64$", source, re.M), source
    # Seed 000.18 (`apt update` after adding the source): apt knows the erdma index before this test refreshes it.
    # No earlier lab module runs apt-get update (apt-get install does not refresh), so the converge did. That holds
    # on a lab this run brought up (make test's): on one kept from an earlier run, test_lab's apt-get update may have
    # fetched the index already, and this check proves less.
    policy = converged.ssh(node, "apt-cache policy rdma-core").stdout
    assert "erdma/apt/debian bookworm/erdma/main" in policy, policy
    update = converged.ssh(node, "apt-get update 2>&1").stdout
    assert "erdma/apt/debian bookworm/erdma InRelease" in update
    assert not re.search(r"NO_PUBKEY|not signed|BADSIG|^W: ", update, re.M), update


def test_erdma_packages_installed(converged: LabHandle) -> None:
    for node in converged.nodes:
        out = converged.ssh(
            node, "dpkg-query -W -f '${Package} ${Status}\\n' " + " ".join(ERDMA_DEBIAN_PACKAGES)
        ).stdout
        installed = {line.split()[0] for line in out.splitlines() if line.endswith("install ok installed")}
        assert installed == set(ERDMA_DEBIAN_PACKAGES)
        assert converged.ssh(node, "command -v ibv_devinfo").returncode == 0


def test_memlock_unlimited_for_rdma_users(converged: LabHandle) -> None:
    node = next(iter(converged.nodes))
    limits = converged.ssh(node, "cat /etc/security/limits.d/90-rdmaforge-memlock.conf").stdout
    assert "root soft memlock unlimited" in limits and "* hard memlock unlimited" in limits
    # A new SSH session goes through pam_limits, which applies the drop-in.
    session_limit = converged.ssh(node, "ulimit -l", fresh=True).stdout.strip()
    if controller_can_raise_limits():
        assert session_limit == "unlimited"
    else:
        # This controller runs without CAP_SYS_RESOURCE in its bounding set, so no process in the lab may raise
        # a hard limit: pam_limits must still have read our drop-in and tried to apply exactly these values.
        journal = converged.ssh(node, "journalctl -u ssh --no-pager -o cat | grep pam_limits | tail -1").stdout
        assert "Could not set limit for 'memlock' to soft=-1, hard=-1" in journal, journal


def controller_can_raise_limits() -> bool:
    CAP_SYS_RESOURCE = 24
    for line in open("/proc/self/status"):
        if line.startswith("CapBnd:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def test_mpirun_on_path_for_non_interactive_ssh(converged: LabHandle) -> None:
    for node in converged.nodes:
        assert converged.ssh(node, "command -v mpirun", fresh=True).stdout.strip() == "/usr/bin/mpirun"
        assert "Open MPI" in converged.ssh(node, "mpirun --version").stdout


def test_real_aiacc_plugin_installed_and_exports_net_api(converged: LabHandle) -> None:
    # Expected: the library inside the real sdist the lab mirror serves (PyPI's aiacc-nccl-plugin 2.0.1).
    sdist_library_sha256 = hashlib.sha256(aiacc_library_from_mirror()).hexdigest()
    for node in converged.nodes:
        resolved = converged.ssh(node, "ldconfig -p | grep 'libnccl-net.so '").stdout
        assert "/opt/rdmaforge/nccl-plugin/lib/libnccl-net.so" in resolved
        symbols = converged.ssh(node, "nm -D --defined-only /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so").stdout
        versions = sorted(int(v) for v in re.findall(r"\sncclNetPlugin_v(\d+)$", symbols, re.M))
        assert versions == [2, 3, 4, 5, 6]
        # The library is the sdist's own file (nccl_plugin takes it out of the package; pip is not run), and the
        # ld.so entry that the sdist's install hook would write is not there.
        got = converged.ssh(node, "sha256sum < /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so").stdout.split()[0]
        assert got == sdist_library_sha256
        entries = converged.ssh(node, "ls /etc/ld.so.conf.d/").stdout.split()
        assert "rdmaforge-nccl-plugin.conf" in entries and "aiacc_nccl_plugin.conf" not in entries, entries


def test_summary_reports_plugin_and_settings(converged: LabHandle) -> None:
    # summary.yml on its own right after a complete converge: every node matches its converge record, so every entry
    # is current, with what the converge installed. (The converge first: modules before this one reboot, impair and
    # resize the lab, and test_fast_path proves how summary.yml marks a node that drifted since its record.)
    proc = converged.playbook("site.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    nodes = converged.summary()
    assert set(nodes) == set(converged.nodes)
    for node in nodes.values():
        assert "not_in_this_run" not in node, f"{node['host']}: {node.get('not_in_this_run')}"
        assert node["fabric"] == "erdma"
        assert node["nccl_plugin"] == "aiacc" and node["nccl_plugin_version"] == "2.0.1"
        assert node["nccl_plugin_api_versions"] == [2, 3, 4, 5, 6]
        assert node["nccl_settings"] == {"NCCL_SOCKET_IFNAME": "eth0"}
        assert "rdma-core" in node["rdma_packages"]


def test_wrong_fingerprint_is_refused(converged: LabHandle) -> None:
    wrong = "0123456789ABCDEF0123456789ABCDEF01234567"
    node = next(iter(converged.nodes))
    before = converged.ssh(node, "sha256sum /etc/apt/sources.list.d/erdma.sources /etc/apt/keyrings/erdma.gpg").stdout
    proc = converged.playbook("rdma.yml", "-e", f"rdma_repos_erdma_gpg_fingerprint={wrong}")
    assert proc.returncode != 0
    assert f'rdma_repos_erdma_gpg_fingerprint="{wrong}" does not match' in proc.stdout
    assert "has fingerprint(s)" in proc.stdout
    after = converged.ssh(node, "sha256sum /etc/apt/sources.list.d/erdma.sources /etc/apt/keyrings/erdma.gpg").stdout
    assert before == after


PROFILE_CASES = {
    # profile: (expected nccl.conf settings, expected profile.d exports)
    "infiniband": ({"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "eth"}, {}),
    "acs_type2": (
        {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1", "NCCL_IB_HCA": "", "NCCL_SOCKET_IFNAME": "eth0"},
        {},
    ),
    "roce": ({"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "eth0"}, {}),
    "acs_type1": (
        {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "eth0"},
        {"AIACC_AUTOTUNE_PERF_MODE": "time"},
    ),
}


def read_conf(lab: LabHandle, node: str) -> dict[str, str]:
    from rdmaforge.parsers.nccl_env import parse_conf

    return parse_conf(lab.ssh(node, "cat /etc/nccl.conf").stdout)


@pytest.mark.parametrize("profile", sorted(PROFILE_CASES))
def test_nccl_conf_matches_each_profile(converged: LabHandle, profile: str) -> None:
    expected_conf, expected_exports = PROFILE_CASES[profile]
    node = list(converged.nodes)[0]
    extra = f'{{"nccl_env_profile": "{profile}", "nccl_env_overrides": {expected_exports!r}}}'.replace("'", '"')
    proc = converged.playbook("nccl_env.yml", "--limit", node, "-e", extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert read_conf(converged, node) == expected_conf
    script = converged.ssh(node, "cat /etc/profile.d/rdmaforge-nccl.sh", check=False)
    if expected_exports:
        for key, value in expected_exports.items():
            assert f"export {key}={value}" in script.stdout
        login = converged.ssh(node, "bash -lc 'echo $AIACC_AUTOTUNE_PERF_MODE'").stdout.strip()
        assert login == "time"
    else:
        assert script.returncode != 0  # no non-NCCL settings: no script
    # back to the inventory's profile
    restore = converged.playbook("nccl_env.yml", "--limit", node)
    assert restore.returncode == 0
    assert read_conf(converged, node) == {"NCCL_SOCKET_IFNAME": "eth0"}


def test_taco_accelerator_on_a_vpc_profile(converged: LabHandle) -> None:
    # Seed 004 (TACO-Training, LightCC over HARP on a VPC): its mpirun line's NCCL_ALGO and LIGHT_* settings.
    # LIGHT_INTRA_SIZE is the node's GPU count; the lab's nodes have none, so the seed's 8 comes from an override
    # (tests/unit/test_nccl_env.py covers the count itself and the refusal on a node without GPUs).
    node = list(converged.nodes)[0]
    extra = '{"nccl_env_profile": "tcp", "nccl_env_accelerator": "taco", "nccl_env_overrides": {"LIGHT_INTRA_SIZE": 8}}'
    proc = converged.playbook("nccl_env.yml", "--limit", node, "-e", extra)
    try:
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert read_conf(converged, node) == {
            "NCCL_ALGO": "RING",
            "NCCL_IB_DISABLE": "1",
            "NCCL_SOCKET_IFNAME": "eth0",
        }
        login = converged.ssh(
            node, "bash -lc 'echo $LIGHT_2D_ALLREDUCE $LIGHT_TOPK_ALLREDUCE $LIGHT_TOPK_THRESHOLD $LIGHT_INTRA_SIZE'"
        ).stdout.split()
        assert login == ["1", "1", "2097152", "8"]
        again = converged.playbook("nccl_env.yml", "--limit", node, "-e", extra)
        assert_no_changes(again.stdout)
    finally:
        restore = converged.playbook("nccl_env.yml", "--limit", node)
    assert restore.returncode == 0
    assert read_conf(converged, node) == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert converged.ssh(node, "test -e /etc/profile.d/rdmaforge-nccl.sh", check=False).returncode != 0


def test_bad_nccl_ib_hca_is_rejected_before_any_change(converged: LabHandle) -> None:
    node = list(converged.nodes)[0]
    before = converged.ssh(node, "sha256sum /etc/nccl.conf").stdout
    proc = converged.playbook("site.yml", "-e", '{"nccl_env_overrides": {"NCCL_IB_HCA": "mlx5_0:x"}}')
    assert proc.returncode != 0
    assert "'mlx5_0:x' is not 'device' or 'device:port'" in proc.stdout
    assert converged.ssh(node, "sha256sum /etc/nccl.conf").stdout == before


def run_infra_suite(lab: LabHandle) -> subprocess.CompletedProcess[str]:
    from rdmaforge.paths import PROJECT_ROOT

    venv_bin = PROJECT_ROOT / ".venv" / "bin"
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}"}
    argv = [str(venv_bin / "python"), "-m", "pytest", "tests/infra", "-q", "-p", "no:cacheprovider",
            "--hosts=ansible://cluster", f"--ansible-inventory={lab.inventory}"]  # fmt: skip
    return subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=600)


def test_testinfra_suite_catches_a_broken_node_and_converge_heals_it(converged: LabHandle) -> None:
    node = list(converged.nodes)[-1]
    converged.ssh(node, "rm /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so")
    broken = run_infra_suite(converged)
    assert broken.returncode != 0
    assert f"test_nccl_net_plugin_registered_and_exports_net_api[ansible://{node}]" in broken.stdout
    healed = converged.playbook("nccl_plugin.yml", "--limit", node)
    assert healed.returncode == 0, healed.stdout[-3000:]
    # Healed with the very library the other nodes have. (The whole suite passing on converged nodes, with its
    # per-node counts, is test_cli.py::test_verify_passes_on_the_converged_lab: rdmaforge verify runs this suite.)
    plugin = "sha256sum /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so"
    assert converged.ssh(node, plugin).stdout == converged.ssh(list(converged.nodes)[0], plugin).stdout
