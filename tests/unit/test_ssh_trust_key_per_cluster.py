"""One cluster key pair per cluster, also when two inventories name their first node alike.

ssh_trust_cluster_id defaults to the first node's name: two inventories copied from inventories/example both start
with erdma-node1, so on one controller they shared one key pair (every node of one root on the other's, and a
removal in one revoked nothing in the other: review round 15a). The controller's key directory records its
cluster's nodes; a cluster sharing none of them is refused before any key is handed out. Runs the role's
controller_key.yml for real (ssh-keygen, connection local, the controller cache under tmp_path)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import LOCAL_NODE, run_playbook

ENV = {"ANSIBLE_CACHE_PLUGIN": "memory"}
PLAY = [{"name": "the controller's cluster key", "hosts": "cluster", "gather_facts": False,
         "tasks": [{"name": "key", "ansible.builtin.include_role": {"name": "rdmaforge.cluster.ssh_trust",
                                                                   "tasks_from": "controller_key"}}]}]  # fmt: skip


def cluster(tmp_path: Path, name: str, addresses: dict[str, str]) -> Path:
    hosts = {node: {**LOCAL_NODE, "ansible_host": address} for node, address in addresses.items()}
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts}}}}))
    return path


def test_a_second_cluster_with_the_same_first_node_name_gets_no_key_of_the_first(tmp_path: Path) -> None:
    playbook = tmp_path / "key.yml"
    playbook.write_text(yaml.safe_dump(PLAY))
    cache = json.dumps({"ssh_trust_controller_cache": str(tmp_path / "cache")})
    key = tmp_path / "cache" / "erdma-node1-cluster" / "id_ed25519"
    first = cluster(tmp_path, "a", {"erdma-node1": "10.0.0.1", "erdma-node2": "10.0.0.2"})
    assert run_playbook(str(playbook), "-e", cache, inventory=first, env=ENV).returncode == 0
    made = key.read_bytes()
    # The same cluster grown by a node, one node readdressed: still that cluster, the same key.
    grown = cluster(tmp_path, "a2", {"erdma-node1": "10.0.0.1", "erdma-node2": "10.0.0.12", "erdma-node3": "10.0.0.3"})
    assert run_playbook(str(playbook), "-e", cache, inventory=grown, env=ENV).returncode == 0
    other = cluster(tmp_path, "b", {"erdma-node1": "10.9.0.1", "erdma-node2": "10.9.0.2"})
    proc = run_playbook(str(playbook), "-e", cache, inventory=other, env=ENV)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    # The key pair records the nodes it was made for (a membership change rewrites nothing: the converge record
    # would see a changed controller file), and a rotation records the nodes it is made for then.
    assert ('ssh_trust_cluster_id="erdma-node1-cluster": the controller\'s key pair of that name '
            f"({key.parent}) belongs to another cluster (erdma-node1=10.0.0.1, erdma-node2=10.0.0.2), which shares "
            "no node (name=address) with this one (erdma-node1=10.9.0.1, erdma-node2=10.9.0.2)") in said, said[-3000:]
    assert key.read_bytes() == made
    rotate = json.dumps({"ssh_trust_controller_cache": str(tmp_path / "cache"), "ssh_trust_rotate": True})
    assert run_playbook(str(playbook), "-e", rotate, inventory=grown, env=ENV).returncode == 0
    assert json.loads((key.parent / "members.json").read_text()) == [
        "erdma-node1=10.0.0.1", "erdma-node2=10.0.0.12", "erdma-node3=10.0.0.3"]
    made = key.read_bytes()
    # With an id of its own the second cluster gets a key pair of its own.
    own = json.dumps({"ssh_trust_controller_cache": str(tmp_path / "cache"), "ssh_trust_cluster_id": "b-cluster"})
    assert run_playbook(str(playbook), "-e", own, inventory=other, env=ENV).returncode == 0
    assert (tmp_path / "cache" / "b-cluster" / "id_ed25519").read_bytes() != made


def test_the_key_is_named_after_the_trust_groups_first_node(tmp_path: Path) -> None:
    """With ssh_trust_group: gpu_nodes (no group "cluster"), every such inventory's key was "cluster-cluster", so a
    second one on the controller was refused as another cluster's (review round 19b)."""
    playbook = tmp_path / "key.yml"
    playbook.write_text(yaml.safe_dump([{**PLAY[0], "hosts": "gpu_nodes"}]))
    hosts = {node: {**LOCAL_NODE, "ansible_host": address} for node, address in (("gpu-b", "10.0.0.2"),
                                                                                 ("gpu-a", "10.0.0.1"))}  # fmt: skip
    inventory = tmp_path / "gpu.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}))
    variables = json.dumps({"ssh_trust_controller_cache": str(tmp_path / "cache"), "ssh_trust_group": "gpu_nodes"})
    assert run_playbook(str(playbook), "-e", variables, inventory=inventory, env=ENV).returncode == 0
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["gpu-a-cluster"]


def test_removing_the_first_node_revokes_its_key_for_good(tmp_path: Path) -> None:
    """remove_node.yml rotates for the group that remains: with the first node removed, the key directory is named
    after the second, and the old directory kept the key the removed node holds; a node named as the removed one
    rejoining got that revoked key back (review round 38a). The rotation removes every key pair of the cluster."""
    playbook = tmp_path / "key.yml"
    playbook.write_text(yaml.safe_dump(PLAY))
    cache = tmp_path / "cache"
    nodes = {"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"}
    whole = cluster(tmp_path, "whole", nodes)
    assert run_playbook(str(playbook), "-e", json.dumps({"ssh_trust_controller_cache": str(cache)}),
                        inventory=whole, env=ENV).returncode == 0  # fmt: skip
    revoked = (cache / "node1-cluster" / "id_ed25519").read_bytes()
    # remove_node.yml's second play: the remaining nodes (group cluster_remaining), a rotation
    removing = tmp_path / "removing.yml"
    hosts = {node: {**LOCAL_NODE, "ansible_host": address} for node, address in nodes.items()}
    remaining = {"hosts": {"node2": {}, "node3": {}}}
    removing.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": hosts},
                                                              "cluster_remaining": remaining}}}))
    remove_play = tmp_path / "remove.yml"
    remove_play.write_text(yaml.safe_dump([{**PLAY[0], "hosts": "cluster_remaining"}]))
    rotation = {"ssh_trust_controller_cache": str(cache), "ssh_trust_group": "cluster_remaining",
                "ssh_trust_rotate": True}
    assert run_playbook(str(remove_play), "-e", json.dumps(rotation), inventory=removing, env=ENV).returncode == 0
    assert sorted(p.name for p in cache.iterdir()) == ["node2-cluster"]
    # node1 back (or a new node of that name): a key pair of its own, never the revoked one
    assert run_playbook(str(playbook), "-e", json.dumps({"ssh_trust_controller_cache": str(cache)}),
                        inventory=whole, env=ENV).returncode == 0  # fmt: skip
    assert (cache / "node1-cluster" / "id_ed25519").read_bytes() != revoked
