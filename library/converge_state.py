#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: converge_state
short_description: Record what a converge left on a node, and tell later whether anything has drifted since
description:
  - With O(state=record), observes every resource of O(resources) (files, directory listings, packages,
    services, read-only commands) plus a fingerprint of the node (boot id, kernel, OS release, links and
    addresses, SSH host keys, kernel command line, huge page pools, RDMA devices, GPUs) and stores them with
    O(digest) and O(controller_files) in O(path). rdmaforge's C(converge_ledger) callback collects
    O(resources) from the tasks a converge ran, so the record lists what the roles manage and what they read.
  - With O(state=check), observes the recorded resources again in one call and compares. RV(in_sync) is
    true only when the record exists, its digest equals O(digest), its format is known, every controller file
    it keeps is in O(controller_files) with the same hash (files there that it does not keep are not looked at),
    the converge that wrote it had no task without a drift check (RV(reasons) names them otherwise), the
    fingerprint is the same and every observation is identical. Anything else is reported in RV(reasons), in
    plain words.
  - Read-only with O(state=check), also in check mode. O(state=record) reports a change only when the
    stored record differs from what it would write.
version_added: "0.2.0"
author:
  - rdmaforge contributors
options:
  state:
    description: C(check) compares the node with its record; C(record) writes the record.
    type: str
    choices: [check, record]
    default: check
  path:
    description: Where the record is kept on the node.
    type: path
    default: /var/lib/rdmaforge/converge-state.json
  digest:
    description:
      - The controller's digest of what decides this node's desired state (code, this host's variables and
        groups). A record with another digest is never in sync.
    type: str
    required: true
  cluster_digest:
    description:
      - The controller's digest of the whole cluster (the same, with every host's variables and groups), stored
        with O(state=record). With O(state=check), a record written for another cluster digest leaves
        RV(in_sync) as it is and sets RV(cluster_changed) - the node itself is in sync, but the files that
        list the other nodes must be written again.
    type: str
  controller_files:
    description:
      - The files of the controller caches the roles copy from (the cluster SSH key, keyrings, NCCL builds), as
        a mapping of each file's path (C(<cache>/<relative name>)) to a hash of it. Stored with O(state=record).
      - With O(state=check), the files as the controller sees them now. Each file the record keeps that is missing
        here, or has another hash, is named in RV(reasons) (not the node's own drift, RV(drift_local) is false), so
        the node converges in full. A file here that the record does not keep is not looked at - it was added after
        the node's converge, which did not read it (every controller cache file is keyed by something in the node's
        variables or the code, which O(digest) covers).
    type: dict
    default: {}
  resources:
    description:
      - With O(state=record), what to observe. Keys C(paths) (type, owner, mode and content hash),
        C(listings) (the names in a directory, or only those matching a find task's patterns, as deep as it
        looked), C(packages) (a mapping of C(apt)/C(dnf) to names),
        C(services) (active and enabled state), C(venvs) (the packages installed in a Python venv, read from
        its metadata files), C(commands) (argv lists of read-only commands whose exit code and sorted output are
        kept) and C(unverifiable) (tasks the ledger could not check; a record
        with any of them is never in sync).
    type: dict
  summary:
    description: The node's summary to keep with the record (returned as RV(summary) by O(state=check)).
    type: dict
  merge:
    description:
      - With O(state=record), keep what the stored record lists beside O(resources), with the stored
        observations of what O(resources) does not list (a change to one of those since the last record is
        drift the next check names), and observe O(resources) again.
        For a node that was in sync and skipped its own roles in a run that converged other nodes; this run's
        ledger then lists only the cluster-wide tasks it ran, and a record of those alone would check less
        than the last complete converge did.
      - When the stored record cannot be merged (missing, unreadable, another format or digest), the new
        record is marked unverifiable, so the next run converges the node in full.
    type: bool
    default: false
  command_timeout:
    description:
      - Seconds each recorded command (and each query of the node's state) may run. One that runs longer is not
        verified - O(state=check) is then not in sync - and O(state=record) writes a record that is never in sync.
    type: int
    default: 30
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Compare the node with what the last converge left
  converge_state:
    digest: "{{ converge_state_digests.nodes[inventory_hostname] }}"
    cluster_digest: "{{ converge_state_digests.cluster }}"
    controller_files: "{{ converge_state_digests.files }}"
  register: state

# The controller files to record: the start's, with those this run added (worked out once, run_once)
- name: Record what this converge left
  converge_state:
    state: record
    digest: "{{ converge_state_digests.nodes[inventory_hostname] }}"
    cluster_digest: "{{ converge_state_digests.cluster }}"
    controller_files: "{{ converge_state_recorded_files }}"
    resources:
      paths: [/etc/nccl.conf]
      packages: {apt: [rdma-core, ibverbs-utils]}
      services: [systemd-networkd]
      commands: [[ip, rule, show]]
- name: Record a node that skipped its own roles, keeping what its last record lists
  converge_state:
    state: record
    digest: "{{ converge_state_digests.nodes[inventory_hostname] }}"
    controller_files: "{{ converge_state_digests.files }}"
    resources: {paths: [/etc/hosts]}
    merge: true
"""

RETURN = r"""
in_sync:
  description: True when nothing differs from the record (O(state=check)).
  returned: always
  type: bool
cluster_changed:
  description:
    - Why the record's cluster digest is not O(cluster_digest) (a node added or removed, another host's
      variables changed); empty when it is the same, when O(cluster_digest) is not given, or with no record.
  returned: always
  type: str
reasons:
  description: What differs, one line each, at most 20 (more are counted in the last line).
  returned: always
  type: list
  elements: str
drift_local:
  description:
    - True when the node differs from its record only in resources its tasks manage or read (files, directory
      listings, packages, services, venvs, the output of read-only commands run on the node). Such drift is the
      node's own - the other nodes' cluster-wide files (/etc/hosts, SSH trust, the MPI hostfile) do not depend
      on it - so only this node has to run the cluster-wide plays again. False when in sync, and whenever the
      fingerprint (host keys, addresses, boot, hostname), the record, the desired state or a controller file the
      record keeps differs.
  returned: always
  type: bool
host_identity:
  description:
    - What the node answers to and proves itself with, read in this call (O(state=check)) - its SSH host public
      keys (C(ssh_host_keys), by kind - ed25519, ecdsa, rsa - each with C(keytype) and C(key), from the first of
      C(/etc/ssh), C(/etc/openssh), C(/etc) that holds any, as Ansible's ssh_pub_keys facts) and its IPv4
      addresses but loopback (C(ipv4_addresses), sorted).
    - The ssh_trust role writes the other nodes' ssh_known_hosts lines from it, without a delegated fact
      gathering on each node the run leaves out of its SSH trust play.
  returned: when O(state=check)
  type: dict
summary:
  description: The summary kept with the record, when there is one.
  returned: when a record exists
  type: dict
observed:
  description: How many resources were observed.
  returned: always
  type: int
"""

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.converge_resources import (
    NAME_KINDS,
    file_sha256,
    observe_listing,
    shape_problem,
)
from ansible_collections.rdmaforge.cluster.plugins.module_utils.converge_resources import merge as merge_resources
from ansible_collections.rdmaforge.cluster.plugins.module_utils.gpu_topology import gpu_functions
from ansible_collections.rdmaforge.cluster.plugins.module_utils.packages import (
    package_name,
    parse_query,
    query_argv,
    venv_packages,
)

#: 2: the record keeps the controller files (controller_files) beside a digest that no longer covers them.
#: 3: a file past HASH_LIMIT is also known by its inode and ctime; an RDMA port by its rate and physical state too;
#: grubby's output in its own order; the GPUs of the PCI tree.
FORMAT = 3
MAX_REASONS = 20
# Files up to this size are hashed; bigger ones (archives, libraries) are compared by size, mtime, inode and ctime:
# a write in place with the mtime put back (cp -p, rsync -a, touch -r) still moves the ctime, which user space
# cannot set (review round 25a: build_tree's full check hashes them, so the fast path must see such a write too).
HASH_LIMIT = 8 * 1024 * 1024
_LIFETIME = re.compile(r"\s(valid_lft|preferred_lft)\s+\S+")


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def observe_path(path: str) -> dict[str, Any]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"type": "absent"}
    except OSError as exc:
        return {"type": "error", "error": exc.strerror or str(exc)}
    meta = {"mode": f"{stat.S_IMODE(st.st_mode):04o}", "uid": st.st_uid, "gid": st.st_gid}
    if stat.S_ISLNK(st.st_mode):
        return {"type": "link", "target": os.readlink(path)}
    if stat.S_ISDIR(st.st_mode):
        return dict(meta, type="dir")
    if not stat.S_ISREG(st.st_mode):
        return dict(meta, type="other")
    if st.st_size > HASH_LIMIT:
        return dict(meta, type="file", size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino,
                    ctime_ns=st.st_ctime_ns)  # fmt: skip
    try:
        sha256 = file_sha256(path)
    except OSError as exc:
        return {"type": "error", "error": exc.strerror or str(exc)}
    return dict(meta, type="file", size=st.st_size, sha256=sha256)


#: Each command of this module run that timed out (argv joined): its output is unknown, and the same "timed out"
#: at the record and at the check made a hung `ip` or package query compare equal (review round 37c). A check with
#: any is not in sync; a record with any is unverifiable. (One module run per process; appended from threads.)
TIMED_OUT: list[str] = []


def _run(argv: list[str], timeout: int) -> tuple[int, str]:
    env = dict(os.environ, LC_ALL="C", LANG="C")
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=timeout, env=env)
    except FileNotFoundError:
        return 127, ""
    except subprocess.TimeoutExpired:
        TIMED_OUT.append(" ".join(argv))
        return -1, f"timed out after {timeout}s"
    except OSError as exc:
        return 126, str(exc)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


#: Commands whose output's order is state: grubby --info=ALL prints one block per boot entry, and which entry an
#: args= line is in is what the kernel boots with (review round 25a: sorted, the default entry losing its huge page
#: arguments to another entry read the same).
ORDERED_OUTPUT = frozenset({"grubby"})


def observe_command(argv: list[str], timeout: int) -> dict[str, Any]:
    rc, out = _run(argv, timeout)
    lines = [line.rstrip() for line in out.splitlines() if line.strip()]
    if os.path.basename(argv[0]) not in ORDERED_OUTPUT:
        # Sorted lines: the order of, say, mpirun's ranks is not state; the lines themselves are.
        lines.sort()
    return {"rc": rc, "stdout_sha256": _sha256_bytes("\n".join(lines).encode())}


def observe_venv(venv: str) -> Any:
    listing = venv_packages(venv)
    return "absent" if listing is None else listing


def observe_packages(manager: str, names: list[str], timeout: int) -> dict[str, str]:
    wanted = sorted({package_name(n) for n in names if n and not n.startswith("/") and "://" not in n})
    if not wanted:
        return {}
    found = parse_query(_run(query_argv(manager, wanted), timeout)[1])
    return {name: found.get(name, "absent") for name in wanted}


def observe_services(names: list[str], timeout: int) -> dict[str, str]:
    """Each unit's ``active/enabled`` state. One ``systemctl show`` prints a block per unit, in the order asked, a
    unit without a unit file included; ``systemctl is-enabled`` prints nothing for such a unit, which paired the
    next unit's state with it (review round 21a)."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    blocks = _unit_blocks(wanted, timeout)
    if len(blocks) != len(wanted):
        # Not a block per unit (a name systemd reads as a pattern matches several, or none): one unit at a time, so
        # one odd name does not leave every service unread, recorded and checked alike (review round 22).
        blocks = [(_unit_blocks([name], timeout) or [{}])[0] for name in wanted]
    return {
        name: "{}/{}".format(block.get("ActiveState") or "?", block.get("UnitFileState") or "?")
        for name, block in zip(wanted, blocks)
    }


def _unit_blocks(names: list[str], timeout: int) -> list[dict[str, str]]:
    rc, out = _run(["systemctl", "show", "--property=ActiveState,UnitFileState", "--"] + names, timeout)
    if rc != 0 or not out.strip():
        return []
    return [dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
            for block in out.strip("\n").split("\n\n")]  # fmt: skip


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return "absent"


def _glob_dir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


class NodeReading:
    """One reading of the node per module run: the fingerprint and host_identity share the ``ip -o addr show``
    output and the host key files instead of reading them twice."""

    def __init__(self, timeout: int) -> None:
        self.timeout = timeout
        self._files: dict[str, str] = {}
        self._addresses: tuple[int, str] | None = None

    def read(self, path: str) -> str:
        if path not in self._files:
            self._files[path] = _read(path)
        return self._files[path]

    def addresses(self) -> tuple[int, str]:
        """``ip -o addr show`` (every family): its exit code and output."""
        if self._addresses is None:
            self._addresses = _run(["ip", "-o", "addr", "show"], self.timeout)
        return self._addresses


def rdma_ports(root: str = "/sys/class/infiniband") -> dict[str, dict[str, str]]:
    """Each RDMA port's state, physical state and rate, as the kernel shows them. The rate too: rdma_core fails a port
    that trained down below rdma_core_min_port_rate_gbps while still ACTIVE (review round 25a)."""
    found = {}
    for dev in _glob_dir(root):
        ports = f"{root}/{dev}/ports"
        found[dev] = {p: " | ".join(_read(f"{ports}/{p}/{name}") for name in ("state", "phys_state", "rate"))
                      for p in _glob_dir(ports)}  # fmt: skip
    return found


def fingerprint(reading: NodeReading) -> dict[str, Any]:
    """What the tasks read from facts and the kernel: when any of it changes, the roles may decide otherwise."""
    timeout = reading.timeout
    links = _run(["ip", "-o", "link", "show"], timeout)[1]
    addrs = _LIFETIME.sub("", reading.addresses()[1])
    keys = {}
    for name in _glob_dir("/etc/ssh"):
        if name.startswith("ssh_host_") and name.endswith(".pub"):
            keys[name] = _sha256_bytes(reading.read(os.path.join("/etc/ssh", name)).encode())
    pools = {p: _read(f"/sys/kernel/mm/hugepages/{p}/nr_hugepages") for p in _glob_dir("/sys/kernel/mm/hugepages")}
    gpus = _run(["nvidia-smi", "-L"], timeout) if shutil.which("nvidia-smi") else (0, "")
    return {
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "hostname": os.uname()[1],
        "kernel": os.uname()[2],
        "os_release": _sha256_bytes(_read("/etc/os-release").encode()),
        "cmdline": _read("/proc/cmdline"),
        "links": _sha256_bytes(re.sub(r"\d+: ", "", links).encode()),
        "addresses": _sha256_bytes(addrs.encode()),
        "ssh_host_keys": keys,
        "hugepages": pools,
        "rdma_devices": rdma_ports(),
        "gpus": _sha256_bytes(gpus[1].encode()),
        # The PCI tree's GPUs too: without the driver, nvidia-smi says nothing, and the node probe counts them by
        # lspci or sysfs; a GPU gone there is every node's change (the MPI hostfiles' slots; review round 25a).
        "gpu_pci": gpu_functions(),
    }


HOST_KEY_DIRS = ("/etc/ssh", "/etc/openssh", "/etc")
HOST_KEY_KINDS = ("ed25519", "ecdsa", "rsa")


def host_identity(reading: NodeReading) -> dict[str, Any]:
    """The node's SSH host public keys and IPv4 addresses, as ssh_known_hosts lines need them (RV(host_identity))."""
    keys: dict[str, dict[str, str]] = {}
    for directory in HOST_KEY_DIRS:
        for kind in HOST_KEY_KINDS:
            words = reading.read(os.path.join(directory, f"ssh_host_{kind}_key.pub")).split()
            if len(words) >= 2:
                keys[kind] = {"keytype": words[0], "key": words[1]}
        if keys:
            break
    rc, out = reading.addresses()
    addresses = set()
    for line in out.splitlines() if rc == 0 else []:
        words = line.split()
        if "inet" in words[:-1]:  # IPv4 only: an IPv6 line says inet6
            address = words[words.index("inet") + 1].split("/", 1)[0]
            if not address.startswith("127."):
                addresses.add(address)
    return {"ssh_host_keys": keys, "ipv4_addresses": sorted(addresses)}


def observe(resources: dict[str, Any], timeout: int) -> dict[str, Any]:
    packages = resources.get("packages") or {}
    commands = [list(argv) for argv in resources.get("commands") or []]
    # The commands, package and service queries run side by side: the check is one round trip whose length is
    # its slowest command, not their sum.
    with ThreadPoolExecutor(max_workers=8) as pool:
        ran = [pool.submit(observe_command, argv, timeout) for argv in commands]
        pkgs = {m: pool.submit(observe_packages, m, list(n), timeout) for m, n in sorted(packages.items())}
        services = pool.submit(observe_services, list(resources.get("services") or []), timeout)
        return {
            "paths": {p: observe_path(p) for p in sorted(set(resources.get("paths") or []))},
            "listings": {p: observe_listing(p) for p in sorted(set(resources.get("listings") or []))},
            "venvs": {v: observe_venv(v) for v in sorted(set(resources.get("venvs") or []))},
            "packages": {m: f.result() for m, f in pkgs.items()},
            "services": services.result(),
            "commands": [dict(f.result(), argv=argv) for f, argv in zip(ran, commands)],  # noqa: B905 (3.8)
        }


def _count(resources: Any) -> int:
    """The resources a record lists; 0 for a ``resources`` that is no mapping (a damaged record, reported as a
    reason by compare_record: never a traceback here)."""
    if not isinstance(resources, dict):
        return 0
    return sum(len(v) for k, v in resources.items() if isinstance(v, (list, dict)) and k != "effects")


def _differences(kind: str, before: Any, after: Any) -> list[str]:
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after), key=str):
            if before.get(key) != after.get(key):
                out.append(f"{kind} {key}: was {_short(before.get(key))}, now {_short(after.get(key))}")
        return out
    return [f"{kind} changed"]


def _short(value: Any) -> str:
    if isinstance(value, dict):
        if "sha256" in value:
            return "{} (sha256 {}, mode {})".format(value.get("type"), value["sha256"][:12], value.get("mode"))
        if "ctime_ns" in value:  # a file past HASH_LIMIT
            return "{} ({} bytes, mode {}, inode {}, mtime_ns {}, ctime_ns {})".format(
                value.get("type"), value.get("size"), value.get("mode"), value.get("inode"), value.get("mtime_ns"),
                value["ctime_ns"])  # fmt: skip
        if value.get("type") in ("absent", "error"):
            return str(value.get("error") or value["type"])
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def controller_file_changes(recorded: Any, now: dict[str, Any]) -> list[str]:
    """A reason for each controller file the record keeps that ``now`` (O(controller_files)) lacks or hashes otherwise;
    files in ``now`` that the record does not keep were added since, and are not looked at."""
    if not isinstance(recorded, dict):
        return ["the record keeps no controller files (written by another rdmaforge)"]
    out = []
    for name in sorted(recorded):
        if name not in now:
            out.append(f"controller file {name} is gone since the record")
        elif now[name] != recorded[name]:
            out.append(f"controller file {name} changed since the record")
    return out


def compare(
    record: dict[str, Any], digest: str, files: dict[str, Any], reading: NodeReading
) -> tuple[list[str], bool]:
    """What differs from ``record``, and whether all of it is the node's own (see RV(drift_local))."""
    if record.get("format") != FORMAT:
        return [f"the record's format {record.get('format')!r} is not {FORMAT} (written by another rdmaforge)"], False
    if record.get("digest") != digest:
        return ["the desired state changed (code, inventory or variables) since the record"], False
    changed_files = controller_file_changes(record.get("controller_files"), files)
    if changed_files:
        return changed_files, False
    resources = record.get("resources") or {}
    unverifiable = resources.get("unverifiable") or []
    if unverifiable:
        return ["the record holds what no check can verify: {}".format(", ".join(unverifiable[:5]))], False
    node = _differences("fingerprint", record.get("fingerprint") or {}, fingerprint(reading))
    seen = record.get("observations") or {}
    now = observe(resources, reading.timeout)
    if TIMED_OUT:
        return [timed_out_reason(reading.timeout)], False
    own: list[str] = []
    for kind in NAME_KINDS:
        own += _differences(kind[:-1], seen.get(kind) or {}, now[kind])
    for manager in sorted(set(seen.get("packages") or {}) | set(now["packages"])):
        own += _differences("package", (seen.get("packages") or {}).get(manager) or {}, now["packages"][manager])
    # Recorded commands read the node itself: a test across nodes (the MPI launch) is never recorded
    # (converge_state_observe: false), so a command whose output changed is the node's own drift too.
    commands = []
    recorded_commands = seen.get("commands") or []
    if len(recorded_commands) != len(now["commands"]):  # a damaged record: nothing to pair the outputs by
        return ["the record's observations keep {} command output(s) for {} recorded command(s)".format(
            len(recorded_commands), len(now["commands"]))], False  # fmt: skip
    for old, new in zip(recorded_commands, now["commands"]):  # noqa: B905 (zip strict is 3.10+; targets run 3.8)
        if old != new:
            commands.append(
                "command `{}`: output or exit code changed (rc {}, now {})".format(
                    " ".join(new["argv"]), old.get("rc"), new["rc"]
                )
            )
    return node + own + commands, bool(own or commands) and not node


def timed_out_reason(timeout: int) -> str:
    shown = ", ".join(f"`{argv}`" for argv in dict.fromkeys(TIMED_OUT[:5]))
    return f"{shown} timed out after {timeout}s (converge_state_command_timeout): not verified"


def compare_record(
    record: dict[str, Any], digest: str, files: dict[str, Any], reading: NodeReading
) -> tuple[list[str], bool]:
    """compare(), with a record whose parts are not the shapes rdmaforge writes (a list for a mapping, a part
    missing) read as a difference: the node converges in full and its record is written anew. A traceback here
    failed the node before any change on every run, and the record was never rewritten."""
    try:
        return compare(record, digest, files, reading)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        return [f"the record is not as rdmaforge writes it ({type(exc).__name__}: {exc})"], False


def cluster_change(record: dict[str, Any], cluster_digest: str | None) -> str:
    if cluster_digest is None or record.get("cluster_digest") == cluster_digest:
        return ""
    return "the cluster changed since the record (a node added or removed, or another host's variables)"


def load(path: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None, f"no record at {path} (this node was not converged by rdmaforge with a complete run yet)"
    except (OSError, ValueError) as exc:
        return None, f"the record {path} cannot be read ({exc})"
    if not isinstance(data, dict):
        return None, f"the record {path} is not a JSON object"
    return data, None


def resources_to_record(
    path: str, digest: str, resources: dict[str, Any], merge: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The resources a new record lists (with ``merge``, those of the stored record as well: see the option), and
    the stored record's observations where it merged them ({} otherwise)."""
    if not merge:
        return resources, {}
    stored, problem = load(path)
    if stored is not None and stored.get("format") != FORMAT:
        problem = f"the stored record's format {stored.get('format')!r} is not {FORMAT}"
    elif stored is not None and stored.get("digest") != digest:
        problem = "the stored record was written for another desired state"
    if problem is None and stored is not None:
        try:
            observations = stored.get("observations")
            return (merge_resources(stored.get("resources") or {}, resources),
                    observations if isinstance(observations, dict) else {})  # fmt: skip
        except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a record not as rdmaforge writes it
            problem = f"the stored record's resources cannot be merged ({type(exc).__name__}: {exc})"
    unverifiable = list(resources.get("unverifiable") or [])
    unverifiable.append(f"a partial run with no earlier record to keep ({problem})")
    return dict(resources, unverifiable=unverifiable), {}


def keep_stored_observations(fresh: dict[str, Any], stored: dict[str, Any], ran: dict[str, Any]) -> dict[str, Any]:
    """``fresh`` observations, but the stored record's for each resource this run's tasks (``ran``) did not manage.
    A merged record (a node in sync that skipped its roles) read those again when it was written: a file edited
    after the gate's check, while other nodes converged, became the new baseline, in sync from then on (review round
    25a). Kept as stored, the next check sees the edit, and the node converges."""
    kept = dict(fresh)
    for kind in ("paths", "listings", "venvs"):
        mine, old = set(ran.get(kind) or []), stored.get(kind)
        if isinstance(old, dict):
            kept[kind] = {key: old[key] if key in old and key not in mine else value
                          for key, value in fresh[kind].items()}  # fmt: skip
    old_packages, ran_packages = stored.get("packages"), ran.get("packages") or {}
    if isinstance(old_packages, dict):
        kept["packages"] = {}
        for manager, found in fresh["packages"].items():
            mine, old = set(ran_packages.get(manager) or []), old_packages.get(manager)
            old = old if isinstance(old, dict) else {}
            kept["packages"][manager] = {name: old[name] if name in old and name not in mine else version
                                         for name, version in found.items()}  # fmt: skip
    old_services = stored.get("services")
    if isinstance(old_services, dict) and isinstance(fresh["services"], dict):
        mine = set(ran.get("services") or [])
        kept["services"] = {name: old_services[name] if name in old_services and name not in mine else state
                            for name, state in fresh["services"].items()}  # fmt: skip
    old_commands = stored.get("commands")
    if isinstance(old_commands, list):
        by_argv = {json.dumps(c.get("argv")): c for c in old_commands if isinstance(c, dict)}
        mine = {json.dumps(list(argv)) for argv in ran.get("commands") or []}
        kept["commands"] = [by_argv.get(key, entry) if key not in mine else entry
                            for entry in fresh["commands"] for key in (json.dumps(entry.get("argv")),)]  # fmt: skip
    return kept


def write_record(module: AnsibleModule, path: str, record: dict[str, Any]) -> bool:
    text = json.dumps(record, sort_keys=True, indent=1) + "\n"
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
    except (OSError, ValueError):  # unreadable or not UTF-8: a damaged record, written anew (it tracebacked)
        pass
    if module.check_mode:
        return True
    directory = os.path.dirname(path) or "."
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)  # a reader never sees half a record
    except OSError as exc:
        module.fail_json(msg=f"cannot write the converge record {path}: {exc}")
    return True


ARGUMENT_SPEC: dict[str, Any] = {
    "state": {"type": "str", "choices": ["check", "record"], "default": "check"},
    "path": {"type": "path", "default": "/var/lib/rdmaforge/converge-state.json"},
    "digest": {"type": "str", "required": True},
    "cluster_digest": {"type": "str"},
    "controller_files": {"type": "dict", "default": {}},
    "resources": {"type": "dict"},
    "summary": {"type": "dict"},
    "command_timeout": {"type": "int", "default": 30},
    "merge": {"type": "bool", "default": False},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    path, digest, timeout = params["path"], params["digest"], params["command_timeout"]
    if timeout < 1:  # 0 timed every command out, and the record and the check then agreed on nothing read
        module.fail_json(msg=f"command_timeout={timeout} is not allowed; allowed: a whole number of seconds, 1 or more "
                             "(converge_state_command_timeout)")  # fmt: skip
    problem = shape_problem(params["resources"])
    if problem:
        module.fail_json(msg=f"resources: {problem}")
    if params["state"] == "record":
        ran = params["resources"] or {}
        resources, stored_observations = resources_to_record(path, digest, ran, params["merge"])
        observations = observe(resources, timeout)
        if stored_observations:
            observations = keep_stored_observations(observations, stored_observations, ran)
        node = fingerprint(NodeReading(timeout))
        if TIMED_OUT:  # what was not read cannot be checked later: the next check converges in full
            unverifiable = [*(resources.get("unverifiable") or []), timed_out_reason(timeout)]
            resources = dict(resources, unverifiable=unverifiable)
        record = {
            "format": FORMAT,
            "digest": digest,
            "cluster_digest": params["cluster_digest"],
            "controller_files": params["controller_files"],
            "resources": resources,
            "fingerprint": node,
            "observations": observations,
            "summary": params["summary"] or {},
        }
        changed = write_record(module, path, record)
        module.exit_json(
            changed=changed,
            in_sync=True,
            reasons=[],
            drift_local=False,
            cluster_changed="",
            observed=_count(resources),
            path=path,
        )
    stored, problem = load(path)
    reading = NodeReading(timeout)
    if stored is None:
        module.exit_json(
            changed=False,
            in_sync=False,
            reasons=[problem],
            drift_local=False,
            cluster_changed="",
            observed=0,
            host_identity=host_identity(reading),
            path=path,
        )
        return
    reasons, local = compare_record(stored, digest, params["controller_files"], reading)
    if len(reasons) > MAX_REASONS:
        reasons = reasons[: MAX_REASONS - 1] + [f"... and {len(reasons) - MAX_REASONS + 1} more"]
    module.exit_json(
        changed=False,
        in_sync=not reasons,
        reasons=reasons,
        drift_local=local,
        cluster_changed=cluster_change(stored, params["cluster_digest"]),
        observed=_count(stored.get("resources") or {}),
        summary=stored.get("summary") or {},
        host_identity=host_identity(reading),
        path=path,
    )


if __name__ == "__main__":
    main()
