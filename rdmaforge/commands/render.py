"""``rdmaforge render``: write the cluster's training workloads from the inventory alone.

    rdmaforge render -i inventories/mycluster/hosts.yml -o out/            # the kinds of workload_manifests_kinds
    rdmaforge render -i INVENTORY --kind docker --kind mpijob -o out/ --validate

Writes, for the hosts of group ``cluster``: docker/<node>/<name>.sh and .service (docker run with the GPU
runtime, host IPC and network, memlock unlimited, the node's RDMA devices and NCCL settings), acs/<name>.yaml
(ACS Deployment or Job with the RDMA labels), mpijob/<name>.yaml and pytorchjob/<name>.yaml (Kubeflow).

The inventory is read with ``ansible-inventory --list``: nothing connects to the nodes, so facts are not
available. Set ``workload_manifests_gpus_per_node`` and, on RDMA fabrics, ``workload_manifests_rdma_device_files``
in the inventory (playbooks/workloads.yml finds both on the nodes instead). Variables are those of role
workload_manifests (roles/workload_manifests/defaults/main.yml); the files are the ones the role writes.

Exit code: 0 written (and valid, with --validate); 1 a manifest failed validation; 2 the inventory has
problems (all listed, one line each, nothing written) or cannot be read.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.workloads import KINDS
from rdmaforge.workloads.nodes import HOST_VARIABLES, HostInput
from rdmaforge.workloads.options import PREFIX, ROLE_ONLY, nccl_env_profiles, role_defaults
from rdmaforge.workloads.plan import plan_from_hosts
from rdmaforge.workloads.render import write

PROG = "rdmaforge render"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "render",
        help="write docker/systemd, ACS, MPIJob and PyTorchJob files for the inventory's cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-i", "--inventory", required=True, help="inventory (file or directory), as for Ansible")
    parser.add_argument("-o", "--output", type=Path, required=True, help="directory to write into (created)")
    parser.add_argument(
        "--kind",
        action="append",
        choices=[*KINDS, "all"],
        help="what to render (repeatable; default: the inventory's workload_manifests_kinds)",
    )
    parser.add_argument("--group", default="cluster", help="inventory group of the nodes (default: cluster)")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="validate the Kubernetes manifests written (needs kubernetes-validate and kubeflow-training)",
    )
    parser.add_argument("--kubernetes-version", help="Kubernetes version of the core schemas (default: the pinned one)")
    parser.set_defaults(func=run)


class InventoryError(RuntimeError):
    pass


def _ansible_inventory() -> str:
    beside = Path(sys.executable).parent / "ansible-inventory"
    return str(beside) if beside.exists() else "ansible-inventory"


def read_inventory(inventory: str, group: str) -> dict[str, dict[str, Any]]:
    """``{host: variables}`` for the hosts of ``group`` (and its child groups), as ``ansible-inventory --list``."""
    env = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True", "ANSIBLE_NOCOLOR": "1"}
    try:
        proc = subprocess.run(
            [_ansible_inventory(), "-i", inventory, "--list"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InventoryError(f"cannot run ansible-inventory: {exc}") from exc
    if proc.returncode != 0:
        raise InventoryError(f"ansible-inventory -i {inventory} failed: {proc.stderr.strip()[-2000:]}")
    data = json.loads(proc.stdout)
    hostvars: dict[str, dict[str, Any]] = data.get("_meta", {}).get("hostvars", {})
    hosts: list[str] = []

    def collect(name: str, seen: set[str]) -> None:
        if name in seen:
            return
        seen.add(name)
        entry = data.get(name) or {}
        hosts.extend(h for h in entry.get("hosts", []) if h not in hosts)
        for child in entry.get("children", []):
            collect(child, seen)

    collect(group, set())
    if not hosts:
        raise InventoryError(
            f"the inventory has no hosts in group {group!r}; allowed: an inventory that lists every node under "
            f"all.children.{group}.hosts (see inventories/example/hosts.yml), or --group NAME"
        )
    return {host: dict(hostvars.get(host) or {}) for host in hosts}


def _templated(value: object) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False


def host_inputs(inventory: Mapping[str, Mapping[str, Any]]) -> tuple[list[HostInput], list[str], list[str]]:
    """The role's defaults overlaid with each host's variables: the same options the role hands over."""
    defaults = role_defaults()
    problems: list[str] = []
    warnings: list[str] = []
    inputs = []
    for host, variables in inventory.items():
        options = dict(defaults)
        for name, value in variables.items():
            if not name.startswith(PREFIX) or name in ROLE_ONLY:
                continue
            if name not in defaults:
                close = difflib.get_close_matches(name, list(defaults), n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                warnings.append(f"{host}: {name} is not a variable of role workload_manifests{hint}; ignored")
                continue
            options[name] = value
        read = {name: variables[name] for name in HOST_VARIABLES if name in variables}
        for name, value in [*options.items(), *read.items()]:
            if _templated(value):
                problems.append(
                    f"{host}: {name} holds a Jinja expression, which `{PROG}` cannot evaluate (it reads the "
                    f"inventory without Ansible's templating); allowed: a plain value, or run playbooks/workloads.yml"
                )
        inputs.append(HostInput(name=host, options=options, variables=read, found_device_files=None))
    return inputs, problems, warnings


def _validate(paths: list[Path], out_dir: Path, version: str | None) -> int:
    from rdmaforge.workloads import validate  # the test extras: imported only when asked for

    target = version or validate.KUBERNETES_VERSION
    failed = 0
    for path in paths:
        if path.suffix != ".yaml":
            continue
        document = yaml.safe_load(path.read_text())
        found = validate.problems(document, target)
        shown = path.relative_to(out_dir)
        if found:
            failed += 1
            for problem in found:
                print(f"INVALID {shown}: {problem}", file=sys.stderr)
        else:
            print(f"valid   {shown}: {validate.validator_for(document, target)}")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    try:
        inventory = read_inventory(args.inventory, args.group)
    except InventoryError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    inputs, problems, warnings = host_inputs(inventory)
    kinds = None if not args.kind else (list(KINDS) if "all" in args.kind else list(args.kind))
    plan = plan_from_hosts(inputs, nccl_env_profiles(), kinds)
    for warning in [*warnings, *plan.warnings]:
        print(f"WARNING {warning}", file=sys.stderr)
    problems += plan.problems
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{PROG}: {len(problems)} problem(s); nothing written", file=sys.stderr)
        return 2
    written = write(plan, args.output)
    for path in written:
        print(f"wrote   {path}")
    if args.validate:
        try:
            return _validate(written, args.output, args.kubernetes_version)
        except RuntimeError as exc:  # ValidatorUnavailable
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 2
    return 0
