"""`rdmaforge verify`: testinfra's JUnit XML read back per node, its exit codes, and one real run of the suite
against this machine (plus a node whose SSH port is closed)."""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from rdmaforge import infra_report
from rdmaforge.cli import main
from rdmaforge.commands import verify
from rdmaforge.runner.exit_codes import ExitCode

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="7">
<testcase classname="tests.infra.test_node_state" name="test_mpirun_on_non_interactive_path[ansible://node1]"/>
<testcase classname="tests.infra.test_node_state" name="test_mpirun_on_non_interactive_path[ansible://node-10]"/>
<testcase classname="tests.infra.test_node_state" name="test_nccl_conf_holds_the_profile[ansible://node1]"/>
<testcase classname="tests.infra.test_node_state" name="test_nccl_conf_holds_the_profile[ansible://node-10]">
  <failure message="assert (False)&#10; +  where False = &lt;file /etc/nccl.conf&gt;.exists">trace</failure></testcase>
<testcase classname="tests.infra.test_node_state" name="test_erdma_repository_and_keyring[ansible://node-10-x]">
  <skipped type="pytest.skip" message="fabric tcp: the erdma repository is not used">s</skipped></testcase>
<testcase classname="tests.infra.test_node_state" name="test_plugin[ansible://node1]">
  <error message="failed on setup with &quot;RuntimeError: boom&quot;">e</error></testcase>
<testcase classname="tests.infra" name="tests.infra.test_new"><error message="collection failure">c</error></testcase>
</testsuite></testsuites>
"""


@pytest.fixture
def junit_file(tmp_path: Path) -> Path:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    return path


def test_junit_is_read_back_per_node(junit_file: Path) -> None:
    outcomes = infra_report.parse_junit(junit_file, ["node1", "node-10", "node-10-x"])
    assert [(o.test, o.host, o.status) for o in outcomes] == [
        ("test_mpirun_on_non_interactive_path", "node1", "passed"),
        ("test_mpirun_on_non_interactive_path", "node-10", "passed"),
        ("test_nccl_conf_holds_the_profile", "node1", "passed"),
        ("test_nccl_conf_holds_the_profile", "node-10", "failed"),
        ("test_erdma_repository_and_keyring", "node-10-x", "skipped"),
        ("test_plugin", "node1", "error"),
        ("tests.infra.test_new", None, "error"),
    ]
    nodes = infra_report.by_node(outcomes)
    assert (nodes["node1"].passed, nodes["node1"].failed, nodes["node-10"].failed, nodes["node-10-x"].skipped) == (
        2, 1, 1, 1,
    )  # fmt: skip


def test_table_and_exit_codes(junit_file: Path) -> None:
    outcomes = infra_report.parse_junit(junit_file, ["node1", "node-10", "node-10-x"])
    table = infra_report.render(outcomes, ["node7"])
    head = table.split("\n\n")[0].splitlines()[2:]
    rows = {line.split()[0]: line.split(maxsplit=4)[1:] for line in head}
    # node-10-x ran one test, and it was skipped: nothing was judged there, so it is not a pass
    assert rows == {"node1": ["2", "1", "0", "FAIL"], "node-10": ["1", "1", "0", "FAIL"],
                    "node-10-x": ["0", "0", "1", "not judged"], "(suite)": ["0", "1", "0", "FAIL"],
                    "node7": ["-", "-", "-", "UNREACHABLE"]}  # fmt: skip
    assert (
        "  node-10: test_nccl_conf_holds_the_profile: assert (False) + where False = <file /etc/nccl.conf>.exists"
        in table
    )
    # what the skipped column counts is named, with the reason from the JUnit file
    assert table.endswith(
        "skipped (not judged):\n"
        "  test_erdma_repository_and_keyring on node-10-x: fabric tcp: the erdma repository is not used"
    ), table
    assert infra_report.exit_code(outcomes, ["node7"], 1) == ExitCode.UNREACHABLE
    assert infra_report.exit_code(outcomes, [], 1) == ExitCode.HOST_FAILED
    passed = [o for o in outcomes if o.status == "passed"]
    assert infra_report.exit_code(passed, [], 0) == ExitCode.OK
    # a skip beside passes on the same node leaves it a pass; a node with skips only is incomplete (exit 5)
    node1_skip = infra_report.TestOutcome("test_memlock", "node1", "skipped", "accepted by the inventory")
    assert infra_report.exit_code([*passed, node1_skip], [], 0) == ExitCode.OK
    only_skipped = [o for o in outcomes if o.status in ("passed", "skipped")]
    assert infra_report.exit_code(only_skipped, [], 0) == ExitCode.INCOMPLETE
    assert infra_report.exit_code([], [], 5) == ExitCode.ERROR  # no test collected, and no node to run them on
    # A -k that selects no test on any node: each node has no test result, not judged (README: exit 5, never 0)
    assert infra_report.exit_code([], [], 5, ["node1", "node2"], keyword=True) == ExitCode.INCOMPLETE
    assert infra_report.exit_code([], [], 4, ["node1", "node2"], keyword=True) == ExitCode.ERROR  # a usage error
    # No -k: a suite with no test to collect is broken or missing, which verify could not run (1), never "not judged"
    assert infra_report.exit_code([], [], 5, ["node1", "node2"]) == ExitCode.ERROR
    assert infra_report.exit_code(passed, [], 2) == ExitCode.ERROR  # pytest interrupted or a usage error


def test_a_node_the_suite_ran_on_without_any_result_is_not_judged(junit_file: Path) -> None:
    """`verify -k <a node's name>`, or tests collected for some hosts only: a node of the run with no result in the
    JUnit file proved nothing. Before, the table left it out and the exit code was 0."""
    hosts = ["node1", "node2"]
    read = infra_report.parse_junit(junit_file, ["node1", "node-10", "node-10-x"])
    outcomes = [o for o in read if o.status == "passed" and o.host == "node1"]
    assert infra_report.exit_code(outcomes, [], 0) == ExitCode.OK  # what the old call saw
    assert infra_report.exit_code(outcomes, [], 0, hosts) == ExitCode.INCOMPLETE
    table = infra_report.render(outcomes, [], hosts)
    rows = {line.split()[0]: line.split()[1:] for line in table.split("\n\n")[0].splitlines()[2:]}
    assert rows == {"node1": ["2", "0", "0", "pass"], "node2": ["0", "0", "0", "not", "judged"]}, table
    assert table.endswith("no test result (not judged): node2"), table
    (silent,) = [c for c in verify.cases(outcomes, [], hosts) if c.name == "node2"]
    assert silent.outcome == "skipped" and "not judged" in silent.message


def test_the_node_the_suite_recorded_wins_over_the_test_id(tmp_path: Path) -> None:
    """Nodes ``node`` and ``node-1``, and a test of node ``node`` with a parameter ``1``: its id,
    ``test_x[ansible://node-1]``, reads as node-1's. The node the suite records (rdmaforge_node) decides; a recorded
    name that is none of the run's nodes is not believed (the id is read then)."""

    def case(test_id: str, node: str | None) -> str:
        recorded = f'<properties><property name="rdmaforge_node" value="{node}"/></properties>' if node else ""
        return f'<testcase classname="tests.infra.t" name="{test_id}">{recorded}</testcase>'

    path = tmp_path / "junit.xml"
    path.write_text("<testsuites><testsuite>" + case("test_x[ansible://node-1]", "node")
                    + case("test_x[ansible://node-1-2]", "node-1") + case("test_y[ansible://node-1]", None)
                    + case("test_z[ansible://node-1]", "elsewhere") + "</testsuite></testsuites>")  # fmt: skip
    read = infra_report.parse_junit(path, ["node", "node-1"])
    assert [(o.test, o.host) for o in read] == [
        ("test_x", "node"), ("test_x", "node-1"), ("test_y", "node-1"), ("test_z", "node-1")
    ]  # fmt: skip


def test_host_ids_without_a_host_list() -> None:
    assert infra_report.host_of("ansible://node3", []) == "node3"
    assert infra_report.host_of("ansible://a-ansible://b", ["b"]) == "b"
    assert infra_report.host_of("1-2", ["node1"]) is None


def test_pytest_command_line(tmp_path: Path) -> None:
    argv = verify.pytest_argv(["node1", "node2"], tmp_path / "hosts.yml", tmp_path / "j.xml", "nccl")
    assert argv[1:4] == ["-m", "pytest", str(verify.SUITE)]
    assert "--hosts=ansible://node1,ansible://node2" in argv and f"--junitxml={tmp_path / 'j.xml'}" in argv
    assert f"--ansible-inventory={(tmp_path / 'hosts.yml').resolve()}" in argv and argv[-2:] == ["-k", "nccl"]


def test_verify_for_real_against_this_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")  # fake hosts' facts stay out of .cache/facts
    hosts = {
        "localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                      "rdmaforge_fabric": "tcp"},
        "ghost": {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody", "rdmaforge_fabric": "tcp"},
    }  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    runs = tmp_path / "runs"
    argv = ["verify", "-i", str(inventory), "--runs-dir", str(runs), "-k", "memlock or erdma_repository"]
    code = main([*argv, "--junit", str(tmp_path / "ci.xml")])
    out = capsys.readouterr().out
    assert code == ExitCode.UNREACHABLE, out
    assert "testinfra suite on 1 node(s); unreachable: ghost" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(("localhost", "ghost"))}
    # On tcp the erdma repository and the login's memlock (no RDMA) are skipped.
    assert rows["ghost"] == ["-", "-", "-", "UNREACHABLE"] and rows["localhost"][2] == "2"
    assert "skipped (not judged):\n  test_" in out  # the two skips are named below the table
    run_dir = next(runs.iterdir())
    assert (run_dir / "verify" / "junit.xml").is_file() and (run_dir / "verify" / "pytest.log").is_file()
    recap = json.loads((run_dir / "recap.json").read_text())
    assert recap["nodes"]["localhost"]["skipped"] == 2 and recap["nodes"]["localhost"]["result"] == rows["localhost"][3]
    assert recap["nodes"]["ghost"]["result"] == "unreachable" and recap["pytest_rc"] == 0
    names = [c.get("name") for c in ET.parse(tmp_path / "ci.xml").getroot().iter("testcase")]
    assert "test_erdma_repository_and_keyring[localhost]" in names and "ghost" in names
    # The suite records each test's node in the results, which verify reads before the test id.
    recorded = {(c.get("name"), p.get("value")) for c in ET.parse(run_dir / "verify" / "junit.xml").iter("testcase")
                for p in c.iter("property") if p.get("name") == infra_report.NODE_PROPERTY}  # fmt: skip
    assert recorded and {node for _, node in recorded} == {"localhost"}, recorded


def test_verify_json_with_every_node_unreachable_names_them_and_runs_no_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review round 25c: with no node reachable, --json said pytest_rc 0 (the suite never ran) and listed no node."""
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")
    hosts = {"ghost": {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody",
                       "rdmaforge_fabric": "tcp"}}  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    code = main(["verify", "-i", str(inventory), "--runs-dir", str(tmp_path / "runs"), "--json"])
    recap = json.loads(capsys.readouterr().out)
    assert code == ExitCode.UNREACHABLE == recap["exit_code"]
    assert recap["pytest_rc"] is None and recap["unreachable"] == ["ghost"]
    assert recap["nodes"] == {"ghost": {"passed": 0, "failed": 0, "skipped": 0, "result": "unreachable"}}


def this_machine_on_tcp(path: Path) -> Path:
    """An inventory whose one node, localhost, is this machine (connection local) on the tcp profile."""
    hosts = {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                           "rdmaforge_fabric": "tcp"}}  # fmt: skip
    path.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    return path


def test_verify_of_a_node_whose_every_test_is_skipped_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erdma repository test is skipped on a tcp node: selected alone, nothing is judged there, and verify
    says so (exit 5, "not judged") instead of printing pass."""
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")
    inventory = this_machine_on_tcp(tmp_path / "hosts.yml")
    runs = tmp_path / "runs"
    code = main(["verify", "-i", str(inventory), "--runs-dir", str(runs), "-k", "erdma_repository"])
    out = capsys.readouterr().out
    assert code == ExitCode.INCOMPLETE, out
    row = next(line for line in out.splitlines() if line.startswith("localhost"))
    assert row.split() == ["localhost", "0", "0", "1", "not", "judged"], out
    assert "  test_erdma_repository_and_keyring on localhost: " in out, out
    recap = json.loads((next(runs.iterdir()) / "recap.json").read_text())
    assert recap["nodes"] == {"localhost": {"passed": 0, "failed": 0, "skipped": 1, "result": "not judged"}}


@pytest.mark.parametrize("cut", [0, 40, 120, -30])
def test_results_cut_short_judge_no_node_and_name_the_file(tmp_path: Path, cut: int) -> None:
    """pytest killed while writing junit.xml (or a full disk) left a file that is no complete XML: verify stopped
    with an internal error (exit 70). Now no node has a result, the file is named, and the exit is 1, not a pass."""
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT[:cut])
    outcomes, unread = infra_report.read_junit(path, ["node1"])
    assert outcomes == [] and unread.startswith(f"{path}: the suite's results cannot be read ("), unread
    assert infra_report.exit_code(outcomes, [], 0, ["node1"]) == ExitCode.ERROR
    missing, why = infra_report.read_junit(tmp_path / "none.xml", ["node1"])
    assert missing == [] and why == f"{tmp_path / 'none.xml'}: pytest wrote no results"


def test_a_host_name_pytest_escapes_in_its_id_keeps_its_result(tmp_path: Path) -> None:
    """pytest writes a non-ASCII parameter as ASCII escapes in the test id (nœud as n\\u0153ud): the node's passing
    test was counted under (suite), and the node read 'no test result (not judged)'. A real pytest run writes the id."""
    import subprocess

    (tmp_path / "test_names.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('host', ['ansible://nœud', 'ansible://node1'], ids=str)\n"
        "def test_reachable(host):\n    assert host\n"
    )
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                           str(tmp_path / "test_names.py")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "\\u0153" in junit.read_text()  # how pytest writes it
    outcomes, unread = infra_report.read_junit(junit, ["nœud", "node1"])
    assert unread == "" and {o.host for o in outcomes} == {"nœud", "node1"}, outcomes


def test_a_suite_that_failed_to_collect_is_no_test_failed_on_a_node() -> None:
    """A collection error is the suite's (host None): verify said exit 2, 'a test failed on a node', while no node
    had a result. It is exit 1, the suite could not run; a node's own failure stays exit 2."""
    broken = [infra_report.TestOutcome("tests/infra/test_nodes.py", None, "error", "ImportError: no module x")]
    assert infra_report.exit_code(broken, [], 2, ["node1"]) == ExitCode.ERROR
    failed = [*broken, infra_report.TestOutcome("test_mpirun", "node1", "failed", "not on PATH")]
    assert infra_report.exit_code(failed, [], 1, ["node1"]) == ExitCode.HOST_FAILED


def test_the_callers_pytest_settings_do_not_reach_the_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest took the configuration file of the directories above the suite (a project holding the venv the
    wheel is installed in) and PYTEST_ADDOPTS: `addopts = "-x"` cut the table at the first failure, an option of a
    plugin this venv lacks ended the run before any test, and verify blamed the inventory. The suite is copied
    under a project whose pyproject.toml has such options, as an installed wheel's is (rdmaforge/data/verify)."""
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x --an-option-of-a-missing-plugin")
    project = tmp_path / "project"
    root = project / ".venv" / "lib" / "site-packages" / "rdmaforge" / "data" / "verify"
    shutil.copytree(verify.SUITE, root / "tests" / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-x --cov=mycluster"\n')
    (project / "conftest.py").write_text("raise SystemExit('the project conftest was loaded')\n")
    monkeypatch.setattr(verify, "VERIFY_ROOT", root)
    monkeypatch.setattr(verify, "SUITE", root / "tests" / "infra")
    inventory = this_machine_on_tcp(tmp_path / "hosts.yml")
    runs = tmp_path / "runs"
    # On tcp the erdma repository and memlock tests are skipped, the rest run (and fail on this machine): with -x
    # the table would show one failure.
    code = main(["verify", "-i", str(inventory), "--runs-dir", str(runs), "-k", "memlock or erdma or nccl_conf"])
    out = capsys.readouterr().out
    log = (next(runs.iterdir()) / "verify" / "pytest.log").read_text()
    assert "unrecognized arguments" not in log and "project conftest" not in log, log[-3000:]
    row = next(line for line in out.splitlines() if line.startswith("localhost")).split()
    assert code in (ExitCode.OK, ExitCode.HOST_FAILED), out
    assert int(row[1]) + int(row[2]) >= 2 and row[3] == "2", out
