"""What the cluster-wide roles leave on every node: NCCL built once and registered with ld.so, and the cluster's
SSH trust. Read-only, like the rest of the suite.

Huge pages and policy routes: test_tuning_state.py.
"""

from __future__ import annotations

import json
import re
from typing import Any


def literal(hostvars: dict[str, Any], name: str, default: str) -> str:
    """An inventory value, or the role's default when it is unset or still a template (testinfra does not render)."""
    value = hostvars.get(name)
    return default if value is None or "{{" in str(value) else str(value)


def test_nccl_is_installed_from_the_cluster_build_and_registered(host: Any, hostvars: dict[str, Any]) -> None:
    prefix = literal(hostvars, "nccl_build_prefix_root", "/opt/nccl")
    assert host.file(f"{prefix}/current").is_symlink
    manifest = json.loads(host.file(f"{prefix}/current/.rdmaforge-build.json").content_string)
    assert manifest["name"] == "nccl" and manifest["sha256"]
    version = literal(hostvars, "nccl_build_version", "")
    if version:
        assert manifest["version"] == version
    assert host.file(f"{prefix}/current/lib/libnccl.so.2").exists
    assert f"{prefix}/current/lib" in host.file("/etc/ld.so.conf.d/rdmaforge-nccl.conf").content_string
    cache = host.check_output("PATH=$PATH:/sbin:/usr/sbin ldconfig -p")
    # ld.so.cache holds the directory as configured (current/) or resolved (the versioned build directory).
    assert re.search(rf"libnccl\.so\.2 .*=> {re.escape(prefix)}/[^/\s]+/lib/libnccl\.so\.2$", cache, re.M), cache


def test_cluster_ssh_trust_key_and_known_hosts(host: Any, hostvars: dict[str, Any]) -> None:
    user = literal(hostvars, "ssh_trust_user", "root")
    home = host.user(user).home
    key = host.file(f"{home}/.ssh/{literal(hostvars, 'ssh_trust_key_name', 'rdmaforge_cluster_ed25519')}")
    assert key.exists and key.mode == 0o600 and key.user == user
    assert "# BEGIN rdmaforge cluster trust" in host.file(f"{home}/.ssh/authorized_keys").content_string
    known = host.file("/etc/ssh/ssh_known_hosts").content_string
    block = known.partition("# BEGIN rdmaforge cluster trust")[2].partition("# END rdmaforge cluster trust")[0]
    missing = [
        peer for peer in hostvars["groups"].get("cluster", []) if not re.search(rf"^{re.escape(peer)}[, ]", block, re.M)
    ]
    assert not missing, f"no host key in /etc/ssh/ssh_known_hosts for {missing}"
