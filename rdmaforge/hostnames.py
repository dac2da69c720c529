"""Host names as the tools print them. One rule, shared by the inventory checks, SSH trust and the benchmark report:
nccl-tests' ``#  Rank`` lines, ``hostname -s`` and ssh_known_hosts' short aliases all cut a name at its first dot."""

from __future__ import annotations


def short_name(name: str) -> str:
    """The part of a host name before the first dot: ``node1.example.com`` -> ``node1``."""
    return name.split(".", 1)[0]


def not_a_string(shown: str) -> str:
    """Why a host key YAML read as a number, a boolean or null is refused, and what to write: ``shown`` is the key as
    Python prints it (``yes`` is True, ``~`` is None). One text for the inventory files' check (before Ansible) and
    for Ansible's own refusal (rdmaforge.runner.inventory_list.host_name_hint)."""
    kind = {"True": "the boolean true", "False": "the boolean false", "None": "null"}.get(shown, "a number")
    return (f"host {shown}: YAML read this host name as {kind}, not a string, and host names must be strings; allowed: "
            "the name in quotes ('123':, 'yes':), since YAML reads an unquoted number, yes, no, on, off, true, false, "
            "~ or null as no string")
