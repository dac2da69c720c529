"""Installed versions of named packages, asked of dpkg or rpm directly.

The one implementation behind the converge_state module (package drift) and the cluster summary's package list
(shipped to targets as the collection's ``module_utils/packages.py``): standard-library only, Python 3.8.

Why not ``package_facts``: it stores every installed package as a host fact. Ansible keeps facts in the fact cache
and copies them for every task on every host, so a fact of a few thousand packages slows each later task of every
run; the summary needs a dozen names.
"""

from __future__ import annotations

import glob
import os
import re

#: What one query line looks like: name, version, status, tab-separated.
_DPKG_FORMAT = "${Package}\t${Version}\t${db:Status-Status}\n"
_RPM_FORMAT = "%{NAME}\t%{VERSION}-%{RELEASE}.%{ARCH}\tinstalled\n"


def package_name(spec: str) -> str:
    """``rdma-core=44.0-2`` or ``openmpi >= 4`` -> the package name alone."""
    return re.split(r"[=<>!~ ]", spec.strip(), maxsplit=1)[0]


def query_argv(manager: str, names: list[str]) -> list[str]:
    """The command that prints one line per installed package of ``names`` (``manager``: apt, or any rpm one)."""
    bare = [package_name(name) for name in names]
    if manager == "apt":
        return ["dpkg-query", "-W", "-f", _DPKG_FORMAT] + bare
    return ["rpm", "-q", "--qf", _RPM_FORMAT] + bare


def query_of(argv: list[str]) -> tuple[str, list[str]] | None:
    """("apt" or "dnf", the names) when ``argv`` is a query query_argv made; None for any other command. The drift
    check watches the names such a query reads as packages, whether or not an install task ran after it."""
    for manager, head in (("apt", query_argv("apt", [])), ("dnf", query_argv("dnf", []))):
        if len(argv) > len(head) and list(argv[: len(head)]) == head:
            return manager, [str(name) for name in argv[len(head) :]]
    return None


def _name_and_version(metadata: str) -> tuple[str, str] | None:
    """Name and Version from a distribution's METADATA/PKG-INFO headers (they end at the first empty line)."""
    found: dict[str, str] = {}
    try:
        with open(metadata, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, sep, value = line.partition(":")
                if sep and key.lower() in ("name", "version") and key.lower() not in found:
                    found[key.lower()] = value.strip()
    except OSError:
        return None
    if "name" not in found or "version" not in found:
        return None
    return found["name"], found["version"]


def venv_packages(venv: str) -> list[str] | None:
    """The lines ``pip freeze --all`` prints for a venv of plain wheels (``name==version``, sorted), read from the
    metadata files of the venv's site-packages in this process; None when ``venv`` has no site-packages.

    For the drift check, which reads the NCCL plugin's venv on every no-op: starting the venv's interpreter for it
    cost about 0.13 s of CPU per node, reading the few metadata files almost nothing."""
    sites = sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages")))
    if not sites:
        return None
    lines = []
    for site in sites:
        for entry in os.listdir(site):
            if entry.endswith(".dist-info"):
                metadata = os.path.join(site, entry, "METADATA")
            elif entry.endswith(".egg-info"):
                path = os.path.join(site, entry)
                metadata = os.path.join(path, "PKG-INFO") if os.path.isdir(path) else path
            else:
                continue
            found = _name_and_version(metadata)
            if found is not None:
                lines.append(f"{found[0]}=={found[1]}")
    return sorted(lines)


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


def absent(output: str, names: list[str]) -> list[str]:
    """The package names among ``names`` (versioned specs allowed) that the query did not find installed: what an
    install of ``names`` adds to the node. A removed package whose configuration dpkg keeps counts as absent."""
    found = _rows(output)
    installed = {name for name, (version, status) in found.items() if status == "installed" and version}
    out: list[str] = []
    for spec in names:
        name = package_name(spec)
        if name not in installed and name not in out:
            out.append(name)
    return out


def pending(output: str, names: list[str]) -> list[str]:
    """The specs among ``names`` the package manager still has to look at: each one the query did not find
    installed, and each one with a version constraint (``rdma-core=44.0-2``, ``openmpi >= 4``), whose installed
    version only the package manager can judge. Empty: every package is installed and the install can be left out
    (on a converged node it costs an apt run per role, about 1 s of a node's CPU)."""
    missing = set(absent(output, names))
    return [spec for spec in names if package_name(spec) in missing or package_name(spec) != spec.strip()]


def file_name_argv(manager: str, path: str) -> list[str]:
    """The command that prints the name of the package in a downloaded .deb (apt) or .rpm file, the name it will
    have once installed (a vendor's file name need not match it)."""
    if manager == "apt":
        return ["dpkg-deb", "--field", path, "Package"]
    return ["rpm", "-q", "--package", "--queryformat", "%{NAME}\n", path]


def rpm_requirements(output: str, provided: str = "") -> list[str]:
    """What ``rpm -qp --requires FILE`` prints, as dnf installs it from the repositories: each requirement once, in
    order, without rpm's own features (``rpmlib(...)``, ``config(...)``), which no package provides, and without what
    the file satisfies itself: ``provided`` is ``rpm -qp --provides --list FILE`` (its capabilities and its files;
    a package whose two libraries link each other requires one of its own sonames, which dnf found in no repository:
    final read, round 40). A rich dependency (``(a or b)``) goes to dnf as it stands."""
    own = {" ".join(line.split()).split(" ")[0] for line in provided.splitlines() if line.strip()}
    found: list[str] = []
    for line in output.splitlines():
        requirement = " ".join(line.split())
        if (requirement and not requirement.startswith(("rpmlib(", "config(")) and requirement not in found
                and requirement.split(" ")[0] not in own):  # fmt: skip
            found.append(requirement)
    return found


def removal_argv(manager: str, names: list[str]) -> list[str]:
    """A dry run of removing ``names``: it lists (apt) or refuses with (rpm) every other package that would go too."""
    if manager == "apt":
        return ["apt-get", "-s", "remove"] + list(names)
    return ["rpm", "-e", "--test"] + list(names)


def manual_argv(manager: str) -> list[str]:
    """The command that lists the packages installed on purpose (not only as another package's dependency)."""
    if manager == "apt":
        return ["apt-mark", "showmanual"]
    return ["dnf", "repoquery", "--userinstalled", "--qf", "%{name}\n"]


def _rpm_name(nevra: str) -> str:
    """``openmpi-4.1.1-5.el8.x86_64`` -> ``openmpi`` (rpm names the dependants by name-version-release.arch)."""
    parts = nevra.rsplit("-", 2)
    return parts[0] if len(parts) == 3 else nevra


def dry_run_problem(output: str, rc: int | None) -> str:
    """'' when the ``removal_argv`` dry run answered: it exited 0, or rpm exited 1 naming what needs the packages
    (``is needed by``). Else what stopped it (apt's ``E:`` lines, rpm's ``error:`` lines, or its exit status): the
    removal cannot be judged, and the packages a failed dry run did not list may be taken with them."""
    if rc is None or rc == 0 or "is needed by" in output:
        return ""
    errors = [line.strip() for line in output.splitlines() if line.strip().startswith(("E:", "error:"))]
    said = "; ".join(errors) or " ".join(output.split()[-30:])
    return f"exit {rc}: {said[:400]}" if said else f"exit {rc}, with no output"


def removal_blockers(dry_run_output: str, manual_output: str, removing: list[str]) -> list[str]:
    """The packages installed on purpose, other than ``removing``, that removing ``removing`` would take with them.

    ``dry_run_output`` is what ``removal_argv`` printed (stdout and stderr together): apt's ``Remv NAME ...`` lines
    or rpm's ``... is needed by (installed) NEVRA``. A package that is there only as a dependency does not block:
    if it depended on one of ``removing`` (which the node lacked before rdmaforge), it came after it."""
    manual = set(manual_output.split())
    going: list[str] = re.findall(r"(?m)^Remv (\S+)", dry_run_output)
    going += [_rpm_name(n) for n in re.findall(r"is needed by \(installed\) (\S+)", dry_run_output)]
    out: list[str] = []
    for name in going:
        bare = name.split(":", 1)[0]  # apt prints multi-arch names as NAME:ARCH
        if bare not in removing and bare in manual and bare not in out:
            out.append(bare)
    return out
