"""nccl_plugin for real on this machine (ansible_connection=local): the check of a plugin's exported symbols
(roles/nccl_plugin/tasks/register.yml), where a library nm cannot read and nm that cannot run are said as such,
never as a library that exports no ncclNetPlugin symbol; and the AIACC package path in check mode."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import local_inventory, run_playbook

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}


def check_symbols(tmp_path: Path, library: Path, path_env: str | None = None) -> str:
    """register.yml's symbol check of ``library`` (with PATH ``path_env`` for its tasks); the run's output."""
    inventory = local_inventory(tmp_path / "hosts.yml")
    include: dict[str, object] = {"name": "rdmaforge.cluster.nccl_plugin", "tasks_from": "register"}
    if path_env is not None:
        include["apply"] = {"environment": {"PATH": path_env}}
    playbook = tmp_path / "symbols.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "nccl_plugin's symbol check", "hosts": "localhost", "gather_facts": False,
        "vars": {"nccl_plugin_lib": str(library)},
        "tasks": [{"name": "Check the plugin", "ansible.builtin.include_role": include}],
    }]))  # fmt: skip
    proc = run_playbook(str(playbook), inventory=inventory, env=ENV, timeout=300)
    assert proc.returncode != 0, proc.stdout[-3000:]
    return " ".join(proc.stdout.split())


def test_a_file_nm_cannot_read_is_named_as_unreadable(tmp_path: Path) -> None:
    library = tmp_path / "libnccl-net.so"
    library.write_text("not an ELF file\n")
    said = check_symbols(tmp_path, library)
    assert f"localhost: `nm -D` could not read {library} (" in said, said[-3000:]
    assert "file format not recognized" in said and "exports no ncclNetPlugin" not in said, said[-3000:]


def test_nm_that_cannot_run_is_not_taken_for_a_library_without_symbols(tmp_path: Path) -> None:
    """binutils not installed (the aiacc package path did not install it): nm does not run, Ansible gives rc 2, no
    output and its own msg. The check said the library 'exports no ncclNetPlugin_v* symbol', blaming a good one."""
    library = tmp_path / "libnccl-net.so"
    library.write_bytes(Path("/bin/true").read_bytes())  # an ELF file; nm is what is missing
    empty = tmp_path / "no-tools"
    empty.mkdir()
    said = check_symbols(tmp_path, library, str(empty))
    assert f"localhost: `nm -D` could not read {library} (" in said, said[-3000:]
    assert "so whether it is an NCCL net plugin is unknown" in said and "exports no" not in said, said[-3000:]


@pytest.mark.parametrize("tasks", ["aiacc_package.yml", "aiacc_pypi.yml", "harp.yml"])
def test_every_plugin_source_installs_nm_where_none_runs(tasks: str) -> None:
    """nm (binutils) verifies the plugin's symbols whatever the source: the package path lacked it, and the PyPI and
    HARP paths installed binutils on every node (recorded as rdmaforge's, so reset would remove a node's own nm)
    while the package path did so only where no nm runs. One task file (nm.yml) does it for all three now."""
    from rdmaforge.paths import PROJECT_ROOT

    role = PROJECT_ROOT / "roles" / "nccl_plugin" / "tasks"
    steps = yaml.safe_load((role / tasks).read_text())
    assert [s for s in steps if s.get("ansible.builtin.include_tasks") == "nm.yml"], tasks
    assert not [s for s in steps if "binutils" in str(s)], tasks  # no install of its own
    shared = yaml.safe_load((role / "nm.yml").read_text())
    installs = [step for step in shared if "binutils" in (step.get("vars") or {}).get("os_packages_names", [])]
    assert installs and installs[0]["ansible.builtin.include_role"]["name"] == "rdmaforge.cluster.os_packages"
    # only where no nm runs (the lab's dnf node has Debian's nm, no binutils rpm)
    assert installs[0]["when"] == "nccl_plugin_nm.rc != 0"


def test_the_package_source_in_check_mode_on_a_node_without_the_package(tmp_path: Path) -> None:
    """nccl_plugin_aiacc_source: package, --check on a node that lacks the package: check mode does not make the
    download directory, so get_url failed ('Destination ... does not exist', after its retries) and the install of
    a file never downloaded would have failed next; the run itself passes. Check mode reports the change now, leaves
    the library to the run (nccl_plugin_lib_pending) and writes nothing."""
    import hashlib

    package = tmp_path / "aiacc.deb"
    package.write_text("a package\n")
    inventory = local_inventory(tmp_path / "hosts.yml")
    prefix = tmp_path / "prefix"
    playbook = tmp_path / "package.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "the AIACC package path", "hosts": "localhost", "gather_facts": True, "gather_subset": ["min"],
        "tasks": [
            {"name": "Package path", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.nccl_plugin",
                                                                      "tasks_from": "aiacc_package"},
             "vars": {"nccl_plugin_prefix": str(prefix), "nccl_plugin_package_url": f"file://{package}",
                      "nccl_plugin_aiacc_package_sha256": hashlib.sha256(package.read_bytes()).hexdigest(),
                      "nccl_plugin_provider": "aiacc"}},
            {"name": "Show what is left to the run", "ansible.builtin.debug": {"var": "nccl_plugin_lib_pending"}},
        ],
    }]))  # fmt: skip
    proc = run_playbook(str(playbook), "--check", inventory=inventory, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert '"nccl_plugin_lib_pending": true' in proc.stdout, proc.stdout[-3000:]
    assert not prefix.exists()
