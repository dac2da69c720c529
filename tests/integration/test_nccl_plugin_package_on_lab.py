"""nccl_plugin_aiacc_source: package, seed 000's way (`dpkg -i aiacc-nccl-plugin-1.0.2.deb`), on one lab node.

Alibaba's deb cannot be downloaded from here and its file list is not published, so the test builds a STAND-IN: a
real .deb made with dpkg-deb, named and versioned like the seed's (aiacc-nccl-plugin 1.0.2), whose only file is the
real AIACC library (taken from the PyPI sdist the lab mirror serves) at the path the role expects by default
(nccl_plugin_aiacc_package_lib). What is real: the download from an HTTP server on the lab bridge with the pinned
sha256, the package name read from the file and recorded for `rdmaforge reset`, apt installing the file, the API
checks against the lab's NCCL build, the link and the ld.so registration, and a second run that changes nothing.
The node is put back as the converge left it, and the test shows that with site.yml's fast path.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import (
    IN_SYNC,
    LabHandle,
    aiacc_library_from_mirror,
    assert_no_changes,
    recap,
    served_on_lab_bridge,
)

pytestmark = pytest.mark.lab

DEB = "aiacc-nccl-plugin-1.0.2.deb"  # seed 000's file name
PACKAGE_LIB = "/usr/local/lib/libnccl-net.so"  # nccl_plugin_aiacc_package_lib's default
LINK = "/opt/rdmaforge/nccl-plugin/lib/libnccl-net.so"
RECORD = "/var/lib/rdmaforge/packages-added"


@pytest.fixture(scope="module")
def stand_in_deb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, bytes]]:
    """(URL, sha256) of the stand-in deb served on the lab bridge, and the library in it."""
    library = aiacc_library_from_mirror()
    root = tmp_path_factory.mktemp("deb-root")
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN" / "control").write_text(
        "Package: aiacc-nccl-plugin\nVersion: 1.0.2\nArchitecture: amd64\n"
        "Maintainer: rdmaforge tests <lab@lab.invalid>\n"
        "Description: STAND-IN for Alibaba's aiacc-nccl-plugin deb (rdmaforge lab test)\n"
        " Carries only the AIACC library of PyPI's aiacc-nccl-plugin 2.0.1 sdist.\n"
    )
    lib_dir = root / PACKAGE_LIB.lstrip("/").rsplit("/", 1)[0]
    lib_dir.mkdir(parents=True)
    (lib_dir / "libnccl-net.so").write_bytes(library)
    served = tmp_path_factory.mktemp("deb-served")
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(served / DEB)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    sha256 = hashlib.sha256((served / DEB).read_bytes()).hexdigest()
    with served_on_lab_bridge(served) as base:
        yield f"{base}/{DEB}", sha256, library


def test_the_package_source_installs_registers_and_rechecks_the_plugin(
    converged: LabHandle, stand_in_deb: tuple[str, str, bytes]
) -> None:
    url, sha256, library = stand_in_deb
    node = sorted(converged.nodes)[-1]
    # In sync with a converge record of its own first (a no-op when the modules before left it so), so that the
    # fast path at the end speaks of this test alone.
    start = converged.playbook("site.yml", "--limit", node)
    assert start.returncode == 0, start.stdout[-4000:]
    record_before = converged.ssh(node, f"cat {RECORD} 2>/dev/null || echo ABSENT").stdout
    package_vars = json.dumps({
        "nccl_plugin_aiacc_source": "package",
        "nccl_plugin_aiacc_deb_url": url,
        "nccl_plugin_aiacc_package_sha256": sha256,
    })  # fmt: skip
    try:
        first = converged.playbook("nccl_plugin.yml", "--limit", node, "-e", package_vars, timeout=600)
        assert first.returncode == 0, first.stdout[-4000:]
        assert recap(first.stdout)[node]["changed"] > 0
        status = converged.ssh(node, "dpkg-query -W -f '${Status} ${Version}' aiacc-nccl-plugin").stdout
        assert status == "install ok installed 1.0.2", status
        assert_package_plugin_in_place(converged, node, first.stdout, library, RECORD)

        again = converged.playbook("nccl_plugin.yml", "--limit", node, "-e", package_vars, timeout=600)
        assert again.returncode == 0, again.stdout[-4000:]
        assert_no_changes(again.stdout, [node])
    finally:
        # Back to the converge's plugin (the lab's pypi source), which removes the package rdmaforge installed (its
        # library in /usr/local/lib would still be what NCCL loads); then the file and the record go.
        restore = converged.playbook("nccl_plugin.yml", "--limit", node, timeout=600)
        left = converged.ssh(node, f"test -e {PACKAGE_LIB} || test -e /var/lib/rdmaforge/nccl-plugin-package",
                             check=False).returncode == 0  # fmt: skip
        converged.ssh(node, f"dpkg -r aiacc-nccl-plugin; ldconfig; rm -f /opt/rdmaforge/nccl-plugin/pkg/{DEB}",
                      check=False)  # fmt: skip
        if record_before.strip() == "ABSENT":
            converged.ssh(node, f"rm -f {RECORD}")
        else:
            converged.ssh(node, f"cat > {RECORD} <<'EOF'\n{record_before}EOF")
    assert restore.returncode == 0, restore.stdout[-4000:]
    assert not left, f"the pypi source left the package's {PACKAGE_LIB} (or its record): NCCL would still load it"
    assert_converge_plugin_back(converged, node)


def assert_package_plugin_in_place(lab: LabHandle, node: str, output: str, library: bytes, record: str) -> None:
    """After nccl_plugin's package source (deb or rpm) installed seed 000's aiacc-nccl-plugin 1.0.2 on ``node``."""
    assert lab.ssh(node, f"readlink {LINK}").stdout.strip() == PACKAGE_LIB
    got = lab.ssh(node, f"sha256sum < {LINK}").stdout.split()[0]
    assert got == hashlib.sha256(library).hexdigest()
    assert LINK in lab.ssh(node, "ldconfig -p | grep 'libnccl-net.so '").stdout
    # Recorded as a package this run added (its name read from the file), so `rdmaforge reset` removes it.
    assert "aiacc-nccl-plugin" in lab.ssh(node, f"cat {record}").stdout.split()
    # The checks ran on the package's library: the version from the file name, NCCL's pairing.
    assert "aiacc 1.0.2 is documented for NCCL 2.8-2.16" in output, output[-4000:]
    assert "through net API v6" in output


def assert_converge_plugin_back(lab: LabHandle, node: str) -> None:
    """``node`` has the converge's plugin again (the lab's pypi source) and nothing of the test is left: it is in
    sync with its converge record."""
    assert lab.ssh(node, f"readlink {LINK}").stdout.strip().endswith("/aiacc-2.0.1/libnccl-net.so.0.0.0")
    proc = lab.playbook("site.yml", "--limit", node)
    why = proc.stdout.partition("Say which nodes converge and why")[2][:3000]  # the fast path's reasons, if any
    assert proc.returncode == 0 and IN_SYNC in proc.stdout, why or proc.stdout[-4000:]
