"""The pip package as a user outside this repository gets it: ``pip wheel .``, installed with its dependencies
into a fresh venv (no system site-packages) in a temporary directory, then the CLI run from another temporary
directory: --help, ``render`` (and ``--validate``) of a copy of the example inventory, ``nccl-report`` on a corpus
file, ``report``/``doctor``/``provision``/``verify`` --help; ``import rdmaforge`` resolves inside that venv, the
data files, playbooks, roles and ansible.cfg are found there, and Ansible in that venv finds the collection.

PyPI (or the configured index) must be reachable for the dependencies; the test is skipped when pip cannot
install them. The venv is built once per session (tests/installed.py) and also drives the lab in
tests/integration/test_installed_on_lab.py. It takes about 40 s here (pip wheel 13 s, the install with its
dependencies 25 s): not marked slow."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from installed import WheelVenv, run

from rdmaforge.paths import PROJECT_ROOT

CORPUS = PROJECT_ROOT / "tests" / "data" / "nccl-json" / "all_reduce_v2.17.8_ok.json"


def test_rdmaforge_comes_from_the_wheel(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    bindir, env = wheel_venv.bindir, wheel_venv.env
    code = (
        "import json, rdmaforge, rdmaforge.paths as p; from rdmaforge.parsers import nccl_env; "
        "print(json.dumps({'module': rdmaforge.__file__, 'checkout': str(p.CHECKOUT), "
        "'site': str(p.playbook('site.yml')), 'cfg': str(p.ANSIBLE_CFG), 'workspace': str(p.WORKSPACE), "
        "'unknown': nccl_env.unknown_names({'NCCL_X': 1})}))"
    )
    proc = run([str(bindir / "python"), "-c", code], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["module"].startswith(str(bindir.parent)) and not found["module"].startswith(str(PROJECT_ROOT))
    assert found["checkout"] == "None" and found["workspace"] == str(tmp_path)
    assert Path(found["site"]).is_file() and Path(found["cfg"]).is_file()
    assert found["unknown"] == ["NCCL_X"]  # the data file is in the wheel


def test_ansible_in_the_venv_finds_the_collection(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    bindir, env = wheel_venv.bindir, wheel_venv.env
    proc = run([str(bindir / "ansible-doc"), "--json", "rdmaforge.cluster.kernel_cmdline"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["rdmaforge.cluster.kernel_cmdline"]["doc"]
    assert doc["filename"].startswith(str(bindir.parent))


@pytest.mark.parametrize("command", [[], ["provision"], ["verify"], ["doctor"], ["report"], ["bench"], ["render"]])
def test_help(wheel_venv: WheelVenv, tmp_path: Path, command: list[str]) -> None:
    bindir, env = wheel_venv.bindir, wheel_venv.env
    proc = run([str(bindir / "rdmaforge"), *command, "--help"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert "usage: rdmaforge" in proc.stdout


def test_render_and_validate_the_example_inventory(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    bindir, env = wheel_venv.bindir, wheel_venv.env
    inventory = tmp_path / "inv"
    shutil.copytree(PROJECT_ROOT / "inventories" / "example", inventory)  # as shipped: it renders
    for extra in ([], ["--validate"]):
        out = tmp_path / f"out{len(extra)}"
        proc = run([str(bindir / "rdmaforge"), "render", "-i", "inv/hosts.yml", "-o", out.name, *extra], tmp_path, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert any(out.rglob("*.yaml")) and any(out.rglob("*.sh"))
    assert "valid" in proc.stdout.lower()


def test_the_example_inventorys_wheel_command_runs_there(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    """The example inventory, copied out of the venv as the README says, names the command a wheel user runs
    (rdmaforge.cluster.preflight): that command, as written in the copy, passes ansible-playbook's syntax check."""
    bindir, env = wheel_venv.bindir, wheel_venv.env
    code = "import rdmaforge.paths as p; print(p.EXAMPLE_INVENTORY)"
    where = run([str(bindir / "python"), "-c", code], tmp_path, env)
    assert where.returncode == 0, where.stderr
    shutil.copytree(where.stdout.strip(), tmp_path / "mycluster")
    header = (tmp_path / "mycluster" / "hosts.yml").read_text().splitlines()
    commands = [line.removeprefix("#   ").split() for line in header if line.startswith("#   ansible-playbook ")]
    wheel_command = next(c for c in commands if not c[-1].startswith("playbooks/"))
    assert wheel_command == ["ansible-playbook", "-i", "mycluster/hosts.yml", "rdmaforge.cluster.preflight"]
    proc = run([str(bindir / "ansible-playbook"), *wheel_command[1:], "--syntax-check"], tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_nccl_report_on_a_corpus_file(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    bindir, env = wheel_venv.bindir, wheel_venv.env
    shutil.copy(CORPUS, tmp_path / CORPUS.name)
    proc = run([str(bindir / "rdmaforge"), "nccl-report", "--json", CORPUS.name], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs"]


def test_report_on_a_stored_run_from_the_wheel(wheel_venv: WheelVenv, tmp_path: Path, shared_dir: Path) -> None:
    """`rdmaforge report` from the wheel on a stored run (a real socket-transport log of the corpus, a tcp cluster
    with a 5 Gbit/s line rate, which its peak busbw passes): results.json with the log's own average, summary.md,
    and, without the plots extra, a one-line note that the plots were not drawn instead of an error."""
    bindir, env = wheel_venv.bindir, wheel_venv.env
    log = shared_dir / "corpus" / "nccl-tests" / "10_allreduce_v2.10-2.11_a10g_2gpu_2node_ncclinfo_socket.txt"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(log, run_dir / "nccl-all_reduce.log")
    # The nodes' host names and GPUs as the role records them: the log's "#  Rank" lines name one rank on each host.
    (run_dir / "run.json").write_text(json.dumps({
        "fabric": "tcp", "nodes": ["n1", "n2"], "min_efficiency": 0.8, "tolerance": 0.1, "line_rate_gbps": 5,
        "hostnames": {"n1": "ip-10-0-139-244", "n2": "ip-10-0-142-242"}, "gpus": {"n1": 1, "n2": 1},
        "nccl": {"status": "ran", "collectives": ["all_reduce"]}}))  # fmt: skip
    has_plots = run([str(bindir / "python"), "-c", "import matplotlib"], tmp_path, env).returncode == 0
    proc = run([str(bindir / "rdmaforge"), "report", "run"], tmp_path, env)  # a path relative to the caller
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    results = json.loads((run_dir / "results.json").read_text())
    assert results["nccl"]["collectives"]["all_reduce"]["avg_busbw"] == pytest.approx(0.300212)  # the log's line 77
    assert (run_dir / "summary.md").is_file()
    if not has_plots:
        # what to install, with the range the wheel declares: rdmaforge[plots] is nothing pip finds (not on PyPI)
        assert "plots not drawn: matplotlib is not installed (pip install 'matplotlib<" in proc.stderr
        assert "(rdmaforge's [plots] extra)" in proc.stderr and "rdmaforge[plots]" not in proc.stderr
        assert not list(run_dir.glob("*.png"))


#: An inventory plugin of a user's own collection (installed under ~/.ansible/collections, as ansible-galaxy does):
#: two nodes on loopback port 9, which refuses connections.
INVENTORY_PLUGIN = '''
from ansible.plugins.inventory import BaseInventoryPlugin

DOCUMENTATION = """
name: loopback
short_description: two nodes on loopback port 9
description: [A stand-in for a cloud inventory plugin.]
options:
  plugin: {description: The plugin name., required: true, choices: [mycorp.fleet.loopback]}
"""


class InventoryModule(BaseInventoryPlugin):
    NAME = "mycorp.fleet.loopback"

    def verify_file(self, path):
        return path.endswith("fleet.yml")

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        inventory.add_group("cluster")
        for number in (1, 2):
            host = f"node{number}"
            inventory.add_host(host, group="cluster")
            inventory.set_variable(host, "ansible_host", f"127.0.0.{number}")
            inventory.set_variable(host, "ansible_port", 9)
            inventory.set_variable(host, "rdmaforge_fabric", "tcp")
'''


def test_the_users_own_collections_stay_visible(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    """The installed CLI set ANSIBLE_COLLECTIONS_PATH to its site-packages alone: an inventory from a plugin in
    ~/.ansible/collections (a cloud's, installed with ansible-galaxy) worked with ansible-inventory and failed
    every rdmaforge command that runs Ansible ("Nothing was run ... Fix the inventory"). The nodes are unreachable
    here (port 9), so the run gets as far as connecting to them."""
    bindir, env = wheel_venv.bindir, dict(wheel_venv.env)
    home = tmp_path / "home"
    plugin = home / ".ansible" / "collections" / "ansible_collections" / "mycorp" / "fleet" / "plugins" / "inventory"
    plugin.mkdir(parents=True)
    (plugin / "loopback.py").write_text(INVENTORY_PLUGIN)
    (tmp_path / "fleet.yml").write_text("plugin: mycorp.fleet.loopback\n")
    env["HOME"] = str(home)
    listed = run([str(bindir / "ansible-inventory"), "-i", "fleet.yml", "--list"], tmp_path, env)
    assert listed.returncode == 0 and "node2" in listed.stdout, listed.stderr
    proc = run([str(bindir / "rdmaforge"), "doctor", "-i", "fleet.yml"], tmp_path, env, timeout=600)
    said = proc.stdout + proc.stderr
    assert "unknown plugin" not in said and "Nothing was run" not in said, said[-3000:]
    assert proc.returncode == 3, said[-3000:]  # unreachable nodes (docs: exit codes)
    assert "node1" in said and "node2" in said


def test_a_relative_workspace_is_the_callers_directory_below(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    """RDMAFORGE_WORKSPACE=ws was used as given: Ansible, running from the playbooks' directory in site-packages,
    wrote doctor's results there, and the command reported the nodes not judged."""
    bindir, env = wheel_venv.bindir, {**wheel_venv.env, "RDMAFORGE_WORKSPACE": "ws"}
    code = ("import rdmaforge.paths as p; print(p.WORKSPACE); "
            "print(p.ansible_environment()['ANSIBLE_CACHE_PLUGIN_CONNECTION'])")
    proc = run([str(bindir / "python"), "-c", code], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(tmp_path / "ws"), str(tmp_path / "ws" / ".cache" / "facts")]


def test_messages_name_the_playbooks_as_an_installed_user_runs_them(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    """From the wheel there is no playbooks/ directory: `rdmaforge summary` said "run playbooks/summary.yml first"."""
    bindir, env = wheel_venv.bindir, wheel_venv.env
    proc = run([str(bindir / "rdmaforge"), "summary"], tmp_path, env)
    assert proc.returncode == 64, proc.stderr
    assert "ansible-playbook rdmaforge.cluster.summary" in proc.stderr and "playbooks/" not in proc.stderr


def test_the_example_inventory_ships_and_messages_name_what_a_wheel_user_has(
    wheel_venv: WheelVenv, tmp_path: Path
) -> None:
    """Review round 33a: the wheel had no example inventory, and help and messages named checkout paths
    (inventories/example/hosts.yml, roles/NAME/defaults/main.yml, tests/infra) that a wheel user does not have."""
    bindir, env = wheel_venv.bindir, wheel_venv.env
    proc = run([str(bindir / "python"), "-c", "import rdmaforge.paths as p; print(p.EXAMPLE_INVENTORY)"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    shipped = Path(proc.stdout.strip())
    assert shipped.is_relative_to(bindir.parent.resolve()), shipped
    source = PROJECT_ROOT / "inventories" / "example"
    files = sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())
    assert files and sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file()) == files
    assert all((shipped / f).read_bytes() == (source / f).read_bytes() for f in files)
    # A copy of it renders (the README's first step from the wheel).
    shutil.copytree(shipped, tmp_path / "mycluster")
    proc = run([str(bindir / "rdmaforge"), "render", "-i", "mycluster/hosts.yml", "-o", "out"], tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Its own help and messages name what is installed.
    # (the installed suite is .../rdmaforge/data/verify/tests/infra, and help wraps its path anywhere)
    checkout_paths = ("inventories/example", "roles/", "playbooks/")
    for argv in (["render", "--help"], ["verify", "--help"], ["--help"],
                 ["render", "-i", "mycluster/hosts.yml", "-o", "out2", "--group", "nope"]):  # fmt: skip
        proc = run([str(bindir / "rdmaforge"), *argv], tmp_path, env)
        said = proc.stdout + proc.stderr
        outside = said.replace(str(shipped), "")  # the installed example inventory's path
        assert not [p for p in checkout_paths if p in outside], (argv, said[-3000:])
        assert not re.search(r"(?<!verify/)tests/infra", said), (argv, said[-3000:])
    assert f"(see {shipped / 'hosts.yml'})" in said, said
    proc = run([str(bindir / "rdmaforge"), "render", "--help"], tmp_path, env)
    assert "ansible-doc -t role rdmaforge.cluster.workload_manifests" in proc.stdout, proc.stdout


def test_a_roles_own_variable_is_named_by_the_installed_file(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    """Review round 39a: the message named roles/eni/tasks/main.yml, which a wheel user does not have."""
    bindir, env = wheel_venv.bindir, wheel_venv.env
    shipped = Path(run([str(bindir / "python"), "-c", "import rdmaforge.paths as p; print(p.EXAMPLE_INVENTORY)"],
                       tmp_path, env).stdout.strip())  # fmt: skip
    shutil.copytree(shipped, tmp_path / "mycluster")
    hosts = tmp_path / "mycluster" / "hosts.yml"
    data = yaml.safe_load(hosts.read_text())
    data["all"]["vars"] = {**(data["all"].get("vars") or {}), "eni_selected": ["eth1"]}
    hosts.write_text(yaml.safe_dump(data))
    proc = run([str(bindir / "rdmaforge"), "provision", "-i", "mycluster/hosts.yml", "-q"], tmp_path, env)
    assert proc.returncode == 64, proc.stdout + proc.stderr
    said = proc.stderr
    assert "eni_selected is no setting: the role sets it itself (" in said, said
    assert "(roles/eni/" not in said and "ansible_collections/rdmaforge/cluster/roles/eni/tasks/main.yml" in said, said


def test_the_shipped_verify_suite_loads_beside_another_tests_package(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    """Many distributions install a stray top-level ``tests`` package into site-packages. The shipped suite imported
    ``tests.infra.expectations``: that regular package took the name from the suite's own directory (a namespace
    portion) and ``rdmaforge verify`` ended in an ImportError before any test. The suite, as verify runs it
    (its argv, cwd and environment), must collect every test beside such a package."""
    bindir, env = wheel_venv.bindir, wheel_venv.env
    stray = tmp_path / "stray"
    (stray / "tests").mkdir(parents=True)
    (stray / "tests" / "__init__.py").write_text("")  # what such a distribution leaves in site-packages
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {
        "stray-check": {"ansible_connection": "local"}}}}}}))  # fmt: skip
    code = (
        "import sys; from pathlib import Path; from rdmaforge.commands import verify; "
        f"argv = verify.pytest_argv(['stray-check'], Path({str(inventory)!r}), Path({str(tmp_path / 'j.xml')!r}), "
        "None) + ['--collect-only']; "
        f"sys.exit(verify.run_suite(argv, Path({str(tmp_path / 'suite.log')!r}), echo=False))"
    )
    proc = run([str(bindir / "python"), "-c", code], tmp_path, {**env, "PYTHONPATH": str(stray)})
    log = (tmp_path / "suite.log").read_text()
    assert proc.returncode == 0, proc.stderr + log[-3000:]
    collected = re.search(r"(\d+) tests? collected", log)
    # The suite's own files, counted here from the checkout: every test function of tests/infra is collected.
    suite = (PROJECT_ROOT / "tests" / "infra").glob("test_*.py")
    defined = sum(len(re.findall(r"^def test_", f.read_text(), re.M)) for f in suite)
    assert collected and int(collected.group(1)) >= defined > 0, log[-3000:]
