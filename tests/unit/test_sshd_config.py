"""sshd's configuration read as sshd reads it (rdmaforge/parsers/sshd_config.py), and the memlock verdict of an SSH
login where sshd runs no PAM (pam_limits.without_pam). Real files: Debian 12's sshd_config and RHEL 9's settings
(tests/data/sshd_config/SOURCES.md). Expected values come from sshd_config(5) (Debian's openssh-server 9.2p1: "the
first obtained value will be used", keywords case-insensitive, UsePAM "The default is no", Include "processed in
lexical order", relative to /etc/ssh) and OpenSSH's servconf.c (UsePAM is not allowed in a Match block)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaforge.parsers.pam_limits import without_pam
from rdmaforge.parsers.sshd_config import Unreadable, UsePam, parse_line, proc_memlock, use_pam

DATA = Path(__file__).resolve().parents[1] / "data" / "sshd_config"
DEBIAN = (DATA / "debian12" / "sshd_config").read_text()
RHEL_MAIN = (DATA / "rhel9" / "sshd_config").read_text()
RHEL_DROP_IN = (DATA / "rhel9" / "sshd_config.d" / "50-redhat.conf").read_text()
CONFIG, DROP_INS = "/etc/ssh/sshd_config", "/etc/ssh/sshd_config.d"
DEBIAN_USEPAM = "UsePAM yes\n"  # Debian's line 85


def judge(main: str | None, drop_ins: dict[str, str] | None = None, **others: str) -> UsePam:
    """use_pam on a node whose sshd_config is ``main`` (None: no such file), whose sshd_config.d holds
    ``drop_ins`` (None: no such directory), listed unsorted as find lists them, and other files (path: text)."""
    files = {**({CONFIG: main} if main is not None else {}), **others}
    files.update({f"{DROP_INS}/{name}": text for name, text in (drop_ins or {}).items()})
    listing = {DROP_INS: list(reversed(list(drop_ins)))} if drop_ins is not None else {}
    return use_pam(files.get, listing.get)


def test_debians_and_rhels_shipped_files_turn_pam_on() -> None:
    assert judge(DEBIAN, {}) == UsePam(True, f"{CONFIG}:85", f"UsePAM yes at {CONFIG}:85")
    # RHEL's sshd_config sets no UsePAM: its drop-in does, through the Include
    rhel = judge(RHEL_MAIN, {"50-redhat.conf": RHEL_DROP_IN})
    assert rhel == UsePam(True, f"{DROP_INS}/50-redhat.conf:9", f"UsePAM yes at {DROP_INS}/50-redhat.conf:9")


def test_no_usepam_line_is_sshds_compiled_default_no() -> None:
    """RHEL's sshd_config without 50-redhat.conf, or Debian's with its UsePAM line taken out: sshd_config(5) "The
    default is no"; a commented line sets nothing."""
    commented = DEBIAN.replace(DEBIAN_USEPAM, "#UsePAM yes\n")
    for found in (judge(RHEL_MAIN, {}), judge(RHEL_MAIN, None), judge(commented, {})):
        assert found.on is False, found
        assert "no UsePAM line in /etc/ssh/sshd_config:" in found.reason
    assert judge(RHEL_MAIN, {"10-site.conf": "# UsePAM yes\n"}).reason == (
        f"no UsePAM line in {CONFIG}, {DROP_INS}/10-site.conf: sshd's compiled default is no (sshd_config(5))"
    )


def test_usepam_no_is_read_however_it_is_written() -> None:
    for line in ("UsePAM no", "usepam NO", "UsePAM=no", "UsePAM = no", '  UsePAM\t"no"  # site\r', "\"UsePAM\" 'no'"):
        found = judge(DEBIAN.replace(DEBIAN_USEPAM, line + "\n"), {})
        assert found.on is False and found.where == f"{CONFIG}:85", (line, found)


def test_the_first_value_wins_and_a_drop_in_is_read_before_sshd_config() -> None:
    """Debian's Include (line 12) comes before its UsePAM yes (line 85): a drop-in's UsePAM no wins; among drop-ins
    the first in lexical order wins; a name starting with . or not ending .conf is not included."""
    found = judge(DEBIAN, {"60-site.conf": "UsePAM yes\n", "10-nopam.conf": "# RDMA nodes\nUsePAM no\n"})
    assert found == UsePam(False, f"{DROP_INS}/10-nopam.conf:2", f"UsePAM no at {DROP_INS}/10-nopam.conf:2 (the "
                           f"first value wins: {DROP_INS}/60-site.conf:1, {CONFIG}:85 ignored)")  # fmt: skip
    assert judge(DEBIAN, {".00.conf": "UsePAM no\n", "00.conf.bak": "UsePAM no\n"}).on is True
    # a relative Include is under /etc/ssh; one that matches no file is skipped
    relative = judge(DEBIAN.replace("Include /etc/ssh/sshd_config.d/*.conf", "Include nopam.conf absent.conf"),
                     None, **{"/etc/ssh/nopam.conf": "UsePAM no\n"})  # fmt: skip
    assert relative.where == "/etc/ssh/nopam.conf:1" and relative.on is False


def test_usepam_in_a_match_block_is_not_judged() -> None:
    """UsePAM is not allowed in a Match block (servconf.c: SSHCFG_GLOBAL; sshd refuses it at startup unless the
    block is "Match all"): not judged, wherever the block is. A Match block in a drop-in ends with that file."""
    for main, drop_ins in [
        (DEBIAN + "Match User alice\n\tUsePAM no\n", {}),
        (DEBIAN, {"10-site.conf": "Match Group rdma\nUsePAM no\n"}),
        (DEBIAN.replace(DEBIAN_USEPAM, "") + "Match all\nInclude /etc/ssh/extra.conf\n", {}),
    ]:
        found = judge(main, drop_ins, **{"/etc/ssh/extra.conf": "UsePAM yes\n"})
        assert found.on is None and "inside a Match block" in found.reason, found
    assert judge(DEBIAN, {"10-site.conf": "Match User bob\n\tX11Forwarding no\n"}).on is True


def test_what_cannot_be_read_as_sshd_reads_it_is_not_judged() -> None:
    def unreadable(path: str) -> str | None:
        raise Unreadable("cat: /etc/ssh/sshd_config: Permission denied")

    assert judge(None, {}) == UsePam(None, CONFIG, f"{CONFIG} does not exist (sshd does not start without it)")
    denied = f"{CONFIG} cannot be read: cat: /etc/ssh/sshd_config: Permission denied"
    assert use_pam(unreadable, lambda directory: []) == UsePam(None, CONFIG, denied)

    def unlisted(directory: str) -> list[str] | None:
        raise Unreadable("find exited 1: Permission denied")

    found = use_pam({CONFIG: RHEL_MAIN}.get, unlisted)
    assert found.on is None
    assert found.reason == f"{CONFIG}:6: Include /etc/ssh/sshd_config.d/*.conf: find exited 1: Permission denied"
    for line, why in [("UsePAM maybe", "sshd takes yes or no"), ("UsePAM no yes", "sshd takes yes or no"),
                      ('UsePAM "no', "invalid quotes"), ("UsePAM", "no argument after keyword 'UsePAM'")]:  # fmt: skip
        found = judge(DEBIAN.replace(DEBIAN_USEPAM, line + "\n"), {})
        assert found.on is None and why in found.reason, (line, found)
    loop = judge(DEBIAN, {"loop.conf": "Include /etc/ssh/sshd_config.d/loop.conf\n"})
    assert loop.on is None and "nest deeper than 16" in loop.reason


def test_lines_are_split_as_servconf_splits_them() -> None:
    assert parse_line("  #UsePAM no") is None and parse_line("\t\r") is None
    assert parse_line("Include a.conf 'b c.conf' # two") == ("Include", ("a.conf", "b c.conf"))
    assert parse_line('UsePAM \\"no\\"') == ("UsePAM", ('"no"',))  # escaped quotes are kept: not a value sshd takes


#: tests/data/sshd_config/proc-limits-debian12: Max locked memory 8388608 bytes soft and hard.
PROC_LIMITS = (DATA / "proc-limits-debian12").read_text()


def test_proc_limits_are_read_as_ulimit_prints_them() -> None:
    assert proc_memlock(PROC_LIMITS) == ("8192", "8192")
    line = next(line for line in PROC_LIMITS.splitlines() if line.startswith("Max locked memory"))
    unlimited = PROC_LIMITS.replace(line, "Max locked memory         unlimited            unlimited            bytes")
    assert proc_memlock(unlimited) == ("unlimited", "unlimited")
    assert proc_memlock(PROC_LIMITS.replace(line, "")) is None


OFF = UsePam(False, f"{DROP_INS}/10-nopam.conf:2", f"UsePAM no at {DROP_INS}/10-nopam.conf:2")
SSHD = "/proc/812/limits of ssh.service's sshd"


@pytest.mark.parametrize(
    ("use", "sshd", "status", "says"),
    [
        (OFF, ("8192", "8192", SSHD), "problem", f"soft 8192, hard 8192 KiB ({SSHD}); set UsePAM yes ({DROP_INS}/"
         "10-nopam.conf:2) and restart sshd, or raise LimitMEMLOCK= of the ssh service (ssh.service or sshd.service) "
         "to infinity"),
        (OFF, ("unlimited", "8192", SSHD), "problem", "soft unlimited, hard 8192 KiB"),
        (OFF, ("unlimited", "unlimited", SSHD), "not_checked", f"unlimited ({SSHD}), not the limits files' doing"),
        (OFF, "no running sshd in ssh.service or sshd.service", "not_checked",
         "not read here (no running sshd in ssh.service or sshd.service); set UsePAM yes"),
        (UsePam(None, CONFIG, "UsePAM at x:3 is inside a Match block"), None, "not_checked",
         "node1: whether sshd runs PAM, and so pam_limits, for an SSH login cannot be told from its configuration: "
         "UsePAM at x:3 is inside a Match block"),
    ],
)  # fmt: skip
def test_without_pam_the_limits_files_give_the_login_nothing(use: UsePam, sshd: tuple[str, str, str] | str | None,
                                                             status: str, says: str) -> None:  # fmt: skip
    """No PAM: never ok; a problem where sshd's own limit (which the login keeps) is not unlimited, naming the node,
    the file and line, and what to do."""
    found = without_pam("node1", use, sshd)
    assert found is not None and found.status == status and says in found.reason, found
    if use.on is False:
        assert found.reason.startswith(f"node1: sshd runs no PAM (UsePAM no at {DROP_INS}/10-nopam.conf:2), so "
                                       "pam_limits and the limits files, rdma_core's drop-in among them, do not "
                                       "apply to an SSH login")  # fmt: skip
    assert without_pam("node1", UsePam(True, f"{CONFIG}:85", ""), None) is None  # PAM runs: the stack decides

