"""build_once's git source pinned to a commit: role build_once for real on this machine (connection local, builder
localhost) against a git repository made here, whose tag is then moved to another commit, as an upstream that
rewrites a tag would. A pinned build of the moved tag stops before compiling, naming the host, the variable, the
pinned and the checked-out commit; an unpinned one builds, says so, and its manifest records it.

The runs are one sequence, made once for the module (fixture ``runs``); both tests read their outputs. The builds
are cached and not installed (build_once_install: false): the pin is checked before anything compiles, and the
install from the cache is test_build_once_interrupted.py's."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import recap, run_playbook
from test_build_once_interrupted import ENV, write_run

MAKEFILE = "all:\n\tmkdir -p build\n\techo built > build/out.txt\n"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout.strip()  # fmt: skip


def upstream(tmp: Path) -> tuple[Path, str, str]:
    """A repository whose annotated tag v1.0 first names one commit and is then moved to a second one."""
    repo = tmp / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "Makefile").write_text(MAKEFILE)
    git(repo, "add", "Makefile")
    git(repo, "commit", "-q", "-m", "first")
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "-a", "-m", "release", "v1.0")
    (repo / "README").write_text("moved\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "second")
    second = git(repo, "rev-parse", "HEAD")
    return repo, first, second


def git_run(tmp: Path, repo: Path, build_id: str, commit: str) -> tuple[Path, Path]:
    return write_run(tmp, build_id, MAKEFILE, name=f"{build_id}.yml", build_once_source="git",
                     build_once_git_url=f"file://{repo}", build_once_git_ref="v1.0", build_once_git_commit=commit,
                     build_once_git_commit_variable="nccl_build_git_commit", build_once_install=False)  # fmt: skip


def build(tmp: Path, repo: Path, build_id: str, commit: str) -> subprocess.CompletedProcess[str]:
    inventory, playbook = git_run(tmp, repo, build_id, commit)
    return run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)


@dataclass(frozen=True)
class Runs:
    tmp: Path
    repo: Path
    first: str  # the commit v1.0 named at first
    second: str  # the commit it was moved to
    pinned: subprocess.CompletedProcess[str]  # pinned to first, before the tag moved
    moved: subprocess.CompletedProcess[str]  # pinned to first, after
    unpinned: subprocess.CompletedProcess[str]  # not pinned, after: caches a build of second
    other_commit: subprocess.CompletedProcess[str]  # the unpinned build's id, pinned to first
    cached_commit: subprocess.CompletedProcess[str]  # the unpinned build's id, pinned to second


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp = tmp_path_factory.mktemp("git-pin")
    repo, first, second = upstream(tmp)
    pinned = build(tmp, repo, "pinned", first)
    git(repo, "tag", "-f", "-a", "-m", "release, moved", "v1.0", second)  # upstream moves the tag
    moved = build(tmp, repo, "moved", first)
    unpinned = build(tmp, repo, "unpinned", "")
    other_commit = build(tmp, repo, "unpinned", first)
    cached_commit = build(tmp, repo, "unpinned", second)
    return Runs(tmp, repo, first, second, pinned, moved, unpinned, other_commit, cached_commit)


def test_a_moved_tag_is_refused_before_compiling_and_a_pinned_build_records_its_commit(runs: Runs) -> None:
    cache, repo, first, second = runs.tmp / "cache", runs.repo, runs.first, runs.second

    # pinned to the tag's commit: built, and the manifest records where the source came from
    proc = runs.pinned
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "NOT PINNED" not in proc.stdout
    manifest = json.loads((cache / "toy-pinned.json").read_text())
    assert manifest["source"] == {"kind": "git", "url": f"file://{repo}", "ref": "v1.0", "commit": first,
                                  "pinned": True}  # fmt: skip

    # upstream moves the tag; a new build of the same pin stops before its make, and names everything
    proc = runs.moved
    assert proc.returncode != 0
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal: [localhost]")]
    assert fatal, proc.stdout[-4000:]
    assert "localhost: nccl_build_git_commit=" in fatal[-1] and first in fatal[-1] and second in fatal[-1], fatal[-1]
    assert "TASK [rdmaforge.cluster.build_once : Compile]" not in proc.stdout
    assert not (cache / "toy-moved.json").exists()
    assert not (runs.tmp / "scratch" / "toy-moved.lock").exists()  # the builder lock is released

    # unpinned (""): the moved tag is built, with a warning, and the manifest says it was not pinned
    proc = runs.unpinned
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "WARNING: localhost: toy is built from" in proc.stdout and "NOT PINNED" in proc.stdout
    manifest = json.loads((cache / "toy-unpinned.json").read_text())
    assert manifest["source"]["pinned"] is False and manifest["source"]["commit"] == second


def test_a_cached_build_from_another_commit_is_not_taken_for_the_pinned_one(runs: Runs) -> None:
    assert runs.unpinned.returncode == 0  # an unpinned build cached the moved tag
    # pinned to the first commit: the cache (made from the second) is not used; the build is tried, and refused
    proc = runs.other_commit
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "nccl_build_git_commit=" in proc.stdout and runs.second in proc.stdout, proc.stdout[-4000:]
    # pinned to the commit the cache was made from: taken from the cache, nothing built or changed
    proc = runs.cached_commit
    assert proc.returncode == 0 and recap(proc.stdout)["localhost"]["changed"] == 0, proc.stdout[-4000:]


def test_an_unpinned_cached_build_is_used_only_for_its_own_url_and_ref(tmp_path: Path) -> None:
    """Unpinned (commit ""), the cache was read for no source at all: another ref or another fork's URL under the
    same id (the id names release, CUDA and archs only) took the old source's cached build, changed nothing and said
    nothing, not even that the build is unpinned (review round 41b). A cached build counts only for the URL and ref
    it was built from, and one taken from the cache is still said to be unpinned."""
    repo, first, second = upstream(tmp_path)  # v1.0 names the first commit, main the second
    fork = tmp_path / "fork"
    subprocess.run(["git", "clone", "-q", "--mirror", str(repo), str(fork)], check=True, env=GIT_ENV)
    cache = tmp_path / "cache"

    def unpinned(url: Path, ref: str, name: str) -> subprocess.CompletedProcess[str]:
        inventory, playbook = write_run(tmp_path, "same-id", MAKEFILE, name=name, build_once_source="git",
                                        build_once_git_url=f"file://{url}", build_once_git_ref=ref,
                                        build_once_git_commit="", build_once_install=False)  # fmt: skip
        proc = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
        assert proc.returncode == 0, proc.stdout[-4000:]
        return proc

    def source() -> dict[str, object]:
        return json.loads((cache / "toy-same-id.json").read_text())["source"]

    assert "build_once : Compile]" in unpinned(repo, "v1.0", "tag.yml").stdout
    assert (source()["ref"], source()["commit"]) == ("v1.0", first)

    branch = unpinned(repo, "main", "branch.yml")  # another ref of the same repository: built, not the tag's build
    assert "build_once : Compile]" in branch.stdout, branch.stdout[-4000:]
    assert "is built again" in branch.stdout
    assert (source()["url"], source()["ref"], source()["commit"]) == (f"file://{repo}", "main", second)

    cached = unpinned(repo, "main", "branch-again.yml")  # the same URL and ref: taken from the cache, with a warning
    assert "build_once : Compile]" not in cached.stdout and recap(cached.stdout)["localhost"]["changed"] == 0
    assert "is taken from the controller cache" in cached.stdout, cached.stdout[-4000:]
    assert "NOT PINNED" in cached.stdout

    forked = unpinned(fork, "main", "fork.yml")  # the same ref of another URL: built
    assert "build_once : Compile]" in forked.stdout, forked.stdout[-4000:]
    assert source()["url"] == f"file://{fork}"
