"""rdmaforge.role_defaults evaluates a role default that is Jinja for one host's variables, as the role does, so
that Python reads the default from the role's defaults/main.yml instead of keeping a copy of its logic."""

from __future__ import annotations

import pytest

from rdmaforge import role_defaults


@pytest.mark.parametrize(("fabric", "provider"), [("erdma", "aiacc"), ("tcp", "none"), ("infiniband", "none")])
def test_a_default_made_with_a_collection_filter_is_evaluated(fabric: str, provider: str) -> None:
    # roles/nccl_plugin/defaults/main.yml: the fabric profile's net plugin, aiacc on erdma (seed 000), none elsewhere.
    values = {"rdmaforge_fabric": fabric}
    assert role_defaults.evaluated_value_of(values, "nccl_plugin_provider") == provider


def test_a_whole_expression_keeps_its_type_and_a_longer_template_is_text() -> None:
    # Seed 000: AIACC documented for NCCL 2.8.x-2.16.x; a list of version strings, not "['2.8', '2.16']" or floats.
    assert role_defaults.evaluated_default("nccl_plugin_documented_nccl", {"nccl_plugin_provider": "aiacc"}) == [
        "2.8", "2.16"
    ]  # fmt: skip
    library = "nccl_plugin_nccl_library"
    assert role_defaults.evaluated_default(library, {}) == "/opt/nccl/current/lib/libnccl.so.2"
    assert role_defaults.evaluated_default(library, {"nccl_build_prefix_root": "/srv/nccl"}) == (
        "/srv/nccl/current/lib/libnccl.so.2"
    )


def test_a_value_the_host_sets_wins_even_when_null() -> None:
    assert role_defaults.evaluated_value_of({"nccl_plugin_provider": "harp"}, "nccl_plugin_provider") == "harp"
    assert role_defaults.evaluated_value_of({"nccl_plugin_provider": None}, "nccl_plugin_provider") is None


def test_a_default_that_needs_what_the_host_lacks_names_the_variable() -> None:
    # nccl_build_jobs is computed from the node's facts, which no inventory holds.
    with pytest.raises(ValueError, match=r"^nccl_build_jobs: its role default .* 'ansible_facts' is undefined"):
        role_defaults.evaluated_default("nccl_build_jobs", {})


@pytest.mark.parametrize(("fabric", "required"), [("erdma", True), ("infiniband", True), ("roce", True),
                                                  ("acs_type1", True), ("acs_type2", False), ("tcp", False)])
def test_a_default_made_of_the_roles_other_variables_evaluates_them_as_ansible_does(fabric: str,
                                                                                   required: bool) -> None:
    """roles/rdma_core: rdma_require_active_ports (no rdma_core_ prefix: the role is named) is
    "{{ rdma_core_rdma_profile }}", a variable of the role's vars/main.yml made of its default rdma_core_profile
    (the fabric) and the fabric profile table's RDMA flag (rdmaforge.fabrics.RDMA_NAMES, the expected values)."""
    values = {"rdmaforge_fabric": fabric}
    assert role_defaults.evaluated_default("rdma_require_active_ports", values, role="rdma_core") is required
    # A default the template names is the host's when the host sets it (rdma_core_profile: tcp on any fabric).
    values["rdma_core_profile"] = "tcp"
    assert role_defaults.evaluated_default("rdma_require_active_ports", values, role="rdma_core") is False
    assert role_defaults.evaluated_value_of({"rdma_require_active_ports": "yes"}, "rdma_require_active_ports",
                                            role="rdma_core") == "yes"  # fmt: skip


def test_a_default_of_another_version_is_made_of_it() -> None:
    # roles/nccl_build: nccl_build_git_ref is "v{{ nccl_build_version }}-1", its version a default of the role.
    assert role_defaults.evaluated_default("nccl_build_git_ref", {}) == "v2.29.7-1"
    assert role_defaults.evaluated_default("nccl_build_git_ref", {"nccl_build_version": "2.30.3"}) == "v2.30.3-1"
