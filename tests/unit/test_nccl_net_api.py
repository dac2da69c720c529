"""Plugin/NCCL API pairing from binaries. The loader names are checked on shared objects compiled here from
C that holds the literal names NCCL's loader dlsyms (2.16.5: v6, v5, v4 in src/net.cc; 2.29.7: v11..v6 in
src/plugin/net/net_v*.cc) - stand-ins for a CUDA build this machine cannot link; the lab test
(tests/integration/test_nccl_plugin_api.py) reads the real libnccl built on the lab."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rdmaforge.parsers.nccl_net_api import (
    compatibility,
    format_versions,
    library_version,
    loader_versions,
    scan_library,
    version_in_range,
)
from tests.unit.adhoc import PY38, run_module

CC = shutil.which("cc") or shutil.which("gcc")


def fake_nccl(tmp_path: Path, versions: list[int], version: str) -> Path:
    """A shared object standing in for libnccl: the loader's symbol names, a log line and the init banner."""
    names = ", ".join(f'"ncclNetPlugin_v{v}"' for v in versions)
    source = tmp_path / "fake_nccl.c"
    source.write_text(
        "#include <stdio.h>\n"
        f"const char *loader_names[] = {{{names}}};\n"
        'const char *log_line = "NET/Plugin: Failed to find ncclNetPlugin_v3 symbol.";\n'
        f'const char *banner = "NCCL version {version}+cuda13.0";\n'
        "int fake_nccl_init(void) { return puts(loader_names[0]) + puts(log_line) + puts(banner); }\n"
    )
    library = tmp_path / "libnccl-fake.so.2"
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_loader_versions_from_a_compiled_library(tmp_path):
    library = fake_nccl(tmp_path, [11, 10, 9, 8, 7, 6], "2.29.7")
    data = library.read_bytes()
    # v3 appears only inside a log sentence: not a name the loader looks up.
    assert loader_versions(data) == [6, 7, 8, 9, 10, 11]
    assert library_version(data) == "2.29.7"
    assert scan_library(str(library)) == ([6, 7, 8, 9, 10, 11], "2.29.7")


def test_scan_finds_names_across_chunk_boundaries(tmp_path, monkeypatch):
    import rdmaforge.parsers.nccl_net_api as api

    monkeypatch.setattr(api, "_CHUNK", 16)
    blob = tmp_path / "blob"
    blob.write_bytes(b"\x00" * 13 + b"\x00ncclNetPlugin_v10\x00" + b"x" * 29 + b"\x00ncclNetPlugin_v4\x00")
    assert api.scan_library(str(blob)) == ([4, 10], None)


@pytest.mark.parametrize(
    ("nccl", "plugin", "common", "chosen"),
    [
        ([6, 7, 8, 9, 10, 11], [2, 3, 4, 5, 6], [6], 6),  # NCCL 2.29.7 with AIACC 2.0.1 (issue 16)
        ([4, 5, 6], [2, 3, 4, 5, 6], [4, 5, 6], 6),  # NCCL 2.16.5 with AIACC 2.0.1
        ([6, 7, 8, 9, 10, 11], [2, 3, 4, 5], [], None),
    ],
)
def test_compatibility_picks_the_newest_common_version(nccl, plugin, common, chosen):
    result = compatibility(nccl, plugin)
    assert result["common"] == common
    assert result["chosen"] == chosen


@pytest.mark.parametrize(
    ("version", "inside"),
    [("2.8.3", True), ("2.16.5", True), ("2.16", True), ("2.7.8", False), ("2.17.1", False), ("2.29.7", False)],
)
def test_documented_range_by_its_own_precision(version, inside):
    assert version_in_range(version, "2.8", "2.16") is inside


def test_format_versions():
    assert format_versions([2, 3]) == "v2, v3"
    assert format_versions([]) == "none"


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_module_for_real_and_its_errors(tmp_path):
    library = fake_nccl(tmp_path, [6, 5, 4], "2.16.5")
    run = run_module("nccl_net_api", {"path": str(library), "plugin_versions": [2, 3, 4, 5, 6]}, "--check")
    assert run.rc == 0, run.result
    assert (run.result["nccl"], run.result["chosen"], run.result["nccl_version"]) == ([4, 5, 6], 6, "2.16.5")
    assert run.result["changed"] is False
    missing = run_module("nccl_net_api", {"path": str(tmp_path / "nope.so")})
    assert missing.rc != 0
    assert "is not a file: install NCCL first" in missing.result["msg"]
    other = tmp_path / "not-nccl.so"
    other.write_bytes(b"\x7fELF just some library")
    run = run_module("nccl_net_api", {"path": str(other)})
    assert run.rc != 0
    assert "holds no ncclNetPlugin_vN name" in run.result["msg"]


@pytest.mark.skipif(CC is None or not PY38.exists(), reason="needs a C compiler and Python 3.8")
def test_module_runs_with_python38_on_the_target(tmp_path):
    library = fake_nccl(tmp_path, [11, 10, 9, 8, 7, 6], "2.29.7")
    run = run_module("nccl_net_api", {"path": str(library), "plugin_versions": [5]}, python=PY38)
    assert run.rc == 0, run.result
    assert run.result["common"] == []
    assert run.result["chosen"] is None
