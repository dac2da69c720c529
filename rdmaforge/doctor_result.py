"""The shape of the file playbooks/doctor.yml writes per node (roles/doctor, "Write this node's findings"), checked
before any of it is judged.

The judging code (rdmaforge.doctor, rdmaforge.doctor_checks) reads these fields as the role writes them. A file
whose fields have other types (edited by hand, written by another rdmaforge version, or a module's output changed)
would otherwise crash the whole run or, worse, be read wrongly (a string iterated letter by letter as a list).
Such a node is not judged, and the reason names the field. Fields are optional (older files lack some) and other
fields are allowed. ``nccl_manifest`` is left out on purpose: it is the node's own build manifest, read as JSON, so
a wrong shape there is the node's problem and the nccl check reports it (doctor_checks.build_manifest).
"""

from __future__ import annotations

from typing import Any

import jsonschema

from rdmaforge.plain_data import show

_TEXT = {"type": "string"}
_TEXT_OR_NULL = {"type": ["string", "null"]}
_TEXTS = {"type": "array", "items": _TEXT}
_OBJECTS = {"type": "array", "items": {"type": "object"}}
_COUNT = {"type": "integer", "minimum": 0}
_IFNAME = {"type": "string", "pattern": r"^(?!\.\.?$)[^\s/:]{1,15}$"}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "host": _TEXT,
        "address": _TEXT,
        "os": _TEXT,
        "kernel": _TEXT_OR_NULL,
        # date +%s.%N on the controller then on the node: numbers as text.
        "clock": {"type": "array", "items": {"type": ["string", "number"]}},
        "rdma_tool_present": {"type": "boolean"},
        "rdma_source": _TEXT,
        "rdma_devices": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": _TEXT_OR_NULL,
                    "ports": {
                        "type": ["array", "null"],
                        "items": {
                            "type": "object",
                            # The port's number: the checks select and name ports by it (review round 41a: a port
                            # without one crashed the run with KeyError).
                            "properties": {"port": {"type": "integer"}, "state": _TEXT_OR_NULL,
                                           "physical_state": _TEXT_OR_NULL},
                            "required": ["port"],
                        },
                    },
                },
            },
        },
        "nics": {
            "type": "array",
            "items": {
                "type": "object",
                # A Linux interface name (dev_valid_name): 1-15 characters, no blank, '/' or ':', not . or ..
                "properties": {"name": _IFNAME, "mtu": {"type": ["integer", "null"]}},
                "required": ["name"],
            },
        },
        "nics_error": _TEXT_OR_NULL,
        "default_route_interface": _TEXT_OR_NULL,
        "hugepages": {
            "type": "object",
            "properties": {
                "by_size": {
                    "type": "object",
                    # The kernel's pool directories, hugepages-<kB>kB, read as the number of kB.
                    "propertyNames": {"pattern": "^[0-9]+$"},
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"nr": _COUNT, "free": _COUNT, "rsvd": _COUNT, "surp": _COUNT},
                    },
                },
            },
        },
        "memlock": {"type": ["string", "integer", "null"]},
        "plugin_symbols": _TEXT_OR_NULL,
        "nccl_loader_apis": {"type": ["array", "null"], "items": _COUNT},
        "grub_defaults": _TEXTS,
        "inventory": {"type": "object"},
        "nvidia_smi": _TEXT_OR_NULL,
        "compute_caps": _TEXT_OR_NULL,
        "lspci": _TEXT_OR_NULL,
        "sysfs_gpus": {"anyOf": [_COUNT, {"type": "string", "pattern": "^[0-9]*$"}, {"type": "null"}]},
        "nccl_libs": _TEXTS,
        "plugin_present": {"type": "boolean"},
        "plugin_target": _TEXT_OR_NULL,
        "plugin_link": _TEXT_OR_NULL,
        "plugin_expected": _TEXT_OR_NULL,
        "plugin_files": _OBJECTS,
        "nccl_home": _TEXT_OR_NULL,
        "ld_cache_nccl": {"type": ["array", "null"], "items": _TEXT},
        "dmi_product_name": _TEXT_OR_NULL,
    },
}

_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

#: JSON schema type names as a message says them.
_SAID = {"string": "text", "array": "a list", "object": "an object", "integer": "a whole number 0 or more",
         "number": "a number", "boolean": "true or false", "null": "null"}


def _where(path: list[str | int]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


def _expected(error: jsonschema.ValidationError) -> str:
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return " or ".join(_SAID.get(str(t), str(t)) for t in types)
    if error.validator == "anyOf":
        return "a whole number 0 or more (or its digits as text), or null"
    if error.validator == "required":
        return f"an object with {' and '.join(map(str, error.validator_value))}"
    if error.validator == "minimum":
        return f"a number {error.validator_value} or more"
    if error.validator == "pattern" and error.validator_value == _IFNAME["pattern"]:
        return "an interface name (1-15 characters, no blank, '/' or ':', not . or ..)"
    return f"a value that passes {error.validator} {error.validator_value!r}"


def shape_problem(result: object) -> str | None:
    """None when ``result`` has the shape doctor.yml writes; else which field is wrong, what it holds and what it
    should be (the first such field by path), e.g. ``rdma_devices is 'mlx5_0', expected a list``."""
    errors = sorted(_VALIDATOR.iter_errors(result), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    error = errors[0]
    where = _where(list(error.absolute_path)) or "the file"
    held = show(error.instance)
    held = held if len(held) <= 60 else held[:57] + "..."
    more = f" (and {len(errors) - 1} more field(s))" if len(errors) > 1 else ""
    return f"{where} is {held}, expected {_expected(error)}{more}"
