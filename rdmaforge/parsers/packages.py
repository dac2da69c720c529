"""Installed versions of named packages, asked of dpkg or rpm directly.

The one implementation behind the converge_state module (package drift) and the cluster summary's package list
(shipped to targets as the collection's ``module_utils/packages.py``): standard-library only, Python 3.8.

Why not ``package_facts``: it stores every installed package as a host fact. Ansible keeps facts in the fact cache
and copies them for every task on every host, so a fact of a few thousand packages slows each later task of every
run; the summary needs a dozen names.
"""

from __future__ import annotations

import re

#: What one query line looks like: name, version, status, tab-separated.
_DPKG_FORMAT = "${Package}\t${Version}\t${db:Status-Status}\n"
_RPM_FORMAT = "%{NAME}\t%{VERSION}-%{RELEASE}.%{ARCH}\tinstalled\n"


def package_name(spec: str) -> str:
    """``rdma-core=44.0-2`` or ``openmpi >= 4`` -> the package name alone."""
    return re.split(r"[=<>!~ ]", spec.strip(), maxsplit=1)[0]


def query_argv(manager: str, names: list[str]) -> list[str]:
    """The command that prints one line per installed package of ``names`` (``manager``: apt, or any rpm one)."""
    if manager == "apt":
        return ["dpkg-query", "-W", "-f", _DPKG_FORMAT] + list(names)
    return ["rpm", "-q", "--qf", _RPM_FORMAT] + list(names)


def _rows(output: str) -> dict[str, tuple[str, str]]:
    """{name: (version, status)} from the query's output; lines that are not a package line ("package x is not
    installed", dpkg's complaints) are left out."""
    found: dict[str, tuple[str, str]] = {}
    for line in output.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0]:
            found[parts[0]] = (parts[1], parts[2])
    return found


def parse_query(output: str) -> dict[str, str]:
    """{name: "version status"} from the query's output (what converge_state records for a package)."""
    return {name: f"{version} {status}" for name, (version, status) in _rows(output).items()}


def installed_versions(output: str, names: list[str]) -> dict[str, str]:
    """{name: version} for the ``names`` the query found installed (dpkg also lists removed ones: left out)."""
    found = _rows(output)
    installed = {name: version for name, (version, status) in found.items() if status == "installed" and version}
    return {name: installed[name] for name in names if name in installed}
