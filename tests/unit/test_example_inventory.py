"""inventories/example: seed 000's two-node eRDMA cluster. Never connected to; checked offline with
ansible-inventory, the preflight rules and every role's argument spec."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from rdmaforge import inventory_checks as checks
from rdmaforge.paths import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "inventories" / "example" / "hosts.yml"
BIN = Path(os.environ.get("VIRTUAL_ENV", PROJECT_ROOT / ".venv")) / "bin"


def ansible(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = BIN / tool
    return subprocess.run([str(exe) if exe.exists() else tool, *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "ANSIBLE_NOCOLOR": "1"})  # fmt: skip


@pytest.fixture(scope="module")
def example() -> dict:
    proc = ansible("ansible-inventory", "-i", str(EXAMPLE), "--list")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_example_describes_seed_000(example: dict) -> None:
    hostvars = example["_meta"]["hostvars"]
    assert example["cluster"]["hosts"] == ["erdma-node1", "erdma-node2"]
    assert {h: v["ansible_host"] for h, v in hostvars.items()} == {
        "erdma-node1": "172.20.20.145",
        "erdma-node2": "172.20.20.143",
    }
    assert all(v["rdmaforge_fabric"] == "erdma" for v in hostvars.values())


def test_example_passes_the_inventory_checks(example: dict) -> None:
    hostvars = example["_meta"]["hostvars"]
    nodes = [checks.NodeInput(h, v.get("ansible_host"), v.get("rdmaforge_fabric"), v) for h, v in hostvars.items()]
    assert checks.inventory_report(nodes) == {}


def test_example_satisfies_every_role_argument_spec(example: dict) -> None:
    for spec in checks.discover_argument_specs(PROJECT_ROOT / "roles"):
        for host, values in example["_meta"]["hostvars"].items():
            given = {k: v for k, v in values.items() if k in spec.options}
            errors = ArgumentSpecValidator(spec.options).validate(given).error_messages
            assert not errors, f"{host}, role {spec.role}: {errors}"


def test_example_keeps_host_key_checking_on() -> None:
    for path in EXAMPLE.parent.rglob("*.yml"):
        assert "StrictHostKeyChecking=no" not in path.read_text(), path


def test_the_playbooks_its_comments_name_are_syntax_checked_as_named() -> None:
    """Its header tells a user what to run: a checkout's playbooks/preflight.yml, and for a wheel user (who has no
    playbooks/) the collection's rdmaforge.cluster.preflight. Each named playbook is found by ansible-playbook."""
    named = [line.split()[-1] for line in EXAMPLE.read_text().splitlines() if line.startswith("#   ansible-playbook ")]
    assert named == ["playbooks/preflight.yml", "rdmaforge.cluster.preflight"], named
    for playbook in named:
        proc = ansible("ansible-playbook", "-i", str(EXAMPLE), "--syntax-check", playbook)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("playbook", ["site.yml", "preflight.yml", "cluster_hosts.yml"])
def test_playbooks_pass_syntax_check(playbook: str) -> None:
    proc = ansible("ansible-playbook", "-i", str(EXAMPLE), "--syntax-check", f"playbooks/{playbook}")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_example_renders_seed_000s_container_as_shipped(
    tmp_path: Path, shared_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy of the example is what a user starts from: `rdmaforge render` on it, from another directory, writes
    the kinds that apply to its fabric (and, asked, every kind) without a problem or warning, and the docker script
    passes the flags of seed 000's `docker run` (read from the seed itself). It used to refuse: no GPU count, no
    device files, and hugepages requested while the example reserves none."""
    from rdmaforge.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["render", "-i", str(EXAMPLE), "-o", "out"]) == 0
    err = capsys.readouterr().err
    assert "WARNING" not in err, err
    seed = next((shared_dir / "seeds").glob("000_*.txt")).read_text()
    command = next(line for line in seed.splitlines() if line.startswith("docker run"))
    flags = [word for word in command.replace("\\", " ").replace(" memlock", "=memlock").split() if word[:2] == "--"]
    assert "--device=/dev/infiniband/uverbs1" in flags, command  # the seed's line as expected
    script = (tmp_path / "out" / "docker" / "erdma-node1" / "rdmaforge-train.sh").read_text()
    rendered = {line.strip().rstrip(" \\").replace(" memlock", "=memlock") for line in script.splitlines()}
    assert [flag for flag in flags if flag not in rendered] == [], script
    for kind in ("mpijob", "pytorchjob"):
        assert (tmp_path / "out" / kind / "rdmaforge-train.yaml").is_file(), kind
    # eRDMA is no ACS fabric: its default kinds leave the ACS pod out, and named it renders without a problem too.
    assert not (tmp_path / "out" / "acs").exists()
    assert main(["render", "-i", str(EXAMPLE), "-o", "all", "--kind", "all"]) == 0
    assert (tmp_path / "all" / "acs" / "rdmaforge-train.yaml").is_file()
