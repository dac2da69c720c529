"""Import this collection's filter plugins once, in the controller process, before any task runs.

Ansible templates in a worker process forked per task and host. A worker that meets a filter named
``rdmaforge.cluster.X`` loads the collection's filter files (and the ``rdmaforge`` modules they import) unless they
are already in ``sys.modules``; loaded in the worker, they are lost when it exits, so every task paid for them
again (about a quarter of the controller's CPU in a converge, measured with py-spy). Imported here, before the
first fork, every worker inherits them.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ansible.plugins.callback import CallbackBase
from ansible.utils.display import Display

DOCUMENTATION = r"""
name: filter_preload
type: aggregate
short_description: import rdmaforge.cluster's filter plugins once in the controller, before workers fork
description:
  - At the start of a playbook run, imports every filter plugin file of the rdmaforge.cluster collection (and so the
    rdmaforge modules they use) in the controller process, under the module names Ansible's plugin loader uses.
  - Workers forked for each task and host then find them loaded instead of importing them again. Changes no result
    and prints nothing; a filter file that cannot be imported is left for the task that uses it to report.
  - A filter file may define C(preload(filter_dir)), called here too, to load what its filters read from files
    (the preflight filters parse every role's argument spec this way once, not once per node).
"""

#: The package Ansible's loader imports a collection filter file under (ansible.plugins.loader.Jinja2Loader).
FILTER_PACKAGE = "ansible_collections.rdmaforge.cluster.plugins.filter"

display = Display()


def filter_module_names(filter_dir: Path) -> list[str]:
    """The Python module names of the filter plugin files in ``filter_dir`` (YAML documentation files left out)."""
    return sorted(f"{FILTER_PACKAGE}.{path.stem}" for path in filter_dir.glob("*.py") if path.stem != "__init__")


def preload(names: list[str], filter_dir: Path | None = None) -> None:
    """Import ``names``; one that fails is left for the task that uses it to report why. A filter file that
    defines ``preload(filter_dir)`` gets it called too, to load what its filters read (the role specs)."""
    for name in names:
        try:
            module = importlib.import_module(name)
            hook = getattr(module, "preload", None)
            if callable(hook) and filter_dir is not None:
                hook(filter_dir)
        except Exception as exc:  # noqa: BLE001 - any error is reported by the task that needs the filter
            display.vvv(f"filter_preload: {name} not preloaded: {exc}")


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible-core ships no type information
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "filter_preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook: Any) -> None:
        try:
            package = importlib.import_module(FILTER_PACKAGE)
        except ImportError as exc:
            display.vvv(f"filter_preload: {FILTER_PACKAGE} not found: {exc}")
            return
        for directory in package.__path__:  # the collection's plugins/filter, wherever it is installed
            preload(filter_module_names(Path(directory)), Path(directory))
