"""The collection's filters: each one documented for ansible-doc by its own plugins/filter/<name>.yml (the
ansible-core way for files that hold several filters), named with the rdmaforge_ prefix, its documented options
matching the function's parameters; and no filter file changes sys.path (the rdmaforge package is a normal
dependency of the controller)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rdmaforge.collection import FQCN, ensure_dev_tree
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.role_defaults import collection_filters

FILTER_DIR = PROJECT_ROOT / "filter_plugins"
ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"


#: Every filter file's filters, loaded as role_defaults loads them to evaluate a default (a name two files define
#: is a ValueError there).
FILTERS = collection_filters()


def ansible_doc(*args: str) -> Any:
    proc = subprocess.run(
        [str(ANSIBLE_DOC), "-t", "filter", "--json", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def docs() -> dict[str, Any]:
    ensure_dev_tree()
    result: dict[str, Any] = ansible_doc(*(f"{FQCN}.{name}" for name in FILTERS))
    return result


def test_every_filter_is_prefixed() -> None:
    assert FILTERS
    assert sorted(n for n in FILTERS if not n.startswith("rdmaforge_")) == []


def test_every_filter_has_its_doc_file() -> None:
    docs_files = {p.stem for p in FILTER_DIR.glob("*.yml")}
    assert sorted(set(FILTERS) - docs_files) == [], "write plugins/filter/<name>.yml"
    assert sorted(docs_files - set(FILTERS)) == [], "a doc file for a filter that does not exist"


def test_ansible_doc_lists_none_undocumented() -> None:
    ensure_dev_tree()
    proc = subprocess.run(
        [str(ANSIBLE_DOC), "-t", "filter", "-l"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert {f"{FQCN}.{name}" for name in FILTERS} <= listed
    assert [line for line in proc.stdout.splitlines() if "UNDOCUMENTED" in line] == []


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_documented_options_match_the_function(name: str, docs: dict[str, Any]) -> None:
    doc = docs[f"{FQCN}.{name}"]
    assert doc["doc"]["name"] == name
    assert doc["doc"]["short_description"]
    assert doc["examples"] and f"{FQCN}.{name}" in doc["examples"]
    assert doc["return"]["_value"]["description"]
    parameters = list(inspect.signature(FILTERS[name]).parameters)
    documented = doc["doc"].get("options") or {}
    assert sorted(documented) == sorted(["_input", *parameters[1:]])
    positional = doc["doc"].get("positional")
    assert (positional or "") == ", ".join(parameters[1:])


def test_no_filter_file_edits_sys_path() -> None:
    for path in FILTER_DIR.glob("*.py"):
        assert "sys.path" not in path.read_text(), path.name
