"""The checkout's own link tree (build/collections), through which ansible.cfg finds rdmaforge.cluster: made from
nothing, as in a fresh clone, every link must lead to the checkout's real directory or file. (A tree assembled one
level deeper and then renamed into place once pointed every relative link one directory too high: the checkout's
own runs then found no role at all.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rdmaforge import collection
from rdmaforge.paths import PROJECT_ROOT

TOP_LEVEL = ("collection", "library", "module_utils", "filter_plugins", "callback_plugins", "roles", "playbooks",
             "rdmaforge", "LICENSE")  # fmt: skip


def fresh_checkout(tmp_path: Path) -> Path:
    """A checkout without build/: its top-level directories stand in by symlink (the layout is what matters)."""
    source = tmp_path / "clone"
    source.mkdir()
    for name in TOP_LEVEL:
        (source / name).symlink_to(PROJECT_ROOT / name)
    return source


def test_a_fresh_checkout_gets_links_that_reach_its_files(tmp_path: Path) -> None:
    source = fresh_checkout(tmp_path)
    root = collection.ensure_dev_tree(source)
    assert root == source / "build" / "collections"
    tree = collection.collection_dir(root)
    assert (tree / "roles").resolve() == (PROJECT_ROOT / "roles").resolve()
    assert (tree / "roles" / "preflight" / "tasks" / "main.yml").is_file()
    assert (tree / "playbooks" / "site.yml").is_file()
    assert (tree / "plugins" / "modules" / "kernel_cmdline.py").is_file()
    assert (tree / "plugins" / "module_utils" / "kernel_cmdline.py").is_file()
    assert (tree / "galaxy.yml").is_file()
    leftovers = [p.name for p in tree.parent.iterdir() if p.name != collection.NAME]
    assert leftovers == []  # the temporary trees it was assembled in are gone


def test_a_second_call_keeps_the_tree_and_a_broken_one_is_remade(tmp_path: Path) -> None:
    source = fresh_checkout(tmp_path)
    tree = collection.collection_dir(collection.ensure_dev_tree(source))
    first = (tree / "roles").lstat().st_ino
    collection.ensure_dev_tree(source)
    assert (tree / "roles").lstat().st_ino == first  # current: left alone
    (tree / "roles").unlink()
    (tree / "roles").symlink_to("../../../../../../roles")  # one level too high
    collection.ensure_dev_tree(source)
    assert (tree / "roles" / "preflight" / "tasks" / "main.yml").is_file()


def test_an_empty_output_directory_is_refused_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-o ""`` (an unset shell variable) is Path("."): the tarball would land in whatever directory the command
    ran from. It is a usage error, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        collection.main(["build", "-o", ""])
    assert stopped.value.code == 2
    assert "an empty path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_build_hook_loads_the_assembler_without_rdmaforge_installed(tmp_path: Path) -> None:
    """build_support/rdmaforge_build.py loads rdmaforge/collection.py by its path while the wheel (or the editable
    install of ``make venv``) is built, when no rdmaforge can be imported: ``-I -S`` leaves the standard library
    only. An import of rdmaforge at the top of that file once made setuptools skip the step, silently."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('_c', {str(PROJECT_ROOT / 'rdmaforge' / 'collection.py')!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "assert 'rdmaforge' not in sys.modules, sorted(sys.modules)\n"
        f"print(module.collection_dir(__import__('pathlib').Path({str(tmp_path)!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(collection.collection_dir(tmp_path))
