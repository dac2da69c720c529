"""Pieces every Kubernetes manifest here shares, and the YAML they are written as."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

SHM_VOLUME = "dshm"


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
