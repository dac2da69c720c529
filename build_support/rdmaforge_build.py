"""The build backend of the rdmaforge wheel: setuptools', plus one step.

``build_py`` also writes what the CLI needs beside the Python code, all copied from the checkout (nothing is
kept twice in git):

- ``ansible_collections/rdmaforge/cluster/``: the collection (roles, playbooks, modules, module_utils, filters,
  callbacks), assembled by rdmaforge/collection.py; Ansible finds it on sys.path.
- ``rdmaforge/data/ansible.cfg``: the checkout's ansible.cfg.
- ``rdmaforge/data/verify/tests/infra/``: ``rdmaforge verify``'s testinfra suite.
- ``rdmaforge/data/inventories/example/``: the example inventory a user copies (paths.EXAMPLE_INVENTORY).

(``rdmaforge/data/*.txt`` is ordinary package data, see pyproject.toml.) rdmaforge/collection.py is loaded by
its path: it is standard library only, and nothing is installed while the wheel is being built.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

from setuptools.build_meta import *  # noqa: F403 - the PEP 517 hooks, unchanged
from setuptools.command.build_py import build_py as _build_py

ROOT = Path(__file__).resolve().parent.parent


def _collection_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_rdmaforge_collection", ROOT / "rdmaforge" / "collection.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPy(_build_py):  # type: ignore[misc]
    def run(self) -> None:
        build_lib = Path(self.build_lib)
        # setuptools copies into a build/lib.* an earlier build left (pip wheel . in a checkout): a module deleted
        # from the source since stayed there and went into the wheel (review round 29a). Never the source itself.
        stale = build_lib / "rdmaforge"
        if stale.is_dir() and stale.resolve() != (ROOT / "rdmaforge").resolve():
            shutil.rmtree(stale)
        super().run()
        collection = _collection_module()
        collection.assemble(collection.collection_dir(build_lib), ROOT, mode="copy")
        data = build_lib / "rdmaforge" / "data"
        data.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "ansible.cfg", data / "ansible.cfg")
        suite = data / "verify" / "tests" / "infra"
        if suite.exists():
            shutil.rmtree(suite)
        shutil.copytree(ROOT / "tests" / "infra", suite, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        example = data / "inventories" / "example"
        if example.exists():
            shutil.rmtree(example)
        shutil.copytree(ROOT / "inventories" / "example", example)
