"""Issue 18 on the lab: `rdmaforge reset` (playbooks/reset.yml) takes off one converged node what rdmaforge put
there, and nothing else, and `provision --limit NODE` afterwards converges it again.

Before the reset the node gets content that is not rdmaforge's, in the places rdmaforge writes to: a line of
/etc/hosts outside its block, a key in authorized_keys, a file under /opt/nccl, an ld.so.conf.d file, a policy
rule whose priority is in the eni role's range but whose table is not. All of it must stay, as must the packages
the node had before rdmaforge (the lab's base image) and everything on the other nodes. What rdmaforge installed
(seed 000's packages, the AIACC plugin's deb, the NCCL build and plugin, repositories, settings, trust, routing
rules, kernel arguments) must be gone, with the node rebooted without the huge page arguments (hugepages_reboot), a
second reset must change nothing, and a provision of that node alone must bring it all back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LabHandle
from tests.integration.test_cli import cli, run_dir_of

pytestmark = pytest.mark.lab

#: What a converge of the lab inventory puts on a node (the roles' documented default paths).
RDMAFORGE_PATHS = (
    "/etc/nccl.conf",
    "/opt/nccl/current",
    "/etc/ld.so.conf.d/rdmaforge-nccl.conf",
    "/opt/rdmaforge/nccl-plugin",
    "/etc/ld.so.conf.d/rdmaforge-nccl-plugin.conf",
    "/etc/rdmaforge/hostfile",
    "/etc/rdmaforge/apt.conf",
    "/etc/security/limits.d/90-rdmaforge-memlock.conf",
    "/etc/apt/sources.list.d/erdma.sources",
    "/etc/apt/keyrings/erdma.gpg",
    "/etc/systemd/network/40-rdmaforge-eni-eth1.network",
    "/etc/systemd/networkd.conf.d/60-rdmaforge-eni.conf",
    "/root/.ssh/rdmaforge_cluster_ed25519",
    "/var/lib/rdmaforge/converge-state.json",
    "/var/lib/rdmaforge/packages-added",
    "/var/lib/rdmaforge/hugepages-kernel-args",
)
#: Seed 000's eRDMA userspace and OpenMPI: absent from the lab's base image, so rdmaforge adds them.
SEED_PACKAGES = ("rdma-core", "libibverbs1", "ibverbs-utils", "openmpi-bin")
#: In the lab's base image (rdmaforge/lab/packages.py BASE_PACKAGES): a reset must keep them.
BASE_PACKAGES = ("openssh-server", "python3", "iproute2", "sudo", "grub2-common")
#: Seed 004's huge page arguments.
HUGEPAGE_ARGS = ("default_hugepagesz=1G", "hugepagesz=1G", "hugepages=")
USER_LINE = "10.9.9.9 users-own-host"
USER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZha2Uta2V5LW9mLWEtdXNlci1ub3QtcmRtYWZvcmdl user@own"
USER_RULE = "from 10.9.9.9 lookup 77"  # priority 1005: in the eni role's priority range, not its table range
#: Seed 000's AIACC deb (nccl_plugin_aiacc_source: package). Alibaba's file cannot be downloaded here: the test
#: builds a stand-in under the same file name, whose package carries the real plugin library (PyPI's sdist, as the
#: lab's nodes have it) where the role expects the vendor's (nccl_plugin_aiacc_package_lib).
AIACC_DEB = "aiacc-nccl-plugin-1.0.2.deb"
AIACC_PACKAGE = "rdmaforge-test-standin-aiacc-nccl-plugin"
AIACC_LIB = "/usr/local/lib/libnccl-net.so"
#: The controller's address on the lab bridge (the nodes reach the mirror there).
CONTROLLER = "198.18.0.1"


def present(lab: LabHandle, node: str, paths: tuple[str, ...]) -> list[str]:
    quoted = " ".join(paths)
    out = lab.ssh(node, f"for p in {quoted}; do [ -e $p ] || [ -L $p ] && echo $p; done; true").stdout
    return out.split()


def installed(lab: LabHandle, node: str, names: tuple[str, ...]) -> list[str]:
    out = lab.ssh(node, f"dpkg-query -W -f '${{Package}} ${{db:Status-Status}}\\n' {' '.join(names)}", check=False)
    return sorted(line.split()[0] for line in out.stdout.splitlines() if line.endswith(" installed"))


def recap_of(output: str) -> dict[str, dict[str, int]]:
    return json.loads((run_dir_of(output) / "recap.json").read_text())["hosts"]


def standin_aiacc_deb(lab: LabHandle, source_node: str, work: Path) -> Path:
    """Seed 000's deb file name, with the real plugin library copied from a converged node inside."""
    lib = base64.b64decode(lab.ssh(source_node, "base64 -w0 /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so").stdout)
    tree = work / "tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / AIACC_LIB.lstrip("/")).parent.mkdir(parents=True)
    (tree / AIACC_LIB.lstrip("/")).write_bytes(lib)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {AIACC_PACKAGE}\nVersion: 1.0.2\nArchitecture: all\n"
        "Maintainer: rdmaforge tests <t@example.invalid>\n"
        "Description: test stand-in for Alibaba's aiacc-nccl-plugin deb\n the AIACC net plugin from PyPI's sdist\n"
    )
    deb = work / "www" / AIACC_DEB
    deb.parent.mkdir()
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(tree), str(deb)], check=True,
                   capture_output=True)  # fmt: skip
    return deb


@pytest.fixture(scope="module")
def aiacc_deb_served(converged: LabHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The stand-in deb served over HTTP on the lab bridge; the variables that make nccl_plugin install it."""
    deb = standin_aiacc_deb(converged, sorted(converged.nodes)[0], tmp_path_factory.mktemp("aiacc-deb"))
    with socket.socket() as probe:
        probe.bind((CONTROLLER, 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", CONTROLLER],
                              cwd=deb.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        yield {
            "nccl_plugin_aiacc_source": "package",
            "nccl_plugin_aiacc_deb_url": f"http://{CONTROLLER}:{port}/{AIACC_DEB}",
            "nccl_plugin_aiacc_package_sha256": hashlib.sha256(deb.read_bytes()).hexdigest(),
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def node(converged: LabHandle, aiacc_deb_served: dict[str, str]) -> Iterator[str]:
    """The last node, with content of the user's own where rdmaforge writes; taken away again afterwards."""
    name = sorted(converged.nodes)[-1]
    converged.ssh(name, f"echo '{USER_LINE}' >> /etc/hosts && echo '{USER_KEY}' >> /root/.ssh/authorized_keys"
                        " && mkdir -p /opt/nccl/mine && echo keep > /opt/nccl/mine/file"
                        " && echo /opt/mine/lib > /etc/ld.so.conf.d/mine.conf"
                        " && ip rule add from 10.9.9.9 table 77 priority 1005")  # fmt: skip
    # Seed 000's other way to install the plugin: the vendor's deb, which os_packages records like any other.
    plugin = converged.playbook("nccl_plugin.yml", "--limit", name, "-e", json.dumps(aiacc_deb_served))
    assert plugin.returncode == 0, plugin.stdout[-5000:]
    yield name
    undo = ("sed -i '/users-own-host/d' /etc/hosts; sed -i '/user@own/d' /root/.ssh/authorized_keys; "
            "rm -rf /opt/nccl/mine /etc/ld.so.conf.d/mine.conf; ip rule del priority 1005; true")  # fmt: skip
    converged.ssh(name, undo)


#: The node's "running" kernel command line in the reset test (see hugepages_proc_cmdline).
TEST_CMDLINE = "/root/rdmaforge-test-cmdline"


def test_reset_takes_back_only_what_rdmaforge_put_and_provision_converges_again(
    converged: LabHandle, node: str, tmp_path: Path
) -> None:
    lab = converged
    others = sorted(n for n in lab.nodes if n != node)
    assert present(lab, node, RDMAFORGE_PATHS) == list(RDMAFORGE_PATHS)  # the converge put them all there
    recorded = lab.ssh(node, "cat /var/lib/rdmaforge/packages-added").stdout.split()
    assert set(SEED_PACKAGES) <= set(recorded) and not set(BASE_PACKAGES) & set(recorded), recorded
    # The deb's package name comes from the file, not from its file name.
    assert AIACC_PACKAGE in recorded and installed(lab, node, (AIACC_PACKAGE,)) == [AIACC_PACKAGE], recorded
    # nccl_plugin's own record of it (removed with rdmaforge's state directory below)
    assert lab.ssh(node, "cat /var/lib/rdmaforge/nccl-plugin-package").stdout.split() == [AIACC_PACKAGE]
    assert installed(lab, node, BASE_PACKAGES) == sorted(BASE_PACKAGES)
    def fingerprints() -> dict[str, str]:
        return {n: lab.ssh(n, "sha256sum /etc/nccl.conf /etc/hosts /etc/rdmaforge/hostfile").stdout for n in others}

    others_before = fingerprints()

    boot_id = lab.ssh(node, "cat /proc/sys/kernel/random/boot_id").stdout
    # A container runs the controller's kernel, which never gets the arguments, and a withdrawal reboots only where
    # the running kernel has them (b85c1ce): the node's running command line is a file here, holding the role's
    # arguments as a node booted with them has (hugepages_proc_cmdline).
    set_args = lab.ssh(node, "cat /var/lib/rdmaforge/hugepages-kernel-args").stdout.strip()
    assert set_args, "no huge page arguments recorded"
    # (not appended to the controller's: its command line ends in " -- " init arguments, which are no kernel's)
    lab.ssh(node, f'echo "BOOT_IMAGE=/boot/vmlinuz root=/dev/vda1 ro quiet {set_args}" > {TEST_CMDLINE}')
    booted = {"hugepages_reboot": True, "hugepages_proc_cmdline": TEST_CMDLINE}
    # First as a careful operator would: --check names what the reset would take off and takes nothing.
    check = cli(tmp_path / "runs", "reset", "-i", str(lab.inventory), "--limit", node, "--yes", "--check",
                "-e", json.dumps(booted))  # fmt: skip
    assert check.returncode == ExitCode.OK, check.stdout[-5000:]
    checked = json.loads((run_dir_of(check.stdout) / "recap.json").read_text())
    assert checked["hosts"][node]["status"] == "would_change", checked["hosts"]
    removal = "nccl_env : Remove the NCCL settings file rdmaforge created: /etc/nccl.conf"  # the converge wrote it
    assert f"  {node}: would change: {removal}" in check.stdout, check.stdout[-5000:]
    assert {c["host"] for c in checked["would_change"]} == {node}, checked["would_change"]
    assert present(lab, node, RDMAFORGE_PATHS) == list(RDMAFORGE_PATHS)  # nothing was taken
    assert installed(lab, node, SEED_PACKAGES) == sorted(SEED_PACKAGES)
    assert lab.ssh(node, "cat /proc/sys/kernel/random/boot_id").stdout == boot_id  # nor rebooted
    assert fingerprints() == others_before

    # With hugepages_reboot the node reboots without the huge page arguments, as turning the feature off does.
    proc = cli(tmp_path / "runs", "reset", "-i", str(lab.inventory), "--limit", node, "--yes",
               "-e", json.dumps(booted))  # fmt: skip
    lab.ssh(node, f"rm -f {TEST_CMDLINE}")
    assert proc.returncode == ExitCode.OK, proc.stdout[-5000:]
    assert lab.ssh(node, "cat /proc/sys/kernel/random/boot_id").stdout != boot_id, "the node did not reboot"
    assert lab.ssh(node, "test -e /run/rdmaforge-reboot.lock", check=False).returncode == 1  # cleared by the reboot
    assert set(recap_of(proc.stdout)) - {"localhost"} == {node}  # no other node was touched

    # rdmaforge's content is gone ...
    assert present(lab, node, RDMAFORGE_PATHS) == []
    assert installed(lab, node, SEED_PACKAGES) == []
    assert installed(lab, node, (AIACC_PACKAGE,)) == [] and present(lab, node, (AIACC_LIB,)) == []
    grub = lab.ssh(node, '. /etc/default/grub && echo "$GRUB_CMDLINE_LINUX"; grep -E "^\\s*linux" /boot/grub/grub.cfg')
    assert "linux" in grub.stdout and not [arg for arg in HUGEPAGE_ARGS if arg in grub.stdout], grub.stdout
    # The reboot cleared the pending marker: nothing of rdmaforge's is left in its state directory, so it went.
    assert lab.ssh(node, "ls -A /var/lib/rdmaforge 2>&1; true").stdout.strip().endswith("No such file or directory")
    rules = lab.ssh(node, "ip rule show").stdout
    assert "lookup 1001" not in rules and "lookup 1002" not in rules, rules
    hosts = lab.ssh(node, "cat /etc/hosts").stdout
    assert "rdmaforge cluster hosts" not in hosts
    assert "rdmaforge cluster" not in lab.ssh(node, "cat /root/.ssh/authorized_keys").stdout
    # The lab's base image has no /etc/ssh/ssh_known_hosts: ssh_trust created it (and recorded so), and nothing but
    # its block was in it, so the reset removes it; authorized_keys was there before (the lab's key) and stays.
    assert present(lab, node, ("/etc/ssh/ssh_known_hosts",)) == []
    assert "libnccl" not in lab.ssh(node, "ldconfig -p").stdout
    # ... and everything else stays: the user's content, the base image's packages, the lab's own hosts block.
    assert USER_LINE in hosts and "rdmaforge lab nodes" in hosts
    assert USER_KEY in lab.ssh(node, "cat /root/.ssh/authorized_keys").stdout
    kept = lab.ssh(node, "cat /opt/nccl/mine/file /etc/ld.so.conf.d/mine.conf").stdout
    assert kept.split() == ["keep", "/opt/mine/lib"], kept
    # rdmaforge's own directories went, nccl-tests' prefix root inside /opt/rdmaforge first; the NCCL prefix root
    # stays for the user's directory in it, and the closing message says so.
    assert present(lab, node, ("/opt/rdmaforge", "/etc/rdmaforge", "/opt/nccl")) == ["/opt/nccl"]
    said = " ".join((run_dir_of(proc.stdout) / "ansible" / "stdout").read_text().split())
    assert "/opt/nccl, which are not empty" in said, said[-3000:]
    assert USER_RULE in rules
    assert installed(lab, node, BASE_PACKAGES) == sorted(BASE_PACKAGES)
    # The secondary NICs keep their addresses (no backend reload cuts a rail in the middle of the run).
    assert "198.18.1." in lab.ssh(node, "ip -br addr show eth1").stdout
    # The other nodes were not touched.
    assert fingerprints() == others_before

    # A reset node has nothing left to reset.
    again = cli(tmp_path / "runs", "reset", "-i", str(lab.inventory), "--limit", node, "--yes")
    assert again.returncode == ExitCode.OK, again.stdout[-5000:]
    assert recap_of(again.stdout)[node]["changed"] == 0, again.stdout[-5000:]

    # A provision of that node converges it again: the others did not change, so it is the operator's run.
    back = cli(tmp_path / "runs", "provision", "-i", str(lab.inventory), "--limit", node)
    assert back.returncode == ExitCode.OK, back.stdout[-6000:]
    assert present(lab, node, RDMAFORGE_PATHS) == list(RDMAFORGE_PATHS)
    assert installed(lab, node, SEED_PACKAGES) == sorted(SEED_PACKAGES)
    assert set(SEED_PACKAGES) <= set(lab.ssh(node, "cat /var/lib/rdmaforge/packages-added").stdout.split())
