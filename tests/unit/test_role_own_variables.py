"""A role's own variables set in an inventory (review round 23b): what a role's vars/main.yml sets outranks the
inventory, what its tasks set_fact or register overwrites it; either way the inventory's value changes nothing,
without a word. The commands that read an inventory refuse it before anything runs, naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rdmaforge.cli import main
from rdmaforge.inventory_checks import role_own_variables
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import ExitCode

ROLES = PROJECT_ROOT / "roles"


def test_a_roles_vars_and_what_its_tasks_set_are_its_own_and_no_default_is() -> None:
    own = role_own_variables(str(ROLES))
    eni_vars = yaml.safe_load((ROLES / "eni" / "vars" / "main.yml").read_text())
    assert {name: own[name] for name in eni_vars} == {name: "roles/eni/vars/main.yml" for name in eni_vars}
    assert own["eni_selected"] == "roles/eni/tasks/main.yml"  # set_fact
    assert own["eni_netplan_files"] == "roles/eni/tasks/main.yml"  # register
    for defaults in ROLES.glob("*/defaults/main.yml"):
        assert not set(yaml.safe_load(defaults.read_text()) or {}) & set(own), defaults


def inventory(tmp_path: Path, group_vars: dict[str, object], host_vars: dict[str, object] | None = None) -> Path:
    hosts = {"node1": {"ansible_host": "198.18.0.11", **(host_vars or {})}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "cluster.yml").write_text(yaml.safe_dump({"rdmaforge_fabric": "tcp", **group_vars}))
    return tmp_path / "hosts.yml"


@pytest.mark.parametrize("command", ["provision", "doctor", "render"])
def test_an_inventory_setting_a_roles_own_variable_is_refused_before_anything_runs(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = inventory(tmp_path, {"nccl_plugin_lib_dir": "/opt/plugins"}, {"eni_selected": ["eth1"]})
    runs = tmp_path / "runs"
    where = ["-o", str(tmp_path / "out")] if command == "render" else ["--runs-dir", str(runs)]
    code = main([command, "-i", str(hosts), *where])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    assert (f"{tmp_path / 'group_vars' / 'cluster.yml'}: nccl_plugin_lib_dir is no setting: the role sets it itself "
            "(roles/nccl_plugin/vars/main.yml), which outranks an inventory's value") in err  # fmt: skip
    assert (f"{hosts}: eni_selected is no setting: the role sets it itself (roles/eni/tasks/main.yml), as its "
            "tasks run, so this value would be overwritten") in err  # fmt: skip
    assert "allowed: leave it out" in err
    assert not runs.exists() and not (tmp_path / "out").exists()


def test_a_roles_settings_are_not_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = inventory(tmp_path, {"eni_interfaces": ["eth1"], "nccl_plugin_enabled": False,
                                 "workload_manifests_gpus_per_node": 8, "hugepages_enabled": True})  # fmt: skip
    code = main(["render", "-i", str(hosts), "-o", str(tmp_path / "out")])
    assert code == ExitCode.OK, capsys.readouterr().err


def test_each_finding_names_the_group_or_host_it_is_set_for(tmp_path: Path) -> None:
    """Review round 26: preflight blamed every host of hosts.yml for one host's entry, and every host for a file
    under group_vars/<group>/<dir>/."""
    from rdmaforge.inventory_files import role_own_variable_findings

    hosts = {"node1": {"eni_selected": ["eth1"]}, "node2": {}}
    doc = {"all": {"vars": {"mpi_bin_dir": "/x"}, "children": {"cluster": {"hosts": hosts,
                                                                           "vars": {"eni_plan": {}}}}}}  # fmt: skip
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(doc))
    nested = tmp_path / "group_vars" / "gpu" / "site"
    nested.mkdir(parents=True)
    (nested / "x.yml").write_text(yaml.safe_dump({"nccl_plugin_lib_dir": "/opt"}))
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "node2").write_text(yaml.safe_dump({"benchmark_nodes": []}))
    findings = role_own_variable_findings(tmp_path / "hosts.yml")
    found = {(f.setting.name, f.setting.group, f.setting.host) for f in findings}
    assert found == {("eni_selected", None, "node1"), ("mpi_bin_dir", "all", None), ("eni_plan", "cluster", None),
                     ("nccl_plugin_lib_dir", "gpu", None), ("benchmark_nodes", None, "node2")}  # fmt: skip


def test_an_ini_inventory_json_vars_and_a_dotted_hosts_file_are_read_too(tmp_path: Path) -> None:
    """Review round 26: only YAML files were read, so the same mistake in an INI inventory, a JSON vars file or
    host_vars/<a name with dots> (which Ansible reads with no suffix) went through without a word."""
    from rdmaforge.inventory_files import role_own_variable_findings

    (tmp_path / "hosts").write_text("[cluster]\nnode1.example.com ansible_host=198.18.0.11 eni_selected=eth1\n"
                                    "gpu[1:3:2] mpi_bin_dir='/opt/a b'\n\n[cluster:vars]\neni_plan = {}\n"
                                    "[all:children]\ncluster\n")  # fmt: skip
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "cluster.json").write_text('{"nccl_plugin_lib_dir": "/opt"}')
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "node1.example.com").write_text("benchmark_nodes: []\n")
    (tmp_path / "host_vars" / "notes.txt").write_text("eni_plan: not read: no host is named so\n")
    findings = role_own_variable_findings(tmp_path / "hosts")
    found = {(f.path.name, f.setting.name, f.setting.group, f.setting.host) for f in findings}
    assert found == {("hosts", "eni_selected", None, "node1.example.com"), ("hosts", "mpi_bin_dir", None, "gpu1"),
                     ("hosts", "mpi_bin_dir", None, "gpu3"), ("hosts", "eni_plan", "cluster", None),
                     ("cluster.json", "nccl_plugin_lib_dir", "cluster", None),
                     ("node1.example.com", "benchmark_nodes", None, "node1.example.com")}  # fmt: skip


def test_an_ini_inventory_setting_a_roles_own_variable_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hosts").write_text("[cluster]\nnode1 ansible_host=198.18.0.11\n[cluster:vars]\n"
                                    "rdmaforge_fabric=tcp\nnccl_plugin_lib_dir=/opt/plugins\n")  # fmt: skip
    runs = tmp_path / "runs"
    code = main(["provision", "-i", str(tmp_path / "hosts"), "--runs-dir", str(runs)])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    assert f"{tmp_path / 'hosts'}: nccl_plugin_lib_dir is no setting: the role sets it itself" in err
    assert not runs.exists()


@pytest.mark.parametrize("pattern", ["node[01:12]", "n[a:c][1:4:2]", "gpu[8:10].example.com", "rack[0:1]-n[00:02]"])
def test_a_host_range_stands_for_the_names_ansible_expands_it_to(pattern: str) -> None:
    from ansible.plugins.inventory import expand_hostname_range

    from rdmaforge.inventory_checks import expand_host_range

    def ansible(text: str) -> list[str]:  # Ansible expands the first range; the rest in turn
        return [name for expanded in expand_hostname_range(text) for name in
                (ansible(expanded) if "[" in expanded else [expanded])]  # fmt: skip

    assert expand_host_range(pattern) == ansible(pattern)


def test_a_json_vars_file_is_read_as_ansible_reads_it_and_a_yaml_range_names_its_hosts(tmp_path: Path) -> None:
    """Review round 28: a tab-indented group_vars/*.json (JSON, but no YAML) was refused as a YAML syntax error
    (exit 64) although Ansible reads JSON first; a host_vars file named for a host of a YAML range was not read."""
    from rdmaforge.inventory_files import role_own_variable_findings, yaml_problems

    doc = {"all": {"children": {"cluster": {"hosts": {"gpu[01:02].example.com": {}}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(doc))
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "cluster.json").write_text('{\n\t"rdmaforge_fabric": "tcp",\n\t"eni_plan": {}\n}\n')
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu02.example.com").write_text("mpi_bin_dir: /x\n")
    problems = yaml_problems(tmp_path / "hosts.yml")
    assert not [p for p in problems if "syntax error" in p], problems
    found = {(f.path.name, f.setting.name) for f in role_own_variable_findings(tmp_path / "hosts.yml")}
    assert found == {("cluster.json", "eni_plan"), ("gpu02.example.com", "mpi_bin_dir")}


def test_a_key_given_twice_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    """Review round 29b: a host listed twice in hosts.yml, or a variable set twice in one group_vars file (YAML or
    JSON), was merged without a word (render wrote one node of two). Counted as Ansible 2.19 counts them (review
    round 31a): a key that overrides one a '<<' merge brought is one too (Ansible stops on it with ansible.cfg's
    duplicate_dict_key = error); two different !unsafe keys, or .nan twice, are not."""
    from rdmaforge.inventory_files import role_own_variable_findings, yaml_problems

    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    cluster:\n      hosts:\n"
        "        n1: {ansible_host: 192.0.2.1}\n        n2: {ansible_host: 192.0.2.2}\n"
        "        n1: {ansible_host: 192.0.2.3}\n"
    )
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.json").write_text('{"rdmaforge_fabric": "tcp",\n "eni_plan": {},\n'
                                                      ' "rdmaforge_fabric": "roce"}\n')  # fmt: skip
    (tmp_path / "group_vars" / "cluster.yml").write_text(
        "defaults: &base {mtu: 1500, retries: 2}\nrails:\n  <<: *base\n  mtu: 9000\n"
    )
    (tmp_path / "group_vars" / "nested.yml").write_text("top: 1\nnested:\n  a: {b: 1, b: 2}\n")
    (tmp_path / "group_vars" / "fine.yml").write_text(
        "labels: {!unsafe '{{ a }}': 1, !unsafe '{{ b }}': 2}\nodd: {.nan: 1, .nan: 2}\nplain: &p {x: 1}\n"
        "merged: {<<: *p, y: 2}\n"
    )
    # Round 32: Ansible reads `!unsafe a` as the key a, looks inside an !unsafe mapping, and stops on a tag it does
    # not know.
    (tmp_path / "group_vars" / "unsafe.yml").write_text("x: {a: 1, !unsafe a: 2}\n")
    (tmp_path / "group_vars" / "inside.yml").write_text("x: !unsafe {a: 1, a: 2}\n")
    (tmp_path / "group_vars" / "tagged.yml").write_text("x: !foo bar\n")
    problems = yaml_problems(tmp_path / "hosts.yml")
    by_file = {name: [p for p in problems if f"/{name}:" in p]
               for name in ("hosts.yml", "all.json", "cluster.yml", "nested.yml", "unsafe.yml", "inside.yml",
                            "tagged.yml")}  # fmt: skip
    assert "line 1 column 11: duplicate key: the key 'a' is given twice" in " ".join(by_file["unsafe.yml"]), problems
    assert "line 1 column 19: duplicate key: the key 'a' is given twice" in " ".join(by_file["inside.yml"]), problems
    assert "line 1 column 4: YAML syntax error: the tag !foo is not one Ansible reads" in " ".join(
        by_file["tagged.yml"]), problems  # fmt: skip
    assert by_file["hosts.yml"] == [
        f"{tmp_path / 'hosts.yml'}: line 7 column 9: duplicate key: the key 'n1' is given twice in one mapping (first "
        "on line 5); rdmaforge's ansible.cfg (duplicate_dict_key = error) makes Ansible stop on it, and its default "
        "keeps the last value; allowed: each key once per mapping"], problems  # fmt: skip
    (json_line,) = by_file["all.json"]
    assert "line 3 column 2: duplicate key: the key 'rdmaforge_fabric' is given twice in one JSON object; Ansible " \
           "would keep the last value without a word" in json_line, json_line  # fmt: skip
    (merge,), (nested,) = by_file["cluster.yml"], by_file["nested.yml"]
    assert "line 4 column 3" in merge and "the key 'mtu' is given twice in one mapping (it overrides the value a " \
           "'<<' merge brought from line 1)" in merge, merge  # fmt: skip
    assert "line 3 column 13" in nested and "the key 'b' is given twice in one mapping (first on line 3)" in nested
    assert len(problems) == 7, problems  # fine.yml: none
    # What the files set is still read, as Ansible reads them (the last value): a role's own variable in a file with
    # a key given twice is named too (review round 31a: such a file was skipped without a word).
    found = {(f.path.name, f.setting.name) for f in role_own_variable_findings(tmp_path / "hosts.yml")}
    assert ("all.json", "eni_plan") in found, found
