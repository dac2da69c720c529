"""rdmaforge.parsers.packages: the package query the cluster summary and converge_state's drift check share.

Against this machine's real dpkg (the controller is Debian): the versions the query reports are the ones dpkg's own
status file records; the rpm lines are rpm's documented --qf output and its "not installed" line.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rdmaforge.parsers import packages

DPKG_STATUS = Path("/var/lib/dpkg/status")


def status_file_versions() -> dict[str, tuple[str, str]]:
    """{package: (version, status word)} straight from dpkg's status file, the query's independent witness."""
    versions: dict[str, tuple[str, str]] = {}
    for stanza in DPKG_STATUS.read_text().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if "Package" in fields and "Version" in fields:
            versions[fields["Package"]] = (fields["Version"], fields.get("Status", "").split()[-1])
    return versions


@pytest.mark.skipif(shutil.which("dpkg-query") is None or not DPKG_STATUS.exists(), reason="needs dpkg (Debian)")
def test_real_dpkg_query_reports_the_versions_dpkg_recorded() -> None:
    truth = status_file_versions()
    names = ["dpkg", "coreutils", "rdmaforge-no-such-package"]
    proc = subprocess.run(packages.query_argv("apt", names), capture_output=True, text=True, check=False)
    assert proc.returncode == 1  # one unknown name: dpkg-query still prints the others
    assert packages.installed_versions(proc.stdout, names) == {
        "dpkg": truth["dpkg"][0],
        "coreutils": truth["coreutils"][0],
    }


def test_rpm_lines_and_the_not_installed_line() -> None:
    output = "rdma-core\t48.0-1.el9.x86_64\tinstalled\npackage perftest is not installed\n"
    assert packages.query_argv("dnf", ["rdma-core", "perftest"])[:2] == ["rpm", "-q"]
    assert packages.installed_versions(output, ["rdma-core", "perftest"]) == {"rdma-core": "48.0-1.el9.x86_64"}


def test_a_removed_package_that_kept_its_configuration_is_not_installed() -> None:
    output = "openmpi-bin\t4.1.4-3\tconfig-files\nperftest\t4.5-0.20-1\tinstalled\n"
    assert packages.installed_versions(output, ["openmpi-bin", "perftest"]) == {"perftest": "4.5-0.20-1"}
    assert packages.parse_query(output)["openmpi-bin"] == "4.1.4-3 config-files"


@pytest.mark.parametrize(("spec", "name"), [("rdma-core=44.0-2", "rdma-core"), ("openmpi >= 4", "openmpi"), ("x", "x")])
def test_package_name_drops_the_version_constraint(spec: str, name: str) -> None:
    assert packages.package_name(spec) == name


def test_the_venv_listing_reads_what_pip_freeze_prints(tmp_path: Path) -> None:
    """The drift check's venv listing (metadata files read in its own process) against pip's own freeze, in a real
    venv that ensurepip filled."""
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True, capture_output=True)
    freeze = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    listing = packages.venv_packages(str(venv))
    assert listing is not None and any(line.startswith("pip==") for line in listing)
    assert sorted(line.lower() for line in listing) == sorted(line.lower() for line in freeze.splitlines())


def test_a_path_without_a_venv_has_no_listing(tmp_path: Path) -> None:
    assert packages.venv_packages(str(tmp_path / "none")) is None


def test_an_rpms_requirements_are_what_dnf_installs() -> None:
    """rpm -qp --requires as rpm 4.18 prints it for a vendor package (its own rpmlib features, a shell, a library
    soname, a versioned package): dnf gets each requirement once, rpm's features left out."""
    printed = ("/bin/sh\nlibc.so.6()(64bit)\nlibibverbs >= 41\nrpmlib(CompressedFileNames) <= 3.0.4-1\n"
               "rpmlib(PayloadIsZstd) <= 5.4.18-1\nconfig(aiacc-nccl-plugin) = 1.0.2-1\n/bin/sh\n\n")  # fmt: skip
    assert packages.rpm_requirements(printed) == ["/bin/sh", "libc.so.6()(64bit)", "libibverbs >= 41"]
    assert packages.rpm_requirements("") == []
    # A package whose two libraries link each other requires its own soname; rpm -qp --provides --list prints it
    # (and the files the package holds, a file requirement's match): those are no dependency to fetch.
    provided = "libaiacc-core.so()(64bit)\naiacc-nccl-plugin = 1.0.2-1\n/usr/lib64/libaiacc-core.so\n"
    printed = "libaiacc-core.so()(64bit)\n/usr/lib64/libaiacc-core.so\nlibibverbs >= 41\n"
    assert packages.rpm_requirements(printed, provided) == ["libibverbs >= 41"]


@pytest.mark.skipif(shutil.which("rpmbuild") is None, reason="rpmbuild is not installed (make deps installs rpm)")
def test_what_an_rpm_satisfies_itself_is_no_dependency_of_it(tmp_path: Path) -> None:
    """A real rpm built here that requires a capability and a file it provides itself: only the outside requirement
    is left for dnf to fetch (dnf found the others in no repository: final read, round 40)."""
    (tmp_path / "t.spec").write_text(
        "Name: selfreq\nVersion: 1.0\nRelease: 1\nSummary: t\nLicense: MIT\nBuildArch: noarch\nProvides: selfcap\n"
        "Requires: selfcap\nRequires: /usr/share/selfreq/README\nRequires: bash >= 4\n%description\nt\n%install\n"
        "mkdir -p %{buildroot}/usr/share/selfreq\necho x > %{buildroot}/usr/share/selfreq/README\n"
        "%files\n/usr/share/selfreq/README\n")  # fmt: skip
    subprocess.run(["rpmbuild", "--define", f"_topdir {tmp_path / 'top'}", "-bb", str(tmp_path / "t.spec")],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    (built,) = (tmp_path / "top" / "RPMS" / "noarch").glob("*.rpm")
    query = ["rpm", "-q", "--package"]
    requires = subprocess.run([*query, "--requires", str(built)], capture_output=True, text=True, check=True).stdout
    provides = subprocess.run([*query, "--provides", "--list", str(built)], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    assert "selfcap" in requires.split() and packages.rpm_requirements(requires, provides) == ["bash >= 4"]
