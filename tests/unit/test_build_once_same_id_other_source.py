"""build_once's install of a build whose id is already installed from another source (a moved tag rebuilt, a patched
fork's commit, another tarball: the id names release, CUDA, archs and functions, not the source).

It was unpacked over the installed tree: that tree's stale files stayed beside the new ones, running jobs had their
library replaced underneath, and `previous` still led to an older build, so a rollback went past the build just
replaced (review round 15a). Run for real on this machine (the role's install.yml, connection local, the node's
prefix root and the controller cache under tmp_path); the packages are made here with tar."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import yaml
from conftest import local_inventory, recap, run_playbook

ID = "2.29.7-cuda12.4-sm_90"


def package(cache: Path, work: Path, library_text: str, commit: str) -> None:
    """The controller cache's package of build ID (tarball and manifest, as build.yml writes them)."""
    (work / "lib").mkdir(parents=True)
    (work / "lib" / "libnccl.so.2").write_text(library_text)
    tarball = cache / f"nccl-{ID}.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(work / "lib", arcname="lib")
    manifest = {"name": "nccl", "id": ID, "tarball": tarball.name, "version": "2.29.7",
                "sha256": hashlib.sha256(tarball.read_bytes()).hexdigest(),
                "source": {"kind": "git", "commit": commit * 40}}  # fmt: skip
    (cache / f"nccl-{ID}.json").write_text(json.dumps(manifest))


def install(tmp_path: Path, root: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "install.yml"
    playbook.write_text(yaml.safe_dump([{"name": "install", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "install", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.build_once",
                                                            "tasks_from": "install"},
         "vars": {"build_once_name": "nccl", "build_once_id": ID, "build_once_prefix_root": str(root),
                  "build_once_controller_cache": str(cache), "build_once_ldconfig": False}}]}]))  # fmt: skip
    return run_playbook(str(playbook), *extra, inventory=local_inventory(tmp_path / "hosts.yml"),
                        env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=300)  # fmt: skip


def test_a_build_of_the_installed_id_from_another_source_is_installed_beside_it(tmp_path: Path) -> None:
    root, cache = tmp_path / "node" / "opt" / "nccl", tmp_path / "cache"
    cache.mkdir()
    package(cache, tmp_path / "upstream", "upstream 2.29.7\n", "b")
    first = install(tmp_path, root, cache)
    assert first.returncode == 0, first.stdout[-4000:]
    (root / ID / "lib" / "libnccl_upstream_only.so").write_text("a file only the upstream build has\n")
    upstream_sha = json.loads((cache / f"nccl-{ID}.json").read_text())["sha256"]

    package(cache, tmp_path / "fork", "patched fork 2.29.7\n", "1")
    second = install(tmp_path, root, cache)
    assert second.returncode == 0, second.stdout[-4000:]
    assert (root / ID / "lib" / "libnccl.so.2").read_text() == "patched fork 2.29.7\n"
    assert not (root / ID / "lib" / "libnccl_upstream_only.so").exists()  # no stale file of the other source
    aside = root / f"{ID}.replaced-{upstream_sha[:12]}"
    assert (aside / "lib" / "libnccl.so.2").read_text() == "upstream 2.29.7\n"
    assert (root / "current").resolve() == root / ID and (root / "previous").resolve() == aside
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] == 0

    # Pinned back to the upstream source: the fork moves aside, and the upstream tree moved aside before is
    # that same package, replaced by the fresh copy.
    package(cache, tmp_path / "upstream-again", "upstream 2.29.7\n", "b")
    back = install(tmp_path, root, cache)
    assert back.returncode == 0, back.stdout[-4000:]
    assert (root / ID / "lib" / "libnccl.so.2").read_text() == "upstream 2.29.7\n"
    assert (root / "previous").resolve().name.startswith(f"{ID}.replaced-")
    assert ((root / "previous").resolve() / "lib" / "libnccl.so.2").read_text() == "patched fork 2.29.7\n"


def test_a_rebuild_of_the_installed_source_leaves_the_installed_build_and_previous_alone(tmp_path: Path) -> None:
    """The same source built again (another controller, a cleared cache, a damaged cached package made again) is
    another package: tar keeps the files' times, and a build may stamp its own. Its sha256 alone decided, so the
    running build moved aside as `previous` (a copy of the same build, which a rollback then went to) and every node
    unpacked the release again (review round 41b). The source decides: the tree stays, and only a tree that is no
    longer intact is unpacked again, in place."""
    root, cache = tmp_path / "node" / "opt" / "nccl", tmp_path / "cache"
    cache.mkdir()
    package(cache, tmp_path / "first", "upstream 2.29.7, built at 10:00\n", "b")
    assert install(tmp_path, root, cache).returncode == 0
    installed = (root / ID / ".rdmaforge-build.json").read_text()

    package(cache, tmp_path / "rebuilt", "upstream 2.29.7, built at 11:00\n", "b")  # same commit, other bytes
    again = install(tmp_path, root, cache)
    assert again.returncode == 0, again.stdout[-4000:]
    assert recap(again.stdout)["localhost"]["changed"] == 0, again.stdout[-4000:]
    assert (root / ID / "lib" / "libnccl.so.2").read_text() == "upstream 2.29.7, built at 10:00\n"
    assert (root / ID / ".rdmaforge-build.json").read_text() == installed
    assert not (root / "previous").is_symlink() and not list(root.glob(f"{ID}.replaced-*"))
    assert (root / "current").resolve() == root / ID

    # the tree damaged: unpacked again in place, from the package the cache has now, and still no `previous`
    (root / ID / "lib" / "libnccl.so.2").unlink()
    repaired = install(tmp_path, root, cache)
    assert repaired.returncode == 0, repaired.stdout[-4000:]
    assert (root / ID / "lib" / "libnccl.so.2").read_text() == "upstream 2.29.7, built at 11:00\n"
    assert not (root / "previous").is_symlink() and not list(root.glob(f"{ID}.replaced-*"))
    assert recap(install(tmp_path, root, cache).stdout)["localhost"]["changed"] == 0
