"""What the lab's base image and its local mirror hold: the one list, in one place.

Roles that install packages on lab nodes add them to MIRROR_APT_PACKAGES (or MIRROR_PIP_PACKAGES) so that
the lab mirror serves them; the mirror is rebuilt automatically when these lists change.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

#: Debian release of the lab nodes (the issue asks for Debian 12).
SUITE = "bookworm"
ARCH = "amd64"

#: Baked into the cached base root filesystem: what a freshly installed cloud image would have.
#: grub2-common brings /usr/sbin/update-grub and the default /etc/default/grub template.
BASE_PACKAGES: tuple[str, ...] = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "python3",
    "python3-apt",
    "iproute2",
    "iputils-ping",
    "procps",
    "kmod",
    "sudo",
    "ca-certificates",
    "grub2-common",
)

#: Served by the lab mirror's Debian repository (stand-in for the distro archive) together with every
#: dependency a base node lacks. Later roles append what they install here.
MIRROR_APT_PACKAGES: tuple[str, ...] = (
    # rdma userspace (seed 000 eRDMA list, seed 001 InfiniBand list)
    "libibverbs1",
    "ibverbs-providers",
    "ibverbs-utils",
    "librdmacm1",
    "rdma-core",
    "infiniband-diags",
    "perftest",
    "libibumad3",
    # MPI (seed 000)
    "openmpi-bin",
    "libopenmpi-dev",
    # building NCCL / nccl-tests and Python venvs for plugins and benchmarks
    "build-essential",
    "git",
    "python3-venv",
    "python3-debian",
    "python3-packaging",  # ansible.builtin.pip needs it on the node
    "gnupg",
    "binutils",
    "pciutils",
    "curl",
    # rdmaforge pairwise measures each node pair per rail with iperf3 where there is no GPU (seed 003)
    "iperf3",
    # The RHEL-family package path (rpm_key, the yum repository, dnf install and reset), run with Debian's dnf on
    # one node by tests/integration/test_dnf_path_on_lab.py; no role installs them.
    "dnf",
    "rpm",
)

#: The subset that the erdma repository (laid out like Alibaba's erdma apt mirror) carries.
ERDMA_APT_PACKAGES: tuple[str, ...] = (
    "libibverbs1",
    "ibverbs-providers",
    "ibverbs-utils",
    "librdmacm1",
    "rdma-core",
)

#: Served from the mirror's pip find-links directory: requirement specifiers, with their dependencies.
#: torch 2.13.0 CPU comes from this machine's local wheel directory (pip is configured to look there).
MIRROR_PIP_PACKAGES: tuple[str, ...] = (
    "aiacc-nccl-plugin==2.0.1",
    "torch==2.13.0",
    "setuptools",
)

#: Source distributions that must stay sdists (the AIACC plugin ships libnccl-net.so inside its sdist).
MIRROR_PIP_SDIST_ONLY: tuple[str, ...] = ("aiacc-nccl-plugin",)


@dataclass(frozen=True)
class SourceTarball:
    name: str
    url: str
    sha256: str


#: NCCL's real source: the orig tarball of Debian contrib's nvidia-nccl source package.
NCCL_SOURCE = SourceTarball(
    name="nvidia-nccl_2.29.7-1.orig.tar.gz",
    url="http://deb.debian.org/debian/pool/contrib/n/nvidia-nccl/nvidia-nccl_2.29.7-1.orig.tar.gz",
    sha256="e67239212c395bfdb398a7519491840d06fdf6b599c299f97c7ed0109777bba1",
)


#: nccl-tests' source. Neither Debian nor PyPI carries it and the lab cannot reach GitHub, so the mirror serves the
#: `git archive` tarball kept in ../shared/sources beside the checkout (rdmaforge.lab.mirror.LOCAL_SOURCES), pinned
#: by that directory's SHA256SUMS. Without it the mirror has no nccl-tests and the lab inventory says why.
NCCL_TESTS_VERSION = "2.19.6"
NCCL_TESTS_TARBALL = f"nccl-tests-{NCCL_TESTS_VERSION}.tar.gz"


def fingerprint(*parts: object) -> str:
    """Short stable hash of the given lists: a cache key that changes whenever a list changes."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]
