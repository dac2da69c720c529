"""build_once when the builder fails after a complete package was left in the controller cache under its temporary
name (a controller killed between the fetch and the rename).

The rename, the checksum and the manifest ran once on any live node, not on the builder: with the builder failed at
its compile, the next node renamed that old .part, and a manifest credited it to this run's pinned source; the other
nodes installed it, and the next run, finding a manifest, compiled nothing and exited 0 (review round 36c). Run for
real on this machine: two fake nodes (connection local) with prefix roots and scratch directories of their own under
tmp_path, a source tarball whose Makefile fails, and the controller cache under tmp_path."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import yaml
from conftest import LOCAL_NODE, recap, run_playbook


def tgz(path: Path, files: dict[str, str]) -> None:
    with gzip.GzipFile(path, "wb", mtime=0) as packed, tarfile.open(fileobj=packed, mode="w") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_a_failed_builder_never_puts_an_old_package_in_the_cache(tmp_path: Path) -> None:
    source = tmp_path / "source.tar.gz"
    tgz(source, {"toy-1.0/Makefile": "all:\n\tfalse\n"})  # the compile fails
    cache = tmp_path / "cache"
    cache.mkdir()
    stale = cache / "toy-X.tar.gz.part"
    tgz(stale, {"./out.txt": "an older build\n"})  # complete, from a run killed before its rename
    nodes = {host: {**LOCAL_NODE, "build_once_prefix_root": str(tmp_path / host / "opt"),
                    "build_once_workdir": str(tmp_path / host / "scratch")} for host in ("node1", "node2")}  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": nodes}}))
    playbook = tmp_path / "build.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Build once", "hosts": "all", "gather_facts": False,
        "tasks": [{"name": "Build once", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.build_once"}}],
        "vars": {"build_once_name": "toy", "build_once_id": "X", "build_once_builder": "node1",
                 "build_once_source": "tarball", "build_once_tarball_url": f"file://{source}",
                 "build_once_tarball_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
                 "build_once_make_argv": ["make"], "build_once_creates": "build/out.txt",
                 "build_once_package_dir": "build", "build_once_controller_cache": str(cache), "build_once_poll": 1,
                 "build_once_ldconfig": False}}]))  # fmt: skip
    for attempt in ("first", "second"):
        run = run_playbook(str(playbook), inventory=inventory, env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=600)
        assert run.returncode != 0, f"{attempt} run: {run.stdout[-4000:]}"
        assert "TASK [rdmaforge.cluster.build_once : Compile]" in run.stdout, f"{attempt}: {run.stdout[-4000:]}"
        assert recap(run.stdout)["node1"]["failed"] == 1, run.stdout[-4000:]
        assert not (cache / "toy-X.json").exists() and not (cache / "toy-X.tar.gz").exists(), attempt
        assert not (tmp_path / "node2" / "opt" / "current").exists(), attempt  # nothing installed anywhere
