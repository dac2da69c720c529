"""Where the secret scrubber finds the values it removes from a run's artifacts: an INI inventory (host lines and
[group:vars]), the group_vars/ and host_vars/ beside any inventory, and every -e (files in JSON or YAML, inline
pairs and mappings). Each source is checked against a real `rdmaforge provision` run (ansible-runner against
this machine, ansible_connection=local), and the INI reading against Ansible's own (`ansible-inventory --list`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from ansible.parsing.vault import VaultLib, VaultSecret

from rdmaforge import cli
from rdmaforge.commands import provision
from rdmaforge.runner import execute, extravars, ini_inventory, secrets, vault
from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.secrets import REDACTED

VAULT_PASSWORD = "vault-pass-for-the-sources-test"

#: An INI inventory of the shapes Ansible accepts: quoted and unquoted values, comments, a range, children,
#: values that are Python literals, a vars line whose "comment" is part of the value.
TRICKY_INI = """\
# a comment
; another
lone ansible_connection=local

[cluster]
n[1:2] ansible_connection=local ansible_password="ini host pw 1" # a comment
n3 ansible_connection=local ansible_become_password='single-quoted-2' api_token=unquoted-token-3
n4 ansible_connection=local db_password="'double-then-single-4'" count=12345678

[cluster:vars]
ansible_become_pass = group pw five
registry_secret = 'quoted-group-6' # Python drops this comment
bmc_password=with = sign # and this one stays
credentials = {'user': 'admin', 'password': 'nested-pw-7'}
plain_setting = visible-setting-8
number_token = 87654321

[top:children]
cluster

[top:vars]
vault_token=top-token-9
"""


def encrypted(plaintext: str) -> str:
    return VaultLib([("default", VaultSecret(VAULT_PASSWORD.encode()))]).encrypt(plaintext).decode()


def ansible_hostvars(inventory: Path, tmp_path: Path) -> dict[str, dict[str, object]]:
    """What Ansible itself reads from ``inventory`` (ansible-inventory, in a process of its own)."""
    config = tmp_path / "empty.cfg"
    config.write_text("[defaults]\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(config), "ANSIBLE_NOCOLOR": "1"}
    tool = Path(sys.executable).parent / "ansible-inventory"
    result = subprocess.run([str(tool), "-i", str(inventory), "--list"], capture_output=True, text=True, env=env,
                            check=True, timeout=120)  # fmt: skip
    hostvars: dict[str, dict[str, object]] = json.loads(result.stdout)["_meta"]["hostvars"]
    return hostvars


def test_ini_values_are_read_as_ansible_reads_them(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(TRICKY_INI)
    read = ini_inventory.variables(TRICKY_INI)
    ours = [(name, json.dumps(value, sort_keys=True)) for pairs in read for name, value in pairs.items()]
    theirs = ansible_hostvars(inventory, tmp_path)
    assert set(theirs) == {"lone", "n1", "n2", "n3", "n4"}
    for host, variables in theirs.items():
        for name, value in variables.items():
            assert (name, json.dumps(value, sort_keys=True)) in ours, (host, name, value)
    found = execute.secret_values(execute.Request(inventory=inventory))
    assert found == {"ini host pw 1", "single-quoted-2", "unquoted-token-3", "double-then-single-4",
                     "group pw five", "quoted-group-6", "with = sign # and this one stays", "admin", "nested-pw-7",
                     "87654321", "top-token-9"}  # fmt: skip
    assert theirs["n3"]["api_token"] == "unquoted-token-3" and theirs["n1"]["credentials"] == {
        "user": "admin", "password": "nested-pw-7"}  # fmt: skip


def test_a_file_without_extension_is_yaml_when_it_is_a_mapping_else_ini(tmp_path: Path) -> None:
    yaml_hosts = tmp_path / "yaml" / "hosts"
    yaml_hosts.parent.mkdir()
    yaml_hosts.write_text("all:\n  vars:\n    ansible_password: yaml-pw-1\n  hosts:\n    n1: {}\n")
    ini_hosts = tmp_path / "ini" / "hosts"
    ini_hosts.parent.mkdir()
    ini_hosts.write_text("n1 ansible_password=ini-pw-2\n")
    assert execute.secret_values(execute.Request(inventory=yaml_hosts)) == {"yaml-pw-1"}
    assert execute.secret_values(execute.Request(inventory=ini_hosts)) == {"ini-pw-2"}


def test_vars_beside_an_ini_inventory_and_in_an_inventory_directory(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "cluster").mkdir(parents=True)
    (inventory / "host_vars").mkdir()
    (inventory / "sub").mkdir()
    (inventory / ".git").mkdir()
    (inventory / "hosts.ini").write_text("[cluster]\nn1 ansible_password=ini-pw-1\n")
    (inventory / "sub" / "more").write_text("[cluster]\nn2 ansible_become_pass=sub-ini-pw-2\n")
    (inventory / "group_vars" / "cluster" / "main.yml").write_text("api_token: gv-dir-token-3\n")
    (inventory / "group_vars" / "all").write_text("registry_password: gv-noext-pw-4\n")
    (inventory / "group_vars" / "cluster" / "more.json").write_text('{\n\t"db_password": "gv-json-pw-5"\n}\n')
    (inventory / "host_vars" / "n1.yaml").write_text("bmc:\n  password: hv-nested-pw-6\nplain: shown\n")
    (inventory / ".git" / "config").write_text("n9 ansible_password=never-read-9\n")
    beside_file = {"ini-pw-1", "gv-dir-token-3", "gv-noext-pw-4", "gv-json-pw-5", "hv-nested-pw-6"}
    assert execute.secret_values(execute.Request(inventory=inventory / "hosts.ini")) == beside_file
    assert execute.secret_values(execute.Request(inventory=inventory)) == beside_file | {"sub-ini-pw-2"}
    # group_vars beside the playbook are Ansible's too.
    plays = tmp_path / "plays"
    (plays / "group_vars").mkdir(parents=True)
    (plays / "group_vars" / "all.yml").write_text("ansible_password: playbook-gv-pw-7\n")
    request = execute.Request(inventory=inventory / "hosts.ini", playbook=plays / "site.yml")
    assert "playbook-gv-pw-7" in execute.secret_values(request)


def test_every_extra_vars_source_counts_an_overridden_one_too(tmp_path: Path) -> None:
    tabbed = tmp_path / "extra.json"
    tabbed.write_text('{\n\t"db_password": "json-file-pw-1",\n\t"plain": "shown"\n}\n')  # JSON, not YAML
    yml = tmp_path / "extra.yml"
    yml.write_text("db_password: yaml-file-pw-2\n")
    sources = extravars.parse([f"@{tabbed}", f"@{yml}", '{"api_token": "inline-json-3"}', "db_password=inline-4"])
    found = execute.secret_values(execute.Request(inventory=tmp_path / "none.ini", extra_vars=sources))
    # db_password is set three times; Ansible sees the last, but the others were on disk and are kept out too.
    assert found == {"json-file-pw-1", "yaml-file-pw-2", "inline-json-3", "inline-4"}


def test_vaults_that_cannot_be_opened_leave_the_rest_readable(tmp_path: Path) -> None:
    """Without the password (or with a wrong one) a vaulted INI inventory, group_vars file or JSON value gives
    nothing, and nothing fails; with it, each gives its values."""
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    vaulted_ini = "[cluster]\nn1 ansible_password=vaulted-ini-pw-1 ansible_port=22\n"
    (inventory / "vaulted.ini").write_text(encrypted(vaulted_ini))
    (inventory / "plain.ini").write_text("[cluster]\nn2 ansible_password=plain-ini-pw-2\n")
    (inventory / "group_vars" / "all.yml").write_text(encrypted("db_password: vaulted-gv-pw-3\n"))
    vaulted_json = json.dumps({"bmc": {"__ansible_vault": encrypted("vaulted-json-4")}, "api_token": "json-tok-5"})
    (inventory / "group_vars" / "cluster.json").write_text(vaulted_json)
    wrong = tmp_path / "wrong"
    wrong.write_text("not the password\n")
    right = tmp_path / "right"
    right.write_text(VAULT_PASSWORD + "\n")
    for password_files in ((), (wrong,)):
        request = execute.Request(inventory=inventory, vault_password_files=password_files)
        assert execute.secret_values(request) == {"plain-ini-pw-2", "json-tok-5"}
    found = execute.secret_values(execute.Request(inventory=inventory, vault_password_files=(right,)))
    # A vaulted file's values are all secrets, whatever their names (22 is too short to replace safely).
    assert found == {"plain-ini-pw-2", "json-tok-5", "vaulted-ini-pw-1", "vaulted-gv-pw-3", "vaulted-json-4"}
    assert vault.load_inventory(tmp_path / "missing.ini") == vault.InventoryFile([])


# --- through the CLI, for real -------------------------------------------------------------------------------

SHOW = """---
- name: Print what the inventory and -e set, the careless way
  hosts: cluster
  gather_facts: false
  tasks:
{tasks}
"""
#: The variables the run sets, each from one of the sources, and what each holds.
SET = {
    "ansible_password": "ini host line pw 1",
    "ansible_become_password": "ini-group-vars-pw-2",
    "gv_api_token": "group-vars-token-3",
    "hv_secret": "host-vars-secret-4",
    "gv_db_password": "group-vars-json-pw-5",
    "efile_password": "extra-json-file-pw-6",
    "einline_token": "extra-inline-token-7",
    "ejson_secret": "extra-inline-json-8",
}
VISIBLE = {"plain_setting": "visible-setting-9", "efile_setting": "visible-extra-10"}


def test_a_provision_run_keeps_secrets_from_every_source_out_of_its_artifacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = "".join(
        f"    - name: Show {name}\n      ansible.builtin.debug:\n        msg: \"{name} is {{{{ {name} }}}}\"\n"
        for name in [*SET, *VISIBLE]
    )
    playbook = tmp_path / "show.yml"
    playbook.write_text(SHOW.format(tasks=tasks))
    monkeypatch.setattr(provision, "playbook", lambda name: playbook)
    inventory = tmp_path / "inventory" / "hosts.ini"
    (inventory.parent / "group_vars" / "all").mkdir(parents=True)
    (inventory.parent / "host_vars").mkdir()
    python = shlex.quote(sys.executable)
    inventory.write_text(
        "[cluster]\n"
        f"n1 ansible_connection=local ansible_python_interpreter={python} "
        f"ansible_password=\"{SET['ansible_password']}\"  # quoted, with blanks\n"
        "[cluster:vars]\n"
        f"ansible_become_password = '{SET['ansible_become_password']}'\n"
        f"plain_setting = {VISIBLE['plain_setting']}\n"
    )
    (inventory.parent / "group_vars" / "cluster.yml").write_text(f"gv_api_token: {SET['gv_api_token']}\n")
    (inventory.parent / "host_vars" / "n1").write_text(f"hv_secret: {SET['hv_secret']}\n")
    gv_json = {"gv_db_password": SET["gv_db_password"]}
    (inventory.parent / "group_vars" / "all" / "db.json").write_text(json.dumps(gv_json, indent="\t"))
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"efile_password": SET["efile_password"], "efile_setting": VISIBLE["efile_setting"]},
                                indent="\t"))  # fmt: skip
    code = cli.main(["provision", "-i", str(inventory), "--runs-dir", str(tmp_path / "runs"), "-e", f"@{extra}",
                     "-e", f"einline_token={SET['einline_token']}",
                     "-e", json.dumps({"ejson_secret": SET["ejson_secret"]})])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, (out + err)[-3000:]
    files = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    stdout = next(p for p in files if p.parts[-2:] == ("ansible", "stdout")).read_text()
    for name in SET:
        assert f"{name} is {REDACTED}" in stdout, name  # the task printed it; the artifact does not keep it
    for name, value in VISIBLE.items():
        assert f"{name} is {value}" in stdout, name
    for path in files:
        text = path.read_text(errors="replace")
        for name, value in SET.items():
            assert value not in text and json.dumps(value)[1:-1] not in text, (path, name)
    assert not any(value in out + err for value in SET.values())  # nor the terminal's copy


def test_secret_names_cover_the_ini_connection_variables() -> None:
    for name in ("ansible_password", "ansible_ssh_pass", "ansible_become_password", "ansible_become_pass",
                 "ansible_sudo_pass"):  # fmt: skip
        assert secrets.is_secret_name(name), name


FAILING = """---
- name: Fail with a secret in the message
  hosts: cluster
  gather_facts: false
  tasks:
    - name: Warn about {{ api_token }}
      ansible.builtin.debug:
        msg: "WARNING: token {{ api_token }} expires soon"
    - name: Fail loudly
      ansible.builtin.fail:
        msg: "the password is {{ ansible_password }}"
"""


def test_failure_messages_and_warnings_are_redacted_in_recap_junit_and_on_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The events on disk were scrubbed, but the recap table, recap.json and the JUnit reports (the run
    directory's and --junit's) were written from the events as they arrived, secrets and all."""
    playbook = tmp_path / "fail.yml"
    playbook.write_text(FAILING)
    monkeypatch.setattr(provision, "playbook", lambda name: playbook)
    inventory = tmp_path / "hosts.ini"
    python = shlex.quote(sys.executable)
    host = f"n1 ansible_connection=local ansible_python_interpreter={python} ansible_password='ini-failure-pw-1'"
    inventory.write_text(f"[cluster]\n{host}\n[cluster:vars]\napi_token=ini-warning-tok-2\n")
    junit = tmp_path / "ci" / "junit.xml"
    code = cli.main(["provision", "-i", str(inventory), "--runs-dir", str(tmp_path / "runs"), "--junit", str(junit)])
    out, err = capsys.readouterr()
    assert code == ExitCode.HOST_FAILED, (out + err)[-3000:]
    assert f"the password is {REDACTED}" in out and f"WARNING: token {REDACTED} expires soon" in out
    written = [junit, *(p for p in (tmp_path / "runs").rglob("*") if p.is_file())]
    assert {"recap.json", "junit.xml"} <= {p.name for p in written}
    for text in [out, err, *(p.read_text(errors="replace") for p in written)]:
        assert "ini-failure-pw-1" not in text and "ini-warning-tok-2" not in text
    recap = json.loads(next(p for p in written if p.name == "recap.json").read_text())
    assert recap["problems"][0]["message"] == f"the password is {REDACTED}"


def test_redacting_an_event_keeps_its_shape() -> None:
    event = {"event": "runner_on_failed", "event_data": {"host": "n1", "res": {"msg": "pw s3cret-1!", "rc": 2,
             "results": [{"item": "s3cret-1!", "ok": True}], "s3cret-1!": None}}}  # fmt: skip
    clean = secrets.redact_data(event, ["s3cret-1!"])
    assert clean == {"event": "runner_on_failed", "event_data": {"host": "n1", "res": {"msg": f"pw {REDACTED}",
                     "rc": 2, "results": [{"item": REDACTED, "ok": True}], REDACTED: None}}}  # fmt: skip
    assert event["event_data"]["res"]["msg"] == "pw s3cret-1!"  # a copy: the original is left as it was
    deep: dict[str, object] = {"a": "s3cret-1!"}
    for _ in range(5000):
        deep = {"a": deep}
    secrets.redact_data(deep, ["s3cret-1!"])  # no recursion limit


#: A vaulted value of several lines (a client configuration), which a play prints line by line.
MULTI_LINE = "[client-config]\nuser = multi-line-admin-1\npassword = multi-line-pw-2\n"
LINES = """---
- name: Show what the run was given, line by line
  hosts: cluster
  gather_facts: false
  tasks:
{tasks}
"""


def local_inventory(tmp_path: Path, group_vars: str = "") -> Path:
    inventory = tmp_path / "inventory" / "hosts.ini"
    (inventory.parent / "group_vars").mkdir(parents=True)
    python = shlex.quote(sys.executable)
    inventory.write_text(f"[cluster]\nn1 ansible_connection=local ansible_python_interpreter={python}\n")
    (inventory.parent / "group_vars" / "cluster.yml").write_text(group_vars)
    return inventory


def test_provision_v_hides_each_line_of_a_multi_line_vaulted_value_and_reads_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Printed as a list of its lines, a multi-line secret is in no event string, no line of Ansible's output, as a
    whole: -v showed its lines, and the job events and ansible/stdout kept them. And the run directory's last scrub
    (command.finish) read again every file the run's own scrub had just read."""
    playbook = tmp_path / "lines.yml"
    debug = "    - name: Show the client configuration\n      ansible.builtin.debug:\n"
    playbook.write_text(LINES.format(tasks=debug + "        msg: \"{{ client_config.splitlines() }}\"\n"))
    monkeypatch.setattr(provision, "playbook", lambda name: playbook)
    vaulted = "".join(f"  {line}\n" for line in encrypted(MULTI_LINE).splitlines())
    inventory = local_inventory(tmp_path, f"client_config: !vault |\n{vaulted}")
    password = tmp_path / "vault-pass"
    password.write_text(VAULT_PASSWORD)
    runs = tmp_path / "runs"
    reads: Counter[Path] = Counter()
    read_bytes = Path.read_bytes

    def counted(path: Path) -> bytes:
        if runs in path.parents:
            reads[path] += 1
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", counted)
    code = cli.main(["provision", "-i", str(inventory), "--runs-dir", str(runs), "-v",
                     "--vault-password-file", str(password)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, (out + err)[-3000:]
    lines = MULTI_LINE.splitlines()
    assert f'"msg": [\n        "{REDACTED}",\n        "{REDACTED}",' in out  # -v showed the list, redacted
    files = [p for p in runs.rglob("*") if p.is_file()]
    for text in [out, err, *(p.read_text(errors="replace") for p in files)]:
        assert not [line for line in lines if line in text]
    assert reads and max(reads.values()) == 1, [p for p, count in reads.items() if count > 1]


def test_secret_named_environment_values_are_secrets_of_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run inherits the environment (a CI job's deploy token): a task that printed one (lookup('env')) left it
    on screen and in the artifacts, and `command` recorded a key whose name only ends in _KEY. Secret-named settings
    that are numbers or booleans (MAX_TOKENS, TOKENIZERS_PARALLELISM) are shown: hidden, they would mangle every
    such number and every JSON false in the artifacts."""
    environment = {"CI_DEPLOY_TOKEN": "env-deploy-token-1", "ENCRYPTION_KEY": "env-encryption-key-2",
                   "MAX_TOKENS": "4096", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    shown = " ".join(f"{name}={{{{ lookup('env', '{name}') }}}}" for name in environment)
    playbook = tmp_path / "env.yml"
    debug = "    - name: Show the environment\n      ansible.builtin.debug:\n"
    playbook.write_text(LINES.format(tasks=debug + f'        msg: "{shown}"\n'))
    monkeypatch.setattr(provision, "playbook", lambda name: playbook)
    runs = tmp_path / "runs"
    code = cli.main(["provision", "-i", str(local_inventory(tmp_path)), "--runs-dir", str(runs), "-v"])
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, (out + err)[-3000:]
    expected = f"CI_DEPLOY_TOKEN={REDACTED} ENCRYPTION_KEY={REDACTED} MAX_TOKENS=4096 TOKENIZERS_PARALLELISM=false"
    files = [p for p in runs.rglob("*") if p.is_file()]
    assert expected in out and expected in next(p for p in files if p.parts[-2:] == ("ansible", "stdout")).read_text()
    for text in [out, err, *(p.read_text(errors="replace") for p in files)]:
        assert "env-deploy-token-1" not in text and "env-encryption-key-2" not in text
    recorded = json.loads(next(p for p in files if p.parts[-2:] == ("ansible", "command")).read_text())["env"]
    assert recorded["ENCRYPTION_KEY"] == REDACTED and recorded["CI_DEPLOY_TOKEN"] == REDACTED
