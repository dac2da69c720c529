"""Role hugepages' configure.yml for real on this machine (connection local, every file under tmp_path, a stand-in
grub-mkconfig that writes grub.cfg's kernel line from the defaults file) on a node set up by hand as seed 004 spells
it: default_hugepagesz=1GB hugepagesz=1GB hugepages=50, already booted with them. The kernel reads 1GB as the
role's 1G: nothing changes, no reboot is announced, and a second run is the same. (Review round 20: the defaults
file was left alone, but grub.cfg was looked for the exact text hugepagesz=1G, regenerated on every run, and the
run stopped in the rescue, blaming the boot loader command.)"""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import local_inventory, recap, run_playbook

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
SEED = "default_hugepagesz=1GB hugepagesz=1GB hugepages=50"
MKCONFIG = """#!/bin/sh
# stand-in for grub-mkconfig -o FILE: one kernel line from the defaults file's GRUB_CMDLINE_LINUX
. "{grub}"
printf 'menuentry "Debian" {{\\n\\tlinux /vmlinuz-6.1 root=/dev/sda1 ro %s\\n}}\\n' "$GRUB_CMDLINE_LINUX" > "$2"
"""


def test_a_node_set_up_as_seed_004_spells_it_is_left_as_it_is(tmp_path: Path) -> None:
    grub, cmdline, cfg, state = (tmp_path / n for n in ("grub", "cmdline", "grub.cfg", "state"))
    grub.write_text(f'GRUB_CMDLINE_LINUX="quiet {SEED}"\n')
    cmdline.write_text(f"BOOT_IMAGE=/vmlinuz-6.1 root=/dev/sda1 ro quiet {SEED}\n")
    state.mkdir()
    mkconfig = tmp_path / "mkconfig"
    mkconfig.write_text(MKCONFIG.format(grub=grub))
    mkconfig.chmod(0o755)
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "hugepages' boot configuration", "hosts": "localhost", "gather_facts": True,
        "gather_subset": ["!all"],
        "module_defaults": {"rdmaforge.cluster.kernel_cmdline": {"path": str(grub), "proc_cmdline": str(cmdline)}},
        "vars": {"hugepages_boot": {"kind": "grub", "reason": "test"}, "hugepages_state_dir": str(state),
                 "hugepages_proc_cmdline": str(cmdline),
                 "hugepages_grub_cfg_path": str(cfg), "hugepages_grub_dropin": "", "hugepages_size": "1G",
                 "hugepages_grub_mkconfig_command": [str(mkconfig), "-o", str(cfg)],
                 "hugepages_args": {"default_hugepagesz": "1G", "hugepagesz": "1G", "hugepages": 50},
                 "hugepages_args_text": "default_hugepagesz=1G hugepagesz=1G hugepages=50"},
        "tasks": [{"name": "Configure", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.hugepages",
                                                                        "tasks_from": "configure"}}],
    }], sort_keys=False))  # fmt: skip (the arguments' order is the kernel's: hugepages= after hugepagesz=)
    inventory = local_inventory(tmp_path / "hosts.yml")
    for attempt in ("first", "second"):
        run = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
        assert run.returncode == 0, (attempt, run.stdout[-4000:])
        assert grub.read_text() == f'GRUB_CMDLINE_LINUX="quiet {SEED}"\n', attempt
        assert not (state / "hugepages-reboot-pending").exists(), attempt
    assert recap(run.stdout)["localhost"]["changed"] == 0, run.stdout[-4000:]
