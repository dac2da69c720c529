"""The release number is written in three places (the pip package, the Python package and the collection): a
release that bumps one of them would ship a wheel whose collection says another version, and ansible-galaxy
compares the collection's (an installed copy of the same number is "Nothing to do")."""

from __future__ import annotations

import tomllib

import yaml

import rdmaforge
from rdmaforge.paths import PROJECT_ROOT


def test_the_package_the_module_and_the_collection_have_one_version() -> None:
    pyproject = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
    galaxy = yaml.safe_load((PROJECT_ROOT / "collection" / "galaxy.yml.in").read_text())["version"]
    assert pyproject == rdmaforge.__version__ == str(galaxy), (pyproject, rdmaforge.__version__, galaxy)
