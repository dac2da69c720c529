"""The lab's local mirror: a signed apt repository (Debian layout plus an Alibaba-style erdma layout),
a pip find-links directory and the NCCL and nccl-tests source tarballs, built once, cached, and served over HTTP.

Layout under <cache>/mirror/<key>/www, served at http://198.18.0.1:8080/:
  debian/                      Debian-style repository, suite bookworm, component main (the distro archive)
  erdma/apt/debian/            like https://mirrors.aliyun.com/erdma/apt/ubuntu: suite "<codename>/erdma", main
  erdma/GPGKEY                 the lab key, armored (like Alibaba's https://mirrors.aliyun.com/erdma/GPGKEY)
  pip/                         find-links directory (aiacc-nccl-plugin sdist, torch CPU wheel, ...)
  nccl/                        NCCL source tarball and SHA256SUMS
  nccl-tests/                  nccl-tests source tarball (copied from ../shared/sources, checked against its
                               SHA256SUMS) and SHA256SUMS; absent when ../shared/sources has no such tarball
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rdmaforge.lab import cache as cache_util
from rdmaforge.lab import packages, rootfs
from rdmaforge.lab.shell import LabError, mount_overlay, pid_alive, run, signal_group
from rdmaforge.lab.spec import CONTROLLER_ADDRESS, MIRROR_PORT
from rdmaforge.paths import PROJECT_ROOT

RECIPE_VERSION = 1
KEY_UID = "rdmaforge lab mirror <lab-mirror@rdmaforge.invalid>"
MIRROR_URL = f"http://{CONTROLLER_ADDRESS}:{MIRROR_PORT}"
#: Source tarballs that no package registry carries and the lab cannot download (nccl-tests from GitHub), kept
#: beside the checkout with their SHA256SUMS, or where RDMAFORGE_SOURCES names (an installed wheel has no checkout
#: beside it: review round 39a).
LOCAL_SOURCES = Path(os.environ.get("RDMAFORGE_SOURCES") or PROJECT_ROOT.parent / "shared" / "sources")


@dataclass(frozen=True)
class Mirror:
    www: Path
    fingerprint: str  # of the lab signing key, 40 hex digits
    nccl_tarball: str
    nccl_sha256: str
    nccl_tests_tarball: str = ""  # "" when the mirror has no nccl-tests source ...
    nccl_tests_sha256: str = ""
    nccl_tests_absent: str = ""  # ... and then why not

    @property
    def keyring(self) -> Path:
        return self.www.parent / "lab-archive-keyring.gpg"

    @property
    def manifest(self) -> dict[str, str]:
        return {
            "url": MIRROR_URL,
            "fingerprint": self.fingerprint,
            "nccl_tarball": self.nccl_tarball,
            "nccl_sha256": self.nccl_sha256,
            "nccl_tests_tarball": self.nccl_tests_tarball,
            "nccl_tests_sha256": self.nccl_tests_sha256,
            "nccl_tests_absent": self.nccl_tests_absent,
        }


@dataclass(frozen=True)
class LocalTarball:
    """A tarball of LOCAL_SOURCES with the sha256 its SHA256SUMS pins; path is None when there is none (and
    ``absent`` says so)."""

    name: str
    path: Path | None
    pinned_sha256: str = ""
    absent: str = ""


def local_tarball(name: str, sources: Path = LOCAL_SOURCES) -> LocalTarball:
    if not sources.is_dir():
        return LocalTarball(name, None, absent=f"{sources} is absent")
    path = sources / name
    if not path.is_file():
        return LocalTarball(name, None, absent=f"{path} is absent")
    return LocalTarball(name, path, pinned_sha256(sources / "SHA256SUMS", name))


def pinned_sha256(sums: Path, name: str) -> str:
    """The sha256 that a SHA256SUMS file (sha256sum's format) gives for ``name``; "" when it gives none."""
    if not sums.is_file():
        return ""
    for line in sums.read_text().splitlines():
        digest, _, file = line.strip().partition(" ")
        if file.lstrip(" *") == name:
            return digest.lower()
    return ""


def mirror_dir(cache: Path, nccl_tests: LocalTarball) -> Path:
    key = packages.fingerprint(
        packages.MIRROR_APT_PACKAGES,
        packages.ERDMA_APT_PACKAGES,
        packages.MIRROR_PIP_PACKAGES,
        packages.NCCL_SOURCE,
        # with or without nccl-tests (a checkout without ../shared/sources gets a mirror without it)
        [nccl_tests.name, nccl_tests.pinned_sha256] if nccl_tests.path else None,
        rootfs.base_dir(cache).name,
        RECIPE_VERSION,
    )
    return cache / "mirror" / key


def ensure_mirror(cache: Path, base: Path, sources: Path = LOCAL_SOURCES) -> Mirror:
    nccl_tests = local_tarball(packages.NCCL_TESTS_TARBALL, sources)
    target = mirror_dir(cache, nccl_tests)
    done = target / "mirror.json"
    if done.exists():
        info = json.loads(done.read_text())
        return Mirror(
            target / "www",
            info["fingerprint"],
            info["nccl_tarball"],
            info["nccl_sha256"],
            info.get("nccl_tests_tarball", ""),
            info.get("nccl_tests_sha256", ""),
            info.get("nccl_tests_absent", ""),
        )
    print(f"lab: building the local mirror {target.name} (once; cached)", file=sys.stderr)
    building = target.with_name(target.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    www = building / "www"
    www.mkdir(parents=True)
    # First, as it is the cheapest: a tarball that does not match its pin stops the build at once.
    tests_sha = copy_verified(nccl_tests, www / "nccl-tests") if nccl_tests.path else ""
    if not tests_sha:
        print(f"lab: the mirror has no nccl-tests source: {nccl_tests.absent}", file=sys.stderr)
    gnupg = ensure_signing_key(cache / "mirror" / "gnupg")
    fpr = key_fingerprint(gnupg)
    debs = download_debs(base, building / "debs")
    publish_debian_repo(www / "debian", debs, gnupg, suite=packages.SUITE)
    erdma_debs = [d for d in debs if d.name.split("_", 1)[0] in packages.ERDMA_APT_PACKAGES]
    publish_debian_repo(www / "erdma" / "apt" / "debian", erdma_debs, gnupg, suite=f"{packages.SUITE}/erdma")
    armored = run(["gpg", "--homedir", str(gnupg), "--export", "--armor", fpr]).stdout
    (www / "erdma" / "GPGKEY").write_text(armored)
    (www / "debian" / "GPGKEY").write_text(armored)
    binary = subprocess.run(["gpg", "--homedir", str(gnupg), "--export", fpr], capture_output=True, check=True).stdout
    (building / "lab-archive-keyring.gpg").write_bytes(binary)
    download_pip(www / "pip")
    sha = download_verified(packages.NCCL_SOURCE, www / "nccl")
    shutil.rmtree(building / "debs")
    made = Mirror(
        target / "www",
        fpr,
        packages.NCCL_SOURCE.name,
        sha,
        nccl_tests.name if tests_sha else "",
        tests_sha,
        "" if tests_sha else nccl_tests.absent,
    )
    info = {k: v for k, v in made.manifest.items() if k != "url"}
    (building / "mirror.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    cache_util.remove_other_builds(target, keep={"gnupg"})
    return made


def ensure_signing_key(home: Path) -> Path:
    if not (home / "pubring.kbx").exists() or not key_fingerprint(home, missing_ok=True):
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True, mode=0o700)
        run(
            [
                "gpg",
                "--homedir",
                str(home),
                "--batch",
                "--pinentry-mode",
                "loopback",
                "--passphrase",
                "",
                "--quick-gen-key",
                KEY_UID,
                "ed25519",
                "sign",
                "never",
            ]
        )
    return home


def key_fingerprint(home: Path, missing_ok: bool = False) -> str:
    out = run(["gpg", "--homedir", str(home), "--with-colons", "--list-keys", KEY_UID], check=not missing_ok).stdout
    for line in out.splitlines():
        if line.startswith("fpr:"):
            return line.split(":")[9]
    if missing_ok:
        return ""
    raise LabError(f"no lab signing key in {home}")


def download_debs(base: Path, dest: Path) -> list[Path]:
    """Resolve MIRROR_APT_PACKAGES against the base image (so only what a node lacks is fetched) and download.

    Runs apt inside a throw-away overlay of the base image: the cached image itself is never modified.
    """
    scratch = dest.parent / "resolve"
    merged = scratch / "merged"
    dest.mkdir(parents=True, exist_ok=True)
    mount_overlay(base, scratch, merged)
    try:
        (merged / "etc" / "apt" / "sources.list").write_text(f"deb {rootfs.DEBIAN_MIRROR} {packages.SUITE} main\n")
        shutil.copy("/etc/resolv.conf", merged / "etc" / "resolv.conf")
        run(["chroot", str(merged), "apt-get", "-q", "update"], timeout=900)
        run(
            [
                "chroot",
                str(merged),
                "apt-get",
                "-q",
                "-y",
                "--download-only",
                "--no-install-recommends",
                "install",
                *packages.MIRROR_APT_PACKAGES,
            ],
            timeout=1800,
        )
        for deb in (merged / "var" / "cache" / "apt" / "archives").glob("*.deb"):
            shutil.copy2(deb, dest / deb.name)
    finally:
        run(["umount", str(merged)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    debs = sorted(dest.glob("*.deb"))
    missing = [
        p
        for p in packages.MIRROR_APT_PACKAGES
        if not any(d.name.startswith(f"{p}_") for d in debs) and not installed_in(base, p)
    ]
    if missing:
        raise LabError(f"mirror: apt did not download {', '.join(missing)}")
    return debs


def installed_in(root: Path, package: str) -> bool:
    status = (root / "var" / "lib" / "dpkg" / "status").read_text()
    return f"Package: {package}\n" in status


def publish_debian_repo(repo: Path, debs: list[Path], gnupg: Path, suite: str) -> None:
    pool = repo / "pool" / "main"
    pool.mkdir(parents=True, exist_ok=True)
    for deb in debs:
        if not (pool / deb.name).exists():
            os.link(deb, pool / deb.name)  # hard links: both layouts share one copy on disk
    dist = repo / "dists" / suite
    binary = dist / "main" / f"binary-{packages.ARCH}"
    binary.mkdir(parents=True, exist_ok=True)
    index = run(["apt-ftparchive", "packages", "pool"], timeout=600, cwd=repo).stdout
    (binary / "Packages").write_text(index)
    run(["gzip", "-9kf", str(binary / "Packages")])
    opts = [
        f"-oAPT::FTPArchive::Release::{k}={v}"
        for k, v in {
            "Origin": "rdmaforge-lab",
            "Label": "rdmaforge lab mirror",
            "Suite": suite,
            "Codename": suite,
            "Architectures": packages.ARCH,
            "Components": "main",
        }.items()
    ]
    release = run(["apt-ftparchive", *opts, "release", f"dists/{suite}"], cwd=repo).stdout
    (dist / "Release").write_text(release)
    sign = [
        "gpg",
        "--homedir",
        str(gnupg),
        "--batch",
        "--yes",
        "--pinentry-mode",
        "loopback",
        "--passphrase",
        "",
    ]
    run([*sign, "--clearsign", "-o", str(dist / "InRelease"), str(dist / "Release")])
    run([*sign, "-abs", "-o", str(dist / "Release.gpg"), str(dist / "Release")])


def download_pip(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "-q", "-d", str(dest)]
    for sdist in packages.MIRROR_PIP_SDIST_ONLY:
        argv += ["--no-binary", sdist]
    run([*argv, *packages.MIRROR_PIP_PACKAGES], timeout=1800)


def download_verified(source: packages.SourceTarball, dest: Path) -> str:
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / source.name
    partial = target.with_suffix(".part")
    with urllib.request.urlopen(source.url, timeout=300) as response, partial.open("wb") as out:  # noqa: S310
        shutil.copyfileobj(response, out)
    digest = hashlib.sha256(partial.read_bytes()).hexdigest()
    if digest != source.sha256:
        partial.unlink()
        raise LabError(f"mirror: {source.url} has sha256 {digest}, expected {source.sha256}")
    partial.rename(target)
    (dest / "SHA256SUMS").write_text(f"{digest}  {source.name}\n")
    return digest


def copy_verified(source: LocalTarball, dest: Path) -> str:
    """Copy a tarball of LOCAL_SOURCES into the mirror, checked against the sha256 its SHA256SUMS pins (the copy
    is what is checked, and what is served); returns that sha256."""
    if source.path is None:
        raise LabError(f"mirror: no {source.name} to copy: {source.absent}")
    sums = source.path.parent / "SHA256SUMS"
    if not source.pinned_sha256:
        raise LabError(f"mirror: {sums} pins no sha256 for {source.name}, so {source.path} cannot be checked")
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / source.name
    partial = target.with_name(target.name + ".part")
    shutil.copyfile(source.path, partial)
    digest = hashlib.sha256(partial.read_bytes()).hexdigest()
    if digest != source.pinned_sha256:
        partial.unlink()
        raise LabError(f"mirror: {source.path} has sha256 {digest}, but {sums} pins {source.pinned_sha256}")
    partial.rename(target)
    (dest / "SHA256SUMS").write_text(f"{digest}  {source.name}\n")
    return digest


# --- serving -------------------------------------------------------------------------------------------


SERVER = "http.server"


def serve(www: Path, pidfile: Path, log: Path) -> bool:
    """Start a threaded HTTP server on the lab bridge (idempotent: one already serving ``www`` is kept).

    Returns True when the content served changed (nodes' package indexes are then stale)."""
    served = pidfile.with_suffix(".www")
    previous = served.read_text() if served.exists() else None
    if pid_alive(pidfile, owner=SERVER) is not None:
        if previous == str(www):
            return False
        stop(pidfile)  # serving another (older) mirror build
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                SERVER,
                str(MIRROR_PORT),
                "--bind",
                CONTROLLER_ADDRESS,
                "--directory",
                str(www),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    pidfile.write_text(f"{proc.pid}\n")
    served.write_text(str(www))
    for _ in range(50):
        try:
            with urllib.request.urlopen(f"{MIRROR_URL}/debian/GPGKEY", timeout=2):  # noqa: S310
                return previous is not None and previous != str(www)
        except OSError:
            time.sleep(0.1)
    raise LabError(f"mirror: HTTP server did not answer on {MIRROR_URL} (log: {log})")


def stop(pidfile: Path, timeout: float = 10.0) -> None:
    """Stop the mirror's server and return once it has exited (its port is then free); killed after ``timeout``."""
    pid = pid_alive(pidfile, owner=SERVER)
    # SIGTERM, then SIGKILL when it outlives ``timeout``; each waits until the server is gone. Without the owner
    # check from here on: an exiting process loses its command line before it closes its files (the port), and only
    # a zombie or no process at all has closed them.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if pid is None or pid_alive(pidfile) is None:
            break
        signal_group(pid, sig)
        deadline = time.monotonic() + timeout
        while pid_alive(pidfile) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
    pidfile.unlink(missing_ok=True)
