"""Resources a converge manages or reads, collected from its task results (the converge_ledger callback).

A module the ledger does not know makes the host's record *unverifiable*: the fast path is then never
taken for it, so a new kind of task can make a run slower but never hide a drift.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rdmaforge.parsers import converge_resources, nic_facts, packages

#: Modules that manage or read no node state of their own (facts come back through the fingerprint).
NO_STATE = frozenset(
    {
        "meta",
        "set_fact",
        "assert",
        "fail",
        "debug",
        "include_tasks",
        "import_tasks",
        "include_role",
        "import_role",
        "group_by",
        "add_host",
        "validate_argument_spec",
        "setup",
        "gather_facts",
        "package_facts",
        "async_status",
        "pause",
        "wait_for_connection",
        "fetch",
        "include_vars",
        "set_stats",
        "converge_state",
        "reboot",
        # Read the kernel, sysfs and links, all in the node fingerprint.
        "hugepages_facts",
        "rdma_devices",
        "gpu_topology",
        # Connects to the other nodes: their host keys are in their fingerprints, and ssh_trust is a
        # cluster-wide play, run on every node whenever any node differs from its record.
        "ssh_mesh_check",
    }
)
FILE_DEST = frozenset({"copy", "template", "get_url", "text_file"})
FILE_PATH = frozenset({"file", "blockinfile", "lineinfile", "replace", "stat"})
PREFIXES = ("ansible.builtin.", "ansible.legacy.", "rdmaforge.cluster.")


def short_action(action: str) -> str:
    for prefix in PREFIXES:
        if action.startswith(prefix):
            return action[len(prefix) :]
    return action


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value if v]


def _is_false(value: Any) -> bool:
    """True when a task's changed_when is literally false (a read-only command)."""
    if isinstance(value, list):
        return len(value) == 1 and _is_false(value[0])
    return value is False or (isinstance(value, str) and value.strip().lower() in ("false", "no"))


@dataclass
class Resources:
    paths: set[str] = field(default_factory=set)
    listings: set[str] = field(default_factory=set)
    packages: dict[str, set[str]] = field(default_factory=dict)
    services: set[str] = field(default_factory=set)
    venvs: set[str] = field(default_factory=set)
    commands: list[list[str]] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)
    unverifiable: list[str] = field(default_factory=list)

    def command(self, argv: list[str]) -> None:
        if argv and argv not in self.commands:
            self.commands.append(argv)

    def as_dict(self) -> dict[str, Any]:
        """The record form (rdmaforge.parsers.converge_resources, shared with the converge_state module)."""
        return converge_resources.merge({kind: getattr(self, kind) for kind in converge_resources.KINDS})


def _argv(result: Mapping[str, Any], args: Mapping[str, Any]) -> list[str]:
    cmd = result.get("cmd") or args.get("argv") or args.get("_raw_params") or args.get("cmd")
    if isinstance(cmd, str):
        return shlex.split(cmd)
    return [str(c) for c in cmd or []]


def add_result(ledger: Resources, task: str, action: str, result: Mapping[str, Any], changed_when: Any = None) -> None:
    """Record what one (item) result of a task on its own host manages or reads."""
    if result.get("skipped"):
        return
    name = short_action(action)
    args: Mapping[str, Any] = (result.get("invocation") or {}).get("module_args") or {}
    if name in NO_STATE:
        return
    if name in FILE_DEST:
        dest = result.get("dest") or args.get("dest")
        if dest:
            ledger.paths.add(str(dest))
        return
    if name in FILE_PATH:
        path = args.get("path") or args.get("dest") or result.get("path")
        if path:
            ledger.paths.add(str(path))
        return
    if name == "slurp":
        ledger.paths.add(str(args.get("src") or args.get("path")))
        return
    if name == "find":
        # What the task saw: the names that match its patterns, as deep as it looked (every name with regexes).
        patterns = [] if args.get("use_regex") else _names(args.get("patterns"))
        depth = (args.get("depth") or None) if args.get("recurse") else 1
        ledger.listings.update(
            converge_resources.listing_entry(path, patterns, depth) for path in _names(args.get("paths"))
        )
        ledger.paths.update(str(f.get("path")) for f in result.get("files") or [] if f.get("path"))
        return
    if name == "unarchive":
        dest = str(args.get("dest"))
        ledger.paths.add(dest)
        ledger.listings.add(dest)
        if args.get("creates"):
            ledger.paths.add(str(args["creates"]))
        return
    if name in ("apt", "dnf", "yum"):
        manager = "apt" if name == "apt" else "dnf"
        for package in _names(args.get("name")) + _names(args.get("pkg")):
            if package.startswith("/"):
                ledger.paths.add(package)
            else:
                ledger.packages.setdefault(manager, set()).add(package)
        if args.get("deb"):
            ledger.paths.add(str(args["deb"]))
        return
    if name in ("systemd_service", "systemd", "service"):
        if args.get("name"):
            ledger.services.add(str(args["name"]))
        return
    if name == "yum_repository":
        repo = args.get("file") or args.get("name")
        ledger.paths.add(os.path.join(str(args.get("reposdir") or "/etc/yum.repos.d"), f"{repo}.repo"))
        return
    if name == "rpm_key":
        ledger.command(["rpm", "-q", "gpg-pubkey"])
        return
    if name == "getent":
        ledger.paths.add("/etc/{}".format(args.get("database", "passwd")))
        return
    if name == "git":
        ledger.command(["git", "-C", str(args.get("dest")), "rev-parse", "HEAD"])
        return
    if name == "pip" and args.get("virtualenv"):
        ledger.venvs.add(str(args["virtualenv"]).rstrip("/"))
        return
    if name == "kernel_cmdline":
        for key in ("path", "dropin"):
            if args.get(key):
                ledger.paths.add(str(args[key]))
        if args.get("backend") == "grubby":
            ledger.command(["grubby", "--info=ALL"])
        return
    if name == "build_tree":
        # Every file of the installed build it compared with its record, and the record itself.
        ledger.paths.update(str(path) for path in result.get("files") or [])
        return
    if name == "node_probe":
        # What its find and command tasks recorded before it read them in one module run: the tool directories'
        # matching names, the tools found, and the GPU tools' read-only commands (re-run by the drift check). The
        # devices, links and NICs it read are in the node fingerprint, as for rdma_devices and gpu_topology.
        patterns = _names(args.get("tool_names"))
        ledger.listings.update(
            converge_resources.listing_entry(path, patterns) for path in _names(args.get("tool_dirs"))
        )
        ledger.paths.update(str(path) for path in result.get("tool_files") or [])
        for key in ("nvidia_smi", "compute_caps", "lspci"):
            command = result.get(key)
            if isinstance(command, Mapping) and command.get("cmd"):
                ledger.command([str(arg) for arg in command["cmd"]])
        return
    if name == "nic_facts":
        # The NICs are in the node fingerprint; the policy routing state it read (routing_tables) is not, so the
        # drift check re-reads it with the same commands.
        if args.get("routing_tables") is not None:
            for argv in nic_facts.routing_commands(args["routing_tables"]):
                ledger.command(argv)
        return
    if name == "nccl_net_api":
        ledger.paths.update(_names(args.get("path")))
        return
    if name in ("command", "shell", "script"):  # script: a local file run like a command on the node
        for key in ("creates", "removes"):
            if args.get(key):
                ledger.paths.add(str(args[key]))
        if _is_false(changed_when):
            if name != "command" or args.get("_uses_shell"):
                # Neither a shell line nor a script copied from the controller can be re-run as a node's argv.
                ledger.unverifiable.append(f"{task} (a read-only {name})")
            else:
                argv = _argv(result, args)
                query = packages.query_of(argv)
                if query is None:
                    ledger.command(argv)
                else:  # os_packages' query: the packages it reads, named as such in a drift (as apt's are)
                    ledger.packages.setdefault(query[0], set()).update(query[1])
        elif not (args.get("creates") or args.get("removes")):
            # Applies state kept in files the ledger observes (ldconfig, a reload, grub-mkconfig).
            ledger.effects.append(task)
        return
    ledger.unverifiable.append(f"{task} (module {name})")


def add_task_result(
    ledger: Resources,
    task: str,
    action: str,
    result: Mapping[str, Any],
    changed_when: Any = None,
    observe: bool = True,
) -> None:
    """One task's result, loop results included. ``observe=False``: the task declared (task var
    ``converge_state_observe: false``) that what it reads is not state, e.g. free space."""
    if not observe:
        return
    items: Iterable[Mapping[str, Any]] = result.get("results") or [result]
    for item in items:
        if isinstance(item, Mapping):
            add_result(ledger, task, action, item, changed_when)


#: Filled by the converge_ledger callback in the controller process; forked workers (and so the filter that
#: hands a host's resources to converge_state) see it as it was when their task started.
LEDGERS: dict[str, Resources] = {}


def resources_for(host: str) -> dict[str, Any] | None:
    """The host's resources; None without a ledger."""
    entry = LEDGERS.get(host)
    return None if entry is None else entry.as_dict()
