#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: build_tree
short_description: Record an installed build's files, or check the tree against that record
description:
  - A build installed by role C(rdmaforge.cluster.build_once) (NCCL under C(/opt/nccl/ID), nccl-tests under
    C(/opt/rdmaforge/nccl-tests/ID)) is decided by C(.rdmaforge-build.json), by its package's sha256 or by the
    source it was built from (the same id, source kind and commit or tarball sha256). That file
    says which package was unpacked, not that its files are still there. A library replaced by hand, or a C(lib/)
    deleted or truncated by a full disk, left the manifest as it was, and every converge reported the node
    converged.
  - With O(state=recorded) (right after the unpack), writes C(.rdmaforge-files.json) in O(path), holding each
    regular file's sha256, size, mode and owner and each link's target, by path below O(path).
  - With O(state=checked) (every converge), reads that record and compares the tree with it, hashing every file.
    The result's RV(intact) is false, with each difference in RV(problems), when a recorded file is missing, has
    other content, mode or owner, or has become another kind of file, and when there is no record or it cannot be read
    (a build installed before the record existed). The role then installs the build again. Files the record does
    not list (a plugin copied into C(lib/) by hand) are returned in RV(extra) and are no problem.
  - Reads only in O(state=checked); supports check mode (O(state=recorded) reports what it would write).
version_added: "0.3.0"
author:
  - rdmaforge contributors
options:
  path:
    description: The build's directory (C(build_once_home)).
    type: path
    required: true
  state:
    description: C(recorded) writes the record of the tree as it is; C(checked) compares the tree with the record.
    type: str
    choices: [checked, recorded]
    default: checked
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: rdmaforge.cluster.converge_state
"""

EXAMPLES = r"""
- name: Check the installed build's files against their record
  rdmaforge.cluster.build_tree:
    path: /opt/nccl/2.29.7-cuda12.4-sm_80
  register: tree

- name: Record the files of the build just unpacked
  rdmaforge.cluster.build_tree:
    path: /opt/nccl/2.29.7-cuda12.4-sm_80
    state: recorded
"""

RETURN = r"""
intact:
  description: Whether every recorded file is there as recorded (always true with O(state=recorded)).
  returned: always
  type: bool
problems:
  description: Each difference, naming the file and what differs; empty when intact.
  returned: always
  type: list
  elements: str
  sample: ["lib/libnccl.so.2.29.7: content differs from the record (sha256 3f2a... recorded, 9c1e... found)"]
extra:
  description: Files in the tree that the record does not list (no problem).
  returned: always
  type: list
  elements: str
files:
  description: Absolute paths of the record and of every file and link it lists (what a drift check watches).
  returned: always
  type: list
  elements: str
"""

import json
import os
import stat
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.converge_resources import file_sha256

#: The record, and the manifest beside it (build_once's), are the role's bookkeeping, not files of the build.
RECORD = ".rdmaforge-files.json"
OWN_FILES = frozenset({RECORD, ".rdmaforge-build.json"})
FORMAT = 2  # 2: each file's owner (uid:gid)

ARGUMENT_SPEC = {
    "path": {"type": "path", "required": True},
    "state": {"type": "str", "choices": ["checked", "recorded"], "default": "checked"},
}


def entry_of(path: str, hashed: bool = True) -> dict[str, Any] | None:
    """What the record keeps of one name: a link's target; a file's sha256 (unless ``hashed`` is false: a file the
    record does not list is only named), size, mode and owner (uid:gid); None for anything else (a directory is
    walked, a device or socket is no file of a build)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return {"type": "link", "target": os.readlink(path)}
    if stat.S_ISREG(st.st_mode):
        entry = {"type": "file", "size": st.st_size, "mode": f"{stat.S_IMODE(st.st_mode):04o}",
                 "owner": f"{st.st_uid}:{st.st_gid}"}  # fmt: skip
        if hashed:
            entry["sha256"] = file_sha256(path)
        return entry
    return None


def _raise(error: OSError) -> None:
    raise error


def tree(root: str, hashed: Any = None) -> dict[str, dict[str, Any]]:
    """Every file and link below ``root`` by its path relative to it, the record files left out. Only the names in
    ``hashed`` are hashed when it is given (a check reads the files the record lists, not a user's files beside
    them). A directory that cannot be read raises OSError: a record or a check that left it out would be wrong."""
    found: dict[str, dict[str, Any]] = {}
    for directory, dirs, names in os.walk(root, onerror=_raise):
        dirs.sort()
        # A link to a directory is an entry of its own (os.walk lists it in dirs and does not follow it).
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            relative = os.path.relpath(os.path.join(directory, name), root)
            if relative in OWN_FILES:
                continue
            entry = entry_of(os.path.join(directory, name), hashed is None or relative in hashed)
            if entry is not None:
                found[relative] = entry
    return found


def differences(recorded: dict[str, dict[str, Any]], present: dict[str, dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Each recorded name that is missing or differs, in one line each; then the names only ``present`` has."""
    problems = []
    for name in sorted(recorded):
        want, have = recorded[name], present.get(name)
        if have is None:
            problems.append(f"{name}: missing")
        elif want.get("type") != have["type"]:
            problems.append(f"{name}: a {want.get('type')} in the record, now a {have['type']}")
        elif have["type"] == "link" and want.get("target") != have["target"]:
            problems.append(f"{name}: leads to {have['target']}, the record says {want.get('target')}")
        elif have["type"] == "file" and want.get("sha256") != have["sha256"]:
            problems.append(
                f"{name}: content differs from the record ({want.get('size')} bytes recorded, {have['size']} found)"
            )
        elif have["type"] == "file" and want.get("mode") != have["mode"]:
            problems.append(f"{name}: mode {have['mode']}, the record says {want.get('mode')}")
        elif have["type"] == "file" and want.get("owner") != have["owner"]:
            problems.append(f"{name}: owner (uid:gid) {have['owner']}, the record says {want.get('owner')}")
    return problems, sorted(set(present) - set(recorded))


def read_record(path: str) -> tuple[dict[str, dict[str, Any]] | None, str]:
    """The record's files, or None and why it cannot be used."""
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
    except FileNotFoundError:
        return None, f"no record of its files ({RECORD}): installed before rdmaforge recorded them, or removed"
    except (OSError, ValueError) as exc:
        return None, f"the record of its files ({RECORD}) cannot be read: {exc}"
    files = data.get("files") if isinstance(data, dict) else None
    if (
        not isinstance(files, dict)
        or data.get("format") != FORMAT
        or not all(isinstance(v, dict) for v in files.values())
    ):
        return None, f"the record of its files ({RECORD}) is not one this module writes"
    return files, ""


def watched(root: str, names: Any) -> list[str]:
    return [os.path.join(root, RECORD)] + [os.path.join(root, name) for name in sorted(names)]


def write_record(module: AnsibleModule, record_path: str, text: str) -> None:
    handle, temporary = tempfile.mkstemp(prefix=".rdmaforge-files.", dir=os.path.dirname(record_path))
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.rename(temporary, record_path)
    except OSError as exc:
        if os.path.exists(temporary):
            os.unlink(temporary)
        module.fail_json(msg=f"cannot write {record_path}: {exc.strerror or exc}")


def read_tree(module: AnsibleModule, root: str, hashed: Any = None) -> dict[str, dict[str, Any]]:
    try:
        return tree(root, hashed)
    except OSError as exc:
        module.fail_json(msg=f"cannot read the build under {root}: {exc}")
        raise  # fail_json exits; this line keeps type checkers sure of it


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    root, state = module.params["path"], module.params["state"]
    record_path = os.path.join(root, RECORD)
    if not os.path.isdir(root):
        if state == "recorded" and not module.check_mode:
            module.fail_json(msg=f"{root} is no directory: there is no unpacked build to record")
        module.exit_json(
            changed=state == "recorded",
            intact=False,
            extra=[],
            files=[record_path],
            problems=[f"{root} is not there (no directory)"],
        )
    if state == "recorded":
        present = read_tree(module, root)
        text = json.dumps({"format": FORMAT, "files": present}, indent=1, sort_keys=True) + "\n"
        try:
            with open(record_path) as handle:
                changed = handle.read() != text
        except (OSError, UnicodeDecodeError):
            changed = True
        if changed and not module.check_mode:
            write_record(module, record_path, text)
        module.exit_json(changed=changed, intact=True, problems=[], extra=[], files=watched(root, present))
    recorded, why = read_record(record_path)
    if recorded is None:
        present = read_tree(module, root, ())
        module.exit_json(changed=False, intact=False, problems=[why], extra=[], files=watched(root, present))
    present = read_tree(module, root, recorded)
    problems, extra = differences(recorded or {}, present)
    module.exit_json(changed=False, intact=not problems, problems=problems, extra=extra, files=watched(root, recorded))

if __name__ == "__main__":
    main()
