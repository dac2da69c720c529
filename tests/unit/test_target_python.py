"""What runs on the targets (the modules and the parsers they ship as module_utils) stays Python 3.8 and
standard-library only: parsed with Python 3.8's grammar, importing nothing but the standard library, Ansible's own
module_utils and the collection's module_utils; and every module_utils a module imports is one the collection ships
(rdmaforge.collection.TARGET_PARSERS), each one real file in git (no symlinks)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaforge.collection import TARGET_PARSERS
from rdmaforge.paths import PROJECT_ROOT

MODULE_UTILS = "ansible_collections.rdmaforge.cluster.plugins.module_utils"
PARSERS = [PROJECT_ROOT / "rdmaforge" / "parsers" / f"{name}.py" for name in TARGET_PARSERS]
MODULES = sorted((PROJECT_ROOT / "library").glob("*.py"))
TARGET_FILES = PARSERS + MODULES
STDLIB = set(sys.stdlib_module_names)


def imported_modules(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", TARGET_FILES, ids=[p.relative_to(PROJECT_ROOT).as_posix() for p in TARGET_FILES])
def test_parses_as_python_3_8(path: Path) -> None:
    ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 8))


@pytest.mark.parametrize("path", TARGET_FILES, ids=[p.relative_to(PROJECT_ROOT).as_posix() for p in TARGET_FILES])
def test_imports_only_the_standard_library(path: Path) -> None:
    allowed_prefixes = ("ansible.module_utils.", f"{MODULE_UTILS}.") if path in MODULES else ()
    foreign = [
        name
        for name in imported_modules(ast.parse(path.read_text(encoding="utf-8")))
        if name.split(".")[0] not in STDLIB and name != "__future__" and not name.startswith(allowed_prefixes)
    ]
    assert foreign == [], f"{path.name} imports outside the standard library: {foreign}"


def test_modules_import_only_shipped_module_utils() -> None:
    used = {
        name[len(MODULE_UTILS) + 1 :]
        for path in MODULES
        for name in imported_modules(ast.parse(path.read_text(encoding="utf-8")))
        if name.startswith(f"{MODULE_UTILS}.")
    }
    missing = sorted(used - set(TARGET_PARSERS))
    assert not missing, f"add to rdmaforge.collection.TARGET_PARSERS: {missing}"


def test_no_symlinks_in_git() -> None:
    listing = subprocess.run(
        ["git", "ls-files", "-s"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    ).stdout
    links = [line.split("\t", 1)[1] for line in listing.splitlines() if line.startswith("120000 ")]
    assert links == [], f"symlinks in git: {links}"


PY38 = Path("/root/.pyenv/versions/3.8.18/bin/python3.8")


@pytest.mark.skipif(not PY38.exists(), reason="no Python 3.8 interpreter here")
def test_parsers_import_under_python_3_8() -> None:
    """Really imported by a Python 3.8 (-I: isolated, -S: no site-packages), as the submodules of a package of their
    own (module_utils, where one imports another relatively: probes.py)."""
    code = (
        "import importlib.util, sys, types\n"
        f"package = types.ModuleType('module_utils'); package.__path__ = [{str(PARSERS[0].parent)!r}]\n"
        "sys.modules['module_utils'] = package\n"
    ) + "".join(
        f"s = importlib.util.spec_from_file_location('module_utils.{p.stem}', {str(p)!r})\n"
        f"m = importlib.util.module_from_spec(s); sys.modules['module_utils.{p.stem}'] = m; s.loader.exec_module(m)\n"
        for p in PARSERS
    )
    proc = subprocess.run([str(PY38), "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
