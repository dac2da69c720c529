#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kernel_cmdline
short_description: Ensure kernel command line arguments are present, absent or replaced, exactly once
description:
  - Edits the kernel arguments the boot loader passes at the next boot, never appending a second
    copy of an argument. V(hugepages=50) replaces V(hugepages=32) where it stands.
  - With O(backend=grub_defaults) it edits the shell variable O(variable) (C(GRUB_CMDLINE_LINUX)) in
    O(path) (C(/etc/default/grub)), or, with O(dropin), writes C(VARIABLE="$VARIABLE ...") into a
    C(/etc/default/grub.d/*.cfg) drop-in (read by Debian/Ubuntu's C(grub-mkconfig) after the main
    file) and removes the managed keys from O(path) so the generated command line holds each once.
  - With O(backend=grubby) (RHEL 8+ and Fedora, whose boot entries follow the Boot Loader Specification) it runs
    C(grubby --update-kernel=ALL) and also edits O(variable) in O(path) when that file exists, so a
    later C(grub2-mkconfig) does not drop the arguments again.
  - The module changes configuration only. It does not run C(update-grub) / C(grub2-mkconfig) and
    does not reboot; RV(changed) and RV(reboot_required) tell the caller when to.
  - Each given key is managed as a single occurrence. Extra occurrences of a managed key are removed
    (with a warning naming them); a command line that reserves several huge page sizes through
    repeated C(hugepagesz=.. hugepages=..) pairs therefore cannot be expressed with this module.
  - Managed arguments end up in the order given (the kernel reads C(hugepages=) relative to the
    C(hugepagesz=) before it). Existing occurrences are replaced in place when that keeps the order,
    otherwise they move together to the end. Other arguments never move; arguments after a C(--)
    (handed to init) are never matched, and new ones are inserted before it.
  - Keys compare the way the kernel compares them (C(-) and C(_) are the same); values compare as
    written, except the huge page sizes (C(hugepagesz), C(default_hugepagesz)), which compare as the
    kernel reads them (V(1G), V(1GB) and V(1073741824) are one size).
  - The variable's quoting (double or single quotes), indentation, C(export) and trailing comment are
    kept, as are all other lines; untouched arguments keep their exact spelling, including shell
    references such as C($GRUB_CMDLINE_LINUX). An unquoted value is rewritten in double quotes.
  - The parser is rdmaforge's C(rdmaforge/parsers/kernel_cmdline.py), shipped to the target as
    C(plugins/module_utils/kernel_cmdline.py) of the collection.
version_added: "0.1.0"
author:
  - rdmaforge contributors
options:
  args:
    description:
      - The arguments, as a dict of name to value (V(null) for a flag such as C(quiet)) or a list of
        V(name=value) / V(flag) strings.
      - "Quote values YAML would read as booleans: C(intel_iommu: \"on\"); a boolean is refused."
      - A value with spaces is written in the kernel's double quotes (C(name="a b")).
      - With O(state=absent), a name alone (dict value V(null), or a list entry without C(=)) removes
        every occurrence whatever its value; V(name=value) removes only occurrences with that value.
    type: raw
    required: true
  state:
    description: Whether the arguments must be present (with these values) or absent.
    type: str
    choices: [present, absent]
    default: present
  path:
    description:
      - The GRUB defaults file.
      - With O(backend=grub_defaults) it must exist; the module fails, changing nothing, when it does not
        (a container, or a host booting without GRUB).
    type: path
    default: /etc/default/grub
  variable:
    description:
      - The shell variable holding the arguments. C(GRUB_CMDLINE_LINUX) applies to every boot entry,
        recovery included; C(GRUB_CMDLINE_LINUX_DEFAULT) to the normal entries only.
      - When O(path) has no assignment of it, one is appended at the end of the file.
    type: str
    default: GRUB_CMDLINE_LINUX
  dropin:
    description:
      - A drop-in file, normally under C(/etc/default/grub.d/) and ending in C(.cfg) (other names are
        not read), holding C(VARIABLE="$VARIABLE ..."). Its directory must exist (Debian and Ubuntu
        read drop-ins, RHEL's C(grub2-mkconfig) does not).
      - The managed keys are removed from O(variable) in O(path) at the same time, so the generated
        command line holds each key once. Other drop-ins in that directory are not edited; the module
        warns when one also sets a managed key or overrides O(variable) after this one.
      - Ignored, with a warning, when O(backend=auto) picks grubby; refused with O(backend=grubby).
    type: path
  backend:
    description:
      - V(grub_defaults) edits O(path) (or O(dropin)). V(grubby) runs O(grubby_path) on every boot entry
        and edits O(path) too when it exists.
      - V(auto) picks V(grubby) when O(grubby_path) exists and O(bls_entries_dir) is a directory (RHEL 8+
        and Fedora with Boot Loader Specification entries), V(grub_defaults) otherwise.
    type: str
    choices: [auto, grub_defaults, grubby]
    default: auto
  backup:
    description:
      - Copy each file to a timestamped backup (Ansible's C(backup_local)) before changing it.
      - grubby keeps no backup of the boot entries it edits; RV(entries) records their arguments before
        and after.
    type: bool
    default: true
  proc_cmdline:
    description: Where to read the running kernel's command line for RV(reboot_required) (tests point it elsewhere).
    type: path
    default: /proc/cmdline
  grubby_path:
    description: The grubby executable, for O(backend=grubby) and the O(backend=auto) test.
    type: path
    default: /usr/sbin/grubby
  bls_entries_dir:
    description: The Boot Loader Specification entries directory looked for by O(backend=auto).
    type: path
    default: /boot/loader/entries
attributes:
  check_mode:
    support: full
    details: Computes every result, the diff included, and writes nothing (grubby is only asked for --info).
  diff_mode:
    support: full
requirements:
  - GRUB 2 with C(/etc/default/grub), or grubby for BLS entries.
notes:
  - Regenerate the boot loader configuration after a change (C(update-grub) on Debian/Ubuntu,
    C(grub2-mkconfig -o ...) on RHEL with the path for BIOS or EFI), then reboot for it to take effect.
  - RV(reboot_required) compares the desired arguments with the running kernel's command line, whether
    or not this run changed anything, so a host that was configured but not yet rebooted still says true.
    Inside a container C(/proc/cmdline) is the host kernel's.
  - On RHEL 9, C(kernel-install) builds entries for newly installed kernels from C(/etc/kernel/cmdline)
    when that file exists; this module does not edit it.
"""

EXAMPLES = r"""
- name: Reserve fifty 1 GiB huge pages at boot (replaces any earlier hugepages= value)
  kernel_cmdline:
    args:
      default_hugepagesz: 1G
      hugepagesz: 1G
      hugepages: 50
  register: hugepage_args

- name: The same through a drop-in on Ubuntu
  kernel_cmdline:
    args: [default_hugepagesz=1G, hugepagesz=1G, hugepages=50]
    dropin: /etc/default/grub.d/60-rdmaforge-hugepages.cfg

- name: IOMMU pass-through (quote "on", which YAML would read as a boolean)
  kernel_cmdline:
    args:
      intel_iommu: "on"
      iommu: pt

- name: Drop a stale argument, whatever its value
  kernel_cmdline:
    args: [hugepages]
    state: absent

- name: Regenerate the GRUB configuration when the arguments changed
  ansible.builtin.command: update-grub
  when: hugepage_args is changed and hugepage_args.backend == 'grub_defaults'
"""

RETURN = r"""
backend:
  description: The backend used, V(grub_defaults) or V(grubby).
  returned: always
  type: str
cmdline_before:
  description:
    - The arguments before the run - O(variable)'s value in O(path); with O(dropin), the value after both
      files are read (C($VARIABLE) expanded); with grubby, the default boot entry's arguments.
  returned: always
  type: str
  sample: quiet hugepages=32
cmdline_after:
  description: The same after the run (what it would be, in check mode).
  returned: always
  type: str
  sample: quiet default_hugepagesz=1G hugepagesz=1G hugepages=50
reboot_required:
  description: Whether the desired arguments differ from the running kernel's (O(proc_cmdline)).
  returned: always
  type: bool
running_differences:
  description: One phrase per managed argument the running kernel does not have as desired.
  returned: always
  type: list
  elements: str
  sample: ["hugepages=50 (running kernel has hugepages=32)"]
files_changed:
  description:
    - Files written (in check mode, that would be written), each as the file really written, its links followed.
    - Each backup in RV(backup_files) is named after one of these.
  returned: always
  type: list
  elements: str
dropin_after:
  description:
    - With O(dropin), the drop-in's text after the run (what it would be, in check mode); null when there is no
      drop-in and none is written. The hugepages role's withdrawal removes the file when this adds nothing, so
      C(--check) shows that removal too.
  returned: when O(dropin) is set (not with the grubby backend)
  type: str
backup_file:
  description: Backup of the first changed file that existed before (O(path) when it changed).
  returned: when O(backup=true) and an existing file was changed
  type: str
  sample: /etc/default/grub.12345.2025-01-01@10:00:00~
backup_files:
  description: Every backup made, one per changed file that existed before.
  returned: always
  type: list
  elements: str
removed_duplicates:
  description: Extra occurrences of managed keys that were removed (each key is kept once).
  returned: always
  type: list
  elements: str
entries:
  description: With grubby, each boot entry's index, kernel and arguments before and after.
  returned: when the backend is grubby
  type: list
  elements: dict
diff:
  description: Before and after text of each changed file (and of the grubby entries), in diff mode.
  returned: when diff mode is on and something changed
  type: list
  elements: dict
"""

import glob
import os
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.kernel_cmdline import (
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
    running_mismatches,
    simulate_grubby,
    split_cmdline,
)

ARGUMENT_SPEC = {
    "args": {"type": "raw", "required": True},
    "state": {"type": "str", "choices": [PRESENT, ABSENT], "default": PRESENT},
    "path": {"type": "path", "default": "/etc/default/grub"},
    "variable": {"type": "str", "default": "GRUB_CMDLINE_LINUX"},
    "dropin": {"type": "path"},
    "backend": {"type": "str", "choices": ["auto", "grub_defaults", "grubby"], "default": "auto"},
    "backup": {"type": "bool", "default": True},
    "proc_cmdline": {"type": "path", "default": "/proc/cmdline"},
    "grubby_path": {"type": "path", "default": "/usr/sbin/grubby"},
    "bls_entries_dir": {"type": "path", "default": "/boot/loader/entries"},
}


class FileChange:
    """A file to write: its path, old text (``None``: the file does not exist yet) and new text."""

    def __init__(self, path: str, old: str | None, new: str) -> None:
        self.path = path
        self.old = old
        self.new = new


def read_text(module: AnsibleModule, path: str, option: str) -> str | None:
    """The file's text, ``None`` when it does not exist; anything else unreadable fails the task."""
    if not os.path.lexists(path):
        return None
    if not os.path.isfile(path):
        module.fail_json(msg=f"{option}={path} is not a regular file")
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as error:
        module.fail_json(msg=f"cannot read {option}={path}: {error}")
    return None  # not reached: fail_json exits


def stage_text(change: FileChange) -> str:
    """Write ``change.new`` to a temporary file beside its target (same directory, so the rename cannot cross
    filesystems) and return its path. Every file of a run is staged before any is replaced: a drop-in whose
    directory cannot be written (read-only, full, denied) used to fail after /etc/default/grub was already rewritten,
    and the failed result named no changed file, so the role's rescue restored nothing (review round 27b)."""
    target = os.path.realpath(change.path)
    fd, temp = tempfile.mkstemp(dir=os.path.dirname(target) or ".", prefix=".kernel_cmdline.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(change.new)
    except OSError:
        os.unlink(temp)
        raise
    return temp


def install_staged(module: AnsibleModule, change: FileChange, temp: str, backup: bool) -> str | None:
    """Replace the file with its staged copy atomically; returns the backup path.

    ``atomic_move`` keeps the existing file's owner, mode and SELinux context. A symlinked file is
    written through the link (its target changes), not replaced by a regular file.
    """
    target = os.path.realpath(change.path)
    backup_file = module.backup_local(target) if backup and change.old is not None else None
    try:
        module.atomic_move(temp, target)  # fails the task itself, with the reason, on error
    finally:
        if os.path.exists(temp):  # left over only when the move did not happen
            os.unlink(temp)
    if change.old is None:
        os.chmod(target, 0o644)  # a new drop-in: world-readable like the file it extends
    return backup_file or None


def choose_backend(module: AnsibleModule) -> str:
    backend: str = module.params["backend"]
    if backend != "auto":
        return backend
    grubby, entries = module.params["grubby_path"], module.params["bls_entries_dir"]
    if os.path.isfile(grubby) and os.access(grubby, os.X_OK) and os.path.isdir(entries):
        return "grubby"
    return "grub_defaults"


def removal_of(args: list[Arg], state: str) -> list[Arg]:
    """What to take out of the main file when the arguments live in a drop-in: every managed key."""
    return [Arg(arg.key, None) for arg in args] if state == PRESENT else list(args)


#: Extra occurrences of managed keys removed during this run (reported as removed_duplicates).
REMOVED: list[str] = []


def warn_dropped(module: AnsibleModule, where: str, variable: str, dropped: list[str]) -> None:
    REMOVED.extend(dropped)
    if dropped:
        module.warn(
            f"removed {' '.join(dropped)} from {variable} in {where}: kernel_cmdline manages one occurrence "
            "per key, so extra occurrences of the keys it manages are dropped"
        )


def check_other_dropins(module: AnsibleModule, dropin: str, variable: str, args: list[Arg]) -> None:
    """Warn about drop-ins this module does not edit that undo or duplicate its work."""
    keys = {arg.key for arg in args}
    for other in sorted(glob.glob(os.path.join(os.path.dirname(dropin), "*.cfg"))):
        if os.path.abspath(other) == os.path.abspath(dropin):
            continue
        text = read_text(module, other, "drop-in")
        try:
            assignments = find_assignments(text or "", variable, other)
        except CmdlineError as error:
            module.warn(f"cannot check {other}: {error}")
            continue
        for assignment in assignments:
            clashes = [t for t in assignment.texts() if arg_key(t) in keys]
            if clashes:
                module.warn(f"{other} also sets {' '.join(clashes)} in {variable}; kernel_cmdline does not edit it")
            if os.path.basename(other) > os.path.basename(dropin) and not assignment.references(variable):
                module.warn(
                    f"{other} is read after {dropin} and sets {variable} without ${variable}: "
                    "the arguments of the drop-in are lost"
                )


def edit_main_file(module: AnsibleModule, args: list[Arg], state: str, required: bool) -> tuple[FileChange | None, str]:
    """The change to O(path) and the variable's value after it (``""`` when the file has none)."""
    path, variable = module.params["path"], module.params["variable"]
    text = read_text(module, path, "path")
    if text is None:
        if required:
            module.fail_json(
                msg=f"path={path} does not exist: this host has no GRUB defaults file (a container, or a "
                "boot loader other than GRUB); nothing was changed"
            )
        return None, ""
    edit = edit_defaults(text, variable, args, state, where=path)
    warn_dropped(module, path, variable, edit.dropped)
    return FileChange(path, text, edit.text), edit.before or ""


def grub_defaults(module: AnsibleModule, args: list[Arg], state: str) -> dict[str, Any]:
    path, variable, dropin = module.params["path"], module.params["variable"], module.params["dropin"]
    if dropin is None:
        change, before = edit_main_file(module, args, state, required=True)
        assert change is not None
        after = find_assignments(change.new, variable, path)
        return {"changes": [change], "before": before, "after": after[-1].value() if after else ""}

    if not dropin.endswith(".cfg"):
        module.fail_json(msg=f"dropin={dropin} must end in .cfg: grub-mkconfig reads only /etc/default/grub.d/*.cfg")
    if not os.path.isdir(os.path.dirname(dropin) or "."):
        module.fail_json(
            msg=f"dropin={dropin}: directory {os.path.dirname(dropin)} does not exist; this GRUB may not read "
            "drop-ins (Debian and Ubuntu do, RHEL does not): create it, or leave dropin unset to edit path"
        )
    main_text = read_text(module, path, "path")
    main_new = main_text
    changes: list[FileChange] = []
    if main_text is not None:
        main_edit = edit_defaults(main_text, variable, removal_of(args, state), ABSENT, where=path)
        main_new = main_edit.text
        changes.append(FileChange(path, main_text, main_new))
    dropin_text = read_text(module, dropin, "dropin")
    dropin_new: str | None
    if dropin_text is None:
        dropin_new = new_dropin_text(variable, args) if state == PRESENT else None
    else:
        edit = edit_defaults(dropin_text, variable, args, state, where=dropin, append_to_existing=True)
        warn_dropped(module, dropin, variable, edit.dropped)
        dropin_new = edit.text
    if dropin_new is not None:
        changes.append(FileChange(dropin, dropin_text, dropin_new))
    check_other_dropins(module, dropin, variable, args)
    return {
        "changes": changes,
        "before": effective_value([main_text or "", dropin_text or ""], variable),
        "after": effective_value([main_new or "", dropin_new or ""], variable),
        "dropin_after": dropin_new,
    }


def run_grubby(module: AnsibleModule, *arguments: str) -> str:
    grubby = module.params["grubby_path"]
    rc, stdout, stderr = module.run_command([grubby, *arguments])
    if rc != 0:
        module.fail_json(msg=f"{grubby} {' '.join(arguments)} failed with exit status {rc}: {stderr.strip()}")
    return str(stdout)


def grubby_backend(module: AnsibleModule, args: list[Arg], state: str) -> dict[str, Any]:
    grubby = module.params["grubby_path"]
    if not (os.path.isfile(grubby) and os.access(grubby, os.X_OK)):
        module.fail_json(msg=f"grubby_path={grubby} is not an executable file (backend=grubby needs grubby)")
    entries = parse_grubby_info(run_grubby(module, "--info=ALL"))
    if not entries:
        module.fail_json(msg=f"{grubby} --info=ALL lists no Linux boot entry; nothing to update")
    default_text = run_grubby(module, "--default-index").strip()
    default = int(default_text) if default_text.lstrip("-").isdigit() else entries[0].index
    remove, add = grubby_arguments(entries, args, state)
    after = {e.index: simulate_grubby(e.args, remove, add) if (remove or add) else e.args for e in entries}
    # /etc/default/grub is read (and its edit worked out) before grubby touches the entries, which have no backup: a
    # file it cannot edit failed the task after grubby had changed them (review round 37b).
    change, _ = edit_main_file(module, args, state, required=False)
    if (remove or add) and not module.check_mode:
        command = ["--update-kernel=ALL"]
        if remove:
            command.append("--remove-args=" + " ".join(remove))
        if add:
            command.append("--args=" + " ".join(add))
        run_grubby(module, *command)
        fail_json = module.fail_json

        # From here a failure (the entries read back, /etc/default/grub) comes after grubby changed the entries: the
        # result says so, or the caller would report that no boot loader file changed while the next boot takes them.
        def fail_after_grubby(msg: str, **kwargs: Any) -> None:
            kwargs.update(changed=True, grubby_changed=True)
            fail_json(msg=f"{msg} (grubby --update-kernel=ALL had already run: the boot entries may carry new "
                          "arguments, which the next boot takes; see grubby --info=ALL)", **kwargs)  # fmt: skip

        module.fail_json = fail_after_grubby
        # Report what grubby really did, and refuse to call it done if an entry is still wrong.
        after = {e.index: e.args for e in parse_grubby_info(run_grubby(module, "--info=ALL"))}
        wrong = [
            f"entry {index}: {line}"
            for index, line in after.items()
            if apply_args(split_cmdline(line), args, state)[0] != split_cmdline(line)
        ]
        if wrong:
            module.fail_json(msg=f"{grubby} ran but these boot entries still differ: {'; '.join(wrong)}")

    by_index = {e.index: e for e in entries}
    report = [
        {"index": e.index, "kernel": e.kernel, "args_before": e.args, "args_after": after.get(e.index, e.args)}
        for e in entries
    ]
    grubby_diff = None
    if remove or add:
        grubby_diff = {
            "before_header": f"{grubby} --info=ALL (args)",
            "after_header": f"{grubby} --info=ALL (args)",
            "before": "".join(f"{e['kernel']}: {e['args_before']}\n" for e in report),
            "after": "".join(f"{e['kernel']}: {e['args_after']}\n" for e in report),
        }
    default_entry = by_index.get(default, entries[0])
    return {
        "changes": [change] if change is not None else [],
        "before": default_entry.args,
        "after": after.get(default_entry.index, default_entry.args),
        "entries": report,
        "grubby_changed": bool(remove or add),
        "grubby_diff": grubby_diff,
    }


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    state = module.params["state"]
    try:
        args = normalize_args(module.params["args"], state)
    except CmdlineError as error:
        module.fail_json(msg=str(error))

    backend = choose_backend(module)
    if backend == "grubby" and module.params["dropin"] is not None:
        if module.params["backend"] == "grubby":
            module.fail_json(msg="dropin cannot be used with backend=grubby: RHEL's grub2-mkconfig reads no drop-ins")
        module.warn(f"dropin={module.params['dropin']} ignored: this host uses grubby (BLS entries)")
        module.params["dropin"] = None

    proc_path = module.params["proc_cmdline"]
    running = read_text(module, proc_path, "proc_cmdline")
    if running is None:
        module.fail_json(msg=f"proc_cmdline={proc_path} does not exist")

    try:
        outcome = grubby_backend(module, args, state) if backend == "grubby" else grub_defaults(module, args, state)
    except CmdlineError as error:
        module.fail_json(msg=str(error))

    changes = [c for c in outcome["changes"] if c.old != c.new]
    differences = running_mismatches(running or "", args, state)
    result: dict[str, Any] = {
        "changed": bool(changes) or bool(outcome.get("grubby_changed")),
        "backend": backend,
        "cmdline_before": outcome["before"],
        "cmdline_after": outcome["after"],
        "reboot_required": bool(differences),
        "running_differences": differences,
        # The file really written: a symlinked /etc/default/grub is written through its link, and its backup is
        # named after the target, so a restore must go to the target too (copying onto the link would replace it).
        "files_changed": [os.path.realpath(c.path) for c in changes],
        "backup_files": [],
        "removed_duplicates": REMOVED,
    }
    if "entries" in outcome:
        result["entries"] = outcome["entries"]
    if module.params["dropin"] is not None:
        result["dropin_after"] = outcome["dropin_after"]
    if module._diff and result["changed"]:
        diffs = [
            {"before_header": c.path, "after_header": c.path, "before": c.old or "", "after": c.new} for c in changes
        ]
        if outcome.get("grubby_diff"):
            diffs.append(outcome["grubby_diff"])
        result["diff"] = diffs

    if not module.check_mode:
        staged: list[tuple[FileChange, str]] = []
        for change in changes:
            try:
                staged.append((change, stage_text(change)))
            except OSError as error:
                for _, temp in staged:
                    os.unlink(temp)
                module.fail_json(msg=f"cannot write {change.path}: {error}; no file was changed",
                                 changed=False, files_changed=[], backup_files=[])  # fmt: skip
        for change, temp in staged:
            backup_file = install_staged(module, change, temp, module.params["backup"])
            if backup_file:
                result["backup_files"].append(backup_file)
    if result["backup_files"]:
        result["backup_file"] = result["backup_files"][0]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
