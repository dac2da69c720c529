"""Well-known locations: the project's files (from a checkout or from the installed package), the workspace
where runs leave their artifacts, and the machine-wide caches.

Two layouts, told apart by where this file is:

- a **checkout** (``pip install -e .``): everything is in the repository: playbooks/, roles/, library/, ...,
  ansible.cfg, tests/infra (``rdmaforge verify``'s suite); the workspace (artifacts/, .cache/,
  inventories/lab/) is the repository too.
- an **installed wheel**: the roles, playbooks and plugins are the ``rdmaforge.cluster`` collection installed
  beside the package (site-packages/ansible_collections/rdmaforge/cluster, found by Ansible on sys.path), and
  ansible.cfg and the verify suite are package data under rdmaforge/data/; the workspace is the directory the
  command runs in (``RDMAFORGE_WORKSPACE`` to choose another).

``RDMAFORGE_ROOT`` names a checkout to use instead of either.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"


def _is_checkout(root: Path) -> bool:
    return (root / "collection" / "galaxy.yml.in").is_file() and (root / "playbooks").is_dir()


def _checkout() -> Path | None:
    if os.environ.get("RDMAFORGE_ROOT"):
        return Path(os.environ["RDMAFORGE_ROOT"])
    root = PACKAGE_DIR.parent
    return root if _is_checkout(root) else None


def root_problem() -> str | None:
    """Why ``RDMAFORGE_ROOT`` cannot be used, or None (unset, or a checkout): a stale value ended in an error about
    ansible-inventory, or an internal error, naming no variable (round 33a)."""
    named = os.environ.get("RDMAFORGE_ROOT")
    if not named or _is_checkout(Path(named)):
        return None
    return (f"RDMAFORGE_ROOT={named} is not an rdmaforge checkout (it has no collection/galaxy.yml.in and playbooks/); "
            "allowed: a checkout's top directory, or the variable unset to use the installed package")


#: The repository this package runs from, or None when it is installed from a wheel.
CHECKOUT = _checkout()
#: The installed collection (site-packages/ansible_collections/rdmaforge/cluster) when not in a checkout.
INSTALLED_COLLECTION = PACKAGE_DIR.parent / "ansible_collections" / "rdmaforge" / "cluster"

#: Where the roles/ and playbooks/ directories are: the checkout, else the installed collection.
RESOURCES = CHECKOUT if CHECKOUT is not None else INSTALLED_COLLECTION
ROLES_DIR = RESOURCES / "roles"
PLAYBOOKS_DIR = RESOURCES / "playbooks"
#: The modules' sources (library/ in a checkout, plugins/modules in the collection).
MODULES_DIR = CHECKOUT / "library" if CHECKOUT is not None else INSTALLED_COLLECTION / "plugins" / "modules"
#: The filter plugins' sources (filter_plugins/ in a checkout, plugins/filter in the collection).
FILTERS_DIR = CHECKOUT / "filter_plugins" if CHECKOUT is not None else INSTALLED_COLLECTION / "plugins" / "filter"
#: The ansible.cfg every run uses (the wheel carries a copy of the checkout's as package data).
ANSIBLE_CFG = CHECKOUT / "ansible.cfg" if CHECKOUT is not None else DATA_DIR / "ansible.cfg"
#: The directory holding tests/infra, ``rdmaforge verify``'s suite. Its files import rdmaforge.* only, never a
#: ``tests`` package: another distribution's stray site-packages/tests/__init__.py would take that name.
VERIFY_ROOT = CHECKOUT if CHECKOUT is not None else DATA_DIR / "verify"

#: The example inventory to copy (inventories/example in a checkout; package data where the wheel is installed).
EXAMPLE_INVENTORY = (CHECKOUT if CHECKOUT is not None else DATA_DIR) / "inventories" / "example"

#: Where runs keep their artifacts (artifacts/), the fact cache (.cache/) and the lab's inventory.
#: Made absolute here: Ansible runs from other directories (a playbook's), where a relative one would lead elsewhere.
WORKSPACE = Path(os.path.abspath(os.environ.get("RDMAFORGE_WORKSPACE") or CHECKOUT or Path.cwd()))

#: Kept for the code that predates the split: the checkout, or the workspace when installed.
PROJECT_ROOT = CHECKOUT if CHECKOUT is not None else WORKSPACE

#: Machine-wide cache for things that are expensive to build and safe to share between checkouts:
#: the lab's base root filesystem and its package mirror.
CACHE_DIR = Path(os.path.abspath(os.environ.get("RDMAFORGE_CACHE") or "/var/cache/rdmaforge"))

#: Controller-side cache for per-cluster artefacts (NCCL builds, SSH trust keys); outside the repo.
CONTROLLER_CACHE = Path(os.path.abspath(os.environ.get("RDMAFORGE_CONTROLLER_CACHE")
                                        or Path.home() / ".cache" / "rdmaforge"))


def playbook(name: str) -> Path:
    """Path of a playbook shipped with the project, e.g. ``playbook("site.yml")``."""
    return PLAYBOOKS_DIR / name


#: A checkout's paths that messages and help name, and what a wheel user reaches instead (as_installed).
_CHECKOUT_PATH = re.compile(
    r"\bplaybooks/(?P<playbook>\w+\.yml)\b"
    r"|\broles/(?P<role>\w+)/(?:defaults/main|meta/argument_specs)\.yml\b"
    r"|\binventories/example/hosts\.yml\b"
    r"|\btests/infra\b"
)


def as_installed(text: str) -> str:
    """``text`` with each path of a checkout named as this installation reaches it: as it stands in a checkout;
    where the wheel is installed (no playbooks/, roles/, inventories/ or tests/ beside the user), the collection's
    playbook, ``ansible-doc -t role`` for a role's variables, and the package data's example inventory and verify
    suite (review round 33a: help and messages sent wheel users to files they do not have)."""
    if CHECKOUT is not None:
        return text

    def installed(found: re.Match[str]) -> str:
        if found.group("playbook"):
            return playbook_to_run(found.group("playbook"))
        if found.group("role"):
            return f"ansible-doc -t role rdmaforge.cluster.{found.group('role')}"
        if found.group(0).startswith("inventories/"):
            return str(EXAMPLE_INVENTORY / "hosts.yml")
        return str(VERIFY_ROOT / "tests" / "infra")

    return _CHECKOUT_PATH.sub(installed, text)


def role_file_shown(path: Path) -> str:
    """A role's file as a message names it: ``roles/eni/tasks/main.yml`` in a checkout; where the wheel is installed
    (no roles/ beside the user), its path in the installed collection (review round 39a)."""
    relative = f"roles/{path.parent.parent.name}/{path.parent.name}/{path.name}"
    return relative if CHECKOUT is not None else str(path)


def playbook_to_run(name: str) -> str:
    """How a user names a shipped playbook to ansible-playbook, for messages: ``playbooks/summary.yml`` in a checkout,
    the collection's ``rdmaforge.cluster.summary`` where the wheel is installed (no playbooks/ directory there)."""
    if CHECKOUT is not None:
        return f"playbooks/{name}"
    return f"rdmaforge.cluster.{name.removesuffix('.yml')}"


#: Ansible's own collections_path, where neither the environment nor a config names one.
ANSIBLE_DEFAULT_COLLECTIONS_PATH = "~/.ansible/collections:/usr/share/ansible/collections"


def ansible_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Variables that make Ansible find this installation's collection, config and workspace.

    In a checkout, ansible.cfg's collections_path names build/collections, (re)made here. Installed, the package's
    collection comes first (the one matching this rdmaforge), then the user's own collection paths (an inventory
    plugin installed with ansible-galaxy, say), and the fact cache goes to the workspace, not site-packages.
    """
    if CHECKOUT is not None:
        from rdmaforge.collection import ensure_dev_tree

        ensure_dev_tree(CHECKOUT)
        return {}
    users = environ.get("ANSIBLE_COLLECTIONS_PATH") or environ.get("ANSIBLE_COLLECTIONS_PATHS")
    return {
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([str(PACKAGE_DIR.parent),
                                                     users or ANSIBLE_DEFAULT_COLLECTIONS_PATH]),  # fmt: skip
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(WORKSPACE / ".cache" / "facts"),
    }
