"""kernel_cmdline: the parser (rdmaforge/parsers/kernel_cmdline.py) and the module, run for real.

The module tests edit a copy of a real Debian GRUB defaults file (this machine's
/usr/share/grub/default/grub when grub2-common is installed, else tests/data/grub/debian_default_grub,
see SOURCES.md there) through ``ansible localhost``. The running kernel's command line is read from a
file per test (``proc_cmdline``), so reboot_required is tested both ways. grubby does not exist here:
its backend is tested against a stand-in script that keeps BLS-style entries in a JSON file and applies
``--args``/``--remove-args`` the way grubby-bls's ``update_args`` does (that behaviour is spelt out in
FAKE_GRUBBY below); the real grubby is not exercised. The module tests share their ansible-playbook runs
(tests/unit/shared_runs.py): each yields the module calls it needs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rdmaforge import tuning
from rdmaforge.parsers.kernel_cmdline import (
    ABSENT,
    PRESENT,
    Arg,
    CmdlineError,
    apply_args,
    arg_key,
    edit_defaults,
    effective_value,
    find_assignments,
    grubby_arguments,
    new_dropin_text,
    normalize_args,
    parse_grubby_info,
    read_variable,
    reboot_required,
    running_mismatches,
    simulate_grubby,
    split_cmdline,
    update_cmdline,
)
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import PY38
from tests.unit.shared_runs import Task, module_task, shared_runs

SYSTEM_TEMPLATE = Path("/usr/share/grub/default/grub")
DATA_TEMPLATE = PROJECT_ROOT / "tests" / "data" / "grub" / "debian_default_grub"
TEMPLATE = SYSTEM_TEMPLATE if SYSTEM_TEMPLATE.is_file() else DATA_TEMPLATE
VAR = "GRUB_CMDLINE_LINUX"
HUGE = {"default_hugepagesz": "1G", "hugepagesz": "1G", "hugepages": 50}
HUGE_LINE = 'GRUB_CMDLINE_LINUX="default_hugepagesz=1G hugepagesz=1G hugepages=50"\n'


def present(args):
    return normalize_args(args, PRESENT)


def absent(args):
    return normalize_args(args, ABSENT)


# --- tokens ----------------------------------------------------------------------------------------


def test_split_respects_kernel_quotes():
    assert split_cmdline('ro  quiet dyndbg="file x.c +p"  "spaced flag" a=b') == [
        "ro",
        "quiet",
        'dyndbg="file x.c +p"',
        '"spaced flag"',
        "a=b",
    ]
    assert split_cmdline("") == []


def test_keys_compare_like_the_kernel():
    assert arg_key("default-hugepagesz=1G") == arg_key("default_hugepagesz=2M") == "default_hugepagesz"
    assert arg_key("quiet") == "quiet"
    assert arg_key("rd.lvm.lv=rhel/root") == "rd.lvm.lv"


def test_normalize_dict_and_list():
    assert present({"hugepages": 50, "quiet": None, "iommu": "pt"}) == [
        Arg("hugepages", "hugepages=50"),
        Arg("quiet", "quiet"),
        Arg("iommu", "iommu=pt"),
    ]
    assert present(["hugepages=50 quiet", "iommu=pt"]) == present({"hugepages": 50, "quiet": None, "iommu": "pt"})
    assert present({"dyndbg": "file x.c +p"}) == [Arg("dyndbg", 'dyndbg="file x.c +p"')]
    # absent: a bare name means any value; name=value only that value
    assert absent(["hugepages", "iommu=pt"]) == [Arg("hugepages", None), Arg("iommu", "iommu=pt")]
    assert absent({"hugepages": None}) == [Arg("hugepages", None)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"intel_iommu": True}, "args.intel_iommu is a boolean (True); YAML turns on/off/yes/no into booleans"),
        (["hugepages=32", "hugepages=50"], "args names hugepages twice (hugepages=32, hugepages=50)"),
        (["default-hugepagesz=1G", "default_hugepagesz=2M"], "args names default_hugepagesz twice"),
        ([], "args is empty"),
        ({"bad key": 1}, "is not a kernel parameter name"),
        ({"x": 'a"b'}, "values cannot contain double quotes"),
        (42, "args must be a dict"),
        (["--"], "cannot be managed"),
        # The dict form let '--' through (every later argument then went to init), and the list form an
        # unbalanced quote (the kernel reads to the next quote, swallowing the arguments after it).
        ({"--": None}, "args key '--' cannot be managed"),
        (['x="a b'], "args entry 'x=\"a b' opens a double quote it does not close"),
    ],
)
def test_normalize_refuses_with_a_reason(args, message):
    with pytest.raises(CmdlineError, match=None) as error:
        normalize_args(args, PRESENT)
    assert message in str(error.value)


# --- present / absent on plain command lines --------------------------------------------------------


def test_new_value_replaces_in_place():
    args = present({"hugepagesz": "1G", "hugepages": 50})
    assert update_cmdline("ro quiet hugepagesz=1G hugepages=32 splash", args, PRESENT) == (
        "ro quiet hugepagesz=1G hugepages=50 splash"
    )


def test_order_the_kernel_needs_is_restored():
    # hugepages=N counts for the hugepagesz= before it: replacing in place would leave it before its size.
    args = present(HUGE)
    assert update_cmdline("hugepages=32 ro quiet", args, PRESENT) == (
        "ro quiet default_hugepagesz=1G hugepagesz=1G hugepages=50"
    )


def test_already_right_is_left_byte_for_byte():
    line = "ro  quiet default_hugepagesz=1G hugepagesz=1G hugepages=50"
    assert update_cmdline(line, present(HUGE), PRESENT) == line


def test_repeated_keys_collapse_to_one_and_are_reported():
    tokens = split_cmdline("ro hugepagesz=1G hugepages=4 hugepagesz=2M hugepages=512 quiet")
    new, dropped = apply_args(tokens, present({"hugepagesz": "1G", "hugepages": 50}), PRESENT)
    assert new == ["ro", "hugepagesz=1G", "hugepages=50", "quiet"]
    assert dropped == ["hugepagesz=2M", "hugepages=512"]


def test_init_arguments_after_double_dash_are_not_kernel_arguments():
    line = "ro quiet -- hugepages=7 single"
    assert update_cmdline(line, present({"hugepages": 50}), PRESENT) == "ro quiet hugepages=50 -- hugepages=7 single"
    assert update_cmdline(line, absent(["hugepages"]), ABSENT) == line


def test_absent_any_value_and_exact_value():
    line = "ro hugepages=32 quiet hugepages=64 iommu=pt"
    assert update_cmdline(line, absent(["hugepages"]), ABSENT) == "ro quiet iommu=pt"
    assert update_cmdline(line, absent(["hugepages=32"]), ABSENT) == "ro quiet hugepages=64 iommu=pt"
    assert update_cmdline(line, absent({"iommu": "on"}), ABSENT) == line


# --- GRUB defaults files ---------------------------------------------------------------------------


def test_debian_template_edit_keeps_every_other_line():
    text = TEMPLATE.read_text()
    edit = edit_defaults(text, VAR, present(HUGE), PRESENT, where="grub")
    old_lines, new_lines = text.splitlines(keepends=True), edit.text.splitlines(keepends=True)
    changed = [(old, new) for old, new in zip(old_lines, new_lines, strict=True) if old != new]
    assert len(old_lines) == len(new_lines)
    assert changed == [(f'{VAR}=""\n', HUGE_LINE)]
    assert (edit.before, edit.after) == ("", "default_hugepagesz=1G hugepagesz=1G hugepages=50")
    # GRUB_CMDLINE_LINUX_DEFAULT is another variable: untouched
    assert read_variable(edit.text, "GRUB_CMDLINE_LINUX_DEFAULT") == read_variable(text, "GRUB_CMDLINE_LINUX_DEFAULT")


def test_three_applications_leave_one_copy():
    text = TEMPLATE.read_text()
    for _ in range(3):
        text = edit_defaults(text, VAR, present(HUGE), PRESENT).text
    assert text.count("hugepages=") == 1
    assert text.count("hugepagesz=") == 2  # default_hugepagesz= and hugepagesz=
    assert read_variable(text, VAR) == "default_hugepagesz=1G hugepagesz=1G hugepages=50"


def test_the_seed_sed_result_is_repaired():
    # Seed 004 appends with sed on every run; after two runs the line holds the arguments twice.
    seed = " default_hugepagesz=1GB hugepagesz=1GB hugepages=50"
    text = f'GRUB_CMDLINE_LINUX="{seed}{seed}"\n'
    edit = edit_defaults(text, VAR, present(HUGE), PRESENT)
    # One copy left, in the seed's spelling: the kernel reads 1GB as 1G (memparse ignores the B).
    assert edit.text == HUGE_LINE.replace("=1G ", "=1GB ")
    assert edit.dropped == ["default_hugepagesz=1GB", "hugepagesz=1GB", "hugepages=50"]


def test_a_line_seed_004_wrote_once_is_no_change_and_no_reboot():
    """Seed 004 spells the size 1GB, the role 1G; the kernel reads both as 1 GiB (mm/hugetlb.c, memparse). The
    values compared as spelt: a node set up by hand was rewritten, marked reboot-pending and rebooted for nothing
    (review round 19b)."""
    seed = "default_hugepagesz=1GB hugepagesz=1GB hugepages=50"
    text = f'GRUB_CMDLINE_LINUX="{seed}"\n'
    assert edit_defaults(text, VAR, present(HUGE), PRESENT).text == text
    assert running_mismatches(f"BOOT_IMAGE=/vmlinuz ro {seed}", present(HUGE), PRESENT) == []
    assert not reboot_required(f"ro {seed.replace('1GB', '1073741824')}", present(HUGE), PRESENT)
    # another size, or another count, is a change; other keys still compare as spelt
    assert running_mismatches(f"ro {seed.replace('hugepagesz=1GB', 'hugepagesz=2M')}", present(HUGE), PRESENT)
    assert running_mismatches(f"ro {seed.replace('=50', '=050')}", present(HUGE), PRESENT)
    # absent with a value matches the same size however spelt
    assert update_cmdline(f"ro {seed}", normalize_args(["hugepagesz=1G"], ABSENT), ABSENT) == (
        "ro default_hugepagesz=1GB hugepages=50")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("GRUB_CMDLINE_LINUX='quiet hugepages=32'\n", "GRUB_CMDLINE_LINUX='quiet hugepages=50'\n"),
        ('GRUB_CMDLINE_LINUX="quiet hugepages=32"\n', 'GRUB_CMDLINE_LINUX="quiet hugepages=50"\n'),
        ("GRUB_CMDLINE_LINUX=quiet\n", 'GRUB_CMDLINE_LINUX="quiet hugepages=50"\n'),
        ("GRUB_CMDLINE_LINUX=\n", 'GRUB_CMDLINE_LINUX="hugepages=50"\n'),
        ('  export GRUB_CMDLINE_LINUX="a"   # why\n', '  export GRUB_CMDLINE_LINUX="a hugepages=50"   # why\n'),
        ('GRUB_CMDLINE_LINUX="a"\r\n', 'GRUB_CMDLINE_LINUX="a hugepages=50"\r\n'),
        ('GRUB_CMDLINE_LINUX="a"', 'GRUB_CMDLINE_LINUX="a hugepages=50"'),
    ],
)
def test_quoting_indentation_and_comments_are_kept(line, expected):
    assert edit_defaults(line, VAR, present({"hugepages": 50}), PRESENT).text == expected


def test_untouched_tokens_keep_their_spelling():
    line = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX ${EXTRA} dyndbg=\\"file a.c +p\\" \\$literal hugepages=32"\n'
    edit = edit_defaults(line, VAR, present({"hugepages": 50, "note": "a b"}), PRESENT)
    assert edit.text == (
        'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX ${EXTRA} dyndbg=\\"file a.c +p\\" \\$literal hugepages=50 '
        'note=\\"a b\\""\n'
    )
    # the shell's view of the value: escapes resolved, references as written
    assert edit.after == '$GRUB_CMDLINE_LINUX ${EXTRA} dyndbg="file a.c +p" $literal hugepages=50 note="a b"'


def test_single_quoted_value_with_a_single_quote_is_refused():
    with pytest.raises(CmdlineError, match="contains a single quote and the value is single-quoted"):
        edit_defaults("GRUB_CMDLINE_LINUX='a'\n", VAR, present(["x=it's"]), PRESENT)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('GRUB_CMDLINE_LINUX="a\nb"\n', "line 1: the value of GRUB_CMDLINE_LINUX does not end on this line"),
        ("X=1\nGRUB_CMDLINE_LINUX=\"a\"'b'\n", "line 2: unexpected \"'b'\" after the value"),
        ("GRUB_CMDLINE_LINUX=$(cat /x)\n", "is not a plain word; quote the whole value"),
        # bash appends: the kernel got hugepages=8 besides the edited value, and cmdline_after did not show it.
        ('GRUB_CMDLINE_LINUX="quiet"\nGRUB_CMDLINE_LINUX+=" hugepages=8"\n',
         "line 2: GRUB_CMDLINE_LINUX+= appends to the value, which kernel_cmdline cannot edit safely"),
    ],
)
def test_values_that_cannot_be_edited_safely_are_refused(text, message):
    with pytest.raises(CmdlineError) as error:
        edit_defaults(text, VAR, present({"hugepages": 50}), PRESENT, where="/etc/default/grub")
    assert str(error.value).startswith("/etc/default/grub line ")
    assert message in str(error.value)


def test_commented_assignments_are_not_assignments():
    text = '#GRUB_CMDLINE_LINUX="hugepages=1"\n'
    assert find_assignments(text, VAR) == []
    edit = edit_defaults(text, VAR, present({"hugepages": 50}), PRESENT)
    assert edit.text == text + 'GRUB_CMDLINE_LINUX="hugepages=50"\n'


def test_live_earlier_assignments_lose_the_key():
    text = 'GRUB_CMDLINE_LINUX="hugepages=32 quiet"\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX splash"\n'
    edit = edit_defaults(text, VAR, present({"hugepages": 50}), PRESENT)
    assert edit.text == 'GRUB_CMDLINE_LINUX="quiet"\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX splash hugepages=50"\n'
    assert edit.dropped == ["hugepages=32"]
    assert effective_value([edit.text], VAR) == "quiet splash hugepages=50"
    # an assignment overwritten later is dead: not touched
    dead = 'GRUB_CMDLINE_LINUX="hugepages=32"\nGRUB_CMDLINE_LINUX="quiet"\n'
    assert edit_defaults(dead, VAR, present({"hugepages": 50}), PRESENT).text == (
        'GRUB_CMDLINE_LINUX="hugepages=32"\nGRUB_CMDLINE_LINUX="quiet hugepages=50"\n'
    )


def test_absent_in_a_file():
    text = 'GRUB_CMDLINE_LINUX="quiet hugepages=32"\n'
    removed = edit_defaults(text, VAR, absent(["hugepages"]), ABSENT)
    assert (removed.text, removed.dropped) == ('GRUB_CMDLINE_LINUX="quiet"\n', [])
    chain = text + 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX hugepages=64"\n'
    removed = edit_defaults(chain, VAR, absent(["hugepages"]), ABSENT)
    assert (effective_value([removed.text], VAR), removed.dropped) == ("quiet", [])
    assert edit_defaults(text, VAR, absent(["nosmt"]), ABSENT).text == text
    assert edit_defaults("X=1\n", VAR, absent(["nosmt"]), ABSENT).text == "X=1\n"  # nothing to remove: no line added


def test_dropin_text_and_effective_value():
    dropin = new_dropin_text(VAR, present(HUGE))
    assert (
        dropin.splitlines()[-1]
        == 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX default_hugepagesz=1G hugepagesz=1G hugepages=50"'
    )
    assert dropin.startswith("# Managed by rdmaforge")
    main = TEMPLATE.read_text().replace(f'{VAR}=""', f'{VAR}="net.ifnames=0"')
    assert effective_value([main, dropin], VAR) == "net.ifnames=0 default_hugepagesz=1G hugepagesz=1G hugepages=50"
    # editing the drop-in again changes nothing
    assert edit_defaults(dropin, VAR, present(HUGE), PRESENT, append_to_existing=True).text == dropin
    # a new value replaces the old one inside the drop-in
    bigger = edit_defaults(dropin, VAR, present({**HUGE, "hugepages": 64}), PRESENT, append_to_existing=True)
    assert bigger.after == "$GRUB_CMDLINE_LINUX default_hugepagesz=1G hugepagesz=1G hugepages=64"


# --- the running kernel ----------------------------------------------------------------------------


def test_reboot_required_logic():
    args = present(HUGE)
    assert not reboot_required("BOOT_IMAGE=/vmlinuz ro default_hugepagesz=1G hugepagesz=1G hugepages=50", args, PRESENT)
    assert not reboot_required("ro default-hugepagesz=1G hugepagesz=1G hugepages=50 quiet", args, PRESENT)
    assert running_mismatches("ro default_hugepagesz=1G hugepagesz=1G hugepages=32", args, PRESENT) == [
        "hugepages=50 (running kernel has hugepages=32)"
    ]
    assert running_mismatches("ro hugepagesz=1G hugepages=50 hugepages=50 default_hugepagesz=1G", args, PRESENT) == [
        "hugepages=50 (running kernel has hugepages=50 hugepages=50)"
    ]
    assert running_mismatches("ro -- hugepages=50", present({"hugepages": 50}), PRESENT) == [
        "hugepages=50 (running kernel has nothing)"
    ]
    assert reboot_required("ro hugepages=32", absent(["hugepages"]), ABSENT)
    assert not reboot_required("ro hugepages=32", absent(["hugepages=50"]), ABSENT)


def test_this_machines_cmdline():
    text = Path("/proc/cmdline").read_text()
    tokens = split_cmdline(text)
    assert tokens and " ".join(tokens) == " ".join(text.split())
    # Whatever it holds, asking for exactly what it holds needs no reboot.
    kernel_tokens = tokens[: tokens.index("--")] if "--" in tokens else tokens
    unique = [t for t in kernel_tokens if sum(arg_key(t) == arg_key(o) for o in kernel_tokens) == 1]
    assert unique, text
    assert not reboot_required(text, present(unique[:3]), PRESENT)
    assert reboot_required(text, present({"rdmaforge_test_arg": 1}), PRESENT)


# --- grubby ----------------------------------------------------------------------------------------

# The layout grubby-bls's display_info_values() prints (rhboot/grubby, grubby-bls): root= shown apart.
GRUBBY_INFO = """index=0
kernel="/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64"
args="ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root hugepages=32"
root="/dev/mapper/rhel-root"
initrd="/boot/initramfs-5.14.0-427.13.1.el9_4.x86_64.img"
title="Red Hat Enterprise Linux (5.14.0-427.13.1.el9_4.x86_64) 9.4 (Plow)"
id="0b3f5a0a1c6e4e0e9b1c5b4a2f7e9d10-5.14.0-427.13.1.el9_4.x86_64"
index=1
kernel="/boot/vmlinuz-0-rescue-0b3f5a0a1c6e4e0e9b1c5b4a2f7e9d10"
args="ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root"
root="/dev/mapper/rhel-root"
initrd="/boot/initramfs-0-rescue-0b3f5a0a1c6e4e0e9b1c5b4a2f7e9d10.img"
title="Red Hat Enterprise Linux (0-rescue-0b3f5a0a1c6e4e0e9b1c5b4a2f7e9d10) 9.4 (Plow)"
id="0b3f5a0a1c6e4e0e9b1c5b4a2f7e9d10-0-rescue"
"""


def test_parse_grubby_info():
    entries = parse_grubby_info(GRUBBY_INFO)
    assert [(e.index, e.kernel) for e in entries] == [
        (0, "/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64"),
        (1, "/boot/vmlinuz-0-rescue-0b3f5a0a1c6e4e0e9b1c5b4a2f7e9d10"),
    ]
    assert entries[0].args.endswith("rd.lvm.lv=rhel/root hugepages=32")
    assert parse_grubby_info("index=0\nnon linux entry\n") == []


def test_grubby_arguments_and_their_effect():
    entries = parse_grubby_info(GRUBBY_INFO)
    remove, add = grubby_arguments(entries, present(HUGE), PRESENT)
    assert (remove, add) == ([], ["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=50"])
    after = [simulate_grubby(e.args, remove, add) for e in entries]
    assert all(a.endswith("rd.lvm.lv=rhel/root default_hugepagesz=1G hugepagesz=1G hugepages=50") for a in after)
    # once applied, nothing more to do
    done = [type(e)(e.index, e.kernel, a) for e, a in zip(entries, after, strict=True)]
    assert grubby_arguments(done, present(HUGE), PRESENT) == ([], [])
    # absent: a bare key removes all values; an exact token once per occurrence
    assert grubby_arguments(done, absent(["hugepages"]), ABSENT) == (["hugepages"], [])
    twice = [type(e)(e.index, e.kernel, e.args + " x=1 x=1") for e in done]
    remove, _ = grubby_arguments(twice, absent(["x=1"]), ABSENT)
    assert remove == ["x=1", "x=1"]
    assert "x=1" not in simulate_grubby(twice[0].args, remove, [])


# --- the module, for real ----------------------------------------------------------------------------


def grub(case: Path) -> tuple[Path, Path]:
    """A copy of the Debian defaults file and a running command line without huge pages, in ``case``."""
    path = case / "etc" / "default" / "grub"
    path.parent.mkdir(parents=True)
    path.write_text(TEMPLATE.read_text())
    proc = case / "cmdline"
    proc.write_text("BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=0a1b ro quiet\n")
    return path, proc


def kernel_cmdline(args: Any, path: Path, proc: Path, *, check: bool = False, diff: bool = False,
                   **options: Any) -> Task:  # fmt: skip
    """The task ``ansible localhost -m rdmaforge.cluster.kernel_cmdline`` runs with these arguments."""
    module_args = {"args": args, "path": str(path), "proc_cmdline": str(proc), **options}
    return module_task("kernel_cmdline", module_args, check=check, diff=diff)


def backups(path: Path) -> list[Path]:
    return sorted(p for p in path.parent.iterdir() if p.name.startswith(path.name + ".") and p.name.endswith("~"))


@shared_runs
def test_module_writes_keeps_a_backup_and_shows_the_diff(case):
    path, proc = grub(case)
    original = path.read_text()
    run = yield kernel_cmdline(HUGE, path, proc, diff=True)
    assert not run.failed, run.result
    result = run.result
    assert result["changed"] is True
    assert result["backend"] == "grub_defaults"  # no grubby here
    assert (result["cmdline_before"], result["cmdline_after"]) == (
        "",
        "default_hugepagesz=1G hugepagesz=1G hugepages=50",
    )
    assert result["reboot_required"] is True
    assert result["files_changed"] == [str(path)]
    assert path.read_text() == original.replace(f'{VAR}=""\n', HUGE_LINE)
    (backup,) = backups(path)
    assert result["backup_file"] == str(backup) and result["backup_files"] == [str(backup)]
    assert backup.read_text() == original
    assert f"--- before: {path}" in run.printed
    assert f'-{VAR}=""' in run.printed and f"+{HUGE_LINE.strip()}" in run.printed


@shared_runs
def test_module_three_runs_leave_one_copy_and_one_backup(case):
    path, proc = grub(case)
    runs = yield [kernel_cmdline(HUGE, path, proc) for _ in range(3)]
    assert [r.result["changed"] for r in runs] == [True, False, False]
    assert all(not r.failed for r in runs)
    assert path.read_text().count("hugepages=") == 1
    assert len(backups(path)) == 1
    assert runs[2].result["cmdline_before"] == runs[2].result["cmdline_after"]


@shared_runs
def test_module_new_count_replaces_the_old_one(case):
    path, proc = grub(case)
    _, run = yield [kernel_cmdline(HUGE, path, proc), kernel_cmdline({**HUGE, "hugepages": 64}, path, proc)]
    assert run.result["changed"] is True
    assert run.result["cmdline_after"] == "default_hugepagesz=1G hugepagesz=1G hugepages=64"
    assert read_variable(path.read_text(), VAR) == "default_hugepagesz=1G hugepagesz=1G hugepages=64"


@shared_runs
def test_module_check_mode_writes_nothing(case):
    path, proc = grub(case)
    original = path.read_text()
    run = yield kernel_cmdline(HUGE, path, proc, check=True, diff=True)
    assert not run.failed, run.result
    assert run.result["changed"] is True
    assert run.result["cmdline_after"] == "default_hugepagesz=1G hugepagesz=1G hugepages=50"
    assert run.result["files_changed"] == [str(path)]
    assert "backup_file" not in run.result
    assert path.read_text() == original
    assert sorted(p.name for p in path.parent.iterdir()) == ["grub"]  # no backup, no temp file
    assert f"+{HUGE_LINE.strip()}" in run.printed


@shared_runs
def test_module_reboot_not_required_when_running_kernel_has_the_args(case):
    path, proc = grub(case)
    proc.write_text("BOOT_IMAGE=/vmlinuz ro default_hugepagesz=1G hugepagesz=1G hugepages=50 quiet\n")
    first = yield kernel_cmdline(HUGE, path, proc)
    assert (first.result["changed"], first.result["reboot_required"]) == (True, False)
    proc.write_text("BOOT_IMAGE=/vmlinuz ro default_hugepagesz=1G hugepagesz=1G hugepages=32 quiet\n")
    second = yield kernel_cmdline(HUGE, path, proc)
    assert (second.result["changed"], second.result["reboot_required"]) == (False, True)
    assert second.result["running_differences"] == ["hugepages=50 (running kernel has hugepages=32)"]


@shared_runs
def test_module_writes_through_a_symlink(case):
    """/etc/default/grub a link to a file kept elsewhere (a configuration repository): the file is written through
    the link, and files_changed names the file written, whose name the backup carries. Named by the link, the
    hugepages role's rescue found no backup for it and deleted /etc/default/grub as a file it had created, or took
    a drop-in's backup (grub.d/... starts with 'grub.') and wrote the drop-in's text over it."""
    path, proc = grub(case)
    real = case / "srv" / "grub-defaults"
    real.parent.mkdir()
    original = path.read_text()
    path.rename(real)
    path.symlink_to(real)
    run = yield kernel_cmdline(HUGE, path, proc, backup=True)
    assert not run.failed, run.result
    assert path.is_symlink()
    assert read_variable(real.read_text(), VAR) == "default_hugepagesz=1G hugepagesz=1G hugepages=50"
    assert run.result["files_changed"] == [str(real)]
    plan = tuning.restore_plan(run.result["files_changed"], run.result["backup_files"])
    assert [(step["path"], Path(str(step["backup"])).read_text()) for step in plan] == [(str(real), original)]


@shared_runs
def test_module_absent(case):
    path, proc = grub(case)
    path.write_text(path.read_text().replace(f'{VAR}=""', f'{VAR}="quiet hugepages=32 iommu=pt"'))
    run = yield kernel_cmdline(["hugepages"], path, proc, state="absent")
    assert run.result["changed"] is True
    assert read_variable(path.read_text(), VAR) == "quiet iommu=pt"
    assert run.result["reboot_required"] is False  # the running kernel has no hugepages either
    again = yield kernel_cmdline(["hugepages"], path, proc, state="absent")
    assert again.result["changed"] is False


@shared_runs
def test_module_collapses_repeated_keys_with_a_warning(case):
    path, proc = grub(case)
    path.write_text(
        path.read_text().replace(f'{VAR}=""', f'{VAR}="hugepagesz=1G hugepages=4 hugepagesz=2M hugepages=512"')
    )
    run = yield kernel_cmdline({"hugepagesz": "1G", "hugepages": 50}, path, proc)
    assert not run.failed, run.result
    assert read_variable(path.read_text(), VAR) == "hugepagesz=1G hugepages=50"
    assert run.result["removed_duplicates"] == ["hugepagesz=2M", "hugepages=512"]
    assert "manages one occurrence per key" in run.printed


@shared_runs
def test_module_dropin(case):
    path, proc = grub(case)
    path.write_text(path.read_text().replace(f'{VAR}=""', f'{VAR}="net.ifnames=0 hugepages=32"'))
    dropins = path.parent / "grub.d"
    dropins.mkdir()
    (dropins / "50-cloudimg-settings.cfg").write_text('GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"\n')
    dropin = dropins / "60-rdmaforge.cfg"
    run = yield kernel_cmdline(HUGE, path, proc, diff=True, dropin=str(dropin))
    assert not run.failed, run.result
    assert run.result["files_changed"] == [str(path), str(dropin)]
    assert read_variable(path.read_text(), VAR) == "net.ifnames=0"  # the managed key left the main file
    assert dropin.read_text() == new_dropin_text(VAR, present(HUGE))
    assert oct(dropin.stat().st_mode & 0o777) == "0o644"
    assert run.result["cmdline_before"] == "net.ifnames=0 hugepages=32"
    assert run.result["cmdline_after"] == "net.ifnames=0 default_hugepagesz=1G hugepagesz=1G hugepages=50"
    assert run.result["backup_files"] == [str(b) for b in backups(path)]  # new drop-in: nothing to back up
    assert f"+++ after: {dropin}" in run.printed
    again = yield kernel_cmdline(HUGE, path, proc, dropin=str(dropin))
    assert again.result["changed"] is False
    gone = yield kernel_cmdline(["hugepages"], path, proc, dropin=str(dropin), state="absent")
    assert gone.result["cmdline_after"] == "net.ifnames=0 default_hugepagesz=1G hugepagesz=1G"


@shared_runs
def test_a_dropin_the_withdrawal_emptied_is_recognised_as_empty(case):
    """What the module leaves of the role's drop-in once every argument is off (withdraw.yml removes such a file: it
    stayed, review round 37b); a drop-in with a setting of the operator's beside it is not empty."""
    from rdmaforge.tuning import grub_dropin_is_empty

    path, proc = grub(case)
    (path.parent / "grub.d").mkdir()
    dropin = path.parent / "grub.d" / "60-rdmaforge-hugepages.cfg"
    yield kernel_cmdline(HUGE, path, proc, dropin=str(dropin))
    assert not grub_dropin_is_empty(dropin.read_text())
    gone = yield kernel_cmdline(list(HUGE), path, proc, dropin=str(dropin), state="absent")
    assert gone.result["changed"] is True, gone.result
    assert grub_dropin_is_empty(dropin.read_text()), dropin.read_text()
    assert not grub_dropin_is_empty(dropin.read_text() + 'GRUB_TIMEOUT=3\n')
    assert not grub_dropin_is_empty(dropin.read_text() + 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX quiet"\n')


@shared_runs
def test_module_warns_about_a_later_dropin_that_overrides(case):
    path, proc = grub(case)
    dropins = path.parent / "grub.d"
    dropins.mkdir()
    (dropins / "99-local.cfg").write_text('GRUB_CMDLINE_LINUX="hugepages=8"\n')
    run = yield kernel_cmdline(HUGE, path, proc, dropin=str(dropins / "60-rdmaforge.cfg"))
    assert not run.failed, run.result
    assert "99-local.cfg also sets hugepages=8" in run.printed
    assert "is read after" in run.printed and "the arguments of the drop-in are lost" in run.printed


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"dropin": "/nonexistent-dir/60-x.cfg"},
            "directory /nonexistent-dir does not exist; this GRUB may not read drop-ins",
        ),
        ({"dropin": "/tmp/60-x.conf"}, "must end in .cfg"),
        ({"args": {"intel_iommu": True}}, "args.intel_iommu is a boolean"),
        ({"variable": "1BAD"}, "variable='1BAD' is not a shell variable name"),
    ],
)
@shared_runs
def test_module_refuses_bad_options_with_a_reason(case, options, message):
    path, proc = grub(case)
    original = path.read_text()
    run = yield module_task("kernel_cmdline", {"args": HUGE, "path": str(path), "proc_cmdline": str(proc), **options})
    assert run.failed
    assert message in run.result["msg"]
    assert path.read_text() == original


@shared_runs
def test_module_without_grub_defaults_fails_and_changes_nothing(case):
    _, proc = grub(case)
    run = yield kernel_cmdline(HUGE, case / "no" / "grub", proc)
    assert run.failed
    assert run.result["msg"] == (
        f"path={case / 'no' / 'grub'} does not exist: this host has no GRUB defaults file (a container, or a "
        "boot loader other than GRUB); nothing was changed"
    )


@shared_runs
def test_module_refuses_a_multiline_value(case):
    path, proc = grub(case)
    text = path.read_text()
    line = text.splitlines().index(f'{VAR}=""') + 1
    path.write_text(text.replace(f'{VAR}=""', f'{VAR}="quiet\nsplash"'))
    run = yield kernel_cmdline(HUGE, path, proc)
    assert run.failed
    assert f"{path} line {line}: the value of GRUB_CMDLINE_LINUX does not end on this line" in run.result["msg"]


# grubby stand-in: entries in a JSON file next to it; --args/--remove-args as grubby-bls's update_args:
# remove k=v drops one exact occurrence, remove k drops k and every k=*, an added k=v first drops every
# k/k=* and is then appended.
FAKE_GRUBBY = r"""#!{python}
import json, sys
state_file = {state!r}
entries = json.load(open(state_file))
argv = sys.argv[1:]
with open(state_file + ".calls", "a") as log:
    log.write(" ".join(argv) + "\n")
def key(token):
    return token.split("=", 1)[0]
if argv == ["--info=ALL"]:
    for i, e in enumerate(entries):
        print("index=%d" % i)
        print('kernel="%s"' % e["kernel"])
        print('args="%s"' % e["args"])
        print('root="/dev/mapper/rhel-root"')
    sys.exit(0)
if argv == ["--default-index"]:
    print(0)
    sys.exit(0)
if argv and argv[0] == "--update-kernel=ALL":
    remove = add = []
    for a in argv[1:]:
        if a.startswith("--remove-args="):
            remove = a.split("=", 1)[1].split()
        elif a.startswith("--args="):
            add = a.split("=", 1)[1].split()
    for e in entries:
        tokens = e["args"].split()
        for r in remove:
            if "=" in r:
                if r in tokens:
                    tokens.remove(r)
            else:
                tokens = [t for t in tokens if key(t) != r]
        for a in add:
            tokens = [t for t in tokens if key(t) != key(a)]
        e["args"] = " ".join(tokens + add)
    json.dump(entries, open(state_file, "w"))
    sys.exit(0)
sys.stderr.write("fake grubby: unsupported arguments %r\n" % argv)
sys.exit(64)
"""


def grubby(case: Path) -> tuple[Path, Path, Path]:
    """The grubby stand-in, its state file of two BLS entries and an empty BLS entries directory, in ``case``."""
    state = case / "bls.json"
    state.write_text(
        json.dumps(
            [
                {
                    "kernel": "/boot/vmlinuz-5.14.0-427.el9.x86_64",
                    "args": "ro crashkernel=auto hugepages=32 rhgb quiet",
                },
                {"kernel": "/boot/vmlinuz-0-rescue-0b3f", "args": "ro crashkernel=auto rhgb quiet"},
            ]
        )
    )
    script = case / "grubby"
    script.write_text(FAKE_GRUBBY.format(python=sys.executable, state=str(state)))
    script.chmod(0o755)
    entries_dir = case / "loader" / "entries"
    entries_dir.mkdir(parents=True)
    return script, state, entries_dir


@shared_runs
def test_module_grubby_backend_is_picked_automatically(case):
    path, proc = grub(case)
    script, state, entries_dir = grubby(case)
    options = {"grubby_path": str(script), "bls_entries_dir": str(entries_dir)}
    check = yield kernel_cmdline(HUGE, path, proc, check=True, diff=True, **options)
    assert not check.failed, check.result
    assert check.result["backend"] == "grubby"
    assert check.result["changed"] is True
    assert "hugepages=32" in json.loads(state.read_text())[0]["args"]  # check mode: grubby only asked for --info
    assert all(not line.startswith("--update-kernel") for line in Path(f"{state}.calls").read_text().splitlines())
    assert (
        check.result["cmdline_after"]
        == "ro crashkernel=auto rhgb quiet default_hugepagesz=1G hugepagesz=1G hugepages=50"
    )

    run = yield kernel_cmdline(HUGE, path, proc, **options)
    assert not run.failed, run.result
    assert [e["args"] for e in json.loads(state.read_text())] == [
        "ro crashkernel=auto rhgb quiet default_hugepagesz=1G hugepagesz=1G hugepages=50",
        "ro crashkernel=auto rhgb quiet default_hugepagesz=1G hugepagesz=1G hugepages=50",
    ]
    assert [e["args_before"] for e in run.result["entries"]][0] == "ro crashkernel=auto hugepages=32 rhgb quiet"
    assert run.result["cmdline_after"] == check.result["cmdline_after"]
    # /etc/default/grub follows, so a later grub2-mkconfig keeps the arguments
    assert read_variable(path.read_text(), VAR) == "default_hugepagesz=1G hugepagesz=1G hugepages=50"
    assert run.result["files_changed"] == [str(path)]

    again = yield kernel_cmdline(HUGE, path, proc, **options)
    assert again.result["changed"] is False
    calls = Path(f"{state}.calls").read_text().splitlines()
    assert calls.count("--update-kernel=ALL --args=default_hugepagesz=1G hugepagesz=1G hugepages=50") == 1

    gone = yield kernel_cmdline(["hugepages"], path, proc, state="absent", **options)
    assert gone.result["changed"] is True
    assert all("hugepages=" not in e["args"] for e in json.loads(state.read_text()))


@shared_runs
def test_a_failure_after_grubby_ran_is_reported_as_a_change(case):
    """grubby's entries have no backup: a failure after --update-kernel ran (here: entries that still differ) was
    reported unchanged, and role hugepages then said no boot loader file changed and withdrew the reboot, while the
    next boot may take the new arguments (review round 19b)."""
    path, proc = grub(case)
    script, _, entries_dir = grubby(case)
    script.write_text(script.read_text().replace('    json.dump(entries, open(state_file, "w"))\n', ""))
    run = yield kernel_cmdline(HUGE, path, proc, grubby_path=str(script), bls_entries_dir=str(entries_dir))
    assert run.failed and run.result["changed"] is True and run.result["grubby_changed"] is True, run.result
    assert "boot entries still differ" in run.result["msg"] and "had already run" in run.result["msg"]


@shared_runs
def test_a_defaults_file_it_cannot_edit_stops_it_before_grubby_runs(case):
    """grubby rewrote the boot entries first and /etc/default/grub was read after: a value across two lines (which
    the module refuses) failed the task with the entries already changed, no backup of them (review round 37b)."""
    path, proc = grub(case)
    script, state, entries_dir = grubby(case)
    path.write_text('GRUB_CMDLINE_LINUX="quiet \\\n  splash"\n')
    before = state.read_text()
    run = yield kernel_cmdline(HUGE, path, proc, grubby_path=str(script), bls_entries_dir=str(entries_dir))
    assert run.failed and "had already run" not in run.result["msg"], run.result
    assert run.result.get("grubby_changed") is not True
    assert state.read_text() == before  # the entries are as they were
    assert all(not c.startswith("--update-kernel") for c in Path(f"{state}.calls").read_text().splitlines())


@shared_runs
def test_module_dropin_with_grubby(case):
    path, proc = grub(case)
    script, _, entries_dir = grubby(case)
    options = {"grubby_path": str(script), "bls_entries_dir": str(entries_dir), "dropin": str(path.parent / "x.cfg")}
    auto = yield kernel_cmdline(HUGE, path, proc, check=True, **options)
    assert not auto.failed and "ignored: this host uses grubby" in auto.printed
    explicit = yield kernel_cmdline(HUGE, path, proc, backend="grubby", **options)
    assert explicit.failed and "dropin cannot be used with backend=grubby" in explicit.result["msg"]


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
@shared_runs
def test_module_runs_with_python38_on_the_target(case):
    path, proc = grub(case)
    args = {"args": HUGE, "path": str(path), "proc_cmdline": str(proc)}
    run = yield module_task("kernel_cmdline", args, diff=True, python=PY38)
    assert not run.failed, run.result
    assert run.result["changed"] is True
    assert read_variable(path.read_text(), VAR) == "default_hugepagesz=1G hugepagesz=1G hugepages=50"
    assert os.path.exists(run.result["backup_file"])


def rescue_tasks(file: str) -> dict[str, dict[str, Any]]:
    """The rescue tasks of role hugepages' ``file`` (configure.yml, withdraw.yml), by name."""
    import yaml

    def blocks(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found = [t for t in tasks if "rescue" in t]
        for task in tasks:
            found += blocks(task.get("block", []))
        return found

    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "hugepages" / "tasks" / file).read_text())
    (block,) = blocks(tasks)
    return {task["name"]: task for task in block["rescue"]}


@pytest.mark.parametrize("file", ["configure.yml", "withdraw.yml"])
def test_the_rescue_after_grubby_ran_says_so_and_keeps_the_reboot(file):
    """The module's result after grubby ran and a later step failed: changed, grubby_changed, no files_changed.
    withdraw.yml's message joined files_changed without a default, so the rescue failed on its own template and
    hid the reason; both rescues withdrew the reboot marker, though the next boot takes grubby's entries (review
    rounds 19b, 20)."""
    from ansible.template import trust_as_template

    from tests.unit.role_vars import role_vars

    rescue = rescue_tasks(file)
    result = {"failed": True, "changed": True, "grubby_changed": True, "msg": "grubby ran but entries still differ"}
    variables = {"hugepages_cmdline": result, "ansible_failed_task": {"name": "Remove the kernel arguments"},
                 "ansible_failed_result": result, "hugepages_grub_cfg_said": "grub.cfg said",
                 "hugepages_will_change": True, "hugepages_announces": True, "hugepages_needs_boot": True,
                 "hugepages_reboot_pending": False,
                 "hugepages_marked_boot": "a", "hugepages_this_boot": "b", "inventory_hostname": "node1"}  # fmt: skip
    templar = role_vars("hugepages", {}, **variables)
    message = " ".join(str(templar.template(trust_as_template(
        rescue["Stop, saying what failed and what was put back"]["ansible.builtin.fail"]["msg"]))).split())
    assert "grubby ran but entries still differ" in message and "a reboot stays pending" in message, message
    when = rescue["Withdraw the reboot this run announced"]["when"]
    conditions = when if isinstance(when, list) else [when]
    assert not all(templar.template(trust_as_template("{{ " + c + " }}")) for c in conditions)


@shared_runs
def test_a_dropin_that_cannot_be_written_leaves_the_main_file_as_it_was(case):
    """Review round 27b: the main file was rewritten (the managed keys moved out) before the drop-in write failed,
    and the failed result named no changed file, so the role's rescue restored nothing and said so. Every file is
    now staged first. The drop-in's directory is the kernel's sysfs, which exists and takes no new file, root's
    included."""
    path, proc = grub(case)
    path.write_text(path.read_text().replace(f'{VAR}=""', f'{VAR}="net.ifnames=0 hugepages=32"'))
    before = path.read_text()
    run = yield kernel_cmdline(HUGE, path, proc, dropin="/sys/kernel/rdmaforge-test-60-hugepages.cfg")
    assert run.failed
    assert run.result["msg"].startswith("cannot write /sys/kernel/rdmaforge-test-60-hugepages.cfg: ")
    assert run.result["msg"].endswith("; no file was changed")
    assert run.result["changed"] is False and run.result["files_changed"] == []
    assert path.read_text() == before and backups(path) == []
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".kernel_cmdline.")]  # no staged copy left
