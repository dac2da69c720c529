"""The filter_preload callback imports every filter file of the collection in the controller, under the module
names Ansible's plugin loader gives them, so that workers forked per task find them loaded.

Checked in a fresh Python with the collection on Ansible's path, the way ansible-playbook loads it: after the
callback's start hook, each filter file in filter_plugins/ is in sys.modules, and a lookup through Ansible's own
filter loader imports nothing new (the worker's cost the callback removes).
"""

from __future__ import annotations

import json
import subprocess
import sys

from rdmaforge.paths import PROJECT_ROOT

PROBE = """
import json, sys
from ansible.plugins.loader import callback_loader, filter_loader, init_plugin_loader
init_plugin_loader([sys.argv[1]])
callback = callback_loader.get("rdmaforge.cluster.filter_preload")
callback.v2_playbook_on_start(None)
before = set(sys.modules)
filter_loader.get_with_context("rdmaforge.cluster.rdmaforge_installed_versions")
loaded = sorted(m for m in sys.modules if m.startswith("ansible_collections.rdmaforge.cluster.plugins.filter."))
print(json.dumps({"loaded": loaded, "new": sorted(set(sys.modules) - before)}))
"""


def test_every_filter_file_is_imported_before_any_task() -> None:
    collections = PROJECT_ROOT / "build" / "collections"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(collections)], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    files = sorted(p.stem for p in (PROJECT_ROOT / "filter_plugins").glob("*.py"))
    assert files and result["loaded"] == [f"ansible_collections.rdmaforge.cluster.plugins.filter.{f}" for f in files]
    assert not [m for m in result["new"] if "rdmaforge" in m], result["new"]


SPECS_PROBE = """
import json, sys
from pathlib import Path
from ansible.plugins.loader import callback_loader, filter_loader, init_plugin_loader
init_plugin_loader([sys.argv[1]])
from rdmaforge import inventory_checks
callback_loader.get("rdmaforge.cluster.filter_preload").v2_playbook_on_start(None)
parsed = inventory_checks._main_options.cache_info().misses
roles = Path(sys.argv[1]) / "ansible_collections" / "rdmaforge" / "cluster" / "roles"
specs = filter_loader.get_with_context("rdmaforge.cluster.rdmaforge_role_argument_specs").object.j2_function(str(roles))
print(json.dumps({"parsed": parsed, "after": inventory_checks._main_options.cache_info().misses,
                  "owners": len(specs["owners"])}))
"""


def test_the_role_specs_are_parsed_before_any_worker_forks() -> None:
    """Preflight's one validation per node reads every role's spec: the callback parses them in the controller,
    so a worker's filter call parses none."""
    collections = PROJECT_ROOT / "build" / "collections"
    proc = subprocess.run([sys.executable, "-c", SPECS_PROBE, str(collections)], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    spec_files = list((PROJECT_ROOT / "roles").glob("*/meta/argument_specs.yml"))
    assert result["parsed"] == len(spec_files)
    assert result["after"] == result["parsed"]
    assert result["owners"] > 0


NAMES_PROBE = """
import json, sys
from ansible.plugins.loader import callback_loader, init_plugin_loader
init_plugin_loader([sys.argv[1]])
from rdmaforge import inventory_checks
callback_loader.get("rdmaforge.cluster.filter_preload").v2_playbook_on_start(None)
print(json.dumps({"read": inventory_checks._variable_names.cache_info().currsize}))
"""


def test_the_variable_names_are_left_to_the_one_task_that_reads_them() -> None:
    """The misspelling check's names (every role, playbook and module read, ~0.2 s of CPU) serve only preflight's
    run_once inventory report, one worker: read in the controller, they cost every run of every playbook that."""
    collections = PROJECT_ROOT / "build" / "collections"
    proc = subprocess.run([sys.executable, "-c", NAMES_PROBE, str(collections)], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"read": 0}
    report = (PROJECT_ROOT / "roles" / "preflight" / "tasks" / "inventory.yml").read_text()
    assert "rdmaforge.cluster.rdmaforge_inventory_report(" in report and "run_once: true" in report
