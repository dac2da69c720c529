"""The RHEL-family package path, run with a real dnf on one lab node.

The lab has no RHEL image and no RHEL mirror can be reached, so the node is Debian with Debian's own dnf 4.14 and
rpm 4.18 installed from the lab mirror, and the play tells the roles that dnf is the node's package manager (the
fact they choose their path by; tests/playbooks/dnf_path.yml). The packages are STAND-INS built here with rpmbuild,
signed with a throwaway key (rpmsign) and published with createrepo_c on the lab bridge. What is real: the key
fetched over HTTP and its fingerprint checked on the controller, installed on the node and imported by rpm_key
from there (the repository file's gpgkey names that file: dnf fetches no key), the yum repository file, dnf
installing with gpgcheck on and refusing an unsigned package, the record rdmaforge reset reads (rpm -q), a second
run changing nothing, and reset's withdrawal (rpm -e --test, dnf repoquery --userinstalled, dnf remove) keeping a
package that one installed on purpose needs and removing it once that one is gone, then the repository file and
the key. Not shown: a RHEL
host's own repositories and its rpm database location (/var/lib/rpm there; Debian's rpm keeps root's in ~/.rpmdb),
and dnf5.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import (
    LabHandle,
    aiacc_library_from_mirror,
    assert_no_changes,
    recap,
    served_on_lab_bridge,
    throwaway_signing_key,
)
from tests.integration.test_nccl_plugin_package_on_lab import (
    PACKAGE_LIB,
    assert_converge_plugin_back,
    assert_package_plugin_in_place,
)

pytestmark = pytest.mark.lab

RECORD = "/var/lib/rdmaforge/dnf-path-test-packages"  # not the node's real record of the apt converge
PROBE = "rdmaforge-probe"
PROBE_FILE = "/usr/share/rdmaforge-probe/README"
DEPENDANT = "rdmaforge-probe-user"  # requires PROBE; installed on purpose by hand in the test
UNSIGNED = "rdmaforge-unsigned"
SEEDS = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"


def seed_yum_rdma_packages() -> list[str]:
    """Seed 000's RHEL-family RDMA userspace (`yum install libibverbs rdma-core ...`), or [] without the seeds."""
    for path in sorted(SEEDS.glob("000_*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if words[:2] == ["yum", "install"] and "rdma-core" in words:
                return [word for word in words[2:] if not word.startswith("-")]
    return []


@dataclass(frozen=True)
class RpmRepo:
    url: str
    key_url: str
    fingerprint: str
    key_text: str
    #: The controller's key cache for this test's key: rdma_repos verifies keys there, and the lab's own cache is
    #: part of its converge record's desired state (a test key there would make every node differ from it).
    key_cache: str


def spec(name: str, requires: str = "") -> str:
    return textwrap.dedent(f"""\
        Name: {name}
        Version: 1.0
        Release: 1
        Summary: STAND-IN package for rdmaforge's dnf path test
        License: MIT
        BuildArch: noarch
        {f"Requires: {requires}" if requires else ""}
        %description
        STAND-IN package built by tests/integration/test_dnf_path_on_lab.py.
        %install
        mkdir -p %{{buildroot}}/usr/share/{name}
        echo {name} > %{{buildroot}}/usr/share/{name}/README
        %files
        /usr/share/{name}/README
        """)  # fmt: skip


@pytest.fixture(scope="module")
def rpm_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RpmRepo]:
    """Three noarch rpms (two signed, one not) in a createrepo_c repository served on the lab bridge, and a signed
    STAND-IN of each of seed 000's RHEL RDMA packages (same name, no content but a README)."""
    work = tmp_path_factory.mktemp("rpm-build")
    repo = work / "repo"
    repo.mkdir()
    with throwaway_signing_key("rdmaforge dnf test <dnf@lab.invalid>", "rsa2048") as key:
        fingerprint = key.fingerprint
        (repo / "RPM-GPG-KEY").write_bytes(subprocess.run([*key.gpg, "--armor", "--export"], check=True,
                                                          capture_output=True).stdout)  # fmt: skip
        for name, requires in ((PROBE, ""), (DEPENDANT, PROBE), (UNSIGNED, ""),
                               *((name, "") for name in seed_yum_rdma_packages())):
            (work / f"{name}.spec").write_text(spec(name, requires))
            subprocess.run(["rpmbuild", "--define", f"_topdir {work / 'top'}", "-bb", str(work / f"{name}.spec")],
                           check=True, capture_output=True, timeout=120)  # fmt: skip
            built = work / "top" / "RPMS" / "noarch" / f"{name}-1.0-1.noarch.rpm"
            if name != UNSIGNED:
                subprocess.run(["rpmsign", "--define", f"_gpg_name {fingerprint}", "--define", "__gpg /usr/bin/gpg",
                                "--define", f"_gpg_path {key.home}", "--addsign", str(built)],
                               check=True, capture_output=True, timeout=120)  # fmt: skip
            built.rename(repo / built.name)
    subprocess.run(["createrepo_c", "-q", str(repo)], check=True, capture_output=True, timeout=120)
    with served_on_lab_bridge(repo) as base:
        yield RpmRepo(url=f"{base}/", key_url=f"{base}/RPM-GPG-KEY", fingerprint=fingerprint,
                      key_text=(repo / "RPM-GPG-KEY").read_text(), key_cache=str(work / "controller-keys"))  # fmt: skip


#: Where rdma_repos installs the controller-verified key (roles/rdma_repos/defaults: rdma_repos_rpm_key_path).
RPM_KEY = "/etc/pki/rpm-gpg/RPM-GPG-KEY-rdmaforge-erdma"


def installed_names(lab: LabHandle, node: str) -> set[str]:
    return set(lab.ssh(node, "dpkg-query -W -f '${Package}\\n'").stdout.split())


@pytest.fixture(scope="module")
def dnf_node(converged: LabHandle) -> Iterator[str]:
    """A node with Debian's dnf and rpm (from the lab mirror), /etc/yum.repos.d and a release version for dnf's
    $releasever; afterwards the node is as before: the packages the test brought are purged, its files removed."""
    node = sorted(converged.nodes)[-1]
    before = installed_names(converged, node)
    converged.ssh(node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q dnf rpm", timeout=600)
    brought = sorted(installed_names(converged, node) - before)
    converged.ssh(node, "mkdir -p /etc/yum.repos.d /etc/dnf/vars && echo 8 > /etc/dnf/vars/releasever")
    try:
        yield node
    finally:
        converged.ssh(node, f"rm -rf /etc/yum.repos.d /etc/dnf /var/lib/dnf /var/cache/dnf /root/.rpmdb {RECORD} "
                            "/var/log/dnf*.log /var/log/hawkey.log", check=False)  # fmt: skip
        if brought:
            converged.ssh(node, f"DEBIAN_FRONTEND=noninteractive apt-get purge -y -q {' '.join(brought)}",
                          check=False, timeout=600)  # fmt: skip
    assert installed_names(converged, node) == before


def dnf_play(
    lab: LabHandle, node: str, repo: RpmRepo, check_mode: bool = False, **extra: object
) -> subprocess.CompletedProcess[str]:
    variables = {
        "dnf_node": node,
        "rdma_repos_erdma_yum_baseurl": repo.url,
        "rdma_repos_erdma_gpg_key_url": repo.key_url,
        "rdma_repos_erdma_gpg_fingerprint": repo.fingerprint,
        "rdma_repos_controller_cache": repo.key_cache,
        "os_packages_record": RECORD,
        **extra,
    }
    return lab.playbook(str(Path("..") / "tests" / "playbooks" / "dnf_path.yml"), "-e", json.dumps(variables),
                        *(["--check"] if check_mode else []), timeout=600)  # fmt: skip


def rpm_query(lab: LabHandle, node: str, *names: str) -> subprocess.CompletedProcess[str]:
    return lab.ssh(node, "rpm -q " + " ".join(names), check=False)


def test_check_mode_before_the_repository_is_written_names_the_packages_and_writes_nothing(
    converged: LabHandle, dnf_node: str, rpm_repo: RpmRepo
) -> None:
    """dnf cannot know a package that only a repository not yet written serves: check mode says it would install it
    instead of failing, and writes neither the key, the repository nor the record."""
    node = dnf_node
    proc = dnf_play(converged, node, rpm_repo, check_mode=True, dnf_packages=[PROBE])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert recap(proc.stdout)[node]["changed"] > 0
    assert f"check mode: would install {PROBE}," in proc.stdout, proc.stdout[-4000:]
    for path in ("/etc/yum.repos.d/erdma.repo", RPM_KEY, RECORD):
        assert converged.ssh(node, f"test -e {path}", check=False).returncode == 1, path
    assert rpm_query(converged, node, PROBE).returncode != 0


def test_dnf_installs_signed_packages_records_them_and_changes_nothing_the_second_time(
    converged: LabHandle, dnf_node: str, rpm_repo: RpmRepo
) -> None:
    node = dnf_node
    first = dnf_play(converged, node, rpm_repo, dnf_packages=[PROBE])
    assert first.returncode == 0, first.stdout[-4000:]
    assert recap(first.stdout)[node]["changed"] > 0
    assert rpm_query(converged, node, PROBE).stdout.startswith(f"{PROBE}-1.0-1"), rpm_query(converged, node, PROBE)
    assert converged.ssh(node, f"cat {PROBE_FILE}").stdout.strip() == PROBE
    # rpm_key imported the test key (rpm names it gpg-pubkey-<last 8 hex digits of the fingerprint>).
    keys = converged.ssh(node, "rpm -q gpg-pubkey --qf '%{VERSION}\\n'").stdout.split()
    assert rpm_repo.fingerprint[-8:].lower() in keys, keys
    repo_file = converged.ssh(node, "cat /etc/yum.repos.d/erdma.repo").stdout
    assert "gpgcheck = 1" in repo_file and f"baseurl = {rpm_repo.url}" in repo_file, repo_file
    assert f"gpgkey = file://{RPM_KEY}\n" in repo_file, repo_file
    assert converged.ssh(node, f"cat {RPM_KEY}").stdout == rpm_repo.key_text  # the key the controller verified
    assert converged.ssh(node, f"cat {RECORD}").stdout.split() == [PROBE]

    again = dnf_play(converged, node, rpm_repo, dnf_packages=[PROBE])
    assert again.returncode == 0, again.stdout[-4000:]
    assert_no_changes(again.stdout, [node])


def test_dnf_refuses_an_unsigned_package_at_the_first_try(
    converged: LabHandle, dnf_node: str, rpm_repo: RpmRepo
) -> None:
    """With the default retries: another try would get the same package, so there is none."""
    proc = dnf_play(converged, dnf_node, rpm_repo, dnf_packages=[UNSIGNED])
    assert proc.returncode != 0
    fatal = [line for line in proc.stdout.splitlines() if line.startswith(f"fatal: [{dnf_node}]")]
    assert fatal and "not signed" in fatal[-1], proc.stdout[-4000:]
    assert "FAILED - RETRYING" not in proc.stdout and "not retried: dnf refused" in proc.stdout, proc.stdout[-4000:]
    assert rpm_query(converged, dnf_node, UNSIGNED).returncode != 0


def test_reset_keeps_what_a_package_installed_on_purpose_needs_then_removes_it(
    converged: LabHandle, dnf_node: str, rpm_repo: RpmRepo
) -> None:
    node = dnf_node
    if rpm_query(converged, node, PROBE).returncode != 0:  # run on its own: install it first
        assert dnf_play(converged, node, rpm_repo, dnf_packages=[PROBE]).returncode == 0
    # Installed by hand, on purpose, after rdmaforge: it needs the package rdmaforge added.
    converged.ssh(node, f"dnf -y -q install {DEPENDANT}", timeout=300)

    kept = dnf_play(converged, node, rpm_repo, dnf_stage="withdraw")
    assert kept.returncode == 0, kept.stdout[-4000:]
    assert f"the packages rdmaforge added ({PROBE}) stay" in kept.stdout, kept.stdout[-4000:]
    assert f"because {DEPENDANT}, installed since, depend on them" in kept.stdout, kept.stdout[-4000:]
    assert rpm_query(converged, node, PROBE, DEPENDANT).returncode == 0
    assert PROBE in converged.ssh(node, f"cat {RECORD}").stdout.split()

    converged.ssh(node, f"rpm -e {DEPENDANT}")
    removed = dnf_play(converged, node, rpm_repo, dnf_stage="withdraw")
    assert removed.returncode == 0, removed.stdout[-4000:]
    assert rpm_query(converged, node, PROBE).returncode != 0
    assert converged.ssh(node, f"test -e {RECORD}", check=False).returncode != 0
    assert converged.ssh(node, f"test -e {PROBE_FILE}", check=False).returncode != 0
    # The repository file and the key rpm_key imported went with them.
    assert converged.ssh(node, "test -e /etc/yum.repos.d/erdma.repo", check=False).returncode != 0
    assert converged.ssh(node, f"test -e {RPM_KEY}", check=False).returncode != 0
    keys = converged.ssh(node, "rpm -q gpg-pubkey --qf '%{VERSION}\\n'", check=False).stdout.split()
    assert rpm_repo.fingerprint[-8:].lower() not in keys, keys


PLUGIN_RPM = "aiacc-nccl-plugin-1.0.2.rpm"  # seed 000's file name (rpm -i aiacc-nccl-plugin-1.0.2.rpm)
#: The same STAND-IN, requiring the unsigned package: the role must not install it (review round 38a).
PLUGIN_RPM_UNSIGNED_DEP = "aiacc-nccl-plugin-1.0.3.rpm"


@pytest.fixture(scope="module")
def stand_in_plugin_rpm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, bytes, str, str]]:
    """(URL, sha256) of a STAND-IN for seed 000's aiacc-nccl-plugin 1.0.2 rpm, and the library in it: a real rpm
    built here whose only file is the real AIACC library (PyPI sdist, from the lab mirror) at the path the role
    expects. Unsigned, as the role assumes of Alibaba's; without rpm's automatic library dependencies, which no rpm
    on a Debian node provides, but requiring a signed package of the test repository (which requires another), as
    a vendor's rpm requires packages of the mirrors. Then (URL, sha256) of a 1.0.3 that requires the unsigned one."""
    library = aiacc_library_from_mirror()
    work = tmp_path_factory.mktemp("plugin-rpm")
    (work / "libnccl-net.so").write_bytes(library)
    served_dir = work / "served"
    served_dir.mkdir()
    for version, requires, served in (("1.0.2", DEPENDANT, PLUGIN_RPM), ("1.0.3", UNSIGNED, PLUGIN_RPM_UNSIGNED_DEP)):
        build_plugin_rpm(work, version, requires, served_dir / served)
    sha256, unsigned_dep_sha256 = (hashlib.sha256((served_dir / name).read_bytes()).hexdigest()
                                   for name in (PLUGIN_RPM, PLUGIN_RPM_UNSIGNED_DEP))  # fmt: skip
    with served_on_lab_bridge(served_dir) as base:
        yield (f"{base}/{PLUGIN_RPM}", sha256, library, f"{base}/{PLUGIN_RPM_UNSIGNED_DEP}", unsigned_dep_sha256)


def build_plugin_rpm(work: Path, version: str, requires: str, served: Path) -> None:
    (work / "plugin.spec").write_text(textwrap.dedent(f"""\
        Name: aiacc-nccl-plugin
        Version: {version}
        Release: 1
        Summary: STAND-IN for Alibaba's aiacc-nccl-plugin rpm (rdmaforge lab test)
        License: Proprietary
        AutoReqProv: no
        Requires: {requires}
        %global debug_package %{{nil}}
        %global __strip /bin/true
        %global _build_id_links none
        %description
        Carries only the AIACC library of PyPI's aiacc-nccl-plugin 2.0.1 sdist.
        %install
        mkdir -p %{{buildroot}}{PACKAGE_LIB.rsplit("/", 1)[0]}
        install -m 0755 {work / "libnccl-net.so"} %{{buildroot}}{PACKAGE_LIB}
        %files
        {PACKAGE_LIB}
        """))  # fmt: skip
    subprocess.run(["rpmbuild", "--define", f"_topdir {work / 'top'}", "-bb", str(work / "plugin.spec")],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    (work / "top" / "RPMS" / "x86_64" / f"aiacc-nccl-plugin-{version}-1.x86_64.rpm").rename(served)


def test_the_plugin_rpm_source_installs_registers_and_rechecks_the_plugin(
    converged: LabHandle, dnf_node: str, rpm_repo: RpmRepo, stand_in_plugin_rpm: tuple[str, str, bytes, str, str]
) -> None:
    """nccl_plugin_aiacc_source: package on a dnf node: seed 000's `rpm -i aiacc-nccl-plugin-1.0.2.rpm`. Its
    dependencies come from the signed repository with their signatures checked; one that is unsigned is refused,
    and the plugin is not installed (the dnf module's disable_gpg_check had turned the check off for them too)."""
    url, sha256, library, unsigned_dep_url, unsigned_dep_sha256 = stand_in_plugin_rpm
    node = dnf_node
    had = {name for name in (PROBE, DEPENDANT) if rpm_query(converged, node, name).returncode == 0}
    # In sync with a converge record of its own first, so that the check at the end speaks of this test alone.
    start = converged.playbook("site.yml", "--limit", node)
    assert start.returncode == 0, start.stdout[-4000:]
    package = {"nccl_plugin_aiacc_source": "package", "nccl_plugin_aiacc_rpm_url": url,
               "nccl_plugin_aiacc_package_sha256": sha256}  # fmt: skip
    try:
        first = dnf_play(converged, node, rpm_repo, dnf_stage="plugin", **package)
        assert first.returncode == 0, first.stdout[-4000:]
        assert recap(first.stdout)[node]["changed"] > 0
        assert rpm_query(converged, node, "aiacc-nccl-plugin").stdout.strip() == "aiacc-nccl-plugin-1.0.2-1.x86_64"
        assert rpm_query(converged, node, DEPENDANT, PROBE).returncode == 0  # from the signed repository
        assert_package_plugin_in_place(converged, node, first.stdout, library, RECORD)

        again = dnf_play(converged, node, rpm_repo, dnf_stage="plugin", **package)
        assert again.returncode == 0, again.stdout[-4000:]
        assert_no_changes(again.stdout, [node])

        converged.ssh(node, "rpm -e aiacc-nccl-plugin && ldconfig")
        refused = dnf_play(converged, node, rpm_repo, dnf_stage="plugin", nccl_plugin_aiacc_source="package",
                           nccl_plugin_aiacc_rpm_url=unsigned_dep_url,
                           nccl_plugin_aiacc_package_sha256=unsigned_dep_sha256)  # fmt: skip
        assert refused.returncode != 0, refused.stdout[-4000:]
        said = " ".join(refused.stdout.split())
        assert "Install the AIACC rpm's dependencies, their signatures checked" in said, said[-4000:]
        assert rpm_query(converged, node, UNSIGNED).returncode != 0  # never installed unchecked
        assert rpm_query(converged, node, "aiacc-nccl-plugin").returncode != 0
    finally:
        # Back to the converge's plugin (the lab's pypi source, apt as the node really is), without the rpm.
        restore = converged.playbook("nccl_plugin.yml", "--limit", node, timeout=600)
        added = " ".join(name for name in (DEPENDANT, PROBE) if name not in had)
        converged.ssh(node, f"rpm -e aiacc-nccl-plugin; rpm -e {added}; ldconfig; "
                            f"rm -f /opt/rdmaforge/nccl-plugin/pkg/{PLUGIN_RPM} "
                            f"/opt/rdmaforge/nccl-plugin/pkg/{PLUGIN_RPM_UNSIGNED_DEP}", check=False)  # fmt: skip
    assert restore.returncode == 0, restore.stdout[-4000:]
    assert_converge_plugin_back(converged, node)


def test_rdma_core_installs_the_seeds_redhat_packages_through_dnf(
    converged: LabHandle, dnf_node: str, rpm_repo: RpmRepo
) -> None:
    """Seed 000's `yum install libibverbs rdma-core librdmacm libibverbs-utils`: role rdma_core on a node taken for
    RedHat-family selects the erdma profile's RedHat set and dnf installs it (signed STAND-INs of the same names)
    from the erdma repository; a second run changes nothing; reset's withdrawal removes them again."""
    seed = seed_yum_rdma_packages()
    if not seed:
        pytest.skip(f"{SEEDS} is absent: seed 000 lists the packages")
    node = dnf_node
    first = dnf_play(converged, node, rpm_repo, dnf_stage="rdma_core")
    try:
        assert first.returncode == 0, first.stdout[-4000:]
        printed = re.search(rf"RDMA packages for {node} \(erdma\): ([^\"\n]*)", first.stdout)
        assert printed and sorted(printed.group(1).split(", ")) == sorted(seed), first.stdout[-4000:]
        installed = rpm_query(converged, node, *seed)
        assert installed.returncode == 0, installed.stdout
        assert sorted(line.split("-1.0-1")[0] for line in installed.stdout.split()) == sorted(seed)
        # reset's record lists them (beside what an earlier test of this module recorded)
        assert set(seed) <= set(converged.ssh(node, f"cat {RECORD}").stdout.split())

        again = dnf_play(converged, node, rpm_repo, dnf_stage="rdma_core")
        assert again.returncode == 0, again.stdout[-4000:]
        assert_no_changes(again.stdout, [node])
    finally:
        withdrawn = dnf_play(converged, node, rpm_repo, dnf_stage="withdraw")
    assert withdrawn.returncode == 0, withdrawn.stdout[-4000:]
    assert rpm_query(converged, node, *seed).returncode != 0
