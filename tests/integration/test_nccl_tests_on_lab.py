"""Issue 16 on the lab (make test): nccl-tests 2.19.6's real source, served by the lab mirror from
../shared/sources, compiled by nvcc through the build-once path (`make MPI=1 NCCL_HOME=/opt/nccl/current ...`, sm_80)
on one builder node only, of the binaries the lab inventory names (nccl_tests_binaries: the benchmark's all_reduce
and pairwise's sendrecv, about half the compile of all eleven); the same binaries on every node, linked to the
cluster's NCCL build; they start and print their usage (without a GPU nothing more can run); a re-run compiles and
changes nothing; and `rdmaforge bench` says that nccl-tests is installed and skipped only for lack of GPUs.

The lab inventory leaves nccl_tests_enabled false, so that the other modules' converges do not carry the role; this
module switches it on and compiles once (the controller's cached package is moved aside first: about 84 s on the
lab's 2 cores). The binaries are removed from the nodes afterwards, and the cached package put back, so the rest of
the session sees the lab, and the controller cache its records keep, as before.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rdmaforge.lab.mirror import LOCAL_SOURCES
from rdmaforge.lab.packages import NCCL_TESTS_TARBALL, NCCL_TESTS_VERSION
from rdmaforge.runner.exit_codes import ExitCode
from tests.conftest import LabHandle, assert_no_changes, recap
from tests.integration.test_cli import cli, run_dir_of
from tests.integration.test_nccl_build_on_lab import CONTROLLER_CACHE, task_outcomes

pytestmark = pytest.mark.lab

ROOT = "/opt/rdmaforge/nccl-tests"
BIN = f"{ROOT}/current/bin"
#: nccl-tests 2.19.6's src/Makefile BIN_FILES_LIST
UPSTREAM_PERF = sorted(
    f"{name}_perf"
    for name in (
        "all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce", "alltoall", "alltoallv", "scatter",
        "gather", "sendrecv", "hypercube",
    )
)  # fmt: skip
ENABLED = ["-e", "nccl_tests_enabled=true"]
COMPILE = "build_once : Compile"


def mirror_vars(lab: LabHandle) -> dict[str, object]:
    data: dict[str, object] = yaml.safe_load((lab.inventory.parent / "group_vars" / "all" / "mirror.yml").read_text())
    return data


@pytest.fixture(scope="module")
def built(
    converged: LabHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LabHandle, subprocess.CompletedProcess[str]]]:
    """One fresh build: the controller's cached nccl-tests packages are moved aside first, so the run must compile.
    Afterwards they are put back in place of the new build: the nodes' converge records keep the controller files
    that were there at their converge, and a changed one would send every node through a full converge next time
    (a build the cache did not have before is added, which no record looks at)."""
    if not (LOCAL_SOURCES / NCCL_TESTS_TARBALL).is_file():
        pytest.skip(f"{LOCAL_SOURCES / NCCL_TESTS_TARBALL} is absent: the lab mirror has no nccl-tests source")
    found = mirror_vars(converged)
    assert found["nccl_tests_enabled"] is False  # make test's converges leave it out (budget)
    assert found["nccl_tests_source"] == "tarball" and found["nccl_tests_version"] == NCCL_TESTS_VERSION
    assert str(found["nccl_tests_tarball_url"]).endswith(f"/nccl-tests/{NCCL_TESTS_TARBALL}")
    aside = tmp_path_factory.mktemp("nccl-tests-cache")
    kept = sorted(CONTROLLER_CACHE.glob("nccl-tests-*"))
    for cached in kept:
        shutil.move(cached, aside / cached.name)
    try:
        proc = converged.playbook("nccl_tests.yml", *ENABLED, timeout=3600)
        assert proc.returncode == 0, proc.stdout[-6000:]
        yield converged, proc
    finally:
        for node in converged.nodes:
            converged.ssh(node, f"rm -rf {ROOT}")
        for cached in kept:
            shutil.move(aside / cached.name, cached)


def perf(lab: LabHandle) -> list[str]:
    """The binaries the lab inventory asks for (nccl_tests_binaries), each one of the release's."""
    names = mirror_vars(lab)["nccl_tests_binaries"]
    assert isinstance(names, list) and names, names
    binaries = sorted(f"{name}_perf" for name in names)
    assert set(binaries) <= set(UPSTREAM_PERF), binaries
    return binaries


def manifest() -> dict[str, object]:
    (path,) = CONTROLLER_CACHE.glob(f"nccl-tests-{NCCL_TESTS_VERSION}-*.json")
    data: dict[str, object] = json.loads(path.read_text())
    return data


def test_compiled_once_on_the_builder_only(built: tuple[LabHandle, subprocess.CompletedProcess[str]]) -> None:
    lab, proc = built
    outcomes = task_outcomes(proc.stdout, COMPILE)  # never empty here: node1 must have compiled
    assert [line for line in outcomes if line.startswith("changed")] == ["changed: [node1]"], outcomes
    assert sorted(outcomes) == sorted(["changed: [node1]"] + [f"skipping: [{n}]" for n in lab.nodes if n != "node1"])
    info = manifest()
    nccl_build = json.loads(lab.ssh("node1", "cat /opt/nccl/current/.rdmaforge-build.json").stdout)
    assert info["builder"] == "node1" and info["version"] == NCCL_TESTS_VERSION and info["mpi"] is True
    assert info["nccl_build_id"] == nccl_build["id"]  # built against the cluster's NCCL build
    # a partial build has an id of its own (it must never stand in for a build of every binary)
    assert str(info["id"]).startswith(f"{NCCL_TESTS_VERSION}-nccl{nccl_build['id']}-bins"), info["id"]
    assert sorted(f"{name}_perf" for name in info["binaries"]) == perf(lab)  # type: ignore[attr-defined]
    assert float(str(info["build_seconds"])) > 0
    # the builder's scratch directory is gone; the other nodes never had one
    assert lab.ssh("node1", f"ls /var/lib/rdmaforge/nccl-build/nccl-tests-{info['id']}", check=False).returncode != 0
    # Seed 000.4's `yum install -y git` (apt here): git comes with the build tools (nccl_build_packages), on the
    # builder that compiles; the nodes that only receive the binaries get none of them. This holds on the lab make
    # test brings up (nodes made afresh; no module before this one builds anywhere but on node1).
    status = {node: lab.ssh(node, "dpkg-query -W -f '${Status}' git build-essential", check=False).stdout
              for node in lab.nodes}  # fmt: skip
    assert status["node1"] == "install ok installed" * 2, status
    assert all("install ok installed" not in found for node, found in status.items() if node != "node1"), status


def test_every_node_has_the_same_binaries(built: tuple[LabHandle, subprocess.CompletedProcess[str]]) -> None:
    lab, _ = built
    info = manifest()
    digests: dict[str, dict[str, str]] = {}
    for node in lab.nodes:
        assert lab.ssh(node, f"readlink -f {ROOT}/current").stdout.strip() == f"{ROOT}/{info['id']}"
        lines = lab.ssh(node, f"cd {BIN} && sha256sum *_perf").stdout.splitlines()
        digests[node] = {name: digest for digest, name in (line.split() for line in lines)}
    first = digests["node1"]
    assert sorted(first) == perf(lab)  # those asked for, no other
    assert all(found == first for found in digests.values()), digests


def test_binaries_link_the_clusters_nccl_build(built: tuple[LabHandle, subprocess.CompletedProcess[str]]) -> None:
    lab, _ = built
    for node in lab.nodes:
        ldd = lab.ssh(node, f"ldd {BIN}/all_reduce_perf").stdout
        assert "libnccl.so.2 => /opt/nccl/current/lib/libnccl.so.2 " in ldd, ldd
        assert re.search(r"^\s*libmpi\.so\.40 => (/usr)?/lib/x86_64-linux-gnu/libmpi\.so\.40 ", ldd, re.M), ldd
        assert "not found" not in ldd, ldd
        # the CUDA runtime is linked in (nccl_tests_make_extra_args): no node needs the builder's toolkit
        assert "libcudart" not in ldd, ldd
    # really compiled by nvcc: device code (a CUDA fat binary) is in the binary
    assert ".nv_fatbin" in lab.ssh("node1", f"objdump -h {BIN}/all_reduce_perf").stdout


def test_binaries_start_and_print_their_usage(built: tuple[LabHandle, subprocess.CompletedProcess[str]]) -> None:
    """Without a GPU, -h is what nccl-tests can do: it prints its usage and exits 0 before touching CUDA or MPI."""
    lab, _ = built
    binaries = perf(lab)
    for node in lab.nodes:
        out = lab.ssh(node, f'for b in {BIN}/*_perf; do "$b" -h; echo "exit=$?"; done').stdout
        for binary in binaries:
            assert f"USAGE: {binary} \n\t[-t,--nthreads <num threads>] \n\t[-g,--ngpus <gpus per thread>]" in out, out
        assert out.count("exit=0") == len(binaries), out
        # nccl-tests 2.17.3 and newer write JSON (-J): what the benchmark role asks the first binary's help
        assert out.count("[-J,--output_file <file> write output to filepath") == len(binaries)
    long = lab.ssh("node1", f"{BIN}/all_reduce_perf --help")
    assert long.returncode == 0 and long.stdout.startswith("USAGE: all_reduce_perf \n"), long.stdout
    assert "[-h,--help]" in long.stdout


def test_the_sizes_the_benchmark_passes_are_what_the_binaries_read(
    built: tuple[LabHandle, subprocess.CompletedProcess[str]],
) -> None:
    """The real binary reads -b before any GPU or MPI work: seed 000's 1B stops it ("invalid size specified"),
    what the benchmark role passes for it (1, rdmaforge_nccl_tests_size) does not."""
    lab, _ = built
    seed = lab.ssh("node1", f"timeout 60 {BIN}/all_reduce_perf -b 1B -e 512M -g 1 2>&1; echo exit=$?").stdout
    assert "invalid size specified for 'minbytes'" in seed, seed
    ours = lab.ssh("node1", f"timeout 60 {BIN}/all_reduce_perf -b 1 -e 512M -g 1 2>&1; echo exit=$?").stdout
    assert "invalid size specified" not in ours and "exit=124" not in ours, ours


def test_rerun_compiles_and_changes_nothing(built: tuple[LabHandle, subprocess.CompletedProcess[str]]) -> None:
    lab, _ = built
    proc = lab.playbook("nccl_tests.yml", *ENABLED)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert_no_changes(proc.stdout)
    assert set(recap(proc.stdout)) == set(lab.nodes)
    # the package is cached: the build tasks (Compile among them) are not even included
    included = task_outcomes(proc.stdout, "build_once : Build on the builder")
    assert included and all(o.startswith("skipping") for o in included), included
    assert f"{COMPILE}]" not in proc.stdout
    linked = task_outcomes(proc.stdout, "build_once : Point `current` at this build")
    assert sorted(linked) == sorted(f"ok: [{n}]" for n in lab.nodes), linked


def test_bench_says_installed_and_skipped_for_lack_of_gpus(
    built: tuple[LabHandle, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    lab, _ = built
    # e2e off: only nccl-tests is looked at here (test_verdicts judges the e2e run); nothing is then judged
    proc = cli(tmp_path, "bench", "-i", str(lab.inventory), "-e", "benchmark_e2e=false")
    assert proc.returncode in (ExitCode.OK, ExitCode.INCOMPLETE), proc.stdout[-6000:]
    nodes = ", ".join(lab.nodes)
    reason = f"no GPU on {nodes} (rdmaforge_node.gpu_count=0); nccl-tests installed at {BIN} on node1"
    assert f"nccl-tests: skipped (not required): {reason}" in proc.stdout, proc.stdout[-6000:]
    run_dir = run_dir_of(proc.stdout)
    results = json.loads((run_dir / "benchmark" / "results.json").read_text())
    nccl = {c["name"]: c for c in results["components"]}["nccl-tests"]
    assert nccl["status"] == "skipped" and nccl["required"] is False and nccl["reason"] == reason, nccl
    summary = (run_dir / "benchmark" / "summary.md").read_text()
    assert f"- nccl-tests: skipped (not required): {reason}" in summary
    assert "not installed" not in summary
