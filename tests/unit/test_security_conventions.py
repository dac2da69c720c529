"""Security conventions every role keeps, checked over all roles so that a future copy of a defect fails too.

Scratch files and directories never live in a world-writable directory under a predictable name (/tmp,
/var/tmp, /dev/shm): another local user can create the name first, as a directory of their own or a symlink, and
then edit what root compiles or writes. A private directory is made with ``ansible.builtin.tempfile`` (mkdtemp,
0700, an unpredictable name) or lives under a root-owned directory (/var/lib/rdmaforge, /opt/rdmaforge).
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (PROJECT / "roles").iterdir() if p.is_dir())
#: What Ansible reads and writes on the nodes: tasks, handlers, defaults, vars, templates, scripts, argument specs.
NODE_FILE_SUFFIXES = {".yml", ".yaml", ".j2", ".sh"}
#: A path in a world-writable directory, as a whole path word (not e.g. /opt/tmp or /var/tmpfiles.d).
WORLD_WRITABLE_PATH = re.compile(r"(?<![\w./~-])(?:/var/tmp|/tmp|/dev/shm)(?=/|\b)(?![\w.-])")


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a file without their comments (a ``#`` that starts a line or follows a space)."""
    lines = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        code = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        if code.strip():
            lines.append((number, code))
    return lines


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_no_role_works_in_a_world_writable_directory(role: Path) -> None:
    found = [
        f"{path.relative_to(PROJECT)}:{number}: {code.strip()}"
        for path in sorted(role.rglob("*"))
        if path.is_file() and path.suffix in NODE_FILE_SUFFIXES
        for number, code in _code_lines(path)
        if WORLD_WRITABLE_PATH.search(code)
    ]
    assert not found, "paths in a world-writable directory:\n" + "\n".join(found)


def test_the_pattern_finds_world_writable_paths_and_only_them() -> None:
    for text in ("/tmp/rdmaforge-x", "dest: /var/tmp/build", '"/dev/shm/x"', "'/tmp'", "{{ '/var/tmp/a' }}"):
        assert WORLD_WRITABLE_PATH.search(text), text
    for text in ("/var/lib/rdmaforge/build", "/opt/tmp", "/etc/tmpfiles.d/x.conf", "~/tmp/x", "./tmp", "mountPath"):
        assert not WORLD_WRITABLE_PATH.search(text), text


def test_ssh_control_sockets_are_not_in_a_shared_directory() -> None:
    """Another user who creates the control directory first can replace the sockets every SSH session goes through."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(PROJECT / "ansible.cfg")
    directory = config.get("ssh_connection", "control_path_dir", fallback="~/.ansible/cp")
    assert not WORLD_WRITABLE_PATH.match(directory), directory
    assert directory.startswith("~/"), f"control_path_dir={directory}: not private to the controller's user"
