"""rdmaforge.cluster.text_file, run for real by Ansible on localhost, and the bytes it writes compared with what
ansible.builtin.template and ansible.builtin.copy write from the same template and content (the roles moved from
those to text_file: a node converged before must see no change). The tests share their ansible-playbook runs
(tests/unit/shared_runs.py): each yields the tasks it needs run.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from tests.unit.adhoc import PY38
from tests.unit.shared_runs import Task, module_task, shared_runs


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def text_file(args: dict[str, Any], *, check: bool = False, diff: bool = False, python: Path | None = None) -> Task:
    """The task ``ansible localhost -m rdmaforge.cluster.text_file -a '<args>'`` runs."""
    return module_task("text_file", args, check=check, diff=diff, python=python)


@shared_runs
def test_writes_the_content_with_its_mode_then_changes_nothing(case):
    dest = case / "nccl.conf"
    first = yield text_file({"dest": str(dest), "content": "NCCL_DEBUG=INFO\n", "mode": "0640"})
    assert not first.failed, first.result
    assert first.result["changed"] is True and first.result["content_changed"] is True
    assert dest.read_bytes() == b"NCCL_DEBUG=INFO\n"
    assert mode_of(dest) == 0o640
    again = yield text_file({"dest": str(dest), "content": "NCCL_DEBUG=INFO\n", "mode": "0640"})
    assert not again.failed, again.result
    assert again.result["changed"] is False and again.result["content_changed"] is False
    assert not [p.name for p in case.iterdir() if p.name != "nccl.conf"]  # no temporary file left behind


@shared_runs
def test_check_mode_reports_the_change_and_the_diff_without_writing(case):
    dest = case / "hostfile"
    dest.write_text("node1 slots=8\n")
    run, created = yield [
        text_file({"dest": str(dest), "content": "node1 slots=8\nnode2 slots=8\n"}, check=True, diff=True),
        text_file({"dest": str(case / "new"), "content": "x\n"}, check=True),
    ]
    assert not run.failed, run.result
    assert run.result["changed"] is True
    assert "+node2 slots=8" in run.printed
    assert dest.read_text() == "node1 slots=8\n"
    assert created.result["changed"] is True
    assert not (case / "new").exists()


@shared_runs
def test_a_mode_change_alone_is_a_change_and_shows_in_the_diff(case):
    dest = case / "memlock.conf"
    dest.write_text("* - memlock unlimited\n")
    dest.chmod(0o600)
    run = yield text_file({"dest": str(dest), "content": "* - memlock unlimited\n", "mode": "0644"}, diff=True)
    assert not run.failed, run.result
    assert run.result["changed"] is True and run.result["content_changed"] is False
    assert '"mode": "0644"' in run.printed
    assert mode_of(dest) == 0o644


@shared_runs
def test_refuses_a_missing_directory_unless_checking_and_a_directory_as_dest(case):
    missing, would, directory = yield [
        text_file({"dest": str(case / "nowhere" / "f"), "content": "x"}),
        # In check mode the directory may be one an earlier task would create (a new node): the file would be
        # created.
        text_file({"dest": str(case / "nowhere" / "f"), "content": "x\n"}, check=True, diff=True),
        text_file({"dest": str(case), "content": "x"}),
    ]
    assert missing.failed
    assert f"the directory {case / 'nowhere'} does not exist" in missing.result["msg"]
    assert not would.failed and would.result["changed"] is True, would.result
    assert "+x" in would.printed
    assert not (case / "nowhere").exists()
    assert directory.failed
    assert "is a directory" in directory.result["msg"]


@pytest.mark.skipif(not PY38.exists(), reason=f"{PY38} not installed (set RDMAFORGE_PY38)")
@shared_runs
def test_runs_with_python38_on_the_target(case):
    dest = case / "f"
    run = yield text_file({"dest": str(dest), "content": "päth\n", "mode": "0644"}, python=PY38)
    assert not run.failed, run.result
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
@shared_runs
def test_same_bytes_as_the_builtin_template_and_copy_modules(case, ending):
    """The roles render templates with lookup('ansible.builtin.template') into text_file: the bytes must be what
    ansible.builtin.template wrote (trim_blocks, ansible_managed, the trailing newline), and copy's content too."""
    template = case / "templates" / "t.j2"
    template.parent.mkdir()
    template.write_text(TEMPLATE + ending)
    content = "[Network]\nManageForeignRoutes=no\n"
    template_vars = {"names": ["a", "b"], "extra": True}
    runs = yield [
        {
            "name": "builtin template",
            "ansible.builtin.template": {"src": str(template), "dest": str(case / "by-template")},
            "vars": template_vars,
        },
        {
            "name": "text_file from the template lookup",
            "rdmaforge.cluster.text_file": {
                "dest": str(case / "by-text-file"),
                "content": f"{{{{ lookup('ansible.builtin.template', '{template}') }}}}",
            },
            "vars": template_vars,
        },
        {"name": "builtin copy", "ansible.builtin.copy": {"content": content, "dest": str(case / "by-copy")}},
        {"name": "text_file", "rdmaforge.cluster.text_file": {"content": content, "dest": str(case / "copy-tf")}},
    ]
    assert not any(run.failed for run in runs), runs
    by_template = (case / "by-template").read_bytes()
    assert b"a=1\nb=2\nEXTRA=1\nlast line" in by_template  # the template did render
    assert (case / "by-text-file").read_bytes() == by_template
    assert (case / "copy-tf").read_bytes() == (case / "by-copy").read_bytes() == content.encode()


# --- append_lines: a record that other runs add to (os_packages' packages-added) ----------------------------------


@pytest.mark.parametrize("before", [None, "", "openmpi-bin\n", "openmpi-bin", "binutils\nopenmpi-bin\n"])
@shared_runs
def test_append_lines_writes_what_a_lineinfile_loop_writes(case, before):
    """os_packages' record moved from one lineinfile run per package to one text_file run: the same bytes for a
    missing file, an empty one, one without its last newline and one that already holds some of the lines."""
    names = ["binutils", "ibverbs-utils", "binutils", "perftest"]
    for name in ("by-lineinfile", "by-text-file"):
        if before is not None:
            (case / name).write_text(before)
    runs = yield [
        {"name": "lineinfile loop", "loop": names,
         "ansible.builtin.lineinfile": {"path": str(case / "by-lineinfile"), "line": "{{ item }}", "create": True,
                                        "mode": "0644"}},
        {"name": "text_file", "rdmaforge.cluster.text_file": {"dest": str(case / "by-text-file"),
                                                               "append_lines": names, "mode": "0644"}},
    ]  # fmt: skip
    assert not any(run.failed for run in runs), runs
    written = (case / "by-text-file").read_bytes()
    assert written == (case / "by-lineinfile").read_bytes()
    assert written.decode().splitlines()[-1] == "perftest" and mode_of(case / "by-text-file") == 0o644


@shared_runs
def test_append_lines_then_changes_nothing_and_checks_without_writing(case):
    dest = case / "packages-added"
    # Run one after the other in one step: the file after the first run is checked once the second changed nothing.
    first, again = yield [
        text_file({"dest": str(dest), "append_lines": ["perftest", "binutils"], "mode": "0644"}),
        text_file({"dest": str(dest), "append_lines": ["binutils"], "mode": "0644"}),
    ]
    assert not first.failed and first.result["changed"] is True, first.result
    assert again.result["changed"] is False and dest.read_text() == "perftest\nbinutils\n"
    check = yield text_file({"dest": str(dest), "append_lines": ["infiniband-diags"]}, check=True, diff=True)
    assert not check.failed and check.result["changed"] is True and dest.read_text() == "perftest\nbinutils\n"
    assert "+infiniband-diags" in check.printed and "-binutils" not in check.printed


@shared_runs
def test_append_lines_refuses_content_too_and_a_line_with_a_newline(case):
    both, neither, two = yield [
        text_file({"dest": str(case / "f"), "content": "x\n", "append_lines": ["y"]}),
        text_file({"dest": str(case / "f")}),
        text_file({"dest": str(case / "f"), "append_lines": ["a\nb"]}),
    ]
    assert both.failed and "mutually exclusive" in both.result["msg"] and "append_lines" in both.result["msg"]
    assert neither.failed and "content" in neither.result["msg"] and "append_lines" in neither.result["msg"]
    assert two.failed and two.result["msg"] == "append_lines entries are single lines; 'a\\nb' holds a line break"
    assert not (case / "f").exists()


@shared_runs
def test_create_directory_makes_the_missing_parents_and_check_mode_does_not(case):
    dest = case / "var" / "lib" / "rdmaforge" / "packages-added"
    check = yield text_file({"dest": str(dest), "append_lines": ["binutils"], "create_directory": True}, check=True)
    assert not check.failed and check.result["changed"] is True and not (case / "var").exists()
    run = yield text_file({"dest": str(dest), "append_lines": ["binutils"], "create_directory": True})
    assert not run.failed and run.result["changed"] is True, run.result
    assert dest.read_text() == "binutils\n" and mode_of(dest.parent) == 0o755


@shared_runs
def test_append_lines_keeps_bytes_that_are_not_utf8_and_lines_end_at_newlines_only(case):
    """Review round 37c: the file was decoded with errors='replace' and encoded again (b'caf\\xe9' became the
    replacement character's three bytes, unseen in the diff, which decoded both sides alike), and an entry holding a
    vertical tab was never found again (str.splitlines splits there), so every run appended another copy."""
    latin1, tabbed = case / "latin1.conf", case / "tabbed.conf"
    latin1.write_bytes(b"caf\xe9\n")
    first, vt = yield [text_file({"dest": str(latin1), "append_lines": ["new"]}),
                       text_file({"dest": str(tabbed), "append_lines": ["x\x0bsep"]})]  # fmt: skip
    assert not first.failed and not vt.failed, (first.result, vt.result)
    assert latin1.read_bytes() == b"caf\xe9\nnew\n"
    again, vt_again = yield [text_file({"dest": str(latin1), "append_lines": ["new"]}),
                             text_file({"dest": str(tabbed), "append_lines": ["x\x0bsep"]})]  # fmt: skip
    assert again.result["changed"] is False and vt_again.result["changed"] is False, (again.result, vt_again.result)
    assert tabbed.read_bytes() == b"x\x0bsep\n"


@shared_runs
def test_an_owner_the_host_lacks_or_an_unreadable_dest_writes_nothing(case):
    """An unknown owner failed only after the new content was written (the task half-applied); a dest that cannot be
    read (here a symlink loop) raised a traceback."""
    dest, loop = case / "owned.conf", case / "loop"
    loop.symlink_to(loop)
    owner, unreadable = yield [
        text_file({"dest": str(dest), "content": "x\n", "owner": "rdmaforge-no-such-user"}),
        text_file({"dest": str(loop), "content": "x\n"}),
    ]
    assert owner.failed and owner.result["msg"] == (f"dest={dest}: owner=rdmaforge-no-such-user is not a user of this "
                                                    "host; nothing was written"), owner.result  # fmt: skip
    assert not dest.exists()
    assert unreadable.failed and unreadable.result["msg"].startswith(f"dest={loop} cannot be read ("), unreadable.result
    assert "Traceback" not in str(unreadable.result)
