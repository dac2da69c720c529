"""Shared fixtures.

``lab``: a session-scoped lab of real systemd-nspawn nodes reached over real SSH. A running lab with
enough nodes is reused (but `make test` under ``CI=true`` takes a lab an earlier run left down first: tests/suite.py);
otherwise one is brought up. Tests that need it are skipped, with the reason,
only when the machine cannot run it (not root, or systemd-nspawn/debootstrap missing); under ``CI=true``
that is a failure instead.

When a session selects lab tests, the lab is brought up and converged in a background thread from the end of
collection (LabPrestart): the unit tests, which run first and never touch the lab, run meanwhile, so the lab tests
do not wait for the bring-up and first converge afterwards. ``RDMAFORGE_TEST_PRESTART=0`` turns it off. The lab
modules then run in LAB_ORDER.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import os
import re
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from installed import installed_collection, wheel_venv  # noqa: F401 - session fixtures

from rdmaforge.collection import ensure_dev_tree
from rdmaforge.lab.mirror import MIRROR_URL
from rdmaforge.lab.session import LabSession, hold_lab
from rdmaforge.lab.spec import CONTROLLER_ADDRESS
from rdmaforge.paths import PROJECT_ROOT
from tests.suite import AT_LAB_PRIORITY

SHARED = PROJECT_ROOT.parent / "shared"
LAB_NODES = int(os.environ.get("RDMAFORGE_TEST_NODES", "3"))
LAB_NICS = int(os.environ.get("RDMAFORGE_TEST_NICS", "2"))


def pytest_sessionstart(session: pytest.Session) -> None:
    """ansible.cfg finds the rdmaforge.cluster collection in build/collections: make sure it is there."""
    ensure_dev_tree()


#: The lab modules, in the order they run (a unit test keeps every integration module listed). The lab is one
#: shared cluster, and a full converge costs about two minutes of these 2 cores, so the order keeps full converges
#: to the ones a test asks for: the modules that run site.yml come while the nodes still match their converge
#: record, and the modules that leave a node differing from it come after them.
LAB_ORDER = (
    "test_fast_path",  # first: its opening converge is then the fast path, not a repair of earlier modules' changes
    "test_mitogen_on_lab",  # the optional accelerator: a repair, every task, then the plain fast path
    "test_bad_inventory",
    "test_installed_on_lab",  # provision from the wheel (site.yml)
    "test_nccl_build_on_lab",
    "test_nccl_plugin_api",
    "test_nccl_plugin_package_on_lab",  # one node on the deb source and back, in sync again (site.yml --limit)
    # Debian's dnf on that node, purged again afterwards. Its plugin test starts with site.yml --limit node3, the fast
    # path where the module above leaves the node in sync; after modules that change the node's recorded state (the
    # NCCL upgrade's `previous` link, test_ssh_trust's new cluster key) it was a full converge of the node (50 s).
    "test_dnf_path_on_lab",
    "test_rdma_userspace",  # site.yml (the summary test)
    # The last module whose tests converge with site.yml on a clean cluster; its unreachable-node provision leaves
    # the stopped node behind the others' records.
    "test_cli",
    # These two add builds to the controller's cache. A build added after a node's record is no change of its
    # desired state (a record keeps only the controller files there at its converge), and test_nccl_tests_on_lab
    # puts back the cached package it compiles again; they still come after the site.yml modules above, so that a
    # mistake there costs one full converge (about 80 s here), not one per later module.
    "test_nccl_tests_on_lab",  # nccl-tests compiled once, then removed from the nodes
    "test_nccl_upgrade_on_lab",  # a second NCCL build, rolled out and back; every node on the first again
    # Reboots a node: a node whose boot id changed is out of its record, so this comes after the site.yml modules.
    "test_lab",
    "test_doctor_expectations",
    "test_ssh_trust",
    "test_tuning_on_lab",
    "test_verify_expectations",
    "test_pairwise_on_lab",
    "test_verdicts",
    "test_mirror_down_on_lab",  # removes a package on one node and installs it again from the restarted mirror
    # These two leave the nodes differing from their records (other fabric profiles' packages; a removed node's
    # rotated cluster key): the next session's first converge repairs that. test_zz_lab_down removes the lab.
    "test_fabric_profiles_on_lab",
    "test_remove_node_on_lab",
    # Resets a node and provisions the cluster again, which also repairs what the two modules above left.
    "test_reset_on_lab",
    "test_zz_lab_down",
)


def lab_module_rank(item: pytest.Item) -> int:
    module = getattr(item, "module", None)
    name = module.__name__.rsplit(".", 1)[-1] if module is not None else ""
    return LAB_ORDER.index(name) if name in LAB_ORDER else len(LAB_ORDER)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Lab tests after the unit tests, their modules in LAB_ORDER (a stable sort keeps every other order).
    Tests marked heavy run under make test-heavy (RDMAFORGE_HEAVY_TESTS=1), not within make test's time budget."""
    items.sort(key=lambda item: (1, lab_module_rank(item)) if item.get_closest_marker("lab") else (0, 0))
    if os.environ.get("RDMAFORGE_HEAVY_TESTS") == "1":
        return
    for item in items:
        heavy = item.get_closest_marker("heavy")
        if heavy:
            why = heavy.args[0] if heavy.args else "a fresh NCCL compile"
            reason = f"heavy ({why}): run by make test-heavy and make bench, not make test"
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_collection_finish(session: pytest.Session) -> None:
    global PRESTART
    wanted = [item for item in session.items if item.get_closest_marker("lab") and not skipped(item)]
    if wanted and lab_unavailable_reason() is None and os.environ.get("RDMAFORGE_TEST_PRESTART", "1") != "0":
        PRESTART = LabPrestart(converge=any("converged" in getattr(item, "fixturenames", ()) for item in wanted))


def skipped(item: pytest.Item) -> bool:
    return any(mark.name == "skip" for mark in item.iter_markers())


def lab_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, overlay mounts, systemd-nspawn)"
    for tool in ("systemd-nspawn", "debootstrap"):
        if shutil.which(tool) is None:
            return f"the lab needs {tool} (apt-get install systemd-container debootstrap)"
    return None


# The cluster's SSH key on every node (roles/ssh_trust/defaults/main.yml, ssh_trust_key_path).
CLUSTER_KEY = "/root/.ssh/rdmaforge_cluster_ed25519"


#: LabHandle.ssh's calls come in bursts (a loop over the nodes, a check right after a change), and a new SSH
#: login took about 0.3 s here (a key exchange on both ends; a session makes hundreds):
#: each node's connection is kept for a few seconds and reused (OpenSSH's ControlMaster, in a directory of this
#: process's own). Keepalives end a connection whose node went away within seconds.
SSH_REUSE_SECONDS = 15
NO_SSH_REUSE = ("-o", "ControlMaster=no", "-o", "ControlPath=none")
#: What ssh prints when the shared connection, not the command, failed (matched in lower case: "read from master
#: failed", "Master refused session request", "Control socket connect(...)").
SSH_REUSE_FAILURES = ("mux_client", "controlsocket", "control socket", "master")


@functools.cache
def ssh_reuse_options() -> tuple[str, ...]:
    directory = tempfile.mkdtemp(prefix="rf-ssh-")  # 0700; a short path: a unix socket's is at most 107 bytes
    options = ("ControlMaster=auto", f"ControlPath={directory}/%C", f"ControlPersist={SSH_REUSE_SECONDS}",
               "ServerAliveInterval=3", "ServerAliveCountMax=2")  # fmt: skip
    return tuple(word for option in options for word in ("-o", option))


@dataclass
class LabHandle:
    """What a test needs to drive the lab: its inventory, nodes, and helpers for SSH and Ansible."""

    inventory: Path
    nodes: dict[str, str]  # name -> primary address
    ssh_key: Path
    known_hosts: Path

    def ssh(self, node: str, command: str, check: bool = True, timeout: int = 120,
            fresh: bool = False) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """Run ``command`` on ``node`` over real SSH as root (host key verified), over the node's shared connection
        (ssh_reuse_options); ``fresh``: over a login of its own, for what a login sets up (PAM limits, the
        environment sshd gives a session)."""
        base = [
            "ssh", "-i", str(self.ssh_key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "ConnectTimeout=10",
        ]  # fmt: skip
        target = [f"root@{self.nodes[node]}", command]
        proc = subprocess.run([*base, *(NO_SSH_REUSE if fresh else ssh_reuse_options()), *target],
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
        if not fresh and proc.returncode == 255 and any(sign in proc.stderr.lower() for sign in SSH_REUSE_FAILURES):
            # The shared connection broke under the command (its node rebooted or went away): once more on a login
            # of its own, so that the result is the command's, never the dead connection's.
            proc = subprocess.run([*base, *NO_SSH_REUSE, *target], capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
        return proc

    def untouched(self, node: str) -> bool:
        """Whether ``node`` is a bare node rdmaforge never touched: no state directory, no NCCL prefix, no cluster
        key, no rdma-core library (the lab's image has none of them)."""
        probe = (
            f"test ! -e /var/lib/rdmaforge && test ! -e /opt/nccl && test ! -e {CLUSTER_KEY}"
            " && ! dpkg -s libibverbs1 >/dev/null 2>&1"
        )
        return self.ssh(node, probe, check=False).returncode == 0

    def console(self, node: str, command: str) -> subprocess.CompletedProcess[str]:
        """Run ``command`` (sh) inside ``node`` from this machine, without SSH: for a node whose sshd is down."""
        from rdmaforge.lab import node as lab_node
        from rdmaforge.lab.spec import LabPaths

        return lab_node.console(LabPaths().node_dir(node), ["sh", "-c", command])

    def playbook(
        self,
        playbook: str,
        *extra: str,
        inventory: Path | None = None,
        check: bool = False,
        env: dict[str, str] | None = None,
        timeout: int = 1800,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``ansible-playbook`` from the project root; returns the completed process (stdout+stderr)."""
        return run_playbook(
            playbook, *extra, inventory=inventory or self.inventory, check=check, env=env, timeout=timeout
        )

    def summary(self, *extra: str) -> dict[str, dict[str, Any]]:
        """Run summary.yml on its own (``extra``: e.g. ``--limit``) and return summary.json's entries by host."""
        self.playbook("summary.yml", *extra, check=True)
        document = json.loads((PROJECT_ROOT / "artifacts" / "summary.json").read_text())
        return {node["host"]: node for node in document["nodes"]}


#: A fake node on this machine: Ansible's local connection with the Python running the playbook.
LOCAL_NODE: dict[str, Any] = {"ansible_connection": "local",
                              "ansible_python_interpreter": "{{ ansible_playbook_python }}"}  # fmt: skip


def local_inventory(path: Path, hosts: Sequence[str] = ("localhost",),
                    others: dict[str, dict[str, Any]] | None = None) -> Path:  # fmt: skip
    """Write an inventory of fake nodes on this machine (LOCAL_NODE each, under all.hosts) to ``path``; ``others``
    adds hosts with variables of their own (a node that is unreachable)."""
    listed = {**{host: dict(LOCAL_NODE) for host in hosts}, **(others or {})}
    path.write_text(yaml.safe_dump({"all": {"hosts": listed}}))
    return path


def run_playbook(
    playbook: str,
    *extra: str,
    inventory: Path,
    check: bool = False,
    env: dict[str, str] | None = None,
    timeout: int = 1800,
    timed: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``timed``: a run whose test measures its pace (waits between retries) goes at the lab's priority in a session
    of its own, not at the unit tests' SCHED_IDLE, where starvation adds seconds at random (tests/suite.py)."""
    argv: list[str] = [str(Path(os.environ.get("VIRTUAL_ENV", PROJECT_ROOT / ".venv")) / "bin" / "ansible-playbook")]
    if not Path(argv[0]).exists():
        argv = ["ansible-playbook"]
    argv += ["-i", str(inventory), str(PROJECT_ROOT / "playbooks" / playbook), *extra]
    full_env = {**os.environ, "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1", **(env or {})}
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, env=full_env, timeout=timeout,
                          **(AT_LAB_PRIORITY if timed else {}))  # fmt: skip
    proc.stdout = proc.stdout + proc.stderr
    trace_playbook(argv[3:], proc, time.monotonic() - started)
    if check and proc.returncode != 0:
        raise AssertionError(f"ansible-playbook {playbook} failed (rc={proc.returncode}):\n{proc.stdout[-6000:]}")
    return proc


#: What site.yml prints when every node takes the fast path.
IN_SYNC = "fast path: every node is in sync with its last complete converge"
#: One JSON line per playbook the tests run: which test, how long, and (site.yml) which nodes converged in full and
#: why. Where the suite's time goes, e.g. a module whose first converge is a full one because of the module before.
PLAYBOOK_TRACE = PROJECT_ROOT / "artifacts" / "lab-playbooks.jsonl"


def trace_playbook(args: Sequence[str], proc: subprocess.CompletedProcess[str], seconds: float) -> None:
    entry: dict[str, Any] = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
        "playbook": Path(args[0]).name,
        "args": list(args[1:]),
        "seconds": round(seconds, 1),
        "rc": proc.returncode,
    }
    if IN_SYNC in proc.stdout:
        entry["converge"] = {}
    else:
        with contextlib.suppress(ValueError, KeyError, IndexError):  # IndexError: a playbook without the gate
            entry["converge"] = gate_decision(proc.stdout).get("converge", {})
    PLAYBOOK_TRACE.parent.mkdir(parents=True, exist_ok=True)
    with PLAYBOOK_TRACE.open("a") as trace:
        trace.write(json.dumps(entry) + "\n")


@dataclass(frozen=True)
class SigningKey:
    """A throwaway OpenPGP signing key: the gpg command for its home, its fingerprint and the home itself."""

    gpg: list[str]
    fingerprint: str
    home: Path


@contextlib.contextmanager
def throwaway_signing_key(uid: str, algorithm: str = "ed25519") -> Iterator[SigningKey]:
    """A new OpenPGP signing key (no passphrase) in a fresh gpg home; afterwards its agent is stopped and the home
    removed. The home is short and under /tmp, never under pytest's tmp_path: where /run/user/UID is absent (CI),
    gpg-agent puts its sockets in the home, a Unix socket path holds at most 107 bytes, and pytest's numbered base
    directories grow (pytest-111/popen-gw0/<test name>/...): key generation then failed with "No agent running"."""
    home = Path(tempfile.mkdtemp(prefix="gpg-", dir="/tmp"))
    gpg = ["gpg", "--batch", "--homedir", str(home)]
    try:
        subprocess.run([*gpg, "--passphrase", "", "--quick-gen-key", uid, algorithm, "sign", "never"], check=True,
                       capture_output=True)  # fmt: skip
        listing = subprocess.run([*gpg, "--with-colons", "--list-keys"], check=True, capture_output=True, text=True)
        fingerprint = next(line.split(":")[9] for line in listing.stdout.splitlines() if line.startswith("fpr:"))
        yield SigningKey(gpg, fingerprint, home)
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def served_on_lab_bridge(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on the lab bridge, where lab nodes reach it; yields its base URL."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer((CONTROLLER_ADDRESS, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{CONTROLLER_ADDRESS}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def aiacc_library_from_mirror() -> bytes:
    """The AIACC library inside the real sdist the lab mirror serves (PyPI's aiacc-nccl-plugin 2.0.1)."""
    url = f"{MIRROR_URL}/pip/aiacc_nccl_plugin-2.0.1.tar.gz"
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (the lab's own mirror)
        sdist = tarfile.open(fileobj=io.BytesIO(response.read()), mode="r:gz")
    member = sdist.extractfile("aiacc_nccl_plugin-2.0.1/aiacc_nccl_plugin/libnccl-net.so.0.0.0")
    assert member is not None
    return member.read()


def gate_decision(output: str) -> dict[str, Any]:
    """The gate's "Say which nodes converge and why" message (converge, cluster_changed_since_their_record,
    in_sync_skip_their_own_roles, not_checked_unreachable_or_failed), read from the default callback's JSON after
    ``ok: [node] =>``."""
    block = re.split(r"^TASK \[(?:rdmaforge\.cluster\.)?converge_state : Say which nodes converge and why\]", output,
                     flags=re.M)[1]  # fmt: skip
    start = block.index("=> {") + 3
    result, _ = json.JSONDecoder().raw_decode(block[start:])
    return dict(result["msg"])


def recap(output: str) -> dict[str, dict[str, int]]:
    """Parse the PLAY RECAP block into {host: {ok, changed, unreachable, failed, skipped, rescued, ignored}}."""
    result: dict[str, dict[str, int]] = {}
    in_recap = False
    for line in output.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap and result and not line.strip():
            break  # the recap ends at its blank line (the task-timing table follows)
        if in_recap and ":" in line and "=" in line:
            host, _, counters = line.partition(":")
            result[host.strip()] = {k: int(v) for k, v in (item.split("=") for item in counters.split())}
    return result


class SilentServer:
    """Accepts connections on loopback and never sends a byte; notes, per connection, how long the client waited
    before it closed (a mirror whose server hangs, or a firewall that swallows the replies)."""

    def __init__(self, address: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = socket.create_server((address, port))
        self.port = self.sock.getsockname()[1]
        #: Seconds from accept() to the client's close, per connection. accept() runs in a thread: on a loaded
        #: machine it can run a second after the client connected, so a wait can read shorter than the client's
        #: timeout (4.46 s for 5 s once, beside the lab); a lower bound holds for the longest wait, not for each.
        self.waits: list[float] = []
        self.closing = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._hold, args=(conn, time.monotonic()), daemon=True).start()

    def _hold(self, conn: socket.socket, accepted: float) -> None:
        with conn:
            while conn.recv(65536):  # read the request, answer nothing, until the client gives up
                pass
            self.waits.append(time.monotonic() - accepted)

    def close(self) -> None:
        self.closing.set()
        self.sock.close()


def assert_no_changes(output: str, hosts: Sequence[str] | None = None) -> None:
    counts = recap(output)
    assert counts, f"no PLAY RECAP in output:\n{output[-3000:]}"
    changed = {h: c["changed"] for h, c in counts.items() if c["changed"] and (hosts is None or h in hosts)}
    assert not changed, f"expected changed=0, got {changed}:\n{output[-6000:]}"


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def bring_up_lab(fresh: bool = False) -> tuple[LabHandle, LabSession]:
    """``fresh``: a running lab is taken down first, so the nodes start from nothing (not their earlier state)."""
    from rdmaforge.lab import Lab

    # One test session at a time owns the lab (the nodes are machine-wide): a second session, e.g. a CI run
    # beside a developer's, waits here instead of converging or tearing down nodes under the first one.
    session_lock = hold_lab()
    lab = Lab()
    state = lab.status()
    if state.nodes and (state.nics != LAB_NICS or fresh):
        lab.down()
    # Idempotent: reuses running nodes (converged state kept) and writes this checkout's inventories/lab/.
    lab.up(nodes=LAB_NODES, nics=LAB_NICS)
    handle = LabHandle(
        inventory=lab.inventory_path,
        nodes={n.name: n.address for n in lab.status().nodes},
        ssh_key=lab.ssh_key,
        known_hosts=lab.known_hosts,
    )
    return handle, session_lock


class LabPrestart:
    """The lab's bring-up and (when a selected test needs it) its first converge, in a background thread started
    at the end of collection. The fixtures wait for it and re-raise what it raised, so a lab that cannot start
    fails the lab tests exactly as it would have without the thread."""

    def __init__(self, converge: bool) -> None:
        self.converge = converge
        self.handle: LabHandle | None = None
        self.session_lock: LabSession | None = None
        self.converge_proc: subprocess.CompletedProcess[str] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.run, name="lab-prestart", daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            self.handle, self.session_lock = bring_up_lab()
            if self.converge:
                self.converge_proc = self.handle.playbook("site.yml")
        except BaseException as exc:  # handed to the fixture, which raises it in the test that needs the lab
            self.error = exc

    def result(self) -> LabPrestart:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self


PRESTART: LabPrestart | None = None


@pytest.fixture(scope="session")
def lab() -> Iterator[LabHandle]:
    reason = lab_unavailable_reason()
    if reason:
        if under_ci():
            pytest.fail(f"CI: the lab cannot start here: {reason}")
        pytest.skip(reason)
    if PRESTART is not None:
        started = PRESTART.result()
        assert started.handle is not None and started.session_lock is not None
        handle, session_lock = started.handle, started.session_lock
    else:
        handle, session_lock = bring_up_lab()
    yield handle
    session_lock.close()


@pytest.fixture(scope="session")
def converged(lab: LabHandle) -> LabHandle:
    """The lab after one full converge of playbooks/site.yml in this session (tests restore what they change)."""
    started = PRESTART.result() if PRESTART is not None else None
    proc = started.converge_proc if started is not None and started.converge_proc is not None else None
    if proc is None:
        proc = lab.playbook("site.yml")
    assert proc.returncode == 0, proc.stdout[-6000:]
    return lab


@pytest.fixture(params=["accelerated", "pure-python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The nccl-tests parser with its C accelerator (when built) and without it: a test that takes this runs once
    each way, and both must give the same result."""
    if request.param == "pure-python":
        from rdmaforge.nccl_tests import accel

        monkeypatch.setattr(accel, "fast", None)
    return str(request.param)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: the shared corpus is only beside a project checkout")
    return SHARED


def same_run_as_text_and_json(text: Path, as_json: Path, sizes: list[int]) -> tuple[Any, Any]:
    """nccl-tests' text output and its own ``-J`` file of one run, parsed by rdmaforge: one run each, the sizes the
    command line asked for, the same out-of-place times (the JSON keeps two decimals). Returns both runs."""
    import pytest

    from rdmaforge.nccl_tests import parse_file

    runs, json_runs = parse_file(text).runs, parse_file(as_json).runs
    assert len(runs) == len(json_runs) == 1
    assert [r.size for r in runs[0].rows] == [r.size for r in json_runs[0].rows] == sizes
    for a, b in zip(runs[0].rows, json_runs[0].rows, strict=True):
        assert a.out_of_place.time_us == pytest.approx(b.out_of_place.time_us, abs=0.01)
    return runs[0], json_runs[0]
