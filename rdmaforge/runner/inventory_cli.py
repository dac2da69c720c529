"""``python -m rdmaforge.runner.inventory_cli ARGS``: ``ansible-inventory ARGS``, which also writes each error,
warning and deprecation message Ansible displays, whole, as one JSON line ``{"kind", "message"}`` to the file that
``MESSAGES_FILE`` names.

ansible-inventory loads no callback plugin, so no ansible-runner event ever carries its messages. This records them
the way ansible-runner's display callback makes its ``error`` and ``warning`` events (it wraps ``Display``'s
methods): a message is an error because Ansible displayed it through ``Display.error``, not because a line of stderr
looks like one. An inventory script's stderr, which Ansible shows inside a warning, can print ``[ERROR]: ...``: it
stays part of that warning, never taken for the cause (:func:`rdmaforge.runner.inventory_list.ansible_error`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

#: The environment variable naming the file the messages are appended to (JSON lines).
MESSAGES_FILE = "RDMAFORGE_ANSIBLE_MESSAGES_FILE"
#: Display's methods whose messages are recorded, and the kind each gives them.
KINDS = {"error": "error", "warning": "warning", "error_as_warning": "warning", "deprecated": "deprecation"}


def record_messages(display_class: Any, path: str) -> None:
    """Wrap ``display_class`` (ansible.utils.display.Display) so that what its ``KINDS`` methods display is also
    appended to ``path``: whole messages, as Ansible formatted them, with their kind."""
    kinds: list[str] = []  # the methods being run, innermost last: what Display.display shows then is of that kind

    def recorded(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            kinds.append(KINDS[name])
            try:
                return method(self, *args, **kwargs)
            finally:
                kinds.pop()

        return wrapper

    display: Callable[..., Any] = display_class.display

    @functools.wraps(display)
    def recorded_display(self: Any, msg: Any, *args: Any, **kwargs: Any) -> Any:
        if kinds:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"kind": kinds[-1], "message": str(msg)}) + "\n")
        return display(self, msg, *args, **kwargs)

    for name in KINDS:
        setattr(display_class, name, recorded(name, getattr(display_class, name)))
    display_class.display = recorded_display


def main(argv: list[str]) -> int:
    from ansible.cli.inventory import main as inventory_main
    from ansible.utils.display import Display

    path = os.environ.get(MESSAGES_FILE)
    if path:
        record_messages(Display, path)
    inventory_main(["ansible-inventory", *argv])  # exits itself (SystemExit with Ansible's code)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
