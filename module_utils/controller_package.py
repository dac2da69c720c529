"""What rdmaforge.cluster's filters answer when the controller's Python cannot import the ``rdmaforge`` package.

The filters are thin: their logic is in the ``rdmaforge`` package, which the wheel installs on the controller. A
collection installed without it made Ansible print one "Skipping filter plugins" warning per filter file and then
"No filter named ...", with no word of what to install. A filter file that cannot import the package hands its
``filters()`` over to ``unavailable_filters`` instead: every filter of the collection is still found, and using one
fails that task with the install hint. Controller only (never shipped to a target); imports nothing of rdmaforge.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ansible.errors import AnsibleFilterError


def install_hint(error: ImportError, name: str) -> str:
    """The message a filter that cannot run gives: what is missing, in which Python, and what to install."""
    return (
        f"rdmaforge.cluster.{name} cannot run: the Python that runs Ansible ({sys.executable}) cannot import"
        f" {error.name or 'rdmaforge'} ({error}). The collection's filters need the rdmaforge package on the"
        " controller: install it into that Python, from a wheel built by that same Python (`pip wheel --no-deps .` in"
        " an rdmaforge checkout: the wheel carries a compiled accelerator, so it is made per Python version); the"
        " wheel carries this collection too."
    )


def unavailable_filters(error: ImportError, plugin_file: str) -> dict[str, Callable[..., Any]]:
    """A filter for each filter the collection documents (a ``<name>.yml`` beside ``plugin_file``), each failing
    with ``install_hint``. Every filter file answers with the whole set, so none is missing whichever is read."""

    def unavailable(name: str) -> Callable[..., NoReturn]:
        def fail(*_args: Any, **_kwargs: Any) -> NoReturn:
            raise AnsibleFilterError(install_hint(error, name))

        return fail

    return {path.stem: unavailable(path.stem) for path in Path(plugin_file).parent.glob("*.yml")}
