"""Build identity, arch validation and the make command lines of NCCL and nccl-tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

from rdmaforge import nccl_build
from rdmaforge.lab.mirror import LOCAL_SOURCES
from rdmaforge.lab.packages import NCCL_TESTS_TARBALL
from rdmaforge.paths import RESOURCES

CUDA13_CODES = "sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_110 sm_103 sm_120 sm_121".split()
NVCC = Path("/usr/local/cuda/bin/nvcc")


def test_nvcc_release_is_read() -> None:
    text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
    assert nccl_build.parse_nvcc_version(text) == "13.0"
    with pytest.raises(ValueError, match="cannot read the CUDA release"):
        nccl_build.parse_nvcc_version("command not found")


def test_gencode_for_seed_000_sm80() -> None:
    assert nccl_build.nvcc_gencode(["sm_80"], CUDA13_CODES) == "-gencode=arch=compute_80,code=sm_80"
    assert nccl_build.nvcc_gencode(["sm_80", "sm_90", "sm_80"], CUDA13_CODES) == (
        "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
    )


@pytest.mark.parametrize(
    ("archs", "message"),
    [
        (["sm_70"], r"\['sm_70'\] cannot be built by nvcc 13.0; allowed: sm_75, sm_80"),
        (["sm_60", "sm_80"], r"\['sm_60'\] cannot be built"),
        (["80"], r"\['80'\] are not arch names; allowed form: sm_<NN>"),
        (["compute_80"], r"are not arch names"),
        ([], r"nccl_cuda_archs is empty"),
    ],
)
def test_archs_the_nvcc_cannot_build_are_refused(archs: list[str], message: str) -> None:
    with pytest.raises(nccl_build.ArchError, match=message):
        nccl_build.nvcc_gencode(archs, CUDA13_CODES, host="node1", cuda="13.0")


@pytest.mark.skipif(not NVCC.exists(), reason="no nvcc at /usr/local/cuda on this machine")
def test_real_nvcc_list_agrees_with_the_validation() -> None:
    codes = subprocess.run([str(NVCC), "--list-gpu-code"], capture_output=True, text=True, check=True).stdout.split()
    release = nccl_build.parse_nvcc_version(subprocess.run([str(NVCC), "--version"], capture_output=True,
                                                           text=True, check=True).stdout)  # fmt: skip
    assert nccl_build.nvcc_gencode(["sm_80"], codes, cuda=release).endswith("code=sm_80")
    if int(release.split(".")[0]) >= 13:
        with pytest.raises(nccl_build.ArchError):
            nccl_build.nvcc_gencode(["sm_70"], codes, cuda=release)


def test_suffixed_archs_are_built_where_nvcc_lists_their_base() -> None:
    # CUDA 13.0's `--list-gpu-code` (above) names no sm_90a or sm_100f, yet its nvcc builds both: they were refused.
    assert nccl_build.nvcc_gencode(["sm_90a", "sm_100f"], CUDA13_CODES) == (
        "-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_100f,code=sm_100f"
    )
    cuda11_codes = "sm_35 sm_37 sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86".split()
    with pytest.raises(nccl_build.ArchError, match=r"\['sm_90a'\] cannot be built by nvcc 11.2"):
        nccl_build.nvcc_gencode(["sm_90a"], cuda11_codes, cuda="11.2")


@pytest.mark.parametrize(
    ("archs", "new_archs", "unknown"),
    [
        (["sm_80", "sm_10"], [], "sm_10 is"),  # the form, but no nvcc since CUDA 8 builds it
        (["sm_999", "sm_80a", "sm_999"], [], "sm_999, sm_80a are"),  # each named once; sm_80a: nvcc has no such arch
        (["sm_130"], ["sm_140"], "sm_130 is"),
    ],
)
def test_archs_no_nvcc_builds_are_named_before_the_build(archs: list[str], new_archs: list[str], unknown: str) -> None:
    problem = nccl_build.arch_list_problem(archs, new_archs)
    assert problem is not None and problem.startswith(f"{unknown} not a GPU arch that nvcc (CUDA 8 to 13.0) builds")
    assert "allowed: sm_30, sm_32, sm_35" in problem and problem.endswith("also listed in nccl_build_new_archs")


FORM = "allowed: a non-empty list of sm_NN names, such as ['sm_80', 'sm_90']"


def test_arch_list_problem_lets_known_and_declared_archs_through() -> None:
    assert nccl_build.arch_list_problem(["sm_80", "sm_90a", "sm_100f", "sm_121"]) is None
    assert nccl_build.arch_list_problem(["sm_80", "sm_130"], ["sm_130"]) is None
    for bad in ([], ["80"], ["sm_90z"], "sm_80", [80], None):
        assert nccl_build.arch_list_problem(bad) == FORM


def _nvcc_builds(arch: str) -> bool:
    number = arch.removeprefix("sm_")
    argv = [str(NVCC), "--dryrun", "-x", "cu", "-c", "/dev/null", "-o", "/dev/null",
            f"-gencode=arch=compute_{number},code={arch}"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not NVCC.exists(), reason="no nvcc at /usr/local/cuda on this machine")
def test_the_arch_checks_agree_with_the_real_nvcc() -> None:
    """For every arch of the table, and some that no nvcc has: preflight's check and the build's check together let
    through exactly what this machine's nvcc builds (nvcc --dryrun is the judge)."""
    codes = subprocess.run([str(NVCC), "--list-gpu-code"], capture_output=True, text=True, check=True).stdout.split()
    disagree = []
    for arch in [*nccl_build.CUDA_ARCHS, "sm_10", "sm_80a", "sm_89a", "sm_90f", "sm_75a", "sm_999"]:
        try:
            nccl_build.nvcc_gencode([arch], codes)
            ours = nccl_build.arch_list_problem([arch]) is None
        except nccl_build.ArchError:
            ours = False
        if ours != _nvcc_builds(arch):
            disagree.append(f"{arch}: rdmaforge {'builds' if ours else 'refuses'}, nvcc does not agree")
    assert not disagree, disagree
    assert "sm_90a" in nccl_build.CUDA_ARCHS and _nvcc_builds("sm_90a")  # the check above judged a suffixed arch


def test_build_id_encodes_version_cuda_archs_and_partial_builds() -> None:
    assert nccl_build.build_id("2.29.7", "13.0", ["sm_80"]) == "2.29.7-cuda13.0-sm_80"
    assert nccl_build.build_id("2.29.7", "13.0", ["sm_90", "sm_80"]) == "2.29.7-cuda13.0-sm_80_sm_90"
    partial = nccl_build.build_id("2.29.7", "13.0", ["sm_80"], "AllReduce Sum f32 RING SIMPLE")
    assert partial.startswith("2.29.7-cuda13.0-sm_80-funcs") and len(partial) == len("2.29.7-cuda13.0-sm_80-funcs") + 8
    assert partial != nccl_build.build_id("2.29.7", "13.0", ["sm_80"], "SendRecv")
    assert nccl_build.build_id("2.29.8", "13.0", ["sm_80"]) != nccl_build.build_id("2.29.7", "13.0", ["sm_80"])


def test_nccl_make_command_line() -> None:
    gencode = "-gencode=arch=compute_80,code=sm_80"
    assert nccl_build.nccl_make_argv(2, gencode, "/usr/local/cuda") == [
        "make", "-j2", "src.build", f"NVCC_GENCODE={gencode}", "CUDA_HOME=/usr/local/cuda",
    ]  # fmt: skip
    assert (
        nccl_build.nccl_make_argv(16, gencode, "/c", " AllReduce Sum f32 * * ")[-1]
        == "ONLY_FUNCS=AllReduce Sum f32 * *"
    )


def test_nccl_tests_make_command_line() -> None:
    gencode = "-gencode=arch=compute_80,code=sm_80"
    argv = nccl_build.nccl_tests_make_argv(8, "/opt/nccl/current", "/usr/local/cuda",
                                           "/usr/lib/x86_64-linux-gnu/openmpi", gencode)  # fmt: skip
    assert argv == [
        "make", "-j8", "NCCL_HOME=/opt/nccl/current", "CUDA_HOME=/usr/local/cuda", f"NVCC_GENCODE={gencode}",
        "MPI=1", "MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi",
    ]  # fmt: skip
    assert "MPI=1" not in nccl_build.nccl_tests_make_argv(8, "/n", "/c", "/m", gencode, mpi=False)


def test_nccl_tests_make_command_line_with_some_binaries() -> None:
    gencode = "-gencode=arch=compute_80,code=sm_80"
    argv = nccl_build.nccl_tests_make_argv(2, "/n", "/c", "/m", gencode, True, ["sendrecv", "all_reduce", "sendrecv"])
    assert argv[-1] == "BIN_FILES_LIST=all_reduce sendrecv"  # one make variable, each name once
    for every in (None, []):
        assert not any(arg.startswith("BIN_FILES_LIST") for arg in nccl_build.nccl_tests_make_argv(
            2, "/n", "/c", "/m", gencode, True, every))  # fmt: skip


def test_a_partial_nccl_tests_build_has_its_own_id() -> None:
    full = nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80")
    assert full == "2.19.6-nccl2.29.7-cuda13.0-sm_80"
    assert nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80", []) == full
    some = nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80", ["sendrecv", "all_reduce"])
    assert some.startswith(full + "-bins") and len(some) == len(full + "-bins") + 8
    assert some == nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80", ["all_reduce", "sendrecv"])
    assert some != nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80", ["all_reduce"])



def test_an_nccl_tests_build_without_mpi_or_with_other_make_arguments_has_its_own_id() -> None:
    """The id named version, NCCL build and binaries only: nccl_tests_mpi false, or other nccl_tests_make_extra_args,
    found the cached build of the old make line and installed it again, its manifest still saying mpi: true."""
    full = nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80")
    assert nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80", [], True, []) == full
    assert nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80", [], False) == full + "-nompi"
    static = nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80", [], True, ["CUDARTLIB=cudart_static"])
    assert static.startswith(full + "-make") and len(static) == len(full + "-make") + 8
    assert static != nccl_build.nccl_tests_build_id("2.19.6", "2.29.7-cuda13.0-sm_80", [], True, ["DEBUG=1"])
    # the order counts (make takes the last of two assignments of one variable)
    assert nccl_build.nccl_tests_build_id("2.19.6", "b", [], True, ["A=1", "A=2"]) != nccl_build.nccl_tests_build_id(
        "2.19.6", "b", [], True, ["A=2", "A=1"]
    )
    # the role passes all of them (roles/nccl_tests/vars/main.yml)
    text = (RESOURCES / "roles" / "nccl_tests" / "vars" / "main.yml").read_text()
    assert "nccl_tests_binaries," in text
    assert "nccl_tests_mpi | bool, nccl_tests_make_extra_args, nccl_tests_mpi_dir)" in text


def test_an_nccl_tests_build_against_another_mpi_has_its_own_id() -> None:
    """nccl-tests links -L$(MPI_HOME)/lib -lmpi: the id named no MPI, so a build against the distribution's MPI
    stood in for one against the OpenMPI under mpi_prefix (review round 41b)."""
    distro = nccl_build.nccl_tests_build_id("2.17.8", "b", [], True, [], "/usr/lib/x86_64-linux-gnu/openmpi")
    prefix = nccl_build.nccl_tests_build_id("2.17.8", "b", [], True, [], "/opt/openmpi-5.0.5")
    assert distro != prefix and prefix.startswith("2.17.8-ncclb-mpi") and len(prefix) == len("2.17.8-ncclb-mpi") + 8
    assert nccl_build.nccl_tests_build_id("2.17.8", "b", [], True, [], "/opt/openmpi-5.0.5/") == prefix
    # without MPI none is linked: one build whatever the MPI
    assert nccl_build.nccl_tests_build_id("2.17.8", "b", [], False, [], "/opt/openmpi-5.0.5") == "2.17.8-ncclb-nompi"
    text = (RESOURCES / "roles" / "nccl_tests" / "vars" / "main.yml").read_text()
    assert "nccl_tests_make_extra_args, nccl_tests_mpi_dir)" in text


#: nccl-tests' real source (../shared/sources), as the lab mirror serves it.
NCCL_TESTS_SOURCE = LOCAL_SOURCES / NCCL_TESTS_TARBALL


@pytest.mark.parametrize("binaries", [["all_reduce", "sendrecv"], ["alltoallv"], []])
def test_nccl_tests_makefile_builds_only_the_binaries_asked_for(tmp_path: Path, binaries: list[str]) -> None:
    """The command line the role runs, given to the real nccl-tests Makefile as a dry run (make -n): the binaries it
    would link are those of the list, or with [] every one its src/Makefile names."""
    if not NCCL_TESTS_SOURCE.is_file():
        pytest.skip(f"{NCCL_TESTS_SOURCE} is absent (../shared is not beside this checkout)")
    subprocess.run(["tar", "-xzf", str(NCCL_TESTS_SOURCE), "-C", str(tmp_path)], check=True, timeout=60)
    (source,) = tmp_path.glob("nccl-tests-*")
    listed = re.search(r"^BIN_FILES_LIST\s*:=\s*(.+)$", (source / "src" / "Makefile").read_text(), re.M)
    assert listed, "nccl-tests' src/Makefile no longer sets BIN_FILES_LIST"
    argv = nccl_build.nccl_tests_make_argv(1, "/opt/nccl/current", str(tmp_path / "no-cuda"), "/usr/lib/openmpi",
                                           "-gencode=arch=compute_80,code=sm_80", True, binaries)  # fmt: skip
    proc = subprocess.run([*argv, "-n"], cwd=source, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    linked = set(re.findall(r"-o \S*/build/(\w+_perf)\b", proc.stdout))
    assert linked == {f"{name}_perf" for name in (binaries or listed.group(1).split())}, proc.stdout[-3000:]
    # The file build_once waits for (roles/nccl_tests: build_once_creates) is one of those the build links.
    assert role_creates(binaries).removeprefix("build/") in linked


def role_creates(binaries: list[str]) -> str:
    """roles/nccl_tests/tasks/main.yml's build_once_creates, rendered with the collection's filter."""
    tasks = yaml.safe_load((RESOURCES / "roles" / "nccl_tests" / "tasks" / "main.yml").read_text())
    (build,) = [task for task in tasks if "build_once_creates" in task.get("vars", {})]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["rdmaforge.cluster.rdmaforge_nccl_tests_binaries"] = nccl_build.nccl_tests_binaries
    return env.from_string(build["vars"]["build_once_creates"]).render(nccl_tests_binaries=binaries)


def test_command_delta_in_seconds() -> None:
    assert nccl_build.delta_seconds("0:17:03.512345") == 1023.5
    assert nccl_build.delta_seconds("1:00:00.000000") == 3600.0


def test_version_code_is_what_ncclgetversion_reports() -> None:
    # nccl.h: NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z through 2.8 and X*10000+Y*100+Z from 2.9 (NCCL 2.8.4 reports
    # 2804; 2.16.5, the release in ../shared/sources, reports 21605; the lab's 2.29.7 reports 22907).
    assert nccl_build.version_code("2.8.4") == 2804
    assert nccl_build.version_code("2.16.5") == 21605
    assert nccl_build.version_code("2.29.7") == 22907
    for bad in ("2.29", "v2.29.7", "2.29.7-1", ""):
        with pytest.raises(ValueError, match="is not MAJOR.MINOR.PATCH"):
            nccl_build.version_code(bad)


# CUDA's binary compatibility rule for cubins (CUDA C++ Programming Guide, "Binary Compatibility"): a cubin for
# compute capability X.y runs on X.z with z >= y only; arch-specific "a" targets run on their own chip only.
@pytest.mark.parametrize(
    ("arch", "cap", "runs"),
    [
        ("sm_80", "8.0", True),  # A100
        ("sm_80", "8.6", True),  # A10/A40
        ("sm_80", "8.9", True),  # L40/L4
        ("sm_80", "9.0", False),  # H100: seed 000's list on Hopper
        ("sm_86", "8.0", False),
        ("sm_80", "7.5", False),
        ("sm_90", "9.0", True),
        ("sm_90a", "9.0", True),
        ("sm_90a", "9.1", False),
        ("sm_100", "10.0", True),  # B200
        ("sm_100", "10.3", True),
        ("sm_103", "10.0", False),
        ("sm_120", "10.0", False),
        ("sm_90", "12.0", False),
        ("sm_90", "nine", False),
    ],
)
def test_arch_runs_on(arch: str, cap: str, runs: bool) -> None:
    assert nccl_build.arch_runs_on(arch, cap) is runs


def test_uncovered_caps_names_each_missing_capability_once() -> None:
    assert nccl_build.uncovered_caps(["sm_80"], ["9.0", "9.0", "8.6"]) == ["9.0"]
    assert nccl_build.uncovered_caps(["sm_80", "sm_90"], ["9.0", "8.6"]) == []
    assert nccl_build.uncovered_caps(["sm_80"], []) == []  # no GPU, or a driver that cannot say: nothing to check


@pytest.mark.parametrize(("cap", "arch"), [("8.0", "sm_80"), ("9.0", "sm_90"), ("10.0", "sm_100"), ("12.0", "sm_120")])
def test_the_suggested_arch_runs_on_its_capability(cap: str, arch: str) -> None:
    # CUDA names the arch of compute capability X.Y sm_XY (A100 8.0 sm_80, H100 9.0 sm_90, B200 10.0 sm_100).
    assert nccl_build.arch_for(cap) == arch
    assert nccl_build.arch_runs_on(nccl_build.arch_for(cap), cap)


def test_current_builds_reads_the_build_of_each_current_link() -> None:
    """A loop of nccl_build_current_argv (GNU find on nodes' <prefix>/current), as limit_check.yml registers it:
    find prints "build TARGET" for a link to a directory and "dangling TARGET" for a link to nothing; an unreachable
    item has no rc, a node without `current` rc 1, a `current` that is no link rc 0 and no output, a skipped item
    neither. Only the first kind runs a build: a link to a deleted build counted as running it."""
    results = [
        {"item": "n1", "rc": 0, "stdout": "build /opt/nccl/2.29.7-cuda13.0-sm_80"},
        {"item": "n2", "unreachable": True, "msg": "Failed to connect to the host via ssh"},
        {"item": "n3", "rc": 1, "stdout": "", "stderr": "find: '/opt/nccl/current': No such file or directory"},
        {"item": "n4", "rc": 0, "stdout": ""},  # a directory, not build_once's link
        {"item": "n5", "skipped": True, "false_condition": "not nccl_build_allow_partial | bool"},
        {"item": "n6", "rc": 0, "stdout": "build 2.28.3-cuda13.0-sm_80"},  # a relative link
        {"item": "n7", "rc": 0, "stdout": "dangling /opt/nccl/2.29.7-cuda13.0-sm_80"},  # the build deleted
    ]
    assert nccl_build.current_builds(results) == ["2.29.7-cuda13.0-sm_80", "2.28.3-cuda13.0-sm_80"]
    assert nccl_build.current_builds([]) == []


def run_arch_check(tmp_path: Path, extra_vars: dict[str, object]) -> subprocess.CompletedProcess[str]:
    """roles/nccl_build/tasks/validate.yml's arch list task, run on its own with -e (a role run without preflight)."""
    tasks = yaml.safe_load((RESOURCES / "roles" / "nccl_build" / "tasks" / "validate.yml").read_text())
    chosen = [t for t in tasks if t["name"] == "Check the NCCL arch list"]
    defaults = yaml.safe_load((RESOURCES / "roles" / "nccl_build" / "defaults" / "main.yml").read_text())
    play = [{"name": "validate", "hosts": "all", "gather_facts": False,
             "vars": {"nccl_build_new_archs": defaults["nccl_build_new_archs"]}, "tasks": chosen}]  # fmt: skip
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(RESOURCES / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "gpu-a,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}", "-e", json.dumps(extra_vars),
            str(playbook)]  # fmt: skip
    return subprocess.run(argv, cwd=RESOURCES, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_role_refuses_an_arch_no_nvcc_builds_on_its_own(tmp_path: Path) -> None:
    refused = run_arch_check(tmp_path, {"nccl_cuda_archs": ["sm_80", "sm_10"]})
    assert refused.returncode == 2, refused.stdout
    assert ('gpu-a: nccl_cuda_archs=["sm_80", "sm_10"] is not allowed; sm_10 is not a GPU arch that nvcc (CUDA 8 '
            "to 13.0) builds") in " ".join(refused.stdout.split()), refused.stdout  # fmt: skip
    assert run_arch_check(tmp_path, {"nccl_cuda_archs": ["sm_90a", "sm_100f"]}).returncode == 0
    declared = run_arch_check(tmp_path, {"nccl_cuda_archs": ["sm_130"], "nccl_build_new_archs": ["sm_130"]})
    assert declared.returncode == 0, declared.stdout
    malformed = run_arch_check(tmp_path, {"nccl_cuda_archs": ["80"]})
    assert malformed.returncode == 2 and "allowed: a non-empty list of sm_NN names" in malformed.stdout


def run_nvcc_probe(tmp_path: Path, gencode: str) -> subprocess.CompletedProcess[str]:
    """detect.yml's two nvcc probe tasks, with this machine's nvcc as the builder's (connection local)."""
    tasks = yaml.safe_load((RESOURCES / "roles" / "nccl_build" / "tasks" / "detect.yml").read_text())
    chosen = [t for t in tasks if t["name"] in ("Ask nvcc whether it builds the archs",
                                                "Stop on an arch this nvcc does not build")]  # fmt: skip
    assert len(chosen) == 2
    play = [{"name": "probe", "hosts": "all", "gather_facts": False, "tasks": chosen,
             "vars": {"nccl_build_builder": "localhost", "nccl_build_cuda_home": str(NVCC.parent.parent),
                      "nccl_build_gencode": gencode, "nccl_build_cuda": "13.0", "nccl_cuda_archs": ["sm_89a"],
                      "nccl_build_codes": {"stdout_lines": ["sm_75", "sm_80"]}}}]  # fmt: skip
    playbook = tmp_path / "probe.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(RESOURCES / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)]  # fmt: skip
    return subprocess.run(argv, cwd=RESOURCES, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.skipif(not NVCC.exists(), reason="no nvcc at /usr/local/cuda on this machine")
def test_the_builder_asks_nvcc_before_the_build(tmp_path: Path) -> None:
    """An nvcc that lists a base arch without its suffixed one (sm_89: no sm_89a on any nvcc) let the build start
    and fail part-way; the builder's real nvcc is asked first (--dryrun compiles nothing)."""
    refused = run_nvcc_probe(tmp_path, "-gencode=arch=compute_89a,code=sm_89a")
    assert refused.returncode == 2, refused.stdout[-3000:]
    said = " ".join(refused.stdout.split())
    assert 'localhost: nccl_cuda_archs=["sm_89a"] cannot be built by nvcc 13.0 there:' in said, said[-3000:]
    assert "Unsupported gpu architecture 'compute_89a'" in said, said[-3000:]
    assert run_nvcc_probe(tmp_path, "-gencode=arch=compute_90a,code=sm_90a").returncode == 0
