"""One definition of a fabric profile (issue 15): rdmaforge/fabrics.py. Nothing else may keep its own list of the
profile names: the static argument_specs ``choices`` must equal the table's, no other file under roles/,
rdmaforge/, library/, filter_plugins/, playbooks/, callback_plugins/ or tests/infra/ may hard-code the names, and
the roles' defaults computed from the table (rendered by Ansible for real) are the seeds' package lists and stay
overridable by an inventory."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_playbook

from rdmaforge import fabrics
from rdmaforge.collection import ensure_dev_tree
from rdmaforge.paths import PROJECT_ROOT

TABLE = PROJECT_ROOT / "rdmaforge" / "fabrics.py"
#: Where code and configuration live; documentation (*.md) may name the profiles.
SCANNED = ("roles", "rdmaforge", "library", "filter_plugins", "playbooks", "callback_plugins", "tests/infra")
#: YAML mappings keyed by every profile that are allowed outside the table: settings of the role's own, per profile
#: (not facts of the profile). Their keys must be exactly the table's names.
PER_PROFILE_MAPPINGS = {("roles/nccl_env/defaults/main.yml", "nccl_env_profiles")}
#: A list of names: this many distinct profile names within WINDOW consecutive lines, or in one literal.
MANY = 3
WINDOW = 3
NAME = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, fabrics.NAMES)) + r")(?![A-Za-z0-9_])")
CHOICES_LINE = re.compile(r"^\s*choices:\s*\[(?P<items>[^\]]*)\]\s*$")


def argument_spec_options() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(role, option path, spec) of every option, suboptions included, of every role's argument specs."""

    def walk(role: str, prefix: str, options: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
        for name, spec in (options or {}).items():
            yield role, f"{prefix}{name}", spec
            yield from walk(role, f"{prefix}{name}.", spec.get("options") or {})

    for path in sorted((PROJECT_ROOT / "roles").glob("*/meta/argument_specs.yml")):
        role = path.parent.parent.name
        for entry, spec in (yaml.safe_load(path.read_text())["argument_specs"] or {}).items():
            yield from walk(role, f"{entry}:", spec.get("options") or {})


def test_the_table_is_consistent() -> None:
    assert fabrics.NAMES == ("erdma", "infiniband", "roce", "acs_type1", "acs_type2", "tcp")
    for profile in fabrics.PROFILES:
        assert (profile.device_pattern is not None) == profile.is_rdma, profile.name
        assert profile.is_rdma or profile.link_layer is None, profile.name
        assert profile.is_rdma or profile.packages == fabrics.Packages(), f"{profile.name}: sockets need no verbs"
        assert profile.line_rate_gbps > 0
    for fact in fabrics.FACTS:
        assert list(fabrics.facts(fact)) == list(fabrics.NAMES)
    with pytest.raises(ValueError, match="unknown fabric profile fact 'speed'; allowed: transport, rdma"):
        fabrics.facts("speed")


def test_argument_specs_choices_are_the_table_names() -> None:
    """Static YAML cannot import the table: every option that offers profile names offers exactly the table's."""
    found = []
    for role, option, spec in argument_spec_options():
        choices = spec.get("choices") or []
        if set(map(str, choices)) & set(fabrics.NAMES):
            found.append(f"{role}/{option}")
            assert tuple(choices) == fabrics.NAMES, f"{role} {option}: choices {choices} drifted from the table"
    assert {"preflight/main:rdmaforge_fabric", "rdma_core/main:rdma_core_profile",
            "nccl_env/main:nccl_env_profile"} <= set(found)  # fmt: skip


def copies_in_text(text: str) -> list[str]:
    """Lines where MANY distinct profile names appear within WINDOW lines (a list, a mapping or a sentence)."""
    lines = text.splitlines()
    # A choices line equal to the table is checked by test_argument_specs_choices_are_the_table_names.
    lines = ["" if (m := CHOICES_LINE.match(line)) and tuple(i.strip() for i in m["items"].split(",")) == fabrics.NAMES
             else line for line in lines]  # fmt: skip
    found = []
    for number in range(len(lines)):
        names = set(NAME.findall("\n".join(lines[number : number + WINDOW])))
        if len(names) >= MANY:
            found.append(f"line {number + 1}: {', '.join(sorted(names))}")
            break
    return found


def copies_in_python(text: str) -> list[str]:
    """Literals (list, tuple, set, dict keys or values) holding MANY profile names, however they are laid out."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Dict):
            items = [*node.keys, *node.values]
        elif isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = list(node.elts)
        else:
            continue
        names = {i.value for i in items if isinstance(i, ast.Constant) and i.value in fabrics.NAMES}
        if len(names) >= MANY:
            found.append(f"line {node.lineno}: a literal of {', '.join(sorted(names))}")
    return found


def copies_in_yaml(text: str, relative: str) -> list[str]:
    """Mappings keyed by MANY profile names (one key per line escapes the line window), bar the allowed ones."""
    found = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            keys = {str(k) for k in value} & set(fabrics.NAMES)
            top = path.split(".")[0]
            if (relative, top) in PER_PROFILE_MAPPINGS and path == top:
                assert tuple(map(str, value)) == fabrics.NAMES, f"{relative} {path}: keys drifted from the table"
            elif len(keys) >= MANY:
                found.append(f"{path}: a mapping keyed by {', '.join(sorted(keys))}")
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")

    for document in yaml.safe_load_all(text):
        walk(document, "")
    return found


def scanned_files() -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted((PROJECT_ROOT / top).rglob("*")):
            skipped = path == TABLE or path.suffix in (".md", ".pyc") or "__pycache__" in path.parts
            if path.is_file() and not skipped:
                yield path


def copies(path: Path, text: str) -> list[str]:
    relative = path.relative_to(PROJECT_ROOT).as_posix()
    found = copies_in_text(text)
    if path.suffix == ".py":
        found += copies_in_python(text)
    elif path.suffix in (".yml", ".yaml"):
        found += copies_in_yaml(text, relative)
    return [f"{relative} {f}" for f in found]


def test_the_scan_finds_a_copy() -> None:
    """The check below would see a drifting copy, whatever its layout."""
    assert copies_in_text("RDMA = ('erdma', 'infiniband', 'roce')")
    assert copies_in_text("when: fabric in ['erdma',\n  'infiniband',\n  'roce']")
    assert copies_in_text("# On an RDMA fabric (erdma, infiniband, roce, acs_type1) ...")
    assert copies_in_text("choices: [erdma, infiniband, roce, acs_type1, acs_type2, tcp]") == []
    assert copies_in_text("choices: [erdma, infiniband, roce, acs_type1, tcp]")
    spread = "RATES = {\n    'erdma': 1,\n\n\n    'roce': 2,\n\n\n    'tcp': 3,\n}\n"
    assert copies_in_text(spread) == [] and copies_in_python(spread)
    table = "rates:\n  erdma: 1\n\n\n\n  roce: 2\n\n\n\n  tcp: 3\n"
    assert copies_in_text(table) == [] and copies_in_yaml(table, "roles/x/defaults/main.yml")
    assert copies_in_text("erdma is elastic RDMA; tcp is sockets") == []


def test_no_file_but_the_table_lists_the_profile_names() -> None:
    found = []
    scanned = 0
    for path in scanned_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        scanned += 1
        found += copies(path, text)
    assert scanned > 100
    hint = "derive these from rdmaforge/fabrics.py (or its filter rdmaforge_fabric_profiles)"
    assert found == [], hint + ":\n" + "\n".join(found)


# Written from the seed documents, not read from the table.
SEED_000_ERDMA_DEBIAN = ["libibverbs1", "ibverbs-providers", "ibverbs-utils", "librdmacm1", "rdma-core"]
SEED_001_INFINIBAND_DEBIAN = [
    "infiniband-diags", "perftest", "ibverbs-providers", "libibumad3", "libibverbs1", "libnl-3-200",
    "libnl-route-3-200", "librdmacm1", "ibverbs-utils", "rdma-core",
]  # fmt: skip

PLAYBOOK = """---
- name: The roles' defaults as Ansible renders them (none of the roles' tasks run)
  hosts: all
  gather_facts: false
  tasks:
    - name: Load role rdma_core's defaults and vars
      ansible.builtin.import_role:
        name: rdmaforge.cluster.rdma_core
      when: false
    - name: Load role benchmark's defaults
      ansible.builtin.import_role:
        name: rdmaforge.cluster.benchmark
      when: false
    - name: Load role nccl_plugin's defaults
      ansible.builtin.import_role:
        name: rdmaforge.cluster.nccl_plugin
      when: false
    - name: Write what they render to
      ansible.builtin.copy:
        dest: "{{ fabric_table_out }}/{{ inventory_hostname }}.json"
        mode: "0644"
        content: >-
          {{ {"packages": rdma_core_packages,
              "selected": rdma_core_packages[rdma_core_profile]["Debian"],
              "require_active": rdma_require_active_ports,
              "rdma_profile": rdma_core_rdma_profile,
              "line_rates": benchmark_line_rates,
              "line_rate": benchmark_line_rate_gbps,
              "plugin": nccl_plugin_provider,
              "e2e_net_plugin": benchmark_e2e_net_plugin} | to_json }}

- name: The benchmark role's defaults alone, as in a play that does not run the nccl_plugin role
  hosts: all
  gather_facts: false
  tasks:
    - name: Load role benchmark's defaults
      ansible.builtin.import_role:
        name: rdmaforge.cluster.benchmark
      when: false
    - name: Write what benchmark_e2e_net_plugin renders to
      ansible.builtin.copy:
        dest: "{{ fabric_table_out }}/{{ inventory_hostname }}.benchmark.json"
        mode: "0644"
        content: "{{ {'e2e_net_plugin': benchmark_e2e_net_plugin} | to_json }}"
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    ensure_dev_tree()
    base = tmp_path_factory.mktemp("fabric_table")
    out = base / "out"
    out.mkdir()
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    hosts = {
        "deb-erdma": {**local, "rdmaforge_fabric": "erdma"},
        "deb-infiniband": {**local, "rdmaforge_fabric": "infiniband"},
        "deb-tcp": {**local, "rdmaforge_fabric": "tcp"},
        "deb-override": {
            **local,
            "rdmaforge_fabric": "erdma",
            "rdma_core_packages": {"erdma": {"Debian": ["my-verbs"], "RedHat": []}},
            "benchmark_line_rates": {"erdma": 42},
            "rdma_require_active_ports": False,
        },
        "deb-erdma-no-plugin": {**local, "rdmaforge_fabric": "erdma", "nccl_plugin_provider": "none"},
    }
    inventory = base / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    playbook = base / "defaults.yml"
    playbook.write_text(PLAYBOOK)
    run_playbook(str(playbook), "-e", f"fabric_table_out={out}", inventory=inventory, check=True,
                 env={"ANSIBLE_CACHE_PLUGIN": "memory"}, timeout=300)  # fmt: skip
    found: dict[str, dict[str, Any]] = {}
    for name in hosts:
        found[name] = json.loads((out / f"{name}.json").read_text())
        found[name]["benchmark_only"] = json.loads((out / f"{name}.benchmark.json").read_text())["e2e_net_plugin"]
    return found


def test_rendered_package_lists_are_the_seeds(rendered: dict[str, dict[str, Any]]) -> None:
    erdma, infiniband = rendered["deb-erdma"], rendered["deb-infiniband"]
    assert erdma["selected"] == SEED_000_ERDMA_DEBIAN
    assert infiniband["selected"] == SEED_001_INFINIBAND_DEBIAN
    assert erdma["packages"]["erdma"]["Debian"] == SEED_000_ERDMA_DEBIAN
    assert erdma["packages"]["infiniband"]["Debian"] == SEED_001_INFINIBAND_DEBIAN
    assert erdma["packages"]["erdma"]["RedHat"] == ["libibverbs", "rdma-core", "librdmacm", "libibverbs-utils"]
    assert rendered["deb-tcp"]["selected"] == []


def test_rendered_line_rates_and_rdma_flags(rendered: dict[str, dict[str, Any]]) -> None:
    expected_rates = {"erdma": 160, "infiniband": 200, "roce": 100, "acs_type1": 200, "acs_type2": 50, "tcp": 25}
    assert rendered["deb-erdma"]["line_rates"] == expected_rates
    assert (rendered["deb-erdma"]["line_rate"], rendered["deb-infiniband"]["line_rate"]) == (160, 200)
    assert rendered["deb-tcp"]["line_rate"] == 25
    assert [rendered[h]["require_active"] for h in ("deb-erdma", "deb-infiniband", "deb-tcp")] == [True, True, False]
    assert [rendered[h]["rdma_profile"] for h in ("deb-erdma", "deb-infiniband", "deb-tcp")] == [True, True, False]


def test_the_default_net_plugin_is_aiacc_on_erdma_only(rendered: dict[str, dict[str, Any]]) -> None:
    """Seed 000 installs the AIACC NCCL plugin on eRDMA; the other fabrics get none unless the inventory asks."""
    plugins = {host: rendered[host]["e2e_net_plugin"] for host in ("deb-erdma", "deb-infiniband", "deb-tcp")}
    assert plugins == {"deb-erdma": "aiacc", "deb-infiniband": "none", "deb-tcp": "none"}
    assert {host: rendered[host]["plugin"] for host in plugins} == plugins
    assert {host: rendered[host]["benchmark_only"] for host in plugins} == plugins  # without nccl_plugin's defaults
    assert rendered["deb-erdma-no-plugin"]["plugin"] == rendered["deb-erdma-no-plugin"]["e2e_net_plugin"] == "none"
    assert rendered["deb-erdma-no-plugin"]["benchmark_only"] == "none"
    assert fabrics.default_net_plugin("erdma") == "aiacc"
    assert [fabrics.default_net_plugin(name) for name in ("infiniband", "roce", "acs_type1", "acs_type2", "tcp")] == [
        "none"] * 5  # fmt: skip
    assert fabrics.default_net_plugin("no-such-fabric") == "none"


def test_an_inventory_override_wins(rendered: dict[str, dict[str, Any]]) -> None:
    override = rendered["deb-override"]
    assert override["packages"] == {"erdma": {"Debian": ["my-verbs"], "RedHat": []}}
    assert override["selected"] == ["my-verbs"]
    assert override["line_rates"] == {"erdma": 42}
    assert override["line_rate"] == 42
    assert override["require_active"] is False
    assert override["rdma_profile"] is True
