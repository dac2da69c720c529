from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rdmaforge.parsers import nccl_env
from rdmaforge.parsers.gpg import fingerprints
from rdmaforge.role_defaults import defaults


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("mlx5", (False, False, [("mlx5", None)])),
        ("=mlx5_0:1,mlx5_1:1", (False, True, [("mlx5_0", 1), ("mlx5_1", 1)])),
        ("^=mlx5_4", (True, True, [("mlx5_4", None)])),
        ("^mlx5_3,mlx5_4:2", (True, False, [("mlx5_3", None), ("mlx5_4", 2)])),
        ("", (False, False, [])),
        ("erdma_0,erdma_1", (False, False, [("erdma_0", None), ("erdma_1", None)])),
    ],
)
def test_parse_ib_hca_valid(value: str, expected: tuple[bool, bool, list[tuple[str, int | None]]]) -> None:
    assert nccl_env.parse_ib_hca(value) == expected


@pytest.mark.parametrize("value", ["mlx5_0:x", "^", "=", "^=", "mlx5_0:0", "mlx5 0", "mlx5_0,,mlx5_1", "=^mlx5"])
def test_parse_ib_hca_invalid(value: str) -> None:
    with pytest.raises(ValueError, match="NCCL_IB_HCA"):
        nccl_env.parse_ib_hca(value)


def test_problems_names_the_setting_and_what_is_allowed() -> None:
    errors = nccl_env.problems({"NCCL_IB_HCA": "mlx5_0:x", "bad-name": "1", "NCCL_DEBUG": "INFO\nX"})
    assert any("'mlx5_0:x' is not 'device' or 'device:port'" in e and "allowed" in e for e in errors)
    assert any("'bad-name' is not a valid environment variable name" in e for e in errors)
    assert any("NCCL_DEBUG: values cannot contain a newline" in e for e in errors)
    assert nccl_env.problems({"NCCL_IB_HCA": "", "NCCL_IB_DISABLE": "1"}) == []


def test_unknown_names_flags_typos_only() -> None:
    env = {"NCCL_IB_HCA": "mlx5", "NCCL_IB_HCAS": "mlx5", "NCCL_SOCKET_IFNAMES": "eth0", "AIACC_X": "1"}
    assert nccl_env.unknown_names(env) == ["NCCL_IB_HCAS", "NCCL_SOCKET_IFNAMES"]


def test_known_names_come_from_nccl_source() -> None:
    names = nccl_env.known_nccl_names()
    for name in (
        "NCCL_IB_HCA",
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_DISABLE",
        "NCCL_DEBUG",
        "NCCL_IB_GID_INDEX",
        "NCCL_NET_PLUGIN",
        "NCCL_ALGO",
        "NCCL_PROTO",
    ):
        assert name in names
    assert len(names) > 150


def test_merge_overrides_win_and_null_removes() -> None:
    profile = {"NCCL_IB_HCA": "mlx5", "NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": 1}
    merged = nccl_env.merge(profile, {"NCCL_DEBUG": None, "NCCL_IB_HCA": "=mlx5_0", "AIACC_CPU_BINDING_ENABLE": True})
    assert merged == {"AIACC_CPU_BINDING_ENABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_IB_HCA": "=mlx5_0"}


def test_split_and_render_roundtrip() -> None:
    env = {"NCCL_IB_HCA": "", "NCCL_SOCKET_IFNAME": "eth0", "LIGHT_2D_ALLREDUCE": "1"}
    nccl, other = nccl_env.split(env)
    assert other == {"LIGHT_2D_ALLREDUCE": "1"}
    text = nccl_env.render_conf(nccl)
    assert text == "NCCL_IB_HCA=\nNCCL_SOCKET_IFNAME=eth0\n"
    assert nccl_env.parse_conf("# comment\n" + text + "junk line\n") == nccl


def test_plugin_api_versions_from_nm() -> None:
    nm = (
        "00000000004b2c60 D ncclNetPlugin_v2\n"
        "00000000004b2a20 D ncclNetPlugin_v6\n"
        "0000000000052f50 T _Z19ncclIbGetPropertiesiP22ncclNetProperties_v4_t\n"
        "00000000004b2b40 D ncclNetPlugin_v4\n"
        "0000000000001000 D ncclCollNetPlugin_v6\n"
    )
    assert nccl_env.plugin_api_versions(nm) == [2, 4, 6]
    assert nccl_env.plugin_api_versions("") == []


def test_gpg_fingerprints_primary_keys_only() -> None:
    listing = (
        "pub:-:255:22:AAFAC04D97651B04:1:::-:::scESC::::::23::0:\n"
        "fpr:::::::::B50E88FC820838FBD040B79CAAFAC04D97651B04:\n"
        "uid:-::::1::X::rdmaforge lab mirror <lab@x>::::::::::0:\n"
        "sub:-:255:18:1111111111111111:1::::::e::::::23:\n"
        "fpr:::::::::0000000000000000000000001111111111111111:\n"
    )
    assert fingerprints(listing) == ["B50E88FC820838FBD040B79CAAFAC04D97651B04"]


# seed 001 (export NCCL_SOCKET_IFNAME=eth), seed 002 (=eth0), and NCCL's documented forms
@pytest.mark.parametrize("value", ["eth", "eth0", "=eth0,eth1", "^docker,lo", "^=docker0,lo", "bond0.100", "",
                                   ",".join(f"eth{i}" for i in range(16))])
def test_socket_ifname_of_nccls_grammar_passes(value: str) -> None:
    assert nccl_env.problems({"NCCL_SOCKET_IFNAME": value}) == []


ALLOWED = ("allowed: optional '^' to exclude, optional '=' for exact names, then a comma-separated list of interface "
           "names or prefixes, 1-15 characters without blanks, '/' or ':', e.g. 'eth0', '=eth0,eth1', '^docker,lo'")


@pytest.mark.parametrize(
    ("value", "entry"),
    [("eth 0", "eth 0"), ("eth0,,eth1", ""), ("eth0, eth1", " eth1"), ("enp1s0f0np0-extra", "enp1s0f0np0-extra")],
)
def test_socket_ifname_nccl_cannot_match_is_a_problem(value: str, entry: str) -> None:
    assert nccl_env.problems({"NCCL_SOCKET_IFNAME": value}) == [
        f"NCCL_SOCKET_IFNAME={value!r}: {entry!r} is not an interface name ({ALLOWED})"
    ]


# NCCL's reading (src/misc/socket.cc ncclFindInterfaces, src/os/linux.cc ncclOsFindInterfaces, src/misc/utils.cc
# parseStringList, 2.29.7): a value of one character is ignored; '^' and '=' count at the start only; ':' starts a
# port; an exclusion list takes the first interface it leaves, and lo is the kernel's first.
@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("e", "NCCL ignores a value of one character"),
        ("^", "NCCL ignores a value of one character"),
        ("==eth0", "'=eth0' begins with '=', which NCCL reads as part of the name"),
        ("=^eth0", "'^eth0' begins with '^'"),
        ("eth0,^docker", "'^docker' begins with '^'"),
        ("eth0:1", "NCCL reads 'eth0:1' as 'eth0' followed by a port number"),
        ("^docker", "NCCL_SOCKET_IFNAME='^docker' excludes names but not lo"),
        ("^=docker0,l", "excludes names but not lo"),
        ("lo", "lets NCCL take lo"),
        ("eth0,lo", "lets NCCL take lo: NCCL takes the first interface the value accepts in the kernel's order"),
        ("l,eth0", "lets NCCL take lo"),
        (":1", "NCCL reads ':1' as a port without a name, and drops it"),
        (",".join(f"eth{i}" for i in range(17)), "lists 17 names, and NCCL reads the first 16"),
    ],
)
def test_socket_ifname_that_nccl_reads_otherwise_is_a_problem(value: str, says: str) -> None:
    errors = nccl_env.problems({"NCCL_SOCKET_IFNAME": value})
    assert len(errors) == 1 and says in errors[0] and "allowed:" in errors[0], errors


@pytest.mark.parametrize(
    ("value", "interfaces", "chosen"),
    [
        (None, ("lo", "eth0"), "eth0"),  # NCCL's own choice: not docker, lo or virbr
        ("e", ("lo", "docker0", "ib0", "eth0"), "ib0"),  # ignored: its own choice, ib first
        ("", ("lo", "docker0"), "docker0"),  # then docker, then lo
        ("^docker,lo", ("lo", "docker0", "eth0"), "eth0"),
        ("^docker", ("lo", "docker0", "eth0"), "lo"),
        ("^=eth", ("lo", "eth0"), "lo"),
        ("=eth", ("lo", "eth0"), None),
        ("eth0:1", ("lo", "eth01"), "eth01"),  # a prefix, the port dropped
        ("bond0", ("lo", "eth0"), None),
        ("^", ("lo", "eth0"), "eth0"),
        ("^" + ",".join(f"x{i}" for i in range(16)) + ",lo", ("lo", "eth0"), "lo"),  # the 17th name is dropped
    ],
)
def test_the_socket_interface_nccl_chooses(value: str | None, interfaces: tuple[str, ...], chosen: str | None) -> None:
    assert nccl_env.first_socket_interface(value, interfaces) == chosen


@pytest.mark.parametrize("value", ["^docker", "^=eth9", "eth,lo"])
def test_lo_is_never_taken_where_nccl_keeps_to_ipv6(value: str) -> None:
    """NCCL_SOCKET_FAMILY=AF_INET6 keeps NCCL to IPv6 addresses, among which it skips loopback ones (linux.cc:
    IN6_IS_ADDR_LOOPBACK): lo's ::1 is never taken, so a list that accepts lo is no problem there, and the next
    interface it accepts is chosen. AF_INET (or unset) keeps the refusal."""
    assert nccl_env.problems({"NCCL_SOCKET_IFNAME": value, "NCCL_SOCKET_FAMILY": "AF_INET6"}) == []
    assert "lo" in nccl_env.problems({"NCCL_SOCKET_IFNAME": value, "NCCL_SOCKET_FAMILY": "AF_INET"})[0]
    assert nccl_env.first_socket_interface(value, ("lo", "eth0"), "AF_INET6") == "eth0"
    assert nccl_env.first_socket_interface(value, ("lo", "eth0")) == "lo"


def test_lo_alone_finds_no_interface_where_nccl_keeps_to_ipv6() -> None:
    assert nccl_env.first_socket_interface("lo", ("lo", "eth0"), "AF_INET6") is None
    errors = nccl_env.problems({"NCCL_SOCKET_IFNAME": "lo", "NCCL_SOCKET_FAMILY": "AF_INET6"})
    assert len(errors) == 1 and "finds no socket interface" in errors[0] and "allowed:" in errors[0], errors


# --- taco's LIGHT_INTRA_SIZE on the node: role nccl_env on this machine (ansible_connection=local) ---------------


def taco_play(tmp_path: Path, **variables: Any) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Role nccl_env with seed 004's accelerator on a VPC (tcp) profile; the login-shell script it writes."""
    from tests.unit.test_nccl_env_topology import nccl_env_play

    run, _ = nccl_env_play(tmp_path, nccl_env_profile="tcp", nccl_env_accelerator="taco", **variables)
    return run, tmp_path / "rdmaforge-nccl.sh"


@pytest.mark.parametrize("gpus", [8, 4])
def test_taco_light_intra_size_on_the_node_is_its_gpu_count(tmp_path: Path, gpus: int) -> None:
    # Seed 004: LIGHT_INTRA_SIZE=8 on its 8-GPU nodes, 8 ranks each (-H taco-bench-worker-0:8,...); 4 GPUs, 4 ranks.
    run, script = taco_play(tmp_path, rdmaforge_node={"gpu_count": gpus})
    assert run.returncode == 0, run.stdout[-3000:]
    assert f"export LIGHT_INTRA_SIZE={gpus}\n" in script.read_text()
    assert "export LIGHT_TOPK_THRESHOLD=2097152\n" in script.read_text()


def test_taco_light_intra_size_override_wins_on_the_node(tmp_path: Path) -> None:
    run, script = taco_play(tmp_path, rdmaforge_node={"gpu_count": 4}, nccl_env_overrides={"LIGHT_INTRA_SIZE": 2})
    assert run.returncode == 0, run.stdout[-3000:]
    assert "export LIGHT_INTRA_SIZE=2\n" in script.read_text()


def test_taco_on_a_node_without_gpus_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    run, script = taco_play(tmp_path, rdmaforge_node={"gpu_count": 0})
    assert run.returncode != 0
    refused = "LIGHT_INTRA_SIZE=node_gpu_count is the node's GPU count, which is unknown or 0"
    assert refused in run.stdout, run.stdout[-3000:]
    assert not script.exists() and not (tmp_path / "nccl.conf").exists()


def test_taco_run_on_its_own_probes_the_gpu_count(tmp_path: Path) -> None:
    # No preflight in the play (no rdmaforge_node): the role runs preflight's read-only probes for the count.
    run, script = taco_play(tmp_path)
    found = re.search(r"localhost: .*?, (\d+) GPUs \(", run.stdout)
    assert found, run.stdout[-3000:]
    gpus = int(found.group(1))
    if gpus:
        assert run.returncode == 0, run.stdout[-3000:]
        assert f"export LIGHT_INTRA_SIZE={gpus}\n" in script.read_text()
    else:
        assert run.returncode != 0 and not script.exists()
        assert "LIGHT_INTRA_SIZE=node_gpu_count is the node's GPU count" in run.stdout, run.stdout[-3000:]


def test_the_settings_in_force_refuse_a_list_or_mapping_value() -> None:
    """What role nccl_env checks before writing /etc/nccl.conf (the merged profile, accelerator and overrides): a
    list there was written as NCCL_ALGO=['Ring', 'Tree']. One line per value, not a second one from the NCCL_IB_HCA
    parser reading the repr."""
    env = {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_IB_HCA": {"mlx5_0": 1}, "NCCL_PROTO": "Simple", "NCCL_DEBUG": None}
    assert nccl_env.problems(env) == [
        'NCCL_ALGO=["Ring", "Tree"] is a list, and an environment variable holds text; allowed: a string, number or '
        "boolean (a list of NCCL's as one comma-separated string, e.g. Ring,Tree; null removes the setting)",
        'NCCL_IB_HCA={"mlx5_0": 1} is a mapping, and an environment variable holds text; allowed: a string, number or '
        "boolean (a list of NCCL's as one comma-separated string, e.g. Ring,Tree; null removes the setting)",
    ]
    assert nccl_env.problems({"NCCL_ALGO": "Ring,Tree", "NCCL_IB_GID_INDEX": 3, "NCCL_IB_DISABLE": False}) == []


@pytest.mark.parametrize(
    ("setting", "value"),
    [("NCCL_IB_HCA", " erdma"), ("NCCL_IB_HCA", "mlx5 "), ("NCCL_IB_HCA", " ^mlx5_4"), ("NCCL_IB_HCA", " "),
     ("NCCL_SOCKET_IFNAME", "eth0 "), ("NCCL_SOCKET_IFNAME", " =eth0"), ("NCCL_SOCKET_IFNAME", "eth0,eth1 ")],
)
def test_a_blank_around_a_device_or_interface_list_is_refused(setting: str, value: str) -> None:
    """NCCL 2.16.5's parseStringList (src/misc/utils.cc) copies every character up to ',' or ':' into the name,
    and net_ib.cc / socket.cc look for '^' and '=' at the first character only: ' erdma' names no device, and the
    check stripped the value first, so it passed."""
    found = nccl_env.problems({setting: value})
    assert found == [f"{setting}={value!r} has a blank before or after it, which NCCL keeps as part of a name "
                     "(matching no device or interface) or which hides a leading '^' or '='; allowed: the value "
                     "without blanks around it"]  # fmt: skip
    assert nccl_env.problems({setting: value.strip()}) == []


@pytest.mark.parametrize("char", ["\r", "\t", "\x00", "\x1b", "\x85", "\u2028"])
def test_a_control_character_in_a_setting_is_refused(char: str) -> None:
    """NCCL's nccl.conf reader drops only each line's final newline (src/misc/param.cc, setEnvFile): a carriage
    return stayed in NCCL_DEBUG's value (and preflight let it through, where render refused it)."""
    assert nccl_env.problems({"NCCL_DEBUG": f"INFO{char}"}) == [
        f"NCCL_DEBUG: values cannot contain the control character {char!r}; allowed: printable text, without tab, "
        "newline, carriage return or other control characters"
    ]


def test_a_plugin_built_with_a_version_script_exports_its_api(tmp_path: Path) -> None:
    """nm -D prints the symbols of a library linked with a version script as ncclNetPlugin_v8@@VERSION: such a
    plugin was read as exporting no net plugin API (and refused), though NCCL's dlsym finds the default version."""
    if shutil.which("cc") is None or shutil.which("nm") is None:
        pytest.skip("a C compiler and nm are needed to build the plugin stand-in")
    (tmp_path / "p.c").write_text("int ncclNetPlugin_v6 = 1;\nint ncclNetPlugin_v8 = 2;\nint ncclNetPlugin_v9 = 3;\n")
    (tmp_path / "v.map").write_text("NCCL_NET_1.0 { global: ncclNetPlugin_v6; ncclNetPlugin_v8; local: *; };\n"
                                    "NCCL_NET_2.0 { global: ncclNetPlugin_v9; } NCCL_NET_1.0;\n")  # fmt: skip
    library = tmp_path / "libnccl-net.so"
    subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,--version-script={tmp_path / 'v.map'}", "-o", str(library),
                    str(tmp_path / "p.c")], check=True)  # fmt: skip
    listing = subprocess.run(["nm", "-D", "--defined-only", str(library)], check=True, capture_output=True,
                             text=True).stdout  # fmt: skip
    assert "ncclNetPlugin_v8@@NCCL_NET_1.0" in listing
    assert nccl_env.plugin_api_versions(listing) == [6, 8, 9]
    # A hidden version (one @) is no symbol dlsym finds.
    assert nccl_env.plugin_api_versions("0000000000004010 D ncclNetPlugin_v7@NCCL_NET_0.9\n") == []


def test_nccl_conf_is_read_as_ncclsetenvfile_reads_it() -> None:
    """NCCL's setEnvFile (src/misc/param.cc of ../shared/sources/nccl-2.16.5-1.tar.gz) splits each line at its first
    '=', keeps the rest as it is (only the newline goes) and calls setenv(name, value, 0): the first line of a name
    wins. The reader kept the last and took blanks and a CRLF file's CR away, so verify passed a file from which NCCL
    takes other settings (review round 16a)."""
    conf = "NCCL_SOCKET_IFNAME=bond9\nNCCL_SOCKET_IFNAME=eth0\n NCCL_IB_HCA = mlx5\nNCCL_DEBUG=WARN\r\n"
    assert nccl_env.parse_conf(conf) == {"NCCL_SOCKET_IFNAME": "bond9", " NCCL_IB_HCA ": " mlx5",
                                         "NCCL_DEBUG": "WARN\r"}  # fmt: skip


# --- settings NCCL reads as integers (NCCL_PARAM: strtoll, src/misc/param.cc) -------------------------------------


@pytest.mark.parametrize(("value", "read"), [("yes", 0), ("true", 0), ("1.5", 1), ("12abc", 12), ("08", 0)])
def test_a_setting_nccl_reads_as_an_integer_is_refused_when_it_would_read_another_number(value: str, read: int) -> None:
    """NCCL_IB_DISABLE: "yes" meant InfiniBand off; strtoll reads it as 0, and NCCL kept InfiniBand on with no
    warning a user sees (review round 21c)."""
    errors = nccl_env.problems({"NCCL_IB_DISABLE": value})
    assert errors == [f"NCCL_IB_DISABLE={value!r}: NCCL reads this setting as an integer (strtoll), so it would read "
                      f"{read}; allowed: an integer (e.g. 0 or 1; a boolean is written as 1 or 0)"], errors


@pytest.mark.parametrize("value", [1, 0, True, False, "1", "-3", "0x10", "010", " 2", ""])
def test_an_integer_nccl_reads_whole_is_no_problem(value: object) -> None:
    # (settings without a range: NCCL_IB_TIMEOUT=-3 is out of the verbs field's, below)
    assert nccl_env.problems({"NCCL_IB_DISABLE": value, "NCCL_IB_ADAPTIVE_ROUTING": value}) == []


def test_the_integer_settings_are_nccl_params_and_text_settings_are_not_among_them() -> None:
    """From NCCL 2.29.7's source (scripts/extract-nccl-env-names --integer-params): NCCL_PARAM names, less those
    NCCL also reads as text (NCCL_COLLNET_ENABLE, through ncclGetEnv). Every one is a name NCCL reads."""
    integers = nccl_env.integer_params()
    assert {"NCCL_IB_DISABLE", "NCCL_IB_TIMEOUT", "NCCL_IB_GID_INDEX", "NCCL_IB_RETRY_CNT"} <= integers
    assert not {"NCCL_COLLNET_ENABLE", "NCCL_DEBUG", "NCCL_ALGO", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"} & integers
    assert integers <= nccl_env.known_nccl_names()
    assert nccl_env.problems({"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring,Tree"}) == []


@pytest.mark.parametrize(("env", "interfaces", "devices", "expected"), [
    # the profiles' eth0 on a node whose NICs are ens* (RHEL, Ubuntu on most clouds)
    ({"NCCL_SOCKET_IFNAME": "eth0"}, ["ens5", "ens6"], [],
     ["NCCL_SOCKET_IFNAME='eth0' matches none of the node's interfaces (ens5, ens6), so NCCL's bootstrap would find "
      "no socket interface; allowed: a value that names one of them, e.g. 'ens5'"]),
    ({"NCCL_SOCKET_IFNAME": "eth"}, ["eth0"], [], []),  # a prefix
    ({"NCCL_SOCKET_IFNAME": "^docker,lo"}, ["ens5"], [], []),
    ({"NCCL_SOCKET_IFNAME": "=eth"}, ["eth0"], [],  # '=' asks for the exact name
     ["NCCL_SOCKET_IFNAME='=eth' matches none of the node's interfaces (eth0), so NCCL's bootstrap would find no "
      "socket interface; allowed: a value that names one of them, e.g. 'eth0'"]),
    ({"NCCL_SOCKET_IFNAME": "e"}, ["ens5"], [], []),  # one character: NCCL ignores it and picks one itself
    ({"NCCL_SOCKET_IFNAME": "eth0"}, [], [], []),  # the NICs were not read: nothing judged
    # seed 001's HCAs on a node of other devices; '^' that excludes every device
    ({"NCCL_IB_HCA": "=mlx5_0,mlx5_1"}, ["eth0"], ["mlx5_2", "mlx5_3"],
     ["NCCL_IB_HCA='=mlx5_0,mlx5_1' keeps none of the node's RDMA devices (mlx5_2, mlx5_3), so NCCL would have no "
      "IB device; allowed: a value that names one of them"]),
    ({"NCCL_IB_HCA": "^mlx5_4"}, ["eth0"], ["mlx5_4"],
     ["NCCL_IB_HCA='^mlx5_4' keeps none of the node's RDMA devices (mlx5_4), so NCCL would have no IB device; "
      "allowed: a value that names one of them"]),
    ({"NCCL_IB_HCA": "^mlx5_4"}, ["eth0"], ["mlx5_0", "mlx5_4"], []),
    ({"NCCL_IB_HCA": "mlx5"}, ["eth0"], ["mlx5_0"], []),
    ({"NCCL_IB_HCA": ""}, ["eth0"], ["mlx5_0"], []),  # no filter
    ({"NCCL_IB_HCA": "mlx5"}, ["eth0"], [], []),  # no device read: nothing judged
])  # fmt: skip
def test_settings_that_name_nothing_the_node_has_are_named(env: dict, interfaces: list, devices: list,
                                                          expected: list) -> None:  # fmt: skip
    """Review round 23b: both passed preflight and the converge, and failed the first NCCL job."""
    assert nccl_env.node_problems(env, interfaces, devices) == expected


@pytest.mark.parametrize(("key", "value", "least", "most"), [
    ("NCCL_IB_TC", 256, -1, 255), ("NCCL_IB_SL", 16, -1, 15), ("NCCL_IB_TIMEOUT", 40, 0, 31),
    ("NCCL_IB_RETRY_CNT", "8", 0, 7), ("NCCL_IB_QPS_PER_CONNECTION", 0, 1, 128),
    ("NCCL_IB_QPS_PER_CONNECTION", "1000", 1, 128), ("NCCL_IB_GID_INDEX", 300, -1, 255),
])  # fmt: skip
def test_a_verbs_field_outside_its_width_is_refused(key: str, value: object, least: int, most: int) -> None:
    """The ranges are the verbs fields' widths these settings fill (InfiniBand's 5-bit ack timeout, 3-bit retry count,
    4-bit service level, 8-bit traffic class and GID index) and NCCL_IB_MAX_QPS (128, src/transport/net_ib/common.h):
    a value outside was cut or refused at the first job (review round 23b)."""
    (line,) = nccl_env.problems({key: value})
    assert line.startswith(f"{key}={value!r}: outside {least}..{most} (") and line.endswith(
        f"allowed: a whole number from {least} to {most}"), line  # fmt: skip
    assert nccl_env.problems({key: least}) == nccl_env.problems({key: str(most)}) == []


@pytest.mark.parametrize(("env", "expected"), [
    ({"NCCL_ALGO": "RING"}, []),  # seed 004's (-x NCCL_ALGO=RING): names without regard to case
    ({"NCCL_ALGO": "^NVLS"}, []),
    ({"NCCL_ALGO": "allreduce:ring;Broadcast:Tree"}, []),
    ({"NCCL_PROTO": "LL,LL128,Simple"}, []),
    ({"NCCL_ALGO": "ring,tre"}, ["'tre' is no name NCCL knows, and NCCL fails the communicator's init on it"]),
    ({"NCCL_PROTO": "LL,Simpel"}, ["'Simpel' is no name NCCL knows"]),
    ({"NCCL_ALGO": "Ring;Tree"}, ["'Tree' has no function, which only the first entry may leave out"]),
    ({"NCCL_ALGO": "Allreduc:Ring"}, ["'Allreduc' is no function NCCL knows"]),
])  # fmt: skip
def test_algorithm_and_protocol_lists_are_read_as_nccls_parselist(env: dict, expected: list) -> None:
    """NCCL 2.29.7's parseList (src/graph/tuning.cc) and its names (src/init.cc): an unknown token fails the
    communicator's init, at the first job, long after the converge (review round 23b)."""
    found = nccl_env.problems(env)
    assert len(found) == len(expected), found
    for line, fragment in zip(found, expected, strict=True):
        assert fragment in line and line.startswith(f"{next(iter(env))}={next(iter(env.values()))!r}: "), line


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("NCCL_DEBUG", 1.5, "VERSION, WARN, INFO, ABORT, TRACE, in any case"),
    ("NCCL_DEBUG", "VERBOSE", "VERSION, WARN, INFO, ABORT, TRACE, in any case"),
    ("NCCL_SOCKET_FAMILY", "ipv4", "AF_INET, AF_INET6"),
    ("NCCL_SOCKET_FAMILY", "af_inet6", "AF_INET, AF_INET6"),  # strcmp: the case counts
])  # fmt: skip
def test_a_word_nccl_does_not_compare_with_is_refused(key: str, value: object, allowed: str) -> None:
    """NCCL 2.29.7 compares NCCL_DEBUG with five words (src/debug.cc, strcasecmp) and NCCL_SOCKET_FAMILY with two
    (src/misc/socket.cc, strcmp), and ignores any other value without a word: no log, or NCCL's own family."""
    assert nccl_env.problems({key: value}) == [
        f"{key}={value!r} is no value NCCL reads, and NCCL ignores it; allowed: {allowed}"]  # fmt: skip
    assert nccl_env.problems({"NCCL_DEBUG": "info", "NCCL_SOCKET_FAMILY": "AF_INET6"}) == []


@pytest.mark.parametrize(("key", "value", "refused"), [
    ("NCCL_P2P_DISABLE", "yes", True), ("NCCL_P2P_DISABLE", "true", True), ("NCCL_P2P_DISABLE", 2, True),
    ("NCCL_P2P_DISABLE", 1, False), ("NCCL_P2P_DISABLE", "0", False), ("NCCL_P2P_DISABLE", True, False),
    ("NCCL_NET_GDR_LEVEL", "pix", True), ("NCCL_NET_GDR_LEVEL", "PIX", False), ("NCCL_NET_GDR_LEVEL", 2, False),
    ("NCCL_P2P_LEVEL", "nvl", True), ("NCCL_P2P_LEVEL", "NVL", False), ("NCCL_P2P_LEVEL", "NET", True),
    ("NCCL_P2P_LEVEL", "SYS", False),
    # strtol with base 0 as NCCL reads them: '01' and '0x1' are 1, and a level's old-style number may be hex; NCCL
    # looks at the first character as written, so ' 2' is ignored (review of round 36d's change)
    ("NCCL_P2P_DISABLE", "01", False), ("NCCL_P2P_DISABLE", "0x1", False), ("NCCL_NET_GDR_LEVEL", "0x2", False),
    ("NCCL_P2P_LEVEL", " 2", True),
])  # fmt: skip
def test_settings_nccl_reads_with_its_level_parser_are_checked(key: str, value: object, refused: bool) -> None:
    """Review round 36d: NCCL 2.29.7 reads these with ncclGetLevel (src/graph/paths.cc), not NCCL_PARAM: P2P is
    disabled only by strtol(...) == 1, so yes, true and 2 left it on; the level names are compared with strcmp
    against topoPathTypeStr up to SYS (src/graph/topo.cc), so pix was ignored. Both were written without a word."""
    found = nccl_env.problems({key: value})
    assert bool(found) == refused, found
    if refused:
        allowed = "allowed: 0 or 1" if key == "NCCL_P2P_DISABLE" else (
            "allowed: LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, or an old-style number 0-5")
        assert found == [found[0]] and found[0].startswith(f"{key}={value!r}") and found[0].endswith(allowed)


def test_interfaces_the_nic_list_leaves_out_and_one_excluded_port_are_not_judged_on_it() -> None:
    """Review round 24: the NIC list leaves out preflight_nic_exclude's bridges and tunnels, which NCCL scans all
    the same (a management bridge br-ex was refused); '^=mlx5_0:1' excludes one port of a dual-port HCA, not the
    device. The patterns are role preflight's defaults."""
    unlisted = defaults("preflight")["preflight_nic_exclude"]
    for value in ("br-ex", "br", "=br-ex", "virbr0"):
        assert nccl_env.node_problems({"NCCL_SOCKET_IFNAME": value}, ["eno1"], [], unlisted) == [], value
    assert nccl_env.node_problems({"NCCL_SOCKET_IFNAME": "eth0"}, ["eno1"], [], unlisted)  # still judged
    assert nccl_env.node_problems({"NCCL_IB_HCA": "^=mlx5_0:1"}, ["eth0"], ["mlx5_0"]) == []
    assert nccl_env.node_problems({"NCCL_IB_HCA": "^=mlx5_0"}, ["eth0"], ["mlx5_0"])
