"""A node's read-only probes: its RDMA devices, its NICs, its GPU-to-NIC rail map and its GPU tools' answers.

The one implementation behind the ``rdma_devices``, ``nic_facts`` and ``gpu_topology`` Ansible modules, and behind
``node_probe``, which runs them all in one module call (one round trip to the node instead of one per probe:
preflight's and doctor's node probe). Shipped to targets as the collection's ``plugins/module_utils/probes.py`` (a
symlink to this file) with the parsers it imports: standard library only, Python 3.8.

A probe runs its commands through ``runner``, the calling AnsibleModule (``run_command``, ``get_bin_path``,
``warn``), or a TimedRunner around it, and raises ProbeError where the module it stands for fails; the module turns
it into its failure.
"""

from __future__ import annotations

import fnmatch
import os
import signal
import subprocess
from typing import TYPE_CHECKING, Any

from .gpu_topology import TopologyError, parse_topo_matrix, rail_map, read_sysfs_topology
from .nic_facts import (
    IpJsonError,
    build_nics,
    list_interfaces,
    parse_default_route,
    parse_ip_addr,
    parse_ip_list,
    read_sysfs_nic,
    routing_commands,
)
from .rdma_devinfo import (
    NO_DEVICES_MESSAGE,
    PROVIDER_MISSING,
    ibstat_errors,
    inactive_ports,
    merge_ibstat,
    merge_rdma_links,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_rdma_link,
    read_sysfs_devices,
)

if TYPE_CHECKING:  # annotations only; never evaluated at runtime (Python 3.8 targets)
    from collections.abc import Iterable, Sequence
    from typing import Protocol

    from .gpu_topology import RailMap, Topology
    from .rdma_devinfo import Device

    class Runner(Protocol):
        """What a probe needs of the AnsibleModule that runs it."""

        def run_command(self, args: list[str]) -> tuple[int, str, str]: ...

        def get_bin_path(self, arg: str) -> str | None: ...

        def warn(self, warning: str) -> None: ...


class ProbeError(Exception):
    """A probe that cannot answer: the module fails with ``msg`` (and ``result``, what it read before)."""

    def __init__(self, msg: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.result = result or {}


#: A command that did not answer within its deadline, as coreutils' timeout(1) reports it.
TIMED_OUT_RC = 124


class TimedRunner:
    """The calling module with a deadline on each command it runs (the modules' ``command_timeout``).

    A read that hangs while sshd still answers (nvidia-smi on a GPU that fell off the bus, df on a stale NFS mount,
    ibv_devinfo on a wedged HCA) otherwise holds the task, and with it the whole run and the inventory's lock, for
    ever: SSH keepalives only catch a dead connection. Such a command answers rc 124 and a stderr saying so, which
    each probe reads as the tool failing. The command runs in a session of its own and the whole session is killed;
    a process stuck in the kernel cannot die, so it is not waited for: its pipes are left to close with the module.
    """

    def __init__(self, module: Runner, timeout: int) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
            raise ProbeError(f"command_timeout must be a whole number of seconds, 1 or more; got {timeout!r}")
        self.module = module
        self.timeout = timeout
        # A tool that hung once (nvidia-smi -L on a GPU off the bus) hangs again (nvidia-smi topo -m): it is not
        # waited for twice in one probe.
        self.hung: set[str] = set()

    def get_bin_path(self, arg: str) -> str | None:
        return self.module.get_bin_path(arg)

    def warn(self, warning: str) -> None:
        self.module.warn(warning)

    def run_command(self, args: list[str]) -> tuple[int, str, str]:
        if args[0] in self.hung:
            return TIMED_OUT_RC, "", (f"{args[0]} did not answer within {self.timeout} s earlier in this probe "
                                     "(not asked again)")
        # the environment AnsibleModule.run_command gives its commands (the locale it settled on)
        env = dict(os.environ, **(getattr(self.module, "run_command_environ_update", None) or {}))
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env, start_new_session=True)  # fmt: skip
        except OSError as error:
            return 127 if isinstance(error, FileNotFoundError) else 126, "", f"{args[0]}: {error.strerror}"
        try:
            stdout, stderr = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass  # it ended in between
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass  # in uninterruptible sleep: left behind rather than waited for
            self.hung.add(args[0])
            return TIMED_OUT_RC, "", f"{args[0]} did not answer within {self.timeout} s (killed)"
        return proc.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace")


def executable(option: str, path: str) -> str:
    """``path``, given explicitly as ``option``: it must be an executable file (a typo there is the caller's
    mistake, not a host without the tool)."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ProbeError(f"{option}={path} is not an executable file")
    return str(path)


def find_tool(runner: Runner, path: str | None, option: str, name: str) -> str | None:
    """The executable ``path`` (option ``option``), or ``name`` looked up on PATH and the sbin directories."""
    if path is None:
        found = runner.get_bin_path(name)
        return str(found) if found else None
    return executable(option, path)


# --- RDMA devices (the rdma_devices module) ------------------------------------------------------------------


def _read_devices(runner: Runner, ibv_devinfo: str, sysfs_root: str) -> tuple[list[Device], bool]:
    """Run ``ibv_devinfo -v`` and parse it: (devices, whether it answered). Tool errors become warnings. A listing
    the tool cut short (it stops at a port it cannot query, and lists no device after it) is completed from the
    kernel's sysfs: the devices it left out, and the ports of the one it stopped at."""
    rc, stdout, stderr = runner.run_command([ibv_devinfo, "-v"])
    devices = parse_ibv_devinfo(stdout)
    if rc != 0 and not devices and NO_DEVICES_MESSAGE not in stdout + stderr:
        runner.warn(f"{ibv_devinfo} -v exited with {rc}: {stderr.strip() or stdout.strip()}")
        return [], False
    if rc != 0 and devices:
        # One device failing to open (a VF of another container, say) does not hide the others.
        devices, completed = _completed_from_sysfs(devices, sysfs_root)
        taken = f"; taken from {sysfs_root}: {', '.join(completed)}" if completed else ""
        runner.warn(f"{ibv_devinfo} -v exited with {rc}; using the devices it printed{taken}: {stderr.strip()}")
    return devices, True


def _kernel_devices(sysfs_root: str) -> list[str]:
    """The RDMA devices the kernel lists (its drivers' view), [] without the directory."""
    try:
        return sorted(name for name in os.listdir(sysfs_root) if not name.startswith("."))
    except OSError:
        return []


def _completed_from_sysfs(devices: list[Device], sysfs_root: str) -> tuple[list[Device], list[str]]:
    """``devices`` with what the kernel's sysfs has beyond them: devices not listed, and a device whose listed ports
    are fewer than its phys_port_cnt replaced by the kernel's record of it. The names taken from sysfs, in order."""
    kernel = {d["name"]: d for d in read_sysfs_devices(sysfs_root)} if os.path.isdir(sysfs_root) else {}
    listed = {d["name"] for d in devices}
    completed: list[str] = []
    result: list[Device] = []
    for device in devices:
        count = device.get("phys_port_cnt")
        short = isinstance(count, int) and len(device["ports"]) < count
        if short and device["name"] in kernel and kernel[device["name"]]["ports"]:
            result.append(kernel[device["name"]])
            completed.append(device["name"])
        else:
            result.append(device)
    for name in sorted(set(kernel) - listed):
        result.append(kernel[name])
        completed.append(name)
    return result, completed


def _add_netdevs(runner: Runner, rdma_path: str | None, devices: list[Device]) -> list[Device]:
    """Devices with each port's netdev from ``rdma link show``, when the tool is present and works."""
    rdma = find_tool(runner, rdma_path, "rdma_path", "rdma")
    if rdma is None or not devices:
        return devices
    rc, stdout, stderr = runner.run_command([rdma, "link", "show"])
    if rc != 0:
        runner.warn(f"{rdma} link show exited with {rc}, ports have no netdev: {stderr.strip()}")
        return devices
    return merge_rdma_links(devices, parse_rdma_link(stdout))


def _add_ibstat(
    runner: Runner, ibstat_path: str | None, devices: list[Device]
) -> tuple[list[Device], dict[str, Any] | None]:
    """Devices with ibstat's rates, and what ibstat said (None when it is not installed)."""
    ibstat = find_tool(runner, ibstat_path, "ibstat_path", "ibstat")
    if ibstat is None:
        return devices, None
    rc, stdout, stderr = runner.run_command([ibstat])
    cas = parse_ibstat(stdout)
    errors = ibstat_errors(stderr + "\n" + stdout)
    if rc != 0:
        runner.warn(f"{ibstat} exited with {rc}: {'; '.join(errors) or stderr.strip() or 'no message'}")
    merged, notes = merge_ibstat(devices, cas)
    # eRDMA and iWARP devices have no umad port, so ibstat never lists them; InfiniBand-transport ones (IB and RoCE)
    # it should, unless the ib_umad kernel module is not loaded.
    listed = {ca["name"] for ca in cas}
    unlisted = [d["name"] for d in devices if d["transport"] == "InfiniBand" and d["name"] not in listed]
    if unlisted and rc == 0:
        notes.append(f"ibstat does not list {', '.join(unlisted)}, which ibv_devinfo does (is ib_umad loaded?)")
    for note in notes:
        runner.warn(note)
    return merged, {"path": ibstat, "rc": rc, "cas": [ca["name"] for ca in cas], "errors": errors, "notes": notes}


def read_rdma_devices(
    runner: Runner,
    ibv_devinfo_path: str | None = None,
    rdma_path: str | None = None,
    ibstat_path: str | None = None,
    sysfs_root: str = "/sys/class/infiniband",
) -> dict[str, Any]:
    """The rdma_devices module's result (its port checks aside): ``ibv_devinfo -v``, else the kernel's sysfs, with
    ``rdma link show``'s netdevs and ibstat's rates where those tools are installed."""
    result: dict[str, Any] = {"changed": False, "tool_present": False}
    ibv_devinfo = find_tool(runner, ibv_devinfo_path, "ibv_devinfo_path", "ibv_devinfo")
    devices: list[Device] = []
    answered = False
    if ibv_devinfo is not None:
        result["tool_present"] = True
        devices, answered = _read_devices(runner, ibv_devinfo, sysfs_root)
    if answered:
        result["source"] = "ibv_devinfo"
        kernel = _kernel_devices(sysfs_root) if not devices else []
        if kernel:
            # The kernel's driver is loaded, libibverbs opened nothing: its user-space provider is what is missing.
            result["kernel_devices"] = kernel
            runner.warn(f"{ibv_devinfo} found no RDMA device, but the kernel has {', '.join(kernel)} ({sysfs_root}): "
                        f"{PROVIDER_MISSING}")  # fmt: skip
    elif os.path.isdir(sysfs_root):
        result["source"] = "sysfs"
        devices = read_sysfs_devices(sysfs_root)
    else:
        result["source"] = "none"
    devices = _add_netdevs(runner, rdma_path, devices)
    devices, result["ibstat"] = _add_ibstat(runner, ibstat_path, devices)
    result.update(devices=devices, inactive_ports=inactive_ports(devices), ansible_facts={"rdma_devices": devices})
    if ibv_devinfo is None:
        result["msg"] = "ibv_devinfo not found (install ibverbs-utils / libibverbs-utils)"
        if result["source"] == "sysfs":
            result["msg"] += f"; the devices come from {sysfs_root}"
    return result


# --- NICs (the nic_facts module) -------------------------------------------------------------------------------


def _ip_json(runner: Runner, ip: str, *arguments: str) -> str:
    rc, stdout, stderr = runner.run_command([ip, "-j", *arguments])
    if rc != 0:
        raise ProbeError(
            f"{ip} -j {' '.join(arguments)} failed with exit status {rc}: {stderr.strip() or stdout.strip()} "
            "(JSON output needs iproute2 4.14 or later)"
        )
    return str(stdout)


def _read_routing(runner: Runner, ip: str, tables: list[int], default_text: str) -> dict[str, Any]:
    """The rules, each table's routes and the main table's default routes (nic_facts' RV(routing));
    ``default_text`` is the ``ip -j route show default`` output read_nics already read."""
    rules_argv, *table_argvs, _ = routing_commands(tables, ip)
    routes: dict[str, Any] = {}
    for table, argv in zip(tables, table_argvs):
        rc, stdout, _ = runner.run_command(argv)
        # A table with no route does not exist for the kernel: ip prints an error and exits 2.
        routes[str(table)] = parse_ip_list(stdout, " ".join(argv[1:])) if rc == 0 else []
    return {
        "rules": parse_ip_list(_ip_json(runner, ip, *rules_argv[2:]), "ip -j rule show"),
        "tables": routes,
        "main_default": parse_ip_list(default_text, "ip -j route show default"),
    }


def read_nics(
    runner: Runner,
    sysfs_root: str = "/sys/class/net",
    ip_path: str | None = None,
    exclude: Iterable[str] = ("lo",),
    routing_tables: list[int] | None = None,
) -> dict[str, Any]:
    """The nic_facts module's result: every interface under ``sysfs_root`` but ``exclude``, joined with
    ``ip -j``'s addresses and default route (and, with ``routing_tables``, the policy routing state)."""
    if not os.path.isdir(sysfs_root):
        raise ProbeError(f"sysfs_root={sysfs_root} is not a directory (is /sys mounted?)")
    if ip_path is None:
        found = runner.get_bin_path("ip")
        if found is None:
            raise ProbeError("ip not found: install iproute2 (or set ip_path)")
        ip = str(found)
    else:
        ip = executable("ip_path", ip_path)
    try:
        links = parse_ip_addr(_ip_json(runner, ip, "addr", "show"))
        default_text = _ip_json(runner, ip, "route", "show", "default")
        route = parse_default_route(default_text)
    except IpJsonError as error:
        raise ProbeError(f"{error} (JSON output needs iproute2 4.14 or later)") from None
    sysfs = [read_sysfs_nic(sysfs_root, name) for name in list_interfaces(sysfs_root, exclude)]
    nics = build_nics(sysfs, links, route)
    default_interface = route["interface"] if route else None
    result: dict[str, Any] = {
        "changed": False,
        "nics": nics,
        "default_route_interface": default_interface,
        "default_route": route,
        "ansible_facts": {"nics": nics, "default_route_interface": default_interface},
    }
    if routing_tables is not None:
        try:
            result["routing"] = _read_routing(runner, ip, routing_tables, default_text)
        except IpJsonError as error:
            raise ProbeError(f"{error} (JSON output needs iproute2 4.14 or later)") from None
    return result


# --- GPU-to-NIC rails (the gpu_topology module) -----------------------------------------------------------------


def _topology_from_nvidia_smi(runner: Runner, nvidia_smi_path: str | None, required: bool) -> Topology | None:
    """The parsed matrix, or None when nvidia-smi is absent or fails and ``required`` is false."""
    # checked as ibv_devinfo_path and ip_path are: a typo fell back to sysfs without a word (review round 37c)
    path = find_tool(runner, nvidia_smi_path or None, "nvidia_smi_path", "nvidia-smi")
    if not path:
        if required:
            raise ProbeError("source=nvidia_smi but nvidia-smi was not found (set nvidia_smi_path)")
        return None
    rc, stdout, stderr = runner.run_command([path, "topo", "-m"])
    if rc != 0:
        if required:
            raise ProbeError(f"{path} topo -m failed with exit status {rc}: {(stderr or stdout).strip()}")
        return None
    try:
        return parse_topo_matrix(stdout)
    except TopologyError as error:
        raise ProbeError(f"{path} topo -m: {error}") from None


def read_topology(
    runner: Runner, source: str = "auto", nvidia_smi_path: str | None = None, sys_root: str = "/sys"
) -> RailMap:
    """The gpu_topology module's rail map: from ``nvidia-smi topo -m`` (``source`` auto or nvidia_smi), else from
    the PCI tree under ``sys_root``."""
    topology = None
    if source in ("auto", "nvidia_smi"):
        topology = _topology_from_nvidia_smi(runner, nvidia_smi_path, required=source == "nvidia_smi")
    if topology is None:
        topology = read_sysfs_topology(sys_root)
    return rail_map(topology)


# --- the GPU tools (the node_probe module) ------------------------------------------------------------------


def list_tools(directories: Iterable[str], patterns: Sequence[str]) -> list[str]:
    """The entries of ``directories`` (not below them) whose name matches one of ``patterns``, hidden names left
    out, as ``ansible.builtin.find`` with ``file_type: any`` lists them; a directory that cannot be read has none."""
    found = []
    for directory in directories:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        found += [
            os.path.join(directory, name)
            for name in names
            if not name.startswith(".") and any(fnmatch.fnmatch(name, pattern) for pattern in patterns)
        ]
    return found


def run_tool(runner: Runner, argv: list[str]) -> dict[str, Any]:
    """A read-only command's result as ``ansible.builtin.command`` registers it (cmd, rc, stdout and stderr without
    their final line break). A tool that is missing or not an executable file answers rc 127, as a shell says,
    rather than failing the module."""
    if not (os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK)):
        return {"cmd": argv, "rc": 127, "stdout": "", "stderr": f"{argv[0]}: not found or not an executable file"}
    rc, stdout, stderr = runner.run_command(argv)
    return {"cmd": argv, "rc": rc, "stdout": stdout.rstrip("\r\n"), "stderr": stderr.rstrip("\r\n")}


def skipped(why: str) -> dict[str, Any]:
    """The result of a command that was not run, as a skipped task registers it."""
    return {"skipped": True, "msg": why}
