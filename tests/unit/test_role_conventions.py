"""Conventions every role keeps: documented defaults, an argument spec that covers them, galaxy metadata."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from rdmaforge import role_defaults

ROLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_has_metadata_and_an_argument_spec(role: Path) -> None:
    assert (role / "meta" / "main.yml").is_file()
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    assert "main" in spec["argument_specs"]


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_every_default_is_typed_in_the_argument_spec(role: Path) -> None:
    defaults_file = role / "defaults" / "main.yml"
    if not defaults_file.exists():
        pytest.skip(f"{role.name} has no defaults")
    defaults = set(role_defaults.defaults(role.name))
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert defaults <= set(options or {}), f"untyped: {sorted(defaults - set(options or {}))}"
    for name in defaults:
        assert options[name].get("description"), f"{name} has no description"


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_every_default_is_commented(role: Path) -> None:
    defaults_file = role / "defaults" / "main.yml"
    if not defaults_file.exists():
        pytest.skip(f"{role.name} has no defaults")
    lines = defaults_file.read_text().splitlines()
    undocumented = []
    for index, line in enumerate(lines):
        match = re.match(r"^([a-z_][a-z0-9_]*):", line)
        if not match or "#" in line:
            continue
        # documented by a comment in its paragraph: the lines above it up to the previous blank line
        paragraph = []
        for earlier in reversed(lines[:index]):
            if not earlier.strip():
                break
            paragraph.append(earlier)
        if not any(earlier.lstrip().startswith("#") for earlier in paragraph):
            undocumented.append(match.group(1))
    assert not undocumented, f"{role.name}: variables without a comment: {undocumented}"
