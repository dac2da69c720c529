"""Pieces every Kubernetes manifest here shares, and the YAML they are written as."""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

SHM_VOLUME = "dshm"

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_SUFFIXES = {
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate(("k", "M", "G", "T", "P", "E"))},
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
}


def quantity_value(text: object) -> Decimal | None:
    """The number a Kubernetes quantity stands for (``50Gi`` -> 53687091200, ``500m`` -> 0.5), or None."""
    match = _QUANTITY.match(str(text)) if isinstance(text, str | int) and not isinstance(text, bool) else None
    if match is None:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix in _SUFFIXES:  # E and Ei are exa (10**18, 2**60), as resource.Quantity reads them
            return Decimal(number) * _SUFFIXES[suffix]
        return Decimal(number) * Decimal(10) ** int(suffix[1:])  # the exponent form: e or E with a number
    except (InvalidOperation, ValueError, OverflowError):
        return None


def is_extended_resource(name: str) -> bool:
    """An extended resource (``rdma/hca``, ``nvidia.com/gpu``): a domain-prefixed name outside kubernetes.io."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def extended_problem(quantity: object) -> str | None:
    """Why the API server refuses a quantity of an extended resource (ValidateResourceRequirements: it is counted in
    whole units): 500m, 1.5. None for a whole number (or no quantity at all)."""
    number = quantity_value(quantity)
    if number is not None and number != int(number):
        return "not a whole number (Kubernetes counts an extended resource in whole units)"
    return None


def is_multiple(text: object, unit: int) -> bool:
    """Whether a quantity is a positive whole multiple of ``unit`` bytes (hugepages-1Gi: 50Gi, not 50)."""
    value = quantity_value(text)
    return value is not None and value > 0 and whole_multiple(value, unit)


def whole_multiple(value: Decimal, unit: Decimal | int) -> bool:
    """``value % unit == 0``; False for a value too large for Decimal's precision to divide (1e308: no quantity
    Kubernetes takes either), which raised InvalidOperation."""
    try:
        return value % unit == 0
    except InvalidOperation:
        return False


def env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    """``[{name, value}]`` in name order; every value a string, as the API requires."""
    return [{"name": k, "value": str(v)} for k, v in sorted(env.items())]


def shm_volume(size: str) -> dict[str, Any]:
    """A memory-backed /dev/shm: the container runtime's default of 64 MiB stalls NCCL and data loaders."""
    return {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": size}}


def shm_mount() -> dict[str, str]:
    return {"name": SHM_VOLUME, "mountPath": "/dev/shm"}


def metadata(name: str, namespace: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return meta


def _increase_indent(self: Any, flow: bool = False, indentless: bool = False) -> None:
    # Lists indented under their key, as kubectl prints them and as yamllint's default rule wants.
    yaml.SafeDumper.increase_indent(self, flow, False)


def _ignore_aliases(self: Any, data: object) -> bool:
    # Every object written in full: no &anchors for the parts the job's pods share.
    return True


#: Plain scalars kubectl's YAML reader (sigs.k8s.io/yaml: go-yaml v2, resolve.go) or a YAML 1.2 reader takes for
#: a number, a boolean or a time, where PyYAML's YAML 1.1 resolvers (which decide what SafeDumper quotes) see a
#: string: 1e-4 and 08 (floats), 0o17 (an int), y and n (booleans), 2024-1-2 (a timestamp).
_GO_YAML_WORDS = frozenset({"y", "Y", "n", "N"})
_NUMBER_START = "+-.0123456789"
_NUMBER = re.compile(
    r"[-+]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?)"
)
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ].*)?", re.DOTALL)
#: Line breaks to YAML that PyYAML folds in a single-quoted scalar, so that they read back as a blank: NEL, LS, PS.
_FOLDED_BREAKS = frozenset("\x85\u2028\u2029")


def reads_as_non_string(text: str) -> bool:
    """Whether a plain ``text`` is a non-string to go-yaml v2 or YAML 1.2, beyond what PyYAML's resolvers know.
    go-yaml drops '_' from a number before parsing it (1_0e3)."""
    if text in _GO_YAML_WORDS or _TIMESTAMP.fullmatch(text):
        return True
    return text[:1] in _NUMBER_START and _NUMBER.fullmatch(text.replace("_", "")) is not None


def _represent_str(self: Any, data: str) -> Any:
    # Quoted where a reader other than PyYAML would change the type (kubectl would hand the API a number), and
    # double-quoted where PyYAML's single quotes would fold a line break.
    if any(char in _FOLDED_BREAKS for char in data):
        return self.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    if reads_as_non_string(data):
        return self.represent_scalar("tag:yaml.org,2002:str", data, style="'")
    return yaml.SafeDumper.represent_str(self, data)


# Built with type() rather than a class statement: yaml has no type hints, and mypy --strict refuses a
# class deriving from an untyped one.
_Dumper: Any = type(
    "_Dumper", (yaml.SafeDumper,), {"increase_indent": _increase_indent, "ignore_aliases": _ignore_aliases}
)
# Its own copy of the table: SafeDumper's stays as it is for every other caller.
_Dumper.add_representer(str, _represent_str)


def to_yaml(document: Any) -> str:
    """One YAML document starting with ``---``: keys in the order built, strings quoted where YAML needs it."""
    text: str = yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=10000, allow_unicode=True
    )
    return "---\n" + text


def nccl_socket_outcome(chosen: str | None) -> str:
    """What NCCL does in a pod with the socket interface it chose (nccl_env.first_socket_interface) instead of
    the one meant."""
    if chosen is None:
        return "NCCL would find no socket interface"
    if chosen == "lo":
        return "NCCL would bootstrap over lo (127.0.0.1), which no other pod can reach"
    return f"NCCL would bootstrap over {chosen} instead"
