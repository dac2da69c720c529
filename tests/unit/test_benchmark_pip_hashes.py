"""The benchmark's environment with benchmark_e2e_torch_requirements: role benchmark's own tasks (read from
e2e_env.yml, the os_packages include left out) run for real on this machine with a real pip and venv, against a local
wheel standing in for torch. The right sha256 installs it with --require-hashes; a wrong one is refused at the first
try (another try downloads the same file); without requirements the plain name installs it, as before."""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import zipfile
from pathlib import Path

import yaml
from conftest import recap
from test_network_retries import local_play

from rdmaforge.paths import PROJECT_ROOT

E2E_ENV = PROJECT_ROOT / "roles" / "benchmark" / "tasks" / "e2e_env.yml"
VARS_MAIN = PROJECT_ROOT / "roles" / "benchmark" / "vars" / "main.yml"


def toy_wheel(directory: Path, name: str = "toytorch", version: str = "1.0") -> Path:
    """A minimal pure-Python wheel, with the RECORD pip checks."""
    files = {
        f"{name}/__init__.py": b"VERSION = '1.0'\n",
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}-py3-none-any.whl"
    path.write_bytes(buffer.getvalue())
    return path


def install(
    tmp_path: Path, requirements: list[str], retries: int = 0, torch: str = "toytorch==1.0"
) -> tuple[str, int]:
    """Runs the role's requirement-file and pip tasks (with the role's vars) in a local play; (output, failed)."""
    wheels = tmp_path / "wheels"
    tasks = [t for t in yaml.safe_load(E2E_ENV.read_text())
             if "ansible.builtin.include_role" not in t and "ansible.builtin.import_tasks" not in t]  # fmt: skip
    role_vars = yaml.safe_load(VARS_MAIN.read_text())
    proc = local_play(tmp_path, {
        "name": "The benchmark's Python environment",
        "vars": {
            "benchmark_e2e_remote_dir": str(tmp_path / "bench"),
            "benchmark_e2e_requirements_path": role_vars["benchmark_e2e_requirements_path"],
            "benchmark_e2e_hash_pinned": role_vars["benchmark_e2e_hash_pinned"],
            "benchmark_e2e_venv_marker": role_vars["benchmark_e2e_venv_marker"],
            "benchmark_e2e_venv": str(tmp_path / "venv"),
            "benchmark_e2e_python": sys.executable,
            "benchmark_e2e_torch": torch,
            "benchmark_e2e_torch_requirements": requirements,
            "benchmark_e2e_pip_args": ["--no-index", f"--find-links={wheels}"],
            "rdmaforge_network_retries": retries,
            "rdmaforge_network_retry_delay": 1,
        },
        "tasks": tasks,
    }, timeout=300)  # fmt: skip
    return proc.stdout, recap(proc.stdout)["localhost"]["failed"]


def test_the_pinned_sha256_installs_and_a_wrong_one_is_refused_at_the_first_try(tmp_path: Path) -> None:
    wheel = toy_wheel(tmp_path / "wheels")
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()

    out, failed = install(tmp_path, [f"toytorch==1.0 --hash=sha256:{sha256}"])
    assert failed == 0, out[-4000:]
    assert (tmp_path / "bench" / "torch-requirements.txt").read_text() == f"toytorch==1.0 --hash=sha256:{sha256}\n"
    assert list((tmp_path / "venv").glob("lib/python*/site-packages/toytorch/__init__.py")), out[-4000:]
    # The environment pip just created is rdmaforge's: marked, so reset removes it (and only such a one).
    assert (tmp_path / "venv" / ".rdmaforge-venv").is_file()

    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "wheels").symlink_to(tmp_path / "wheels")
    out, failed = install(wrong, [f"toytorch==1.0 --hash=sha256:{'0' * 64}"], retries=2)
    assert failed == 1, out[-4000:]
    assert "DO NOT MATCH THE HASHES" in out and sha256 in out, out[-4000:]
    assert "FAILED - RETRYING" not in out and "not retried:" in out, out[-4000:]
    assert not list((wrong / "venv").glob("lib/python*/site-packages/toytorch")), "a refused wheel was installed"


def test_without_requirements_the_name_is_installed_with_no_hash_check(tmp_path: Path) -> None:
    toy_wheel(tmp_path / "wheels")
    out, failed = install(tmp_path, [])
    assert failed == 0, out[-4000:]
    assert not (tmp_path / "bench").exists()  # no requirements file is written
    assert list((tmp_path / "venv").glob("lib/python*/site-packages/toytorch/__init__.py")), out[-4000:]
    # and the run says so where it installs (review round 38a: only the defaults' comment did)
    said = " ".join(out.split())
    assert "WARNING: localhost: the benchmark's toytorch==1.0 and its dependencies are installed from the package " \
           "index without hashes (benchmark_e2e_torch_requirements is empty)" in said, said[-3000:]
    again, _ = install(tmp_path, [])  # met: nothing installed, nothing to warn of
    assert "WARNING: localhost: the benchmark" not in again  # the task is listed as skipped


def pip_ran(output: str) -> bool:
    """Whether the role's pip task ran (ok or changed) rather than being left out."""
    block = output.split("TASK [Install the benchmark's Python environment (torch)]", 1)[1].split("TASK [", 1)[0]
    return "skipping: [localhost]" not in block


def test_pip_is_left_out_while_the_venv_meets_the_requirement_and_runs_when_it_does_not(tmp_path: Path) -> None:
    """The second run finds toytorch 1.0 with the venv's interpreter and leaves pip out; asking for 2.0 runs it."""
    toy_wheel(tmp_path / "wheels")
    out, failed = install(tmp_path, [])
    assert failed == 0 and pip_ran(out), out[-4000:]
    out, failed = install(tmp_path, [])
    assert failed == 0 and not pip_ran(out), out[-4000:]
    toy_wheel(tmp_path / "wheels", version="2.0")
    out, failed = install(tmp_path, [], torch="toytorch==2.0")
    assert failed == 0 and pip_ran(out), out[-4000:]
    assert list((tmp_path / "venv").glob("lib/python*/site-packages/toytorch-2.0.dist-info")), out[-4000:]
    # hash-pinned: always pip's to judge, even with the version installed
    sha256 = hashlib.sha256((tmp_path / "wheels" / "toytorch-2.0-py3-none-any.whl").read_bytes()).hexdigest()
    out, failed = install(tmp_path, [f"toytorch==2.0 --hash=sha256:{sha256}"], torch="toytorch==2.0")
    assert failed == 0 and pip_ran(out), out[-4000:]


def test_an_environment_whose_first_install_failed_is_still_rdmaforges(tmp_path: Path) -> None:
    """Review round 27b: pip made the environment and the mark came only after pip succeeded, so a first install
    that failed (here: the index has no such package) left an unmarked environment, which every later run took for
    one it had found and reset kept for good."""
    (tmp_path / "wheels").mkdir()
    out, failed = install(tmp_path, [])
    assert failed == 1, out[-4000:]
    assert (tmp_path / "venv" / "bin" / "python").exists()
    assert (tmp_path / "venv" / ".rdmaforge-venv").is_file(), out[-4000:]
