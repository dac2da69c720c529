"""The lab: N Debian 12 nodes booted with systemd-nspawn, each in its own network namespace, on lab
bridges, with a local signed mirror. It stands in for a GPU cluster everywhere but the GPUs and RDMA NICs.

Used by `rdmaforge lab up|down|status|ssh` and by the test suite's `lab` fixture.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rdmaforge.lab import bootloader, cache, inventory, mirror, network, node, packages, rootfs
from rdmaforge.lab.shell import LabError, pid_alive, run
from rdmaforge.lab.spec import LabPaths, NodeSpec, node_spec, validate_counts
from rdmaforge.paths import PROJECT_ROOT

__all__ = ["Lab", "LabError", "LabStatus", "NodeStatus"]

BOOT_TIMEOUT = 90.0


@dataclass
class NodeStatus:
    name: str
    address: str
    running: bool
    ssh: bool
    boots: int


@dataclass
class LabStatus:
    running: bool
    nics: int = 0
    nodes: list[NodeStatus] = field(default_factory=list)
    mirror: str | None = None


class Lab:
    def __init__(self, paths: LabPaths | None = None) -> None:
        self.paths = paths or LabPaths()

    @property
    def inventory_path(self) -> Path:
        return self.paths.inventory_dir / "hosts.yml"

    @property
    def recorded_inventory(self) -> Path | None:
        """The inventory of the running lab, as the run that brought it up wrote it (None before it recorded one)."""
        try:
            given = json.loads(self.paths.state_file.read_text()).get("inventory")
        except (OSError, ValueError, AttributeError):
            return None
        return Path(given) if isinstance(given, str) and given else None

    @property
    def ssh_key(self) -> Path:
        return self.paths.ssh_key

    @property
    def known_hosts(self) -> Path:
        return self.paths.known_hosts

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.paths.lock.parent.mkdir(parents=True, exist_ok=True)
        with self.paths.lock.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _read_state(self) -> dict[str, int]:
        try:
            data: dict[str, int] = json.loads(self.paths.state_file.read_text())
            return data
        except (OSError, ValueError):
            return {}

    # --- up -------------------------------------------------------------------------------------------

    def up(self, nodes: int = 2, nics: int = 2) -> LabStatus:
        """Bring the lab to exactly `nodes` running nodes with `nics` extra NICs each (idempotent)."""
        validate_counts(nodes, nics)
        with self._locked():
            state = self._read_state()
            if state and state.get("nics") != nics and any(self.paths.nodes.glob("node*")):
                raise LabError(
                    f"the running lab has {state.get('nics')} extra NICs per node; run `rdmaforge lab "
                    f"down` before asking for {nics}"
                )
            base = rootfs.ensure_base(self.paths.cache)
            if not any(self.paths.nodes.glob("node*")):
                cache.remove_other_builds(base, keep=set())  # no node overlays an older image any more
            mirror_info = mirror.ensure_mirror(self.paths.cache, base)
            self.paths.state.mkdir(parents=True, exist_ok=True)
            self._ensure_controller_key()
            network.ensure_bridges(nics)
            mirror_changed = mirror.serve(
                mirror_info.www, self.paths.state / "mirror.pid", self.paths.state / "mirror.log"
            )
            specs = [node_spec(i, nics) for i in range(1, nodes + 1)]
            self._remove_extra_nodes(keep={s.name for s in specs})
            pub = (self.paths.ssh_key.with_suffix(".pub")).read_text()
            keyring = mirror_info.keyring.read_bytes()
            for spec in specs:
                network.ensure_node_network(spec)
                root = node.ensure_overlay(base, self.paths.node_dir(spec.name))
                node.write_identity(root, spec, specs, pub, keyring, mirror.MIRROR_URL, packages.SUITE)
                bootloader.install(root)
                if mirror_changed:
                    node.forget_package_indexes(root)
            network.forget_neighbours(specs, nics)  # a node created again has new MACs
            self._write_known_hosts(specs)
            # The inventory's path too: the lab is one per machine, and another checkout's `lab status` (or one
            # run from another directory, for an installed rdmaforge) would name an inventory of its own that
            # does not exist.
            self.paths.state_file.write_text(json.dumps({"nodes": nodes, "nics": nics,
                                                         "inventory": str(self.inventory_path.resolve())}))
            for spec in specs:
                node.start(spec, self.paths.node_dir(spec.name))
            deadline = time.monotonic() + BOOT_TIMEOUT
            with ThreadPoolExecutor(max_workers=len(specs)) as pool:
                list(pool.map(lambda s: self._wait_ready(s, deadline), specs))
            inventory.write(self.paths, specs, mirror_info)
            self._forget_cached_facts(specs)
        return self.status()

    def _ensure_controller_key(self) -> None:
        if not self.paths.ssh_key.exists():
            run(
                [
                    "ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    "rdmaforge-lab-controller",
                    "-f",
                    str(self.paths.ssh_key),
                ]
            )
        self.paths.ssh_key.chmod(0o600)

    def refresh_known_hosts(self) -> None:
        """Re-read every node's host keys into the controller's known_hosts (after a deliberate key change)."""
        state = self._read_state()
        self._write_known_hosts([node_spec(i, state["nics"]) for i in range(1, state["nodes"] + 1)])

    def _write_known_hosts(self, specs: list[NodeSpec]) -> None:
        lines = []
        for spec in specs:
            for key in node.host_public_keys(self.paths.node_dir(spec.name) / "root"):
                lines.append(f"{spec.name},{spec.address} {key}")
        self.paths.known_hosts.write_text("\n".join(lines) + "\n")

    def _wait_ready(self, spec: NodeSpec, deadline: float) -> None:
        """sshd answers and systemd has finished booting (running or degraded)."""
        node.wait_for_ssh(spec.address, deadline)
        while time.monotonic() < deadline:
            proc = subprocess.run(
                [*self.ssh_argv(spec.name), "systemctl", "is-system-running", "--wait"],
                capture_output=True,
                text=True,
                timeout=max(1.0, deadline - time.monotonic()),
            )
            state = proc.stdout.strip()
            if state in ("running", "degraded"):
                return
            time.sleep(0.3)
        raise LabError(
            f"{spec.name} did not finish booting within {BOOT_TIMEOUT:.0f}s "
            f"(console: {self.paths.node_dir(spec.name) / 'console.log'})"
        )

    def _remove_extra_nodes(self, keep: set[str]) -> None:
        if not self.paths.nodes.exists():
            return
        for node_dir in sorted(self.paths.nodes.iterdir()):
            if node_dir.name not in keep:
                self._destroy_node(node_dir)

    def _destroy_node(self, node_dir: Path) -> None:
        node.stop(node_dir)
        node.unmount_all(node_dir)
        network.remove_node_network(f"rf-{node_dir.name}")
        shutil.rmtree(node_dir, ignore_errors=True)

    def _forget_cached_facts(self, specs: list[NodeSpec]) -> None:
        # gathering=smart with a fact cache: facts of a previous lab's node1 must not describe the new one.
        cache = PROJECT_ROOT / ".cache" / "facts"
        for spec in specs:
            (cache / spec.name).unlink(missing_ok=True)

    # --- down -----------------------------------------------------------------------------------------

    def down(self) -> None:
        """Remove nodes, overlays, mounts, namespaces, bridges and the mirror server. Safe to repeat, and
        safe after a crash or a half-finished `up` (it finds leftovers by name, not only from its state)."""
        with self._locked():
            if self.paths.nodes.exists():
                with ThreadPoolExecutor(max_workers=8) as pool:
                    list(pool.map(node.stop, sorted(p for p in self.paths.nodes.iterdir() if p.is_dir())))
            node.kill_strays(self.paths.nodes)
            node.unmount_all(self.paths.state)
            network.teardown_all()
            mirror.stop(self.paths.state / "mirror.pid")
            shutil.rmtree(self.paths.nodes, ignore_errors=True)
            self.paths.state_file.unlink(missing_ok=True)
            self.paths.known_hosts.unlink(missing_ok=True)
            if self.paths.inventory_dir.exists():
                shutil.rmtree(self.paths.inventory_dir)
            cache = PROJECT_ROOT / ".cache" / "facts"
            for cached in cache.glob("node*"):
                cached.unlink()

    # --- status / ssh ---------------------------------------------------------------------------------

    def status(self) -> LabStatus:
        state = self._read_state()
        if not state:
            return LabStatus(running=False)
        specs = [node_spec(i, state["nics"]) for i in range(1, state["nodes"] + 1)]
        nodes = []
        for spec in specs:
            node_dir = self.paths.node_dir(spec.name)
            boots_log = node_dir / "boots.log"
            boots = boots_log.read_text().count(" boot ") if boots_log.exists() else 0
            nodes.append(
                NodeStatus(
                    spec.name,
                    spec.address,
                    pid_alive(node_dir / "nspawn.pid", owner=str(node_dir)) is not None,
                    node.ssh_answers(spec.address),
                    boots,
                )
            )
        pid = pid_alive(self.paths.state / "mirror.pid", owner=mirror.SERVER)
        return LabStatus(
            running=all(n.running and n.ssh for n in nodes),
            nics=state["nics"],
            nodes=nodes,
            mirror=mirror.MIRROR_URL if pid else None,
        )

    def ssh_argv(self, name: str) -> list[str]:
        state = self._read_state()
        known = {f"node{i}": node_spec(i, 0).address for i in range(1, state.get("nodes", 8) + 1)}
        if name not in known:
            raise LabError(f"no lab node named {name!r}; nodes: {', '.join(known) or 'none (run lab up)'}")
        return [
            "ssh",
            "-i",
            str(self.paths.ssh_key),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.paths.known_hosts}",
            "-o",
            "ConnectTimeout=5",
            f"root@{known[name]}",
        ]
