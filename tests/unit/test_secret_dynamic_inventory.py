"""The secrets a dynamic inventory supplies (an inventory script, a plugin's configuration, TOML, or a directory
mixing them with static files) reach the scrubber as Ansible lists them, before the run: the real
`ansible-inventory` of this venv runs a tiny executable script in tmp_path (no network). When the listing fails,
nothing runs."""

from __future__ import annotations

import json
import os
import shlex
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.vault import VaultLib, VaultSecret

from rdmaforge import cli
from rdmaforge.commands import provision, verify
from rdmaforge.errors import CannotRun
from rdmaforge.runner import execute, inventory_list
from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.secrets import REDACTED
from tests.processes import sleeper


def script(path: Path, listing: dict[str, Any], exit_code: int = 0) -> Path:
    """An executable inventory script printing ``listing`` for --list (it is never asked --host: _meta is there)."""
    path.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps({listing!r}))\n"
                    "print('inventory script stderr: cloud API down', file=sys.stderr)\n"
                    f"sys.exit({exit_code})\n")  # fmt: skip
    path.chmod(0o755)
    return path


def listing(host: str, hostvars: dict[str, Any], groupvars: dict[str, Any]) -> dict[str, Any]:
    return {"cluster": {"hosts": [host], "vars": groupvars}, "_meta": {"hostvars": {host: hostvars}}}


def test_a_script_a_plugin_config_and_toml_are_listed_static_inventories_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = inventory_list.listing

    def counted(inventory: str, **kwargs: Any) -> str:
        calls.append(inventory)
        return real(inventory, **kwargs)

    monkeypatch.setattr(inventory_list, "listing", counted)
    alone = script(tmp_path / "inventory.py", listing("n1", {"ansible_password": "script-host-pw-1",
                   "plain_setting": "visible-setting-2"}, {"api_token": "script-group-tok-3"}))  # fmt: skip
    assert execute.secret_values(execute.Request(inventory=alone)) == {"script-host-pw-1", "script-group-tok-3"}
    # A directory mixing a script with an INI file and a constructed plugin (composed from the script's hosts).
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    script(mixed / "cloud.py", listing("n2", {"ansible_become_pass": "dir-script-pw-4"}, {}))
    (mixed / "hosts.ini").write_text("[cluster]\nn3 ansible_password=dir-ini-pw-5\n")
    (mixed / "z_constructed.yml").write_text("plugin: ansible.builtin.constructed\nstrict: true\n"
                                             "compose:\n  bmc_password: \"'composed-' ~ inventory_hostname\"\n")
    # The plugin's configuration is read as it stands too (where its credentials are): the expression is kept out.
    assert execute.secret_values(execute.Request(inventory=mixed)) == {"dir-script-pw-4", "dir-ini-pw-5",
        "composed-n2", "composed-n3", "'composed-' ~ inventory_hostname"}  # fmt: skip
    toml = tmp_path / "hosts.toml"
    toml.write_text('[cluster.hosts.n4]\nansible_password = "toml-pw-6"\n')
    assert execute.secret_values(execute.Request(inventory=toml)) == {"toml-pw-6"}
    assert calls == [str(alone), str(mixed), str(toml)]
    # Static inventories stay on the static readers: no ansible-inventory (a second or more per run).
    static = tmp_path / "static"
    (static / "group_vars").mkdir(parents=True)
    (static / "hosts.yml").write_text("all:\n  hosts:\n    n5:\n      ansible_password: yaml-pw-7\n")
    (static / "more.ini").write_text("n6 api_token=ini-tok-8\n")
    (static / "group_vars" / "all.yml").write_text("db_password: gv-pw-9\n")
    assert execute.secret_values(execute.Request(inventory=static)) == {"yaml-pw-7", "ini-tok-8", "gv-pw-9"}
    assert len(calls) == 3
    # Set to export, Ansible lists a group's variables on the group, no longer on each of its hosts.
    monkeypatch.setenv("ANSIBLE_INVENTORY_EXPORT", "True")
    assert execute.secret_values(execute.Request(inventory=alone)) == {"script-host-pw-1", "script-group-tok-3"}


def test_an_executable_static_inventory_is_read_as_ansible_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An INI or YAML inventory with its x bit set: Ansible's script plugin fails to start it (no #! line) and its
    ini or yaml plugin reads it, so the static readers do too, without ansible-inventory. A script with a #! line
    still is listed."""
    ini = tmp_path / "hosts.ini"
    ini.write_text("[cluster]\nn1 ansible_password=exec-ini-pw-1\n")
    yml = tmp_path / "hosts.yml"
    yml.write_text("all:\n  hosts:\n    n2:\n      api_token: exec-yaml-tok-2\n")
    for path in (ini, yml):
        path.chmod(0o755)
    # How Ansible itself reads them (its script plugin is tried first, and fails).
    assert inventory_list.listed(str(ini), cwd=tmp_path, env=execute.LIST_ENVIRONMENT)["_meta"]["hostvars"] == {
        "n1": {"ansible_password": "exec-ini-pw-1"}
    }
    assert inventory_list.listed(str(yml), cwd=tmp_path, env=execute.LIST_ENVIRONMENT)["_meta"]["hostvars"] == {
        "n2": {"api_token": "exec-yaml-tok-2"}
    }
    calls: list[str] = []
    monkeypatch.setattr(inventory_list, "listing", lambda inventory, **kwargs: calls.append(inventory) or "{}")
    assert execute.secret_values(execute.Request(inventory=ini)) == {"exec-ini-pw-1"}
    assert execute.secret_values(execute.Request(inventory=yml)) == {"exec-yaml-tok-2"}
    assert calls == []
    shebang = script(tmp_path / "inventory.py", listing("n3", {"ansible_password": "never-read-3"}, {}))
    execute.secret_values(execute.Request(inventory=shebang))
    assert calls == [str(shebang)]


def test_an_inventory_ansible_cannot_list_stops_the_run_before_ansible_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    (inventory / "hosts.ini").write_text("[cluster]\nn1 ansible_connection=local\n")
    failing = script(inventory / "cloud.py", listing("n2", {"ansible_password": "never-listed-1"}, {}), exit_code=1)
    with pytest.raises(CannotRun) as raised:
        execute.secret_values(execute.Request(inventory=inventory))
    message = str(raised.value)
    assert str(inventory) in message and str(failing) in message and "Nothing was run" in message
    assert f"Completely failed to parse inventory source {failing}" in message  # Ansible's words
    # and why, from the warnings about that source: the script's exit code and what it printed on stderr
    assert "exit code 1" in message and "inventory script stderr: cloud API down" in message
    assert f"`ansible-inventory -i {inventory} --list` succeeds" in message  # where to see why, and what to do
    runs = tmp_path / "runs"
    code = cli.main(["provision", "-i", str(inventory), "--runs-dir", str(runs)])
    out, err = capsys.readouterr()
    assert code == ExitCode.ERROR, (out + err)[-3000:]
    assert f"rdmaforge provision: cannot list the inventory {inventory}" in err
    assert not list(runs.rglob("ansible")), "Ansible started"


def test_a_broken_file_beside_a_script_is_bad_input_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The script answers; an INI file beside it does not parse (review round 35: exit 1, "cannot list", as if the
    cloud were down). As in an inventory without a script, that is the user's file: exit 64, naming it."""
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    script(inventory / "cloud.py", listing("n2", {"ansible_connection": "local"}, {}))
    broken = inventory / "hosts"
    broken.write_text("[cluster\nn1 ansible_connection=local\n")
    runs = tmp_path / "runs"
    code = cli.main(["provision", "-i", str(inventory), "--runs-dir", str(runs), "--json"])
    out, err = capsys.readouterr()
    assert code == ExitCode.BAD_INPUT, (out + err)[-3000:]
    assert f"Ansible cannot parse the inventory source {broken}" in err, err
    assert f"Completely failed to parse inventory source {broken}" in err, err  # Ansible's words
    assert json.loads(out)["exit_code"] == ExitCode.BAD_INPUT
    assert not list(runs.rglob("ansible")), "Ansible started"


def test_a_failing_script_linked_into_the_inventory_stays_could_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ansible names the failed source by the link's path, not its target's: the script's failure is no bad input."""
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    (inventory / "hosts.ini").write_text("[cluster]\nn1 ansible_connection=local\n")
    (tmp_path / "scripts").mkdir()
    target = script(tmp_path / "scripts" / "cloud.py", listing("n2", {}, {}), exit_code=1)
    (inventory / "cloud.py").symlink_to(target)
    code = cli.main(["provision", "-i", str(inventory), "--runs-dir", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    assert code == ExitCode.ERROR, (out + err)[-3000:]
    assert f"rdmaforge provision: cannot list the inventory {inventory}" in err, err


def test_the_cause_shown_of_a_failed_listing_is_a_few_lines_each_escaped(tmp_path: Path) -> None:
    """A script dying with a long traceback: the listing's error names its first and last lines (the exception),
    not all of them; a terminal escape it printed is shown as its escape; a token in a URL it printed is hidden."""
    failing = tmp_path / "cloud.py"
    failing.write_text(f"#!{sys.executable}\nimport sys\n"
                       "print('\\x1b[2Jcalling https://bot:gh-tok-99@api.example/v1', file=sys.stderr)\n"
                       "for n in range(40):\n    print(f'  frame {n}', file=sys.stderr)\n"
                       "print('RuntimeError: cloud API down', file=sys.stderr)\nsys.exit(3)\n")  # fmt: skip
    failing.chmod(0o755)
    with pytest.raises(inventory_list.InventoryError) as raised:
        inventory_list.listed(str(failing), cwd=tmp_path, env=execute.LIST_ENVIRONMENT)
    message = str(raised.value)
    assert f"Completely failed to parse inventory source {failing}" in message
    assert "exit code 3" in message and "RuntimeError: cloud API down" in message
    assert "frame 0" in message or "frame 39" in message  # some of the traceback
    assert len([line for line in message.splitlines() if "  frame " in line]) < 10, message
    assert "\x1b" not in message and "\\x1b[2J" in message and "gh-tok-99" not in message


FAKE_ERROR = "[ERROR]: Decryption failed (no vault secrets were found that could decrypt)"


def test_a_scripts_stderr_mimicking_ansibles_error_is_not_taken_for_the_cause(tmp_path: Path) -> None:
    """An inventory script prints a line that looks like Ansible's own error on stderr, and fails. Ansible quotes
    that stderr inside its warning, before its real error: the cause shown was the first "[ERROR]:" line of stderr,
    the script's. Ansible's messages are now recorded as Ansible displays them (inventory_cli, the way ansible-runner
    makes its events): the cause is the error Ansible displayed, and the script's line stays in its warning. Without
    the record, stderr's text gives the last error line: Ansible's, printed after every warning."""
    failing = tmp_path / "cloud.py"
    failing.write_text(f"#!{sys.executable}\nimport sys\nprint({FAKE_ERROR!r}, file=sys.stderr)\n"
                       "print('cloud API down', file=sys.stderr)\nsys.exit(2)\n")  # fmt: skip
    failing.chmod(0o755)
    real = f"[ERROR]: Completely failed to parse inventory source {failing}"
    with pytest.raises(inventory_list.InventoryError) as raised:
        inventory_list.listed(str(failing), cwd=tmp_path, env=execute.LIST_ENVIRONMENT)
    first, *warnings = str(raised.value).splitlines()
    assert first == f"ansible-inventory -i {failing} failed: {real}"
    # The script's stderr, whole, under the warning that quotes it
    quoted = warnings.index("  Standard error from inventory script:")
    assert warnings[quoted + 1 : quoted + 3] == [f"  {FAKE_ERROR}", "  cloud API down"], warnings
    # The same run's stderr as text, as when nothing was recorded: the fake line comes first, the real error last.
    import subprocess

    proc = subprocess.run(inventory_list.command(["-i", str(failing), "--list"]), cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "ANSIBLE_NOCOLOR": "1", **execute.LIST_ENVIRONMENT},
                          timeout=inventory_list.TIMEOUT_S, check=False)  # fmt: skip
    lines = proc.stderr.splitlines()
    assert proc.returncode != 0 and lines.index(FAKE_ERROR) < lines.index(real), proc.stderr
    assert inventory_list.ansible_error(proc.stderr) == real


SHOW = """---
- name: Print what the inventory script set, the careless way
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Show them
      ansible.builtin.debug:
        msg: "password is {{ ansible_password }}; token is {{ api_token }}; setting is {{ plain_setting }}"
"""


def test_a_run_with_a_script_inventory_keeps_its_secrets_out_of_the_artifacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    playbook = tmp_path / "show.yml"
    playbook.write_text(SHOW)
    monkeypatch.setattr(provision, "playbook", lambda name: playbook)
    local = {"ansible_connection": "local", "ansible_python_interpreter": shlex.quote(sys.executable)}
    inventory = script(tmp_path / "inventory.py", listing("n1", {**local, "ansible_password": "script-run-pw-1",
                       "plain_setting": "visible-setting-3"}, {"api_token": "script-run-tok-2"}))  # fmt: skip
    code = cli.main(["provision", "-i", str(inventory), "--runs-dir", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, (out + err)[-3000:]
    files = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    stdout = next(p for p in files if p.parts[-2:] == ("ansible", "stdout")).read_text()
    assert f"password is {REDACTED}; token is {REDACTED}; setting is visible-setting-3" in stdout
    assert any(p.parent.name == "job_events" for p in files)
    for path in [*files]:
        text = path.read_text(errors="replace")
        for value in ("script-run-pw-1", "script-run-tok-2"):
            assert value not in text and json.dumps(value)[1:-1] not in text, (path, value)
    assert "script-run-pw-1" not in out + err and "script-run-tok-2" not in out + err


#: Each host prints, in one line, what the run sees of it: its groups, every variable the inventory gives it (their
#: precedence resolved), the magic variables the inventory sets and the play's order of hosts.
SEEN = """---
- name: What the run sees of the inventory
  hosts: all
  gather_facts: false
  tasks:
    - name: Show it
      ansible.builtin.debug:
        msg: >-
          SEEN {{ inventory_hostname }} {{ {'groups': groups, 'group_names': group_names,
          'inventory_file': inventory_file, 'inventory_dir': inventory_dir, 'play_hosts': ansible_play_hosts_all,
          'vars': {'gp': gp | default(None), 'tag': tag | default(None), 'tag_raw': tag_raw | default(None),
                   'dirval': dirval | default(None), 'allv': allv | default(None),
                   'hostval': hostval | default(None), 'api_token': api_token | default(None),
                   'db_password': db_password | default(None)}} | to_json }}
"""


def counting_script(path: Path, counter: Path, listing_: dict[str, Any]) -> Path:
    """An inventory script that appends a line to ``counter`` each time it runs."""
    path.write_text(f"#!{sys.executable}\nimport json\nopen({str(counter)!r}, 'a').write('ran\\n')\n"
                    f"print(json.dumps({listing_!r}))\n")  # fmt: skip
    path.chmod(0o755)
    return path


def seen(text: str) -> dict[str, Any]:
    """host -> what the SEEN task printed for it, from Ansible's output."""
    found = {}
    for line in text.splitlines():
        if '"msg": "SEEN ' in line:
            host, _, data = json.loads("{" + line.strip().rstrip(",") + "}")["msg"].removeprefix("SEEN ").partition(" ")
            found[host] = json.loads(data)
    return found


@pytest.mark.parametrize("layout", ["file", "directory"])
def test_a_run_evaluates_its_dynamic_inventory_once_and_sees_what_ansible_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    """`rdmaforge provision` with an inventory script runs the script once (the listing the scrubber reads, reused
    by the run), and every host sees the same groups, variables (precedence resolved: group_vars/ beside the
    inventory above the script's own group variables; a whole-file-vaulted one decrypted), templates (a script's
    value is templated, a value the script marks unsafe is not) and inventory magic variables as ansible-playbook
    run on the inventory itself. The listing, decrypted values and all, is never on disk: while Ansible runs, no
    regular file under the run's private directory holds a secret; and another process of the user (one this test
    starts while Ansible runs) running the run's inventory script gets nothing of it."""
    playbook = tmp_path / "seen.yml"
    playbook.write_text(SEEN)
    monkeypatch.setattr(provision, "playbook", lambda name: playbook)
    counter = tmp_path / "runs.count"
    base = tmp_path / "inventory"
    (base / "group_vars").mkdir(parents=True)
    (base / "host_vars").mkdir()
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    data = {
        "zeta": {"hosts": ["n9", "n2"], "children": ["alpha"],
                 "vars": {"gp": "zeta-script", "tag": "{{ 6 * 7 }}", "tag_raw": {"__ansible_unsafe": "{{ 1 }}"}}},
        "alpha": {"hosts": ["n1"], "vars": {"gp": "alpha-script", "ansible_group_priority": 5}},
        "Upper": {"hosts": ["n3"]},
        "_meta": {"hostvars": {"n1": {"api_token": "count-run-tok-1"}, "n3": {"hostval": "n3-script"}}},
    }  # fmt: skip
    source = counting_script(base / "cloud.py", counter, data)
    (base / "group_vars" / "all.yml").write_text(yaml.safe_dump({**local, "allv": "all-dir"}))
    (base / "group_vars" / "zeta.yml").write_text("gp: zeta-dir\ndirval: '{{ 2 + 3 }}'\n")
    (base / "host_vars" / "n3.yml").write_text("hostval: n3-dir\n")
    password = tmp_path / "vault-pass.txt"
    password.write_text("replay-vault-pass\n")
    lib = VaultLib([("default", VaultSecret(b"replay-vault-pass"))])
    (base / "group_vars" / "Upper.yml").write_bytes(lib.encrypt("db_password: vaulted-gv-pw-5\n"))
    inventory = base if layout == "directory" else source
    truth = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                            "--vault-password-file", str(password), str(playbook)], capture_output=True, text=True,
                           check=True, cwd=tmp_path, env={**os.environ, **execute.runner_env()}).stdout  # fmt: skip
    expected = seen(truth)
    assert sorted(expected) == ["n1", "n2", "n3", "n9"] and expected["n1"]["vars"]["gp"] == "zeta-dir", truth
    assert expected["n3"]["vars"]["db_password"] == "vaulted-gv-pw-5", truth
    secret_values = ("count-run-tok-1", "vaulted-gv-pw-5")
    scans: list[Path] = []
    strangers: list[str] = []
    real_run = execute.ansible_runner.run

    def watched(**kwargs: Any) -> Any:
        """ansible_runner.run, with the run's private directory searched for secrets on each of Ansible's events."""
        assert Path(kwargs["inventory"]).name == inventory_list.REPLAY_SCRIPT, kwargs["inventory"]
        private = Path(kwargs["inventory"]).parents[1]
        handler = kwargs.pop("event_handler")

        def searched(event: Any) -> Any:
            for top, _, names in os.walk(private):  # symlinks (the user's group_vars/) not followed
                for name in names:
                    path = Path(top, name)
                    if path.is_file() and not path.is_symlink():
                        text = path.read_text(errors="replace")
                        assert not any(value in text for value in secret_values), path
            if not scans:  # a process of the user outside the run (this test's own) asks for the listing: refused
                stranger = subprocess.run([kwargs["inventory"]], capture_output=True, timeout=30)
                assert (stranger.returncode, stranger.stdout) == (1, b""), stranger
                strangers.append(stranger.stderr.decode())
            scans.append(private)
            return handler(event)

        return real_run(**kwargs, event_handler=searched)

    monkeypatch.setattr(execute.ansible_runner, "run", watched)
    counter.unlink()
    code = cli.main(["provision", "-i", str(inventory), "--vault-password-file", str(password),
                     "--runs-dir", str(tmp_path / "runs")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, (out + err)[-3000:]
    assert scans and not scans[0].exists()  # searched while Ansible ran; removed after
    assert strangers and "served only to the processes of its run" in strangers[0]
    assert counter.read_text().splitlines() == ["ran"]
    stdout = next((tmp_path / "runs").rglob("ansible/stdout")).read_text()
    got = seen(stdout)
    for host, name in (("n1", "api_token"), ("n3", "db_password")):  # the secrets, redacted in what the run keeps
        assert got[host]["vars"][name] == REDACTED, got[host]
        got[host]["vars"][name] = expected[host]["vars"][name]
    assert got == expected
    for path in (tmp_path / "runs").rglob("*"):
        for value in secret_values:
            assert not path.is_file() or value not in path.read_text(errors="replace"), (path, value)


def test_the_listing_is_replayed_where_each_hosts_source_is_known(tmp_path: Path) -> None:
    """A directory of several sources is read again by the run (which source a host came from, its inventory_file,
    is not in the listing). The listing, secrets and all, is never written to disk: the script the run reads gets it
    whole from this process each time it runs (twice in a row, and three at once), the directory is the user's
    alone, and when the block ends, even with an error, nothing serves it any more; a block whose script never ran
    ends at once."""
    base = tmp_path / "inventory"
    base.mkdir()
    sources = [script(base / "cloud.py", {}), base / "hosts.ini"]
    listed = json.dumps({"_meta": {"hostvars": {"n1": {"api_token": "replayed-tok-1"}}},
                         "all": {"children": ["ungrouped"]}, "ungrouped": {"hosts": ["n1"]}})  # fmt: skip
    with inventory_list.replay(listed, base, sources, tmp_path / "several") as none:
        assert none is None
    threads = threading.active_count()
    with inventory_list.replay(listed, base, sources[:1], tmp_path / "one") as replayed:
        assert replayed is not None
        files = list((tmp_path / "one").iterdir())
        assert files and all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in [tmp_path / "one", *files])
        for path in files:
            assert not path.is_file() or "replayed-tok-1" not in path.read_text(errors="replace"), path
        for _ in range(2):
            hostvars = inventory_list.listed(str(replayed.script), cwd=tmp_path, env=replayed.environment)
            # inventory_file and inventory_dir: Ansible's, not listed
            assert hostvars["_meta"]["hostvars"] == {"n1": {"api_token": "replayed-tok-1"}}
        run = {**os.environ, **replayed.environment}  # what a process of the run inherits
        alone = subprocess.run([str(replayed.script)], capture_output=True, check=True, timeout=30, env=run).stdout
        assert json.loads(alone)["_meta"]["hostvars"]["n1"]["api_token"] == "replayed-tok-1"
        readers = [subprocess.Popen([str(replayed.script)], stdout=subprocess.PIPE, env=run) for _ in range(3)]
        assert [reader.communicate(timeout=30)[0] for reader in readers] == [alone] * 3
    assert subprocess.run([str(replayed.script)], capture_output=True, env=run).returncode != 0
    assert not (tmp_path / "one" / inventory_list.REPLAY_SOCKET).exists()
    with pytest.raises(KeyboardInterrupt), inventory_list.replay(listed, base, sources[:1], tmp_path / "two"):
        raise KeyboardInterrupt
    assert not (tmp_path / "two" / inventory_list.REPLAY_SOCKET).exists()
    assert threading.active_count() == threads
    # A socket's path is short (108 bytes): too deep a directory, and the run reads the inventory itself.
    with inventory_list.replay(listed, base, sources[:1], tmp_path / ("d" * 120)) as deep:
        assert deep is None


REFUSED = b"rdmaforge: this listing of the inventory is served only to the processes of its run"


def test_the_listing_is_served_only_to_the_processes_of_its_run(tmp_path: Path) -> None:
    """The socket serves a process this one started with the run's environment, and what that process starts; any
    other process of the user gets not a byte, and its script says why: one this test starts with its own
    environment, or with another run's mark, this process itself, and a process of the run's environment whose
    parent died before it asked (its tree no longer reaches this process)."""
    listed = json.dumps({"_meta": {"hostvars": {"n1": {"api_token": "served-tok-1"}}},
                         "all": {"children": ["ungrouped"]}, "ungrouped": {"hosts": ["n1"]}})  # fmt: skip
    base = tmp_path / "inventory"
    base.mkdir()
    with inventory_list.replay(listed, base, [script(base / "cloud.py", {})], tmp_path / "one") as replayed:
        assert replayed is not None
        mark = replayed.environment[inventory_list.REPLAY_MARK]
        run = {**os.environ, **replayed.environment}
        served = subprocess.run([str(replayed.script)], capture_output=True, timeout=30, env=run)
        assert served.returncode == 0 and b"served-tok-1" in served.stdout, served
        # Under a shell, and its child: descendants of a process of the run.
        nested = subprocess.run(["sh", "-c", f"sh -c {shlex.quote(str(replayed.script))}"], capture_output=True,
                                timeout=30, env=run)  # fmt: skip
        assert nested.stdout == served.stdout, nested
        others = {
            "unrelated": dict(os.environ),
            "another run": {**run, inventory_list.REPLAY_MARK: mark + ".other"},
        }
        for name, env in others.items():
            refused = subprocess.run([str(replayed.script)], capture_output=True, timeout=30, env=env)
            assert (refused.returncode, refused.stdout) == (1, b""), (name, refused)
            assert refused.stderr.strip() == REFUSED, (name, refused)
        with socket.socket(socket.AF_UNIX) as own:  # this process: it holds the listing, it needs none from there
            own.connect(mark)
            own.settimeout(30)
            assert own.recv(65536) == b""
        # An orphan: started under a shell that exits at once, so Linux hands it to init (or a subreaper) first.
        out, done = tmp_path / "orphan.out", tmp_path / "orphan.rc"
        reader = shlex.quote(str(replayed.script))
        orphan = f"(sleep 1; {reader} > {out} 2>&1; echo $? > {done}.part; mv {done}.part {done}) &"
        subprocess.run(["sh", "-c", orphan], env=run, check=True, timeout=30)
        deadline = time.monotonic() + 120  # a hang guard: the loop ends as soon as the orphan has written its status
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.read_text().strip() == "1" and out.read_bytes().strip() == REFUSED
        # A process of the run is admitted by its pid and the user's uid; not with another uid, nor once gone.
        child = sleeper("rf-test-run-child", new_session=False, env=run)
        try:
            assert inventory_list.admitted((child.pid, os.getuid()), mark)
            assert not inventory_list.admitted((child.pid, os.getuid() + 1), mark)
        finally:
            child.kill()
            child.wait()
        assert not inventory_list.admitted((child.pid, os.getuid()), mark)


#: A testinfra suite standing in for tests/infra: what testinfra sees of each host (its variables as testinfra's
#: ansible-inventory lists them, a command, a module through ad-hoc ansible), recorded to SEEN_RECORD (the truth,
#: testinfra on the inventory itself) or compared with that record (under rdmaforge verify, which must write no
#: secret anywhere: the suite then searches the directory of its --ansible-inventory for the secrets while it runs);
#: and a test that fails printing a secret (pytest's output must be redacted).
SEEN_SUITE = """
import json, os, pathlib

def seen(host):
    return {"vars": host.ansible.get_variables(), "run": host.run("echo seen-by-run").stdout,
            "module": host.ansible("command", "echo seen-by-module", check=False)["stdout"]}

def test_seen(host, request):
    name = host.backend.host
    if "SEEN_RECORD" in os.environ:
        (pathlib.Path(os.environ["SEEN_RECORD"]) / (name + ".json")).write_text(json.dumps(seen(host)))
        return
    secrets = os.environ["SEEN_SECRET_VALUES"].split(",")
    private = pathlib.Path(request.config.option.ansible_inventory).parents[1]
    for top, _, names in os.walk(private):
        for file in names:
            path = pathlib.Path(top, file)
            if path.is_file() and not path.is_symlink():
                assert not any(value in path.read_text(errors="replace") for value in secrets), path
    expected = json.loads((pathlib.Path(os.environ["SEEN_EXPECTED"]) / (name + ".json")).read_text())
    assert seen(host) == expected

def test_shows_a_secret(host):
    assert host.ansible.get_variables().get("api_token") == "shown-in-the-failure"
"""


def test_verify_evaluates_its_dynamic_inventory_once_and_its_suite_sees_what_testinfra_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rdmaforge verify` with an inventory script runs the script once: its ping and its testinfra suite read the
    listing the scrubber read. testinfra's backend runs ansible-inventory --list once a pytest process, and ad-hoc
    ansible -i on it for each module call and for each command on a host whose connection it does not handle (n2's
    FQCN ansible.builtin.local): every one of those reads the listing. What the suite sees of each host (variables,
    a whole-file-vaulted group_vars file's decrypted through the vault flags, commands, modules) is what testinfra
    sees on the inventory itself; the listing is never on disk while the suite runs, and the secrets are redacted
    from all verify keeps and prints, a failing test's message too."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_seen.py").write_text(SEEN_SUITE)
    monkeypatch.setattr(verify, "SUITE", suite)
    counter = tmp_path / "runs.count"
    base = tmp_path / "inventory"
    (base / "group_vars").mkdir(parents=True)
    python = {"ansible_python_interpreter": sys.executable}
    data = {"cluster": {"hosts": ["n1", "n2"], "vars": {"site": "lab-a", "rdmaforge_fabric": "tcp"}},
            "_meta": {"hostvars": {"n1": {**python, "ansible_connection": "local", "api_token": "verify-tok-1"},
                                   "n2": {**python, "ansible_connection": "ansible.builtin.local"}}}}  # fmt: skip
    inventory = counting_script(base / "cloud.py", counter, data)
    password = tmp_path / "vault-pass.txt"
    password.write_text("verify-vault-pass\n")
    lib = VaultLib([("default", VaultSecret(b"verify-vault-pass"))])
    (base / "group_vars" / "cluster.yml").write_bytes(lib.encrypt("db_password: verify-vault-pw-2\n"))
    secret_values = ("verify-tok-1", "verify-vault-pw-2")
    record = tmp_path / "seen"
    record.mkdir()
    # The truth: the same suite, run by testinfra on the inventory itself.
    truth = subprocess.run([sys.executable, "-m", "pytest", str(suite), "-p", "no:cacheprovider", "-q", "-k",
                            "not shows", "--hosts=ansible://n1,ansible://n2", f"--ansible-inventory={inventory}"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=300,
                           env={**os.environ, **execute.runner_env(), "ANSIBLE_VAULT_IDENTITY_LIST": str(password),
                                "SEEN_RECORD": str(record)})  # fmt: skip
    assert truth.returncode == 0, truth.stdout[-3000:]
    expected = {host: json.loads((record / f"{host}.json").read_text()) for host in ("n1", "n2")}
    assert expected["n1"]["vars"]["api_token"] == "verify-tok-1", expected
    assert expected["n2"]["vars"]["db_password"] == "verify-vault-pw-2", expected
    assert expected["n2"]["run"] == "seen-by-run" and expected["n1"]["module"] == "seen-by-module", expected
    assert len(counter.read_text().splitlines()) > 1  # testinfra alone evaluates it more than once
    counter.unlink()
    suites: list[list[str]] = []
    real_suite = verify.run_suite

    def watched(argv: list[str], *args: Any, **kwargs: Any) -> int:
        suites.append(argv)
        return real_suite(argv, *args, **kwargs)

    monkeypatch.setattr(verify, "run_suite", watched)
    monkeypatch.setenv("SEEN_EXPECTED", str(record))
    monkeypatch.setenv("SEEN_SECRET_VALUES", ",".join(secret_values))
    runs = tmp_path / "runs"
    code = cli.main(["verify", "-i", str(inventory), "--vault-password-file", str(password), "-v",
                     "--runs-dir", str(runs)])  # fmt: skip
    out, err = capsys.readouterr()
    assert counter.read_text().splitlines() == ["ran"], (out + err)[-3000:]
    assert code == ExitCode.HOST_FAILED, (out + err)[-3000:]  # test_shows_a_secret fails on each node
    listed = [arg.removeprefix("--ansible-inventory=") for arg in suites[0] if arg.startswith("--ansible-inventory=")]
    assert Path(listed[0]).name == inventory_list.REPLAY_SCRIPT and not Path(listed[0]).exists(), suites
    tests = json.loads(next(runs.rglob("recap.json")).read_text())["tests"]
    assert {(t["test"], t["host"], t["status"]) for t in tests} == {
        ("test_seen", "n1", "passed"), ("test_seen", "n2", "passed"),
        ("test_shows_a_secret", "n1", "failed"), ("test_shows_a_secret", "n2", "failed"),
    }, tests  # fmt: skip
    assert f"assert '{REDACTED}' == 'shown-in-the-failure'" in out, out[-3000:]  # -v: pytest's output, redacted
    for value in secret_values:
        assert value not in out + err
        for path in runs.rglob("*"):
            assert not path.is_file() or value not in path.read_text(errors="replace"), (path, value)
