"""What a converged node must look like (issue 3's roles). Each test reads, never changes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rdmaforge.parsers.nccl_env import parse_conf, plugin_api_versions

ERDMA_DEBIAN = ["libibverbs1", "ibverbs-providers", "ibverbs-utils", "librdmacm1", "rdma-core"]
ERDMA_REDHAT = ["libibverbs", "rdma-core", "librdmacm", "libibverbs-utils"]


def test_erdma_repository_and_keyring(host: Any, fabric: str) -> None:
    if fabric != "erdma":
        pytest.skip(f"fabric {fabric}: the erdma repository is not used")
    if host.system_info.distribution in ("debian", "ubuntu"):
        source = host.file("/etc/apt/sources.list.d/erdma.sources")
        assert source.exists and source.mode == 0o644
        assert re.search(r"^Signed-By: /etc/apt/keyrings/erdma\.gpg$", source.content_string, re.M)
        assert re.search(r"^Suites: \S+/erdma$", source.content_string, re.M)
        assert host.file("/etc/apt/keyrings/erdma.gpg").exists
    else:
        repo = host.file("/etc/yum.repos.d/erdma.repo")
        assert repo.exists and re.search(r"^gpgcheck\s*=\s*1$", repo.content_string, re.M)


def test_rdma_userspace_packages(host: Any, fabric: str) -> None:
    if fabric != "erdma":
        pytest.skip(f"fabric {fabric}: package set checked by its own role")
    names = ERDMA_DEBIAN if host.system_info.distribution in ("debian", "ubuntu") else ERDMA_REDHAT
    missing = [name for name in names if not host.package(name).is_installed]
    assert not missing, f"not installed: {missing}"


def test_memlock_drop_in(host: Any, fabric: str) -> None:
    drop_in = host.file("/etc/security/limits.d/90-rdmaforge-memlock.conf")
    if fabric == "tcp":
        assert not drop_in.exists
    else:
        assert drop_in.contains("root hard memlock unlimited")


def test_nccl_conf_holds_the_profile(host: Any, hostvars: dict[str, Any]) -> None:
    conf = host.file("/etc/nccl.conf")
    assert conf.exists and conf.mode == 0o644
    settings = parse_conf(conf.content_string)
    assert all(key.startswith("NCCL_") for key in settings)
    if hostvars.get("rdmaforge_fabric") == "acs_type2":
        assert settings.get("NCCL_IB_DISABLE") == "1" and settings.get("NCCL_IB_HCA") == ""


def test_mpirun_on_non_interactive_path(host: Any) -> None:
    assert host.run("command -v mpirun").rc == 0
    assert "Open MPI" in host.check_output("mpirun --version")


def test_nccl_net_plugin_registered_and_exports_net_api(host: Any, fabric: str) -> None:
    link = host.file("/opt/rdmaforge/nccl-plugin/lib/libnccl-net.so")
    if fabric != "erdma":
        pytest.skip(f"fabric {fabric}: no plugin by default")
    assert link.is_symlink
    assert "/opt/rdmaforge/nccl-plugin/lib" in host.file("/etc/ld.so.conf.d/rdmaforge-nccl-plugin.conf").content_string
    assert plugin_api_versions(host.check_output("nm -D --defined-only /opt/rdmaforge/nccl-plugin/lib/libnccl-net.so"))
