"""roles/mpi/tasks/links.yml for real on this machine (ansible_connection=local, directories under tmp_path): the MPI
commands are linked onto the non-interactive PATH, and a command there that is a file (another MPI) is refused by
name in check mode as in a run. Check mode used to report it as a change (its links are forced, their source may not
be installed yet) while the run failed with Ansible's "refusing to convert from file to symlink"."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from conftest import local_inventory, recap, run_playbook

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
COMMANDS = ["mpirun", "mpiexec"]


def link_run(tmp_path: Path, *extra: str, tasks_from: str = "links",
             commands: list[str] = COMMANDS) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """links.yml (or ``tasks_from``) with mpi_link_commands ``commands``; the MPI's bin directory holds COMMANDS."""
    bin_dir, link_dir = tmp_path / "openmpi" / "bin", tmp_path / "local-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    link_dir.mkdir(exist_ok=True)
    for name in COMMANDS:
        (bin_dir / name).write_text("#!/bin/sh\n")
    inventory = local_inventory(tmp_path / "hosts.yml")
    playbook = tmp_path / "links.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "mpi's links", "hosts": "localhost", "gather_facts": False,
        # include parameters: above the role's vars, which derive mpi_bin_dir from the OS family
        "tasks": [{"name": "Link", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.mpi",
                                                                  "tasks_from": tasks_from},
                   "vars": {"mpi_bin_dir": str(bin_dir), "mpi_link_dir": str(link_dir),
                            "mpi_link_commands": commands,
                            "mpi_link_record": str(tmp_path / "var" / "lib" / "rdmaforge" / "mpi-links-created")}}],
    }]))  # fmt: skip
    return run_playbook(str(playbook), *extra, inventory=inventory, env=ENV, timeout=300)


def test_the_commands_are_linked_once(tmp_path: Path) -> None:
    first = link_run(tmp_path)
    assert first.returncode == 0, first.stdout[-3000:]
    for name in COMMANDS:
        assert (tmp_path / "local-bin" / name).readlink() == tmp_path / "openmpi" / "bin" / name
    again = link_run(tmp_path)
    assert again.returncode == 0 and recap(again.stdout)["localhost"]["changed"] == 0, again.stdout[-3000:]
    checked = link_run(tmp_path, "--check")
    assert checked.returncode == 0 and recap(checked.stdout)["localhost"]["changed"] == 0, checked.stdout[-3000:]


def test_a_command_that_is_another_mpis_file_is_refused_in_check_mode_as_in_a_run(tmp_path: Path) -> None:
    (tmp_path / "local-bin").mkdir()
    other = tmp_path / "local-bin" / "mpirun"
    other.write_text("#!/bin/sh\necho another MPI\n")
    for extra in (["--check"], []):
        proc = link_run(tmp_path, *extra)
        assert proc.returncode != 0, proc.stdout[-3000:]
        said = " ".join(proc.stdout.split())
        assert f"localhost: {other} is a file, not links, so another MPI is installed there" in said, said[-3000:]
    assert other.read_text() == "#!/bin/sh\necho another MPI\n" and not (tmp_path / "local-bin" / "mpiexec").exists()


def test_a_command_that_is_a_link_to_another_mpi_is_refused_and_kept(tmp_path: Path) -> None:
    """A link to another MPI (outside mpi_bin_dir) was re-pointed at rdmaforge's without a word, and reset then removed
    it (it led into mpi_bin_dir by then). Refused by name like a file, in check mode as in a run; it stays as it was."""
    other_bin = tmp_path / "openmpi-4.1" / "bin"
    other_bin.mkdir(parents=True)
    (other_bin / "mpirun").write_text("#!/bin/sh\necho openmpi 4.1\n")
    (tmp_path / "local-bin").mkdir()
    users = tmp_path / "local-bin" / "mpirun"
    users.symlink_to(other_bin / "mpirun")
    for extra in (["--check"], []):
        proc = link_run(tmp_path, *extra)
        assert proc.returncode != 0, proc.stdout[-3000:]
        said = " ".join(proc.stdout.split())
        assert f"localhost: {users} -> {other_bin / 'mpirun'} is a link to another MPI" in said, said[-3000:]
        assert users.is_symlink() and users.readlink() == other_bin / "mpirun"
        assert not (tmp_path / "local-bin" / "mpiexec").exists()


def test_a_dangling_link_to_another_mpi_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "local-bin").mkdir()
    users = tmp_path / "local-bin" / "mpiexec"
    users.symlink_to(tmp_path / "gone-mpi" / "bin" / "mpiexec")
    proc = link_run(tmp_path)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert f"{users} -> {tmp_path / 'gone-mpi' / 'bin' / 'mpiexec'} is a link to another MPI" in " ".join(
        proc.stdout.split()
    ), proc.stdout[-3000:]
    assert users.readlink() == tmp_path / "gone-mpi" / "bin" / "mpiexec"


def test_rdmaforges_own_links_spelt_relative_are_not_refused(tmp_path: Path) -> None:
    """A link into mpi_bin_dir (relative text, resolving there) is rdmaforge's: accepted, and the run goes on."""
    (tmp_path / "local-bin").mkdir()
    (tmp_path / "openmpi" / "bin").mkdir(parents=True)
    (tmp_path / "local-bin" / "mpirun").symlink_to(Path("..") / "openmpi" / "bin" / "mpirun")
    proc = link_run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    for name in COMMANDS:
        assert (tmp_path / "local-bin" / name).resolve() == tmp_path / "openmpi" / "bin" / name


def test_reset_removes_the_links_rdmaforge_made_and_keeps_one_made_by_hand(tmp_path: Path) -> None:
    """On RHEL a hand-made /usr/local/bin/mpirun -> /usr/lib64/openmpi/bin/mpirun is common: the converge accepted
    it as its own (it leads into mpi_bin_dir) and reset removed it (review round 15a). Only the links the converge
    made are recorded, and reset removes those."""
    (tmp_path / "local-bin").mkdir()
    by_hand = tmp_path / "local-bin" / "mpirun"
    by_hand.symlink_to(tmp_path / "openmpi" / "bin" / "mpirun")
    made = link_run(tmp_path)
    assert made.returncode == 0, made.stdout[-3000:]
    assert (tmp_path / "var" / "lib" / "rdmaforge" / "mpi-links-created").read_text().split() == [
        str(tmp_path / "local-bin" / "mpiexec")
    ]
    assert recap(link_run(tmp_path).stdout)["localhost"]["changed"] == 0
    reset = link_run(tmp_path, tasks_from="withdraw")
    assert reset.returncode == 0, reset.stdout[-3000:]
    assert by_hand.is_symlink() and not (tmp_path / "local-bin" / "mpiexec").exists()
    assert not (tmp_path / "var" / "lib" / "rdmaforge" / "mpi-links-created").exists()


def test_a_command_the_mpi_lacks_is_refused_before_any_link_is_made(tmp_path: Path) -> None:
    """The default list's orted, which an OpenMPI 5 prefix lacks: --check passed, the run linked the commands before it
    and then failed on it, and those links were recorded by no run (the record was written after the links, and the
    run after the fix found them there), so reset kept them for good (review round 41b). Refused now before any link,
    in check mode too; the run after the fix records and makes every link, and reset removes them all."""
    listed = [*COMMANDS, "orted"]
    record = tmp_path / "var" / "lib" / "rdmaforge" / "mpi-links-created"
    for extra in (["--check"], []):
        proc = link_run(tmp_path, *extra, commands=listed)
        assert proc.returncode != 0, proc.stdout[-3000:]
        said = " ".join(proc.stdout.split())
        assert (f"localhost: mpi_link_commands names orted, which {tmp_path / 'openmpi' / 'bin'} does not hold, and no "
                "link was made; allowed: commands in") in said, said[-3000:]  # fmt: skip
        assert "its daemon is prted" in said
        assert list((tmp_path / "local-bin").iterdir()) == [] and not record.exists()
    fixed = link_run(tmp_path)
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    assert record.read_text().split() == [str(tmp_path / "local-bin" / name) for name in COMMANDS]
    reset = link_run(tmp_path, tasks_from="withdraw")
    assert reset.returncode == 0 and list((tmp_path / "local-bin").iterdir()) == [], reset.stdout[-3000:]


def test_the_links_are_recorded_before_they_are_made() -> None:
    """Written after them, a run that failed part-way through the links left the ones it made unrecorded, and reset
    kept them (review round 41b); written before, as os_packages records its packages."""
    from rdmaforge.paths import PROJECT_ROOT

    tasks = yaml.safe_load((PROJECT_ROOT / "roles/mpi/tasks/links.yml").read_text())
    (record,) = [i for i, task in enumerate(tasks) if "rdmaforge.cluster.text_file" in task]
    (link,) = [i for i, task in enumerate(tasks) if "ansible.builtin.file" in task]
    assert record < link
