"""build_once's installed tree against the record of its files (library/build_tree.py).

The install was decided by the package's sha256 in `.rdmaforge-build.json` alone: a library replaced by hand, or a
`lib/` deleted, left that manifest as it was, and every converge said changed=0 and the fast path "in sync" on a
node whose NCCL could not load (review round 21a). Run for real on this machine (the role's install.yml, connection
local, the node's prefix root and the controller cache under tmp_path), as test_build_once_same_id_other_source."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import recap

from rdmaforge.converge import ledger
from tests.unit.test_build_once_same_id_other_source import ID, install, package

LIBRARY = "upstream 2.29.7\n"


def installed(tmp_path: Path) -> tuple[Path, Path]:
    root, cache = tmp_path / "node" / "opt" / "nccl", tmp_path / "cache"
    cache.mkdir()
    package(cache, tmp_path / "upstream", LIBRARY, "b")
    first = install(tmp_path, root, cache)
    assert first.returncode == 0, first.stdout[-4000:]
    return root, cache


def test_a_replaced_or_deleted_library_is_installed_again(tmp_path: Path) -> None:
    root, cache = installed(tmp_path)
    library = root / ID / "lib" / "libnccl.so.2"
    record = json.loads((root / ID / ".rdmaforge-files.json").read_text())
    assert set(record["files"]) == {"lib/libnccl.so.2"}, record
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] == 0

    library.write_text("a hand-built NCCL\n")
    repaired = install(tmp_path, root, cache)
    assert recap(repaired.stdout)["localhost"]["changed"] > 0, repaired.stdout[-4000:]
    assert library.read_text() == LIBRARY
    assert f"{root / ID} is installed again: lib/libnccl.so.2: content differs from the record" in repaired.stdout, \
        repaired.stdout[-4000:]
    # The damaged tree was this package's: no `previous` and no copy aside are made of it.
    assert not (root / "previous").exists() and sorted(p.name for p in root.iterdir()) == [ID, "current"]

    shutil.rmtree(library.parent)
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] > 0
    assert library.read_text() == LIBRARY

    library.chmod(0o600)
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] > 0
    assert library.stat().st_mode & 0o777 == 0o644
    os.chown(library, 4242, 4242)
    owned = install(tmp_path, root, cache)
    assert recap(owned.stdout)["localhost"]["changed"] > 0, owned.stdout[-4000:]
    assert "lib/libnccl.so.2: owner (uid:gid) 4242:4242" in owned.stdout and library.stat().st_uid == 0
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] == 0


def test_a_file_the_record_does_not_list_is_no_drift_and_outlives_a_repair(tmp_path: Path) -> None:
    """A net plugin copied into the build's lib/ by hand is not the build's, and no reason to reinstall it; a repair
    of the build's own library unpacks over the tree and leaves it (it removed the whole tree: review round 22)."""
    root, cache = installed(tmp_path)
    plugin = root / ID / "lib" / "libnccl-net.so"
    plugin.write_text("a plugin\n")
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] == 0
    (root / ID / "lib" / "libnccl.so.2").write_text("a hand-built NCCL\n")
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] > 0
    assert (root / ID / "lib" / "libnccl.so.2").read_text() == LIBRARY and plugin.read_text() == "a plugin\n"


def test_a_build_installed_before_the_record_existed_is_installed_again_once(tmp_path: Path) -> None:
    root, cache = installed(tmp_path)
    (root / ID / ".rdmaforge-files.json").unlink()
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] > 0
    assert (root / ID / ".rdmaforge-files.json").exists()
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] == 0


def test_check_mode_on_a_damaged_tree_reports_the_change_and_makes_none(tmp_path: Path) -> None:
    root, cache = installed(tmp_path)
    library = root / ID / "lib" / "libnccl.so.2"
    library.write_text("a hand-built NCCL\n")
    check = install(tmp_path, root, cache, "--check")
    assert check.returncode == 0 and recap(check.stdout)["localhost"]["changed"] > 0, check.stdout[-4000:]
    assert library.read_text() == "a hand-built NCCL\n"


def test_the_converge_record_watches_every_file_of_the_build() -> None:
    """The ledger keeps each file build_tree compared (so the fast path's drift check re-reads them), and `previous`
    (a stat on every run)."""
    resources = ledger.Resources()
    files = ["/opt/nccl/x/.rdmaforge-files.json", "/opt/nccl/x/lib/libnccl.so.2"]
    ledger.add_result(resources, "Compare", "rdmaforge.cluster.build_tree", {"files": files, "changed": False})
    assert resources.paths == set(files) and not resources.unverifiable


def test_the_record_of_a_rollback_goes_when_current_moves_and_only_then(tmp_path: Path) -> None:
    """nccl_build's rollback writes a record beside `current` (a second rollback would roll forward): an install
    that moves `current` to another build ends what it says; one that leaves `current` where it is keeps it."""
    root, cache = tmp_path / "node" / "opt" / "nccl", tmp_path / "cache"
    cache.mkdir()
    package(cache, tmp_path / "upstream", LIBRARY, "b")
    root.mkdir(parents=True)
    (root / "elsewhere").mkdir()  # another rdmaforge build (current_check refuses to take over one of the user's)
    (root / "elsewhere" / ".rdmaforge-build.json").write_text(json.dumps({"name": "nccl", "id": "elsewhere",
                                                                          "sha256": "0" * 64}))  # fmt: skip
    (root / "current").symlink_to(root / "elsewhere")
    record = root / ".rdmaforge-rolled-back"
    record.write_text("newer -> elsewhere\n")
    extra = ("-e", json.dumps({"build_once_rollback_record": record.name}))
    moved = install(tmp_path, root, cache, *extra)
    assert moved.returncode == 0 and (root / "current").resolve() == root / ID, moved.stdout[-4000:]
    assert not record.exists()
    record.write_text(f"newer -> {ID}\n")
    stayed = install(tmp_path, root, cache, *extra)
    assert recap(stayed.stdout)["localhost"]["changed"] == 0 and record.exists()


def build_tree_call(expression: str, *args: str) -> Any:
    """An expression on the collection's build_tree module (``m``), in a process of its own (see test_converge_state's
    host_identity: importing the collection here would hide it from Ansible's loader for the tests after it)."""
    from rdmaforge.collection import ensure_dev_tree

    code = ("import json, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "import ansible_collections.rdmaforge.cluster.plugins.modules.build_tree as m\n"
            "try:\n"
            f"    print(json.dumps({{'value': {expression}}}))\n"
            "except OSError as exc:\n"
            "    print(json.dumps({'oserror': type(exc).__name__}))\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code, str(ensure_dev_tree()), *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_check_hashes_only_the_files_the_record_lists(tmp_path: Path) -> None:
    """A check compares the files the record lists: a user's file beside them (a plugin copied into lib/) is named
    as an extra, its content never read (review round 22: a check hashed every file under the prefix)."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libnccl.so.2").write_text(LIBRARY)
    (tmp_path / "lib" / "users-plugin.so").write_text("the user's own\n")
    found = build_tree_call("m.tree(sys.argv[2], {'lib/libnccl.so.2'})", str(tmp_path))["value"]
    assert set(found) == {"lib/libnccl.so.2", "lib/users-plugin.so"}, found
    assert found["lib/libnccl.so.2"]["sha256"] == hashlib.sha256(LIBRARY.encode()).hexdigest()
    assert "sha256" not in found["lib/users-plugin.so"] and found["lib/users-plugin.so"]["size"] == 15, found
    everything = build_tree_call("m.tree(sys.argv[2])", str(tmp_path))["value"]
    assert all("sha256" in entry for entry in everything.values()), everything


def test_a_directory_that_cannot_be_read_is_an_error_not_left_out(tmp_path: Path) -> None:
    """os.walk passes over a directory it cannot list unless told otherwise: a record written then would lack its
    files, and a check would call them missing. The walk now raises (the module fails naming the build)."""
    assert build_tree_call("m.tree(sys.argv[2])", str(tmp_path / "gone")) == {"oserror": "FileNotFoundError"}
