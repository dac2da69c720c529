"""Cluster SSH trust: the names each node answers to, its ssh_known_hosts lines, and the reachability of the pairs
each node's ssh_mesh_check result probed, with how much of the N x N mesh they cover. Used by the ssh_trust role's
filters and tests."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rdmaforge.hostnames import short_name

HOST_KEY_TYPES = ("ed25519", "ecdsa", "rsa")
#: What the converge_state role registers on every node at the start of site.yml: its answer carries the node's
#: host keys and addresses as read in this run (``host_identity``), never from the fact cache.
OBSERVATION = "converge_state_check"
_IDENTITY_FACTS = ("all_ipv4_addresses", *(f"ssh_host_key_{kind}_public" for kind in HOST_KEY_TYPES))


def address(host: str, hostvars: Mapping[str, Mapping[str, Any]]) -> str:
    return str(hostvars[host].get("ansible_host", host))


def forms(host: str, hostvars: Mapping[str, Mapping[str, Any]], check_by: Sequence[str]) -> list[str]:
    """How a peer is reached in the check: its address and/or its inventory name, in that order."""
    result = []
    if "address" in check_by:
        result.append(address(host, hostvars))
    if "name" in check_by:
        result.append(host)
    return list(dict.fromkeys(result))


def peer_forms(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], check_by: Sequence[str]) -> list[str]:
    return [form for host in hosts for form in forms(host, hostvars, check_by)]


def ring_peers(members: Sequence[str], source: str, limit: int) -> list[str]:
    """The peers ``source`` checks: every other member when ``limit`` is 0 or covers them all, else the next
    ``limit`` members after it in sorted order (a ring). Every node is then a source ``limit`` times and a target
    ``limit`` times, which catches a node whose key, host key or sshd is wrong, while the sessions grow as
    N x limit instead of N x N (a 1,000-node cluster would otherwise open a million)."""
    ring = sorted(dict.fromkeys(members))
    others = [m for m in ring if m != source]
    if limit <= 0 or limit >= len(others) or source not in ring:
        return others
    start = ring.index(source)
    return [ring[(start + step) % len(ring)] for step in range(1, limit + 1)]


def observed_identity(host: str, hostvars: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The host keys and addresses this run read on ``host`` (see OBSERVATION), or None when it read none."""
    registered = hostvars[host].get(OBSERVATION)
    identity = registered.get("host_identity") if isinstance(registered, Mapping) else None
    if not isinstance(identity, Mapping) or not identity.get("ssh_host_keys"):
        return None
    return identity


def unobserved(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The hosts whose host keys this run has not read yet: the ssh_trust role gathers their facts itself."""
    return [host for host in hosts if observed_identity(host, hostvars) is None]


def left_out_share(members: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], play_hosts_all: Sequence[str],
                   play_hosts: Sequence[str], reader: str) -> list[str]:  # fmt: skip
    """The nodes of ``members`` this run leaves out (not in ``play_hosts_all``: --limit) and has not observed
    (unobserved), which the ssh_trust role reads itself: ``reader``'s share of them. They are dealt in name order
    over the play's hosts still running (``play_hosts``, in name order), so that each is read by exactly one of
    them and the play's hosts read theirs at once (forks), where one host used to read them all in turn; a host
    not running reads none."""
    in_play = set(play_hosts_all)
    left_out = unobserved(sorted({host for host in members if host not in in_play}), hostvars)
    readers = sorted(set(play_hosts))
    return left_out[readers.index(reader) :: len(readers)] if reader in readers else []


def identity_facts(host: str, hostvars: Mapping[str, Mapping[str, Any]],
                   gathered: Sequence[str] | None = None) -> Mapping[str, Any]:  # fmt: skip
    """The host's facts, its host keys and addresses taken from this run's observation when the host is not in
    ``gathered`` (the hosts whose facts the play gathered itself; None: all of them) and was observed. A host the
    play leaves out may have facts from the fact cache, that is, from an earlier run; a host in the play has facts
    read after the roles before it (a secondary NIC's address, say), later than the observation."""
    facts: Mapping[str, Any] = hostvars[host].get("ansible_facts", {})
    identity = None if gathered is None or host in gathered else observed_identity(host, hostvars)
    if identity is None:
        return facts
    merged = {k: v for k, v in facts.items() if not k.startswith(_IDENTITY_FACTS)}
    merged["all_ipv4_addresses"] = list(identity.get("ipv4_addresses") or [])
    for kind, key in identity["ssh_host_keys"].items():
        merged[f"ssh_host_key_{kind}_public"] = key.get("key")
        merged[f"ssh_host_key_{kind}_public_keytype"] = key.get("keytype")
    return merged


def _ipv4_order(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in value.split("."))
    except ValueError:
        return (1 << 16,)


def names(host: str, hostvars: Mapping[str, Mapping[str, Any]], gathered: Sequence[str] | None = None) -> list[str]:
    """Every name and address a node answers to: inventory name, short name, ansible_host, all its IPv4s (sorted:
    gathered facts list them in the kernel's order of interfaces, an observation sorted; one text for both)."""
    ipv4 = sorted(identity_facts(host, hostvars, gathered).get("all_ipv4_addresses", []), key=_ipv4_order)
    candidates = [host, short_name(host), address(host, hostvars), *ipv4]
    return list(dict.fromkeys(c for c in candidates if c))


def peer_names(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]],
               gathered: Sequence[str] | None = None) -> list[str]:  # fmt: skip
    return list(dict.fromkeys(n for host in hosts for n in names(host, hostvars, gathered)))


def known_hosts_lines(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]],
                      gathered: Sequence[str] | None = None) -> list[str]:  # fmt: skip
    """ssh_known_hosts lines from the host-key facts (see identity_facts for ``gathered``); a node without keys is
    an error. A name or address more than one node answers to (docker0's 172.17.0.1 on every node, a stray copy of
    another node's address) is on no line: listed under each node's key, ssh to it accepted any of them, and a node
    could pose as another (review round 38a). A comment line names what was left out."""
    every = {host: names(host, hostvars, gathered) for host in hosts}
    owners: dict[str, set[str]] = {}  # each name or address -> the nodes that answer to it (one pass: 1,000 nodes)
    for host, forms in every.items():
        for form in forms:
            owners.setdefault(form, set()).add(host)
    # A node's own names (inventory name, short name, ansible_host) stay its own: only gathered addresses go.
    own_names = {host: {host, short_name(host), address(host, hostvars)} for host in hosts}
    dropped = {host: {form for form in forms if form not in own_names[host] and len(owners[form]) > 1}
               for host, forms in every.items()}  # fmt: skip
    # The comment names only what is on no line at all (an address kept on its owner's line is trusted there).
    nowhere = sorted((form for form, hosts_of in owners.items()
                      if len(hosts_of) > 1 and all(form in dropped[h] for h in hosts_of)), key=_ipv4_order)  # fmt: skip
    lines = [f"# left out, more than one node answers to it: {', '.join(nowhere)}"] if nowhere else []
    for host in sorted(hosts):
        facts = identity_facts(host, hostvars, gathered)
        keys = [
            (facts.get(f"ssh_host_key_{kind}_public_keytype"), facts.get(f"ssh_host_key_{kind}_public"))
            for kind in HOST_KEY_TYPES
        ]
        keys = [(t, k) for t, k in keys if t and k]
        if not keys and gathered is not None and host not in gathered:
            raise ValueError(f"{host}: left out of this run, and its SSH host keys could not be read (it did not "
                             "answer, and no earlier run's facts are cached): run with it reachable, or take it out "
                             "of the cluster (rdmaforge remove-node)")  # fmt: skip
        if not keys:
            raise ValueError(f"{host}: no SSH host key facts were gathered (is sshd installed and running?)")
        own = [form for form in every[host] if form not in dropped[host]]
        lines += [f"{','.join(own)} {kind} {key}" for kind, key in keys]
    return lines


def _probes(host: str, hostvars: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    registered = hostvars[host].get("ssh_trust_probe")
    if not isinstance(registered, Mapping) or "probes" not in registered:
        return None
    results: Mapping[str, Any] = registered["probes"]
    return results


def _target_forms(targets: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]],
                  check_by: Sequence[str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:  # fmt: skip
    """Each target's forms, and the targets each form names: worked out once for every source (a 1,000-node matrix
    has a million pairs, of which a bounded check probes a few thousand)."""
    by_target = {target: forms(target, hostvars, check_by) for target in targets}
    by_form: dict[str, list[str]] = {}
    for target, named in by_target.items():
        for form in named:
            by_form.setdefault(form, []).append(target)
    return by_target, by_form


def _probed(source: str, probes: Mapping[str, Any], by_form: Mapping[str, Sequence[str]]) -> dict[str, None]:
    """The targets other than itself that ``source`` probed at all, by any of their forms, in the order of its probes
    (a bounded check leaves most pairs of a large cluster out): read from the source's probes, not from every
    target."""
    return dict.fromkeys(target for form in probes for target in by_form.get(form, ()) if target != source)


def _read_once(hosts: Sequence[str], targets: Sequence[str] | None, hostvars: Mapping[str, Mapping[str, Any]]
               ) -> tuple[list[str], list[str], dict[str, Mapping[str, Any]]]:  # fmt: skip
    """The sources, the targets (default: the sources) and each one's variables, each read once. Under Ansible the
    two lists are lazy (every pass over one renders each item again: a pass over the targets for every source was a
    million at 1,000 nodes) and ``hostvars[node]`` works out all of the node's variables at each lookup (a few ms
    at 1,000 nodes): the role's matrix and failures took 13 and 5 CPU s there (benchmarks/ssh_mesh_scale.py)."""
    sources = list(hosts)
    chosen = sources if targets is None else list(targets)
    return sources, chosen, {host: hostvars[host] for host in dict.fromkeys([*sources, *chosen])}


def matrix(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], check_by: Sequence[str],
           targets: Sequence[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The check's result in one pass, as large as the pairs probed (a 1,000-node cluster checked 8 peers deep
    probes 8,000 of its 999,000 ordered pairs: a full N x N table was 991,000 nulls for Ansible to take in):

    - ``pairs``: {source: {target: reached by every form}} for each pair ``source`` probed; a pair absent was not
      checked (never counted as reached). A source that answered nothing has every target False (failed: the
      failures name it);
    - ``coverage``: how many ordered pairs of distinct hosts were probed, reached, failed and not checked (the pairs
      absent from ``pairs``), what the role prints after a check.

    ``targets`` (default: ``hosts``) may hold nodes that probed nothing themselves (left out by --limit)."""
    hosts, chosen, hostvars = _read_once(hosts, targets, hostvars)
    chosen = list(dict.fromkeys(chosen))
    by_target, by_form = _target_forms(chosen, hostvars, check_by)
    in_chosen = set(chosen)
    pairs: dict[str, dict[str, bool]] = {}
    total = 0
    for source in dict.fromkeys(hosts):
        total += len(chosen) - (source in in_chosen)
        probes = _probes(source, hostvars)
        if probes is None:
            pairs[source] = {target: False for target in chosen if target != source}
            continue
        pairs[source] = {
            target: all(probes.get(form, {}).get("ok", False) for form in by_target[target])
            for target in _probed(source, probes, by_form)
        }
    values = [value for row in pairs.values() for value in row.values()]
    reached = sum(values)
    coverage = {"probed": len(values), "reached": reached, "failed": len(values) - reached,
                "not_checked": total - len(values)}  # fmt: skip
    return {"pairs": pairs, "coverage": coverage}


def failures(hosts: Sequence[str], hostvars: Mapping[str, Mapping[str, Any]], check_by: Sequence[str],
             targets: Sequence[str] | None = None) -> list[str]:  # fmt: skip
    """One line per failing (source, target, form): 'node1 -> node3 (198.18.0.13): Host key verification failed.'"""
    hosts, chosen, hostvars = _read_once(hosts, targets, hostvars)
    by_target, by_form = _target_forms(chosen, hostvars, check_by)
    lines = []
    for source in hosts:
        probes = _probes(source, hostvars)
        if probes is None:
            lines.append(f"{source} -> *: no result from {source} (unreachable, or the check did not run)")
            continue
        probed = _probed(source, probes, by_form)
        for target in chosen:
            if target == source or target not in probed:
                continue
            for form in by_target[target]:
                probe = probes.get(form, {})
                if not probe.get("ok", False):
                    reason = probe.get("error") or f"exit status {probe.get('rc')}"
                    lines.append(f"{source} -> {target} ({form}): {reason}")
    return lines


#: A login's cluster key is ~/.ssh/<key>: the rule key_name.yml applies to ssh_trust_key_name.
_KEY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def recorded_logins(text: str, record: str) -> list[dict[str, str]]:
    """The logins ({user, home, key}) the ssh_trust role's login record (``record``, its text ``text``) lists, each
    once, in order; none for an empty record. The withdrawal removes ``<home>/.ssh/<key>`` by them, so an entry whose
    home is not an absolute path, or whose key is not a plain file name, is refused with the record's path."""
    if not text.strip():
        return []
    try:
        entries = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{record}: not JSON ({error}); it lists the logins holding rdmaforge's cluster SSH trust "
                         "as [{\"user\": ..., \"home\": ..., \"key\": ...}]") from None  # fmt: skip
    logins: list[dict[str, str]] = []
    for entry in entries if isinstance(entries, list) else [entries]:
        fields = entry if isinstance(entry, dict) else {}
        user, home, key = (fields.get(name) for name in ("user", "home", "key"))
        if not (isinstance(user, str) and user and isinstance(home, str) and home.startswith("/")
                and isinstance(key, str) and _KEY_NAME.fullmatch(key)):  # fmt: skip
            raise ValueError(f"{record}: entry {json.dumps(entry)} is not a login rdmaforge recorded; allowed: "
                             '{"user": NAME, "home": ABSOLUTE PATH, "key": FILE NAME IN ~/.ssh}')  # fmt: skip
        login = {"user": user, "home": home, "key": key}
        if login not in logins:
            logins.append(login)
    return logins
