"""Evaluate a role's defaults and vars for a given set of facts, as Ansible would (RHEL-family and other
hosts the lab cannot run are checked this way: the same Jinja, the same filter plugins)."""

from __future__ import annotations

from typing import Any

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

from benchmarks.ansible_vars import trusted
from rdmaforge.collection import ensure_dev_tree
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.role_defaults import defaults

_initialised = False


def role_vars(role: str, facts: dict[str, Any], **inventory: Any) -> Templar:
    """A templar over the role's defaults, its vars and the given facts and inventory variables."""
    global _initialised
    if not _initialised:
        # The roles name filters by FQCN (rdmaforge.cluster.*): the checkout's collection tree is the loader's.
        init_plugin_loader([str(ensure_dev_tree())])
        _initialised = True
    variables: dict[str, Any] = {}
    for part in ("defaults", "vars"):
        if (PROJECT_ROOT / "roles" / role / part / "main.yml").exists():
            variables.update(trusted(defaults(role, part)))
    variables.update(inventory)
    variables["ansible_facts"] = facts
    return Templar(loader=DataLoader(), variables=variables)


def evaluate(templar: Templar, expression: str) -> Any:
    return templar.template(trust_as_template("{{ " + expression + " }}"))


def spec_default(role: str, option: str) -> Any:
    """The default a role's argument spec documents for ``option`` (entry point main)."""
    spec = yaml.safe_load((PROJECT_ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"][option]["default"]
