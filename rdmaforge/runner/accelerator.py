"""The optional mitogen accelerator (`--mitogen`): the same playbooks under mitogen's ``mitogen_linear`` strategy.

mitogen keeps one Python interpreter per node for the whole run and runs modules inside it, instead of one SSH
command and one fresh interpreter per task and node. On the lab it roughly halves a first converge (issue 19;
README, "Converge speed"); a no-op run, one module call per node, is slower (starting mitogen on every node costs
more than the call it replaces). `rdmaforge provision` takes --mitogen: the one command whose runs under mitogen are
tested and measured. The plain strategy stays the default, so mitogen is an extra
(rdmaforge's ``mitogen`` extra, or mitogen itself), never required.
ansible-core warns that third-party strategy plugins may stop working in a future release: that warning stays in
the run's output, because it is true.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rdmaforge.errors import install_hint

#: mitogen's strategy that keeps Ansible's linear order (every host finishes a task before the next starts).
STRATEGY = "mitogen_linear"


class NotInstalled(Exception):
    """--mitogen was asked for, but this Python cannot load mitogen's Ansible strategy plugins."""


def strategy_dir() -> Path:
    """The directory of mitogen's Ansible strategy plugins in this Python (ANSIBLE_STRATEGY_PLUGINS)."""
    try:
        spec = importlib.util.find_spec("ansible_mitogen")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        plugins = Path(location) / "plugins" / "strategy"
        if (plugins / f"{STRATEGY}.py").is_file():
            return plugins
    # the hint reads rdmaforge's metadata (tens of ms): only here, never at every command's start
    raise NotInstalled(f"--mitogen: mitogen is not installed for this Python; {install_hint('mitogen')}, or leave "
                       "--mitogen out")  # fmt: skip


def environment(enabled: bool) -> dict[str, str]:
    """The variables that make ansible-playbook use mitogen (nothing when ``enabled`` is false)."""
    if not enabled:
        return {}
    return {"ANSIBLE_STRATEGY_PLUGINS": str(strategy_dir()), "ANSIBLE_STRATEGY": STRATEGY}
