"""``ansible-inventory --list``: an inventory as Ansible itself reads it (scripts and plugins included), in a process
of its own. ``rdmaforge render`` reads its hosts this way; the secret scrubber reads the variables of an inventory
its static readers cannot (:func:`rdmaforge.runner.execute.secret_values`), and the run then reads that same
listing (:func:`replay`) instead of running the inventory's scripts and plugins a second time."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rdmaforge.hostnames import not_a_string
from rdmaforge.runner import secrets
from rdmaforge.runner.inventory_cli import MESSAGES_FILE
from rdmaforge.terminal import escaped

#: Seconds an inventory may take to list: a cloud plugin pages through an API.
TIMEOUT_S = 300
#: Ansible's words when it gives up on an inventory source.
UNPARSED_WORDS = "Completely failed to parse inventory source"
#: The source Ansible names when it gives up on one; its warnings say why (a script's exit code and stderr).
FAILED_SOURCE = re.compile(rf"{UNPARSED_WORDS} (\S.*?)\s*$", re.MULTILINE)
#: The cause shown: the first warnings naming the failed source, each cut to its first and last lines.
CAUSE_WARNINGS = 2
CAUSE_HEAD, CAUSE_TAIL = 4, 3
CAUSE_LINE_CHARS = 300
#: How each of Ansible's messages on stderr starts (2.19's, and ERROR! before it).
MESSAGE_STARTS = ("[WARNING]:", "[ERROR]:", "[DEPRECATION WARNING]:", "ERROR!")
#: Ansible's separator between an error and the error it was caused by.
CAUSED_BY = "<<< caused by >>>"
#: Ansible's yaml plugin on a host name YAML read as no string (an unquoted 123, yes or ~); Ansible's error then says
#: only that the source could not be parsed.
NOT_A_STRING = re.compile(r"Host pattern (?P<host>.+?) must be a string\b")


#: Ansible's error for an inventory source none of its inventory plugins could read; the group is the source's path.
#: (At a line's start in Ansible's output; after "failed: " in an InventoryError's message.)
UNPARSED_SOURCE = re.compile(rf"\[ERROR\]: {UNPARSED_WORDS} (.+)$", re.MULTILINE)


class InventoryError(RuntimeError):
    """ansible-inventory could not list the inventory; the message says why, in Ansible's words."""


class InventoryRefused(InventoryError):
    """ansible-inventory ran and exited non-zero with an error of Ansible's: Ansible itself cannot read the inventory
    (not: it could not be started, timed out, was killed, crashed, or printed something else than a listing)."""


def command(args: Sequence[str]) -> list[str]:
    """``ansible-inventory ARGS`` of this interpreter's Ansible (the one the runs use), through
    :mod:`rdmaforge.runner.inventory_cli`, which records Ansible's messages with their kinds."""
    # -P: the working directory (a user's checkout, which may hold an ansible/ of its own) is not put on sys.path.
    return [sys.executable, "-P", "-m", "rdmaforge.runner.inventory_cli", *args]


def listed(
    inventory: str,
    *,
    cwd: Path,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    loads: Callable[[str], Any] = json.loads,
) -> dict[str, Any]:
    """The JSON ``ansible-inventory -i INVENTORY --list ARGS`` prints, read with ``loads``; ``env`` is added to
    this process's environment."""
    return parsed(inventory, listing(inventory, cwd=cwd, args=args, env=env), loads)


#: ansible-inventory merges the facts Ansible's fact cache holds (ansible.cfg: a jsonfile cache under .cache/facts,
#: kept 2 hours) into the hostvars it lists: a host named as one of another cluster got that host's facts, the rail
#: map among them, in `rdmaforge render` (review round 21c). A listing is the inventory as written: no cache.
LISTING_ENV = {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_CACHE_PLUGIN": "memory"}


def listing(inventory: str, *, cwd: Path, args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> str:
    """What ``ansible-inventory -i INVENTORY --list ARGS`` prints (:func:`listed`), as it prints it."""
    with tempfile.TemporaryDirectory(prefix="rdmaforge-inventory-") as scratch:
        messages_file = Path(scratch) / "messages.jsonl"
        try:
            proc = subprocess.run(
                command(["-i", inventory, "--list", *args]),
                cwd=cwd,
                capture_output=True,
                text=True,
                env={**os.environ, **LISTING_ENV, **(env or {}), MESSAGES_FILE: str(messages_file)},
                stdin=subprocess.DEVNULL,
                timeout=TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InventoryError(f"cannot run ansible-inventory: {exc}") from exc
        recorded = recorded_messages(messages_file)
    if proc.returncode < 0:  # killed (the OOM killer on a loaded machine): nothing is known of the inventory
        raise InventoryError(f"ansible-inventory -i {inventory} was killed by signal {-proc.returncode}")
    if proc.returncode != 0:
        hint = host_name_hint(proc.stderr, recorded)
        cause = "".join(f"\n  {line}" for line in ([hint] if hint else failed_source_warnings(proc.stderr, recorded)))
        error = ansible_error(proc.stderr, recorded)
        message = f"ansible-inventory -i {inventory} failed: {error}{cause}"
        # Refused only where Ansible said so: a crash of the tool itself (a traceback, no error of Ansible's) tells
        # nothing of the inventory (review of 1642891..e8ecafa: a killed relisting made a good inventory exit 64).
        refused = any(kind == "error" for kind, _ in recorded) or ANSIBLE_ERROR_LINE.search(proc.stderr)
        raise (InventoryRefused if refused else InventoryError)(message)
    return proc.stdout


def parsed(inventory: str, text: str, loads: Callable[[str], Any] = json.loads) -> dict[str, Any]:
    """A listing of ``inventory`` read with ``loads``; InventoryError when it is no JSON object."""
    try:
        data = loads(text)
    except ValueError as exc:
        raise InventoryError(f"ansible-inventory -i {inventory} printed no JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise InventoryError(f"ansible-inventory -i {inventory} printed {type(data).__name__}, not an object")
    return data


#: A message Ansible displayed, as :mod:`rdmaforge.runner.inventory_cli` recorded it: its kind (error, warning,
#: deprecation) and its text.
Message = tuple[str, str]


def recorded_messages(path: Path) -> list[Message]:
    """The messages :mod:`rdmaforge.runner.inventory_cli` recorded, in order; none when it recorded none."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:  # a line cut short (the process killed while writing it)
            continue
        if isinstance(entry, dict) and isinstance(entry.get("kind"), str) and isinstance(entry.get("message"), str):
            found.append((entry["kind"], entry["message"]))
    return found


#: The line an Ansible command starts its error with: ``[ERROR]:`` (``ERROR!`` in releases before 2.19).
ANSIBLE_ERROR_LINE = re.compile(r"^(?:\[ERROR\]:|ERROR!)", re.MULTILINE)


def ansible_error(stderr: str, recorded: Sequence[Message] = ()) -> str:
    """What an Ansible command said went wrong, without the traceback it may print after it.

    From the messages Ansible displayed as errors (``recorded``), where it displayed any: the last one, the error it
    stopped on. Else from stderr's text: the last line starting Ansible's ``[ERROR]:`` (or older ``ERROR!``) and its
    paragraph (the error Ansible stops on comes after every warning, and a warning may quote a script's stderr that
    prints such a line); else the last 2000 characters."""
    errors = [text for kind, text in recorded if kind == "error"]
    if errors:
        return _paragraph(errors[-1].strip().splitlines())
    lines = stderr.strip().splitlines()
    starts = [i for i, line in enumerate(lines) if ANSIBLE_ERROR_LINE.match(line)]
    if starts:
        return _paragraph(lines[starts[-1] :])
    return stderr.strip()[-2000:]


def host_name_hint(stderr: str, recorded: Sequence[Message] = ()) -> str | None:
    """Why the yaml plugin refused a host, when that is why (``NOT_A_STRING``): the host as YAML read it, and what to
    write instead. Ansible shows the key as Python does (``yes`` as True, ``~`` as None)."""
    found = NOT_A_STRING.search("\n".join([stderr, *(text for _, text in recorded)]))
    if found is None:
        return None
    return not_a_string(found["host"])


def _paragraph(lines: Sequence[str]) -> str:
    """The first paragraph of a message, without a traceback after it."""
    kept = []
    for text in lines:
        if not text.strip() or text.startswith("Traceback"):
            break
        kept.append(text)
    return "\n".join(kept)


def failed_source_warnings(stderr: str, recorded: Sequence[Message] = ()) -> list[str]:
    """Why Ansible gave up on a source, which its error does not say: the first :data:`CAUSE_WARNINGS` warnings
    naming that source (the script plugin's holds the script's exit code and stderr), without blank lines nor what
    repeats a warning's first line, cut to their first and last lines, each line escaped (a script may print
    terminal escapes) and URL passwords and private keys hidden. The warnings are the ``recorded`` ones where Ansible's
    messages were recorded (a script's stderr stays inside its warning), else stderr's text cut at each line that
    starts a message. Empty when no source failed."""
    failed = FAILED_SOURCE.search(stderr)
    if failed is None:
        return []
    source = failed.group(1)
    messages = [text.splitlines() for _, text in recorded] if recorded else _messages(stderr)
    naming = [m for m in messages if m and m[0].startswith("[WARNING]") and any(source in line for line in m)]
    return [_shown(line) for warning in naming[:CAUSE_WARNINGS] for line in _compact(warning)]


def _messages(stderr: str) -> list[list[str]]:
    """stderr as Ansible's messages: each starts with a ``[WARNING]:``-like line and runs to the next one."""
    messages: list[list[str]] = []
    for line in stderr.splitlines():
        if line.startswith(MESSAGE_STARTS) or not messages:
            messages.append([line])
        else:
            messages[-1].append(line)
    return messages


def _compact(warning: list[str]) -> list[str]:
    first, rest = warning[0], warning[1:]
    kept = [first, *(line for line in rest if line.strip() and line.strip() != CAUSED_BY
                     and line.strip().rstrip(".") not in first)]  # fmt: skip
    if len(kept) <= CAUSE_HEAD + CAUSE_TAIL + 1:
        return kept
    left_out = len(kept) - CAUSE_HEAD - CAUSE_TAIL
    return [*kept[:CAUSE_HEAD], f"... ({left_out} lines left out)", *kept[-CAUSE_TAIL:]]


def _shown(line: str) -> str:
    line = secrets.redact_text(line, ())
    cut = line if len(line) <= CAUSE_LINE_CHARS else line[:CAUSE_LINE_CHARS] + " ..."
    return escaped(cut, one_line=True)


#: The run's inventory when it reuses a listing (:func:`replay`): a script fetching it from this process, in the
#: run's private directory, with the inventory's group_vars/ and host_vars/ linked beside it.
REPLAY_DIR = "inventory"
REPLAY_SCRIPT = "listed"
#: The socket the script reads the listing from: the listing holds the plaintext of whole-file-vaulted group_vars
#: and host_vars, so it is never written to disk but handed from memory, one whole copy to each connection (a FIFO
#: could hand a reader that has not seen its end yet a second copy once the writer opens it again), and only to a
#: process of the run (:func:`admitted`).
REPLAY_SOCKET = "listing.sock"
#: What the script runs, with this venv's Python: it prints what the socket (its first argument) sends; nothing sent
#: (a process outside the run) is an error, said on stderr, which Ansible's warning about the source quotes.
REPLAY_CLIENT = (
    "import socket, sys\n"
    "with socket.socket(socket.AF_UNIX) as s:\n"
    "    s.connect(sys.argv[1])\n"
    "    sent = 0\n"
    "    while chunk := s.recv(65536):\n"
    "        sent += len(chunk)\n"
    "        sys.stdout.buffer.write(chunk)\n"
    "if not sent:\n"
    "    sys.exit('rdmaforge: this listing of the inventory is served only to the processes of its run')\n"
)
#: The variable in the environment of each process rdmaforge starts to read the listing (ansible-playbook, ad-hoc
#: ansible, verify's pytest): its value is the socket's path. The socket serves a process descending from one of
#: them, and no other (:func:`admitted`).
REPLAY_MARK = "RDMAFORGE_INVENTORY_REPLAY"
#: How deep a process tree under the run's processes is walked (a connection from deeper is refused).
REPLAY_MAX_DEPTH = 64
#: Where Ansible's vars plugin reads variables beside an inventory source: files or directories named after a group
#: or host.
VARS_DIRS = ("group_vars", "host_vars")


@dataclass(frozen=True)
class Replayed:
    """The inventory a run reads instead of a dynamic one (:func:`replay`)."""

    #: The inventory script: what Ansible's -i (and testinfra's --ansible-inventory) names.
    script: Path
    #: What the environment of each process started to read it must hold (it is added to the one it inherits):
    #: Ansible's script plugin alone (the listing is a script's output, whatever the configuration enables), and
    #: :data:`REPLAY_MARK`, without which neither the process nor anything it starts is served the listing.
    environment: Mapping[str, str]


def replayed(text: str, inventory: Path, sources: Sequence[Path]) -> str | None:
    """The export listing ``text`` of ``inventory`` (``ansible-inventory --list --export``) as the run is to read
    it instead of evaluating the inventory again (:func:`replay`); None when it would not give the run what the
    inventory gives: ``sources``, the files of an inventory directory, are not one file, so which of them each host
    came from (its ``inventory_file``) is unknown.

    What Ansible then reads is what it read from the inventory itself: the script plugin decodes the listing with
    the profile it names, so vaulted values stay vaulted and a value Ansible does not template (a plugin's, or
    marked unsafe) stays so; each group's and host's own variables are given as the inventory gave them, on the
    same level of precedence; group_vars/ and host_vars/ beside the inventory are linked beside the script, so
    Ansible reads them there at their own level (the listing also holds them, on the lower level of the inventory's
    own variables: a value defined on both levels is the same one, so what wins is what won, as long as Ansible's
    precedence setting keeps every group_vars level above the inventory's own, as its default does); each host's
    ``inventory_file`` and ``inventory_dir`` are the inventory's. Groups are written in the tree's order, ``all``
    last, so each group's hosts and children, and the order of the play's hosts, are the inventory's."""
    if inventory.is_dir() and len(sources) != 1:
        return None
    # The path Ansible names the source by: the run's -i is the resolved inventory (a file in it, for a directory).
    source = inventory.resolve() / sources[0].relative_to(inventory) if inventory.is_dir() else inventory.resolve()
    data = json.loads(text)  # plainly: Ansible's markers (__ansible_vault, __ansible_unsafe) stay as it printed them
    meta = data.get("_meta") if isinstance(data.get("_meta"), dict) else {"hostvars": {}}
    groups = {name: entry for name, entry in data.items() if name != "_meta" and isinstance(entry, dict)}
    hostvars = meta.setdefault("hostvars", {})
    for host in dict.fromkeys(h for entry in groups.values() for h in entry.get("hosts", [])):
        # Ansible sets both when it first meets the host (in the one source); the listing leaves them out.
        hostvars.setdefault(host, {}).update(inventory_file=str(source), inventory_dir=str(source.parent))
    ordered = [name for name in _tree_order(groups) if name != "all"]
    return json.dumps({"_meta": meta, **{name: groups[name] for name in ordered},
                       **({"all": groups["all"]} if "all" in groups else {})})  # fmt: skip


@contextlib.contextmanager
def replay(text: str, inventory: Path, sources: Sequence[Path], directory: Path) -> Iterator[Replayed | None]:
    """An inventory script printing the listing ``text`` of ``inventory`` as :func:`replayed` makes it, created
    under ``directory`` (the run's private one) for as long as the ``with`` block lasts; None when the listing
    cannot be replayed (:func:`replayed`), the socket not made (a temporary directory too deep for a socket's
    path), or this is no Linux (the socket's peer check reads Linux's /proc): the run then reads the inventory
    itself. Only ``ansible_inventory_sources`` names the script.

    The listing holds the plaintext of the inventory's secrets, a whole-file-vaulted group_vars file's too: it
    stays in this process's memory, served on a socket (0700 directory, the user's alone) by a thread that stops
    when the block ends, however it ends; the script asks for it each time Ansible runs it. It is served to the
    processes started with :attr:`Replayed.environment` and those they start (:func:`admitted`), not to another
    process of the user: that one gets not a byte."""
    served = replayed(text, inventory, sources)
    if served is None or not sys.platform.startswith("linux"):
        yield None
        return
    directory.mkdir(mode=0o700)
    address = directory / REPLAY_SOCKET
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(address))
    except OSError:  # AF_UNIX paths are short (108 bytes on Linux)
        listener.close()
        yield None
        return
    address.chmod(0o600)  # connecting takes write permission: the user's alone, as is the directory
    listener.listen()
    stopping = threading.Event()
    thread = threading.Thread(target=_serve, args=(listener, served.encode(), str(address), stopping), daemon=True)
    thread.start()
    try:
        script = directory / REPLAY_SCRIPT
        client = shlex.join([sys.executable, "-I", "-c", REPLAY_CLIENT, str(address)])
        script.write_text("#!/bin/sh\n# The run's inventory as ansible-inventory listed it before the run "
                          f"(rdmaforge)\nexec {client}\n")  # fmt: skip
        script.chmod(0o700)
        base = inventory.resolve() if inventory.is_dir() else inventory.resolve().parent
        for name in VARS_DIRS:
            if (base / name).is_dir():
                (directory / name).symlink_to(base / name, target_is_directory=True)
        yield Replayed(script, {"ANSIBLE_INVENTORY_ENABLED": "ansible.builtin.script", REPLAY_MARK: str(address)})
    finally:
        stopping.set()
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as wake:  # ends the thread's accept()
            wake.connect(str(address))
        thread.join(timeout=5)
        listener.close()
        address.unlink(missing_ok=True)


def _serve(listener: socket.socket, listing: bytes, mark: str, stopping: threading.Event) -> None:
    """Send ``listing`` whole to each connection of a process of the run (:func:`admitted`, ``mark`` the value of its
    :data:`REPLAY_MARK`), each in a thread of its own (a reader that stalls delays no other), until ``stopping`` is
    set."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:  # the listener closed
            return
        if stopping.is_set():
            connection.close()
            return
        threading.Thread(target=_send, args=(connection, listing, mark), daemon=True).start()


def _send(connection: socket.socket, listing: bytes, mark: str) -> None:
    with contextlib.suppress(OSError), connection:  # a reader gone early (killed) needs nothing more
        if admitted(_peer(connection), mark):
            connection.sendall(listing)


#: struct ucred of SO_PEERCRED: pid, uid, gid.
_UCRED = struct.Struct("3i")


def _peer(connection: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process that connected (as of its connect(), in this process's pid namespace)."""
    pid, uid, _ = _UCRED.unpack(connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return pid, uid


def admitted(peer: tuple[int, int], mark: str) -> bool:
    """Whether the process ``peer`` (pid, uid) belongs to the run: it is this user's, and it is, or descends from, a
    child of this process whose environment holds :data:`REPLAY_MARK` set to ``mark`` (a process rdmaforge started
    to read this listing: ansible-playbook, ad-hoc ansible, verify's pytest; anything they start inherits it).

    Linux only: the tree is walked up through ``/proc/PID/stat``'s parent pids, and the child's environment read
    from ``/proc/PID/environ`` as it started. The pid of ansible-playbook is not known beforehand (ansible-runner
    starts it through pexpect and reads the inventory before it tells anything), so a child is told by its
    environment, never by its pid; another process of the user may read that variable, but it cannot make itself a
    child of this process. Refused: a peer that is gone, or whose tree no longer reaches this process (an ancestor
    died: it was handed to init), a parent that started after its child (its pid reused), a tree deeper than
    :data:`REPLAY_MAX_DEPTH`, anything /proc does not answer."""
    pid, uid = peer
    if uid != os.getuid():
        return False
    own = os.getpid()
    child = _stat(pid)
    for _ in range(REPLAY_MAX_DEPTH):
        if child is None or pid == own:
            return False
        parent, started = child
        if parent == own:
            return _environment_marked(pid, mark)
        above = _stat(parent)
        if above is None or above[1] > started:
            return False
        pid, child = parent, above
    return False


def _stat(pid: int) -> tuple[int, int] | None:
    """The parent pid and start time (clock ticks since boot) of ``pid``, from /proc/PID/stat; None when gone."""
    if pid <= 0:
        return None
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses; the fields after its last ")" do not.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _environment_marked(pid: int, mark: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not readable (a process not dumpable)
        return False
    return f"{REPLAY_MARK}={mark}".encode() in environ.split(b"\0")


def _tree_order(groups: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The group names depth first from ``all``, children in their order (as ansible-inventory walked them), then
    any group the walk did not reach."""
    order: dict[str, None] = {}

    def walk(name: str) -> None:
        if name in order or name not in groups:
            return
        order[name] = None
        for child in groups[name].get("children", []):
            walk(child)

    walk("all")
    for name in groups:
        walk(name)
    return list(order)


def group_hosts(data: Mapping[str, Any], group: str) -> list[str]:
    """The hosts of ``group`` and of its child groups, each once, in the order the listing ``data``
    (``ansible-inventory --list``) gives them."""
    hosts: dict[str, None] = {}
    seen: set[str] = set()

    def collect(name: str) -> None:
        entry = data.get(name)
        if name in seen or not isinstance(entry, Mapping):
            return
        seen.add(name)
        hosts.update(dict.fromkeys(str(h) for h in entry.get("hosts", [])))
        for child in entry.get("children", []):
            collect(str(child))

    collect(group)
    return list(hosts)
