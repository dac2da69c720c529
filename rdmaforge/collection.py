"""The ``rdmaforge.cluster`` Ansible collection, assembled from the checkout's top-level directories.

Every file of the collection has exactly one home in git; this module only says where each goes:

============================  =====================================================
collection path               checkout path
============================  =====================================================
galaxy.yml, meta/, README.md  collection/ (the collection's own files, CHANGELOG.md too)
plugins/modules/              library/
plugins/module_utils/<n>.py   rdmaforge/parsers/<n>.py for the TARGET_PARSERS below,
                              module_utils/<n>.py for the CONTROLLER_UTILS (the filters' own)
plugins/filter/               filter_plugins/ (the plugins and their <filter>.yml docs)
plugins/callback/             callback_plugins/
roles/, playbooks/            roles/, playbooks/
============================  =====================================================

Two ways to assemble it, copying nothing by hand:

- ``link`` (the checkout's own runs): ``build/collections/ansible_collections/rdmaforge/cluster`` made of
  symlinks to the real files, which ``ansible.cfg``'s ``collections_path`` names. It is never stale, is not in
  git, and is (re)made by ``make venv``, ``make lint``, the ``rdmaforge`` CLI and the test session.
- ``copy``: real files, for ``ansible-galaxy collection build`` (``make collection``) and for the wheel.

Standard library only: the wheel's build hook (build_support/) loads this file before anything is installed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

NAMESPACE = "rdmaforge"
NAME = "cluster"
FQCN = f"{NAMESPACE}.{NAME}"
#: Parsers that modules ship to the targets as module_utils: standard library only, Python 3.8.
TARGET_PARSERS = (
    "converge_resources", "gpu_topology", "hugepages", "iperf3", "kernel_cmdline", "nccl_net_api", "nic_facts",
    "packages", "probes", "rdma_devinfo",
)
#: module_utils the controller's plugins use, never a target: importable without the rdmaforge package.
CONTROLLER_UTILS = ("controller_package",)
#: (collection path, checkout path) of whole directories.
DIRECTORIES = (
    ("meta", "collection/meta"),
    ("plugins/modules", "library"),
    ("plugins/filter", "filter_plugins"),
    ("plugins/callback", "callback_plugins"),
    ("roles", "roles"),
    ("playbooks", "playbooks"),
)
FILES = (
    ("galaxy.yml", "collection/galaxy.yml.in"),
    ("README.md", "collection/README.md"),
    ("CHANGELOG.md", "collection/CHANGELOG.md"),
    ("LICENSE", "LICENSE"),
)
#: Where ``link`` mode puts the collections root (the directory holding ansible_collections/).
DEV_ROOT = Path("build") / "collections"
#: Names never copied into the collection (and not code for the converge digest).
SKIPPED = ("__pycache__", ".pyc", ".retry")


def is_skipped(relative: Path) -> bool:
    """Whether a path inside a collection directory is one the collection leaves out."""
    return any(part.endswith(SKIPPED) for part in relative.parts)


def checkout_root() -> Path:
    """The checkout this module lives in (rdmaforge/collection.py -> the repository root)."""
    return Path(__file__).resolve().parent.parent


def collection_dir(collections_root: Path) -> Path:
    return collections_root / "ansible_collections" / NAMESPACE / NAME


def entries(source: Path) -> Iterator[tuple[str, Path]]:
    """(collection path, real file or directory) pairs: the one mapping both modes use."""
    for target, origin in FILES:
        yield target, source / origin
    for target, origin in DIRECTORIES:
        yield target, source / origin
    for name in TARGET_PARSERS:
        yield f"plugins/module_utils/{name}.py", source / "rdmaforge" / "parsers" / f"{name}.py"
    for name in CONTROLLER_UTILS:
        yield f"plugins/module_utils/{name}.py", source / "module_utils" / f"{name}.py"


def code_entries(root: Path) -> Iterator[tuple[str, Path]]:
    """(collection path, real path) of the code only (not galaxy.yml and the docs, which an installed collection
    holds differently), in a checkout (``root`` has library/) or in an installed collection (``root`` is it)."""
    metadata = {target for target, _ in FILES}
    checkout = (root / "library").is_dir()
    for target, origin in entries(root if checkout else Path()):
        if target not in metadata:
            yield target, origin if checkout else root / target


def missing_parts(source: Path) -> list[str]:
    """The checkout paths the collection is assembled from that ``source`` lacks (none in a complete checkout)."""
    return [str(origin) for _, origin in entries(source) if not origin.exists()]


def _ignore(_directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n.endswith(SKIPPED)]


def assemble(dest: Path, source: Path | None = None, mode: str = "copy", final: Path | None = None) -> Path:
    """Make the collection at ``dest`` (its root: galaxy.yml, plugins/, roles/, ...) from ``source``.

    In "link" mode the relative links are made for ``final``, where the tree will be renamed to (default ``dest``).
    """
    source = source or checkout_root()
    final = final or dest
    missing = missing_parts(source)
    if missing:
        raise FileNotFoundError(f"not a complete rdmaforge checkout, missing: {', '.join(missing)}")
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    for target, origin in entries(source):
        path = dest / target
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode == "link":
            path.symlink_to(os.path.relpath(origin, (final / target).parent))
        elif origin.is_dir():
            shutil.copytree(origin, path, ignore=_ignore)
        else:
            shutil.copy2(origin, path)
    return dest


def _link_tree_current(dest: Path, source: Path) -> bool:
    for target, origin in entries(source):
        path = dest / target
        if not path.is_symlink() or path.resolve() != origin.resolve():
            return False
    return True


def ensure_dev_tree(source: Path | None = None) -> Path:
    """The checkout's link tree, made when missing or wrong; its collections root (for collections_path)."""
    source = source or checkout_root()
    root = source / DEV_ROOT
    dest = collection_dir(root)
    if _link_tree_current(dest, source):
        return root
    # Made beside it and renamed into place: a run that starts meanwhile sees the old tree or the new one.
    dest.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{NAME}-", dir=dest.parent))
    try:
        assemble(fresh / NAME, source, mode="link", final=dest)
        if dest.exists() or dest.is_symlink():
            stale = Path(tempfile.mkdtemp(prefix=f".{NAME}-stale-", dir=dest.parent))
            try:
                dest.rename(stale / NAME)
            except FileNotFoundError:  # another process moved it first
                pass
            shutil.rmtree(stale)
        try:
            (fresh / NAME).rename(dest)
        except OSError:  # another process put its (identical) tree there first
            if not _link_tree_current(dest, source):
                raise
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    if not _link_tree_current(dest, source):
        raise RuntimeError(f"{dest}: the collection's link tree does not point at {source}")
    return root


def build(output: Path, source: Path | None = None, ansible_galaxy: str | None = None) -> Path:
    """``ansible-galaxy collection build`` of a copied tree; the path of the tarball."""
    source = source or checkout_root()
    staging = source / "build" / "collection-src"
    tree = assemble(collection_dir(staging), source, mode="copy")
    output.mkdir(parents=True, exist_ok=True)
    galaxy = ansible_galaxy or str(Path(sys.executable).parent / "ansible-galaxy")
    proc = subprocess.run(
        [galaxy, "collection", "build", "--force", "--output-path", str(output.resolve()), str(tree)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ansible-galaxy collection build failed:\n{proc.stdout}{proc.stderr}")
    version = _galaxy_version(source / "collection" / "galaxy.yml.in")
    return output.resolve() / f"{NAMESPACE}-{NAME}-{version}.tar.gz"


def _galaxy_version(galaxy_yml: Path) -> str:
    for line in galaxy_yml.read_text(encoding="utf-8").splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    raise ValueError(f"{galaxy_yml}: no version")


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here: the wheel's build step loads this file by its path, where no rdmaforge can be imported.
    from rdmaforge.errors import output_path
    from rdmaforge.runner.exit_codes import ExitCode

    parser = argparse.ArgumentParser(prog="python -m rdmaforge.collection", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("dev", help=f"(re)make the checkout's link tree under {DEV_ROOT}")
    build_parser = sub.add_parser("build", help="build the collection tarball")
    build_parser.add_argument("-o", "--output", type=output_path("a directory for the tarball, such as build"),
                              default=Path("build"), help="where the tarball goes")
    args = parser.parse_args(argv)
    # Both actions assemble the collection from a checkout. Run from an installed wheel (no checkout beside the
    # package) that is a usage error, not a bug: one line that says where the collection already is, no traceback.
    source = checkout_root()
    missing = missing_parts(source)
    if missing:
        installed = collection_dir(source)  # the wheel puts it beside the package (rdmaforge.paths)
        where = f"; the installed collection is at {installed}" if installed.is_dir() else ""
        names = ", ".join(os.path.relpath(path, source) for path in missing)
        print(f"{parser.prog}: needs an rdmaforge checkout (missing in {source}: {names}){where}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    if args.action == "dev":
        print(collection_dir(ensure_dev_tree()))
    else:
        print(build(args.output))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
