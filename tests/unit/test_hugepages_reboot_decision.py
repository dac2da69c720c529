"""When role hugepages announces a reboot, and when verify.yml fails a node: configure.yml and verify.yml for real on
this machine (connection local, every file under tmp_path: the GRUB defaults, the running kernel's command line, the
state directory, a stand-in grub-mkconfig; the huge page pools a fake sysfs tree).

Review round 37b: a reordered line rebooted a node whose kernel already had the arguments; arguments set by hand
(seed 004's sed and update-grub, the reboot put off) were never rebooted for; and a node that had rebooted and came
back without the arguments ended the run green, with a debug line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from conftest import local_inventory, recap, run_playbook

from tests.unit.test_hugepages import GIB, MOUNTS, THIS_MACHINE, fake_sysfs
from tests.unit.test_hugepages_seed_spelling import MKCONFIG

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
ARGS = "default_hugepagesz=1G hugepagesz=1G hugepages=50"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def play(tmp_path: Path, tasks_from: str, extra_vars: dict[str, Any] | None = None) -> Path:
    """A play that runs the role's ``tasks_from`` on this machine's files under tmp_path, then prints the decision."""
    grub, cmdline, cfg, state = (tmp_path / n for n in ("grub", "cmdline", "grub.cfg", "state"))
    state.mkdir(exist_ok=True)
    mkconfig = tmp_path / "mkconfig"
    mkconfig.write_text(MKCONFIG.format(grub=grub))
    mkconfig.chmod(0o755)
    sysfs = tmp_path / "pools"
    if not sysfs.exists():
        fake_sysfs(sysfs, {GIB: (0, 0, 0, 0)})  # the kernel reserved none
    playbook = tmp_path / f"{tasks_from}.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "hugepages", "hosts": "localhost", "gather_facts": True, "gather_subset": ["!all"],
        "module_defaults": {
            "rdmaforge.cluster.kernel_cmdline": {"path": str(grub), "proc_cmdline": str(cmdline)},
            "rdmaforge.cluster.hugepages_facts": {"meminfo_path": str(THIS_MACHINE), "sysfs_path": str(sysfs),
                                                  "mounts_path": str(MOUNTS), "cmdline_path": str(cmdline)},
        },
        "vars": {"hugepages_boot": {"kind": "grub", "reason": "test"}, "hugepages_state_dir": str(state),
                 "hugepages_proc_cmdline": str(cmdline),  # the role's tasks name it (module_defaults lose to them)
                 "hugepages_grub_cfg_path": str(cfg), "hugepages_grub_dropin": "", "hugepages_size": "1G",
                 "hugepages_pages": 50, "hugepages_grub_mkconfig_command": [str(mkconfig), "-o", str(cfg)],
                 "hugepages_args": {"default_hugepagesz": "1G", "hugepagesz": "1G", "hugepages": 50},
                 "hugepages_args_text": ARGS, **(extra_vars or {})},
        "tasks": [
            {"name": "The role's tasks", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.hugepages",
                                                                         "tasks_from": tasks_from}},
            {"name": "Decision", "ansible.builtin.debug": {
                "msg": "DECISION {{ {'pending': hugepages_reboot_pending | default(none)} | to_json }}"}},
        ],
    }], sort_keys=False))  # fmt: skip (the arguments' order is the kernel's: hugepages= after hugepagesz=)
    return playbook


def run(tmp_path: Path, tasks_from: str = "configure", extra_vars: dict[str, Any] | None = None) -> tuple[Any, dict]:
    proc = run_playbook(str(play(tmp_path, tasks_from, extra_vars)), inventory=local_inventory(tmp_path / "hosts.yml"),
                        env=ENV, timeout=300)  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if "DECISION " in line]
    decision = json.loads(lines[-1].split("DECISION ", 1)[1].rstrip('"').replace('\\"', '"')) if lines else {}
    return proc, decision


def marker(tmp_path: Path) -> str | None:
    path = tmp_path / "state" / "hugepages-reboot-pending"
    return path.read_text().strip() if path.exists() else None


def test_a_line_that_only_changes_order_is_rewritten_without_a_reboot(tmp_path: Path) -> None:
    """The kernel already runs with the arguments: the configuration is tidied, nothing is rebooted for it."""
    reordered = "console=ttyS0 hugepagesz=1G hugepages=50 default_hugepagesz=1G"
    (tmp_path / "grub").write_text(f'GRUB_CMDLINE_LINUX="{reordered}"\n')
    (tmp_path / "cmdline").write_text("BOOT_IMAGE=/vmlinuz ro console=ttyS0 hugepagesz=1G hugepages=50 "
                                      "default_hugepagesz=1G\n")  # fmt: skip
    proc, decision = run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert decision == {"pending": False}, proc.stdout[-3000:]
    assert marker(tmp_path) is None
    assert ARGS in (tmp_path / "grub").read_text()  # the role's order: the change itself was made


def test_arguments_set_by_hand_that_no_boot_has_had_are_rebooted_for_once(tmp_path: Path) -> None:
    """Seed 004's sed and update-grub, the reboot put off: the boot loader passes the arguments, the kernel lacks
    them, and no marker says a reboot happened. The reboot is announced (and stays announced, without a change)."""
    (tmp_path / "grub").write_text(f'GRUB_CMDLINE_LINUX="quiet {ARGS}"\n')
    (tmp_path / "cmdline").write_text("BOOT_IMAGE=/vmlinuz ro quiet\n")
    for attempt in ("first", "second"):
        proc, decision = run(tmp_path)
        assert proc.returncode == 0, (attempt, proc.stdout[-4000:])
        assert decision == {"pending": True}, (attempt, proc.stdout[-3000:])
        assert marker(tmp_path) == BOOT_ID, attempt
    assert recap(proc.stdout)["localhost"]["changed"] == 0, proc.stdout[-4000:]  # the second run changes nothing


def test_a_node_that_rebooted_and_still_lacks_the_arguments_fails_verification(tmp_path: Path) -> None:
    """The marker names a boot that is over: the reboot happened, and the kernel came up without the arguments (the
    boot loader reads another file). Not another reboot, and not a green run: verify.yml fails the node."""
    (tmp_path / "grub").write_text(f'GRUB_CMDLINE_LINUX="quiet {ARGS}"\n')
    (tmp_path / "cmdline").write_text("BOOT_IMAGE=/vmlinuz ro quiet\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "hugepages-reboot-pending").write_text("a-boot-that-is-over\n")
    proc, decision = run(tmp_path)
    assert proc.returncode == 0 and decision == {"pending": False}, proc.stdout[-4000:]
    assert marker(tmp_path) == "a-boot-that-is-over"
    verified, _ = run(tmp_path, "verify", {"hugepages_reboot_pending": False, "hugepages_verify_strict": True})
    assert verified.returncode == 2, verified.stdout[-4000:]
    said = " ".join(verified.stdout.split())
    assert ("localhost: the host booted after the change, but its running kernel command line lacks" in said
            and "the boot loader does not read" in said), said[-3000:]  # fmt: skip
    assert recap(verified.stdout)["localhost"]["failed"] == 1


def test_a_node_still_waiting_for_its_reboot_is_reported_not_failed(tmp_path: Path) -> None:
    (tmp_path / "cmdline").write_text("BOOT_IMAGE=/vmlinuz ro quiet\n")
    (tmp_path / "grub").write_text(f'GRUB_CMDLINE_LINUX="quiet {ARGS}"\n')
    verified, _ = run(tmp_path, "verify", {"hugepages_reboot_pending": True, "hugepages_verify_strict": True})
    assert verified.returncode == 0, verified.stdout[-4000:]
    assert "NOT RESERVED: a reboot is pending: the boot loader now passes " + ARGS in " ".join(verified.stdout.split())


def test_a_reboot_announced_then_no_longer_needed_is_withdrawn(tmp_path: Path) -> None:
    """An earlier run of this boot announced a reboot for hugepages=13; the count went back to the 50 the kernel
    runs with: no reboot is pending, and the marker goes (it announced a reboot on every later run of this boot)."""
    (tmp_path / "grub").write_text('GRUB_CMDLINE_LINUX="quiet default_hugepagesz=1G hugepagesz=1G hugepages=13"\n')
    (tmp_path / "cmdline").write_text(f"BOOT_IMAGE=/vmlinuz ro quiet {ARGS}\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "hugepages-reboot-pending").write_text(BOOT_ID + "\n")
    proc, decision = run(tmp_path)
    assert proc.returncode == 0 and decision == {"pending": False}, proc.stdout[-4000:]
    assert marker(tmp_path) is None


def withdraw(tmp_path: Path, running: str) -> tuple[Any, dict]:
    """withdraw.yml on GRUB defaults with the role's arguments and its record of them; the kernel runs ``running``."""
    (tmp_path / "grub").write_text(f'GRUB_CMDLINE_LINUX="quiet {ARGS}"\n')
    (tmp_path / "cmdline").write_text(f"BOOT_IMAGE=/vmlinuz ro {running}\n")
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / "hugepages-kernel-args").write_text(ARGS + "\n")
    (tmp_path / "state" / "hugepages-reboot-pending").write_text(BOOT_ID + "\n")  # configure.yml announced one
    return run(tmp_path, "withdraw", {"rdmaforge_node": {"gpu_count": 8}, "hugepages_reboot": False,
                                      "hugepages_mount_drop_in": str(tmp_path / "mount-drop-in.conf")})  # fmt: skip


def test_arguments_withdrawn_before_any_boot_had_them_need_no_reboot(tmp_path: Path) -> None:
    """Configured, then turned off before the reboot: the kernel never had the arguments, and the reboot configure.yml
    announced is withdrawn with them (the withdrawal rebooted the node for nothing)."""
    proc, decision = withdraw(tmp_path, "quiet")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert decision == {"pending": False}, proc.stdout[-3000:]
    assert marker(tmp_path) is None
    assert "hugepages" not in (tmp_path / "grub").read_text()
    assert "the running kernel does not have them: nothing to reboot for" in " ".join(proc.stdout.split())


def test_arguments_the_running_kernel_has_are_withdrawn_with_a_reboot(tmp_path: Path) -> None:
    proc, decision = withdraw(tmp_path, f"quiet {ARGS}")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert decision == {"pending": True}, proc.stdout[-3000:]
    assert marker(tmp_path) == BOOT_ID
    assert "hugepages" not in (tmp_path / "grub").read_text()
    assert "the pages stay reserved until the next reboot" in " ".join(proc.stdout.split())


def test_check_mode_shows_the_grub_drop_in_going_with_the_arguments(tmp_path: Path) -> None:
    """The withdrawal removes the role's GRUB drop-in once its arguments are off. It read the file back to decide,
    so under --check, which takes nothing out, the file still held them and the removal was not shown."""
    dropin = tmp_path / "grub.d" / "60-rdmaforge-hugepages.cfg"
    dropin.parent.mkdir()
    # what configure.yml writes with hugepages_grub_dropin: rdmaforge's header, the arguments appended
    written = f'# Written by rdmaforge (hugepages role)\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX {ARGS}"\n'
    dropin.write_text(written)
    (tmp_path / "grub").write_text('GRUB_CMDLINE_LINUX="quiet"\n')
    (tmp_path / "cmdline").write_text(f"BOOT_IMAGE=/vmlinuz ro quiet {ARGS}\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "hugepages-kernel-args").write_text(ARGS + "\n")
    extra = {"rdmaforge_node": {"gpu_count": 8}, "hugepages_reboot": False, "hugepages_grub_dropin": str(dropin),
             "hugepages_mount_drop_in": str(tmp_path / "mount-drop-in.conf")}  # fmt: skip
    playbook, inventory = str(play(tmp_path, "withdraw", extra)), local_inventory(tmp_path / "hosts.yml")
    checked = run_playbook(playbook, "--check", inventory=inventory, env=ENV, timeout=300)
    assert checked.returncode == 0, checked.stdout[-4000:]
    assert dropin.read_text() == written  # check mode changed nothing
    shown = checked.stdout.split("Remove the GRUB drop-in when nothing is left in it]", 1)[1].split("TASK [", 1)[0]
    assert shown.split("\n", 1)[1].strip() == "changed: [localhost]", shown
    done = run_playbook(playbook, inventory=inventory, env=ENV, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:]
    assert not dropin.exists()
