"""build_once survives a controller killed with SIGKILL mid-compile and mid-packaging (issue 18).

Role build_once for real on this machine (ansible_connection=local, builder = localhost), with a small source tree
whose make takes a few seconds and writes a large enough output that packaging takes a moment. The whole
ansible-playbook process group is killed with SIGKILL when the chosen task starts, as a crashed controller would be.
Ansible's async wrapper lets the make run on (setsid): the test first checks that it really did, then re-runs and
asserts one good build: the killed run's builder lock passed over, the left-over make stopped, the cache holds a
listable package whose sha256 is the one in the manifest, no temporary file is left, the install has the build's
output, and a third run compiles nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from conftest import recap, run_playbook

from rdmaforge.paths import PROJECT_ROOT

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
# The first make ever started sleeps long (it is the one the killed controller leaves behind, and the re-run must
# stop it); every later one sleeps briefly. FIRST is a file outside the scratch tree.
MAKEFILE = """\
all:
\tif [ -e $(FIRST) ]; then sleep 1; else touch $(FIRST); sleep 120; fi
\tmkdir -p build
\thead -c 16000000 /dev/urandom > build/payload.bin
\techo built > build/out.txt
"""
#: The same build without the first make's long sleep and with a small output: for the tests that never kill a
#: controller (the sleep is idle time that holds a test worker for two minutes; the 16 MB payload, there so that
#: packaging takes long enough to be killed in, cost every run CPU time to write, pack, hash and unpack).
QUICK_MAKEFILE = MAKEFILE.replace("sleep 120", "sleep 1").replace("-c 16000000", "-c 16000")


def source_tarball(directory: Path, makefile: str = MAKEFILE) -> tuple[Path, str]:
    path = directory / "toy-1.0.tar.gz"
    # The same bytes every time (gzip's header keeps a write time, to the second, unless told 0): a test writes the
    # tarball once per playbook, and a run that computed its sha256 before a later write, a second on, failed its
    # download (test_build_once_lock in the CI of stop 58, at SCHED_IDLE behind the lab).
    with gzip.GzipFile(path, "wb", mtime=0) as packed, tarfile.open(fileobj=packed, mode="w") as tar:
        for name, text in {"toy-1.0/Makefile": makefile}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def write_run(tmp: Path, build_id: str, makefile: str = MAKEFILE, make_args: tuple[str, ...] = (),
              name: str = "build.yml", **overrides: object) -> tuple[Path, Path]:  # fmt: skip
    """An inventory (localhost, connection local) and a playbook that runs build_once on a toy tree; the builder's
    scratch and install directories are under ``tmp``, and ``overrides`` replace any of the role's variables."""
    tarball, sha256 = source_tarball(tmp, makefile)
    inventory = tmp / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))  # fmt: skip
    playbook = tmp / name
    playbook.write_text(yaml.safe_dump([{
        "name": "build_once with a toy source tree",
        "hosts": "localhost",
        "gather_facts": True,
        "gather_subset": ["min"],
        "tasks": [{"name": "Build once", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.build_once"}}],
        "vars": {
            "build_once_name": "toy",
            "build_once_id": build_id,
            "build_once_builder": "localhost",
            "build_once_source": "tarball",
            "build_once_tarball_url": f"file://{tarball}",
            "build_once_tarball_sha256": sha256,
            "build_once_make_argv": ["make", f"FIRST={tmp / 'first-make-started'}", *make_args],
            "build_once_creates": "build/out.txt",
            "build_once_package_dir": "build",
            "build_once_prefix_root": str(tmp / "opt"),
            "build_once_workdir": str(tmp / "scratch"),
            "build_once_controller_cache": str(tmp / "cache"),
            "build_once_poll": 1,  # a toy make takes a second: the default 15 s between looks would dominate
            **overrides,
        },
    }]))  # fmt: skip
    return inventory, playbook


def scratch_processes(scratch: Path) -> list[int]:
    """Processes whose working directory is inside the scratch directory (the make and its children)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue
            if cwd == str(scratch) or cwd.startswith(f"{scratch}/"):
                pids.append(int(proc.name))
    return pids


def playbook_argv(inventory: Path, playbook: Path) -> list[str]:
    """The project's ansible-playbook on ``playbook`` (a write_run playbook) with ``inventory``."""
    return [str(PROJECT_ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), str(playbook)]


def kill_controller_at(task: str, inventory: Path, playbook: Path, ready: Callable[[], bool]) -> str:
    """Runs the playbook and SIGKILLs its whole process group once ``task`` has started and ``ready()`` is true."""
    proc = subprocess.Popen(playbook_argv(inventory, playbook), cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **ENV},
                            start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("TASK [") and f"build_once : {task}]" in line:
            deadline = time.monotonic() + 60
            while not ready() and time.monotonic() < deadline:
                time.sleep(0.1)
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "".join(seen)[-3000:]
    return "".join(seen)


def test_a_controller_killed_mid_compile_then_mid_packaging_leaves_nothing_a_rerun_cannot_repair(
    tmp_path: Path,
) -> None:
    build_id = f"t{os.getpid()}"
    inventory, playbook = write_run(tmp_path, build_id)
    scratch = tmp_path / "scratch" / f"toy-{build_id}"
    cache = tmp_path / "cache"
    manifest_path = cache / f"toy-{build_id}.json"
    part = scratch / f"toy-{build_id}.tar.gz.part"

    # 1. killed while the make runs: the make outlives the controller
    kill_controller_at("Compile", inventory, playbook, lambda: bool(scratch_processes(scratch / "src")))
    assert scratch_processes(scratch), "the async make should outlive the killed controller"
    assert not manifest_path.exists(), "no manifest may exist for an interrupted build"

    # 2. the next run stops that make, starts over, and is killed while tar writes the package. The packaging
    # (sh, tar, gzip) works inside the scratch directory, where a later run's stop_leftover_build.sh finds it when
    # it outlives its controller (on a remote builder it does: the H100 run of issue 18).
    packaging_seen: list[int] = []

    def packaging_in_scratch() -> bool:
        if not packaging_seen and part.exists():
            packaging_seen.extend(scratch_processes(scratch))
        return bool(packaging_seen)

    second = kill_controller_at("Package the build", inventory, playbook, packaging_in_scratch)
    assert packaging_seen, "no packaging process worked inside the scratch directory"
    stopped = re.search(r"Stop a compile that an interrupted run left running\] \**\n(\w+): ", second)
    assert stopped and stopped[1] == "changed", second[-4000:]
    # the builder lock the killed run left is passed over at once: its ansible-playbook process is gone
    taken = re.search(r"Take the builder lock \(waits while another run builds here\)\] \**\n(\w+): ", second)
    assert taken and taken[1] == "changed" and "FAILED - RETRYING" not in second, second[-4000:]
    assert not manifest_path.exists() and not (cache / f"toy-{build_id}.tar.gz").exists()

    # 3. the third run completes with one good build
    third = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert third.returncode == 0, third.stdout[-4000:]
    assert not scratch_processes(scratch)
    manifest = json.loads(manifest_path.read_text())
    package = cache / manifest["tarball"]
    assert hashlib.sha256(package.read_bytes()).hexdigest() == manifest["sha256"]
    with tarfile.open(package) as tar:
        names = {Path(name).as_posix().lstrip("./") for name in tar.getnames()}
    assert {"out.txt", "payload.bin"} <= names
    assert not list(cache.glob("*.part")), list(cache.iterdir())
    installed = tmp_path / "opt" / "current"
    assert (installed / "out.txt").read_text() == "built\n"
    assert (installed / "payload.bin").stat().st_size == 16_000_000

    # 4. and a re-run compiles nothing and changes nothing
    fourth = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert fourth.returncode == 0, fourth.stdout[-4000:]
    assert recap(fourth.stdout)["localhost"]["changed"] == 0, fourth.stdout[-4000:]
    assert "build_once : Compile]" not in fourth.stdout


def test_a_tarball_of_another_sha256_is_built_again_under_the_same_id(tmp_path: Path) -> None:
    """The build id names the release, CUDA and archs, not the source: a patched tarball of the same release (a new
    build_once_tarball_sha256) found the old build in the cache, installed it and passed. The cached manifest's
    source sha256 is compared with the pin, as a git build's commit already was."""
    first_inventory, first_playbook = write_run(tmp_path, "same-id", QUICK_MAKEFILE, name="first.yml")
    first = run_playbook(str(first_playbook), inventory=first_inventory, env=ENV, timeout=300)
    assert first.returncode == 0, first.stdout[-4000:]
    cached = json.loads((tmp_path / "cache" / "toy-same-id.json").read_text())
    patched = QUICK_MAKEFILE.replace("echo built", "echo patched")
    inventory, playbook = write_run(tmp_path, "same-id", patched, name="patched.yml")
    again = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert again.returncode == 0, again.stdout[-4000:]
    rebuilt = json.loads((tmp_path / "cache" / "toy-same-id.json").read_text())
    assert rebuilt["source"]["sha256"] != cached["source"]["sha256"]
    assert rebuilt["source"]["sha256"] == hashlib.sha256((tmp_path / "toy-1.0.tar.gz").read_bytes()).hexdigest()
    assert (tmp_path / "opt" / "same-id" / "out.txt").read_text() == "patched\n"
    # the same tarball again: the cache is used, nothing is built
    same = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert same.returncode == 0 and json.loads((tmp_path / "cache" / "toy-same-id.json").read_text()) == rebuilt


def test_a_damaged_installed_manifest_installs_the_build_again(tmp_path: Path) -> None:
    """A node's .rdmaforge-build.json cut short (a full disk) or edited into another JSON value failed the install
    with a template error (from_json), every run, until someone deleted it by hand. It reads as no install now: the
    package is unpacked again, the manifest rewritten, and the next run changes nothing."""
    inventory, playbook = write_run(tmp_path, "same-id", QUICK_MAKEFILE)
    first = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert first.returncode == 0, first.stdout[-4000:]
    installed = tmp_path / "opt" / "same-id" / ".rdmaforge-build.json"
    good = installed.read_text()
    for damage in (good[: len(good) // 2], '"same-id"\n'):
        installed.write_text(damage)
        (tmp_path / "opt" / "same-id" / "out.txt").unlink()
        again = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
        assert again.returncode == 0, again.stdout[-4000:]
        assert installed.read_text() == good and (tmp_path / "opt" / "same-id" / "out.txt").read_text() == "built\n"
        same = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
        assert same.returncode == 0 and recap(same.stdout)["localhost"]["changed"] == 0, same.stdout[-3000:]


def test_a_current_link_spelt_another_way_is_not_kept_as_previous(tmp_path: Path) -> None:
    """`current` made relative by hand (current -> same-id) is the build being installed: install compared the
    link's text with the build's absolute path, kept `previous` -> same-id (the build current is), and lost the
    real previous build. The directories are compared now; a link to a deleted build is kept as previous by none."""
    inventory, playbook = write_run(tmp_path, "same-id", QUICK_MAKEFILE)
    assert run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300).returncode == 0
    opt = tmp_path / "opt"
    (opt / "old-id").mkdir()
    (opt / "previous").symlink_to(opt / "old-id")
    (opt / "current").unlink()
    (opt / "current").symlink_to("same-id")
    again = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert again.returncode == 0, again.stdout[-4000:]
    assert (opt / "previous").readlink() == opt / "old-id" and (opt / "current").readlink() == opt / "same-id"
    # current -> a build deleted by hand: nothing to go back to there, so previous stays
    (opt / "current").unlink()
    (opt / "current").symlink_to(opt / "deleted-id")
    third = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert third.returncode == 0, third.stdout[-4000:]
    assert (opt / "previous").readlink() == opt / "old-id" and (opt / "current").readlink() == opt / "same-id"


def test_a_cached_package_that_no_longer_matches_its_manifest_is_built_again(tmp_path: Path) -> None:
    """A rebuild of the same id cut short between the new package and its manifest, or a package replaced in the
    cache by hand: installs unpacked it as it was and recorded the manifest's sha256 on every node (review round
    27b). The package is hashed against its manifest on every run, and one that differs is built again."""
    inventory, playbook = write_run(tmp_path, "same-id", QUICK_MAKEFILE)
    first = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert first.returncode == 0, first.stdout[-4000:]
    package = next((tmp_path / "cache").glob("*.tar.gz"))
    manifest = json.loads((tmp_path / "cache" / "toy-same-id.json").read_text())
    assert manifest["sha256"] == hashlib.sha256(package.read_bytes()).hexdigest()
    # the same members, out.txt's content changed: a valid package, not the one the manifest names
    with tarfile.open(package) as original:
        members = [(member, original.extractfile(member).read() if member.isfile() else None)
                   for member in original.getmembers()]  # fmt: skip
    with tarfile.open(package, "w:gz") as tampered:
        for member, data in members:
            if member.name.endswith("out.txt"):
                data = b"tampered\n"
                member.size = len(data)
            tampered.addfile(member, io.BytesIO(data) if data is not None else None)
    (tmp_path / "opt" / "same-id" / "out.txt").unlink()  # the node's tree drifted: it unpacks the package again
    again = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert again.returncode == 0, again.stdout[-4000:]
    assert "does not match its manifest" in again.stdout and "is built again" in again.stdout, again.stdout[-4000:]
    assert (tmp_path / "opt" / "same-id" / "out.txt").read_text() == "built\n"
    rebuilt = json.loads((tmp_path / "cache" / "toy-same-id.json").read_text())
    assert rebuilt["sha256"] == hashlib.sha256(package.read_bytes()).hexdigest()
    same = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert same.returncode == 0 and recap(same.stdout)["localhost"]["changed"] == 0, same.stdout[-3000:]
    # the package gone, its manifest left (a cache cleaned by hand): built again, not installed from nothing
    package.unlink()
    (tmp_path / "opt" / "same-id" / "out.txt").unlink()
    third = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert third.returncode == 0, third.stdout[-4000:]
    assert "(missing)" in " ".join(third.stdout.split()) and package.is_file()
    assert (tmp_path / "opt" / "same-id" / "out.txt").read_text() == "built\n"
