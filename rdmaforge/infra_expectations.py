"""What a node should look like, from its inventory and the roles' documented tables and defaults
(roles/*/defaults/main.yml: package sets, NCCL profiles, ENI defaults), never from the Python that planned the
change (rdmaforge.tuning and the filters): a verification that reuses the code under test proves nothing.

The testinfra suite (tests/infra) imports it from this package: as ``tests.infra.expectations`` it failed to import
wherever another distribution had installed a top-level ``tests`` package, which shadows the suite's directory."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

import pytest

from rdmaforge import fabrics, node_facts
from rdmaforge.plain_data import ansible_bool
from rdmaforge.role_defaults import defaults


def templated(value: Any) -> bool:
    """Whether ``value`` holds a Jinja template anywhere (testinfra renders none)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(templated(k) or templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(templated(v) for v in value)
    return False


def not_judged_if_templated(hostvars: dict[str, Any], name: str) -> None:
    """Skip as not judged when the inventory gives ``name`` as a template: read as unset, or as the role's default,
    it judged the node against a plan the inventory does not make (review round 36: a templated fabric read as tcp
    expected MTU 1400, templated overrides were read as none)."""
    if name in hostvars and templated(hostvars[name]):
        pytest.skip(f"not judged: {name} is a template ({hostvars[name]!r}) that testinfra does not render")


def setting(hostvars: dict[str, Any], role: str, name: str) -> Any:
    """The inventory's value, else the role's default as written in roles/<role>/defaults/main.yml. A template the
    inventory gives is not judged (skipped); a role default that is a template is None (its caller knows what that
    default means)."""
    not_judged_if_templated(hostvars, name)
    value = hostvars[name] if name in hostvars else defaults(role).get(name)
    return None if templated(value) else value


def literal(hostvars: dict[str, Any], name: str, default: Any) -> Any:
    """The inventory's value, or ``default`` (the role's documented default) when unset; not judged (skipped) when
    the inventory gives a template."""
    not_judged_if_templated(hostvars, name)
    value = hostvars.get(name)
    return default if value is None else value


def fabric_of(hostvars: dict[str, Any]) -> str:
    """The node's fabric profile (the suite's ``fabric`` fixture); skipped as not judged when the value is no
    profile's name as testinfra reads it."""
    value = hostvars.get("rdmaforge_fabric", "tcp")
    if value not in fabrics.NAMES:
        pytest.skip(f"not judged: rdmaforge_fabric={value!r} is no fabric profile as testinfra reads it (a template "
                    "or a tagged value it does not render)")
    return str(value)


def accepted(hostvars: dict[str, Any], check: str) -> str | None:
    """The reason the inventory gives for accepting a deviation of ``check`` (doctor_accept), if any."""
    accept = hostvars.get("doctor_accept") or {}
    return str(accept[check]) if isinstance(accept, dict) and check in accept else None


def nccl_conf(hostvars: dict[str, Any], fabric: str) -> dict[str, str]:
    """/etc/nccl.conf's settings: the NCCL_* names of nccl_settings (the rest go to profile.d)."""
    return {k: v for k, v in nccl_settings(hostvars, fabric).items() if k.startswith("NCCL_")}


def login_settings(hostvars: dict[str, Any], fabric: str) -> dict[str, str]:
    """nccl_env_profile_script's exports: the names of nccl_settings that are not NCCL_* (LightCC's, ACSpeed's)."""
    return {k: v for k, v in nccl_settings(hostvars, fabric).items() if not k.startswith("NCCL_")}


def nccl_settings(hostvars: dict[str, Any], fabric: str) -> dict[str, str]:
    """The settings nccl_env writes: the fabric's profile (nccl_env_profiles), the training accelerator's settings
    (nccl_env_accelerators[nccl_env_accelerator]) over it, then nccl_env_overrides, a null removing a setting."""
    profiles = setting(hostvars, "nccl_env", "nccl_env_profiles") or {}
    profile = str(setting(hostvars, "nccl_env", "nccl_env_profile") or fabric)
    accelerators = setting(hostvars, "nccl_env", "nccl_env_accelerators") or {}
    accelerator = str(setting(hostvars, "nccl_env", "nccl_env_accelerator") or "none")
    merged = {**(profiles.get(profile) or {}), **(accelerators.get(accelerator) or {}),
              **(setting(hostvars, "nccl_env", "nccl_env_overrides") or {})}  # fmt: skip
    return {str(k): conf_value(v) for k, v in merged.items() if v is not None}


def gpus_on_node(host: Any) -> tuple[int, str]:
    """The NVIDIA GPUs the node shows and the tool that showed them: nvidia-smi -L, else lspci (preflight's first
    two sources, in its order); (0, "no GPU tool") when neither answers."""
    smi = host.run("nvidia-smi -L")
    if smi.rc == 0:
        return node_facts.count_nvidia_smi_gpus(smi.stdout), "nvidia-smi -L"
    lspci = host.run("PATH=$PATH:/sbin:/usr/sbin lspci -n -mm")
    return (node_facts.count_lspci_gpus(lspci.stdout), "lspci") if lspci.rc == 0 else (0, "no GPU tool")


def conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)




def secondary_nics(names: list[str], default_dev: str, hostvars: dict[str, Any]) -> list[str]:
    """The eni role's documented choice: eni_interfaces, else every NIC matching eni_interface_patterns except
    the default-route NIC, in natural name order (eth2 before eth10)."""
    listed = [str(n) for n in setting(hostvars, "eni", "eni_interfaces") or []]
    if listed:
        return listed
    patterns = [str(p) for p in setting(hostvars, "eni", "eni_interface_patterns") or []]
    chosen = [n for n in names if n != default_dev and any(fnmatch.fnmatch(n, p) for p in patterns)]
    return sorted(chosen, key=lambda n: [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", n)])


def eni_mtu(hostvars: dict[str, Any], fabric: str) -> int:
    """eni_mtu, else 8500 on erdma with eni_jumbo_frames, else 1400 (roles/eni/defaults/main.yml)."""
    given = setting(hostvars, "eni", "eni_mtu")
    if given not in (None, ""):
        return int(given)
    return 8500 if fabric == "erdma" and ansible_bool(setting(hostvars, "eni", "eni_jumbo_frames")) else 1400
