"""The module_cache callback keeps assembled module payloads across runs and never serves a stale one.

Real ansible-playbook runs with a module next to the playbook (library/): the first run fills a cache directory,
the second reuses it, and after the module's source changes the next run gets a new directory and runs the new
code.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_playbook

MODULE = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

def main():
    module = AnsibleModule(argument_spec={})
    module.exit_json(changed=False, answer="%s")

if __name__ == "__main__":
    main()
"""

PLAYBOOK = """---
- name: Ask the module next to this playbook
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run it
      answer: {}
      register: reply
    - name: Show what it said
      ansible.builtin.debug:
        msg: "answer={{ reply.answer }}"
"""


def write_module(library: Path, answer: str, mtime: float) -> None:
    path = library / "answer.py"
    path.write_text(MODULE % answer)
    os.utime(path, (mtime, mtime))


def run(playbook: Path, cache: Path) -> str:
    inventory = playbook.parent / "hosts.yml"
    proc = run_playbook(str(playbook), inventory=inventory, env={
        "RDMAFORGE_MODULE_CACHE": str(cache), "ANSIBLE_CACHE_PLUGIN": "memory"})  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


def test_payloads_are_reused_until_the_module_changes(tmp_path: Path) -> None:
    play_dir, cache = tmp_path / "play", tmp_path / "cache"
    library = play_dir / "library"
    library.mkdir(parents=True)
    (play_dir / "hosts.yml").write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
    )
    playbook = play_dir / "ask.yml"
    playbook.write_text(PLAYBOOK)
    write_module(library, "one", 1_700_000_000)

    assert "answer=one" in run(playbook, cache)
    first = sorted(cache.iterdir())
    assert len(first) == 1 and any(".answer-" in p.name for p in first[0].iterdir()), list(first[0].iterdir())

    assert "answer=one" in run(playbook, cache)
    assert sorted(cache.iterdir()) == first  # the same directory served the second run

    write_module(library, "two", 1_700_000_100)
    assert "answer=two" in run(playbook, cache)  # never the payload built from the old source
    assert len(list(cache.iterdir())) == 2
