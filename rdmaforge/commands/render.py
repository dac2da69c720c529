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

Paths (-i, -o) are taken relative to the current directory. Host names and other names that become file
names must stay inside -o; values are checked against the role's argument_specs types (a string where a
list is expected is a problem, not a list of characters); an unparsable inventory or group_vars/host_vars
YAML file is named with its line, and so is one Ansible would skip without a word (a symbolic link to nothing).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rdmaforge.errors import missing_path, non_empty, output_path
from rdmaforge.inventory_checks import misspelled_variable_problems, variable_names
from rdmaforge.inventory_files import yaml_problems
from rdmaforge.paths import PROJECT_ROOT, ROLES_DIR, as_installed, playbook_to_run
from rdmaforge.plain_data import spec_bool, whole_number
from rdmaforge.runner import inventory_list, vault
from rdmaforge.runner.exit_codes import ExitCode, epilog
from rdmaforge.runner.inventory_list import InventoryError
from rdmaforge.stored import SAFE_NAME
from rdmaforge.text import help_text
from rdmaforge.workloads import KINDS
from rdmaforge.workloads.nodes import HOST_VARIABLES, HostInput
from rdmaforge.workloads.options import ARGUMENT_SPECS_FILE, PREFIX, ROLE_ONLY, nccl_env_profiles, role_defaults
from rdmaforge.workloads.plan import Plan, plan_from_hosts
from rdmaforge.workloads.render import environment, render_file, stale_warning, write_files

PROG = "rdmaforge render"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "render",
        help="write docker/systemd, ACS, MPIJob and PyTorchJob files for the inventory's cluster",
        description=as_installed(help_text(__doc__)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=epilog(ExitCode.INCOMPLETE, meanings={
            ExitCode.OK: "written (and valid, with --validate)",
            ExitCode.ERROR: "a manifest failed validation (--validate: nothing written), the validator is not "
                            "installed, or the output was cut short (a closed pipe, a full disk)",
            ExitCode.INCOMPLETE: "--validate found no Kubernetes manifest among the files written (--kind docker): "
                                 "nothing validated, not judged",
            ExitCode.BAD_INPUT: "bad command line or input file: the inventory has problems (all listed, one line "
                                "each, nothing written) or cannot be read, or -o is not a usable directory",
        }),  # fmt: skip
    )
    parser.add_argument("-i", "--inventory", required=True, help="inventory (file or directory), as for Ansible",
                        type=non_empty("an empty inventory path (Ansible would read the current directory)",
                                       "an inventory file or directory"))  # fmt: skip
    parser.add_argument("-o", "--output", type=output_path("a directory (created when missing); . for the current one"),
                        required=True, help="directory to write into (created)")  # fmt: skip
    parser.add_argument(
        "--kind",
        action="append",
        choices=[*KINDS, "all"],
        help="what to render (repeatable; default: the inventory's workload_manifests_kinds, or where that is unset "
        "the kinds that apply to its fabric: acs only on acs_type1 and acs_type2)",
    )
    parser.add_argument("--group", default="cluster", help="inventory group of the nodes (default: cluster)")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="validate the Kubernetes manifests written (needs kubernetes-validate and kubeflow-training)",
    )
    parser.add_argument(
        "--kubernetes-version", help="with --validate: Kubernetes version of the core schemas (default: the pinned one)"
    )
    parser.set_defaults(func=run)


def read_inventory(inventory: str, group: str) -> dict[str, dict[str, Any]]:
    """``{host: variables}`` for the hosts of ``group`` (and its child groups), as ``ansible-inventory --list``
    prints them and Ansible reads them (read_hosts)."""
    return read_hosts(inventory, group)[0]


#: How ansible-inventory --list prints a value tagged !unsafe and one tagged !vault.
_UNSAFE = "__ansible_unsafe"
_VAULT = "__ansible_vault"


def read_hosts(inventory: str, group: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``{host: variables}`` for the hosts of ``group`` (and its child groups) twice: as Ansible reads them, a value
    tagged !unsafe (printed as {"__ansible_unsafe": ...}) being its text (vault.load_json, Ansible's JSON reading),
    and as ansible-inventory printed them, where such a value is still marked as one Ansible never templates."""
    text = inventory_list.listing(inventory, cwd=PROJECT_ROOT, env={"ANSIBLE_INVENTORY_UNPARSED_FAILED": "True"})
    data = inventory_list.parsed(inventory, text, vault.load_json)
    printed = inventory_list.parsed(inventory, text)
    hosts = inventory_list.group_hosts(data, group)
    if not hosts:
        raise InventoryError(
            as_installed(f"the inventory has no hosts in group {group!r}; allowed: an inventory that lists every node "
                         f"under all.children.{group}.hosts (see inventories/example/hosts.yml), or --group NAME")
        )

    def of(listing: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        hostvars = listing.get("_meta", {}).get("hostvars", {})
        return {host: dict(hostvars.get(host) or {}) for host in hosts}

    return of(data), of(printed)


def _marked(value: object, marker: str) -> bool:
    """Whether ansible-inventory printed ``value`` as one tagged (!unsafe: _UNSAFE, !vault: _VAULT)."""
    return isinstance(value, Mapping) and len(value) == 1 and marker in value


def _templated(value: object) -> bool:
    """Whether Ansible would template ``value``: an expression, a statement or a comment (``eth0{#bond#}`` is eth0
    to the role; written as it stands it would not be). A value tagged !unsafe never is: its text is the value."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value or "{#" in value
    if _marked(value, _UNSAFE):
        return False
    if isinstance(value, Mapping):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False


def _vaulted(value: object) -> bool:
    """Whether ``value`` (as printed) is, or holds, a !vault value, which render cannot decrypt."""
    if _marked(value, _VAULT):
        return True
    if isinstance(value, Mapping):
        return any(_vaulted(v) for v in value.values())
    if isinstance(value, list):
        return any(_vaulted(v) for v in value)
    return False


def host_inputs(
    inventory: Mapping[str, Mapping[str, Any]], printed: Mapping[str, Mapping[str, Any]] | None = None
) -> tuple[list[HostInput], list[str], list[str]]:
    """The role's defaults overlaid with each host's variables: the same options the role hands over. ``printed``:
    the same variables as ansible-inventory printed them (read_hosts), which say what is !unsafe and what !vault;
    ``inventory`` itself when not given."""
    defaults = role_defaults()
    problems: list[str] = []
    warnings: list[str] = []
    inputs = []
    names = variable_names(ROLES_DIR)
    for host, read_values in inventory.items():
        shown = (printed or inventory).get(host) or {}
        jinja = {name for name, value in shown.items() if _templated(value)}
        vaulted = {name for name, value in shown.items() if _vaulted(value)}
        # A vault-encrypted value stays as printed (named below); render has no vault password to read it with.
        variables = {**read_values, **{name: shown[name] for name in vaulted}}
        # Preflight's rule: a name close to one rdmaforge reads (a letter left out) would be ignored without a word.
        misspelled = misspelled_variable_problems(host, variables, names)
        problems += [p.message for p in misspelled]
        options = dict(defaults)
        for name, value in variables.items():
            if not name.startswith(PREFIX) or name in ROLE_ONLY:
                continue
            if name not in defaults:
                if any(p.variable == name for p in misspelled):
                    continue  # a problem line above names it already
                close = difflib.get_close_matches(name, list(defaults), n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                warnings.append(f"{host}: {name} is not a variable of role workload_manifests{hint}; ignored")
                continue
            options[name] = value
        read = {name: variables[name] for name in HOST_VARIABLES if name in variables}
        if not SAFE_NAME.match(host) or ".." in host:
            problems.append(
                f"{host}: the host name becomes a directory name under -o (docker/<host>/); allowed: letters, "
                "digits, _ . - (no '/', no '..')"
            )
        for name in sorted(vaulted & ({*options, *read} - ROLE_ONLY)):
            problems.append(as_installed(f"{host}: {name} is vault-encrypted, which render cannot decrypt (it reads "
                                         "the inventory without a vault password); run playbooks/workloads.yml with "
                                         "the vault password instead"))  # fmt: skip
        unread = jinja | vaulted
        problems += type_problems(host, {k: v for k, v in options.items() if k in variables and k not in unread})
        for name, value in [*options.items(), *read.items()]:
            if (name in jinja) if name in variables else _templated(value):
                problems.append(
                    f"{host}: {name} holds a Jinja expression, which `{PROG}` cannot evaluate (it reads the "
                    f"inventory without Ansible's templating); allowed: a plain value, or run "
                    f"{playbook_to_run('workloads.yml')}"
                )
        inputs.append(HostInput(name=host, options=options, variables=read, found_device_files=None))
    return inputs, problems, warnings


#: Python types each argument_specs type accepts from an inventory (None: the default applies).
_SPEC_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str, int, float),
    "path": (str,),
    "list": (list,),
    "dict": (dict,),
    "int": (int,),
    "bool": (bool,),
}


@functools.lru_cache(maxsize=4)
def option_types(path: Path = ARGUMENT_SPECS_FILE) -> dict[str, str]:
    """``{variable: argument_specs type}`` of role workload_manifests. Read once per process: type_problems asks for
    it per host, and parsing the file again for each of 1000 hosts took most of a render (review round 21c)."""
    data = yaml.safe_load(path.read_text()) or {}
    options = (data.get("argument_specs") or {}).get("main", {}).get("options") or {}
    return {str(name): str(spec.get("type", "str")) for name, spec in options.items() if isinstance(spec, dict)}


#: How a message says each argument_specs type ("a int" read as a typo).
_SPEC_WORDS = {"str": "text", "path": "a path", "list": "a list", "dict": "a mapping", "int": "a whole number",
               "bool": "true or false"}  # fmt: skip


def type_problems(host: str, values: Mapping[str, Any]) -> list[str]:
    """One line per inventory value whose type is not the one the role's argument_specs declare."""
    types = option_types()
    found = []
    for name, value in values.items():
        kind = types.get(name)
        allowed = _SPEC_TYPES.get(kind or "")
        if value is None or allowed is None:
            continue
        # An int or a bool as the argument spec converts it (8.0, "8"; "false", "yes": an INI [group:vars] value).
        if kind == "int" and whole_number(value) is not None or kind == "bool" and spec_bool(value) is not None:
            continue
        if isinstance(value, bool) and kind != "bool" or not isinstance(value, allowed):
            shown = json.dumps(value, default=str)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            said = _SPEC_WORDS.get(str(kind), str(kind))
            example = ""
            if kind == "list" and isinstance(value, str):
                # An INI inventory's `a,b` is one text: the list it meant has one item per comma-separated part.
                items = [part.strip() for part in value.split(",") if part.strip()] or [value]
                example = f", e.g. {json.dumps(items)[:120]}"
            found.append(
                f"{host}: {name} is {type(value).__name__} {shown}; allowed: {said} (role workload_manifests "
                f"argument_specs{example})"
            )
    return found


#: The host and the variable a problem line opens with ("node1: workload_manifests_x is ..." / "...x='...' is").
_HOST_VARIABLE = re.compile(r"^([^:\s]+): ([A-Za-z_][A-Za-z0-9_]*)[ =]")


def output_problem(out_dir: Path) -> str | None:
    """Why ``out_dir`` cannot take the files, or None (checked before anything is written)."""
    if out_dir.exists() and not out_dir.is_dir():
        return f"-o {out_dir}: exists and is not a directory; allowed: a directory (created when missing)"
    parent = out_dir
    while not parent.exists():
        if parent.is_symlink():  # a link loop, or a link to nothing: mkdir would only say "File exists"
            what = "-o" if parent == out_dir else f"-o {out_dir}:"
            return f"{missing_path(parent, what)}; allowed: a directory (created when missing), or a link to one"
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"-o {out_dir}: {parent} is not a writable directory"
    return None


def _blocked(out_dir: Path, target: Path) -> list[str]:
    """Why ``target`` under ``out_dir`` cannot be written: a folder of its path is a file, it is a folder itself, or
    either is a symbolic link (checked for every file before any is written, so that a failure leaves no half-written
    output)."""
    for path in [*reversed(target.relative_to(out_dir).parents[:-1]), target.relative_to(out_dir)]:
        found = out_dir / path
        if found.is_symlink():
            # Writing through it would change, or create, a file outside -o (the link's target); refused, not replaced:
            # the link may be someone's on purpose. -o itself may be a link (output_problem).
            return [f"-o {out_dir}: {path} is a symbolic link (to {os.readlink(found)}), and render never writes "
                    f"through a link: refused, the link left as it is; allowed: a regular "
                    f"{'file' if found == target else 'directory'}, or nothing (remove the link)"]  # fmt: skip
        if found == target and found.is_dir():
            return [f"-o {out_dir}: {path} is a directory, where a file of that name goes; allowed: a file, or nothing"]
        if found != target and (found.exists() or found.is_symlink()) and not found.is_dir():
            return [f"-o {out_dir}: {path} is not a directory, and {target.relative_to(out_dir)} goes below it; "
                    f"allowed: a directory, or nothing"]  # fmt: skip
    return []


def _judged(plan: Plan, version: str | None) -> dict[str, list[str]]:
    """Every manifest of ``plan`` (its path under -o) with the problems validation finds in it (none: valid), judged
    on the text it would be written as (the role validates the plan before writing too). Raises ValidatorUnavailable
    without the validation packages."""
    from rdmaforge.workloads import validate  # heavy: imported only when asked for

    target = version or validate.KUBERNETES_VERSION
    env = environment()
    return {planned.path: validate.problems(yaml.safe_load(render_file(env, planned)), target)
            for planned in plan.files if planned.path in plan.manifests}  # fmt: skip


def _validated(plan: Plan, paths: list[Path], out_dir: Path, version: str | None) -> int:
    """The verdict on the files written, each named: valid (with what it was checked against), or not validated."""
    from rdmaforge.workloads import validate

    target = version or validate.KUBERNETES_VERSION
    manifests = plan.manifests
    if not manifests:
        # Asked to validate, it checked nothing: exit 0 would read as "valid" (the files are written all the same).
        print(f"{PROG}: --validate: not judged: no Kubernetes manifest among the files written; nothing validated",
              file=sys.stderr)  # fmt: skip
        return int(ExitCode.INCOMPLETE)
    for path in paths:
        shown = path.relative_to(out_dir)
        document = manifests.get(shown.as_posix())
        if document is None:
            # Named, so that the valid lines are not read as covering every file written (review round 33b).
            print(f"not validated {shown}: not a Kubernetes manifest (--validate checks manifests only)")
        else:
            print(f"valid   {shown}: {validate.validator_for(document, target)}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.kubernetes_version and not args.validate:
        print(
            f"{PROG}: --kubernetes-version {args.kubernetes_version} only says what --validate checks against, and "
            "--validate is not given; allowed: both, or neither",
            file=sys.stderr,
        )
        return int(ExitCode.BAD_INPUT)
    if not args.group.strip():  # "no hosts in group ''" named the empty name as a group
        print(f"{PROG}: --group is empty; allowed: the name of the inventory group of the nodes (default: cluster)",
              file=sys.stderr)  # fmt: skip
        return int(ExitCode.BAD_INPUT)
    out_dir = Path(os.path.abspath(args.output))  # the caller's directory, not the project's
    problem = output_problem(out_dir)
    inventory_arg = args.inventory
    source = Path(os.path.abspath(inventory_arg))
    if source.exists():
        inventory_arg = str(source)
        problems = yaml_problems(source)
        if problems:
            for line in problems:
                print(line, file=sys.stderr)
            print(f"{PROG}: the inventory {source} cannot be read; nothing written", file=sys.stderr)
            return int(ExitCode.BAD_INPUT)
    elif "," not in inventory_arg:  # Ansible also takes "host1,host2," lists
        print(f"{PROG}: {missing_path(inventory_arg, '-i')} (relative to {os.getcwd()})", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    if problem is not None:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    try:
        inventory, printed = read_hosts(inventory_arg, args.group)
    except InventoryError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    inputs, problems, warnings = host_inputs(inventory, printed)
    kinds = None if not args.kind else (list(KINDS) if "all" in args.kind else list(args.kind))
    plan = plan_from_hosts(inputs, nccl_env_profiles(), kinds)
    for warning in [*warnings, *plan.warnings]:
        print(f"WARNING {warning}", file=sys.stderr)
    # A value the argument spec refused is named once: the plan's own line about that host's variable repeats it.
    named = {match.groups() for line in problems if (match := _HOST_VARIABLE.match(line))}
    problems += [line for line in plan.problems
                 if not ((match := _HOST_VARIABLE.match(line)) and match.groups() in named)]  # fmt: skip
    for planned in plan.files:
        target = Path(os.path.normpath(out_dir / planned.path))
        if not target.is_relative_to(out_dir):
            problems.append(f"{planned.path}: would be written outside -o {out_dir}; a name in it is not plain")
        else:
            problems += _blocked(out_dir, target)
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        print(f"{PROG}: {len(problems)} problem(s); nothing written", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    if args.validate and args.kubernetes_version:
        from rdmaforge.workloads import validate

        try:
            validate.check_version(args.kubernetes_version)
        except validate.UnknownVersion as exc:
            print(f"{PROG}: {exc}; nothing written", file=sys.stderr)
            return int(ExitCode.BAD_INPUT)
        except validate.ValidatorUnavailable as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return int(ExitCode.ERROR)
    if args.validate:
        # Before anything is written (review round 37a: INVALID manifests were left in -o after exit 1).
        try:
            judged = _judged(plan, args.kubernetes_version)
        except RuntimeError as exc:  # ValidatorUnavailable
            print(f"{PROG}: {exc}; nothing written", file=sys.stderr)
            return int(ExitCode.ERROR)
        invalid = {manifest: found for manifest, found in judged.items() if found}
        for manifest, found in invalid.items():
            for problem in found:
                print(f"INVALID {manifest}: {problem}", file=sys.stderr)
        if invalid:
            print(f"{PROG}: {len(invalid)} manifest(s) failed validation; nothing written", file=sys.stderr)
            return int(ExitCode.ERROR)
    written, unchanged = write_files(plan, out_dir)
    for path in written:
        print(f"{'unchanged' if path in unchanged else 'wrote  '} {path}")
    stale = stale_warning((f.path for f in plan.files), out_dir)
    if stale:
        print(f"WARNING -o {stale}", file=sys.stderr)
    if args.validate:
        return _validated(plan, written, out_dir, args.kubernetes_version)
    return 0
