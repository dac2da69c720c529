"""pam_limits' files read as pam_limits reads them (rdmaforge/parsers/pam_limits.py): real files from
tests/data/limits (sources in its SOURCES.md), and variants of them made here, each saying what was changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaforge.parsers.pam_limits import (
    LIMITS_CONF,
    LimitLine,
    effective,
    limits_d_order,
    parse_limits,
    read_limits,
    unlimited_problems,
)

LIMITS = Path(__file__).resolve().parents[1] / "data" / "limits"
UPSTREAM = (LIMITS / "linux-pam_limits.conf").read_text()
DEBIAN = (LIMITS / "debian_limits.conf").read_text()
LIVE = (LIMITS / "cassandra_training_limits.conf").read_text()  # * and root: soft and hard memlock unlimited
ROLE = "/etc/security/limits.d/90-rdmaforge-memlock.conf"
#: What roles/rdma_core/templates/memlock.conf.j2 writes for its default users (*, root), with its comment lines.
ROLE_TEXT = (
    "# Managed by rdmaforge\n# RDMA registers (pins) memory: verbs and NCCL need an unlimited memlock limit.\n"
    "* soft memlock unlimited\n* hard memlock unlimited\nroot soft memlock unlimited\nroot hard memlock unlimited\n"
)


def test_the_shipped_files_set_nothing_though_they_show_every_example() -> None:
    """Every example in Linux-PAM's and Debian's limits.conf is commented out: nothing is configured."""
    assert parse_limits(UPSTREAM, LIMITS_CONF) == []
    assert parse_limits(DEBIAN, LIMITS_CONF) == []
    assert unlimited_problems(read_limits([(LIMITS_CONF, DEBIAN)]), "*") == [
        "no line sets *'s soft memlock", "no line sets *'s hard memlock"]  # fmt: skip


def test_a_commented_memlock_line_is_not_a_setting() -> None:
    """The finding: a check that looked for the text "root hard memlock unlimited" passed on a commented line."""
    commented = DEBIAN.replace("# End of file", "# * hard memlock unlimited\n#root hard memlock unlimited\n# End")
    assert "root hard memlock unlimited" in commented
    problems = unlimited_problems(read_limits([(LIMITS_CONF, commented)]), "root")
    assert problems == ["no line sets root's soft memlock", "no line sets root's hard memlock"]
    # a comment after a setting is cut off, the setting stays
    trailing = parse_limits("root hard memlock unlimited # RDMA\n", "f")
    assert trailing == [LimitLine("f", 1, "root", "hard", "memlock", "unlimited")]


def test_a_live_file_with_spaces_or_tabs() -> None:
    lines = read_limits([(LIMITS_CONF, LIVE)])
    assert unlimited_problems(lines, "*") == [] and unlimited_problems(lines, "root") == []
    assert effective(lines, "root", "memlock")["hard"] == LimitLine(LIMITS_CONF, 8, "root", "hard", "memlock",
                                                                      "unlimited")  # fmt: skip
    tabs = read_limits([(LIMITS_CONF, LIVE.replace(" ", "\t"))])  # the same file, tab-separated
    assert tabs == lines
    assert effective(lines, "*", "nofile")["soft"].value == "32768"  # type: ignore[union-attr]


def test_dash_is_soft_and_hard_and_values_are_read_as_pam_limits_reads_them() -> None:
    text = "*\t-\tmemlock\tinfinity\n@rdma - MEMLOCK -1\nalice Soft memlock 64kb\nbob hard memlock lots\n"
    lines = parse_limits(text, "f")
    assert [(e.domain, e.kind, e.item, e.value) for e in lines] == [
        ("*", "-", "memlock", "unlimited"), ("@rdma", "-", "memlock", "unlimited"),
        ("alice", "soft", "memlock", "64")]  # fmt: skip
    # alice may be in @rdma (the files do not say): her own line outranks the group's, so it is named
    assert unlimited_problems(lines, "@rdma") == [
        "alice's soft memlock is 64 (f:3), over @rdma's for the logins it covers"
    ]
    # bob's value has no digits: pam_limits ignores the line, so bob's hard memlock is not set by it
    assert effective(lines, "bob", "memlock") == {"soft": None, "hard": None}


def test_later_files_win_and_limits_d_is_read_in_c_order() -> None:
    assert limits_d_order(["90-rdmaforge-memlock.conf", "10-a.conf", "Z.conf", "a.conf", ".hidden.conf",
                           "rdma.conf.rpmsave", "99-x.conf"]) == [
        "10-a.conf", "90-rdmaforge-memlock.conf", "99-x.conf", "Z.conf", "a.conf"]  # fmt: skip
    later = "/etc/security/limits.d/99-site.conf"
    lines = read_limits([(LIMITS_CONF, LIVE), (ROLE, ROLE_TEXT), (later, "*\thard\tmemlock\t65536\n")])
    assert unlimited_problems(lines, "*") == [f"*'s hard memlock is 65536 ({later}:1)"]
    assert unlimited_problems(lines, "root") == []  # root's own lines outrank the * line
    # the same line in limits.conf, read before the drop-in, is overridden by it
    earlier = read_limits([(LIMITS_CONF, LIVE + "* hard memlock 65536\n"), (ROLE, ROLE_TEXT)])
    assert unlimited_problems(earlier, "*") == []


def test_a_more_specific_domain_overrides_the_default_for_its_logins() -> None:
    site = "/etc/security/limits.d/50-site.conf"
    text = "@student hard memlock 64\nalice - memlock 128\n1000: soft memlock 8192\n%staff hard memlock 1\nftp -\n"
    lines = read_limits([(ROLE, ROLE_TEXT), (site, text)])
    assert unlimited_problems(lines, "*") == [
        f"@student's hard memlock is 64 ({site}:1), over *'s for the logins it covers",
        f"alice's - memlock is 128 ({site}:2), over *'s for the logins it covers",
        f"1000:'s soft memlock is 8192 ({site}:3), over *'s for the logins it covers",
        f"'ftp -' ({site}:5): pam_limits sets no limit at all for these logins",
    ]  # the %staff line is for maxlogins only: pam_limits ignores it for memlock
    # root is uid 0: "1000:" does not cover it, "0:" would; and a user line outranks every group and * line
    assert unlimited_problems(lines, "root") == []
    zero = read_limits([(ROLE, ROLE_TEXT), (site, ":0 hard memlock 64\n")])
    assert unlimited_problems(zero, "root") == [
        f":0's hard memlock is 64 ({site}:1), over root's for the logins it covers"
    ]
    assert unlimited_problems(read_limits([(ROLE, ROLE_TEXT), (site, "root -\n")]), "root") == [
        f"'root -' ({site}:1): pam_limits sets no limit at all for root"]  # fmt: skip


@pytest.mark.parametrize("line", ["root hard memlock", "root hard", "root", "root sometimes memlock unlimited"])
def test_lines_pam_limits_skips_set_nothing(line: str) -> None:
    assert parse_limits(line + "\n", "f") == []
