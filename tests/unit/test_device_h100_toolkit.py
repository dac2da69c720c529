"""rdmaforge's own playbooks on a real H100 (tests/data/device-h100-toolkit, see its README).

``scripts/device/toolkit-build`` ran preflight.yml, nccl.yml and nccl_tests.yml twice on the GPU machine itself,
then the installed all_reduce_perf; ``playbooks/doctor.yml --check`` followed. Expected values come from the
samples' other witnesses: the settings the script passed (the ``vars:`` line of check.txt), the build manifests,
nccl-tests' command line (``-b 8 -e 128M -f 2``), and ldd's and readlink's answers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import recap, same_run_as_text_and_json

from rdmaforge import doctor

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "device-h100-toolkit"
#: The binaries the toolkit runs (benchmark: all_reduce_perf; pairwise: sendrecv_perf) and seed 000's all_gather.
RUN_BY_THE_TOOLKIT = {"all_reduce_perf", "sendrecv_perf", "all_gather_perf"}


def check_section(name: str) -> str:
    text = (SAMPLES / "check.txt").read_text()
    return text.split(f"== {name}", 1)[1].split("\n== ", 1)[0]


def settings() -> dict:
    line = (SAMPLES / "check.txt").read_text().splitlines()[0]
    return json.loads(line.removeprefix("vars: "))


def manifests() -> dict[str, dict]:
    """The build manifests in the controller cache, by name (nccl, nccl-tests)."""
    text = check_section("controller cache")
    found = [json.loads(m) for m in re.findall(r"^\{$.*?^\}$", text, flags=re.S | re.M)]
    return {m["name"]: m for m in found}


def final_recap(output: str) -> dict[str, int]:
    """gpu-node's counters in the last PLAY RECAP (one ansible-playbook run of three playbooks prints three)."""
    return recap(output[output.rindex("PLAY RECAP") :])["gpu-node"]


def test_first_run_builds_and_installs_and_the_second_changes_nothing() -> None:
    first = (SAMPLES / "run1.txt").read_text()
    second = (SAMPLES / "run2.txt").read_text()
    assert final_recap(first)["failed"] == 0 and final_recap(first)["changed"] > 0
    assert first.count("TASK [rdmaforge.cluster.build_once : Compile]") == 2  # NCCL, then nccl-tests
    assert final_recap(second)["changed"] == 0 and final_recap(second)["failed"] == 0
    assert "build_once : Compile]" not in second, "a re-run compiles nothing"
    assert "\nchanged: " not in second


def test_the_builds_are_what_the_settings_asked_for() -> None:
    asked, built = settings(), manifests()
    nccl, tests = built["nccl"], built["nccl-tests"]
    assert (nccl["version"], nccl["archs"], nccl["only_funcs"]) == (
        asked["nccl_build_version"],
        asked["nccl_cuda_archs"],
        asked["nccl_build_only_funcs"],
    )
    assert (tests["version"], tests["mpi"]) == (asked["nccl_tests_version"], asked["nccl_tests_mpi"])
    assert tests["nccl_build_id"] == nccl["id"], "nccl-tests is built against the cluster's NCCL build"
    for manifest in (nccl, tests):
        assert re.fullmatch(r"[0-9a-f]{64}", manifest["sha256"]) and manifest["builder"] == "gpu-node"


def test_installed_binaries_load_the_clusters_nccl_build() -> None:
    nccl = manifests()["nccl"]
    # ld.so resolves libnccl.so.2 through the registered /opt/nccl/current, which points at this build
    assert "/opt/nccl/current/lib" in check_section("ld.so.conf.d")
    ldd = check_section("ldd all_reduce_perf")
    assert re.search(r"libnccl\.so\.2 => /opt/nccl/current/lib/libnccl\.so\.2 ", ldd), ldd
    resolved = check_section("readlink -f ").split("\n", 1)[1].strip()
    assert resolved == f"/opt/nccl/{nccl['id']}/lib/libnccl.so.{nccl['version']}"
    listed = check_section("binaries (sha256)").splitlines()
    binaries = {Path(line.split()[1]).name for line in listed if line.endswith("_perf")}
    assert RUN_BY_THE_TOOLKIT <= binaries


def test_installed_all_reduce_ran_on_the_gpu_with_that_build() -> None:
    sizes = [8 * 2**i for i in range(25)]  # -b 8 -e 128M -f 2
    text, as_json = same_run_as_text_and_json(SAMPLES / "all_reduce.txt", SAMPLES / "all_reduce.json", sizes)
    assert text.ranks == 1 and text.status == "ok"
    assert text.nccl_version == as_json.nccl_version == manifests()["nccl"]["version"]
    assert (SAMPLES / "all_reduce.txt").read_text().rstrip().endswith("rc=0")


def test_doctor_judges_the_installed_build_on_the_h100() -> None:
    node = json.loads((SAMPLES / "doctor-node.json").read_text())
    diagnosis = doctor.diagnose({"gpu-node": node})
    status = {c.check: (c.status, c.actual) for c in diagnosis.checks}
    assert status["nccl"] == ("ok", manifests()["nccl"]["id"])
    assert status["gpus"] == ("ok", "1")  # doctor_expected_gpus: 1
    # The machine has no iproute2: the NIC list is empty for a named reason, not read as "no NICs".
    assert node["nics"] == [] and node["nics_error"] == "ip not found: install iproute2 (or set ip_path)"
    assert status["mtu"][0] == "not_checked" and status["rdma"][0] == "not_checked"  # fabric tcp
    rendered = doctor.render(diagnosis)
    assert "healthy: 1 node(s)" in rendered and "not checked" in rendered
    assert rendered in (SAMPLES / "doctor-check.txt").read_text(), "the table the GPU machine printed"
