"""rdmaforge.cluster installed without the rdmaforge Python package on the controller (ansible-galaxy collection
install alone): its filters' logic lives in that package. Ansible printed one "Skipping filter plugins" warning per
filter file and then "No filter named ...", with no word of what to install. Now each filter is found and fails the
task that uses it with what is missing and how to install it, and nothing is printed before that."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaforge.collection import FQCN, ensure_dev_tree

#: Runs ansible-playbook with the rdmaforge package made unimportable, as on a controller that never installed it
#: (None in sys.modules: "import rdmaforge" raises ModuleNotFoundError; the forked workers inherit it).
WITHOUT_PACKAGE = (
    "import sys; sys.modules['rdmaforge'] = None; sys.argv[0] = 'ansible-playbook';"
    " from ansible.cli.playbook import main; main()"
)
#: Two filters from two filter files (rdmaforge_fabrics.py, rdmaforge_core.py), each in a task of its own.
PLAYBOOK = f"""\
- name: Filters of the collection
  hosts: localhost
  gather_facts: false
  tasks:
    - name: A filter of one file
      ansible.builtin.debug:
        msg: "{{{{ 'erdma' | {FQCN}.rdmaforge_default_net_plugin }}}}"
      ignore_errors: true
    - name: A filter of another file
      ansible.builtin.debug:
        msg: "{{{{ ['rdma-core'] | {FQCN}.rdmaforge_package_query_argv('apt') }}}}"
"""


def run_playbook(tmp_path: Path, *prefix: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "play.yml").write_text(PLAYBOOK, encoding="utf-8")
    (tmp_path / "ansible.cfg").write_text("[defaults]\n", encoding="utf-8")  # none of the checkout's callbacks
    env = {**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_COLLECTIONS_PATH": str(ensure_dev_tree()), "ANSIBLE_LOCALHOST_WARNING": "false"}  # fmt: skip
    command = [*prefix, "play.yml"] if prefix else [str(Path(sys.executable).parent / "ansible-playbook"), "play.yml"]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("package", ["installed", "missing"])
def test_filters_without_the_package_fail_their_task_with_the_install_hint(tmp_path: Path, package: str) -> None:
    prefix = (sys.executable, "-c", WITHOUT_PACKAGE) if package == "missing" else ()
    proc = run_playbook(tmp_path, *prefix)
    output = proc.stdout + proc.stderr
    assert "Skipping filter plugins" not in output and "No filter named" not in output, output
    if package == "installed":  # the same playbook, as a control: both filters answer
        assert proc.returncode == 0, output
        assert '"msg": "aiacc"' in output and "dpkg-query" in output, output
        return
    assert proc.returncode == 2, output
    for name in ("rdmaforge_default_net_plugin", "rdmaforge_package_query_argv"):
        line = next((x for x in output.splitlines() if x.startswith("fatal:") and name in x), "")
        assert f"{FQCN}.{name} cannot run" in line, output
        assert "cannot import rdmaforge" in line and "from a wheel built by that same Python" in line, line
