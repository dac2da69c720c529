"""Whether the benchmark's Python environment already holds what benchmark_e2e_torch asks for.

`rdmaforge bench` installs torch into its venv with the pip module on every run. With torch there already, that
module still starts pip in the venv to list what is installed: about 10 s of a lab node's CPU per run. The role asks
the venv's interpreter for the one version instead (importlib.metadata, no torch import) and runs pip only when the
answer does not satisfy the requirement, with pip's own rules (PEP 440, via packaging, which ansible-core needs).
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version


def _plain(requirement: str) -> Requirement | None:
    """The parsed requirement when it is a plain one (no URL, no environment marker); None for one pip must judge
    itself (a URL, a path, anything that is not a plain requirement)."""
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return None
    return None if parsed.url or parsed.marker else parsed


def requirement_name(requirement: str) -> str:
    """The distribution a pip requirement names (``torch==2.13.0`` -> ``torch``); '' for one pip must judge itself."""
    parsed = _plain(requirement)
    return parsed.name if parsed else ""


def requirement_met(installed: str, requirement: str) -> bool:
    """True when ``installed`` (the version the venv reports; '' for none) satisfies ``requirement`` as pip would
    see it, so that pip need not run. A requirement without a version (plain ``torch``) is met by any version;
    one that names extras is left to pip, which alone knows whether they are installed."""
    parsed = _plain(requirement)
    if parsed is None or parsed.extras or not installed.strip():
        return False
    try:
        version = Version(installed.strip())
    except InvalidVersion:
        return False
    return parsed.specifier.contains(version, prereleases=True)
