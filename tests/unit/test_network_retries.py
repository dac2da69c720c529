"""Network operations are retried with doubling waits, give up on a silent mirror, then fail with the URL named
(issue 18).

Every download, checkout, pip and package task of every role reads the same variables with the same
defaults as preflight's argument spec documents (a copy that drifts fails here), and ends its tries with the
backoff filter; every download, checkout and pip install also has a timeout. Then for real: the erdma key download
of role rdma_repos (a real get_url on this machine, ansible_connection=local) against an HTTP server on loopback that
answers 503 twice and then serves a real key (the gaps between its requests show the backoff), against a port
nothing listens on, and against a server that accepts the connection and never answers; a real git checkout
with build_once's own git environment against that silent server (without it, git waits for ever); a real
apt-get update with the apt settings role os_packages writes (without them, apt waits minutes); and a real dnf
reading the erdma yum repository that role rdma_repos writes (without its timeout, dnf waits 30 s a connection).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import QuietHandler, SilentServer, recap, run_playbook, throwaway_signing_key

from rdmaforge import network_retry
from rdmaforge.paths import PROJECT_ROOT
from tests.unit.role_vars import spec_default

ROLES = PROJECT_ROOT / "roles"
#: Modules that reach a mirror, an index or a remote repository.
NETWORK_MODULES = {
    f"ansible.builtin.{name}"
    for name in ("apt", "dnf", "yum", "package", "pip", "get_url", "git", "rpm_key", "uri", "apt_key")
}
ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}


def preflight_default(option: str) -> object:
    return spec_default("preflight", option)


def network_tasks() -> Iterator[tuple[str, dict, bool]]:
    """(where, task, rescued): ``rescued`` when the task sits in a block whose rescue retries a network task."""

    def retried(tasks: list) -> bool:
        return any(NETWORK_MODULES & set(task) and "retries" in task for task in tasks or [])

    def walk(tasks: list, where: str, rescued: bool) -> Iterator[tuple[str, dict, bool]]:
        for task in tasks or []:
            yield from walk(task.get("block", []), where, retried(task.get("rescue", [])))
            for key in ("rescue", "always"):
                yield from walk(task.get(key, []), where, False)
            if NETWORK_MODULES & set(task):
                yield f"{where}: {task.get('name')}", task, rescued

    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        yield from walk(yaml.safe_load(path.read_text()), str(path.relative_to(PROJECT_ROOT)), False)


def test_every_network_task_retries_with_the_documented_defaults() -> None:
    retries_default = preflight_default("rdmaforge_network_retries")
    delay_default = preflight_default("rdmaforge_network_retry_delay")
    retries = f"{{{{ rdmaforge_network_retries | default({retries_default}) }}}}"
    delay = f"{{{{ rdmaforge_network_retry_delay | default({delay_default}) }}}}"
    found = list(network_tasks())
    assert len(found) >= 10, [name for name, _, _ in found]  # apt, dnf, pip, get_url, git, rpm_key in six roles
    for name, task, rescued in found:
        if rescued:
            # Its failure goes to a rescue that retries: retried here too, a mirror that is down would be waited
            # for twice.
            assert not {"retries", "delay", "until"} & set(task), name
            continue
        assert task.get("retries") == retries, name
        assert task.get("delay") == delay, name
        assert task.get("until") == (
            f"{task.get('register')} | rdmaforge.cluster.rdmaforge_network_retry_done("
            f"rdmaforge_network_retries | default({retries_default}), "
            f"rdmaforge_network_retry_delay | default({delay_default}))"
        ), name
    assert any(rescued for _, _, rescued in found)  # os_packages' apt install


def test_every_download_checkout_and_pip_install_gives_up_on_a_silent_mirror() -> None:
    """The mirror timeout, with preflight's documented default: get_url's timeout, pip's --timeout, git's low-speed
    abort, and for every apt task that reaches a mirror rdmaforge's apt settings (written before it in the same
    file) with the apt module's own update retries off. (dnf's: the erdma repository file, test_rhel_and_ubuntu.py.)"""
    timeout = f"{{{{ rdmaforge_network_timeout | default({preflight_default('rdmaforge_network_timeout')}) }}}}"
    seen = set()
    for name, task, _ in network_tasks():
        apt = task.get("ansible.builtin.apt")
        if apt is not None and apt.get("state") != "absent":  # removing packages downloads nothing
            assert task.get("environment") == "{{ os_packages_apt_environment }}", name
            if apt.get("update_cache"):
                assert apt.get("update_cache_retries") == 1, name
            path, _, task_name = name.partition(": ")
            text = (PROJECT_ROOT / path).read_text()
            settings = [text.find(f) for f in ("import_tasks: apt_settings.yml", "tasks_from: apt_settings")]
            assert 0 <= min(i for i in settings if i >= 0) < text.index(task_name), f"{name}: no apt settings before it"
        elif "ansible.builtin.get_url" in task:
            assert task["ansible.builtin.get_url"].get("timeout") == timeout, name
        elif "ansible.builtin.pip" in task:
            assert f"--timeout {timeout}" in task["ansible.builtin.pip"].get("extra_args", ""), name
        elif "ansible.builtin.git" in task:
            wanted = {"GIT_HTTP_LOW_SPEED_LIMIT": "1", "GIT_HTTP_LOW_SPEED_TIME": timeout}
            assert task.get("environment") == wanted, name
        else:
            continue
        seen.update(key for key in task if key.startswith("ansible.builtin."))
    assert seen == {f"ansible.builtin.{name}" for name in ("apt", "get_url", "pip", "git")}, seen


def test_the_waits_double_from_the_delay_up_to_a_minute() -> None:
    """The rule the argument spec documents: delay, 2 x delay, 4 x delay, ..., at most 60 s or the delay."""
    assert [network_retry.wait_after(attempt, 5) for attempt in range(1, 7)] == [5, 10, 20, 40, 60, 60]
    assert [network_retry.wait_after(attempt, 300) for attempt in range(1, 4)] == [300, 300, 300]
    assert [network_retry.wait_after(attempt, 0) for attempt in range(1, 4)] == [0, 0, 0]


def test_the_until_filter_waits_only_the_part_ansible_does_not_and_never_after_the_last_try() -> None:
    slept: list[float] = []
    assert network_retry.settled({"failed": False, "attempts": 3}, 4, 5, sleep=slept.append) is True
    for attempt in range(1, 6):  # retries=4: five tries, the fifth is the last
        assert network_retry.settled({"failed": True, "attempts": attempt}, 4, 5, sleep=slept.append) is False
    # Ansible waits the 5 s delay itself after tries 1-4; the filter adds the rest of 5, 10, 20, 40.
    assert slept == [5, 15, 35]


def test_a_failure_another_try_cannot_mend_ends_the_tries_at_once() -> None:
    slept: list[float] = []
    for status in (404, 403, 401, 410):
        result = {"failed": True, "attempts": 1, "status_code": status, "msg": "HTTP Error"}
        assert network_retry.settled(result, 4, 5, sleep=slept.append) is True, status
    for status in (408, 425, 429, 500, 503, -1):  # -1: get_url's status when nothing answered
        result = {"failed": True, "attempts": 1, "status_code": status, "msg": "Request failed"}
        assert network_retry.settled(result, 4, 5, sleep=slept.append) is False, status
    assert network_retry.permanent_failure({"failed": False, "status_code": 404}) is None
    assert network_retry.permanent_failure({"failed": True, "msg": "Unsupported parameters for (pip) module: x"})
    # The dnf module's result for an unsigned package, from tests/integration/test_dnf_path_on_lab.py's lab run.
    unsigned = {
        "failed": True,
        "changed": False,
        "msg": "Failed to validate GPG signature for "
        "rdmaforge-unsigned-1.0-1.noarch: Package rdmaforge-unsigned-1.0-1.noarch.rpm is not signed",
    }
    assert network_retry.settled(unsigned, 4, 5, sleep=slept.append) is True
    # rpm_key's result for a key file that is not there, from the same module's lab run (check mode before a fix
    # of roles/rdma_repos/tasks/yum.yml): it was tried four times.
    no_key_file = {"failed": True, "msg": "Not a valid key /etc/pki/rpm-gpg/RPM-GPG-KEY-rdmaforge-erdma"}
    assert network_retry.settled(no_key_file, 4, 5, sleep=slept.append) is True
    assert slept == []  # the first wait is Ansible's own; nothing else is waited for
    warned: list[str] = []
    network_retry.settled({"failed": True, "attempts": 1, "status_code": 404}, 4, 5, warn=warned.append)
    assert warned == ["not retried: the server answered HTTP 404; another try gets the same answer"]


def test_the_real_pip_build_failure_of_the_h100_run_is_not_retried() -> None:
    """The pip result the H100 run printed (tests/data/device-h100-plugin/plugin1.txt): four identical build failures,
    99 s of retries. The until filter now ends the tries after the first."""
    line = next(
        line
        for line in (PROJECT_ROOT / "tests" / "data" / "device-h100-plugin" / "plugin1.txt").read_text().splitlines()
        if line.startswith("failed: [gpu-node]")
    )
    result = {**json.loads(line.split(" => ", 1)[1]), "failed": True, "attempts": 1}
    reason = network_retry.permanent_failure(result)
    assert reason and "could not build" in reason, reason
    assert network_retry.settled(result, 4, 5, sleep=lambda _: None) is True


class FlakyKeyServer(http.server.ThreadingHTTPServer):
    """Answers ``status`` (503 unless told) to the first ``failures`` requests, then serves ``body``; notes when
    each request came."""

    def __init__(self, body: bytes, failures: int, status: int = 503) -> None:
        self.body, self.failures, self.requests, self.status = body, failures, 0, status
        self.times: list[float] = []
        super().__init__(("127.0.0.1", 0), FlakyHandler)


class FlakyHandler(http.server.BaseHTTPRequestHandler):
    server: FlakyKeyServer

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        self.server.requests += 1
        self.server.times.append(time.monotonic())
        if self.server.requests <= self.server.failures:
            self.send_error(self.server.status, "mirror says no")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def signing_key() -> tuple[bytes, str]:
    """A real OpenPGP public key (armored) and its fingerprint, made with gpg in a throwaway home."""
    with throwaway_signing_key("retry test <retry@lab.invalid>") as key:
        armored = subprocess.run([*key.gpg, "--armor", "--export"], check=True, capture_output=True).stdout
    return armored, key.fingerprint


def local_play(
    tmp_path: Path, play: dict, timeout: int, *extra: str, timed: bool = False
) -> subprocess.CompletedProcess[str]:
    """Runs one play on this machine (ansible_connection=local); ``extra``: more ansible-playbook arguments."""
    return local_plays(tmp_path, {"localhost": play}, timeout, *extra, timed=timed)


def local_plays(
    tmp_path: Path, plays: dict[str, dict], timeout: int, *extra: str, timed: bool = False
) -> subprocess.CompletedProcess[str]:
    """Runs each play for a host of its own (its key in ``plays``), one after the other in one ansible-playbook run,
    every host this machine (ansible_connection=local); ``extra``: more ansible-playbook arguments; ``timed``: at
    the lab's priority, for a test that measures the run's waits (run_playbook)."""
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {host: dict(local) for host in plays}}}))
    playbook = tmp_path / "play.yml"
    playbook_plays = [{"hosts": host, "gather_facts": False, **play} for host, play in plays.items()]
    playbook.write_text(yaml.safe_dump(playbook_plays))
    return run_playbook(str(playbook), *extra, inventory=inventory, env=ENV, timeout=timeout, timed=timed)


def key_download(
    tmp_path: Path, url: str, fingerprint: str, retries: int, delay: int = 0, timeout: int | None = None,
    timed: bool = False,
) -> subprocess.CompletedProcess[str]:
    return local_play(tmp_path, {
        "name": "The erdma key download of role rdma_repos",
        "tasks": [{"name": "Verify the key", "ansible.builtin.include_role": {
            "name": "rdmaforge.cluster.rdma_repos", "tasks_from": "verify_key"}}],
        "vars": {
            "rdma_repos_erdma_gpg_key_url": url,
            "rdma_repos_erdma_gpg_fingerprint": fingerprint,
            "rdma_repos_controller_cache": str(tmp_path / "keys"),
            "rdmaforge_network_retries": retries,
            "rdmaforge_network_retry_delay": delay,
            **({} if timeout is None else {"rdmaforge_network_timeout": timeout}),
        },
    }, timeout=300, timed=timed)  # fmt: skip


def download_from(
    server: FlakyKeyServer, tmp_path: Path, fingerprint: str
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """The role's key download from ``server`` (4 retries, delay 3 s): the URL and the run. Its tests measure the
    waits between tries, so it runs at the lab's priority (CI once saw the first gap 2 s too long at SCHED_IDLE)."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/erdma/GPGKEY"
        return url, key_download(tmp_path, url, fingerprint, retries=4, delay=3, timed=True)
    finally:
        server.shutdown()


def test_a_mirror_that_fails_twice_is_retried_and_the_key_verified(
    signing_key: tuple[bytes, str], tmp_path: Path
) -> None:
    armored, fingerprint = signing_key
    server = FlakyKeyServer(armored, failures=2)
    _url, proc = download_from(server, tmp_path, fingerprint)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert server.requests == 3
    # The backoff for delay 3: at least 3 s before the second try and 6 s before the third. Lower bounds (a busy
    # machine makes a gap longer, never shorter), and the second gap longer by 2 of the 3 s it should add: with a
    # fixed delay the two would differ only by the noise of one module run. (With delay 2 and a 1.5 s margin, the
    # unit tests beside the lab once saw 3.38 s and 4.75 s: 1.4 s of noise on the first gap.)
    first_gap, second_gap = (b - a for a, b in zip(server.times, server.times[1:], strict=False))
    assert first_gap >= 3 and second_gap >= 6 and second_gap - first_gap >= 2, server.times
    assert proc.stdout.count("FAILED - RETRYING: [localhost]: Download the erdma signing key") == 2, proc.stdout
    assert (tmp_path / "keys" / f"erdma-{fingerprint}.gpg").stat().st_size > 0
    assert recap(proc.stdout)["localhost"]["failed"] == 0


def yum_host_play(tmp_path: Path, url: str, fingerprint: str) -> tuple[dict, Path]:
    """verify_key.yml, then what yum.yml installs (its own arguments) written to a file here: the play and the file."""
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "rdma_repos" / "tasks" / "yum.yml").read_text())
    (install,) = [t for t in tasks if t["name"] == "Install the verified erdma signing key"]
    rpm_key = tmp_path / "RPM-GPG-KEY-rdmaforge-erdma"
    return {"name": "The erdma key of role rdma_repos, as a yum host gets it", "tasks": [
        {"name": "Verify the key", "ansible.builtin.include_role": {  # public: its vars, as yum.yml sees them
            "name": "rdmaforge.cluster.rdma_repos", "tasks_from": "verify_key", "public": True}},
        {"name": "What yum.yml installs", "ansible.builtin.copy": {
            **{k: v for k, v in install["ansible.builtin.copy"].items() if k in ("src", "content")},
            "dest": str(rpm_key), "mode": "0644"}}],
        "vars": {"rdma_repos_erdma_gpg_key_url": url, "rdma_repos_erdma_gpg_fingerprint": fingerprint,
                 "rdma_repos_controller_cache": str(tmp_path / "keys")}}, rpm_key  # fmt: skip


def test_the_controller_keeps_one_verified_copy_of_the_key_and_yum_hosts_get_it_armored(
    signing_key: tuple[bytes, str], tmp_path: Path
) -> None:
    """The controller kept the verified key twice, the dearmored keyring apt hosts get and an armored copy for rpm
    and dnf, each written once from whichever download came first. Now one copy, keyed by its fingerprint (besides
    the download itself, fetched and checked every run), and the armored copy an earlier run left goes; what a
    yum/dnf host gets (yum.yml's own arguments) is that keyring armored: the text gpg --armor --export wrote for the
    key. A second run changes nothing."""
    armored, fingerprint = signing_key
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / f"erdma-{fingerprint}.asc").write_bytes(armored)  # the copy a run since 22406a7 kept
    server = FlakyKeyServer(armored, failures=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        play, rpm_key = yum_host_play(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/erdma/GPGKEY",
                                      fingerprint)  # fmt: skip
        first, second = local_play(tmp_path, play, timeout=300), local_play(tmp_path, play, timeout=300)
    finally:
        server.shutdown()
    assert first.returncode == 0 and second.returncode == 0, first.stdout[-4000:] + second.stdout[-4000:]
    assert {p.name for p in (tmp_path / "keys").iterdir()} == {"erdma.asc", f"erdma-{fingerprint}.gpg"}
    assert rpm_key.read_text() == armored.decode()
    assert recap(second.stdout)["localhost"]["changed"] == 0, second.stdout


def shown_keys(keys: bytes) -> str:
    """gpg's listing (--with-colons) of the keys in ``keys``, armored or not."""
    return subprocess.run(["gpg", "--batch", "--show-keys", "--with-colons"], input=keys, check=True,
                          capture_output=True).stdout.decode()  # fmt: skip


#: How the download carried a second key beside the pinned one, or an earlier run kept it.
CARRIED = ("a second armored block", "one block holding both keys", "an earlier keyring")


@dataclass(frozen=True)
class SecondKeyCase:
    """One way a second key came with the pinned one: what was served and what the runs must leave."""

    host: str  # its host (and play) in the shared runs
    fingerprint: str  # the pinned key's
    other: str  # the second key's fingerprint
    listing: str  # gpg's listing of the download that carried both keys
    keyring: bytes  # the pinned key alone, as gpg --export writes it in the home that made it
    armored: bytes  # the same, gpg --armor --export
    keys: Path  # rdma_repos_controller_cache
    rpm_key: Path  # what yum.yml installs


def second_key_case(carried: str, directory: Path) -> tuple[SecondKeyCase, bytes]:
    """Two throwaway keys, the pinned one with a subkey of its own; the case and the download its server serves."""
    with (
        throwaway_signing_key("erdma <erdma@lab.invalid>") as pinned_key,
        throwaway_signing_key("attacker <attacker@lab.invalid>") as attacker_key,
    ):
        pinned, fingerprint = pinned_key.gpg, pinned_key.fingerprint
        attacker, other = attacker_key.gpg, attacker_key.fingerprint
        subprocess.run([*pinned, "--passphrase", "", "--quick-add-key", fingerprint, "cv25519", "encr", "never"],
                       check=True, capture_output=True)  # fmt: skip
        keyring = subprocess.run([*pinned, "--export", fingerprint], check=True, capture_output=True).stdout
        armored = subprocess.run([*pinned, "--armor", "--export", fingerprint], check=True, capture_output=True).stdout
        if carried == "one block holding both keys":
            subprocess.run([*attacker, "--import"], input=keyring, check=True, capture_output=True)
            download = subprocess.run([*attacker, "--armor", "--export"], check=True, capture_output=True).stdout
        else:
            download = armored + subprocess.run([*attacker, "--armor", "--export"], check=True,
                                                capture_output=True).stdout  # fmt: skip
    listing = shown_keys(download)
    if carried == "an earlier keyring":  # what the old code dearmored from such a download and kept
        (directory / "keys").mkdir()
        (directory / "keys" / f"erdma-{fingerprint}.gpg").write_bytes(
            subprocess.run(["gpg", "--dearmor"], input=download, check=True, capture_output=True).stdout
        )
        download = armored
    host = carried.replace(" ", "-")
    rpm_key = directory / "RPM-GPG-KEY-rdmaforge-erdma"  # where yum_host_play has it written
    return SecondKeyCase(host, fingerprint, other, listing, keyring, armored, directory / "keys", rpm_key), download


@pytest.fixture(scope="module")
def second_key_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, SecondKeyCase], list]:
    """Every case of CARRIED, each a play of its own for a host of its own (this machine), in three ansible-playbook
    runs: a first run, a second one and a --check run. Three runs instead of one set of three per case: each Ansible
    start and each module's first use in a run is paid once for the three. Each case's server, directory and
    variables are its own; the recap counts each host's tasks apart."""
    root = tmp_path_factory.mktemp("second-key")
    cases, plays, servers = {}, {}, []
    for number, carried in enumerate(CARRIED):
        directory = root / f"case-{number}"
        directory.mkdir()
        case, download = second_key_case(carried, directory)
        server = FlakyKeyServer(download, failures=0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        url = f"http://127.0.0.1:{server.server_address[1]}/erdma/GPGKEY"
        plays[case.host], rpm_key = yum_host_play(directory, url, case.fingerprint)
        assert rpm_key == case.rpm_key
        cases[carried] = case
    try:
        runs = [local_plays(root, plays, 600), local_plays(root, plays, 600),
                local_plays(root, plays, 600, "--check")]  # fmt: skip
    finally:
        for server in servers:
            server.shutdown()
    return cases, runs


@pytest.mark.parametrize("carried", CARRIED)
def test_a_second_key_in_the_download_is_never_trusted(
    carried: str, second_key_runs: tuple[dict[str, SecondKeyCase], list]
) -> None:
    """The download only had to contain the pinned fingerprint among its keys, and the whole of it became the keyring
    apt hosts trust (and, armored, the key yum hosts import): a second key served beside the pinned one, as a second
    armored block or in the same block, was trusted on the first run, and a keyring an earlier run made that way was
    kept for ever. Now the keyring is the pinned key alone, with its own subkey: the bytes gpg --export writes for it
    in the home that made it; the yum hosts' file is gpg --armor --export's text. A second run and a --check run
    change nothing. (The three cases share their runs: see second_key_runs.)"""
    cases, runs = second_key_runs
    case = cases[carried]
    assert [line[:4] for line in case.listing.splitlines()].count("pub:") == 2, case.listing  # it does carry both
    counts = [recap(run.stdout)[case.host] for run in runs]
    assert all(c["failed"] == 0 and c["unreachable"] == 0 for c in counts), "".join(r.stdout[-4000:] for r in runs)
    kept = (case.keys / f"erdma-{case.fingerprint}.gpg").read_bytes()
    assert case.other in case.listing and case.other not in shown_keys(kept)
    assert kept == case.keyring
    assert case.rpm_key.read_bytes() == case.armored
    assert [c["changed"] for c in counts[1:]] == [0, 0], runs[1].stdout + runs[2].stdout


def test_a_kept_keyring_without_the_pinned_key_is_refused_not_installed_empty(
    signing_key: tuple[bytes, str], tmp_path: Path
) -> None:
    """A keyring an earlier run kept that does not hold the pinned key (corrupted, or replaced by hand): gpg exports
    nothing for the fingerprint and exits 0, so the run installed an empty keyring (apt then trusts no key and fails
    far from the cause). Now the run stops naming the variable and the file to remove."""
    armored, fingerprint = signing_key
    with throwaway_signing_key("not erdma <other@lab.invalid>") as other:
        foreign = subprocess.run([*other.gpg, "--export"], check=True, capture_output=True).stdout
    kept = tmp_path / "keys" / f"erdma-{fingerprint}.gpg"
    kept.parent.mkdir()
    kept.write_bytes(foreign)
    server = FlakyKeyServer(armored, failures=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = key_download(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/erdma/GPGKEY", fingerprint, 0)
    finally:
        server.shutdown()
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "rdma_repos_erdma_gpg_fingerprint=" in proc.stdout and "exported nothing" in proc.stdout, proc.stdout
    assert f"Remove {kept}" in " ".join(proc.stdout.split()), proc.stdout
    assert kept.read_bytes() == foreign  # left for the operator to look at, not overwritten empty


def forged_subkey_download(genuine_first: bool) -> tuple[bytes, str, str]:
    """A download holding the pinned key A and a key B of someone else whose encryption subkey is A's public key
    (added with A's creation time, so it has A's fingerprint; only A's public key is needed for an encryption
    subkey, the home here holds A's secret because gpg's addkey takes a keygrip). Returns the armored download
    (A's own export first, or B's, which carries A's fingerprint, first), A's fingerprint and B's."""
    home = Path(tempfile.mkdtemp(prefix="gpg-", dir="/tmp"))  # short: gpg-agent's socket path (see conftest)
    gpg = ["gpg", "--batch", "--homedir", str(home), "--pinentry-mode", "loopback", "--passphrase", ""]
    try:
        subprocess.run([*gpg, "--quick-gen-key", "attacker <b@lab.invalid>", "rsa2048", "sign", "never"], check=True,
                       capture_output=True)  # fmt: skip
        subprocess.run([*gpg, "--quick-gen-key", "erdma <a@lab.invalid>", "rsa2048", "sign,encr", "never"],
                       check=True, capture_output=True)  # fmt: skip

        def field(uid: str, kind: str, index: int, *options: str) -> str:
            listing = subprocess.run([*gpg, "--with-colons", *options, "--list-keys", uid], check=True,
                                     capture_output=True, text=True).stdout  # fmt: skip
            return next(line.split(":")[index] for line in listing.splitlines() if line.startswith(kind + ":"))

        pinned, other = field("a@lab.invalid", "fpr", 9), field("b@lab.invalid", "fpr", 9)
        grip = field("a@lab.invalid", "grp", 9, "--with-keygrip")
        created = field("a@lab.invalid", "pub", 5)
        genuine = subprocess.run([*gpg, "--armor", "--export", pinned], check=True, capture_output=True).stdout
        # addkey, "existing key" (13) by keygrip, toggle signing off (S), done (Q), no expiry (0), save
        subprocess.run(["gpg", "--homedir", str(home), "--no-tty", "--expert", "--faked-system-time", f"{created}!",
                        "--pinentry-mode", "loopback", "--passphrase", "", "--command-fd", "0", "--edit-key", other],
                       input=f"addkey\n13\n{grip}\nS\nQ\n0\nsave\n", text=True, check=True,
                       capture_output=True)  # fmt: skip
        forged = subprocess.run([*gpg, "--armor", "--export", other], check=True, capture_output=True).stdout
        assert pinned in shown_keys(forged)  # B carries A's fingerprint as a subkey
        return (genuine + forged if genuine_first else forged + genuine), pinned, other
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("genuine_first", [False, True])
def test_a_key_whose_subkey_carries_the_pinned_fingerprint_is_never_trusted(
    tmp_path: Path, genuine_first: bool
) -> None:
    """A download holding the genuine key and a forged one whose subkey has the pinned fingerprint passes the
    fingerprint check. Genuine key first: gpg imports both, and `gpg --export FINGERPRINT` exports every key the
    fingerprint names, the forged one too: the keyring apt trusts held a key whose primary can sign (and rpm's
    check counts subkeys, so yum hosts took it as well). The export must now be the pinned key alone. Forged key
    first: gpg refuses the genuine one ("doesn't match our copy") and the import failed with a bare 'non-zero
    return code'; now the run says what that means."""
    download, pinned, other = forged_subkey_download(genuine_first)
    server = FlakyKeyServer(download, failures=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = key_download(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/erdma/GPGKEY", pinned, 0)
    finally:
        server.shutdown()
    said = " ".join(proc.stdout.split())
    keyring = tmp_path / "keys" / f"erdma-{pinned}.gpg"
    if genuine_first:
        assert proc.returncode != 0, said[-4000:]
        assert f"is the key(s) {pinned}, {other}, not the pinned key alone" in said, said[-4000:]
        assert not keyring.exists()
    else:
        assert proc.returncode != 0
        assert "gpg could not import" in said and "doesn't match our copy" in said, said[-4000:]
        assert "another key there claims the fingerprint of rdma_repos_erdma_gpg_fingerprint=" in said
        assert not keyring.exists()


def test_a_dead_mirror_fails_after_the_retries_naming_the_url(signing_key: tuple[bytes, str], tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/erdma/GPGKEY"
    proc = key_download(tmp_path, url, signing_key[1], retries=2)
    assert proc.returncode != 0
    assert proc.stdout.count("FAILED - RETRYING: [localhost]: Download the erdma signing key") == 2, proc.stdout
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal: [localhost]")]
    assert fatal and url in fatal[-1] and "Connection refused" in fatal[-1], proc.stdout[-3000:]
    assert not (tmp_path / "keys" / "erdma.asc").exists() or os.path.getsize(tmp_path / "keys" / "erdma.asc") == 0


def test_a_mirror_that_answers_404_fails_at_the_first_try_naming_the_url(
    signing_key: tuple[bytes, str], tmp_path: Path
) -> None:
    armored, fingerprint = signing_key
    server = FlakyKeyServer(armored, failures=100, status=404)
    url, proc = download_from(server, tmp_path, fingerprint)
    assert proc.returncode != 0
    assert server.requests == 1, proc.stdout[-3000:]
    assert "FAILED - RETRYING" not in proc.stdout
    assert "not retried: the server answered HTTP 404" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal: [localhost]")]
    assert fatal and url in fatal[-1] and "404" in fatal[-1], proc.stdout[-3000:]


def test_a_python_package_that_fails_to_build_is_not_retried(tmp_path: Path) -> None:
    """A real pip (the node's kind: Debian's python3 -m venv) builds a local package whose build fails: one try, with
    the until filter of every pip task. Before, each retry rebuilt it (the H100 run spent 99 s on four)."""
    package = tmp_path / "badpkg"
    package.mkdir()
    # Its build script fails whatever pip asks of it (metadata or wheel; pip's choice depends on its version and on
    # the wheel package). The H100 sample above covers the wheel step.
    (package / "setup.py").write_text("raise SystemExit('this package cannot be built')\n")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
    proc = local_play(tmp_path, {
        "name": "A pip install with the roles' retries",
        "tasks": [{
            "name": "Build and install it",
            "ansible.builtin.pip": {"name": str(package), "executable": str(venv / "bin" / "pip"),
                                    "extra_args": "--no-index --no-build-isolation"},
            "register": "pip_result",
            "retries": 3,
            "delay": 1,
            "until": "pip_result | rdmaforge.cluster.rdmaforge_network_retry_done(3, 1)",
        }],
    }, timeout=300)  # fmt: skip
    assert proc.returncode != 0
    assert "FAILED - RETRYING" not in proc.stdout, proc.stdout[-3000:]
    assert "not retried: the package's build script failed" in proc.stdout + proc.stderr, proc.stderr
    assert "cannot be built" in proc.stdout


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def test_a_silent_mirror_ends_the_key_download_after_the_inventory_timeout(
    signing_key: tuple[bytes, str], silent_server: SilentServer, tmp_path: Path
) -> None:
    # 15 s, above get_url's own default of 10 s: a wait this long shows the inventory's value was applied.
    url = f"http://127.0.0.1:{silent_server.port}/erdma/GPGKEY"
    proc = key_download(tmp_path, url, signing_key[1], retries=0, timeout=15)
    assert proc.returncode != 0
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal: [localhost]")]
    assert fatal and url in fatal[-1] and "timed out" in fatal[-1], proc.stdout[-3000:]
    assert len(silent_server.waits) == 1 and silent_server.waits[0] >= 14, silent_server.waits


def test_a_silent_git_mirror_ends_the_checkout_with_build_once_git_environment(
    silent_server: SilentServer, tmp_path: Path
) -> None:
    """build_once's git task, its environment as the role writes it, against the silent server: it fails once
    nothing came for rdmaforge_network_timeout seconds. Without that environment git waits for ever (seen on this
    machine: git 2.39 still waiting when killed after 300 s), and the playbook's time limit below fails the test."""
    git_task = next(task for where, task, _ in network_tasks() if where.startswith("roles/build_once/") and
                    "ansible.builtin.git" in task)  # fmt: skip
    url = f"http://127.0.0.1:{silent_server.port}/nccl.git"
    proc = local_play(tmp_path, {
        "name": "build_once's git checkout",
        "vars": {"rdmaforge_network_timeout": 5},
        "tasks": [{
            "name": "Check out the source",
            "ansible.builtin.git": {"repo": url, "dest": str(tmp_path / "src"), "version": "v2.29.7-1", "depth": 1},
            "environment": git_task["environment"],
        }],
    }, timeout=120)  # fmt: skip
    assert proc.returncode != 0
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal: [localhost]")]
    assert fatal and url in fatal[-1], proc.stdout[-3000:]
    assert silent_server.waits and max(silent_server.waits) >= 4.5, silent_server.waits  # see SilentServer.waits


def sandboxed_apt_settings(tmp_path: Path, mirror: str, source_options: str = "trusted=yes") -> dict[str, str]:
    """apt's settings for a throwaway package index (its own state, cache and sources list under ``tmp_path``, one
    source at ``mirror`` with ``source_options``): this machine's own apt state is neither read nor changed."""
    root = tmp_path / "apt"
    for sub in ("state/lists/partial", "cache/archives/partial"):
        (root / sub).mkdir(parents=True)
    (root / "status").touch()
    (root / "sources.list").write_text(f"deb [{source_options}] {mirror} bookworm main\n")
    return {"Dir::State": f"{root}/state", "Dir::State::status": f"{root}/status", "Dir::Cache": f"{root}/cache",
            "Dir::Etc::sourcelist": f"{root}/sources.list", "Dir::Etc::sourceparts": "/nonexistent",
            "APT::Sandbox::User": "root"}  # fmt: skip


def sandboxed_apt(tmp_path: Path, mirror: str) -> list[str]:
    """apt-get's arguments for an update of the throwaway package index of :func:`sandboxed_apt_settings`."""
    options = [arg for name, value in sandboxed_apt_settings(tmp_path, mirror).items()
               for arg in ("-o", f"{name}={value}")]  # fmt: skip
    return ["apt-get", "-q", *options, "update"]


def write_apt_settings(tmp_path: Path, settings: Path) -> None:
    """Role os_packages writes its apt settings for real (a local play) to ``settings``, with a 5 s mirror timeout."""
    proc = local_play(tmp_path, {
        "name": "rdmaforge's apt settings",
        "vars": {"rdmaforge_network_timeout": 5, "os_packages_apt_config": str(settings)},
        "tasks": [{"name": "Write them", "ansible.builtin.include_role": {
            "name": "rdmaforge.cluster.os_packages", "tasks_from": "apt_settings"}}],
    }, timeout=120)  # fmt: skip
    assert recap(proc.stdout)["localhost"]["failed"] == 0, proc.stdout[-3000:]


@pytest.mark.skipif(not shutil.which("apt-get"), reason="needs apt-get on this machine (Debian/Ubuntu)")
def test_a_silent_mirror_ends_an_apt_update_after_the_inventory_timeout(
    silent_server: SilentServer, tmp_path: Path
) -> None:
    """Role os_packages writes its apt settings for real (a local play, the file under tmp_path), then a real apt-get
    update with APT_CONFIG set to that file, as the role's apt tasks set it, against the silent server: one try of at
    most two connections, each ended after rdmaforge_network_timeout (5 s). Without the file apt 2.6 tries each
    index file four times, two connections of 30 s each (4 min 7 s on this machine), and the test fails."""
    settings = tmp_path / "etc" / "apt.conf"
    write_apt_settings(tmp_path, settings)
    mirror = f"http://127.0.0.1:{silent_server.port}/debian"
    started = time.monotonic()
    update = subprocess.run(sandboxed_apt(tmp_path, mirror), env={**os.environ, "APT_CONFIG": str(settings)},
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    took = time.monotonic() - started
    # apt-get update only warns about an index it could not fetch; the apt module turns that into a failure.
    assert f"Failed to fetch {mirror}/dists/bookworm/InRelease" in update.stdout + update.stderr, update
    assert 1 <= len(silent_server.waits) <= 2 and max(silent_server.waits) >= 4.5, silent_server.waits
    assert 4.5 <= took < 30, took


@pytest.mark.skipif(not shutil.which("apt-config"), reason="needs apt-config on this machine (Debian/Ubuntu)")
def test_the_nodes_own_apt_configuration_wins_over_rdmaforge_settings(tmp_path: Path) -> None:
    """apt reads APT_CONFIG before the node's apt.conf.d: a timeout the node sets there is kept. Checked with a
    stand-in for the node's directory (so this machine's own apt.conf.d is not touched)."""
    write_apt_settings(tmp_path, tmp_path / "apt.conf")
    parts = tmp_path / "apt.conf.d"
    parts.mkdir()
    (parts / "90node").write_text('Acquire::https::Timeout "77";\n')
    # The entry point apt reads first: rdmaforge's file, then the stand-in directory in place of /etc/apt/apt.conf.d.
    entry = tmp_path / "entry.conf"
    entry.write_text(f'#include "{tmp_path / "apt.conf"}";\nDir::Etc::parts "{parts}";\n')
    dump = subprocess.run(["apt-config", "dump"], env={**os.environ, "APT_CONFIG": str(entry)},
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert 'Acquire::http::Timeout "5";' in dump and 'Acquire::Retries "0";' in dump, dump
    assert 'Acquire::https::Timeout "77";' in dump, dump


@pytest.mark.skipif(not shutil.which("dnf"), reason="needs dnf on this machine (`make deps` installs Debian's dnf)")
def test_a_silent_mirror_ends_dnf_metadata_download_after_the_inventory_timeout(
    silent_server: SilentServer, tmp_path: Path
) -> None:
    """Role rdma_repos writes the erdma yum repository file for real (yum_repository, into a scratch reposdir) with a
    5 s rdmaforge_network_timeout and the silent server as its baseurl; then a real dnf (Debian's dnf 4.14) reads its
    metadata in a throwaway install root. Every connection ends after the file's 5 s. Without the file's `timeout`
    dnf waits its own 30 s per connection (measured on this machine: four connections, 2 min for one repository)."""
    reposdir = tmp_path / "yum.repos.d"
    reposdir.mkdir()
    mirror = f"http://127.0.0.1:{silent_server.port}/erdma/yum/redhat/$releasever/erdma/x86_64"
    proc = local_play(tmp_path, {
        "name": "rdma_repos' yum repository",
        "vars": {"rdmaforge_network_timeout": 5, "rdma_repos_erdma_enabled": True, "rdma_repos_yum_reposdir":
                 str(reposdir), "rdma_repos_erdma_yum_baseurl": mirror},
        "tasks": [{"name": "Write it", "ansible.builtin.include_role": {
            "name": "rdmaforge.cluster.rdma_repos", "tasks_from": "yum_repo"}}],
    }, timeout=120)  # fmt: skip
    assert recap(proc.stdout)["localhost"]["failed"] == 0, proc.stdout[-3000:]
    root = tmp_path / "root"
    started = time.monotonic()
    makecache = subprocess.run(
        ["dnf", "-y", f"--installroot={root}", "--releasever=8", f"--setopt=reposdir={reposdir}",
         "--setopt=skip_if_unavailable=False", "makecache"],
        env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    took = time.monotonic() - started
    assert makecache.returncode != 0, makecache
    assert "Failed to download metadata for repo 'erdma'" in makecache.stderr, makecache.stderr
    assert silent_server.waits and max(silent_server.waits) >= 4.5, silent_server.waits  # see SilentServer.waits
    assert all(wait < 15 for wait in silent_server.waits) and 4.5 <= took < 60, (silent_server.waits, took)


@pytest.mark.skipif(not shutil.which("apt-ftparchive"), reason="needs apt-ftparchive (apt-utils) on this machine")
def test_a_repository_signed_by_a_key_its_keyring_lacks_is_not_retried(
    signing_key: tuple[bytes, str], tmp_path: Path
) -> None:
    """A real apt repository (apt-ftparchive) on loopback signed with one throwaway key, apt's keyring holding
    another: the apt module (a throwaway package index, APT_CONFIG as the roles pass it) fails with NO_PUBKEY once,
    with the until filter of every apt task. Another try would get the same signature."""
    suite = tmp_path / "repo" / "dists" / "bookworm"
    (suite / "main" / "binary-amd64").mkdir(parents=True)
    (suite / "main" / "binary-amd64" / "Packages").touch()
    release = subprocess.run(["apt-ftparchive", "-o", "APT::FTPArchive::Release::Suite=bookworm",
                              "-o", "APT::FTPArchive::Release::Components=main", "release", str(suite)],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
    (suite / "Release").write_text(release)
    with throwaway_signing_key("other <other@lab.invalid>") as other:
        subprocess.run([*other.gpg, "--clearsign", "-o", str(suite / "InRelease"), str(suite / "Release")],
                       check=True, capture_output=True)  # fmt: skip
    keyring = tmp_path / "keyring.gpg"  # the signing_key fixture's key, not the one that signed
    keyring.write_bytes(subprocess.run(["gpg", "--dearmor"], input=signing_key[0], check=True,
                                       capture_output=True).stdout)  # fmt: skip
    handler = functools.partial(QuietHandler, directory=str(tmp_path / "repo"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        mirror = f"http://127.0.0.1:{server.server_address[1]}"
        sandbox = sandboxed_apt_settings(tmp_path, mirror, f"signed-by={keyring}")
        settings = tmp_path / "apt.conf"  # the throwaway index's settings as an APT_CONFIG file
        settings.write_text("".join(f'{name} "{value}";\n' for name, value in sandbox.items()))
        proc = local_play(tmp_path, {
            "name": "An apt index refresh with the roles' retries",
            "tasks": [{
                "name": "Refresh the index",
                "ansible.builtin.apt": {"update_cache": True, "update_cache_retries": 1},
                "environment": {"APT_CONFIG": str(settings)},
                "register": "apt_result",
                "retries": 3,
                "delay": 1,
                "until": "apt_result | rdmaforge.cluster.rdmaforge_network_retry_done(3, 1)",
            }],
        }, timeout=300)  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode != 0
    assert "FAILED - RETRYING" not in proc.stdout, proc.stdout[-3000:]
    assert "not retried: apt has no key for the repository's signature" in proc.stdout + proc.stderr, proc.stdout
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal: [localhost]")]
    assert fatal and "NO_PUBKEY" in fatal[-1] and mirror in fatal[-1], proc.stdout[-3000:]


def test_the_key_is_verified_when_the_batchs_first_host_has_no_erdma(
    signing_key: tuple[bytes, str], tmp_path: Path
) -> None:
    """verify_key.yml's tasks run once: imported under a condition, that condition was asked of the batch's first
    host alone, and a first host of another fabric skipped the key for every host that needs it (yum hosts then
    failed on an undefined keyring); asked of all hosts, the tasks ran with the first host's variables, so a key
    fingerprint set for the erdma hosts alone failed there (review rounds 19b, 20). Role main.yml's own task, for
    two hosts, the first without erdma and without the key's settings."""
    armored, fingerprint = signing_key
    tasks = yaml.safe_load((PROJECT_ROOT / "roles" / "rdma_repos" / "tasks" / "main.yml").read_text())
    named = [str(task.get("ansible.builtin.include_tasks", task.get("ansible.builtin.import_tasks"))) for task in tasks]
    index = next(i for i, name in enumerate(named) if "verify_key" in name)
    before, verify = tasks[:index], tasks[index]
    kind = "include_role" if "ansible.builtin.include_tasks" in verify else "import_role"
    server = FlakyKeyServer(armored, failures=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    erdma = {**local, "rdma_repos_erdma_enabled": True, "rdma_repos_erdma_gpg_fingerprint": fingerprint,
             "rdma_repos_erdma_gpg_key_url": f"http://127.0.0.1:{server.server_address[1]}/erdma/GPGKEY"}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"a-tcp": {**local, "rdma_repos_erdma_enabled": False},
                                                           "b-erdma": erdma}}}))  # fmt: skip
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [*before, {
        "name": verify["name"], "when": verify["when"],
        f"ansible.builtin.{kind}": {"name": "rdmaforge.cluster.rdma_repos", "tasks_from": "verify_key"}}],
        "vars": {"rdma_repos_controller_cache": str(tmp_path / "keys")}}]))  # fmt: skip
    try:
        proc = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert server.requests == 1, proc.stdout[-4000:]
    assert (tmp_path / "keys" / f"erdma-{fingerprint}.gpg").stat().st_size > 0
