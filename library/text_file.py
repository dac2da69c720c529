#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: text_file
short_description: Write a small text file, with its owner, group and mode, in one module call
description:
  - Makes O(dest) hold exactly O(content) (UTF-8), then sets its owner, group and mode like M(ansible.builtin.file).
    The file is replaced atomically (a temporary file in the same directory, then a rename), so a reader never
    sees half a file.
  - Why not M(ansible.builtin.copy) or M(ansible.builtin.template) with O(content)? Those action plugins reach the
    node two to five times for one file (a C(stat) module run, a temporary directory, a file transfer, the
    C(copy) or C(file) module run, the clean-up). This module is one run with the content in its arguments, which
    is what a converge of hundreds of nodes pays per file. Render a template on the controller with
    C(lookup('ansible.builtin.template', ...)).
  - For configuration files, keys and records of a few kilobytes; the content travels inside the module's
    arguments, so large or binary files belong with M(ansible.builtin.copy).
  - The parent directory must exist; the module fails naming it otherwise (create it with M(ansible.builtin.file)),
    unless O(create_directory=true).
    In check mode a missing directory is no error, since the task that would create it did not run either; the
    file is reported as one that would be created.
  - With O(append_lines) instead of O(content) the file keeps its text and gets each of those lines it lacks, at
    its end, in one run (a record that several runs add to; what a loop of M(ansible.builtin.lineinfile) with
    O(ansible.builtin.lineinfile#module:create=true) writes, one module run per line).
  - Supports check mode and diff mode (the old and new text, and any owner, group or mode change).
version_added: "0.2.0"
author:
  - rdmaforge contributors
options:
  dest:
    description: Absolute path of the file to write.
    type: path
    required: true
  content:
    description:
      - The whole text of the file. It appears in the task's logged arguments and in its diff, so give a task that
        writes a secret C(no_log=true).
      - Exactly one of O(content) and O(append_lines) is given.
    type: str
  append_lines:
    description:
      - Lines the file must hold; those it lacks (compared as whole lines) are added at its end, in this order,
        each once, after a line break if the file's last line has none. A missing file is created with them.
      - Each entry is one line, without a line break.
    type: list
    elements: str
  create_directory:
    description:
      - Create the parent directory and any missing above it (mode 0755, owned by the user the module runs as) when
        it does not exist, as M(ansible.builtin.lineinfile) with O(ansible.builtin.lineinfile#module:create=true)
        does. Off by default, so that a typo in O(dest) fails instead of making a directory.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.files
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
seealso:
  - module: ansible.builtin.copy
  - module: ansible.builtin.template
"""

EXAMPLES = r"""
- name: Write the NCCL settings from a template rendered on the controller
  rdmaforge.cluster.text_file:
    dest: /etc/nccl.conf
    content: "{{ lookup('ansible.builtin.template', 'nccl.conf.j2') }}"
    owner: root
    group: root
    mode: "0644"

- name: Record the packages this run adds (kept for reset; other runs add to the same file)
  rdmaforge.cluster.text_file:
    dest: /var/lib/rdmaforge/packages-added
    append_lines: [perftest, infiniband-diags]
    mode: "0644"

- name: Register a library directory with ld.so
  rdmaforge.cluster.text_file:
    dest: /etc/ld.so.conf.d/nccl.conf
    content: "/opt/nccl/current/lib\n"
    mode: "0644"
  notify: Refresh the ld.so cache
"""

RETURN = r"""
dest:
  description: The file written (or that would be, in check mode).
  returned: always
  type: str
  sample: /etc/nccl.conf
content_changed:
  description: Whether the text changed (false when only the owner, group or mode changed).
  returned: always
  type: bool
checksum:
  description: SHA-1 of the content (the checksum M(ansible.builtin.copy) returns).
  returned: always
  type: str
size:
  description: Length of the content in bytes.
  returned: always
  type: int
"""

import grp
import hashlib
import os
import pwd
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = {
    "dest": {"type": "path", "required": True},
    # Not no_log: Ansible would mask the text in the diff and every value equal to it in the output. A task that
    # writes a secret sets no_log itself.
    "content": {"type": "str"},
    "append_lines": {"type": "list", "elements": "str"},
    "create_directory": {"type": "bool", "default": False},
}


def read_bytes(path: str) -> bytes | None:
    """The file's bytes; None when it does not exist (nor its directory, in check mode). Other errors raise OSError."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return None


def text_for_diff(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


def with_lines(before: bytes | None, lines: list[str]) -> bytes:
    """``before`` with each of ``lines`` it lacks appended, in order and once, as a lineinfile loop leaves it. Bytes
    throughout: a file that is not UTF-8 keeps its bytes (decoded and encoded again, they became U+FFFD), and lines
    end at newlines only (str.splitlines also split at \\v, \\f and U+2028, so such an entry was never found and
    was appended on every run; review round 37c)."""
    data = before or b""
    present = {line[:-1] if line.endswith(b"\r") else line for line in data.split(b"\n")}
    missing = [line.encode("utf-8") for line in dict.fromkeys(lines) if line.encode("utf-8") not in present]
    if not missing:
        return before if before is not None else b""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return data + b"".join(line + b"\n" for line in missing)


def owner_problem(owner: str | None, group: str | None) -> str | None:
    """An owner or group this host does not have (a name, not a number), named; None when both exist."""
    for option, name, lookup in (("owner", owner, pwd.getpwnam), ("group", group, grp.getgrnam)):
        if name and not str(name).isdigit():
            try:
                lookup(str(name))
            except KeyError:
                return f"{option}={name} is not a {'user' if option == 'owner' else 'group'} of this host"
    return None


def write_atomically(module: AnsibleModule, dest: str, data: bytes) -> None:
    """A temporary file beside dest, then AnsibleModule.atomic_move (which keeps dest's SELinux context)."""
    fd, temporary = tempfile.mkstemp(prefix=".rdmaforge-", dir=os.path.dirname(dest))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        module.atomic_move(temporary, dest, unsafe_writes=module.params.get("unsafe_writes", False))
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, add_file_common_args=True, supports_check_mode=True,
                           mutually_exclusive=[("content", "append_lines")],
                           required_one_of=[("content", "append_lines")])  # fmt: skip
    dest = module.params["dest"]
    lines = module.params["append_lines"]
    broken = [line for line in lines or [] if "\n" in line or "\r" in line]
    if broken:
        module.fail_json(msg=f"append_lines entries are single lines; {broken[0]!r} holds a line break")
    parent = os.path.dirname(dest) or "."
    if not os.path.isabs(dest):
        module.fail_json(msg=f"dest={dest} is not an absolute path")
    if os.path.isdir(dest):
        module.fail_json(msg=f"dest={dest} is a directory; text_file writes a file")
    # In check mode the task that creates the directory did not run either (a new node): the file would be
    # created, as ansible.builtin.copy reports it (read_bytes finds no file there).
    if not os.path.isdir(parent) and not module.check_mode:
        if not module.params["create_directory"]:
            module.fail_json(msg=f"dest={dest}: the directory {parent} does not exist (create it first, or set "
                                 "create_directory: true)")  # fmt: skip
        os.makedirs(parent, mode=0o755, exist_ok=True)

    unknown = owner_problem(module.params.get("owner"), module.params.get("group"))
    if unknown:  # found only after the content was written, the task failed half-applied
        module.fail_json(msg=f"dest={dest}: {unknown}; nothing was written")
    try:
        before = read_bytes(dest)
    except OSError as exc:
        module.fail_json(msg=f"dest={dest} cannot be read ({exc.strerror or exc}); nothing was written")
    data = with_lines(before, lines) if lines is not None else module.params["content"].encode("utf-8")
    checksum = hashlib.sha1(data).hexdigest()  # noqa: S324  # the checksum copy returns, not security
    content_changed = before != data
    result: dict[str, Any] = {
        "dest": dest,
        "content_changed": content_changed,
        "checksum": checksum,
        "size": len(data),
    }
    if content_changed and not module.check_mode:
        write_atomically(module, dest, data)
    # The owner, group and mode changes go in a diff of their own (AnsibleModule fills it as a dict of attributes).
    attributes: dict[str, Any] = {"before_header": dest, "after_header": dest}
    if module.check_mode and before is None:
        changed = True  # nothing to set attributes on yet: the file would be created with them
    else:
        file_args = module.load_file_common_arguments(module.params, path=dest)
        changed = module.set_fs_attributes_if_different(file_args, content_changed, diff=attributes)
    result["changed"] = changed
    if module._diff:
        diffs = []
        if content_changed:
            diffs.append(
                {
                    "before_header": dest,
                    "after_header": dest,
                    "before": text_for_diff(before),
                    "after": text_for_diff(data),
                }
            )
        if "before" in attributes:
            diffs.append(attributes)
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
