"""pam_limits' files read as pam_limits reads them, for one login (rdmaforge/parsers/pam_limits.py): real files from
tests/data/limits (sources in its SOURCES.md), and variants of them made here, each saying what was changed.
Expected values come from limits.conf(5), Linux-PAM's pam_limits.c, and what Debian 12's pam_limits.so did with
the same lines (SOURCES.md, "Observed")."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaforge.parsers.pam_limits import (
    LIMITS_CONF,
    VENDOR_LIMITS_CONF,
    LimitLine,
    LimitsRun,
    LimitVerdict,
    Login,
    group_keys,
    judge_unlimited,
    limits_d_order,
    login_limit,
    parse_limits,
    parse_login,
    read_limits,
    session_stack,
    ssh_limits_runs,
    with_vendor_files,
)

LIMITS = Path(__file__).resolve().parents[1] / "data" / "limits"
UPSTREAM = (LIMITS / "linux-pam_limits.conf").read_text()
DEBIAN = (LIMITS / "debian_limits.conf").read_text()
LIVE = (LIMITS / "cassandra_training_limits.conf").read_text()  # * and root: soft and hard memlock unlimited
ROLE = "/etc/security/limits.d/90-rdmaforge-memlock.conf"
SITE = "/etc/security/limits.d/99-site.conf"
#: What roles/rdma_core/templates/memlock.conf.j2 writes for its default users (*, root), with its comment lines.
ROLE_TEXT = (
    "# Managed by rdmaforge\n# RDMA registers (pins) memory: verbs and NCCL need an unlimited memlock limit.\n"
    "* soft memlock unlimited\n* hard memlock unlimited\nroot soft memlock unlimited\nroot hard memlock unlimited\n"
)
#: Debian 12's root: `getent passwd root` and `id -G root` there.
ROOT = parse_login("root", "root:x:0:0:root:/root:/bin/bash\n", "0\n", "", [])
#: The user of SOURCES.md's observations: uid 1500, primary group alice (1500), member of rdma (1600, whose other
#: name is rdmaalias), not of other (1700): `getent passwd alice`, `id -G alice`, `getent group -- rdma rdmaalias
#: 1600 other` on Debian 12 with those passwd and group lines.
ALICE_GROUPS = "rdma:x:1600:alice\nrdmaalias:x:1600:\nrdma:x:1600:alice\nother:x:1700:\n"
ALICE = parse_login("alice", "alice:x:1500:1500::/home/alice:/bin/sh\n", "1500 1600\n", ALICE_GROUPS,
                    ["rdma", "rdmaalias", ":1600", "other", "nosuch"])  # fmt: skip
#: A second uid-0 user (toor:x:0:0), in group root (gid 0) as its primary group.
TOOR = parse_login("toor", "toor:x:0:0:toor:/root:/bin/sh\n", "0\n", "root:x:0:\nroot:x:0:\n", ["root", ":0"])


def verdict(files: list[tuple[str, str]], login: Login | str, debian: bool = True, **kwargs: object) -> tuple[str, str]:
    assert isinstance(login, Login), login
    found = judge_unlimited(files, login, debian, **kwargs)  # type: ignore[arg-type]
    return found.status, found.reason


def test_the_logins_are_read_as_pam_limits_looks_them_up() -> None:
    assert ROOT == Login("root", 0, 0)
    # rdmaalias has no members but gid 1600, one of alice's groups (getgrouplist); other is not hers; nosuch is none
    assert ALICE == Login("alice", 1500, 1500, frozenset({"rdma", "rdmaalias", ":1600"}))
    assert parse_login("bob", "", "", "", []) == "no passwd entry for bob ('')"  # getent passwd bob: exit 2
    assert parse_login("alice", "alice:x:1500:1500::/home/alice:/bin/sh\n", "", "", []) == (
        "the groups of alice are unreadable (id -G: '')")  # fmt: skip
    # a group named by digits: getent would look up a gid, so its membership is not known
    numeric = parse_login("alice", "alice:x:1500:1500::/home/alice:/bin/sh\n", "1500 1600\n", "", ["123"])
    assert numeric == Login("alice", 1500, 1500, frozenset(), frozenset({"123"}))
    lines = read_limits([(ROLE, ROLE_TEXT), (SITE, "@123 hard memlock 64\n")])
    assert group_keys(lines) == ["123"]
    assert verdict([(ROLE, ROLE_TEXT), (SITE, "@123 hard memlock 64\n")], numeric) == (
        "not_checked", "whether alice is in @123 cannot be looked up (getent takes a number for a gid)")  # fmt: skip
    ranges = read_limits([(SITE, "@rdma - memlock 1\n@:1600 - memlock 1\n@1500: - memlock 1\n%staff -\n")])
    assert group_keys(ranges) == [":1600", "rdma"]  # gid ranges are judged by the primary gid, not looked up


def test_the_shipped_files_set_nothing_though_they_show_every_example() -> None:
    """Every example in Linux-PAM's and Debian's limits.conf is commented out: nothing is configured."""
    assert parse_limits(UPSTREAM, LIMITS_CONF) == []
    assert parse_limits(DEBIAN, LIMITS_CONF) == []
    assert verdict([(LIMITS_CONF, DEBIAN)], ROOT) == (
        "problem", "no line sets root's soft memlock; no line sets root's hard memlock")  # fmt: skip


def test_a_commented_memlock_line_is_not_a_setting() -> None:
    """The finding: a check that looked for the text "root hard memlock unlimited" passed on a commented line."""
    commented = DEBIAN.replace("# End of file", "# * hard memlock unlimited\n#root hard memlock unlimited\n# End")
    assert "root hard memlock unlimited" in commented
    assert verdict([(LIMITS_CONF, commented)], ROOT) == (
        "problem", "no line sets root's soft memlock; no line sets root's hard memlock")  # fmt: skip
    # a comment after a setting is cut off, the setting stays
    trailing = parse_limits("root hard memlock unlimited # RDMA\n", "f")
    assert trailing == [LimitLine("f", 1, "root", "hard", "memlock", "unlimited")]


def test_a_live_file_with_spaces_or_tabs() -> None:
    lines = read_limits([(LIMITS_CONF, LIVE)])
    for login in (ROOT, ALICE):
        assert verdict([(LIMITS_CONF, LIVE)], login)[0] == "ok"
    root = login_limit(lines, ROOT, "memlock", debian_root_rule=True)[1]
    assert root["hard"] == LimitLine(LIMITS_CONF, 8, "root", "hard", "memlock", "unlimited")
    tabs = read_limits([(LIMITS_CONF, LIVE.replace(" ", "\t"))])  # the same file, tab-separated
    assert tabs == lines
    nofile = login_limit(lines, ALICE, "nofile", debian_root_rule=True)[1]["soft"]
    assert nofile is not None and nofile.value == "32768"


def test_values_are_read_as_pam_limits_reads_them() -> None:
    text = ("*\t-\tmemlock\tinfinity\n@rdma - MEMLOCK -1\nalice Soft memlock 64kb\nbob hard memlock lots\n"
            "carol hard memlock +64\ndave hard memlock -5\neve hard memlock 64 \t# pinned\n")  # fmt: skip
    lines = parse_limits(text, "f")
    assert [(e.domain, e.kind, e.item, e.value) for e in lines] == [
        ("*", "-", "memlock", "unlimited"), ("@rdma", "-", "memlock", "unlimited"),
        ("alice", "soft", "memlock", "64"),  # strtoul stops at "kb"
        ("carol", "hard", "memlock", "64"),  # strtoul takes a sign: +64 is 64 (observed)
        ("dave", "hard", "memlock", "unlimited"),  # -5 wraps to 2**64-5 KiB: saturates to RLIM_INFINITY
        ("eve", "hard", "memlock", "64"),  # spaces and tabs around the value are trimmed
    ]  # bob's value has no digits: pam_limits ignores the line  # fmt: skip


SKIPPED = ["root hard memlock", "root hard", "root", "root sometimes memlock unlimited", "1500:x hard memlock 64",
           "@grp: hard memlock 64", ":0: hard memlock 64"]  # fmt: skip


@pytest.mark.parametrize("line", SKIPPED)
def test_lines_pam_limits_skips_set_nothing(line: str) -> None:
    assert parse_limits(line + "\n", "f") == []


def test_a_keyword_followed_by_more_or_a_crlf_line_end_is_not_read_as_no_limit() -> None:
    """Linux-PAM 1.6+ takes the rest of the line as the value, so "unlimited\\r" (a CRLF file) is no value it reads:
    root gets no limit from such a drop-in there. Before, the line was read as unlimited: a false pass on 1.6+."""
    crlf = ROLE_TEXT.replace("\n", "\r\n")
    assert verdict([(ROLE, crlf)], ROOT) == (
        "problem", "no line sets root's soft memlock; no line sets root's hard memlock")  # fmt: skip
    assert parse_limits("root hard memlock 64\r\n", "f")[0].value == "64"  # a number is still read up to the \r
    assert parse_limits("root hard memlock unlimited now\n", "f") == []


def test_later_files_win_and_limits_d_is_read_in_c_order() -> None:
    assert limits_d_order(["90-rdmaforge-memlock.conf", "10-a.conf", "Z.conf", "a.conf", ".hidden.conf",
                           "rdma.conf.rpmsave", "99-x.conf"]) == [
        "10-a.conf", "90-rdmaforge-memlock.conf", "99-x.conf", "Z.conf", "a.conf"]  # fmt: skip
    later = [(LIMITS_CONF, LIVE), (ROLE, ROLE_TEXT), (SITE, "*\thard\tmemlock\t65536\n")]
    assert verdict(later, ALICE) == ("problem", f"alice's hard memlock is 65536 ({SITE}:1: * hard memlock)")
    assert verdict(later, ROOT)[0] == "ok"  # root's own lines outrank the * line
    # the same line in limits.conf, read before the drop-in, is overridden by it
    assert verdict([(LIMITS_CONF, LIVE + "* hard memlock 65536\n"), (ROLE, ROLE_TEXT)], ALICE)[0] == "ok"


def test_a_group_line_applies_only_to_its_members() -> None:
    """@group: its members only (limits.conf(5)); alice is in rdma (and rdmaalias, the same gid), not in other."""
    for group in ("@rdma", "@rdmaalias", "@:1600"):
        assert verdict([(ROLE, ROLE_TEXT), (SITE, f"{group} hard memlock 64\n")], ALICE) == (
            "problem", f"alice's hard memlock is 64 ({SITE}:1: {group} hard memlock)")  # fmt: skip
    for group in ("@other", "@nosuch", "@:1700"):
        assert verdict([(ROLE, ROLE_TEXT), (SITE, f"{group} hard memlock 64\n")], ALICE)[0] == "ok"
    # the login's own line outranks the group's, wherever it is
    own = [(ROLE, ROLE_TEXT + "alice - memlock unlimited\n"), (SITE, "@rdma hard memlock 64\n")]
    assert verdict(own, ALICE)[0] == "ok"


def test_uid_and_gid_ranges_apply_to_any_login() -> None:
    """MIN:MAX, MIN: and :UID rank as the user's own line; @MIN:MAX and @MIN: look at the primary group only
    (limits.conf(5)): alice's is 1500, 1600 is only a supplementary group of hers."""
    for domain in ("1500:", ":1500", "1000:2000", "@1500:", "@1000:1500"):
        site = f"{domain} hard memlock 64\n"
        assert verdict([(ROLE, ROLE_TEXT), (SITE, site)], ALICE) == (
            "problem", f"alice's hard memlock is 64 ({SITE}:1: {domain} hard memlock)")  # fmt: skip
    for domain in ("1501:", ":0", "1000:1499", "@1600:", "@1501:2000"):
        assert verdict([(ROLE, ROLE_TEXT), (SITE, f"{domain} hard memlock 64\n")], ALICE)[0] == "ok"
    # a uid range is a user line: it outranks a group line read after it
    assert verdict([(SITE, "1500: - memlock unlimited\n@rdma hard memlock 64\n")], ALICE)[0] == "ok"


def test_root_on_debian_gets_no_star_or_group_line_but_ranges_and_its_own() -> None:
    """Debian's limits.conf: "group and wildcard limits are not applied to root" (its pam patch, keyed on uid 0:
    observed for toor, uid 0, too); uid and gid ranges still are. Upstream pam_limits (RHEL) applies all of them."""
    star = [(SITE, "* - memlock unlimited\n")]
    assert verdict(star, ROOT) == ("problem", "no line sets root's soft memlock; no line sets root's hard memlock")
    assert verdict(star, TOOR, debian=True)[0] == "problem"
    assert verdict(star, ROOT, debian=False)[0] == "ok"
    group = [(SITE, "@root - memlock unlimited\n")]
    assert verdict(group, TOOR, debian=True)[0] == "problem" and verdict(group, TOOR, debian=False)[0] == "ok"
    for domain in ("0:", ":0"):  # a user line, after root's own: it wins
        ranged = [(ROLE, ROLE_TEXT), (SITE, f"{domain} hard memlock 64\n")]
        assert verdict(ranged, ROOT) == (
            "problem", f"root's hard memlock is 64 ({SITE}:1: {domain} hard memlock)")  # fmt: skip
    for domain in ("@0:", "@:0"):  # a group line: the only one that applies to root on Debian here
        assert verdict([(SITE, f"{domain} - memlock unlimited\n")], TOOR)[0] == "ok"


def test_a_no_limits_line_stops_pam_limits_for_the_logins_it_applies_to() -> None:
    """DOMAIN - (two fields, the type starting with -): for the name, a group of the login or a uid range, pam_limits
    sets no limit at all; "* -" does nothing; a % domain there is read as a uid range (pam_limits.c)."""
    for domain in ("alice", "@rdma", "1500:", "@1500:", "%5:"):
        stopped = [(ROLE, ROLE_TEXT), (SITE, f"{domain} -x\n")]
        assert verdict(stopped, ALICE) == (
            "problem", f"'{domain} -' ({SITE}:1): pam_limits sets no limit at all for alice")  # fmt: skip
    for domain in ("*", "@other", "@1600:", "bob"):
        assert verdict([(ROLE, ROLE_TEXT), (SITE, f"{domain} -\n")], ALICE)[0] == "ok"
    # no Debian exception for root here (observed: "@root -" stops pam_limits for root)
    assert verdict([(ROLE, ROLE_TEXT), (SITE, "@root -\n")], Login("root", 0, 0, frozenset({"root"})))[0] == "problem"


def test_a_dash_line_stopped_at_its_soft_limit_sets_no_hard_limit() -> None:
    """process_limit returns when a better rank set the soft limit, before the hard one (observed: 250 and 300)."""
    lines = read_limits([(SITE, "* hard memlock 300\nalice soft memlock 250\n@rdma - memlock 200\n")])
    stop, found = login_limit(lines, ALICE, "memlock", debian_root_rule=True)
    assert stop is None
    assert (found["soft"].value, found["hard"].value) == ("250", "300")  # type: ignore[union-attr]


#: What Debian 12's pam_limits.so set (SOURCES.md, "Observed"): (login, file, soft, hard) as the lines set them
#: (pam_limits then lowers a soft limit above the hard one to it), None where no line set one, "stop" where a
#: DOMAIN - line made it set none.
OBSERVED = [
    (TOOR, "* hard memlock 64\n", None, None),
    (TOOR, "@root hard memlock 64\n", None, None),
    (TOOR, "toor hard memlock 64\n", None, "64"),
    (TOOR, "0: hard memlock 64\n", None, "64"),
    (TOOR, ":0 hard memlock 64\n", None, "64"),
    (TOOR, "@0: hard memlock 64\n", None, "64"),
    (TOOR, "@:0 hard memlock 64\n", None, "64"),
    (TOOR, "root hard memlock 64\n", None, None),
    (ALICE, "@other hard memlock 64\n", None, None),
    (ALICE, "@nosuch hard memlock 64\n", None, None),
    (ALICE, "@1600: hard memlock 64\n", None, None),
    (ALICE, "1000:1499 hard memlock 64\n", None, None),
    (ALICE, "@1500:1599 hard memlock 64\n", None, "64"),
    (ALICE, "* - memlock 100\nALICE hard memlock 64\n", "100", "100"),  # the domain is not lower-cased
    (ALICE, "* - memlock 100\nalice HARD MEMLOCK 64\n", "100", "64"),
    (ALICE, "* - memlock 100\nalice hard memlock abc\n", "100", "100"),
    (ALICE, "* - memlock 100\nalice hard memlock 64 now\n", "100", "64"),
    (ALICE, "* - memlock 100\n1500:x hard memlock 64\n", "100", "100"),
    (ALICE, "* - memlock 100\n@rdma - memlock 200\n* - memlock 300\n", "200", "200"),
    (ALICE, "* - memlock 100\n@rdma - memlock 200\n@rdmaalias hard memlock 300\n", "200", "300"),
    (ALICE, "* - memlock 100\n%rdma - memlock 200\n", "100", "100"),
    (ALICE, "* - memlock 100\n% - memlock 200\n", "100", "100"),
    (ALICE, "* - memlock 100\nalice soft memlock 50\n", "50", "100"),
    (ALICE, "* - memlock 100\n  alice\thard\tmemlock\t70 \t# c\n", "100", "70"),
    (ALICE, "* - memlock 100\n@rdma -\n", "stop", "stop"),
    (ALICE, "* - memlock 100\n1500: -\n", "stop", "stop"),
    (ALICE, "* - memlock 100\n@1600: -\n", "100", "100"),
    (ALICE, "* - memlock 100\n@1500: -\n", "stop", "stop"),
    (ALICE, "* - memlock 100\n* -\n", "100", "100"),
    (ALICE, "* - memlock 100\nalice -x\n", "stop", "stop"),
    (ALICE, "* - memlock 100\n%5: -\n", "stop", "stop"),
    (ALICE, "@rdma - memlock 100\n* -\n", "100", "100"),
    (ALICE, "* - memlock 100\nalice hard memlock +64\n", "100", "64"),
]


@pytest.mark.parametrize(("login", "text", "soft", "hard"), OBSERVED)
def test_what_debian_12s_pam_limits_did(login: Login | str, text: str, soft: str | None, hard: str | None) -> None:
    assert isinstance(login, Login)
    stop, found = login_limit(read_limits([(SITE, text)]), login, "memlock", debian_root_rule=True)
    if soft == "stop":
        assert stop is not None
        return
    assert stop is None
    assert (found["soft"] and found["soft"].value, found["hard"] and found["hard"].value) == (soft, hard)


def test_vendor_files_are_read_in_pams_order_and_judged_with_and_without() -> None:
    """pam_limits(8) with a vendor directory: %vendordir%/security/limits.conf only when /etc/security/limits.conf
    is missing; a limits.d name in /etc hides the vendor file of that name; all limits.d files sorted by name."""
    vendor_d = "/usr/etc/security/limits.d"
    vendor = [(VENDOR_LIMITS_CONF, "* hard memlock 1\n"), (f"{vendor_d}/50-v.conf", "v"),
              (f"{vendor_d}/90-rdmaforge-memlock.conf", "hidden"), (f"{vendor_d}/95-v.conf", "w")]  # fmt: skip
    etc = [(LIMITS_CONF, DEBIAN), (ROLE, ROLE_TEXT)]
    assert [path for path, _ in with_vendor_files(etc, vendor)] == [
        LIMITS_CONF, f"{vendor_d}/50-v.conf", ROLE, f"{vendor_d}/95-v.conf"]  # fmt: skip
    assert [path for path, _ in with_vendor_files(etc[1:], vendor)][0] == VENDOR_LIMITS_CONF
    # a vendor drop-in after the role's lowers alice's limit only where pam_limits reads it: not known, not judged
    lowering = [(f"{vendor_d}/95-v.conf", "* hard memlock 64\n")]
    assert verdict(etc, ALICE, vendor_files=lowering) == (
        "not_checked", f"pam_limits reads {vendor_d}/95-v.conf only where Linux-PAM was built with a vendor "
        f"directory (not known here); without them: unlimited; with them: alice's hard memlock is 64 "
        f"({vendor_d}/95-v.conf:1: * hard memlock)")  # fmt: skip
    # the same file read before the role's drop-in (and one it hides) changes nothing: judged either way
    harmless = [(f"{vendor_d}/50-v.conf", "* hard memlock 64\n"), (f"{vendor_d}/90-rdmaforge-memlock.conf", "")]
    assert verdict(etc, ALICE, vendor_files=harmless)[0] == "ok"
    assert verdict([(LIMITS_CONF, DEBIAN)], ALICE, vendor_files=lowering)[0] == "problem"


# Which pam_limits runs an SSH login gets: sshd's PAM session stack, read as libpam reads it (libpam/pam_handlers.c,
# pam_dispatch.c, pam_misc.c, libpam_internal/pam_line.c @ ddab692c; Debian's 031_pam_include). The stacks are
# Debian 12's real files and RHEL 9's (tests/data/pam.d/SOURCES.md); variants of them say what was changed.

PAM_D = Path(__file__).resolve().parents[1] / "data" / "pam.d"
SSHD = "/etc/pam.d/sshd"
PAM_LIMITS_LINE = "session    required     pam_limits.so\n"


def pam_files(system: str, **changed: str) -> dict[str, str]:
    """/etc/pam.d/NAME: text of tests/data/pam.d/SYSTEM, with ``changed`` (name with _ for -) replaced or, for an
    empty text, left out."""
    files = {f"/etc/pam.d/{path.name}": path.read_text() for path in (PAM_D / system).iterdir()}
    files.update({f"/etc/pam.d/{name.replace('_', '-')}": text for name, text in changed.items()})
    return {path: text for path, text in files.items() if text}


def runs_of(files: dict[str, str]) -> list[LimitsRun] | LimitVerdict:
    return ssh_limits_runs(files.get)


def test_debians_and_rhels_ssh_logins_run_pam_limits_once_without_conf() -> None:
    """Debian 12: sshd's own line 40, after common-session (whose [default=1] pam_permit always jumps over
    pam_deny); RHEL 9: password-auth's line 28 through sshd's `session include password-auth`."""
    assert runs_of(pam_files("debian12")) == [LimitsRun("/etc/pam.d/sshd:40", None)]
    assert runs_of(pam_files("rhel9")) == [LimitsRun("/etc/pam.d/password-auth:28", None)]
    stack = session_stack(pam_files("debian12").get)
    assert isinstance(stack, list)
    assert [(e.where, e.module) for e in stack][3:5] == [
        ("/etc/pam.d/common-session:15", "pam_permit.so"),
        ("/etc/pam.d/common-session:17", "pam_deny.so"),
    ]
    assert stack[3].actions == {1} and stack[4].actions == {"ok", "ignore", "die"}  # [default=1]; requisite


def test_conf_names_the_one_file_a_run_reads() -> None:
    """pam_limits.so conf=FILE: FILE alone (the last conf= of the line), no limits.d and no vendor files
    (pam_limits(8): "If a config file is explicitly specified with a module option then the files in the above
    directory are not parsed"). Arguments in [...] are one, with \\] a ]."""
    sshd = pam_files("debian12")[SSHD]
    for line, conf in [("pam_limits.so debug conf=/a conf=/b set_all", "/b"), ("pam_limits.so [conf=/x y]", "/x y"),
                       ("/usr/lib/x86_64-linux-gnu/security/pam_limits.so conf=/c", "/c"),
                       ("pam_limits.so [conf=/d\\]]", "/d]"), ("pam_limits.so CONF=/e", None)]:  # fmt: skip
        changed = sshd.replace(PAM_LIMITS_LINE, f"session required {line}\n")
        assert runs_of(pam_files("debian12", sshd=changed)) == [LimitsRun("/etc/pam.d/sshd:40", conf)], line
    ssh_conf = "/etc/security/limits-ssh.conf"
    runs = [LimitsRun("/etc/pam.d/sshd:40", ssh_conf)]
    vendor = [("/usr/etc/security/limits.d/99-v.conf", "* hard memlock 64\n")]
    # the role's drop-in sets unlimited, the conf= file 64: 64, and the vendor file is not read
    assert verdict([(ROLE, ROLE_TEXT)], ROOT, runs=runs, conf_files={ssh_conf: "root hard memlock 64\n"},
                   vendor_files=vendor) == (
        "problem", "no line sets root's soft memlock; root's hard memlock is 64 (/etc/security/limits-ssh.conf:1: "
        "root hard memlock) (pam_limits.so at /etc/pam.d/sshd:40 reads only /etc/security/limits-ssh.conf)",
    )  # fmt: skip
    assert verdict([], ALICE, runs=runs, conf_files={ssh_conf: ROLE_TEXT})[0] == "ok"
    # a conf= file that does not exist: pam_limits fails that run before it sets anything
    assert verdict([(ROLE, ROLE_TEXT)], ROOT, runs=runs) == (
        "problem",
        "no line sets root's soft memlock; no line sets root's hard memlock (pam_limits.so at "
        "/etc/pam.d/sshd:40 reads only /etc/security/limits-ssh.conf, which does not exist: it sets no limit)",
    )


def test_a_later_run_replaces_only_what_it_sets() -> None:
    """Each run starts from the limits the last one set and sets only what its lines give (setup_limits skips an
    item no line set); a 'DOMAIN -' line stops only its own run."""
    first, second = LimitsRun("/etc/pam.d/common-session:30", None), LimitsRun(SSHD + ":40", "/etc/x.conf")
    lowering = {"/etc/x.conf": "root hard memlock 64\n"}
    assert verdict([(ROLE, ROLE_TEXT)], ROOT, runs=[first, second], conf_files=lowering)[1].startswith(
        "root's hard memlock is 64 (/etc/x.conf:1: root hard memlock) (pam_limits.so at /etc/pam.d/common-session:30;"
    )
    assert verdict([(ROLE, ROLE_TEXT)], ROOT, runs=[second, first], conf_files=lowering)[0] == "ok"
    assert verdict([(ROLE, ROLE_TEXT)], ROOT, runs=[first, second], conf_files={"/etc/x.conf": "root -\n"})[0] == "ok"
    assert verdict([(ROLE, "root -\n")], ROOT, runs=[first, second], conf_files={"/etc/x.conf": "# nothing\n"}) == (
        "problem", "'root -' (/etc/security/limits.d/90-rdmaforge-memlock.conf:1): pam_limits sets no limit at all "
        "for root (pam_limits.so at /etc/pam.d/common-session:30; pam_limits.so at /etc/pam.d/sshd:40 reads only "
        "/etc/x.conf)")  # fmt: skip
    # two runs in the stack: both found, in order
    common = pam_files("debian12")["/etc/pam.d/common-session"] + "session required pam_limits.so conf=/etc/y\n"
    assert runs_of(pam_files("debian12", common_session=common)) == [
        LimitsRun("/etc/pam.d/common-session:26", "/etc/y"),
        LimitsRun(SSHD + ":40", None),
    ]


def test_no_pam_limits_in_the_stack_means_the_files_do_not_apply() -> None:
    """Commented out, of another type, a misspelt type (libpam fails that line; its module is not run), or never
    reached (jumped over every time): no run, a problem naming the files read."""
    sshd = pam_files("debian12")[SSHD]
    for changed in ("#session    required     pam_limits.so\n", "account    required     pam_limits.so\n",
                    "session [default=1] pam_permit.so\n" + PAM_LIMITS_LINE):  # fmt: skip
        found = runs_of(pam_files("debian12", sshd=sshd.replace(PAM_LIMITS_LINE, changed)))
        assert found == LimitVerdict("problem", "no pam_limits.so runs in the PAM session stack of sshd (/etc/pam.d/"
                                     "sshd, /etc/pam.d/common-session): the limits files do not apply to an SSH login, "
                                     "which keeps sshd's own limits"), changed  # fmt: skip
    misspelt = pam_files("debian12")["/etc/pam.d/common-session"] + "sesion required pam_limits.so\n"
    without = sshd.replace(PAM_LIMITS_LINE, "")
    assert runs_of(pam_files("debian12", sshd=without, common_session=misspelt)).status == "problem"  # type: ignore[union-attr]
    rhel = pam_files("rhel9")
    rhel["/etc/pam.d/password-auth"] = rhel["/etc/pam.d/password-auth"].replace("session     required       ", "#")
    assert runs_of(rhel).status == "problem"  # type: ignore[union-attr]


def test_a_run_some_answers_skip_is_not_judged() -> None:
    """A jump over pam_limits on some answers, or a sufficient (done on success) line before it: whether it runs
    depends on what the module says at login time."""
    sshd = pam_files("debian12")[SSHD]
    for before in ("session [success=1 default=ignore] pam_succeed_if.so user = alice\n",
                   "session sufficient pam_succeed_if.so user = alice\n",
                   "session [success=done default=ignore] pam_succeed_if.so user = alice\n"):  # fmt: skip
        found = runs_of(pam_files("debian12", sshd=sshd.replace(PAM_LIMITS_LINE, before + PAM_LIMITS_LINE)))
        assert isinstance(found, LimitVerdict) and found.status == "not_checked", before
        assert found.reason.startswith("pam_limits.so at /etc/pam.d/sshd:41 runs or not"), found.reason
    # a jump that lands on it, a requisite before it (its failure fails the login), ok/bad/ignore lines: it runs
    for before in ("session [success=1 default=ignore] pam_succeed_if.so user = alice\nsession optional pam_mail.so\n",
                   "session requisite pam_nologin.so\n", "session [success=ok default=bad] pam_x.so\n"):  # fmt: skip
        found = runs_of(pam_files("debian12", sshd=sshd.replace(PAM_LIMITS_LINE, before + PAM_LIMITS_LINE)))
        assert isinstance(found, list) and len(found) == 1, (before, found)


def test_substacks_keep_their_jumps_and_done_inside() -> None:
    """A done or a jump in a substack ends at the substack's end (pam.d(5)); an include puts the lines in place, so
    there a done ends the whole stack and a jump goes on past the included lines (here over pam_limits every time:
    never run). A substack counts as one line for a jump over it."""
    ended = "session sufficient pam_permit.so\nsession [default=5] pam_permit.so\n"
    sub = {"sub": ended, "sshd": "session substack sub\nsession required pam_limits.so\n"}
    assert runs_of({f"/etc/pam.d/{k}": v for k, v in sub.items()}) == [LimitsRun("/etc/pam.d/sshd:2", None)]
    inc = {**sub, "sshd": "session include sub\nsession required pam_limits.so\n"}
    assert runs_of({f"/etc/pam.d/{k}": v for k, v in inc.items()}).status == "problem"  # type: ignore[union-attr]
    over = {
        "sub": "session optional pam_a.so\nsession optional pam_b.so\n",
        "sshd": "session [default=1] pam_permit.so\nsession substack sub\nsession required pam_limits.so\n",
    }
    assert runs_of({f"/etc/pam.d/{k}": v for k, v in over.items()}) == [LimitsRun("/etc/pam.d/sshd:3", None)]


def test_pam_d_lines_are_assembled_and_split_as_libpam_does() -> None:
    """A # anywhere ends the line; a \\ at the end (spaces after it too) joins the next; types and control words
    ignore case, -session is session; a line's fields are split on spaces and tabs only (a CR stays in a field)."""
    files = {SSHD: "# comment\nSESSION \\  \n  Required pam_limits.so \\\n conf=/a # conf=/b\n"}
    assert runs_of(files) == [LimitsRun(SSHD + ":2", "/a")]
    assert runs_of({SSHD: "-session\t[success=ok default=ignore]\tpam_limits.so\n"}) == [LimitsRun(SSHD + ":1", None)]
    crlf = runs_of({SSHD: "session required pam_limits.so\r\n"})  # the module is named "pam_limits.so\r"
    assert isinstance(crlf, LimitVerdict) and crlf.status == "problem"
    bad = session_stack({SSHD: "session [success=ok defualt=ignore] pam_a.so\nsession [success=0] pam_b.so\n"}.get)
    assert isinstance(bad, list) and [e.actions for e in bad] == [{"bad"}, {"bad"}]  # libpam: "treat as bad"


def test_a_stack_that_cannot_be_read_is_not_judged() -> None:
    """A missing service or included file (libpam fails the include, or falls back to a vendor directory or to
    other), or includes that loop: not judged. A service with no session line uses other's (libpam)."""
    missing = runs_of(pam_files("debian12", common_session=""))
    assert missing == LimitVerdict("not_checked", "the PAM session stack of sshd cannot be read: "
                                   "/etc/pam.d/common-session does not exist")  # fmt: skip
    assert runs_of({}).reason.endswith("/etc/pam.d/sshd does not exist")  # type: ignore[union-attr]
    loop = runs_of({SSHD: "session include sshd\n"})
    assert isinstance(loop, LimitVerdict) and "nest 16 deep" in loop.reason
    other = {SSHD: "auth required pam_unix.so\n", "/etc/pam.d/other": "session required pam_limits.so conf=/o\n"}
    assert runs_of(other) == [LimitsRun("/etc/pam.d/other:1", "/o")]
    other["/etc/pam.d/other"] = "auth required pam_deny.so\n"  # no session line anywhere: nothing runs
    assert runs_of(other).status == "problem"  # type: ignore[union-attr]
