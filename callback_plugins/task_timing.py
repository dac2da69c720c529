"""Print the slowest tasks of a run, like ansible.posix.profile_tasks (not shipped with ansible-core)."""

from __future__ import annotations

import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: task_timing
type: aggregate
short_description: summary of the slowest tasks at the end of a playbook run
description:
  - Records wall time per task (from its start until every host reported) and prints the slowest ones.
options:
  top:
    description: How many tasks to list.
    default: 12
    type: int
    env:
      - name: RDMAFORGE_TIMING_TOP
"""


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible-core ships no type information
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._durations: dict[str, float] = {}
        self._current: tuple[str, float] | None = None
        self._top = int(os.environ.get("RDMAFORGE_TIMING_TOP", "12"))

    def _close_current(self) -> None:
        if self._current is not None:
            name, started = self._current
            self._durations[name] = self._durations.get(name, 0.0) + time.monotonic() - started
            self._current = None

    def _start(self, task: Any) -> None:
        self._close_current()
        role = task._role.get_name() + " : " if getattr(task, "_role", None) else ""
        self._current = (f"{role}{task.get_name().strip()}", time.monotonic())

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._start(task)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._close_current()
        if not self._durations:
            return
        ranked = sorted(self._durations.items(), key=lambda kv: kv[1], reverse=True)[: self._top]
        self._display.banner("TASK TIMING (slowest first)")
        for name, seconds in ranked:
            self._display.display(f"{seconds:9.2f}s  {name}")
        self._display.display(f"{sum(self._durations.values()):9.2f}s  total")
