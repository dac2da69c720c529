"""Roles whose defaults/main.yml sets another value than the checkout's: for tests that prove a Python module reads
a role's default through rdmaforge.role_defaults instead of keeping its own copy of the value."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rdmaforge import paths


def redefine_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str, variable: str, value: object
) -> None:
    """Every role's defaults and vars copied under ``tmp_path``, with ``role``'s default ``variable`` set to
    ``value`` (a scalar), and paths.ROLES_DIR pointed there for the rest of the test."""
    roles = tmp_path / "roles"
    for path in [*paths.ROLES_DIR.glob("*/defaults/main.yml"), *paths.ROLES_DIR.glob("*/vars/main.yml")]:
        text = path.read_text(encoding="utf-8")
        if path.parent.parent.name == role and path.parent.name == "defaults":
            # JSON's scalars are YAML's: 0.4, true, "2M"
            text, count = re.subn(rf"^{variable}:.*$", f"{variable}: {json.dumps(value)}", text, flags=re.M)
            assert count == 1, f"roles/{role}/defaults/main.yml sets {variable} on no line of its own"
        copy = roles / path.relative_to(paths.ROLES_DIR)
        copy.parent.mkdir(parents=True)
        copy.write_text(text, encoding="utf-8")
    monkeypatch.setattr(paths, "ROLES_DIR", roles)
