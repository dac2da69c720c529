"""A role's expressions rendered as ``ansible-playbook`` renders them, over a generated inventory: Ansible's own
InventoryManager, VariableManager and ``HostVars`` (each ``hostvars[node]`` computes that node's variables, as in a
play), the role's defaults and vars as templates, facts and registered results set where a play sets them."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from rdmaforge.collection import ensure_dev_tree
from rdmaforge.role_defaults import defaults

#: The variables a node's entry in ``hostvars(...)`` may carry in the inventory itself (the rest are facts or
#: results registered by the run).
INVENTORY_KEYS = ("ansible_host",)


def trusted(value: Any) -> Any:
    """A role file's strings as Ansible trusts them (templates it may render); tests/unit/role_vars.py uses it too."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    return value


def inventory_file(path: Path, group: str, nodes: Mapping[str, Mapping[str, Any]], group_vars: Path | None) -> Path:
    """``path``/hosts.yml with ``nodes`` in ``group`` (their INVENTORY_KEYS), and a copy of ``group_vars`` beside it."""
    path.mkdir(parents=True)
    hosts = {node: {k: entry[k] for k in INVENTORY_KEYS if k in entry} for node, entry in nodes.items()}
    inventory = path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {group: {"hosts": hosts}}}}, sort_keys=False))
    if group_vars is not None:
        shutil.copytree(group_vars, path / "group_vars")
    return inventory


@dataclass
class RoleRender:
    role: str
    loader: DataLoader
    inventory: InventoryManager
    variables: VariableManager

    @classmethod
    def build(cls, path: Path, role: str, group_vars: Path | None, nodes: Mapping[str, Mapping[str, Any]],
              group: str) -> RoleRender:  # fmt: skip
        """An inventory of ``nodes`` (each entry: inventory variables, ``ansible_facts``, and results registered by
        the run, by name) in ``group``, with ``group_vars``."""
        if AnsibleCollectionConfig.collection_finder is None:
            # The roles name filters by FQCN (rdmaforge.cluster.*): the checkout's collection tree is the loader's.
            init_plugin_loader([str(ensure_dev_tree())])
        loader = DataLoader()
        inventory = InventoryManager(loader=loader, sources=[str(inventory_file(path, group, nodes, group_vars))])
        variables = VariableManager(loader=loader, inventory=inventory)
        HostVars(inventory=inventory, variable_manager=variables, loader=loader)  # the play's ``hostvars``
        render = cls(role, loader, inventory, variables)
        for node, entry in nodes.items():
            if "ansible_facts" in entry:
                variables.set_host_facts(node, entry["ansible_facts"])
            for name, value in entry.items():
                if name not in INVENTORY_KEYS and name != "ansible_facts":
                    render.register(node, name, value)
        return render

    def register(self, node: str, name: str, value: Any) -> None:
        """A result the run registered (or set_fact set) on ``node``."""
        self.variables.set_nonpersistent_facts(node, {name: value})

    def templar(self, host: str, play: Sequence[str]) -> Templar:
        """A task's templar on ``host`` in a play of ``play``: the role's defaults, the host's variables (inventory,
        facts, registered results, ``hostvars``, ``groups``), the role's vars, the play's magic variables."""
        variables: dict[str, Any] = trusted(defaults(self.role))
        variables.update(self.variables.get_vars(host=self.inventory.get_host(host)))
        variables.update(trusted(defaults(self.role, "vars")))
        variables.update(inventory_hostname=host, ansible_play_hosts=list(play), ansible_play_hosts_all=list(play),
                         ansible_play_batch=list(play))  # fmt: skip
        return Templar(loader=self.loader, variables=variables)

    def render(self, template: str, host: str, play: Sequence[str]) -> Any:
        """A task's ``template`` (a role file's ``{{ ... }}`` text) rendered on ``host``."""
        return self.templar(host, play).template(trust_as_template(template))
