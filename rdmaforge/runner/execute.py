"""Run a playbook (or one module, ad hoc) with ansible-runner's Python API, never a subprocess of our own.

ansible-runner still starts ansible-playbook itself; what rdmaforge controls is how: its env/ directory stays
empty (``suppress_env_files``; inline extra vars go through a 0600 file outside the artifacts), host-key
checking stays on (ansible-runner turns it off unless told), the project's ansible.cfg applies, the events
feed the progress display, and the run's artifacts land in the run directory, scrubbed of secrets.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_runner
from ansible_runner.exceptions import AnsibleRunnerException

from rdmaforge import paths
from rdmaforge.errors import CannotRun, UserError
from rdmaforge.runner import accelerator, extravars, inventory_list, secrets, vault
from rdmaforge.runner.events import EventLog
from rdmaforge.runner.recap import HostRecap, from_stats

#: ansible-runner's artifacts for a run go to <run dir>/ansible/ (job_events/, stdout, stderr, command, rc).
IDENT = "ansible"

EventHandler = Callable[[Mapping[str, Any]], object]


@dataclass(frozen=True)
class Request:
    """What to run: a playbook (or a module with its host pattern) against an inventory."""

    inventory: Path
    playbook: Path | None = None
    module: str | None = None
    module_args: str | None = None
    host_pattern: str = "all"
    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    check: bool = False
    diff: bool = False
    extra_vars: Sequence[extravars.ExtraVars] = ()
    verbosity: int = 0
    #: ansible-playbook's connection and vault flags: -u, -b, --become-user, -f, --vault-id, --vault-password-file.
    user: str | None = None
    become: bool = False
    become_user: str | None = None
    forks: int | None = None
    vault_ids: Sequence[str] = ()
    vault_password_files: Sequence[Path] = ()
    #: run under mitogen's strategy (--mitogen; the accelerator module), else ansible.cfg's (linear)
    mitogen: bool = False


#: The group every rdmaforge playbook runs on.
CLUSTER_GROUP = "cluster"
#: Ansible's own words when a run reaches no host because of its host pattern or its inventory (command.py reads
#: the lines they start).
#: Ansible's warning for a host pattern that names no group or host of the inventory (command.py reads the rest).
UNMATCHED_WORDS = "Could not match supplied host pattern"
NO_HOST_SIGNS = (
    UNMATCHED_WORDS,
    inventory_list.UNPARSED_WORDS,
    # the last lines Ansible prints when a pattern or --limit left no host (a loss takes the tail: with these there,
    # the lines before them are there too)
    "leaves us with no hosts to target",
    "No hosts matched, nothing to do",
)


@dataclass(frozen=True)
class Relisting:
    """The inventory listed again after a run that reached no host and whose events and output do not say why
    (Ansible's lines that would say so lost on the way: the stdout file can lack them, EventLog.messages; the pty's
    last bytes are read once, with a timeout, after the process ended: ansible-runner's issue 1330). Seen on a
    loaded machine: a run on an inventory without group 'cluster' read as 'no host matched the --limit' (exit 1,
    not 64)."""

    #: How many hosts group 'cluster' holds (its child groups' too); None when the inventory was not listed.
    cluster_hosts: int | None
    #: Why Ansible could not list it, in its words, when ansible-inventory ran and refused it; '' otherwise (listed,
    #: or ansible-inventory could not be run: then nothing is known of the inventory).
    error: str = ""


@dataclass
class Outcome:
    status: str  # ansible-runner's: successful, failed, canceled, timeout
    rc: int
    events: EventLog
    recaps: dict[str, HostRecap]
    artifacts: Path
    seconds: float
    leaked_env_files: list[Path] = field(default_factory=list)
    #: The run's secrets (secret_values): what the command writes after the run is redacted with them too.
    secret_values: frozenset[str] = frozenset()
    #: Set only after a run that reached no host and whose output does not say why (:class:`Relisting`).
    relisted: Relisting | None = None

    @property
    def ran(self) -> bool:
        """False when Ansible stopped before any host (syntax error, no hosts matched, bad inventory)."""
        return bool(self.recaps)


#: ansible-core 2.19 imports cryptography's DSA names on every start (its ssh-agent support), and recent cryptography
#: releases (51 here) warn of it: two lines of noise at the top of every run's output, nothing a user can act on.
#: Only that warning is silenced (CryptographyDeprecationWarning is a UserWarning, a builtin category: the Pythons
#: Ansible starts need no cryptography to read the filter). The user's own PYTHONWARNINGS come after it, so they
#: win where both apply (Python's later filters take precedence).
QUIET_WARNINGS = "ignore:DSA is deprecated:UserWarning"


def runner_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Variables rdmaforge sets for the run (ansible-runner adds its own callback settings)."""
    return {
        "PYTHONWARNINGS": ",".join(filter(None, (QUIET_WARNINGS, environ.get("PYTHONWARNINGS")))),
        # Ad-hoc runs start in the private data dir, not the project: name the project's config explicitly
        # (the checkout's ansible.cfg, or the installed package's copy of it).
        "ANSIBLE_CONFIG": environ.get("ANSIBLE_CONFIG", str(paths.ANSIBLE_CFG)),
        # The rdmaforge.cluster collection (its callbacks, enabled by FQCN in ansible.cfg, included): the checkout's
        # build/collections tree, or the installed one beside the package; the fact cache in the workspace.
        **paths.ansible_environment(),
        # ansible-runner sets ANSIBLE_HOST_KEY_CHECKING=False when the environment has none; rdmaforge never does.
        "ANSIBLE_HOST_KEY_CHECKING": environ.get("ANSIBLE_HOST_KEY_CHECKING", "True"),
        "ANSIBLE_NOCOLOR": "1",  # stdout in the artifacts is read by people and CI, not terminals
        "ANSIBLE_FORCE_COLOR": "0",
        # Modules and filter plugins import rdmaforge: the interpreter running Ansible must be this one.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}",
    }


def connection_cmdline(request: Request) -> list[str]:
    """-u, -b, --become-user and the vault flags as ansible-playbook (and ad-hoc ansible) take them."""
    args: list[str] = []
    if request.user:
        args += ["--user", request.user]
    if request.become:
        args.append("--become")
    if request.become_user:
        args += ["--become-user", request.become_user]
    return args + vault_cmdline(request)


def vault_cmdline(request: Request) -> list[str]:
    """--vault-id and --vault-password-file, as every Ansible command (ansible-inventory too) takes them."""
    args: list[str] = []
    for vault_id in request.vault_ids:
        args += ["--vault-id", vault_id]
    for path in request.vault_password_files:
        args += ["--vault-password-file", str(Path(path).resolve())]
    return args


def vault_identity_list(request: Request) -> str:
    """The vault flags as ANSIBLE_VAULT_IDENTITY_LIST (a password file is an identity with the default label)."""
    return ",".join([*request.vault_ids, *(str(Path(p).resolve()) for p in request.vault_password_files)])


def runner_kwargs(
    request: Request, run_dir: Path, private_dir: Path, listed: inventory_list.Replayed | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``ansible_runner.run``; inline extra vars are written under ``private_dir``. ``listed``:
    the inventory as listed before the run (inventory_list.replay), read instead of the inventory."""
    cmdline = extravars.to_cmdline(request.extra_vars, private_dir)
    if request.check:
        cmdline.append("--check")
    if request.diff:
        cmdline.append("--diff")
    cmdline += connection_cmdline(request)
    kwargs: dict[str, Any] = {
        "private_data_dir": str(run_dir),
        "artifact_dir": str(run_dir),
        "ident": IDENT,
        "project_dir": str(paths.WORKSPACE),
        "inventory": str(listed.script if listed else request.inventory.resolve()),
        "envvars": {**runner_env(), **accelerator.environment(request.mitogen),
                    **(listed.environment if listed else {})},  # fmt: skip
        "suppress_env_files": True,  # nothing of this run is written to env/ (extravars, passwords, ssh_key)
        "quiet": True,  # the progress display replaces Ansible's own output; it is kept in ansible/stdout
        "fact_cache_type": "project",  # not 'jsonfile': keep ansible.cfg's fact cache, shared with ansible-playbook
        "rotate_artifacts": 0,  # rdmaforge rotates whole run directories itself
        "verbosity": request.verbosity or None,
        "limit": request.limit,
        "forks": request.forks,
        "cmdline": shlex.join(cmdline) if cmdline else None,
    }
    if request.playbook is not None:
        kwargs.update(playbook=str(request.playbook), tags=request.tags, skip_tags=request.skip_tags)
    else:  # ad hoc: `ansible` has no --tags nor --skip-tags
        kwargs.update(module=request.module, module_args=request.module_args, host_pattern=request.host_pattern)
    return {k: v for k, v in kwargs.items() if v is not None}


#: Where Ansible reads variables beside an inventory (and beside the playbook): files with or without an
#: extension, and directories of them, named after a group or host.
INVENTORY_VARS_DIRS = inventory_list.VARS_DIRS


def inventory_variable_files(inventory: Path, playbook: Path | None = None) -> tuple[list[Path], list[Path]]:
    """The inventory's own files (the file, or every file under the directory but hidden ones) and the variable
    files Ansible reads beside them: group_vars/ and host_vars/ beside the inventory file, in the inventory
    directory (at any depth), and beside the playbook. Every file there is listed, whatever its extension or
    whether its group or host exists: reading more than Ansible does only redacts more."""
    own: list[Path] = []
    beside: list[Path] = []
    bases: list[Path] = []
    if inventory.is_dir():
        for top, dirs, files in os.walk(inventory):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # not .git/: Ansible skips hidden entries
            folders = Path(top).relative_to(inventory).parts
            into = beside if any(part in INVENTORY_VARS_DIRS for part in folders) else own
            into += [Path(top, name) for name in sorted(files) if not name.startswith(".")]
    else:
        own.append(inventory)
        bases.append(inventory.parent)
    if playbook is not None:
        bases.append(playbook.parent)
    for base in dict.fromkeys(b.resolve() for b in bases):
        for name in INVENTORY_VARS_DIRS:
            if (base / name).is_dir():
                beside += sorted(p for p in (base / name).rglob("*") if p.is_file())
    return own, beside


@dataclass(frozen=True)
class Scan:
    """What secret_values read: the secrets, and the listing of an inventory only Ansible can read."""

    values: set[str]
    #: ``ansible-inventory --list --export``'s JSON of a dynamic inventory (None for a static one), for the run to
    #: read instead of running its scripts and plugins again (inventory_list.replay).
    listing: str | None = None
    #: The inventory's own files (inventory_variable_files).
    sources: tuple[Path, ...] = ()


def secret_values(request: Request) -> set[str]:
    """The values the run's artifacts must not keep: secret-named and vaulted ones, from every -e (each file and
    inline mapping, an overridden one too), the inventory (YAML or INI) and the group_vars/host_vars beside it.
    An inventory with a source only Ansible can read (a script, a plugin's configuration, TOML) is listed by
    Ansible too (:func:`listed_secret_values`); CannotRun when it cannot be."""
    return scan(request).values


def scan(request: Request) -> Scan:
    """secret_values, with the listing it read (the run reuses it)."""
    decrypt = vault.decryptor(request.vault_ids, request.vault_password_files)
    values: set[str] = set()
    for source in request.extra_vars:
        values |= secrets.secret_values(source.variables(decrypt))
    try:
        own, beside = inventory_variable_files(request.inventory, request.playbook)
    except OSError:
        own, beside = [], []
    dynamic: list[Path] = []
    for path in own:
        read = vault.load_inventory(path, decrypt)
        for variables in read.variables:
            values |= secrets.secret_values(variables)
        if read.dynamic:
            dynamic.append(path)
    for path in beside:
        data = vault.load_file(path, decrypt)
        if isinstance(data, dict):
            values |= secrets.secret_values(data)
    if not dynamic:  # static inventories stay off this path: ansible-inventory costs a second or more
        return Scan(values)
    listed, listing = listed_secret_values(request, decrypt, dynamic)
    return Scan(values | listed, listing, tuple(own))


#: Every source of the inventory must be read: one Ansible skips with a warning (a script that failed this time)
#: might answer the run's own read, with secrets the scrubber never saw.
LIST_ENVIRONMENT = {"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True", "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True"}


def listed_secret_values(
    request: Request, decrypt: vault.Decrypt | None, dynamic: Sequence[Path]
) -> tuple[set[str], str]:
    """The secret-named and vaulted values of every host and group as Ansible lists the inventory (its scripts run,
    its plugins queried), with the run's configuration, environment and vault secrets, before the run; and the
    listing (export mode: each group's variables on the group, as the run is to read them). CannotRun when it
    cannot be listed: going on would leave what those sources supply in the artifacts."""
    inventory = str(request.inventory.resolve())
    try:
        text = inventory_list.listing(
            inventory,
            cwd=paths.WORKSPACE,  # where a playbook run starts: a plugin config's relative paths read the same
            args=[*vault_cmdline(request), "--export"],
            env={**runner_env(), **LIST_ENVIRONMENT},
        )
        data = inventory_list.parsed(inventory, text, lambda text: vault.load_json(text, decrypt))
    except inventory_list.InventoryError as exc:
        unparsed = inventory_list.UNPARSED_SOURCE.search(str(exc))
        failed = Path(unparsed.group(1).strip()) if unparsed else None
        # Ansible names a source by its path in the inventory (a link too); dynamic holds them as found, maybe links.
        dynamic_paths = {path for source in dynamic for path in (source.absolute(), source.resolve())}
        if failed is not None and not {failed, failed.resolve()} & dynamic_paths:
            # A file of the inventory Ansible cannot parse (a broken INI or YAML file beside the script): bad input,
            # as it is in an inventory without a dynamic source. A script or plugin that failed stays CannotRun.
            raise UserError(f"Ansible cannot parse the inventory source {failed} ({exc})") from exc
        sources = ", ".join(str(p) for p in dynamic)
        raise CannotRun(
            f"cannot list the inventory {inventory}, whose sources {sources} only Ansible can read: {exc}\n"
            "Nothing was run: without the values those sources supply, the secrets among them would stay in the "
            "run's artifacts. Fix the inventory (or give the run its --vault-id/--vault-password-file) until "
            f"`ansible-inventory -i {inventory} --list` succeeds, then run again."
        ) from exc
    values: set[str] = set()
    hostvars = data.get("_meta", {}).get("hostvars", {}) if isinstance(data.get("_meta"), dict) else {}
    # Listed in export mode: a group's variables on the group, a host's own on the host.
    groups = [entry.get("vars") for name, entry in data.items() if name != "_meta" and isinstance(entry, dict)]
    for variables in [*hostvars.values(), *groups]:
        if isinstance(variables, dict):
            values |= secrets.secret_values(variables)
    return values, text


@dataclass(frozen=True)
class Reading:
    """A request's inventory as its runs read it (:func:`reading`)."""

    #: The values the runs' artifacts must not keep: secret_values, and the environment's secret-named ones.
    values: frozenset[str]
    #: The listing of a dynamic inventory, replayed (inventory_list.replay); None: the runs read the inventory.
    listed: inventory_list.Replayed | None = None


@contextlib.contextmanager
def reading(request: Request) -> Iterator[Reading]:
    """The request's inventory scanned for secrets (:func:`scan`), and a dynamic one's listing served for as long as
    the block lasts: each :func:`run` given it, and each process started with ``listed.environment`` and ``-i
    listed.script`` (verify's testinfra suite), read that listing, so the inventory's scripts and plugins run once
    for all of them (a cloud API queried once) and every one sees what was scrubbed. CannotRun when the inventory
    cannot be listed."""
    scanned = scan(request)
    # The runs inherit this process's environment (ansible-runner passes it on): its secret-named values too.
    values = frozenset(scanned.values | secrets.environment_secrets(os.environ))
    if scanned.listing is None:
        yield Reading(values)
        return
    with (
        tempfile.TemporaryDirectory(prefix="rdmaforge-inventory-") as private,
        inventory_list.replay(scanned.listing, request.inventory, scanned.sources,
                              Path(private) / inventory_list.REPLAY_DIR) as listed,
    ):  # fmt: skip
        yield Reading(values, listed)


def run(
    request: Request,
    run_dir: Path,
    on_event: EventHandler | None = None,
    scrubbed: dict[Path, secrets.Scrubbed] | None = None,
    read: Reading | None = None,
) -> Outcome:
    """Run it; the outcome holds the per-host recap, the collected events and the scrubbed artifacts' path.
    ``scrubbed`` is the run directory's record of what was scrubbed (secrets.scrub_tree), updated here. ``read``:
    the request's inventory as a :func:`reading` around this run read it (several runs, one listing); without it
    the run reads its own."""
    log = EventLog(keep_changes=request.check)
    with contextlib.ExitStack() as stack:
        # A dynamic inventory is read from its listing: evaluated once per run (a cloud API queried once), and the
        # run reads exactly what the scrubber read; the listing is served from memory while the run lasts.
        read = read or stack.enter_context(reading(request))
        values = set(read.values)
        redactor = secrets.Redactor(values)

        def handle(event: Mapping[str, Any]) -> bool:
            log.handle(event)
            if on_event is not None:  # the live display, a CI job's log: never a secret there either
                on_event(secrets.redact_data(event, redactor))
            return True  # keep every event in job_events/ (scrubbed on disk below)

        started = time.monotonic()
        status, rc, started_ansible = "error", 1, False
        private = stack.enter_context(tempfile.TemporaryDirectory(prefix="rdmaforge-vars-"))
        interrupted = stack.enter_context(_signals_cancel())
        try:
            kwargs = runner_kwargs(request, run_dir, Path(private), read.listed)
            result = ansible_runner.run(**kwargs, event_handler=handle, cancel_callback=lambda: _cancel(interrupted))
            status, rc = str(result.status), int(result.rc) if result.rc is not None else 1
            started_ansible = True
        except AnsibleRunnerException as exc:  # a bad configuration: Ansible never started
            print(f"ansible-runner: {exc}", file=sys.stderr)
        seconds = time.monotonic() - started
        # Ansible died (no stats) after reaching some hosts: the cluster's hosts it never reached had no row, and a
        # recap of 1,000 nodes that lists 200 read as complete. (A run that reached none is "no host was run".)
        # Listed while a dynamic inventory's listing is still served.
        died = (started_ansible and log.stats is None and request.playbook is not None and status != "canceled"
                and bool(log.hosts))  # fmt: skip
        never_reached = hosts_not_reached(request, read, log.hosts) if died and not interrupted else []
        relisted = None
        if (started_ansible and not log.hosts and status != "canceled" and not interrupted
                and not _says_why_no_host(ansible_said(log, run_dir / IDENT))):  # fmt: skip
            relisted = relist(request, read)  # while a dynamic inventory's listing is still served
    artifacts = run_dir / IDENT
    secrets.scrub_command(artifacts / "command", values)
    secrets.scrub_tree(run_dir, values, scrubbed)
    if interrupted:  # Ansible's processes are gone, the artifacts scrubbed: now the command stops (exit 130)
        raise KeyboardInterrupt
    log.redact(redactor)  # what recap.json, the JUnit reports and the recap table say of failures and warnings
    # Ended early for every host: Ansible said so, or a playbook run ended without its stats (Ansible died).
    ended_early = log.stopped_early or (log.stats is None and request.playbook is not None)
    stopped = [*(log.hosts if ended_early else []), *left_by_the_playbook(log)]
    recaps = (from_stats(log.stats, log.hosts, stopped, request.check) if log.stats
              else recaps_from_events(log, stopped, request.check, never_reached))  # fmt: skip
    return Outcome(
        status=status,
        rc=rc,
        events=log,
        recaps=recaps,
        artifacts=artifacts,
        seconds=seconds,
        leaked_env_files=secrets.env_files(run_dir),
        secret_values=frozenset(values),
        relisted=relisted,
    )


def ansible_said(log: EventLog, artifacts: Path) -> str:
    """What Ansible said of the run outside its tasks: its warning and error lines from the events (EventLog.messages:
    complete), then the end of the stdout file in ``artifacts`` (which can lack some of them)."""
    try:
        text = (artifacts / "stdout").read_text(errors="replace")[-200_000:]
    except OSError:
        text = ""
    return "\n".join([*log.messages, text])


def _says_why_no_host(said: str) -> bool:
    """Whether ``said`` (ansible_said) holds one of the :data:`NO_HOST_SIGNS`."""
    return any(sign in said for sign in NO_HOST_SIGNS)


def _listed_as_run(request: Request, read: Reading, *args: str) -> dict[str, Any]:
    """The request's inventory listed as the run read it (a dynamic one's replayed listing; the run's
    configuration, environment and vault secrets), with ``args`` added. Through pipes, not a pty: nothing of what
    Ansible says is lost. Raises inventory_list's InventoryRefused or InventoryError."""
    listed = read.listed
    inventory = str(listed.script if listed else request.inventory.resolve())
    return inventory_list.listed(inventory, cwd=paths.WORKSPACE, args=[*vault_cmdline(request), *args],
                                 env={**runner_env(), **(listed.environment if listed else {})})  # fmt: skip


def hosts_not_reached(request: Request, read: Reading, reached: Sequence[str]) -> list[str]:
    """The hosts of group 'cluster' within the request's --limit that the run has no event of: each is NOT_RUN in
    the recap of a run Ansible died in. [] where the inventory cannot be listed (nothing known, nothing claimed)."""
    try:
        data = _listed_as_run(request, read, *(["--limit", request.limit] if request.limit else []))
    except (inventory_list.InventoryRefused, inventory_list.InventoryError):
        return []
    seen = set(reached)
    return [host for host in inventory_list.group_hosts(data, CLUSTER_GROUP) if host not in seen]


def relist(request: Request, read: Reading) -> Relisting:
    """The request's inventory listed as the run read it (_listed_as_run): how many hosts group 'cluster' holds,
    or why Ansible cannot list it."""
    try:
        data = _listed_as_run(request, read)
    except inventory_list.InventoryRefused as exc:
        return Relisting(None, " ".join(str(exc).split()))
    except inventory_list.InventoryError:  # not run, timed out, no listing: nothing known, nothing claimed
        return Relisting(None)
    return Relisting(len(inventory_list.group_hosts(data, CLUSTER_GROUP)))


@contextlib.contextmanager
def _signals_cancel() -> Iterator[list[int]]:
    """While a run lasts, Ctrl-C (SIGINT), SIGTERM and SIGHUP (the operator's SSH session to the controller dropped)
    cancel it: ansible-runner then kills ansible-playbook's whole process group. Ansible runs in a session of its
    own, where a terminal's Ctrl-C and hang-up never reach it; the command used to exit at once and leave
    ansible-playbook changing nodes after the inventory's run lock was released, its artifacts unscrubbed (review
    rounds 25c, 27b). The list holds the signals received. Only the main thread can take signals."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def note(signum: int, _frame: object) -> None:
        received.append(signum)

    # A signal the command was started ignoring stays ignored: `nohup rdmaforge provision &` must survive the
    # logout it was detached from (review round 28), and a shell's background job ignores SIGINT.
    previous = {number: signal.signal(number, note) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(number) is not signal.SIG_IGN}  # fmt: skip
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _cancel(interrupted: list[int]) -> bool:
    """ansible-runner's cancel callback: after a signal, Ansible's own processes are stopped first (see
    stop_ansible_processes), then True lets ansible-runner kill its child's process group."""
    if interrupted:
        stop_ansible_processes()
    return bool(interrupted)


#: The commands ansible-runner starts (as the first or second word: the interpreter may come first).
ANSIBLE_COMMANDS = frozenset({b"ansible-playbook", b"ansible"})


def stop_ansible_processes() -> None:
    """SIGKILL to every process under this one's Ansible children, each by its process group. ansible-core's workers
    run in sessions of their own: ansible-runner's cancel kills its child's group only, which left the worker and
    its task running (a `sleep` on localhost, an ssh to a node) after the command ended (review round 25c). Read
    from /proc (Linux); elsewhere nothing is done here."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone since the listing
        children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    ours = os.getpgid(0)
    found = []
    for child in children.get(os.getpid(), []):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        # Ansible's own command (python .../ansible-playbook, or ansible for an ad hoc run), not any child whose
        # command line mentions it (review round 26).
        if {os.path.basename(arg) for arg in command.split(b"\0")[:2]} & ANSIBLE_COMMANDS:
            stack = [child]
            while stack:
                pid = stack.pop()
                found.append(pid)
                stack += children.get(pid, [])
    for pid in found:
        with contextlib.suppress(OSError):
            group = os.getpgid(pid)
            if group != ours:
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)


#: The fact a play sets on a host it leaves before its work (remove_node.yml: a removed node that does not answer,
#: seen through ignore_unreachable, which Ansible counts ok): its words say why. The host is STOPPED, never ok.
LEFT_FACT = "rdmaforge_left"


def left_by_the_playbook(log: EventLog) -> list[str]:
    return [host for host, facts in log.facts.items() if facts.get(LEFT_FACT)]


def recaps_from_events(
    log: EventLog, stopped: Sequence[str] = (), check: bool = False, never_reached: Sequence[str] = ()
) -> dict[str, HostRecap]:
    """Ad-hoc runs emit no stats: count what the events say per host. A playbook run without its stats ended before
    the end (Ansible died: a worker killed by the OOM killer, a strategy plugin's crash, ansible-playbook killed):
    the caller names every host it reached in ``stopped``, so one without a failure or an unreachable result is
    STOPPED, never ok (review round 36: they were ok, and passed in JUnit). ``never_reached``: hosts the run was
    meant for and has no event of, each a row of its own (NOT_RUN)."""
    counts: dict[str, dict[str, int]] = {"ok": {}, "failures": {}, "dark": {}}
    for host in log.hosts:
        key = "dark" if log.unreachable(host) else "failures" if log.failures(host) else "ok"
        counts[key][host] = 1
    return from_stats(counts, [*log.hosts, *never_reached], stopped, check)
