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
        if suffix[:1] in ("e", "E"):
            return Decimal(number) * Decimal(10) ** int(suffix[1:])
        return Decimal(number) * _SUFFIXES[suffix]
    except (InvalidOperation, ValueError, OverflowError):
        return None


def is_multiple(text: object, unit: int) -> bool:
    """Whether a quantity is a positive whole multiple of ``unit`` bytes (hugepages-1Gi: 50Gi, not 50)."""
    value = quantity_value(text)
    return value is not None and value > 0 and value % unit == 0


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


# Built with type() rather than a class statement: yaml has no type hints, and mypy --strict refuses a
# class deriving from an untyped one.
_Dumper: Any = type(
    "_Dumper", (yaml.SafeDumper,), {"increase_indent": _increase_indent, "ignore_aliases": _ignore_aliases}
)


def to_yaml(document: Any) -> str:
    """One YAML document starting with ``---``: keys in the order built, strings quoted where YAML needs it."""
    text: str = yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=10000, allow_unicode=True
    )
    return "---\n" + text
