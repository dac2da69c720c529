"""The module_cache callback keeps assembled module payloads across runs and never serves a stale one, and puts
bytecode in them that only a node with the controller's Python version uses.

Real ansible-playbook runs with a module next to the playbook (library/): the first run fills a cache directory,
the second reuses it, and after the module's source changes the next run gets a new directory and runs the new
code. The bytecode tests run the module under the controller's Python and under another Python version found on
this machine (pyenv's or the system's).

The runs are one sequence on one cache, made once for the module (fixture runs): each test reads the runs it is
about.
"""

from __future__ import annotations

import base64
import glob
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from ansible.executor import module_common
from conftest import PROJECT_ROOT, run_playbook

#: The callback's own file, loaded from where it lives (nothing added to sys.path).
CALLBACK = PROJECT_ROOT / "callback_plugins" / "module_cache.py"
_spec = importlib.util.spec_from_file_location("_rdmaforge_module_cache", CALLBACK)
assert _spec is not None and _spec.loader is not None
module_cache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(module_cache)

MODULE = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

def main():
    module = AnsibleModule(argument_spec={})
    module.exit_json(changed=False, answer="%s")

if __name__ == "__main__":
    main()
"""

PLAYBOOK = """---
- name: Ask the module next to this playbook
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run it
      answer: {}
      register: reply
    - name: Show what it said
      ansible.builtin.debug:
        msg: "answer={{ reply.answer }}"
"""


def write_module(library: Path, answer: str, mtime: float) -> None:
    path = library / "answer.py"
    path.write_text(MODULE % answer)
    os.utime(path, (mtime, mtime))


def run(playbook: Path, cache: Path, *extra: str, bytecode: bool = True) -> str:
    inventory = playbook.parent / "hosts.yml"
    proc = run_playbook(str(playbook), *extra, inventory=inventory, env={
        "RDMAFORGE_MODULE_CACHE": str(cache), "ANSIBLE_CACHE_PLUGIN": "memory",
        "RDMAFORGE_MODULE_BYTECODE": str(bytecode).lower()})  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


def play_with_module(tmp_path: Path, answer: str) -> Path:
    """A playbook that runs library/answer.py on localhost, with the controller's Python; returns the playbook."""
    play_dir = tmp_path / "play"
    library = play_dir / "library"
    library.mkdir(parents=True)
    (play_dir / "hosts.yml").write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
    )
    playbook = play_dir / "ask.yml"
    playbook.write_text(PLAYBOOK)
    write_module(library, answer, 1_700_000_000)
    return playbook


def test_playbooks_in_different_directories_without_modules_of_their_own_share_one_cache(tmp_path: Path) -> None:
    """Each directory a playbook lies in had a cache of its own, even with no library/ there: every playbook the
    tests write into a temporary directory built all its payloads again (and left a cache directory behind)."""
    cache = tmp_path / "cache"
    for name in ("one", "two"):
        play_dir = tmp_path / name
        play_dir.mkdir()
        (play_dir / "hosts.yml").write_text(
            "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
            "      ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        )
        playbook = play_dir / "ping.yml"
        playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n")
        run(playbook, cache)
    (store,) = cache.iterdir()
    assert any(".ping-" in p.name for p in store.iterdir()), list(store.iterdir())


def magic_of(python: str) -> bytes | None:
    """The bytecode magic number of ``python``; None when it is not a Python that ansible-core runs modules with."""
    probe = "import sys, importlib.util; assert sys.version_info >= (3, 8); print(importlib.util.MAGIC_NUMBER.hex())"
    proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    return bytes.fromhex(proc.stdout.strip()) if proc.returncode == 0 else None


def another_python_version() -> str | None:
    """A Python on this machine whose bytecode this (the controller's) Python's does not match."""
    names = [f"python3.{minor}" for minor in range(8, 15)]
    candidates = [found for found in map(shutil.which, names) if found]
    candidates += sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.*/bin/python3")))
    for python in candidates:
        magic = magic_of(python)
        if magic is not None and magic != importlib.util.MAGIC_NUMBER:
            return python
    return None


def payloads(cache: Path) -> dict[str, zipfile.ZipFile]:
    """The answer module's payload in each cache directory, by directory name."""
    found = {}
    for path in cache.glob("*/*.answer-*-none"):
        zip_data = base64.b64decode(module_common._CachedModule.load(str(path)).zip_data)
        found[path.parent.name] = zipfile.ZipFile(io.BytesIO(zip_data))
    return found


def replace_source(cache_file: Path, member: str, source: str) -> None:
    """Put ``source`` in the payload's ``member`` and leave its bytecode as it was."""
    cached = module_common._CachedModule.load(str(cache_file))
    old = zipfile.ZipFile(io.BytesIO(base64.b64decode(cached.zip_data)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            new.writestr(info, source.encode() if info.filename == member else old.read(info))
    tampered = module_common._CachedModule(zip_data=base64.b64encode(out.getvalue()), metadata=cached.metadata,
                                           source_mapping=cached.source_mapping)  # fmt: skip
    cache_file.unlink()
    tampered.dump(str(cache_file))


def directories(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


@dataclass(frozen=True)
class Runs:
    """What each run of the sequence printed, and the cache's directories after it."""

    filled: tuple[str, list[str]]  # a fresh cache, bytecode on: the module answers "one"
    first_files: list[str]  # the files in the directory that run made
    reused: tuple[str, list[str]]  # the same run again
    source_only: tuple[str, list[str]]  # bytecode turned off
    variants: dict[str, bool]  # after source_only: cache directory -> whether its payload carries bytecode
    payload: zipfile.ZipFile  # the module's payload with bytecode, as the first run left it
    tampered: tuple[str, list[str]]  # that payload's source of the module now answers "source", its bytecode "one"
    other_python: tuple[str, list[str]] | None  # the same, under another Python version (None: none found)
    changed_from: list[str]  # the directories before the module's source changed
    changed: tuple[str, list[str]]  # the module's source now answers "two"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp_path = tmp_path_factory.mktemp("module-cache")
    cache = tmp_path / "cache"
    playbook = play_with_module(tmp_path, "one")

    def step(*extra: str, bytecode: bool = True) -> tuple[str, list[str]]:
        return run(playbook, cache, *extra, bytecode=bytecode), directories(cache)

    filled = step()
    first_files = directories(cache / filled[1][0])
    reused = step()
    source_only = step(bytecode=False)
    variants = {name: any(n.endswith(".pyc") for n in z.namelist()) for name, z in payloads(cache).items()}
    payload = payloads(cache)[filled[1][0]]
    module = next(name for name in payload.namelist() if name.endswith("/answer.py"))
    # The module's source in that payload now says something else; its bytecode still says "one". Whatever runs the
    # source answers "source".
    replace_source(next((cache / filled[1][0]).glob("*.answer-*-none")), module, MODULE % "source")
    tampered = step()
    other = another_python_version()
    other_python = None if other is None else step("-e", f"ansible_python_interpreter={other}")
    changed_from = directories(cache)
    write_module(playbook.parent / "library", "two", 1_700_000_100)
    changed = step()
    return Runs(filled, first_files, reused, source_only, variants, payload, tampered, other_python, changed_from,
                changed)  # fmt: skip


def test_payloads_are_reused_until_the_module_changes(runs: Runs) -> None:
    out, first = runs.filled
    assert "answer=one" in out
    assert len(first) == 1 and any(".answer-" in name for name in runs.first_files), runs.first_files
    out, after = runs.reused
    assert "answer=one" in out
    assert after == first  # the same directory served the second run
    out, after = runs.changed
    assert "answer=two" in out  # never the payload built from the old source
    assert len(after) == len(runs.changed_from) + 1 and set(runs.changed_from) < set(after)


def test_the_same_python_runs_the_payloads_bytecode_and_another_version_its_source(runs: Runs) -> None:
    sources = [name for name in runs.payload.namelist() if name.endswith(".py")]
    assert sources and all(f"{name}c" in runs.payload.namelist() for name in sources)
    out, after = runs.tampered
    assert "answer=one" in out  # the controller's Python version: the bytecode ran, not the tampered source
    assert after == runs.source_only[1]  # from the payload it tampered with, no new one
    if runs.other_python is None:
        pytest.skip("no Python of another version on this machine to show that one ignores the bytecode")
    out, other = runs.other_python
    assert "answer=source" in out
    assert other == after  # the same payload served both versions


def test_bytecode_turned_off_gives_payloads_of_source_only_in_a_directory_of_their_own(runs: Runs) -> None:
    assert "answer=one" in runs.source_only[0]
    assert sorted(runs.variants.values()) == [False, True], runs.variants


def zip_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as payload:
        for name, body in files.items():
            payload.writestr(name, body)
    return out.getvalue()


def test_source_this_python_cannot_compile_is_shipped_without_bytecode() -> None:
    files = {"pkg/__init__.py": b"", "pkg/ok.py": b"X = 1\n", "pkg/broken.py": b"def f(:\n", "pkg/data.json": b"{}"}
    shipped = zipfile.ZipFile(io.BytesIO(module_cache.with_bytecode(zip_of(files))))
    assert sorted(shipped.namelist()) == [
        "pkg/__init__.py", "pkg/__init__.pyc", "pkg/broken.py", "pkg/data.json", "pkg/ok.py", "pkg/ok.pyc"]  # fmt: skip
    assert shipped.read("pkg/broken.py") == b"def f(:\n"
    assert all(info.compress_type == zipfile.ZIP_DEFLATED for info in shipped.infolist())


def test_bytecode_of_another_python_version_is_skipped_for_the_source(tmp_path: Path) -> None:
    shipped = module_cache.with_bytecode(zip_of({"rf_magic_probe.py": b"ANSWER = 'compiled'\n"}))
    payload = zipfile.ZipFile(io.BytesIO(shipped))
    pyc = payload.read("rf_magic_probe.pyc")
    assert pyc[:4] == importlib.util.MAGIC_NUMBER
    foreign = (int.from_bytes(pyc[:2], "little") - 1).to_bytes(2, "little") + pyc[2:]  # another version's magic
    for name, bytecode, expected in (("same.zip", pyc, "compiled"), ("foreign.zip", foreign, "source")):
        path = tmp_path / name
        path.write_bytes(zip_of({"rf_magic_probe.py": b"ANSWER = 'source'\n", "rf_magic_probe.pyc": bytecode}))
        probe = f"import sys; sys.path.insert(0, {str(path)!r}); import rf_magic_probe; print(rf_magic_probe.ANSWER)"
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
        assert proc.stdout.strip() == expected, proc.stderr


def test_bytecode_keeps_asserts_when_the_controller_runs_python_with_optimizations() -> None:
    # The node's Python decides about -O, as it does for the source: bytecode compiled under `python -O` keeps asserts.
    probe = (
        "import importlib.util, marshal\n"
        f"spec = importlib.util.spec_from_file_location('module_cache', {str(CALLBACK)!r})\n"
        "module_cache = importlib.util.module_from_spec(spec); spec.loader.exec_module(module_cache)\n"
        "pyc = module_cache.compiled(b'assert False, \"kept\"\\n', 'probe.py')\n"
        "exec(marshal.loads(pyc[16:]))\n"
    )
    proc = subprocess.run([sys.executable, "-O", "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "AssertionError: kept" in proc.stderr, proc.stderr
