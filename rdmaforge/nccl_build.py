"""Building NCCL and nccl-tests once per cluster: arch validation, build identity, make command lines.

Used by the nccl_build and nccl_tests roles (through filter_plugins/rdmaforge_build.py) and by the tests.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rdmaforge.plain_data import show

#: An arch name as nvcc takes it after ``code=``: sm_NN, sm_90a (one chip's features), sm_100f (one family's).
_ARCH = re.compile(r"^sm_([0-9]{2,3})([af]?)$")

#: Every GPU arch some nvcc from CUDA 8 (the oldest NCCL 2 builds with) to CUDA 13.0 builds: its
#: `--list-gpu-code`, plus the `a` and `f` variants it builds without listing them (`nvcc -gencode
#: arch=compute_90a,code=sm_90a` builds on CUDA 13.0; compute_80a is "Unsupported gpu architecture"). sm_101 is
#: CUDA 12.8's name of CUDA 13's sm_110. Preflight refuses a name outside it (and nccl_build_new_archs) before any
#: node is touched: a typo or an arch nvcc never had failed only at the build, after every other role had run.
CUDA_ARCHS = (
    "sm_30 sm_32 sm_35 sm_37 sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 "
    "sm_90 sm_90a sm_100 sm_100a sm_100f sm_101 sm_101a sm_101f sm_103 sm_103a sm_103f sm_110 sm_110a sm_110f "
    "sm_120 sm_120a sm_120f sm_121 sm_121a sm_121f"
).split()


class ArchError(ValueError):
    """An arch name the detected nvcc cannot build, or that is not an arch name at all."""


def parse_nvcc_version(text: str) -> str:
    """'13.0' from `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    match = re.search(r"release ([0-9]+\.[0-9]+)", text)
    if not match:
        raise ValueError(f"cannot read the CUDA release from nvcc --version output: {text.strip()[:200]!r}")
    return match.group(1)


def arch_list_problem(archs: object, new_archs: object = ()) -> str | None:
    """Why ``archs`` (nccl_cuda_archs) cannot be built by any nvcc, or None: not a non-empty list of arch names, or
    a name neither in :data:`CUDA_ARCHS` nor in ``new_archs`` (nccl_build_new_archs: archs newer than the table,
    which the builder's nvcc still judges). The text follows "nccl_cuda_archs=... is not allowed; "."""
    known = [*CUDA_ARCHS, *(a for a in (new_archs if isinstance(new_archs, list) else []) if isinstance(a, str))]
    if not (isinstance(archs, list) and archs and all(isinstance(a, str) and _ARCH.match(a) for a in archs)):
        return "allowed: a non-empty list of sm_NN names, such as ['sm_80', 'sm_90']"
    unknown = [a for a in dict.fromkeys(archs) if a not in known]
    if not unknown:
        return None
    return (f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a GPU arch that nvcc (CUDA 8 to 13.0) "
            f"builds; allowed: {', '.join(CUDA_ARCHS)}, or an arch newer than these also listed in "
            "nccl_build_new_archs")  # fmt: skip


def nvcc_gencode(archs: Sequence[str], supported: Sequence[str], host: str = "", cuda: str = "") -> str:
    """NVCC_GENCODE for the given archs ("sm_80" -> "-gencode=arch=compute_80,code=sm_80").

    ``supported`` is `nvcc --list-gpu-code` of the builder: CUDA 13 dropped everything below sm_75, so an arch
    list that worked with CUDA 12 can fail here; the error says which archs and what this nvcc can build.
    """
    if not archs:
        raise ArchError(f"{host}: nccl_cuda_archs is empty; allowed: one or more of {', '.join(supported)}")
    malformed = [a for a in archs if not _ARCH.match(str(a))]
    if malformed:
        raise ArchError(f"{host}: nccl_cuda_archs {malformed} are not arch names; allowed form: sm_<NN>, "
                        f"one of {', '.join(supported)}")  # fmt: skip
    unsupported = [a for a in archs if not _buildable(a, supported)]
    if unsupported:
        raise ArchError(f"{host}: nccl_cuda_archs {unsupported} cannot be built by nvcc {cuda or '(detected)'}; "
                        f"allowed: {', '.join(supported)}")  # fmt: skip
    parts = []
    for arch in dict.fromkeys(archs):
        number = arch.removeprefix("sm_")
        parts.append(f"-gencode=arch=compute_{number},code={arch}")
    return " ".join(parts)


def _buildable(arch: str, supported: Sequence[str]) -> bool:
    """Whether an nvcc whose `--list-gpu-code` is ``supported`` builds ``arch``: that list names no sm_90a or
    sm_100f, which nvcc builds where it lists their base arch (a suffix nvcc lacks is refused by preflight)."""
    parts = _ARCH.match(arch)
    return arch in supported or bool(parts and parts.group(2) and f"sm_{parts.group(1)}" in supported)


def arch_runs_on(arch: str, cap: str) -> bool:
    """Whether kernels compiled for ``arch`` (``code=sm_NN``, no PTX) load on a GPU of compute capability ``cap``.

    CUDA's rule for cubins: same major version, minor version the same or lower (sm_80 runs on 8.0, 8.6 and
    8.9, never on 9.0). ``sm_90a``-style archs use features of exactly one chip and run only there.
    """
    parts, wanted = _ARCH.match(arch), re.fullmatch(r"(\d+)\.(\d+)", cap)
    if not parts or not wanted:
        return False
    number, suffix = parts.group(1), parts.group(2)  # sm_90a: "90", "a"; the last digit is the minor version
    major, minor = int(number[:-1]), int(number[-1])
    cap_major, cap_minor = int(wanted.group(1)), int(wanted.group(2))
    if suffix == "a":
        return (major, minor) == (cap_major, cap_minor)
    return major == cap_major and minor <= cap_minor


def uncovered_caps(archs: Sequence[str], caps: Sequence[str]) -> list[str]:
    """The compute capabilities among ``caps`` that no arch of ``archs`` runs on, each once, in order."""
    return [cap for cap in dict.fromkeys(str(c) for c in caps) if not any(arch_runs_on(str(a), cap) for a in archs)]


def arch_for(cap: str) -> str:
    """The arch to build for GPUs of compute capability ``cap`` ("9.0" -> "sm_90"): the one the messages suggest."""
    return "sm_" + str(cap).strip().replace(".", "")


def build_id(version: str, cuda: str, archs: Sequence[str], only_funcs: str = "") -> str:
    """Names a build by what makes it different: NCCL version, CUDA release, archs (and a partial function set).

    Nodes with different builds can hang NCCL, so the id is what every node must agree on.
    """
    ident = f"{version}-cuda{cuda}-{'_'.join(sorted(dict.fromkeys(archs)))}"
    if only_funcs.strip():
        ident += "-funcs" + hashlib.sha256(only_funcs.strip().encode()).hexdigest()[:8]
    return ident


def version_code(version: str) -> int:
    """The number ``ncclGetVersion`` reports for a release such as 2.29.7 (nccl.h's NCCL_VERSION(X, Y, Z): X*1000 +
    Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9 on). ValueError for anything but X.Y.Z."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", str(version))
    if not match:
        raise ValueError(f"NCCL version {version!r} is not MAJOR.MINOR.PATCH (e.g. 2.29.7)")
    major, minor, patch = (int(part) for part in match.groups())
    if major <= 2 and minor <= 8:
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch


def nccl_make_argv(jobs: int, gencode: str, cuda_home: str, only_funcs: str = "") -> list[str]:
    """Seed 000's `make -j src.build NVCC_GENCODE=...`, with CUDA_HOME explicit and ONLY_FUNCS passed through."""
    argv = ["make", f"-j{jobs}", "src.build", f"NVCC_GENCODE={gencode}", f"CUDA_HOME={cuda_home}"]
    if only_funcs.strip():
        argv.append(f"ONLY_FUNCS={only_funcs.strip()}")
    return argv


#: A name nccl_tests_binaries may hold: a collective as nccl-tests' src/Makefile lists it (BIN_FILES_LIST), which
#: builds <name>_perf. Letters, digits and underscores only: the list is passed to make as one variable.
NCCL_TESTS_BINARY = re.compile(r"[a-z][a-z0-9_]*")


def nccl_tests_binaries(binaries: Sequence[str] | None) -> list[str]:
    """The binaries to build, each once, sorted (their order changes nothing); empty for every binary of the
    release."""
    return sorted(dict.fromkeys(str(name).strip() for name in binaries or ()))


def nccl_tests_make_argv(jobs: int, nccl_home: str, cuda_home: str, mpi_home: str, gencode: str,
                         mpi: bool = True, binaries: Sequence[str] | None = None) -> list[str]:  # fmt: skip
    """Seed 000's `make MPI=1 NCCL_HOME=...`, with CUDA_HOME, MPI_HOME and the same archs as NCCL; with
    ``binaries``, only those (nccl-tests' BIN_FILES_LIST, e.g. all_reduce sendrecv), not the release's every one."""
    argv = ["make", f"-j{jobs}", f"NCCL_HOME={nccl_home}", f"CUDA_HOME={cuda_home}", f"NVCC_GENCODE={gencode}"]
    if mpi:
        argv += ["MPI=1", f"MPI_HOME={mpi_home}"]
    names = nccl_tests_binaries(binaries)
    if names:
        argv.append("BIN_FILES_LIST=" + " ".join(names))
    return argv


def nccl_tests_build_id(version: str, nccl_build_id: str, binaries: Sequence[str] | None = None, mpi: bool = True,
                        extra_args: Sequence[str] | None = None, mpi_home: str = "") -> str:  # fmt: skip
    """Names an nccl-tests build by what its make line differs in: its version, the NCCL build it links, a partial
    binary set (a build of some binaries must not stand in for one of all), a build without MPI or the MPI it links
    (``mpi_home``, MPI_HOME: the binaries link its libmpi), and the extra make arguments (in order: make takes the
    last of two assignments). A change to any of them is another build, never the cached one installed again.
    NCCL_HOME is not in it: nccl_build_id names the NCCL there, and each node's prefix root may differ."""
    ident = f"{version}-nccl{nccl_build_id}"
    names = nccl_tests_binaries(binaries)
    if names:
        ident += "-bins" + hashlib.sha256(" ".join(names).encode()).hexdigest()[:8]
    if not mpi:
        ident += "-nompi"
    elif str(mpi_home or "").strip():
        home = posixpath.normpath(str(mpi_home).strip())  # /opt/ompi/ is /opt/ompi: the same build
        ident += "-mpi" + hashlib.sha256(home.encode()).hexdigest()[:8]
    if extra_args:
        ident += "-make" + hashlib.sha256("\0".join(str(a) for a in extra_args).encode()).hexdigest()[:8]
    return ident


#: The make variables nccl_tests_make_argv sets -> the inventory variable that decides each: the same name in
#: nccl_tests_make_extra_args (given after them) would override it, unseen by the build id and the manifest.
NCCL_TESTS_MAKE_VARIABLES = {
    "NCCL_HOME": "nccl_tests_nccl_home",
    "CUDA_HOME": "nccl_build_cuda_home",
    "NVCC_GENCODE": "nccl_cuda_archs",
    "MPI": "nccl_tests_mpi",
    "MPI_HOME": "nccl_tests_mpi_home",
    "BIN_FILES_LIST": "nccl_tests_binaries",
}


def builder_of(groups: Mapping[str, Sequence[str]], live_hosts: Sequence[str]) -> str:
    """The node that builds NCCL and nccl-tests for a play: the first node of group ``nccl_builder`` still in the
    play, else the first by name of ``live_hosts`` (Ansible's ansible_play_hosts: a node that failed or went
    unreachable earlier in the run has left it, and a run_once task delegated to it would end the play for every
    node). Preflight checks the free space a build needs on the same node. '' when no host is live."""
    live = [str(host) for host in live_hosts]
    designated = [str(host) for host in groups.get("nccl_builder") or () if str(host) in live]
    return designated[0] if designated else min(live, default="")


def delta_seconds(delta: str) -> float:
    """Seconds from Ansible's command 'delta' ("0:17:03.512345")."""
    hours, minutes, seconds = delta.split(":")
    return round(int(hours) * 3600 + int(minutes) * 60 + float(seconds), 1)


def current_builds(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """The builds nodes run, from limit_check.yml's reads of their ``<prefix>/current`` (a loop's ``results`` of
    nccl_build_current_argv, a ``find`` that prints ``build TARGET`` for a link to a directory): the name of each
    link's target, in order. Any other result (a node not read, without a build, or whose link leads nowhere) gives
    none, so the list is shorter than ``results`` unless every node was read on a build."""
    builds = []
    for result in results:
        build = _current_build(result)
        if build is not None:
            builds.append(build)
    return builds


def _current_build(result: Mapping[str, Any]) -> str | None:
    """The build one read of nccl_build_current_argv names (its first line, ``build TARGET``), else None. The lines
    after it are the build's manifest (``cat`` of its .rdmaforge-build.json), when it has one."""
    lines = str(result.get("stdout") or "").strip().split("\n", 1)
    if result.get("rc") != 0 or not lines[0].startswith("build "):
        return None
    return posixpath.basename(lines[0].removeprefix("build ").strip().rstrip("/")) or None


def source_difference(manifest: Mapping[str, Any], kind: str, pin: str, url: str = "", ref: str = "") -> str:
    """How a build's recorded source (its manifest's ``source``) differs from ``kind`` (nccl_build_source: git or
    tarball) and ``pin`` (the commit, or the tarball's sha256); '' when it does not, or when either side names no
    pin (a manifest from before sources were recorded). The build id names release, CUDA and archs, not the source:
    a moved tag rebuilt under the same id is told apart only by this. An unpinned git source given with ``url``
    and ``ref`` is the same source only at the same URL and ref, as build_once takes a cached build (main.yml): a
    fork or another branch built under the same id is another build."""
    recorded = manifest.get("source")
    if not isinstance(recorded, Mapping):
        return ""
    kind = kind or "git"
    if recorded.get("kind") not in (None, kind):
        return f"built from a {recorded.get('kind')} source, the cluster's (nccl_build_source) is {kind}"
    pin = str(pin or "").strip().lower()
    built = str(recorded.get("commit" if kind == "git" else "sha256") or "").strip().lower()
    if pin and built and built != pin:
        what = "commit" if kind == "git" else "a tarball of sha256"
        name = "nccl_build_git_commit" if kind == "git" else "nccl_build_tarball_sha256"
        return f"built from {what} {built[:12]}, the cluster pins {pin[:12]} ({name})"
    if not pin and kind == "git" and (url or ref):
        was = (str(recorded.get("url") or ""), str(recorded.get("ref") or ""))
        if was != (str(url or ""), str(ref or "")):
            return (f"built from {was[0] or '?'} at {was[1] or '?'}, the cluster's unpinned source is {url} at {ref} "
                    "(nccl_build_git_url, nccl_build_git_ref)")  # fmt: skip
    return ""


def other_sources(results: Sequence[Mapping[str, Any]], kind: str, pin: str) -> list[str]:
    """``NODE: BUILD built from commit ..., the cluster pins ...`` for each node of limit_check.yml's reads whose
    build's manifest records another source than the pin: such a node is not on the target whatever its build's
    name says. A node whose manifest is missing or damaged is named too (its source cannot be told) when a pin is
    set; nodes not on a build are left to the build comparison."""
    out: list[str] = []
    if not str(kind or "").strip() and not str(pin or "").strip():
        return out  # the caller names no source (a rollback): only the builds' names are compared
    for result in results:
        build = _current_build(result)
        if build is None:
            continue
        text = str(result.get("stdout") or "").strip().split("\n", 1)
        manifest, damaged = read_manifest(text[1] if len(text) > 1 else "")
        if str(pin or "").strip() and (damaged or not manifest):
            out.append(f"{result.get('item')}: {build} with {damaged or 'no manifest'}, so its source cannot be "
                       "told from the pin")  # fmt: skip
            continue
        differs = source_difference(manifest, kind, pin)
        if differs:
            out.append(f"{result.get('item')}: {build} {differs}")
    return out


#: The manifest build_once writes beside each installed build (and into the controller's cache).
MANIFEST_NAME = ".rdmaforge-build.json"


#: The stat reads role build_once's link_owners.yml makes of each link: the link itself, where it leads, and
#: rdmaforge's build record there.
LINK_READS: tuple[dict[str, Any], ...] = (
    {"read": "link", "suffix": "", "follow": False},
    {"read": "target", "suffix": "", "follow": True},
    {"read": "record", "suffix": f"/{MANIFEST_NAME}", "follow": True},
)


def link_reads(names: Sequence[str]) -> list[list[Any]]:
    """The loop of link_owners.yml's stat task: [link name, read] for each link of ``names`` and each of LINK_READS."""
    return [[str(name), dict(read)] for name in names for read in LINK_READS]


def link_owners(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Whose each ``current``/``previous`` link under a prefix root is, from link_owners.yml's stat loop (``item``:
    [link name, one of LINK_READS]): ``ours`` when it leads to a build rdmaforge installed (a directory holding its
    MANIFEST_NAME), which reset may remove and install may replace; ``foreign`` when it leads to a directory without
    one (the user's own NCCL), which install refuses to take over and reset leaves. A link that leads nowhere is
    neither. ``target`` is the link's text."""
    reads: dict[str, dict[str, Mapping[str, Any]]] = {}
    for result in results:
        name, how = result["item"]
        reads.setdefault(str(name), {})[how["read"]] = result.get("stat") or {}
    owners = {}
    for name, read in reads.items():
        is_link = bool(read.get("link", {}).get("islnk"))
        recorded = bool(read.get("record", {}).get("isreg"))
        owners[name] = {
            "target": read.get("link", {}).get("lnk_target") if is_link else None,
            "ours": is_link and recorded,
            "foreign": is_link and bool(read.get("target", {}).get("isdir")) and not recorded,
        }
    return owners


def read_manifest(text: object, name: str = MANIFEST_NAME) -> tuple[dict[str, Any], str | None]:
    """A build manifest from its file's text (a mapping already parsed is taken as is): ``({...}, None)``, or
    ``({}, why)`` when it is not the JSON object build_once writes (cut short, another JSON value, archs that are
    no list of names): a damaged file is a reason to install again, never a crash. ``({}, None)`` for no file."""
    manifest = text
    if manifest is None or manifest == "":
        return {}, None
    if isinstance(manifest, (str, bytes)):
        try:
            manifest = json.loads(manifest)
        except (ValueError, RecursionError) as exc:
            return {}, f"{name} is not JSON ({exc.__class__.__name__}: {str(exc)[:80]}): the install is damaged"
    if not isinstance(manifest, Mapping):
        return {}, f"{name} holds {show(manifest)[:60]}, not a JSON object: the install is damaged"
    archs = manifest.get("archs")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        return {}, f"{name} has archs {show(archs)[:60]}, not a list of names: the install is damaged"
    return dict(manifest), None


def manifest_of(text: object) -> dict[str, Any]:
    """read_manifest's mapping alone ({} for no file or a damaged one): what build_once's install compares the
    package's sha256 and recorded source with, so a damaged manifest installs the build again."""
    return read_manifest(text)[0]
