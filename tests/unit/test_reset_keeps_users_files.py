"""`rdmaforge reset` takes back what rdmaforge wrote and nothing else ("a file it did not write stays"), run for real on
this machine (ansible_connection=local, every path under tmp_path):

- nccl_env: a node's own /etc/nccl.conf is kept before the converge writes over it and put back by the withdrawal;
  a file rdmaforge created is removed. A second converge changes nothing (and keeps the node's text, not
  rdmaforge's, as the original); check mode reports the same changes and makes none.
- build_once (nccl_build's withdrawal): a `current`/`previous` link of the user's own stays; only links that lead
  to a build rdmaforge installed (a directory holding .rdmaforge-build.json) go.
- nccl_plugin: of /etc/ld.so.conf.d/aiacc_nccl_plugin.conf (the AIACC sdist's install hook appends to it) only the
  lines naming the venv earlier rdmaforge releases pip-installed the plugin into go; a node's own install keeps its.
- hugepages: a reboot-pending marker from an earlier boot (the reboot happened) is removed, so reset can remove
  rdmaforge's state directory; a marker of the current boot (the reboot still pending) stays.

Expected values are the files each test sets up."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import local_inventory, recap, run_playbook

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
#: What an image ships in /etc/nccl.conf on some clouds: the node's own settings, which rdmaforge did not write.
IMAGE_NCCL_CONF = "NCCL_IB_PCI_RELAXED_ORDERING=1\nNCCL_TOPO_FILE=/opt/microsoft/ndv4-topo.xml\n"


def run_role(tmp_path: Path, role: str, tasks_from: str, role_vars: dict[str, Any],
             *extra: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
    inventory = local_inventory(tmp_path / "hosts.yml")
    playbook = tmp_path / f"{role}-{tasks_from}.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": f"{role} {tasks_from}", "hosts": "localhost", "gather_facts": False,
        # include parameters: above the role's vars and defaults
        "tasks": [{"name": tasks_from, "ansible.builtin.include_role": {"name": f"rdmaforge.cluster.{role}",
                                                                       "tasks_from": tasks_from},
                   "vars": role_vars}],
    }]))  # fmt: skip
    return run_playbook(str(playbook), *extra, inventory=inventory, env=ENV, timeout=300)


def changed(proc: subprocess.CompletedProcess[str]) -> int:
    assert proc.returncode == 0, proc.stdout[-4000:]
    return recap(proc.stdout)["localhost"]["changed"]


def tree(root: Path) -> dict[str, tuple[str, int] | str]:
    """Every file under ``root``: its text and mode, or a link's target."""
    found: dict[str, tuple[str, int] | str] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = f"-> {path.readlink()}"
        elif path.is_file():
            found[name] = (path.read_text(), path.stat().st_mode & 0o7777)
    return found


# nccl_env


def nccl_vars(root: Path) -> dict[str, str]:
    return {
        "nccl_env_conf_path": str(root / "etc" / "nccl.conf"),
        "nccl_env_profile_script": str(root / "etc" / "profile.d" / "rdmaforge-nccl.sh"),
        "nccl_env_conf_original": str(root / "var" / "lib" / "rdmaforge" / "nccl.conf.before-rdmaforge"),
        "nccl_env_record": str(root / "var" / "lib" / "rdmaforge" / "nccl-env-files-created"),
    }


def nccl_node(tmp_path: Path, own: str | None) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "node"
    (root / "etc" / "profile.d").mkdir(parents=True)
    if own is not None:
        (root / "etc" / "nccl.conf").write_text(own)
        (root / "etc" / "nccl.conf").chmod(0o640)
    return root, nccl_vars(root)


def test_the_nodes_own_nccl_conf_is_kept_by_the_converge_and_put_back_by_reset(tmp_path: Path) -> None:
    root, role_vars = nccl_node(tmp_path, IMAGE_NCCL_CONF)
    conf = root / "etc" / "nccl.conf"
    before = tree(root)

    # Check mode: reports the change, makes none.
    assert changed(run_role(tmp_path, "nccl_env", "main", role_vars, "--check")) > 0
    assert tree(root) == before

    assert changed(run_role(tmp_path, "nccl_env", "main", role_vars)) > 0
    written = conf.read_text()
    assert written != IMAGE_NCCL_CONF and "NCCL_SOCKET_IFNAME=eth0" in written  # the tcp profile's settings
    after_converge = tree(root)

    # A second converge, and one in check mode, change nothing: the node's text stays the one kept.
    assert changed(run_role(tmp_path, "nccl_env", "main", role_vars)) == 0
    assert changed(run_role(tmp_path, "nccl_env", "main", role_vars, "--check")) == 0
    assert tree(root) == after_converge

    # The withdrawal in check mode reports it would change, and changes nothing.
    assert changed(run_role(tmp_path, "nccl_env", "withdraw", role_vars, "--check")) > 0
    assert tree(root) == after_converge

    # For real: the node's own file is back, text and mode, and rdmaforge's bookkeeping is gone.
    assert changed(run_role(tmp_path, "nccl_env", "withdraw", role_vars)) > 0
    assert tree(root) == before
    assert conf.read_text() == IMAGE_NCCL_CONF and conf.stat().st_mode & 0o777 == 0o640
    assert changed(run_role(tmp_path, "nccl_env", "withdraw", role_vars)) == 0
    assert tree(root) == before


@pytest.mark.parametrize("target", ["../opt/vendor/nccl.conf", "vendor-nowhere.conf"])
def test_a_nodes_nccl_conf_link_comes_back_as_the_link(tmp_path: Path, target: str) -> None:
    """An image's /etc/nccl.conf -> /opt/vendor/nccl.conf: the converge replaces the link (never writing into the
    vendor's file), and reset put back a copy of its text, a file of its own, not the link. A link that leads nowhere
    is the node's too (its text could not even be read)."""
    root, role_vars = nccl_node(tmp_path, None)
    vendor = root / "opt" / "vendor" / "nccl.conf"
    vendor.parent.mkdir(parents=True)
    vendor.write_text(IMAGE_NCCL_CONF)
    conf = root / "etc" / "nccl.conf"
    conf.symlink_to(target)
    before = tree(root)
    assert changed(run_role(tmp_path, "nccl_env", "main", role_vars)) > 0
    assert not conf.is_symlink() and "NCCL_SOCKET_IFNAME=eth0" in conf.read_text()
    assert vendor.read_text() == IMAGE_NCCL_CONF  # the vendor's file is not written into
    assert changed(run_role(tmp_path, "nccl_env", "main", role_vars)) == 0
    assert changed(run_role(tmp_path, "nccl_env", "withdraw", role_vars)) > 0
    assert tree(root) == before and conf.readlink() == Path(target)
    assert changed(run_role(tmp_path, "nccl_env", "withdraw", role_vars)) == 0


def test_an_nccl_conf_rdmaforge_created_is_removed_by_reset(tmp_path: Path) -> None:
    root, role_vars = nccl_node(tmp_path, None)
    assert changed(run_role(tmp_path, "nccl_env", "main", role_vars)) > 0
    assert (root / "etc" / "nccl.conf").is_file()
    assert changed(run_role(tmp_path, "nccl_env", "main", role_vars)) == 0
    assert changed(run_role(tmp_path, "nccl_env", "withdraw", role_vars)) > 0
    assert tree(root) == {}


def test_an_nccl_conf_that_appeared_after_a_reset_is_the_nodes(tmp_path: Path) -> None:
    """No original kept and no record: the file there is the node's, and the withdrawal leaves it."""
    root, role_vars = nccl_node(tmp_path, IMAGE_NCCL_CONF)
    before = tree(root)
    assert changed(run_role(tmp_path, "nccl_env", "withdraw", role_vars)) == 0
    assert tree(root) == before


# build_once, as nccl_build's withdrawal runs it


def prefix_root(tmp_path: Path) -> Path:
    root = tmp_path / "opt" / "nccl"
    for build in ("nccl-2.18.3-user", "nccl-2.21.5-user"):
        (root / build / "lib").mkdir(parents=True)
        (root / build / "lib" / "libnccl.so.2").write_text(f"{build}\n")
    return root


def withdraw_builds(tmp_path: Path, root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_role(tmp_path, "nccl_build", "withdraw",
                    {"nccl_build_prefix_root": str(root), "nccl_build_workdir": str(tmp_path / "work")},
                    *extra)  # fmt: skip


def test_the_users_current_and_previous_links_stay(tmp_path: Path) -> None:
    root = prefix_root(tmp_path)
    (root / "current").symlink_to("nccl-2.21.5-user")
    (root / "previous").symlink_to(root / "nccl-2.18.3-user")
    before = tree(root)
    assert changed(withdraw_builds(tmp_path, root, "--check")) == 0
    assert changed(withdraw_builds(tmp_path, root)) == 0
    assert tree(root) == before


def test_only_links_to_rdmaforges_builds_go(tmp_path: Path) -> None:
    root = prefix_root(tmp_path)
    ours = root / "2.23.4-1-cuda12.4-abcdef"
    (ours / "lib").mkdir(parents=True)
    (ours / ".rdmaforge-build.json").write_text('{"name": "nccl"}\n')
    (root / "current").symlink_to(ours)
    (root / "previous").symlink_to("nccl-2.18.3-user")  # the user's, kept as `previous` by a converge
    users = {name: value for name, value in tree(root).items() if name.startswith("nccl-") or name == "previous"}

    checked = withdraw_builds(tmp_path, root, "--check")
    assert changed(checked) > 0 and (root / "current").is_symlink() and ours.is_dir()
    assert changed(withdraw_builds(tmp_path, root)) > 0
    assert tree(root) == users
    assert changed(withdraw_builds(tmp_path, root)) == 0


# nccl_plugin: the withdrawal (provider none) and the sdist path both forget earlier releases' hook entries


def plugin_node(tmp_path: Path, own: list[str], earlier_release: bool) -> tuple[Path, dict[str, Any]]:
    """A node whose hook file holds the node's own ``own`` lines, then (``earlier_release``) the two lines an earlier
    release's pip install left (tests/data/device-h100-plugin/check.txt, there under the default prefix)."""
    root = tmp_path / "node"
    (root / "etc" / "ld.so.conf.d").mkdir(parents=True)
    prefix = root / "opt" / "rdmaforge" / "nccl-plugin"
    (prefix / "lib").mkdir(parents=True)
    hook = root / "etc" / "ld.so.conf.d" / "aiacc_nccl_plugin.conf"
    ours = [f"{prefix}/aiacc-venv/lib/python3.12/site-packages/aiacc_nccl_plugin/"] * 2 if earlier_release else []
    hook.write_text("".join(f"{line}\n" for line in [*own, *ours]))
    return hook, {"nccl_plugin_prefix": str(prefix), "nccl_plugin_provider": "none",
                  "nccl_plugin_hook_ldconf": str(hook),
                  "nccl_plugin_ldconf": str(root / "etc" / "ld.so.conf.d" / "rdmaforge-nccl-plugin.conf")}


def test_the_hook_entry_of_the_nodes_own_aiacc_install_stays(tmp_path: Path) -> None:
    """The seeds install the plugin with pip into the node's Python, whose hook line names its site-packages: the
    withdrawal removed the whole file with rdmaforge's own entries, and the node's plugin left ld.so's path."""
    own = "/usr/local/lib/python3.10/dist-packages/aiacc_nccl_plugin/"
    hook, role_vars = plugin_node(tmp_path, [own], earlier_release=True)
    before = hook.read_text()
    assert changed(run_role(tmp_path, "nccl_plugin", "main", role_vars, "--check")) >= 1
    assert hook.read_text() == before
    assert changed(run_role(tmp_path, "nccl_plugin", "main", role_vars)) >= 1
    assert hook.read_text() == f"{own}\n"
    assert not Path(role_vars["nccl_plugin_prefix"]).exists()
    assert changed(run_role(tmp_path, "nccl_plugin", "main", role_vars)) == 0
    assert hook.read_text() == f"{own}\n"


def test_a_hook_file_of_earlier_releases_entries_only_is_removed(tmp_path: Path) -> None:
    hook, role_vars = plugin_node(tmp_path, [], earlier_release=True)
    assert changed(run_role(tmp_path, "nccl_plugin", "main", role_vars)) >= 1
    assert not hook.exists()
    assert changed(run_role(tmp_path, "nccl_plugin", "main", role_vars)) == 0


def test_a_hook_file_without_rdmaforges_entries_is_left_alone(tmp_path: Path) -> None:
    own = "/opt/conda/lib/python3.11/site-packages/aiacc_nccl_plugin/"
    hook, role_vars = plugin_node(tmp_path, [own], earlier_release=False)
    (Path(role_vars["nccl_plugin_prefix"]) / "lib").rmdir()
    Path(role_vars["nccl_plugin_prefix"]).rmdir()
    assert changed(run_role(tmp_path, "nccl_plugin", "main", role_vars)) == 0
    assert hook.read_text() == f"{own}\n"



def test_a_plugin_prefix_holding_the_users_files_keeps_them(tmp_path: Path) -> None:
    """The withdrawal removed nccl_plugin_prefix whole: a prefix of the user's (a vendor plugin, HARP's tools beside
    rdmaforge's AIACC) lost everything in it (review round 15a). Only what the role put there goes; the prefix stays
    while the user's files are in it, and says so."""
    _, role_vars = plugin_node(tmp_path, [], earlier_release=False)
    prefix = Path(role_vars["nccl_plugin_prefix"])
    (prefix / "aiacc-2.0.1").mkdir()
    (prefix / "aiacc-2.0.1" / "libnccl-net.so.0.0.0").write_text("rdmaforge's unpacked AIACC library\n")
    (prefix / "lib" / "libnccl-net.so").symlink_to(prefix / "aiacc-2.0.1" / "libnccl-net.so.0.0.0")
    (prefix / "pkg").mkdir()
    (prefix / "pkg" / "aiacc_nccl_plugin-2.0.1.tar.gz").write_text("the sdist rdmaforge downloaded\n")
    users = {"lib/libnccl-net-custom.so": "the user's own plugin\n", "harp-tools/setup.sh": "the user's tools\n"}
    for name, text in users.items():
        (prefix / name).parent.mkdir(parents=True, exist_ok=True)
        (prefix / name).write_text(text)
    proc = run_role(tmp_path, "nccl_plugin", "main", role_vars)
    assert changed(proc) >= 1
    assert {name: text for name, (text, _) in tree(prefix).items()} == users  # type: ignore[misc]
    said = " ".join(proc.stdout.split())
    assert f"{prefix} (nccl_plugin_prefix) was kept: it holds harp-tools, lib, which rdmaforge did not put" in said
    assert changed(run_role(tmp_path, "nccl_plugin", "main", role_vars)) == 0


# benchmark: the Python environment goes only when rdmaforge created it


def test_a_users_python_environment_stays_and_rdmaforges_goes(tmp_path: Path) -> None:
    """benchmark_e2e_venv may name the user's own environment (one with AIACC-ACSpeed, as the role's defaults
    suggest): the withdrawal removed it whole. An environment is removed only with the mark the role leaves in one it
    created (tasks/e2e_env.yml)."""
    remote = tmp_path / "node" / "opt" / "rdmaforge" / "bench"
    remote.mkdir(parents=True)
    own = tmp_path / "node" / "opt" / "conda" / "envs" / "train"
    (own / "lib" / "site-packages" / "acspeed").mkdir(parents=True)
    role_vars = {"benchmark_e2e_venv": str(own), "benchmark_e2e_remote_dir": str(remote)}
    proc = run_role(tmp_path, "benchmark", "withdraw", role_vars)
    assert changed(proc) == 1 and not remote.exists()  # the training script's directory is rdmaforge's
    assert (own / "lib" / "site-packages" / "acspeed").is_dir()
    assert f"{own} (benchmark_e2e_venv) was kept: it has no .rdmaforge-venv" in " ".join(proc.stdout.split())
    (own / ".rdmaforge-venv").write_text("rdmaforge created this Python environment\n")
    assert changed(run_role(tmp_path, "benchmark", "withdraw", role_vars)) == 1
    assert not own.exists() and (own.parent).is_dir()


# hugepages


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def test_a_marker_of_an_earlier_boot_is_removed_by_the_withdrawal(tmp_path: Path) -> None:
    state = tmp_path / "var" / "lib" / "rdmaforge"
    state.mkdir(parents=True)
    marker = state / "hugepages-reboot-pending"
    earlier = "00000000-0000-0000-0000-000000000000"
    assert earlier != boot_id()
    marker.write_text(f"{earlier}\n")
    role_vars = {"hugepages_state_dir": str(state), "hugepages_enabled": False}
    checked = run_role(tmp_path, "hugepages", "withdraw", role_vars, "--check")
    assert changed(checked) == 1 and marker.read_text() == f"{earlier}\n"
    assert changed(run_role(tmp_path, "hugepages", "withdraw", role_vars)) == 1
    assert not marker.exists() and list(state.iterdir()) == []
    assert changed(run_role(tmp_path, "hugepages", "withdraw", role_vars)) == 0


def test_a_marker_of_this_boot_stays_the_reboot_is_still_pending(tmp_path: Path) -> None:
    state = tmp_path / "var" / "lib" / "rdmaforge"
    state.mkdir(parents=True)
    marker = state / "hugepages-reboot-pending"
    marker.write_text(f"{boot_id()}\n")
    role_vars = {"hugepages_state_dir": str(state), "hugepages_enabled": False}
    assert changed(run_role(tmp_path, "hugepages", "withdraw", role_vars)) == 0
    assert marker.read_text() == f"{boot_id()}\n"


def test_an_install_refuses_to_take_over_a_current_link_of_the_users_own(tmp_path: Path) -> None:
    """build_once's install kept whatever `current` led to as its `previous` and pointed `current` at its own build:
    the user's /opt/nccl/current (an NCCL they built) was taken over, and reset, which keeps only rdmaforge's
    links, could not give it back. The install refuses it by name now (current_check.yml, its first step), in
    check mode as in a run; a `current` that leads to an rdmaforge build, or nowhere, or none at all, goes on."""
    root = tmp_path / "nccl"
    (root / "nccl-2.21.5-user" / "lib").mkdir(parents=True)
    (root / "current").symlink_to(root / "nccl-2.21.5-user")
    role_vars = {"build_once_prefix_root": str(root), "build_once_name": "nccl"}
    for extra in (["--check"], []):
        proc = run_role(tmp_path, "build_once", "current_check", role_vars, *extra)
        assert proc.returncode != 0, proc.stdout[-3000:]
        said = " ".join(proc.stdout.split())
        assert (f"localhost: {root}/current -> {root}/nccl-2.21.5-user is not a build rdmaforge installed (no "
                ".rdmaforge-build.json there)") in said, said[-3000:]  # fmt: skip
    assert (root / "current").readlink() == root / "nccl-2.21.5-user"
    ours = root / "2.29.7-cuda13.0-sm_80"
    ours.mkdir()
    (ours / ".rdmaforge-build.json").write_text('{"id": "2.29.7-cuda13.0-sm_80"}')
    for target in (ours, root / "deleted-build"):
        (root / "current").unlink()
        (root / "current").symlink_to(target)
        proc = run_role(tmp_path, "build_once", "current_check", role_vars)
        assert proc.returncode == 0 and recap(proc.stdout)["localhost"]["changed"] == 0, proc.stdout[-3000:]
    (root / "current").unlink()
    assert run_role(tmp_path, "build_once", "current_check", role_vars).returncode == 0
    from rdmaforge.paths import PROJECT_ROOT

    first = yaml.safe_load((PROJECT_ROOT / "roles" / "build_once" / "tasks" / "install.yml").read_text())[0]
    assert first["ansible.builtin.import_tasks"] == "current_check.yml"  # before anything is unpacked or linked
