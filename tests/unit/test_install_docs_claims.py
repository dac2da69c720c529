"""What README.md's "Installing" section and collection/README.md tell a user outside the checkout, checked by doing it:
the `pip install` lines of the wheel work as a shell runs them (pip does not expand `*`, and `[plots]` unquoted is a
shell pattern: `pip install 'rdmaforge-0.1.0-*.whl[plots]'` could not work), a venv that has the wheel needs no
`ansible-galaxy collection install` of the tarball ("Nothing to do"), and collection/README.md lists every module and
tells where the rdmaforge package comes from (it is not on PyPI)."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from rdmaforge import collection
from rdmaforge.paths import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
COLLECTION_README = PROJECT_ROOT / "collection" / "README.md"
SPAN = re.compile(r"`([^`\n]+)`")
ANSIBLE_GALAXY = Path(sys.executable).parent / "ansible-galaxy"


def install_section() -> str:
    text = README.read_text()
    start = text.index("\n## Installing\n")
    return text[start : text.index("\n## ", start + 1)]


def fake_wheel(directory: Path) -> Path:
    """A wheel with the real one's name and extras, holding nothing: enough for pip to resolve the documented
    commands, offline (--no-index, --no-deps)."""
    directory.mkdir(parents=True)
    files = {
        "rdmaforge_docs_check/__init__.py": "",
        "rdmaforge-0.1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: rdmaforge\nVersion: 0.1.0\n"
        "Provides-Extra: plots\nProvides-Extra: mitogen\n",
        "rdmaforge-0.1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for name, content in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(content.encode())}")
    record.append("rdmaforge-0.1.0.dist-info/RECORD,,")
    wheel = directory / "rdmaforge-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, content in {**files, "rdmaforge-0.1.0.dist-info/RECORD": "\n".join(record) + "\n"}.items():
            archive.writestr(name, content)
    return wheel


def test_every_pip_install_of_the_wheel_in_the_readme_works_in_a_shell(tmp_path: Path) -> None:
    """Run from the checkout's root, where `make wheel` leaves build/dist/, as bash runs them; pip is this venv's,
    offline, installing into a throwaway directory."""
    section = install_section()
    spans = SPAN.findall(section)
    with_extras = [span for span in spans if ".whl" in span and "[" in span]
    assert all(span.startswith("pip install ") for span in with_extras), with_extras  # never a bare file name
    commands = [span for span in spans if span.startswith("pip install ") and ".whl" in span]
    assert any("[plots]" in command for command in commands), commands
    fake_wheel(tmp_path / "build" / "dist")
    for command in commands:
        target = tmp_path / f"target{commands.index(command)}"
        script = ('pip() { "$PYTHON" -m pip "$@" --no-deps --no-index -q --disable-pip-version-check '
                  f'--target "$TARGET"; }}\n{command}\n')  # fmt: skip
        proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHON": sys.executable, "TARGET": str(target)})  # fmt: skip
        assert proc.returncode == 0, f"README: `{command}` failed:\n{proc.stdout}{proc.stderr}"
        assert (target / "rdmaforge-0.1.0.dist-info").is_dir(), command


def test_a_venv_with_the_wheel_needs_no_ansible_galaxy_install_of_the_collection(tmp_path: Path) -> None:
    """The wheel's collection (the tree rdmaforge.collection copies) on the Python path, as in the venv the wheel is
    installed in: ansible-galaxy finds it and installs nothing; --force installs a second copy."""
    site = tmp_path / "site-packages"
    tree = collection.assemble(collection.collection_dir(site), mode="copy")
    built = subprocess.run([str(ANSIBLE_GALAXY), "collection", "build", "--output-path", str(tmp_path), str(tree)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (tarball,) = tmp_path.glob("rdmaforge-cluster-*.tar.gz")
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(HOME=str(home), PYTHONPATH=str(site))

    def install(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(ANSIBLE_GALAXY), "collection", "install", str(tarball), *extra], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)  # fmt: skip

    again = install()
    assert again.returncode == 0 and "Nothing to do" in again.stdout, again.stdout + again.stderr
    user_copy = collection.collection_dir(home / ".ansible" / "collections")
    assert not user_copy.exists()
    forced = install("--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert (user_copy / "MANIFEST.json").is_file()
    for text in (" ".join(install_section().split()), " ".join(COLLECTION_README.read_text().split())):
        assert "site-packages/ansible_collections/rdmaforge/cluster" in text and '"Nothing to do"' in text
        assert "`--force`" in text


def test_the_collection_readme_lists_every_module() -> None:
    text = COLLECTION_README.read_text()
    listing = text[text.index("- Modules (") : text.index(")", text.index("- Modules ("))]
    listed = {name.removeprefix("rdmaforge.cluster.") for name in SPAN.findall(listing)}
    assert listed == {path.stem for path in (PROJECT_ROOT / "library").glob("*.py")}


def test_the_collection_readme_says_where_the_rdmaforge_package_comes_from() -> None:
    text = " ".join(COLLECTION_README.read_text().split())
    assert not re.search(r"pip install rdmaforge(?![\w.-])", text), "rdmaforge is not on PyPI"
    assert "`make wheel`" in text and "pip install build/dist/rdmaforge-0.1.0-*.whl" in text


def test_a_module_an_earlier_build_left_in_build_lib_is_not_built_into_the_next(tmp_path: Path) -> None:
    """setuptools copies into the build/lib.* an earlier ``pip wheel .`` left: a module deleted from the source since
    stayed there and went into the wheel (review round 29a). The wheel's own build_py step, run for real (setuptools'
    command, this checkout's rdmaforge package) on a build directory holding such a module."""
    build_lib = tmp_path / "lib"
    (build_lib / "rdmaforge").mkdir(parents=True)
    (build_lib / "rdmaforge" / "deleted_since.py").write_text("X = 1\n")
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(PROJECT_ROOT / 'build_support')!r})\n"
        "from setuptools.dist import Distribution\n"
        "from rdmaforge_build import BuildPy\n"
        "command = BuildPy(Distribution({'name': 'rdmaforge', 'packages': ['rdmaforge'], 'script_name': 'setup.py'}))\n"
        f"command.build_lib = {str(build_lib)!r}\n"
        "command.ensure_finalized()\n"
        "command.run()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = {path.name for path in (build_lib / "rdmaforge").glob("*.py")}
    assert "cli.py" in built and "deleted_since.py" not in built
