"""Issue 5 on the lab (3 nodes, 2 extra NICs each): huge pages through GRUB, rolling reboots, and policy
routing on the extra NICs (stand-ins for TACO's ENIs), over real SSH with real systemd-networkd.

The nodes are containers running the controller's kernel: the GRUB files are real Debian files, the
grub-mkconfig is the lab's stand-in (rdmaforge/lab/bootloader.py), and 1 GiB pages cannot really be
reserved, which the verify step must say rather than pass."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rdmaforge.lab import Lab
from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LabHandle, assert_no_changes, recap
from tests.integration.test_cli import cli, run_dir_of

pytestmark = pytest.mark.lab

ARGS = ("default_hugepagesz=1G", "hugepagesz=1G", "hugepages=")
#: The hugepages role's default reboot lock on a node.
REBOOT_LOCK = "/run/rdmaforge-reboot.lock"


def grub_line(lab: LabHandle, node: str) -> str:
    return lab.ssh(node, '. /etc/default/grub && echo "$GRUB_CMDLINE_LINUX"').stdout.strip()


def kernel_lines(lab: LabHandle, node: str) -> list[str]:
    return re.findall(r"^\s*linux\s+(.*)$", lab.ssh(node, "cat /boot/grub/grub.cfg").stdout, re.M)


def pages_in(line: str) -> list[str]:
    return re.findall(r"(?:^|\s)hugepages=(\d+)", line)


@pytest.fixture(scope="module")
def tuned(converged: LabHandle) -> Iterator[LabHandle]:
    """The converged lab; afterwards the default page count is configured again (no reboot)."""
    yield converged
    proc = converged.playbook("hugepages.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]


# --- GRUB and huge pages --------------------------------------------------------------------------


def test_arguments_once_after_a_second_converge_and_backup_kept(tuned: LabHandle) -> None:
    """The session's site.yml converge was the first; a second run changes nothing and leaves each argument once.
    The nodes run the controller's kernel, which has no 1 GiB pages reserved: the run says so plainly, never OK."""
    lab = tuned
    proc = lab.playbook("hugepages.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert_no_changes(proc.stdout)
    reports = re.findall(r'"msg": "(node\d): (OK|NOT RESERVED): ([^"]*)"', proc.stdout)
    assert sorted(r[0] for r in reports) == sorted(lab.nodes), proc.stdout[-4000:]
    assert {r[1] for r in reports} == {"NOT RESERVED"}
    for node in lab.nodes:
        line = grub_line(lab, node)
        for arg in ARGS:
            assert len(re.findall(rf"(?:^|\s){re.escape(arg)}", line)) == 1, (node, line)
        assert pages_in(line) == ["10"], line  # seed 004: 0 GPUs x 5 + 10
        for kernel in kernel_lines(lab, node):
            assert pages_in(kernel) == ["10"], kernel
        backups = lab.ssh(node, "ls /etc/default/ | grep -c '^grub\\..*~$'", check=False).stdout.strip()
        assert int(backups or 0) >= 1, f"{node}: no backup of /etc/default/grub"


def test_check_mode_changes_nothing(tuned: LabHandle) -> None:
    lab = tuned
    before = {n: lab.ssh(n, "md5sum /etc/default/grub /boot/grub/grub.cfg").stdout for n in lab.nodes}
    proc = lab.playbook("hugepages.yml", "-e", "hugepages_count=14", "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert all(c["changed"] > 0 for c in recap(proc.stdout).values())  # it reports what it would change
    assert "hugepages=14" in proc.stdout  # in the diff
    assert {n: lab.ssh(n, "md5sum /etc/default/grub /boot/grub/grub.cfg").stdout for n in lab.nodes} == before


def test_a_new_count_replaces_the_old_one(tuned: LabHandle) -> None:
    lab = tuned
    proc = lab.playbook("hugepages.yml", "-e", "hugepages_count=13")
    assert proc.returncode == 0, proc.stdout[-4000:]
    for node in lab.nodes:
        assert pages_in(grub_line(lab, node)) == ["13"]
        assert all(pages_in(k) == ["13"] for k in kernel_lines(lab, node))
        # the reboot this change needs is recorded, and reported
        assert (
            lab.ssh(node, "cat /var/lib/rdmaforge/hugepages-reboot-pending").stdout.strip()
            == lab.ssh(node, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
        )
    assert proc.stdout.count("NOT RESERVED") == len(lab.nodes)
    assert "a reboot is pending" in proc.stdout


def test_a_failing_grub_mkconfig_puts_the_defaults_back_and_says_so(tuned: LabHandle) -> None:
    """Issue 18: the boot loader command fails (a stand-in that exits 1 half-way, as a broken os-prober would);
    the node keeps the GRUB defaults, grub.cfg and pending-reboot state it had, and the run names what happened."""
    lab = tuned
    node = sorted(lab.nodes)[-1]
    state = (
        "sha256sum /etc/default/grub /boot/grub/grub.cfg; ls /etc/default/grub.d 2>/dev/null; "
        "cat /var/lib/rdmaforge/hugepages-reboot-pending 2>/dev/null || echo no-marker"
    )
    before = lab.ssh(node, state).stdout
    record = "/var/lib/rdmaforge/hugepages-kernel-args"
    recorded = lab.ssh(node, f"cat {record}").stdout.split()
    command = ["/bin/sh", "-c", "echo grub-mkconfig: cannot probe disks >&2; exit 1"]
    failing = json.dumps({"hugepages_grub_mkconfig_command": command})
    proc = lab.playbook("hugepages.yml", "--limit", node, "-e", "hugepages_count=11", "-e", failing)
    assert proc.returncode != 0
    assert "cannot probe disks" in proc.stdout
    assert "Put back from backups: /etc/default/grub" in proc.stdout
    assert "boots as before" in proc.stdout
    assert lab.ssh(node, state).stdout == before
    # The record is written before the change (a run cut short after it can still be withdrawn): it lists the
    # arguments the run was setting besides those it had, either of which could be on the command line.
    assert lab.ssh(node, f"cat {record}").stdout.split() == [*recorded, "hugepages=11"]
    # With a working command the same change goes through, and the tuned fixture restores the default.
    proc = lab.playbook("hugepages.yml", "--limit", node, "-e", "hugepages_count=11")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert pages_in(grub_line(lab, node)) == ["11"]


#: What Debian's memtest86+ 6.10-4 adds to grub.cfg through /etc/grub.d/20_memtest86+ on a BIOS host (its BIOS
#: image takes no kernel command line of ours).
MEMTEST_ENTRY = 'menuentry "Memory test (memtest86+x64.bin)" {\n        linux   /boot/memtest86+x64.bin\n}'


def test_a_memtest_entry_passes_and_a_failed_check_regenerates_grub_cfg_back(tuned: LabHandle) -> None:
    """Two faults after grub-mkconfig succeeded. A memtest86+ entry (Ubuntu Server has it) failed the role's check,
    and the rescue put /etc/default/grub back but left the regenerated grub.cfg, carrying the new count for the
    next boot, while saying grub.cfg was as it was. A memtest entry is no kernel line now; and when the check does
    fail after grub.cfg was regenerated, grub.cfg is regenerated again from the restored defaults."""
    from rdmaforge.lab.bootloader import GRUB_CFG, STANDIN

    lab = tuned
    node = sorted(lab.nodes)[0]
    with_memtest = f"{STANDIN} -o {GRUB_CFG} && printf '%s\\n' {shlex.quote(MEMTEST_ENTRY)} >> {GRUB_CFG}"
    command = json.dumps({"hugepages_grub_mkconfig_command": ["/bin/sh", "-c", with_memtest]})
    proc = lab.playbook("hugepages.yml", "--limit", node, "-e", "hugepages_count=11", "-e", command)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "memtest86+x64.bin" in lab.ssh(node, f"cat {GRUB_CFG}").stdout
    assert [pages_in(k) for k in kernel_lines(lab, node) if "vmlinuz" in k] == [["11"], ["11"]]
    marker = "/var/lib/rdmaforge/hugepages-reboot-pending"
    state = f"sha256sum /etc/default/grub {GRUB_CFG}; cat {marker} 2>/dev/null || echo none"
    before = lab.ssh(node, state).stdout
    # A boot loader command that writes grub.cfg without the count (the check after it fails).
    dropping = f"{with_memtest} && sed -i 's/ hugepages=12//' {GRUB_CFG}"
    command = json.dumps({"hugepages_grub_mkconfig_command": ["/bin/sh", "-c", dropping]})
    proc = lab.playbook("hugepages.yml", "--limit", node, "-e", "hugepages_count=12", "-e", command)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    assert "Put back from backups: /etc/default/grub" in said, said[-4000:]
    assert f"{GRUB_CFG} was regenerated again from the restored defaults, so the node boots as before" in said
    assert lab.ssh(node, state).stdout == before


def test_a_pool_of_another_size_set_by_hand_is_never_dropped(tuned: LabHandle) -> None:
    """An operator's 2M pool (for DPDK, say) in GRUB_CMDLINE_LINUX was replaced by the role's 1G one without a word,
    and withdrawing the role's pool never brought it back: the run now stops before any change, naming it."""
    lab = tuned
    node = sorted(lab.nodes)[1]
    by_hand = "hugepagesz=2M hugepages=1024"
    lab.ssh(node, f"sed -i 's/^GRUB_CMDLINE_LINUX=\"/GRUB_CMDLINE_LINUX=\"{by_hand} /' /etc/default/grub")
    try:
        state = "sha256sum /etc/default/grub /boot/grub/grub.cfg"
        before = lab.ssh(node, state).stdout
        assert grub_line(lab, node).startswith(by_hand)
        proc = lab.playbook("hugepages.yml", "--limit", node, "-e", "hugepages_count=12")
        assert proc.returncode != 0
        said = " ".join(proc.stdout.split())
        assert f"{node}: the boot loader configuration already has 1024 pages of 2M (" in said, said[-4000:]
        assert "which rdmaforge did not set" in said and "Nothing was changed." in said
        assert lab.ssh(node, state).stdout == before
    finally:
        lab.ssh(node, f"sed -i 's/^GRUB_CMDLINE_LINUX=\"{by_hand} /GRUB_CMDLINE_LINUX=\"/' /etc/default/grub")
    assert not grub_line(lab, node).startswith(by_hand)
    # Seed 004's sed writes the arguments into GRUB_CMDLINE_LINUX_DEFAULT too: the normal entries would pass each
    # key twice, and the grub.cfg check passed (the role's tokens were each there once).
    lab.ssh(node, "sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=\"quiet/GRUB_CMDLINE_LINUX_DEFAULT=\"quiet hugepages=16/' "
                  "/etc/default/grub")  # fmt: skip
    try:
        before = lab.ssh(node, "sha256sum /etc/default/grub /boot/grub/grub.cfg").stdout
        proc = lab.playbook("hugepages.yml", "--limit", node, "-e", "hugepages_count=12")
        assert proc.returncode != 0
        said = " ".join(proc.stdout.split())
        assert f"{node}: GRUB_CMDLINE_LINUX_DEFAULT has hugepages=16; the normal boot entries" in said, said[-4000:]
        assert lab.ssh(node, "sha256sum /etc/default/grub /boot/grub/grub.cfg").stdout == before
    finally:
        lab.ssh(node, "sed -i 's/ hugepages=16\"/\"/' /etc/default/grub")
    assert "hugepages" not in lab.ssh(node, '. /etc/default/grub && echo "$GRUB_CMDLINE_LINUX_DEFAULT"').stdout


def test_a_record_that_is_no_list_of_the_roles_arguments_withdraws_nothing(tuned: LabHandle) -> None:
    """The record names what hugepages_enabled: false (and reset) take off the kernel command line. An empty one
    stopped the run with the module's 'args is empty', naming neither the file nor the host; a bare 'hugepages'
    would have removed every hugepages= value, the operator's too."""
    lab = tuned
    node = sorted(lab.nodes)[1]
    record = "/var/lib/rdmaforge/hugepages-kernel-args"
    kept = lab.ssh(node, f"cat {record}").stdout
    try:
        for text in ("", "hugepages"):
            lab.ssh(node, f"printf '%s\\n' {shlex.quote(text)} > {record}")
            before = lab.ssh(node, "sha256sum /etc/default/grub /boot/grub/grub.cfg").stdout
            proc = lab.playbook("hugepages.yml", "--limit", node, "-e", "hugepages_enabled=false")
            assert proc.returncode != 0
            said = " ".join(proc.stdout.split())
            held = json.dumps(text) if text else "nothing"
            assert f"{node}: {record} holds {held}, not the arguments the hugepages role records" in said, said[-3000:]
            assert lab.ssh(node, "sha256sum /etc/default/grub /boot/grub/grub.cfg").stdout == before
    finally:
        lab.ssh(node, f"printf '%s' {shlex.quote(kept)} > {record}")


WIPE_NETWORK = (
    "ip rule del priority 1001; ip rule del priority 1002; ip route flush table 1001; ip route flush table 1002;"
    " ip link set eth1 mtu 1500; ip link set eth2 mtu 1500"
)


def test_rolling_reboot_one_node_at_a_time(tuned: LabHandle) -> None:
    """Also the eni role's configuration surviving a reboot (one reboot round serves both: they cost a minute each).
    The lab keeps a node's network namespace across its reboots, so one node's live network state is wiped first:
    what comes back after the reboot comes from the files the role wrote (systemd-networkd)."""
    lab = tuned
    wiped = list(lab.nodes)[1]
    lab.ssh(wiped, WIPE_NETWORK)
    assert "lookup 1001" not in lab.ssh(wiped, "ip rule show").stdout
    boot_id_before = lab.ssh(wiped, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
    status = {n.name: n for n in Lab().status().nodes}
    boots_before = {name: node.boots for name, node in status.items()}
    proc = lab.playbook("hugepages.yml", "-e", "hugepages_count=12", "-e", "hugepages_reboot=true", timeout=1800)
    assert proc.returncode == 0, proc.stdout[-6000:]
    after = {n.name: n.boots for n in Lab().status().nodes}
    assert after == {name: count + 1 for name, count in boots_before.items()}, (boots_before, after)
    # Boot times from the lab's log: each node went down only after the one before it was back up.
    windows = []
    for name in lab.nodes:
        log = (Lab().paths.node_dir(name) / "boots.log").read_text().splitlines()
        down = float([line for line in log if " exit " in line][-1].split()[0])
        up = float([line for line in log if " boot " in line][-1].split()[0])
        windows.append((down, up, name))
    windows.sort()
    assert [w[2] for w in windows] == list(lab.nodes), windows  # inventory order
    for (_, up, first), (down, _, second) in zip(windows, windows[1:], strict=False):
        assert down > up, f"{second} went down before {first} was back: {windows}"
    # After the reboot the container still runs the controller's kernel: reported, neither passed nor failed (a
    # host with a kernel of its own that came back without the arguments fails: test_hugepages_reboot_decision).
    assert proc.stdout.count("NOT RESERVED") == len(lab.nodes)
    said = " ".join(proc.stdout.split())
    assert "NOT RESERVED: not judged: this is a container (" in said and "which runs the kernel of its host" in said
    for node in lab.nodes:
        # The marker now names a boot that is over: the reboot happened, and no later run reboots for it again.
        kept = lab.ssh(node, "cat /var/lib/rdmaforge/hugepages-reboot-pending").stdout.strip()
        assert kept and kept != lab.ssh(node, "cat /proc/sys/kernel/random/boot_id").stdout.strip(), node
        # The reboot lock each run took is gone with the boot it guarded.
        assert lab.ssh(node, f"test -e {REBOOT_LOCK}", check=False).returncode == 1
        assert lab.ssh(node, "systemctl is-system-running --wait").stdout.strip() == "running"
        # hugetlbfs is mounted with the 1 GiB page size after the boot
        assert "pagesize=1024M" in lab.ssh(node, "grep hugetlbfs /proc/mounts").stdout
    rules = lab.ssh(wiped, "ip rule show").stdout
    assert "lookup 1001" in rules and "lookup 1002" in rules, rules
    assert "default via 198.18.1.1 dev eth1" in lab.ssh(wiped, "ip route show table 1001").stdout
    assert lab.ssh(wiped, "cat /sys/class/net/eth1/mtu /sys/class/net/eth2/mtu").stdout.split() == ["1400", "1400"]
    # A reboot rdmaforge did not do leaves the marker of a boot that is over (it holds the boot id it was written
    # in): put back on one node, it must neither reboot the node again nor count as a change.
    lab.ssh(wiped, f"echo {boot_id_before} > /var/lib/rdmaforge/hugepages-reboot-pending")
    again = lab.playbook("hugepages.yml", "-e", "hugepages_count=12", "-e", "hugepages_reboot=true")
    assert again.returncode == 0, again.stdout[-4000:]
    assert_no_changes(again.stdout)
    assert "a reboot is pending: " not in again.stdout
    assert {n.name: n.boots for n in Lab().status().nodes} == after  # nothing rebooted twice
    eni = lab.playbook("eni.yml")
    assert eni.returncode == 0, eni.stdout[-4000:]
    assert_no_changes(eni.stdout)


def test_a_node_another_run_is_rebooting_is_not_rebooted_and_the_holder_is_named(
    tuned: LabHandle, tmp_path: Path
) -> None:
    lab, node = tuned, sorted(tuned.nodes)[-1]
    holder = "a run from another-controller since 2026-11-26T10:00:00Z"
    lab.ssh(node, f"mkdir {REBOOT_LOCK} && echo '{holder}' > {REBOOT_LOCK}/owner")
    boot_id = lab.ssh(node, "cat /proc/sys/kernel/random/boot_id").stdout
    playbook = tmp_path / "reboot.yml"  # the reboot step of playbooks/hugepages.yml, on its own
    playbook.write_text(yaml.safe_dump([{
        "name": "Reboot a node", "hosts": "cluster", "become": True, "gather_facts": False,
        "tasks": [{"name": "Reboot", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.hugepages",
                                                                       "tasks_from": "reboot"}}],
    }]))  # fmt: skip
    try:
        proc = lab.playbook(str(playbook), "--limit", node, "-e", json.dumps(
            {"hugepages_reboot_lock_wait": 3, "hugepages_reboot_lock_poll": 1}))  # fmt: skip
        assert proc.returncode != 0, proc.stdout[-4000:]
        says = f"{node}: another run is rebooting this node (lock {REBOOT_LOCK}, held by {holder}); waited 3 s"
        assert says in " ".join(proc.stdout.split()), proc.stdout[-4000:]
        assert lab.ssh(node, "cat /proc/sys/kernel/random/boot_id").stdout == boot_id  # not rebooted
        assert lab.ssh(node, f"cat {REBOOT_LOCK}/owner").stdout.strip() == holder  # the holder's lock stays
        # The same lock two hours old (older than hugepages_reboot_lock_stale_after, by the node's clock): the run
        # that took it was killed before its reboot, which would have cleared /run. Taken over, named, rebooted.
        lab.ssh(node, f"touch -d '2 hours ago' {REBOOT_LOCK}")
        proc = lab.playbook(str(playbook), "--limit", node, "-e", json.dumps(
            {"hugepages_reboot_lock_wait": 3, "hugepages_reboot_lock_poll": 1,
             "hugepages_reboot_lock_stale_after": 3600,
             "hugepages_enabled": False}))  # fmt: skip  # the reboot step alone: no reservation to verify after it
        assert proc.returncode == 0, proc.stdout[-4000:]
        says = (f"WARNING {node}: the reboot lock {REBOOT_LOCK}, held by {holder}, is older than "
                "hugepages_reboot_lock_stale_after (3600 s): the run that took it is taken to be gone")  # fmt: skip
        assert says in " ".join(proc.stdout.split()), proc.stdout[-4000:]
        assert lab.ssh(node, "cat /proc/sys/kernel/random/boot_id").stdout != boot_id  # rebooted
        assert lab.ssh(node, f"test -e {REBOOT_LOCK} && echo held || echo free").stdout.strip() == "free"
    finally:
        lab.ssh(node, f"rm -rf {REBOOT_LOCK}")


def test_a_host_without_boot_loader_is_refused_before_any_change(tuned: LabHandle) -> None:
    lab = tuned
    node = list(lab.nodes)[-1]
    lab.ssh(node, "mv /boot/grub/grub.cfg /root/grub.cfg.saved")
    try:
        before = lab.ssh(node, "md5sum /etc/default/grub").stdout
        proc = lab.playbook("preflight.yml", "-e", "hugepages_count=14")
        assert proc.returncode != 0
        assert f"{node}: hugepages_enabled is true, but no boot loader configuration" in proc.stdout, proc.stdout[
            -4000:
        ]
        assert "a generated grub.cfg under /boot is missing" in proc.stdout
        proc = lab.playbook("hugepages.yml", "-e", "hugepages_count=14", "--limit", node)
        assert proc.returncode != 0
        assert "Nothing was changed" in proc.stdout
        assert lab.ssh(node, "md5sum /etc/default/grub").stdout == before
        assert lab.ssh(node, "ls /etc/default/grub.d").stdout.strip() == "init-select.cfg"
    finally:
        lab.ssh(node, "mv /root/grub.cfg.saved /boot/grub/grub.cfg")


def test_the_playbook_on_its_own_refuses_more_pages_than_memory(tuned: LabHandle) -> None:
    """playbooks/hugepages.yml run without preflight makes preflight's memory check itself: 4096 pages of 1 GiB are
    more than any lab node's memory (the lab allows hugepages_max_memory_fraction 0.9), and nothing is written."""
    lab = tuned
    node = sorted(lab.nodes)[0]
    before = lab.ssh(node, "md5sum /etc/default/grub /boot/grub/grub.cfg").stdout
    proc = lab.playbook("hugepages.yml", "-e", "hugepages_count=4096", "--limit", node)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    assert f"{node}: hugepages_count=4096 x hugepages_size=1G reserves 4194304 MiB at boot" in said, proc.stdout[-4000:]
    assert "more than hugepages_max_memory_fraction=0.9 of the node's" in said
    assert lab.ssh(node, "md5sum /etc/default/grub /boot/grub/grub.cfg").stdout == before


def test_turning_huge_pages_off_withdraws_exactly_what_was_set(tuned: LabHandle) -> None:
    """Issue 18: hugepages_enabled: false takes the role's arguments off the boot loader configuration (the
    defaults and every generated kernel line), and only them: an argument set by hand stays. A re-run changes
    nothing, and turning the feature on again puts them back once."""
    lab = tuned
    node = list(lab.nodes)[0]
    set_by_role = lab.ssh(node, "cat /var/lib/rdmaforge/hugepages-kernel-args").stdout.split()
    assert [arg.partition("=")[0] for arg in set_by_role] == ["default_hugepagesz", "hugepagesz", "hugepages"]
    assert all(f" {arg}" in f" {grub_line(lab, node)}" for arg in set_by_role)
    lab.ssh(node, """sed -i 's/^GRUB_CMDLINE_LINUX="/GRUB_CMDLINE_LINUX="intel_iommu=on /' /etc/default/grub""")
    try:
        off = lab.playbook("hugepages.yml", "-e", "hugepages_enabled=false", "--limit", node)
        assert off.returncode == 0, off.stdout[-4000:]
        assert recap(off.stdout)[node]["changed"] > 0
        assert f"{node}: hugepages_enabled is false: removed {' '.join(set_by_role)}" in " ".join(off.stdout.split())
        line = grub_line(lab, node)
        assert "intel_iommu=on" in line.split(), line
        assert not any(arg.partition("=")[0] in ("default_hugepagesz", "hugepagesz", "hugepages") for arg in
                       line.split()), line  # fmt: skip
        for kernel in kernel_lines(lab, node):
            assert "intel_iommu=on" in kernel.split() and not pages_in(kernel) and "hugepagesz=1G" not in kernel
        gone = "test ! -e /var/lib/rdmaforge/hugepages-kernel-args"
        gone += " && test ! -e /etc/systemd/system/dev-hugepages.mount.d/rdmaforge.conf"
        assert lab.ssh(node, gone, check=False).returncode == 0
        # The container runs the controller's kernel, which never had them: no reboot is pending for their removal,
        # and none is left announced (a host whose kernel has them: test_hugepages_reboot_decision).
        assert lab.ssh(node, "test -e /var/lib/rdmaforge/hugepages-reboot-pending", check=False).returncode == 1
        assert "the running kernel does not have them: nothing to reboot for" in " ".join(off.stdout.split())
        again = lab.playbook("hugepages.yml", "-e", "hugepages_enabled=false", "--limit", node)
        assert again.returncode == 0, again.stdout[-4000:]
        assert_no_changes(again.stdout)
    finally:
        # With the role's arguments gone, the hand-set one may be the line's last: no space after it then.
        lab.ssh(node, """sed -i -E 's/^GRUB_CMDLINE_LINUX="intel_iommu=on ?/GRUB_CMDLINE_LINUX="/' /etc/default/grub""")
    # hugepages_mount turned off alone: the page-size drop-in goes (it stayed in force), and comes back with it on.
    unmounted = lab.playbook("hugepages.yml", "-e", "hugepages_mount=false", "--limit", node)
    assert unmounted.returncode == 0, unmounted.stdout[-4000:]
    drop_in = "/etc/systemd/system/dev-hugepages.mount.d/rdmaforge.conf"
    assert lab.ssh(node, f"test ! -e {drop_in}", check=False).returncode == 0
    on = lab.playbook("hugepages.yml", "--limit", node)
    assert on.returncode == 0, on.stdout[-4000:]
    assert lab.ssh(node, f"test -e {drop_in}", check=False).returncode == 0
    line = grub_line(lab, node)
    for arg in ARGS:
        assert len(re.findall(rf"(?:^|\s){re.escape(arg)}", line)) == 1, (node, line)
    assert "intel_iommu=on" not in line


# --- ENIs and policy routing ----------------------------------------------------------------------


def node_index(node: str) -> int:
    return int(node.removeprefix("node"))


def test_rules_tables_and_mtu_on_every_node(tuned: LabHandle) -> None:
    lab = tuned
    for node in lab.nodes:
        i = node_index(node)
        rules = lab.ssh(node, "ip rule show").stdout
        for k in (1, 2):
            assert re.search(rf"^100{k}:\s+from 198\.18\.{k}\.{10 + i} lookup 100{k}", rules, re.M), rules
            table = lab.ssh(node, f"ip route show table 100{k}").stdout
            assert f"198.18.{k}.0/24 dev eth{k}" in table, table
            assert f"default via 198.18.{k}.1 dev eth{k}" in table, table
            assert lab.ssh(node, f"cat /sys/class/net/eth{k}/mtu").stdout.strip() == "1400"
        main_defaults = lab.ssh(node, "ip route show default").stdout.strip().splitlines()
        assert main_defaults and all(" dev eth0" in line for line in main_defaults), main_defaults


def counters(lab: LabHandle, node: str, direction: str) -> dict[str, int]:
    out = lab.ssh(
        node, f"for n in eth0 eth1 eth2; do echo $n $(cat /sys/class/net/$n/statistics/{direction}_packets); done"
    )
    return {name: int(value) for name, value in (line.split() for line in out.stdout.splitlines())}


def ping_counting(lab: LabHandle, node: str, source: str, target: str, count: int = 40) -> dict[str, int]:
    """tx packet deltas per NIC around a ping, measured in the same SSH command to keep SSH noise out."""
    script = (
        "c() { for n in eth0 eth1 eth2; do printf '%s=%s ' $n $(cat /sys/class/net/$n/statistics/tx_packets); done; }; "
        f'a=$(c); ping -q -n -c {count} -i 0.02 -I {source} {target} >/dev/null; b=$(c); echo "$a"; echo "$b"'
    )
    before, after = lab.ssh(node, f"bash -c {shlex.quote(script)}").stdout.strip().splitlines()

    def parse(line: str) -> dict[str, int]:
        return {k: int(v) for k, v in (item.split("=") for item in line.split())}

    b, a = parse(before), parse(after)
    return {nic: a[nic] - b[nic] for nic in a}


def test_traffic_from_each_nic_leaves_through_it_and_reaches_the_peer(tuned: LabHandle) -> None:
    lab = tuned
    first, second = list(lab.nodes)[:2]
    i, j = node_index(first), node_index(second)
    for k in (1, 2):
        peer_rx = counters(lab, second, "rx")
        sent = ping_counting(lab, first, f"198.18.{k}.{10 + i}", f"198.18.{k}.{10 + j}")
        assert sent[f"eth{k}"] >= 40, sent
        assert all(sent[f"eth{o}"] < 40 for o in (1, 2) if o != k), sent
        assert counters(lab, second, "rx")[f"eth{k}"] - peer_rx[f"eth{k}"] >= 40


def test_policy_routing_overrides_the_main_table(tuned: LabHandle) -> None:
    """To the controller's primary address the main table says eth0; from eth2's address, eth2's table wins."""
    lab = tuned
    node = next(iter(lab.nodes))
    i = node_index(node)
    assert " dev eth0 " in lab.ssh(node, "ip route get 198.18.0.1").stdout
    assert " dev eth2 " in lab.ssh(node, f"ip route get 198.18.0.1 from 198.18.2.{10 + i}").stdout
    sent = ping_counting(lab, node, f"198.18.2.{10 + i}", "198.18.0.1")
    assert sent["eth2"] >= 40 and sent["eth0"] < 40 and sent["eth1"] < 40, sent


def test_a_converge_repairs_a_rule_and_an_mtu_changed_behind_its_back(tuned: LabHandle, tmp_path: Path) -> None:
    """The files are right but the kernel is not (eth1's rule deleted, eth2's MTU lowered by hand): `rdmaforge
    provision --check` names both NICs in the eni role's one change and touches nothing; eni.yml applies the
    configuration again to exactly those two NICs instead of failing on them, the state is back, and a second run
    changes nothing."""
    lab = tuned
    node = list(lab.nodes)[-1]
    source = f"198.18.1.{10 + node_index(node)}"
    rule = re.compile(rf"^1001:\s+from {re.escape(source)} lookup 1001\b", re.M)
    lab.ssh(node, f"while ip rule del from {source} lookup 1001 priority 1001 2>/dev/null; do :; done;"
                  " ip link set eth2 mtu 1300")  # fmt: skip
    try:
        # As a user looks for drift: the fast path's check finds the rule gone, the node's full converge runs in
        # check mode, and the CLI lists what a run would change under its recap (and in recap.json).
        check = cli(tmp_path, "provision", "-i", str(lab.inventory), "--limit", node, "--check", "--fail-on-drift",
                    timeout=900)  # fmt: skip
        assert check.returncode == ExitCode.DRIFT, check.stdout[-4000:]
        said = re.search(rf"^  {node}: would change: eni : .*: {node}: would apply the configuration again to "
                         r"eth1, eth2: .*$", check.stdout, re.M)  # fmt: skip
        assert said, check.stdout[-4000:]
        assert source in said.group(0) and "1300" in said.group(0), said.group(0)
        checked = json.loads((run_dir_of(check.stdout) / "recap.json").read_text())
        assert checked["hosts"][node]["status"] == "would_change", checked["hosts"]  # it changed nothing
        changes = checked["would_change"]
        # The eni files are right: the re-apply is the eni role's only change. (Other roles' may show: the huge page
        # tests before this one leave a count that is not the inventory's until the module's fixture puts it back.)
        assert [c["task"] for c in changes if c["task"].startswith("eni : ")] == [
            "eni : Name the NICs a run would apply the configuration to again"
        ], changes
        assert not rule.search(lab.ssh(node, "ip rule show").stdout)  # check mode changed nothing
        assert lab.ssh(node, "cat /sys/class/net/eth2/mtu").stdout.strip() == "1300"
        proc = lab.playbook("eni.yml", "--limit", node)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert recap(proc.stdout)[node]["changed"] == 1, proc.stdout[-4000:]
        for nic in ("eth1", "eth2"):
            assert f"changed: [{node}] => (item={nic})" in proc.stdout, proc.stdout[-4000:]
        assert rule.search(lab.ssh(node, "ip rule show").stdout)
        assert lab.ssh(node, "cat /sys/class/net/eth2/mtu").stdout.strip() == "1400"
        again = lab.playbook("eni.yml", "--limit", node)
        assert again.returncode == 0, again.stdout[-4000:]
        assert_no_changes(again.stdout)
    finally:  # only where the repair did not happen
        if not rule.search(lab.ssh(node, "ip rule show").stdout):
            lab.ssh(node, f"ip rule add from {source} lookup 1001 priority 1001 protocol static")
        lab.ssh(node, "ip link set eth2 mtu 1400")


def test_eni_per_gpu_mismatch_stops_preflight_naming_both_numbers(tuned: LabHandle) -> None:
    proc = tuned.playbook("preflight.yml", "-e", "eni_per_gpu=true")
    assert proc.returncode != 0
    for node in tuned.nodes:
        assert (
            f"{node}: eni_per_gpu is true, so every GPU needs its own secondary NIC, but the node has "
            "2 secondary NIC(s) (eth1, eth2) and 0 GPU(s)"
        ) in proc.stdout, proc.stdout[-4000:]


# Second converges and --check --diff of hugepages and eni: test_arguments_once_after_a_second_converge_and_backup_kept,
# test_rolling_reboot_one_node_at_a_time, and site.yml's full --check --diff in test_fast_path.py (both roles enabled).
