"""The role's templates rendered without Ansible, byte for byte as Ansible's template lookup renders them.

The templates use only Jinja2 itself and the filters in TEMPLATE_FILTERS (the role gets the same functions
from ``filter_plugins/rdmaforge_workloads.py``), and the environment has the template lookup's settings (the
template module's too): ``trim_blocks`` on, and the file's final newline kept.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jinja2

from rdmaforge.plain_data import plain
from rdmaforge.workloads import docker, k8s
from rdmaforge.workloads.options import TEMPLATES_DIR
from rdmaforge.workloads.plan import Plan, PlannedFile

#: The name the templates read their data from (the role sets it in the writing task's vars).
CONTEXT_NAME = "workload_manifests_file"


def _on_plain_data(function: Callable[[Any], str]) -> Callable[[Any], str]:
    """Ansible hands filters its own containers; the functions get plain data (identical output)."""

    def wrapper(value: Any) -> str:
        return function(plain(value))

    wrapper.__doc__ = function.__doc__
    return wrapper


#: The filters the templates use, under the names the filter plugin gives them.
TEMPLATE_FILTERS: dict[str, Callable[[Any], str]] = {
    "rdmaforge_workload_shell_lines": _on_plain_data(docker.shell_lines),
    "rdmaforge_workload_systemd_lines": _on_plain_data(docker.systemd_lines),
    "rdmaforge_workload_yaml": _on_plain_data(k8s.to_yaml),
}


def environment(templates_dir: Path = TEMPLATES_DIR) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    # The role's templates name them as Ansible needs, by FQCN (rdmaforge.cluster.<name>); Jinja reads the dots.
    env.filters.update({f"rdmaforge.cluster.{name}": function for name, function in TEMPLATE_FILTERS.items()})
    return env


def render_file(env: jinja2.Environment, planned: PlannedFile) -> str:
    return env.get_template(planned.template).render({CONTEXT_NAME: planned.context})


#: The directories of the output that hold only rendered files (one per kind).
KIND_DIRECTORIES = ("docker", "acs", "mpijob", "pytorchjob")


def write_files(plan: Plan, out_dir: Path, templates_dir: Path = TEMPLATES_DIR) -> tuple[list[Path], set[Path]]:
    """Write every planned file under ``out_dir`` (created as needed), leaving alone a file that already has the
    content and mode planned (its mtime kept, as the role's text_file does). Returns every planned path, and those
    of them left unchanged.

    Each file is written to a temporary file beside it and renamed over the path, as the role's file module does: a
    symbolic link already at the path is replaced, never written through (the CLI refuses one before writing)."""
    env = environment(templates_dir)
    paths: list[Path] = []
    unchanged: set[Path] = set()
    for planned in plan.files:
        path = out_dir / planned.path
        content = render_file(env, planned)
        mode = int(planned.mode, 8)
        paths.append(path)
        if _holds(path, content, mode):
            unchanged.add(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "w") as stream:
                stream.write(content)
                os.fchmod(stream.fileno(), mode)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    return paths, unchanged


def _holds(path: Path, content: str, mode: int) -> bool:
    """Whether ``path`` is a regular file (not a link) with exactly ``content`` and permission bits ``mode``."""
    try:
        found = path.lstat()
        if not stat.S_ISREG(found.st_mode) or stat.S_IMODE(found.st_mode) != mode:
            return False
        return path.read_bytes() == content.encode()
    except (OSError, ValueError):
        return False


def stale_files(planned: Iterable[str], out_dir: Path) -> list[Path]:
    """Files under the output's kind directories (docker/, acs/, mpijob/, pytorchjob/) that are not among the
    ``planned`` paths (relative to ``out_dir``): an earlier render's, for a job renamed, a node gone or a kind
    dropped. `kubectl apply -f out/mpijob/` would start them too. Listed, never removed (they may be someone's own)."""
    planned_paths = {out_dir / path for path in planned}
    found = []
    for directory in KIND_DIRECTORIES:
        top = out_dir / directory
        if top.is_symlink() or not top.is_dir():
            continue
        for root, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                path = Path(root) / name
                if path not in planned_paths and not name.startswith("."):
                    found.append(path)
    return found


def stale_warning(planned: Iterable[str], out_dir: Path) -> str | None:
    """The warning naming the stale files under ``out_dir`` (stale_files), or None: one text for `rdmaforge render`
    and role workload_manifests."""
    stale = stale_files(planned, out_dir)
    if not stale:
        return None
    listing = ", ".join(str(path.relative_to(out_dir)) for path in stale)
    return (f"{out_dir}: {listing}: not written by this render (an earlier render's, for another job name, a node or "
            f"a kind no longer rendered?); left as they are: remove them before applying a directory (kubectl apply -f "
            f"would start them too)")  # fmt: skip
