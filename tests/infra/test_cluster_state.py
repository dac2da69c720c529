"""What the cluster-wide roles leave on every node: NCCL built once and registered with ld.so, and the cluster's
SSH trust. Read-only, like the rest of the suite.

Huge pages and policy routes: test_tuning_state.py.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from rdmaforge.infra_expectations import literal, setting
from rdmaforge.parsers import ld_cache


def test_nccl_is_installed_from_the_cluster_build_and_registered(host: Any, hostvars: dict[str, Any]) -> None:
    prefix = str(literal(hostvars, "nccl_build_prefix_root", "/opt/nccl"))
    assert host.file(f"{prefix}/current").is_symlink
    manifest = json.loads(host.file(f"{prefix}/current/.rdmaforge-build.json").content_string)
    assert manifest["name"] == "nccl" and manifest["sha256"]
    # The inventory's version, else the nccl_build role's default: the version the role installs when none is set.
    version = setting(hostvars, "nccl_build", "nccl_build_version")
    if version not in (None, ""):
        assert manifest["version"] == str(version), f"NCCL {manifest['version']} installed; planned {version}"
    assert host.file(f"{prefix}/current/lib/libnccl.so.2").exists
    registered = [line.strip() for line in host.file("/etc/ld.so.conf.d/rdmaforge-nccl.conf").content_string
                  .splitlines() if line.strip() and not line.strip().startswith("#")]  # fmt: skip
    assert f"{prefix}/current/lib" in registered, registered
    cache = host.check_output("PATH=$PATH:/sbin:/usr/sbin ldconfig -p").splitlines()
    # ld.so.cache holds the directory as configured (current/) or resolved (the versioned build directory): either
    # way the library programs get must be current's, not that of another build under the prefix.
    found = ld_cache.resolve(cache, "libnccl.so.2") or ""
    assert re.fullmatch(rf"{re.escape(prefix)}/[^/\s]+/lib/libnccl\.so\.2", found), found
    current_lib = f"{prefix}/current/lib/libnccl.so.2"
    given, current = host.check_output(f"readlink -f {shlex.quote(found)} {shlex.quote(current_lib)}").splitlines()
    assert given == current, f"ld.so gives programs {found} ({given}), not the current build's {current}"


def test_cluster_ssh_trust_key_and_known_hosts(host: Any, hostvars: dict[str, Any]) -> None:
    user = str(literal(hostvars, "ssh_trust_user", "root"))
    home = host.user(user).home
    key = host.file(f"{home}/.ssh/{literal(hostvars, 'ssh_trust_key_name', 'rdmaforge_cluster_ed25519')}")
    assert key.exists and key.mode == 0o600 and key.user == user
    authorized = host.file(f"{home}/.ssh/authorized_keys").content_string
    assert "# BEGIN rdmaforge cluster trust" in authorized
    # The cluster block must authorise this very key (every node holds the cluster's one pair): a block left with
    # another key, as an interrupted rotation leaves it, lets no peer in with the key the node offers.
    trusted = authorized.partition("# BEGIN rdmaforge cluster trust")[2].partition("# END rdmaforge cluster trust")[0]
    public = host.run(f"ssh-keygen -y -f {key.path}")
    assert public.rc == 0 and public.stdout.split()[:2], f"ssh-keygen -y -f {key.path}: {public.stderr.strip()}"
    # A line that is the key itself (the role writes the bare public key): one commented out, or restricted by
    # options (from=, command=) in front of it, lets no peer in as the cluster key does.
    keys = [line.split()[:2] for line in trusted.splitlines()]
    assert public.stdout.split()[:2] in keys, f"authorized_keys' cluster block lacks {key.path}'s key as a line"
    known = host.file("/etc/ssh/ssh_known_hosts").content_string
    block = known.partition("# BEGIN rdmaforge cluster trust")[2].partition("# END rdmaforge cluster trust")[0]
    peers = trust_peers(hostvars)
    missing = [peer for peer in peers if not re.search(rf"^{re.escape(peer)}[, ]", block, re.M)]
    assert not missing, f"no host key in /etc/ssh/ssh_known_hosts for {missing}"


def trust_peers(hostvars: dict[str, Any]) -> list[str]:
    """The nodes the cluster trust covers: the hosts of ssh_trust_group (group cluster by default); none is a
    failure, never a loop over nothing."""
    group = str(literal(hostvars, "ssh_trust_group", "cluster"))
    peers = [str(peer) for peer in hostvars["groups"].get(group, [])]
    assert peers, f"group {group!r} (ssh_trust_group) has no hosts: no peer to check the trust against"
    return peers


def known_keys(block: str, name: str) -> set[tuple[str, str]]:
    """(type, key) pairs a known_hosts block lists for ``name``."""
    keys = set()
    for line in block.splitlines():
        fields = line.split()
        if len(fields) >= 3 and not line.startswith("#") and name in fields[0].split(","):
            keys.add((fields[1], fields[2]))
    return keys


def test_known_hosts_holds_the_keys_the_peers_really_serve(host: Any, hostvars: dict[str, Any]) -> None:
    """Each peer's known_hosts keys against the keys its sshd serves now: a stale or replaced key fails."""
    known = host.file("/etc/ssh/ssh_known_hosts").content_string
    block = known.partition("# BEGIN rdmaforge cluster trust")[2].partition("# END rdmaforge cluster trust")[0]
    stale = []
    for peer in trust_peers(hostvars):
        listed = known_keys(block, peer)
        scan = host.run(f"ssh-keyscan -T 10 {peer}")
        served = {(f[1], f[2]) for f in (line.split() for line in scan.stdout.splitlines()) if len(f) >= 3}
        assert served, f"ssh-keyscan {peer} got no key: {scan.stderr.strip()}"
        stale += [f"{peer} {kind} {key[:16]}..." for kind, key in sorted(listed - served)]
    assert not stale, f"/etc/ssh/ssh_known_hosts lists keys the peers do not serve: {stale}"
