"""The digests of what decides the desired state, and the controller files the nodes' records keep, computed on the
controller.

Both digests cover the code (roles, playbooks, modules, plugins, the rdmaforge package). A host's *node digest* adds
that host's own input variables (named by the roles' prefixes, minus the facts the roles set at run time) and its
groups: what the plays that touch only that node read. The *cluster digest* adds every host's inputs: what the
cluster-wide plays (/etc/hosts, SSH trust, the MPI hostfile) read. A node whose node digest changed converges in
full; a node added, removed or re-addressed changes only the cluster digest, so the others run just the
cluster-wide plays.

The files of the controller caches the roles copy from (the cluster SSH key, keyrings, NCCL and nccl-tests builds)
are not in the digests: each node's record keeps them file by file (cache_files()), and its check names a file the
record has that changed or is gone. A file added to a cache later is not one that node's converge used: every cache
file is keyed by something in the node's inputs or the code (a build id by the NCCL version, archs, functions and
commit variables; the erdma keyring by its fingerprint variable; the cluster key by ssh_trust_cluster_id), so with
those unchanged the node's converge reads the same files. A second NCCL build for a canary upgrade leaves the other
nodes in sync.

All of it is worked out at the start of a run; the record at its end keeps recorded_files(): the start's files, and
those the run added as they are then.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from rdmaforge import collection, fast_yaml
from rdmaforge.paths import CONTROLLER_CACHE, PACKAGE_DIR, RESOURCES

#: The rdmaforge package's code: its modules and its data (pyproject's package-data). Not compiled accelerators,
#: whose output equals the pure-Python code's, nor what a wheel adds under data/ (a copy of tests/infra and
#: ansible.cfg, which are not code the roles run).
PACKAGE_DATA = "data/*.txt"
#: Connection variables: where and as whom Ansible connects is part of the desired state's address.
CONNECTION_VARS = frozenset(
    {
        "ansible_host",
        "ansible_port",
        "ansible_user",
        "ansible_connection",
        "ansible_become",
        "ansible_become_user",
        "ansible_python_interpreter",
        "ansible_ssh_common_args",
        "ansible_ssh_private_key_file",
    }
)
#: Controller cache entries that are not desired state: the run locks change with every run, and ansiballz holds
#: Ansible's assembled module payloads (the module_cache callback), which grow as modules first run.
UNWATCHED = frozenset({"locks", "ansiballz"})
#: Input variables naming a controller-side directory whose files roles copy to the nodes.
CACHE_SUFFIX = "_controller_cache"
#: Variable prefixes read by roles beyond the role names themselves.
EXTRA_PREFIXES = ("rdmaforge_", "doctor_", "lab_")
#: Set by the gate itself on every run.
GATE_VARS = frozenset(
    {
        "converge_state_in_sync",
        "converge_state_digests",
        "converge_state_check",
        "converge_state_reasons",
        # Turning the fast path on or off changes how a run goes, not the desired state.
        "converge_state_fast_path",
        "converge_state_fast_path_per_node",
        "preflight_fast_path_gate",
    }
)


def _tree(name: str, path: Path) -> Iterator[tuple[str, Path]]:
    if path.is_file():
        yield name, path
    elif path.is_dir():
        for sub in path.rglob("*"):
            if sub.is_file() and not collection.is_skipped(sub.relative_to(path)):
                yield f"{name}/{sub.relative_to(path).as_posix()}", sub


def code_files(root: Path = RESOURCES, package: Path = PACKAGE_DIR) -> dict[str, Path]:
    """The code, each file named by its path in the collection (and rdmaforge/... for the package): a checkout
    and the collection installed from it (wheel or ansible-galaxy) name the same files alike, so the same code
    gives the same digest whichever of them runs the converge."""
    files = {name: path for target, origin in collection.code_entries(root) for name, path in _tree(target, origin)}
    modules = [path for path in package.rglob("*.py") if path.relative_to(package).parts[0] != "data"]
    for path in modules + list(package.glob(PACKAGE_DATA)):
        relative = path.relative_to(package)
        if path.is_file() and not collection.is_skipped(relative):
            files[f"rdmaforge/{relative.as_posix()}"] = path
    return files


@functools.lru_cache(maxsize=4)
def code_digest(root: Path = RESOURCES) -> str:
    digest = hashlib.sha256()
    for name, path in sorted(code_files(root).items()):
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _task_lists(node: Any) -> Iterable[Mapping[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from _task_lists(item)
    elif isinstance(node, Mapping):
        yield node
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            if key in node:
                yield from _task_lists(node[key])


@functools.lru_cache(maxsize=4)
def runtime_names(root: Path = RESOURCES) -> frozenset[str]:
    """Variables the roles and playbooks set while running (set_fact keys, register names)."""
    names: set[str] = set(GATE_VARS)
    files = list((root / "roles").glob("*/tasks/*.yml")) + list((root / "roles").glob("*/handlers/*.yml"))
    files += list((root / "playbooks").glob("*.yml"))
    for path in files:
        try:
            data = fast_yaml.load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        for task in _task_lists(data):
            if isinstance(task.get("register"), str):
                names.add(task["register"])
            facts = task.get("ansible.builtin.set_fact")
            if isinstance(facts, Mapping):
                names.update(k for k in facts if k != "cacheable")
    return frozenset(names | module_fact_names(root))


def module_fact_names(root: Path = RESOURCES) -> set[str]:
    """Facts rdmaforge's own modules publish (their RETURN's ansible_facts), kept in the fact cache."""
    names: set[str] = set()
    modules = root / "library" if (root / "library").is_dir() else root / "plugins" / "modules"
    for path in modules.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        start = text.find('RETURN = r"""')
        if start < 0:
            continue
        body = text[start + len('RETURN = r"""') : text.find('"""', start + len('RETURN = r"""'))]
        try:
            spec = fast_yaml.load(body) or {}
        except yaml.YAMLError:
            continue
        facts = spec.get("ansible_facts") if isinstance(spec, Mapping) else None
        if isinstance(facts, Mapping) and isinstance(facts.get("contains"), Mapping):
            names.update(str(k) for k in facts["contains"])
    return names


@functools.lru_cache(maxsize=4)
def role_prefixes(root: Path = RESOURCES) -> tuple[str, ...]:
    roles = [p.name for p in (root / "roles").iterdir() if p.is_dir()] if (root / "roles").is_dir() else []
    return tuple(sorted({r.split("_")[0] + "_" for r in roles} | set(EXTRA_PREFIXES)))


def is_input(name: str, prefixes: tuple[str, ...], runtime: frozenset[str]) -> bool:
    if name in CONNECTION_VARS:
        return True
    return name.startswith(prefixes) and name not in runtime


#: A name a template may read (a Jinja identifier).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: A template that reads from outside the inventory (an environment variable, a file, a command).
_LOOKUP = re.compile(r"\b(?:lookup|query|q)\s*\(")


def _templates(value: Any) -> Iterator[str]:
    """Every string holding a template in ``value`` (nested lists and mappings, keys too)."""
    if isinstance(value, str):
        if "{{" in value or "{%" in value:
            yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _templates(key)
            yield from _templates(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _templates(item)


def host_inputs(raw_vars: Mapping[str, Any], group_names: Iterable[str], root: Path = RESOURCES) -> dict[str, Any]:
    """The host's input variables, *as written* (not templated): a value such as
    ``"{{ ansible_facts.processor_vcpus }}"`` depends on facts, which the node fingerprint covers, and templating
    it would make the digest depend on whether the fact cache was warm. What a template reads from the inventory
    is an input too: ``nccl_env_overrides: "{{ vault_nccl_overrides }}"`` changes with vault_nccl_overrides, so
    every variable a template names (and what its own templates name) is kept under ``referenced``, as written."""
    prefixes, runtime = role_prefixes(root), runtime_names(root)
    names = sorted(k for k in raw_vars if isinstance(k, str) and is_input(k, prefixes, runtime))
    inputs = {n: raw_vars[n] for n in names}
    referenced: dict[str, Any] = {}
    pending = [template for name in names for template in _templates(raw_vars[name])]
    while pending:
        for word in _IDENTIFIER.findall(pending.pop()):
            if word in raw_vars and word not in inputs and word not in referenced:
                referenced[word] = raw_vars[word]
                pending += _templates(raw_vars[word])
    if referenced:
        inputs["referenced"] = dict(sorted(referenced.items()))
    inputs["group_names"] = sorted(group_names)
    return inputs


def _looked_up(inputs: Mapping[str, Any], templated: Mapping[str, Any]) -> dict[str, str]:
    """The values of the inputs whose templates read from outside the inventory (lookup, query), as Ansible
    templates them now; the template's error when it cannot (a value that then changes is seen too)."""
    found = {}
    # A variable an input's template names counts too (review round 25a: nccl_env_overrides: "{{ site_overrides }}"
    # with the lookup in site_overrides; its text never changes, its value does).
    referenced = inputs.get("referenced")
    every = [*((n, v) for n, v in inputs.items() if n != "referenced"),
             *(referenced.items() if isinstance(referenced, Mapping) else ())]  # fmt: skip
    for name, value in every:
        if not any(_LOOKUP.search(t) for t in _templates(value)):
            continue
        try:
            found[name] = repr(templated.get(name))
        except Exception as exc:  # noqa: BLE001 - any template error is the value's state, recorded as such
            found[name] = f"cannot be templated: {type(exc).__name__}"
    return found


def _plain_keys(value: Any) -> Any:
    """``value`` with every mapping key a string, so that json.dumps(sort_keys=True) can order a mapping whose keys
    mix types (``{1: a, spare: b}``), which it cannot compare."""
    if isinstance(value, Mapping):
        return {str(k): _plain_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_keys(v) for v in value]
    return value


def _raw(hostvars: Mapping[str, Mapping[str, Any]], host: str) -> tuple[Mapping[str, Any], list[str]]:
    """(the host's variables untemplated, its groups); plain mappings (tests) are taken as they are."""
    raw_get = getattr(hostvars, "raw_get", None)
    raw = raw_get(host) if callable(raw_get) else hostvars[host]
    if not isinstance(raw, Mapping):  # Ansible's marker for an unknown host
        raw = {}
    groups = hostvars[host].get("group_names") if isinstance(hostvars[host], Mapping) else None
    return raw, [str(g) for g in groups or []]


def observe_file(path: str) -> dict[str, Any]:
    """A controller-side file (size and mtime for big ones, sha256 otherwise)."""
    try:
        st = os.stat(path)
    except OSError:
        return {"type": "absent"}
    if st.st_size > 8 * 1024 * 1024:
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    with open(path, "rb") as handle:
        return {"size": st.st_size, "sha256": hashlib.sha256(handle.read()).hexdigest()}


def controller_files(directory: str) -> dict[str, Any]:
    """Files of a controller-side cache (SSH trust key, keyrings, NCCL builds), {relative name: observe_file()}."""
    out: dict[str, Any] = {}
    base = Path(directory)
    if not base.is_dir():
        return {}
    for entry in sorted(base.iterdir()):
        if entry.name in UNWATCHED:
            continue  # not even walked: the payload cache holds thousands of files
        for path in [entry] if entry.is_file() else sorted(entry.rglob("*")):
            if path.is_file():
                out[str(path.relative_to(base))] = observe_file(str(path))
    return out


def _inputs_and_caches(
    hostvars: Mapping[str, Mapping[str, Any]], hosts: Iterable[str], root: Path
) -> tuple[dict[str, bytes], list[str]]:
    """({host: sha256 of its input variables}, [each controller cache the hosts name, sorted])."""
    caches: set[str] = {str(CONTROLLER_CACHE)}  # where the roles' defaults keep keys, keyrings and builds
    per_host: dict[str, bytes] = {}
    for host in sorted(set(hosts)):
        raw, groups = _raw(hostvars, host)
        inputs = host_inputs(raw, groups, root)
        looked_up = _looked_up(inputs, hostvars[host]) if isinstance(hostvars[host], Mapping) else {}
        if looked_up:
            inputs["looked_up"] = looked_up
        for name in (k for k in inputs if k.endswith(CACHE_SUFFIX)):  # set in the inventory: templated here
            value = hostvars[host].get(name) if isinstance(hostvars[host], Mapping) else None
            if isinstance(value, str):
                caches.add(value)
        per_host[host] = hashlib.sha256(json.dumps(_plain_keys(inputs), sort_keys=True, default=str).encode()).digest()
    return per_host, sorted(caches)


def cache_files(caches: Iterable[str]) -> dict[str, str]:
    """{"<cache>/<relative name>": sha256 of controller_files' observation of it} for every file of the caches: what
    a node's record keeps of the controller files (a cache directory that is not there has no files)."""
    out: dict[str, str] = {}
    for cache in caches:
        for name, seen in controller_files(cache).items():
            out[f"{cache}/{name}"] = hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()
    return out


def _combine(code: str, per_host: Mapping[str, bytes]) -> dict[str, Any]:
    """{cluster, nodes} from the code digest and each host's inputs digest."""
    cluster = hashlib.sha256(code.encode())
    for host, inputs in sorted(per_host.items()):
        cluster.update(host.encode() + b"\0" + inputs)
    nodes = {
        host: hashlib.sha256(b"\0".join([code.encode(), host.encode(), inputs])).hexdigest()
        for host, inputs in sorted(per_host.items())
    }
    return {"cluster": cluster.hexdigest(), "nodes": nodes}


def digests(hostvars: Mapping[str, Mapping[str, Any]], hosts: Iterable[str], root: Path = RESOURCES) -> dict[str, Any]:
    """Both digests of the desired state and the controller files, from one read of the inputs and the caches:

    - ``cluster``: the code and every listed host's inputs and groups; it decides whether the cluster-wide plays
      run;
    - ``nodes``: {host: its node digest}, the code and that host's own inputs and groups; it decides whether the
      node converges in full. Adding or removing a node leaves the others' node digests alone;
    - ``files``: cache_files() of the controller caches the hosts name, which each node's record keeps and its
      check compares file by file (a file the record has that changed or is gone: the node converges in full);
    - ``caches``: those caches, which recorded_files reads again at the end of the run.
    """
    per_host, caches = _inputs_and_caches(hostvars, hosts, root)
    return dict(_combine(code_digest(root), per_host), files=cache_files(caches), caches=caches)


def recorded_files(start: Mapping[str, Any]) -> dict[str, str]:
    """The controller files the record at the end of the run keeps, given what the run started with (digests()):
    the files there at the start as the start saw them, and the files the run added as they are now.

    A file there at the start is recorded as the start saw it, even when the run changed or removed it: the nodes
    converged against that one, so the next run, which sees it otherwise, converges them in full. A file the run
    added (the verified erdma key, a fetched NCCL build, the cluster SSH key) is recorded as it is now, so the next
    run is in sync and a later change to it is seen.
    """
    files, caches = start.get("files"), start.get("caches")
    if not isinstance(files, Mapping) or not isinstance(caches, list):
        raise ValueError("recorded_files needs what digests() returned (with its files and caches)")
    return {**cache_files(str(cache) for cache in caches), **{str(k): str(v) for k, v in files.items()}}
