"""One lab node: an overlay on the base image, its identity files, and its supervisor process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from rdmaforge.lab import supervisor
from rdmaforge.lab.shell import LabError, mount_overlay, pid_alive, quiet, run, signal_group, signal_process
from rdmaforge.lab.spec import NodeSpec
from rdmaforge.paths import PROJECT_ROOT

CUDA_ON_CONTROLLER = Path("/usr/local/cuda")
LAB_KEYRING = "/usr/share/keyrings/rdmaforge-lab-archive-keyring.gpg"


def mounted(path: Path) -> bool:
    target = str(path)
    with open("/proc/self/mountinfo") as info:
        return any(line.split()[4] == target for line in info)


def mounts_under(prefix: Path) -> list[str]:
    with open("/proc/self/mountinfo") as info:
        points = [line.split()[4] for line in info]
    inside = [p for p in points if p == str(prefix) or p.startswith(f"{prefix}/")]
    return sorted(set(inside), key=len, reverse=True)  # deepest first


def ensure_overlay(base: Path, node_dir: Path) -> Path:
    root = node_dir / "root"
    if not mounted(root):
        mount_overlay(base, node_dir, root)
    return root


def write_identity(
    root: Path,
    node: NodeSpec,
    all_nodes: list[NodeSpec],
    controller_pub: str,
    keyring: bytes,
    mirror_url: str,
    suite: str,
) -> None:
    """Per-node files: hostname, node names in /etc/hosts, machine-id, host keys, root's key, apt source.

    Safe on a running node: only what the lab owns is rewritten (its marked block in /etc/hosts, its own
    apt source), so a converged node stays converged when `lab up` runs again or adds nodes.
    """
    hostname = root / "etc" / "hostname"
    if hostname.read_text().strip() != node.name:
        hostname.write_text(f"{node.name}\n")
    write_if_changed(root / "etc" / "hosts", with_lab_block(read_text(root / "etc" / "hosts"), all_nodes))
    # No DNS server is reachable from the lab: without a nameserver line the resolver fails at once instead of
    # waiting 5 s per query on the controller's (debootstrap copied its resolv.conf into the image).
    resolv = root / "etc" / "resolv.conf"
    if resolv.is_symlink():
        resolv.unlink()
    write_if_changed(resolv, "# rdmaforge lab: no DNS server; node names are in /etc/hosts\n")
    machine_id = root / "etc" / "machine-id"
    if not machine_id.read_text().strip():
        machine_id.write_text(uuid.uuid4().hex + "\n")
    if not (root / "etc" / "ssh" / "ssh_host_ed25519_key").exists():
        run(["ssh-keygen", "-A", "-f", str(root)])
    ssh_dir = root / "root" / ".ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    keys = ssh_dir / "authorized_keys"
    if controller_pub.strip() not in read_text(keys):
        with keys.open("a") as out:
            out.write(controller_pub.strip() + "\n")
    keys.chmod(0o600)
    keyring_path = root / LAB_KEYRING.lstrip("/")
    keyring_path.parent.mkdir(parents=True, exist_ok=True)
    if not keyring_path.exists() or keyring_path.read_bytes() != keyring:
        keyring_path.write_bytes(keyring)
    write_if_changed(
        root / "etc" / "apt" / "sources.list.d" / "rdmaforge-lab.sources",
        "# The lab's local mirror (stands in for the distro archive; tests never reach the internet).\n"
        f"Types: deb\nURIs: {mirror_url}/debian\nSuites: {suite}\nComponents: main\n"
        f"Signed-By: {LAB_KEYRING}\n",
    )


LAB_BLOCK_BEGIN = "# BEGIN rdmaforge lab nodes"
LAB_BLOCK_END = "# END rdmaforge lab nodes"


def with_lab_block(hosts: str, all_nodes: list[NodeSpec]) -> str:
    """/etc/hosts with the lab's block of node names replaced (or added); other lines untouched."""
    lines = hosts.splitlines()
    if not any(line.startswith("127.0.0.1") for line in lines):
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", *lines]
    block = [LAB_BLOCK_BEGIN, *(f"{n.address}\t{n.name}" for n in all_nodes), LAB_BLOCK_END]
    if LAB_BLOCK_BEGIN in lines and LAB_BLOCK_END in lines:
        # In place: moving it to the end would reorder the file around rdmaforge's own block, and a converged
        # node would differ from its converge record although neither block changed.
        start, end = lines.index(LAB_BLOCK_BEGIN), lines.index(LAB_BLOCK_END)
        lines[start : end + 1] = block
        return "\n".join(lines) + "\n"
    return "\n".join(lines + block) + "\n"


def read_text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def write_if_changed(path: Path, content: str) -> None:
    if read_text(path) != content:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def forget_package_indexes(root: Path) -> None:
    """The mirror was rebuilt: drop the node's apt indexes so that the next apt run fetches the new ones."""
    lists = root / "var" / "lib" / "apt" / "lists"
    for index in lists.glob("*_dists_*"):
        index.unlink()
    # ansible.builtin.apt's cache_valid_time looks at the update stamp, else at the mtime of lists/.
    (root / "var" / "lib" / "apt" / "periodic" / "update-success-stamp").unlink(missing_ok=True)
    if lists.exists():
        os.utime(lists, (0, 0))


def host_public_keys(root: Path) -> list[str]:
    return [
        p.read_text().split()[0] + " " + p.read_text().split()[1]
        for p in sorted((root / "etc" / "ssh").glob("ssh_host_*_key.pub"))
    ]


def binds() -> list[str]:
    if CUDA_ON_CONTROLLER.exists():
        return [f"{CUDA_ON_CONTROLLER.resolve()}:/usr/local/cuda"]  # like a GPU image with CUDA preinstalled
    return []


SUPERVISOR = "rdmaforge.lab.supervisor"


def supervisor_pid(node_dir: Path) -> int | None:
    return pid_alive(node_dir / "supervisor.pid", owner=SUPERVISOR)


def start(node: NodeSpec, node_dir: Path) -> None:
    if supervisor_pid(node_dir):
        return
    (node_dir / "stop").unlink(missing_ok=True)
    argv = [
        sys.executable,
        "-m",
        SUPERVISOR,
        "--name",
        node.name,
        "--root",
        str(node_dir / "root"),
        "--netns",
        node.netns,
        "--state",
        str(node_dir),
    ]
    argv += [f"--bind-ro={b}" for b in binds()]
    with (node_dir / "console.log").open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=PROJECT_ROOT,
        )
    (node_dir / "supervisor.pid").write_text(f"{proc.pid}\n")


def init_pid(node_dir: Path) -> int | None:
    """The PID (on this machine) of the node's systemd: the child of its systemd-nspawn; None when not booted."""
    try:
        nspawn = int((node_dir / "nspawn.pid").read_text().split()[0])
        children = Path(f"/proc/{nspawn}/task/{nspawn}/children").read_text().split()
    except (OSError, ValueError, IndexError):
        return None
    return int(children[0]) if children else None


def console(node_dir: Path, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` inside a booted node without SSH (its namespaces entered from this machine): how a test that
    stopped a node's sshd starts it again."""
    pid = init_pid(node_dir)
    if pid is None:
        raise LabError(f"{node_dir.name} is not booted: no systemd-nspawn child under {node_dir / 'nspawn.pid'}")
    return subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "--", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def stop(node_dir: Path, timeout: float = 30.0) -> None:
    """Orderly poweroff through the supervisor; anything still alive after ``timeout`` is killed."""
    (node_dir / "stop").touch()
    pid = supervisor_pid(node_dir)
    if pid is not None:
        signal_process(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and supervisor_pid(node_dir):
            time.sleep(0.2)
        if supervisor_pid(node_dir):
            signal_group(pid, signal.SIGKILL)  # the supervisor leads its own session: nspawn and the node with it
    kill_strays(node_dir)
    supervisor.kill_cgroup_members(node_dir.name)
    try:
        supervisor.remove_cgroups(node_dir.name)
    except OSError:
        time.sleep(1)  # processes of a killed node may take a moment to leave their cgroups
        supervisor.remove_cgroups(node_dir.name)


def kill_strays(node_dir: Path) -> None:
    """Kill processes left behind by a crashed run (pid files lost): anything whose command line names node_dir."""
    marker = str(node_dir).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in (1, os.getpid()):
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmdline:
            signal_process(int(proc.name), signal.SIGKILL)


def ssh_answers(address: str) -> bool:
    """sshd at ``address`` sends its banner (port open is not enough: it may still be starting)."""
    try:
        with socket.create_connection((address, 22), timeout=1) as sock:
            return sock.recv(4).startswith(b"SSH")
    except OSError:
        return False


def wait_for_ssh(address: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        if ssh_answers(address):
            return
        time.sleep(0.2)
    raise LabError(f"node at {address} did not start sshd in time")


def unmount_all(prefix: Path) -> None:
    for point in mounts_under(prefix):
        if not quiet(["umount", point]):
            quiet(["umount", "-l", point])
