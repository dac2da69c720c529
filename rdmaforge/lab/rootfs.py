"""The lab's base root filesystem: Debian minbase plus BASE_PACKAGES, built once and cached read-only.

Nodes never write to it: each node is an overlay whose upper directory holds that node's changes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from rdmaforge.lab import packages
from rdmaforge.lab.shell import LabError, run

#: Bump when the customisation below changes, so that cached images are rebuilt.
RECIPE_VERSION = 2
DEBIAN_MIRROR = os.environ.get("RDMAFORGE_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def base_dir(cache: Path) -> Path:
    key = packages.fingerprint(packages.SUITE, packages.BASE_PACKAGES, RECIPE_VERSION)
    return cache / "rootfs" / f"{packages.SUITE}-{key}"


def ensure_base(cache: Path) -> Path:
    """Return the cached base image, building it with debootstrap (about a minute) when missing."""
    target = base_dir(cache)
    if (target / ".rdmaforge-complete").exists():
        return target
    building = target.with_name(target.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    print(f"lab: building base image {target.name} with debootstrap (once; cached)", file=sys.stderr)
    try:
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(packages.BASE_PACKAGES)}",
                packages.SUITE,
                str(building),
                DEBIAN_MIRROR,
            ],
            timeout=1800,
        )
    except LabError:
        shutil.rmtree(building, ignore_errors=True)
        raise
    customise(building)
    (building / ".rdmaforge-complete").write_text(f"{packages.SUITE} {packages.BASE_PACKAGES}\n")
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    return target


def customise(root: Path) -> None:
    """Make the image generic: per-node identity (host keys, machine-id, hostname) is added at `lab up`."""
    for key in (root / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc" / "machine-id").write_text("")
    (root / "etc" / "hostname").write_text("localhost\n")
    # A real host has /etc/default/grub (written by grub-pc's postinst, which a container cannot run).
    template = root / "usr" / "share" / "grub" / "default" / "grub"
    if template.exists():
        (root / "etc" / "default" / "grub").write_text(template.read_text())
    (root / "etc" / "default" / "grub.d").mkdir(parents=True, exist_ok=True)
    # Only the lab mirror is configured per node; the debootstrap source is dropped.
    (root / "etc" / "apt" / "sources.list").write_text("# rdmaforge lab: sources are in sources.list.d/\n")
    # No serial/console logins are needed; avoids a getty spinning on nspawn's console.
    run(["chroot", str(root), "systemctl", "mask", "console-getty.service"], check=False)
    shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    (root / "var" / "cache" / "apt" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    for lists in (root / "var" / "lib" / "apt" / "lists").glob("*_dists_*"):
        lists.unlink()
