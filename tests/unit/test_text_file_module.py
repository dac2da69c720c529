"""rdmaforge.cluster.text_file, run for real with ``ansible localhost -m``, and the bytes it writes compared with
what ansible.builtin.template and ansible.builtin.copy write from the same template and content (the roles moved
from those to text_file: a node converged before must see no change)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rdmaforge.paths import PROJECT_ROOT
from tests.unit.adhoc import PY38, run_module

PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_writes_the_content_with_its_mode_then_changes_nothing(tmp_path):
    dest = tmp_path / "nccl.conf"
    first = run_module("text_file", {"dest": str(dest), "content": "NCCL_DEBUG=INFO\n", "mode": "0640"})
    assert first.rc == 0, first.result
    assert first.result["changed"] is True and first.result["content_changed"] is True
    assert dest.read_bytes() == b"NCCL_DEBUG=INFO\n"
    assert mode_of(dest) == 0o640
    again = run_module("text_file", {"dest": str(dest), "content": "NCCL_DEBUG=INFO\n", "mode": "0640"})
    assert again.rc == 0, again.result
    assert again.result["changed"] is False and again.result["content_changed"] is False
    assert not [p.name for p in tmp_path.iterdir() if p.name != "nccl.conf"]  # no temporary file left behind


def test_check_mode_reports_the_change_and_the_diff_without_writing(tmp_path):
    dest = tmp_path / "hostfile"
    dest.write_text("node1 slots=8\n")
    run = run_module("text_file", {"dest": str(dest), "content": "node1 slots=8\nnode2 slots=8\n"}, "--check", "--diff")
    assert run.rc == 0, run.result
    assert run.result["changed"] is True
    assert "+node2 slots=8" in run.before_result
    assert dest.read_text() == "node1 slots=8\n"
    created = run_module("text_file", {"dest": str(tmp_path / "new"), "content": "x\n"}, "--check")
    assert created.result["changed"] is True
    assert not (tmp_path / "new").exists()


def test_a_mode_change_alone_is_a_change_and_shows_in_the_diff(tmp_path):
    dest = tmp_path / "memlock.conf"
    dest.write_text("* - memlock unlimited\n")
    dest.chmod(0o600)
    run = run_module("text_file", {"dest": str(dest), "content": "* - memlock unlimited\n", "mode": "0644"}, "--diff")
    assert run.rc == 0, run.result
    assert run.result["changed"] is True and run.result["content_changed"] is False
    assert '"mode": "0644"' in run.before_result
    assert mode_of(dest) == 0o644


def test_refuses_a_missing_directory_unless_checking_and_a_directory_as_dest(tmp_path):
    missing = run_module("text_file", {"dest": str(tmp_path / "nowhere" / "f"), "content": "x"})
    assert missing.rc != 0
    assert f"the directory {tmp_path / 'nowhere'} does not exist" in missing.result["msg"]
    # In check mode the directory may be one an earlier task would create (a new node): the file would be created.
    would = run_module("text_file", {"dest": str(tmp_path / "nowhere" / "f"), "content": "x\n"}, "--check", "--diff")
    assert would.rc == 0 and would.result["changed"] is True, would.result
    assert "+x" in would.before_result
    assert not (tmp_path / "nowhere").exists()
    directory = run_module("text_file", {"dest": str(tmp_path), "content": "x"})
    assert directory.rc != 0
    assert "is a directory" in directory.result["msg"]


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
def test_runs_with_python38_on_the_target(tmp_path):
    dest = tmp_path / "f"
    run = run_module("text_file", {"dest": str(dest), "content": "päth\n", "mode": "0644"}, python=PY38)
    assert run.rc == 0, run.result
    assert dest.read_text(encoding="utf-8") == "päth\n"


TEMPLATE = """# {{ ansible_managed }}
{% for name in names %}
{{ name }}={{ loop.index }}
{% endfor %}
{% if extra %}
EXTRA=1
{% endif %}
last line"""


@pytest.mark.parametrize("ending", ["\n", "", "\n\n"])
def test_same_bytes_as_the_builtin_template_and_copy_modules(tmp_path, ending):
    """The roles render templates with lookup('ansible.builtin.template') into text_file: the bytes must be what
    ansible.builtin.template wrote (trim_blocks, ansible_managed, the trailing newline), and copy's content too."""
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "t.j2").write_text(TEMPLATE + ending)
    content = "[Network]\nManageForeignRoutes=no\n"
    tasks = [
        {
            "name": "builtin template",
            "ansible.builtin.template": {"src": "t.j2", "dest": str(tmp_path / "by-template")},
        },
        {
            "name": "text_file from the template lookup",
            "rdmaforge.cluster.text_file": {
                "dest": str(tmp_path / "by-text-file"),
                "content": "{{ lookup('ansible.builtin.template', 't.j2') }}",
            },
        },
        {"name": "builtin copy", "ansible.builtin.copy": {"content": content, "dest": str(tmp_path / "by-copy")}},
        {"name": "text_file", "rdmaforge.cluster.text_file": {"content": content, "dest": str(tmp_path / "copy-tf")}},
    ]
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {"names": ["a", "b"], "extra": True}, "tasks": tasks}]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"), "ANSIBLE_CACHE_PLUGIN": "memory"}
    argv = [
        str(PLAYBOOK),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        json.dumps({"ansible_python_interpreter": sys.executable}),
        str(playbook),
    ]
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    by_template = (tmp_path / "by-template").read_bytes()
    assert b"a=1\nb=2\nEXTRA=1\nlast line" in by_template  # the template did render
    assert (tmp_path / "by-text-file").read_bytes() == by_template
    assert (tmp_path / "copy-tf").read_bytes() == (tmp_path / "by-copy").read_bytes() == content.encode()


# --- append_lines: a record that other runs add to (os_packages' packages-added) ----------------------------------


def run_play(tmp_path: Path, tasks: list[dict], *extra: str) -> subprocess.CompletedProcess[str]:
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"), "ANSIBLE_CACHE_PLUGIN": "memory"}
    argv = [str(PLAYBOOK), "-i", "localhost,", "-c", "local",
            "-e", json.dumps({"ansible_python_interpreter": sys.executable}), str(playbook), *extra]  # fmt: skip
    return subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("before", [None, "", "openmpi-bin\n", "openmpi-bin", "binutils\nopenmpi-bin\n"])
def test_append_lines_writes_what_a_lineinfile_loop_writes(tmp_path, before):
    """os_packages' record moved from one lineinfile run per package to one text_file run: the same bytes for a
    missing file, an empty one, one without its last newline and one that already holds some of the lines."""
    names = ["binutils", "ibverbs-utils", "binutils", "perftest"]
    for name in ("by-lineinfile", "by-text-file"):
        if before is not None:
            (tmp_path / name).write_text(before)
    tasks = [
        {"name": "lineinfile loop", "loop": names,
         "ansible.builtin.lineinfile": {"path": str(tmp_path / "by-lineinfile"), "line": "{{ item }}", "create": True,
                                        "mode": "0644"}},
        {"name": "text_file", "rdmaforge.cluster.text_file": {"dest": str(tmp_path / "by-text-file"),
                                                               "append_lines": names, "mode": "0644"}},
    ]  # fmt: skip
    proc = run_play(tmp_path, tasks)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    written = (tmp_path / "by-text-file").read_bytes()
    assert written == (tmp_path / "by-lineinfile").read_bytes()
    assert written.decode().splitlines()[-1] == "perftest" and mode_of(tmp_path / "by-text-file") == 0o644


def test_append_lines_then_changes_nothing_and_checks_without_writing(tmp_path):
    dest = tmp_path / "packages-added"
    first = run_module("text_file", {"dest": str(dest), "append_lines": ["perftest", "binutils"], "mode": "0644"})
    assert first.rc == 0 and first.result["changed"] is True, first.result
    assert dest.read_text() == "perftest\nbinutils\n"
    again = run_module("text_file", {"dest": str(dest), "append_lines": ["binutils"], "mode": "0644"})
    assert again.result["changed"] is False and dest.read_text() == "perftest\nbinutils\n"
    check = run_module("text_file", {"dest": str(dest), "append_lines": ["infiniband-diags"]}, "--check", "--diff")
    assert check.rc == 0 and check.result["changed"] is True and dest.read_text() == "perftest\nbinutils\n"
    assert "+infiniband-diags" in check.before_result and "-binutils" not in check.before_result


def test_append_lines_refuses_content_too_and_a_line_with_a_newline(tmp_path):
    both = run_module("text_file", {"dest": str(tmp_path / "f"), "content": "x\n", "append_lines": ["y"]})
    assert both.rc != 0 and "mutually exclusive" in both.result["msg"] and "append_lines" in both.result["msg"]
    neither = run_module("text_file", {"dest": str(tmp_path / "f")})
    assert neither.rc != 0 and "content" in neither.result["msg"] and "append_lines" in neither.result["msg"]
    two = run_module("text_file", {"dest": str(tmp_path / "f"), "append_lines": ["a\nb"]})
    assert two.rc != 0 and two.result["msg"] == "append_lines entries are single lines; 'a\\nb' holds a line break"
    assert not (tmp_path / "f").exists()


def test_create_directory_makes_the_missing_parents_and_check_mode_does_not(tmp_path):
    dest = tmp_path / "var" / "lib" / "rdmaforge" / "packages-added"
    check = run_module("text_file", {"dest": str(dest), "append_lines": ["binutils"], "create_directory": True},
                       "--check")  # fmt: skip
    assert check.rc == 0 and check.result["changed"] is True and not (tmp_path / "var").exists()
    run = run_module("text_file", {"dest": str(dest), "append_lines": ["binutils"], "create_directory": True})
    assert run.rc == 0 and run.result["changed"] is True, run.result
    assert dest.read_text() == "binutils\n" and mode_of(dest.parent) == 0o755
