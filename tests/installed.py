"""rdmaforge as a user outside this repository gets it, built once per test session and shared by the unit tests
(tests/unit/test_wheel_install.py, test_collection_install.py) and the lab tests (test_installed_on_lab.py):

- the wheel (``pip wheel .``) installed with its dependencies into a fresh venv (no system site-packages) in a
  temporary directory;
- the rdmaforge.cluster collection (``ansible-galaxy collection build`` of the tree rdmaforge.collection assembles)
  installed by ``ansible-galaxy collection install`` into a temporary collections path.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from rdmaforge import collection
from rdmaforge.paths import PROJECT_ROOT

BIN = Path(sys.executable).parent
#: Set by tests/suite.py: a directory shared by the pytest processes of one make test (see shared_wheel_venv).
SHARED_DIR_VARIABLE = "RDMAFORGE_TEST_SHARED_DIR"

#: What the wheel must carry for the CLI to work outside the checkout.
WHEEL_MEMBERS = (
    "rdmaforge/data/nccl_env_names.txt",
    "rdmaforge/data/ansible.cfg",
    "rdmaforge/data/verify/tests/infra/test_node_state.py",
    "ansible_collections/rdmaforge/cluster/playbooks/site.yml",
    "ansible_collections/rdmaforge/cluster/roles/preflight/tasks/main.yml",
    "ansible_collections/rdmaforge/cluster/plugins/modules/kernel_cmdline.py",
    "ansible_collections/rdmaforge/cluster/plugins/module_utils/kernel_cmdline.py",
    "ansible_collections/rdmaforge/cluster/plugins/filter/rdmaforge_core.py",
    "ansible_collections/rdmaforge/cluster/plugins/callback/converge_ledger.py",
)

#: What the collection tarball must carry.
COLLECTION_MEMBERS = (
    "MANIFEST.json",
    "FILES.json",
    "plugins/modules/kernel_cmdline.py",
    "plugins/module_utils/kernel_cmdline.py",
    "plugins/filter/rdmaforge_etc_hosts.yml",
    "roles/cluster_hosts/tasks/main.yml",
    "playbooks/site.yml",
)


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def outside_env() -> dict[str, str]:
    """This process's environment without anything that points Ansible or rdmaforge at the checkout."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "RDMAFORGE_", "VIRTUAL_ENV"))}


@dataclass(frozen=True)
class WheelVenv:
    bindir: Path
    env: dict[str, str]


def build_wheel_venv(work: Path) -> WheelVenv:
    """``pip wheel`` of this checkout, then a fresh venv in ``work`` with the wheel and its dependencies."""
    assert not str(work.resolve()).startswith(str(PROJECT_ROOT.resolve()))
    env = outside_env()
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(PROJECT_ROOT)],
                work, env, timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (work / "dist").glob("rdmaforge-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [member for member in WHEEL_MEMBERS if member not in names]
    assert not missing, f"the wheel lacks {missing}"
    base = getattr(sys, "_base_executable", sys.executable)
    created = run([base, "-m", "venv", str(work / "venv")], work, env)
    assert created.returncode == 0, created.stderr
    python = work / "venv" / "bin" / "python"
    installed = run([str(python), "-m", "pip", "install", "-q", str(wheel)], work, env, timeout=900)
    if installed.returncode != 0 and "No matching distribution" in installed.stderr + installed.stdout:
        pytest.skip(f"the dependencies cannot be installed here: {installed.stderr.strip().splitlines()[-1]}")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv_of(work)


def venv_of(work: Path) -> WheelVenv:
    """The venv that build_wheel_venv made in ``work``, with the environment to run its commands in."""
    env = outside_env()
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    bindir = work / "venv" / "bin"
    env["PATH"] = f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    return WheelVenv(bindir, env)


def shared_wheel_venv(shared: Path) -> WheelVenv:
    """One wheel venv for every pytest process of one ``make test`` (tests/suite.py names the directory), or of one
    ``pytest -n N`` (its workers' base temp's parent): the process that needs it first builds it, under a lock;
    later ones, the lab tests' session too, reuse it. The checkout does not change during the run, so neither does
    the wheel."""
    work = shared / "wheel"
    work.mkdir(parents=True, exist_ok=True)
    with (shared / "wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = work / "built"
        if done.exists():
            return venv_of(work)
        shutil.rmtree(work / "venv", ignore_errors=True)  # a build that failed half-way
        shutil.rmtree(work / "dist", ignore_errors=True)
        venv = build_wheel_venv(work)
        done.touch()
        return venv


def collection_env(collections: Path) -> dict[str, str]:
    """Ansible that sees only the installed collection (no ansible.cfg of the checkout applies outside it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(collections),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",  # only the installed copy, whatever this venv holds
        ANSIBLE_CACHE_PLUGIN="memory",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=str(collections.parent / "tmp"),
        ANSIBLE_HOME=str(collections.parent / "home"),
    )
    return env


def install_collection(work: Path) -> Path:
    """Build the collection tarball and install it into ``work/collections``; that collections path."""
    tarball = collection.build(work / "dist")
    assert tarball.is_file()
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    missing = [member for member in COLLECTION_MEMBERS if member not in names]
    assert not missing, f"the collection lacks {missing}"
    target = work / "collections"
    proc = run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "-p", str(target), str(tarball)],
               work, collection_env(target))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (collection.collection_dir(target) / "plugins" / "modules" / "kernel_cmdline.py").is_file()
    return target


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> WheelVenv:
    shared = os.environ.get(SHARED_DIR_VARIABLE)
    if shared:
        return shared_wheel_venv(Path(shared))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # pip builds the wheel in the checkout's build/ directory: two workers building at once collide there
        # ("File exists: build/bdist..."). The workers of one run share their base temp's parent.
        return shared_wheel_venv(tmp_path_factory.getbasetemp().parent)
    return build_wheel_venv(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_collection(tmp_path_factory.mktemp("collection"))
