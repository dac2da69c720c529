"""Collect, per host, what the converge's tasks manage and read: the converge_state record lists it."""

from __future__ import annotations

from typing import Any

from ansible.plugins.callback import CallbackBase

from rdmaforge.converge import ledger

DOCUMENTATION = r"""
name: converge_ledger
type: aggregate
short_description: remember what each task manages or reads, for rdmaforge's converge record
description:
  - For every task result on its own host (delegated results are left out), notes the files, directory
    listings, packages, services and read-only commands the task touched, with rdmaforge.converge.ledger.
  - The record play of site.yml reads it with the rdmaforge_converge_ledger filter; the fast path of later
    runs compares the node with that record. Prints nothing.
"""


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible-core ships no type information
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "converge_ledger"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook: Any) -> None:
        ledger.LEDGERS.clear()

    def _entry(self, result: Any) -> ledger.Resources | None:
        data = result._result
        if data.get("_ansible_delegated_vars"):
            return None  # state of the delegate (the controller, a builder), not of this host
        return ledger.LEDGERS.setdefault(result._host.get_name(), ledger.Resources())

    def v2_runner_on_ok(self, result: Any) -> None:
        entry = self._entry(result)
        if entry is None:
            return
        task = result._task
        name = task.get_name()
        if result._result.get("censored"):
            entry.unverifiable.append(f"{name} (its result is hidden by no_log)")
            return
        action = getattr(task, "resolved_action", None) or task.action
        observe = (task.vars or {}).get("converge_state_observe") is not False
        ledger.add_task_result(entry, name, action, result._result, task.changed_when, observe)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        entry = self._entry(result)
        if entry is not None and ignore_errors:
            entry.unverifiable.append(f"{result._task.get_name()} (failed, errors ignored)")
