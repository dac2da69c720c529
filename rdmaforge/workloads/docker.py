"""``docker run`` for one node (seed 000), and how it is written into a shell script and a systemd unit.

The command is a list of groups (one option and its value each), so that the script and the unit can put
one option per line; ``argv()`` flattens it. Quoting: POSIX shell for the script, systemd's own rules for
the unit (``%`` starts a specifier and ``$`` a variable there, both doubled).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from rdmaforge.workloads.nodes import Node
from rdmaforge.workloads.options import Settings

Groups = list[list[str]]

_SYSTEMD_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./$-]+$")


def run_groups(node: Node, settings: Settings) -> Groups:
    """The ``docker run`` command of ``node``, grouped by option.

    * ``--rm --name``: a fixed name, so the unit can stop it and a second start fails loudly;
    * the GPU runtime (``--runtime=nvidia`` as in seed 000, or ``--gpus=all``);
    * ``--shm-size``, ``--ipc=host`` (CUDA IPC between the GPUs' processes) and ``--net=host`` (NCCL's
      bootstrap and the RDMA NICs' IP addresses are the node's own);
    * ``--ulimit memlock=-1``: RDMA registers (pins) memory, which fails under docker's default 64 KiB;
    * one ``--device`` for rdma_cm and each uverbsN of the node (libibverbs opens them);
    * ``-e`` for each NCCL setting of the node's fabric profile.
    """
    node_settings = node.settings
    groups: Groups = [[node_settings.docker_binary, "run"], ["--rm"], ["--name", settings.name]]
    groups.append(["--runtime=nvidia"] if node_settings.docker_gpu_mode == "runtime" else ["--gpus=all"])
    groups += [[f"--shm-size={settings.shm_size}"], ["--ipc=host"], ["--net=host"], ["--ulimit", "memlock=-1"]]
    groups += [[f"--device={path}"] for path in node.device_files]
    groups += [["-e", f"{key}={value}"] for key, value in sorted(node.env.items())]
    groups += [[arg] for arg in node_settings.docker_extra_args]
    groups.append([settings.image, *settings.command])
    return groups


def argv(groups: Sequence[Sequence[str]]) -> list[str]:
    return [word for group in groups for word in group]


def shell_lines(groups: Sequence[Sequence[str]], indent: str = "    ") -> str:
    """The command for /bin/sh, one group per line (backslash-continued)."""
    return f" \\\n{indent}".join(" ".join(shlex.quote(str(w)) for w in group) for group in groups)


#: C escapes of control characters inside a quoted Exec*= word: systemd's unit reader ends a line at a raw \n or
#: \r, so each control character is written as systemd's unquoting reads it back (\xNN for those without a letter).
_SYSTEMD_ESCAPES = {
    **{code: f"\\x{code:02x}" for code in (*range(0x01, 0x20), 0x7F)},
    **{ord(char): f"\\{letter}" for char, letter in zip("\a\b\f\n\r\t\v", "abfnrtv", strict=True)},
}


def systemd_word(word: str) -> str:
    """One word of an Exec*= line: ``%`` and ``$`` doubled, double-quoted when not a plain word, control characters
    escaped (a NUL is no argument at all: the options' checks refuse it)."""
    text = str(word).replace("%", "%%").replace("$", "$$")
    if _SYSTEMD_PLAIN.match(str(word)) and word != ";":
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').translate(_SYSTEMD_ESCAPES) + '"'


def systemd_lines(groups: Sequence[Sequence[str]], indent: str = "    ") -> str:
    """The command for an Exec*= line, one group per line (systemd joins backslash-continued lines)."""
    return f" \\\n{indent}".join(" ".join(systemd_word(w) for w in group) for group in groups)


def context(node: Node, settings: Settings, header: list[str]) -> dict[str, object]:
    """What the docker script and unit templates need."""
    groups = run_groups(node, settings)
    devices = ", ".join(p.rsplit("/", 1)[-1] for p in node.device_files) or "none"
    gpus = "unknown" if node.gpus is None else str(node.gpus)
    return {
        "name": settings.name,
        "unit": f"{settings.name}.service",
        "header": header,
        "summary": [
            f"Node {node.name}: fabric {node.fabric}, NCCL profile {node.profile}, {gpus} GPUs, "
            f"RDMA devices: {devices}.",
        ],
        "description": f"rdmaforge training container {settings.name} ({node.fabric}, {gpus} GPUs)",
        "run": groups,
        "remove": [[node.settings.docker_binary, "rm", "--force", settings.name]],
        "stop": [[node.settings.docker_binary, "stop", settings.name]],
    }
