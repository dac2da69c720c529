"""Keeping a run's secrets out of its run directory (rdmaforge.runner.secrets) on a run directory of FILES events,
about TOTAL_BYTES: the scrub after Ansible's run, the end of the command's rescan, and the live display's redaction.

The run directory is built here as ansible-runner leaves it for a ``rdmaforge provision`` of HOSTS nodes
(``ansible/job_events/<counter>-<uuid>.json`` written with ``json.dump``, ``ansible/stdout`` from the events'
display text, ``ansible/command`` with the run's environment, ``rc``, ``status``): per task a start event, and for
each host a start and a result; fact gatherings (large: network and hardware facts), command results with their
output, and small file and package results. The secrets are those a session finds (secrets.secret_values of the
inventory's variables, a vaulted multi-line file among them, and secrets.environment_secrets of a CI job's
environment), sprinkled as real runs show them: a command's output printing a token, a config file's content in a
module's arguments and ``--diff``, a debug of an environment variable, a pip index URL with its password, a failed
task printing a private key, the vaulted file line by line in ``ansible/stdout``. After the run the command writes
recap.json and junit.xml (redacted before they are written) and verify's pytest output and JUnit XML, which hold
secrets (raw, and XML-escaped).

Timed in CPU seconds (see the targets; the wall time is in the detail), the least of REPEATS unless said, in a fresh
child process (its peak RSS is the last figure):
- the scrub after Ansible's run (execute.run: ``scrub_tree`` of the whole directory, recording what it read): MB a
  CPU second,
  the secret-holding files restored between repeats (commit 64df068: each file rewritten once, forms found by
  ``find``);
- the end of the command (command.finish: ``scrub_tree`` with that record): seconds, reading only what was written
  since (commit f3f56ca: 5.08 s to 0.48 s by hand); the same rescan without the record, as finish did before, is
  shown as a reference;
- every event redacted for the live display (execute.run's handler: ``redact_data`` with one Redactor): seconds.

A figure counts only when the scrub did what the inputs call for: the files that held a secret (and only they)
rewritten, no form of any secret left in any file, the end's rescan rewriting exactly verify's two files, and no
secret in the redacted events; otherwise its target fails, saying what differed.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import Result, Timing, least, peak_rss_mib, reference, stopwatch
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner import secrets
from rdmaforge.runner.vault import VaultPlaintext

FILES = 5000
TOTAL_BYTES = 56_000_000
HOSTS = 16
REPEATS = 3
#: A task of the run, in turn: what its results hold (see events()).
TASK_KINDS = ("setup", "command", "text_file", "apt", "command", "file", "text_file", "service")
#: One task in SECRET_EVERY prints or carries a secret somewhere (the rest are clean).
SECRET_EVERY = 10

# Targets, in CPU time (this process's user + system seconds, the least of REPEATS): what an idle core would take.
# The machine these run on is shared (2 cores, load averages of 7 to 9 when they were measured on 2026-12-02:
# README, "Secrets kept out of the run directory"), which doubles the wall time or more; a wall-time target roomy
# enough for that would not tell the old costs from the new. Each has 2-3 times of room over what was measured.
#: the scrub after the run: 74-108 MB a CPU second measured (0.52-0.76 CPU s for 56 MB).
TARGET_MB_PER_CPU_SECOND = 35.0
#: the end's rescan with the record: 0.11-0.12 CPU s measured (a stat of each file and the 4 new ones read); reading
#: every file again, as before f3f56ca, took 0.54-0.63 CPU s here (5.08 s wall when that commit was timed).
TARGET_RESCAN_CPU_SECONDS = 0.3
#: the live redaction of 5,000 events: 1.45-1.68 CPU s measured.
TARGET_LIVE_CPU_SECONDS = 3.5
#: the child's peak RSS: 34 MiB measured (a file at a time, the record of 5,000 files).
TARGET_RSS_MIB = 100.0

#: The run's secret-named and vaulted variables (inventory, group_vars, -e), as secrets.secret_values reads them.
VARIABLES: dict[str, Any] = {
    "ansible_become_password": "Tr0ub4dor&3-become",
    "benchmark_hf_token": "hf_kTzQwPLmXcVbNaRsEdFgHyUjIkOl",
    "pip_index_password": "pip-idx-Pa55w0rd",
    "db": {"password": 'say "friend" and enter'},
    "netrc": VaultPlaintext("machine pypi.internal.example\nlogin deploy-bot\npassword netrc-Secr3t-9931\n"),
    "rdmaforge_fabric": "erdma",
}
#: A CI job's environment, which the run inherits (secrets.environment_secrets: numbers and booleans are settings).
ENVIRONMENT = {
    "GITHUB_TOKEN": "ghp_R2d2C3poBb8L3ia0rgAnaSoloChewie42",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "MAX_TOKENS": "4096",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/ci",
    "CI": "true",
}
PIP_URL = f"https://deploy-bot:{VARIABLES['pip_index_password']}@pypi.internal.example/simple"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(f"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW{i:02d}" for i in range(7))
    + "\n-----END OPENSSH PRIVATE KEY-----\n"
)  # fmt: skip
#: What a private key's body is hidden by: a line of it must not survive.
KEY_BODY_LINE = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW03"


def session_secrets() -> set[str]:
    """What Session.secret_values holds for this run: found by the code every run uses."""
    return secrets.secret_values(VARIABLES) | secrets.environment_secrets(ENVIRONMENT)


def leak_forms(values: Sequence[str] | set[str]) -> set[bytes]:
    """Every form in which a secret (or a line of 8 characters or more of it) would leak: as it is, JSON-escaped,
    XML-escaped. Worked out here, not with the scrubber's own functions; the private key's body and the URL's
    password (found by their form) too."""
    found: set[bytes] = {KEY_BODY_LINE.encode(), PIP_URL.split(":")[2].split("@")[0].encode()}
    for value in values:
        for piece in [value, *(line.strip() for line in value.splitlines() if len(line.strip()) >= 8)]:
            for form in (piece, json.dumps(piece)[1:-1], html.escape(piece, quote=False)):
                found.add(form.encode())
    return found


def hosts() -> list[str]:
    return [f"node{i:02d}" for i in range(1, HOSTS + 1)]


def _setup_facts(host: str, n: int) -> dict[str, Any]:
    """A fact gathering's result: network and hardware facts (the largest results of a converge)."""
    interfaces = {f"ansible_eth{k}": {
        "device": f"eth{k}", "active": True, "mtu": 9000 if k else 1500, "type": "ether", "module": "mlx5_core",
        "macaddress": f"02:00:00:{n:02x}:{k:02x}:01", "speed": 100000, "promisc": False,
        "ipv4": {"address": f"10.{k}.0.{n}", "netmask": "255.255.255.0", "network": f"10.{k}.0.0", "prefix": "24"},
        "features": {f"feature_{f:02d}": "on" if f % 3 else "off [fixed]" for f in range(60)},
    } for k in range(9)}  # fmt: skip
    mounts = [{"mount": f"/data{m}", "device": f"/dev/nvme{m}n1", "fstype": "xfs", "options": "rw,relatime",
               "size_total": 3840755982336, "size_available": 3000000000000 - m, "block_size": 4096,
               "uuid": str(uuid.UUID(int=n * 100 + m))} for m in range(8)]  # fmt: skip
    devices = {f"nvme{d}n1": {"model": "SAMSUNG MZWLR3T8HBLS-00007", "size": "3.49 TB", "rotational": "0",
                              "partitions": {}, "holders": [], "links": {"ids": [f"nvme-eui.{n:04d}{d:04d}"]},
                              "scheduler_mode": "none", "sectors": 7501476528} for d in range(8)}  # fmt: skip
    return {"ansible_facts": {**interfaces, "ansible_mounts": mounts, "ansible_devices": devices,
                              "ansible_hostname": host, "ansible_processor_count": 2, "ansible_memtotal_mb": 2063712,
                              "ansible_cmdline": {"BOOT_IMAGE": "/vmlinuz-6.8.0", "ro": True, "iommu": "pt"}},
            "changed": False}  # fmt: skip


def _result(kind: str, host: str, n: int, task: int, pad: int, secret: str | None) -> dict[str, Any]:
    """A task's result on a host (``res``), ``pad`` lines of command output, ``secret`` a way it shows one."""
    if kind == "setup":
        return _setup_facts(host, n)
    if kind == "command":
        lines = [f"[{task:04d}.{i:05d}] {host}: mlx5_core 0000:{n:02x}:00.{i % 8}: link up, 100Gbps, rdma ok"
                 for i in range(pad)]  # fmt: skip
        if secret == "token":
            lines.append(f"Logged in to the hub with token {VARIABLES['benchmark_hf_token']}")
        if secret == "pip":
            lines.append(f"Looking in indexes: {PIP_URL}")
        return {"cmd": ["/usr/local/sbin/rdma-check", "--all"], "rc": 0, "stdout": "\n".join(lines),
                "stdout_lines": lines, "stderr": "", "stderr_lines": [], "changed": False,
                "start": "2026-12-02 10:00:00.000000", "end": "2026-12-02 10:00:01.250000",
                "delta": "0:00:01.250000"}  # fmt: skip
    content = f"# managed by rdmaforge (task {task})\nNCCL_IB_HCA=erdma_0\nNCCL_SOCKET_IFNAME=eth0\n"
    if secret == "config":
        content += f"db_password={VARIABLES['db']['password']}\nbecome={VARIABLES['ansible_become_password']}\n"
    if secret == "netrc":
        content += str(VARIABLES["netrc"])
    result: dict[str, Any] = {"changed": task % 3 == 0, "dest": f"/etc/rdmaforge/task{task}.conf", "mode": "0644",
                              "owner": "root", "group": "root", "invocation": {"module_args": {
                                  "dest": f"/etc/rdmaforge/task{task}.conf", "content": content, "mode": "0644",
                                  "owner": "root", "group": "root", "backup": False}}}  # fmt: skip
    if secret in ("config", "netrc"):
        result["diff"] = [{"before": "", "after": content, "before_header": "(absent)", "after_header": "new"}]
    if secret == "env":
        result["msg"] = f"CI token: {ENVIRONMENT['GITHUB_TOKEN']}"
    if secret == "key":
        result.update(failed=True, msg=f"unexpected key file content:\n{PRIVATE_KEY}")
    return result


SECRET_WAYS = ("token", "config", "pip", "env", "netrc", "key")


def events(pad: int) -> Iterator[dict[str, Any]]:
    """The run's events, in order, as ansible-runner records them (``pad``: lines of each command's output)."""
    playbook_uuid, play_uuid = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))
    base = {"playbook": "site.yml", "playbook_uuid": playbook_uuid, "play": "cluster", "play_uuid": play_uuid,
            "play_pattern": "cluster"}  # fmt: skip
    counter, line = 0, 0

    def event(name: str, data: dict[str, Any], stdout: str) -> dict[str, Any]:
        nonlocal counter, line
        counter += 1
        lines = stdout.count("\n") + 1 if stdout else 0
        record = {"uuid": str(uuid.UUID(int=counter + (1 << 64))), "counter": counter, "stdout": stdout,
                  "start_line": line, "end_line": line + lines, "runner_ident": "ansible", "event": name,
                  "pid": 4242, "created": f"2026-12-02T10:{counter // 600 % 60:02d}:{counter // 10 % 60:02d}+00:00",
                  "parent_uuid": play_uuid,
                  "event_data": {**base, **data, "uuid": str(uuid.UUID(int=counter))}}  # fmt: skip
        line += lines
        return record

    task = 0
    while counter < FILES:
        task += 1
        kind = TASK_KINDS[task % len(TASK_KINDS)]
        secret_host = hosts()[task % HOSTS] if task % SECRET_EVERY == 0 else None
        way = SECRET_WAYS[(task // SECRET_EVERY) % len(SECRET_WAYS)]
        if secret_host is not None:  # a task of the kind that shows it: a command's output, a module's arguments
            kind = "command" if way in ("token", "pip") else "text_file"
        action = {"text_file": "rdmaforge.cluster.text_file"}.get(kind, f"ansible.builtin.{kind}")
        name = f"role{task % 17} : task {task} ({kind})"
        task_data = {"task": name, "task_uuid": str(uuid.UUID(int=task + (1 << 80))), "task_action": action,
                     "resolved_action": action, "task_args": "",
                     "task_path": f"/opt/rdmaforge/roles/role{task % 17}/tasks/main.yml:{task}"}  # fmt: skip
        yield event("playbook_on_task_start", {**task_data, "name": name, "is_conditional": False},
                    f"\r\nTASK [{name}] " + "*" * 40)  # fmt: skip
        for n, host in enumerate(hosts(), start=1):
            if counter >= FILES:
                return
            yield event("runner_on_start", {**task_data, "host": host, "remote_addr": host}, "")
            if counter >= FILES:
                return
            res = _result(kind, host, n, task, pad, way if host == secret_host else None)
            failed = bool(res.get("failed"))
            shown = f"fatal: [{host}]: FAILED! => {json.dumps(res)}" if failed else f"ok: [{host}]"
            if host == secret_host and way == "env":
                shown = f'ok: [{host}] => {{\n    "msg": "{res["msg"]}"\n}}'
            yield event("runner_on_failed" if failed else "runner_on_ok",
                        {**task_data, "host": host, "remote_addr": host, "res": res, "start": "", "end": "",
                         "duration": 0.8, "event_loop": None, "ignore_errors": None}, shown)  # fmt: skip


def build(run_dir: Path, total: int = TOTAL_BYTES) -> dict[str, bytes]:
    """Write the run directory; returns each file that holds a secret, with its bytes (to restore it)."""
    # The command results' output makes up the size: so many lines each that the directory comes to ``total``.
    base, commands = 0, 0
    for event in events(0):
        base += len(json.dumps(event)) + len(event["stdout"]) + 1  # the event's file, its line in ansible/stdout
        commands += "stdout_lines" in event["event_data"].get("res", {})
    one_line = len(json.dumps(_result("command", "node01", 1, 1, 2, None))) - len(
        json.dumps(_result("command", "node01", 1, 1, 1, None))
    )
    pad = max(0, (total - base) // max(1, commands) // one_line)
    artifacts = run_dir / "ansible"
    (artifacts / "job_events").mkdir(parents=True)
    planted: dict[str, bytes] = {}
    forms = leak_forms(session_secrets())
    with (artifacts / "stdout").open("w") as stdout:
        for event in events(pad):
            path = artifacts / "job_events" / f"{event['counter']}-{event['uuid']}.json"
            data = json.dumps(event).encode()
            path.write_bytes(data)
            if any(form in data for form in forms):
                planted[str(path.relative_to(run_dir))] = data
            if event["stdout"]:
                stdout.write(event["stdout"] + "\n")
        stdout.write("".join(f"+{line}\n" for line in str(VARIABLES["netrc"]).splitlines()))  # a --diff, line by line
    planted["ansible/stdout"] = (artifacts / "stdout").read_bytes()
    command = {"command": ["ansible-playbook", "-i", "inventories/lab/hosts.yml", "playbooks/site.yml"],
               "cwd": str(PROJECT_ROOT), "env": ENVIRONMENT}  # fmt: skip
    (artifacts / "command").write_text(json.dumps(command))
    planted["ansible/command"] = (artifacts / "command").read_bytes()
    (artifacts / "rc").write_text("0")
    (artifacts / "status").write_text("successful")
    return planted


def after_the_run(run_dir: Path, round_: int = 0) -> list[Path]:
    """What a command writes after its Ansible run (verify): recap.json and junit.xml, already redacted, and
    pytest's output and JUnit XML, which hold secrets; returns the two that hold them."""
    (run_dir / "recap.json").write_text(json.dumps({"command": "verify", "exit_code": 0, "round": round_}))
    (run_dir / "junit.xml").write_text(f'<testsuite name="rdmaforge verify" tests="{HOSTS}"/>\n')
    verify = run_dir / "verify"
    verify.mkdir(exist_ok=True)
    token, become = VARIABLES["benchmark_hf_token"], str(VARIABLES["ansible_become_password"])
    log = verify / "pytest.log"
    log.write_text(f"round {round_}\n" + "".join(f"PASSED test_node[{h}]\n" for h in hosts()) + f"token={token}\n")
    junit = verify / "junit.xml"
    junit.write_text(f'<testcase name="become"><failure message="sudo -S {html.escape(become)}"/></testcase>\n')
    return [junit, log]


def leaks(root: Path, forms: set[bytes]) -> list[str]:
    """The files under ``root`` where a form of a secret is left."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                  and any(form in p.read_bytes() for form in forms))  # fmt: skip


def measure() -> dict[str, Any]:
    values = session_secrets()
    forms = leak_forms(values)
    figures: dict[str, Any] = {"secrets": len(values)}
    with tempfile.TemporaryDirectory(prefix="rdmaforge-scrub-bench-") as tmp:
        run_dir = Path(tmp) / "run"
        planted = build(run_dir)
        files = [p for p in run_dir.rglob("*") if p.is_file()]
        figures["files"], figures["bytes"] = len(files), sum(p.stat().st_size for p in files)
        figures["planted"] = len(planted)
        # The scrub after the run, the least of REPEATS: the files it rewrote restored, its record started afresh.
        timings = []
        for _ in range(REPEATS):
            for name, data in planted.items():
                (run_dir / name).write_bytes(data)
            record: dict[Path, secrets.Scrubbed] = {}
            with stopwatch() as timing:
                changed = secrets.scrub_tree(run_dir, values, record)
            timings.append(timing)
        rewrote = sorted(str(p.relative_to(run_dir)) for p in changed)
        wrong = []
        if rewrote != sorted(planted):
            wrong.append(f"rewrote {len(rewrote)} files, the inputs hold secrets in {len(planted)}")
        left = leaks(run_dir, forms)
        if left:
            wrong.append(f"secrets left in {len(left)} files ({', '.join(left[:3])})")
        figures["scrub"] = step(least(timings), "; ".join(wrong))
        # The end of the command: what it wrote since, with the record; then the same without it (the old way).
        timings, wrong = [], []
        for round_ in range(REPEATS):
            written = after_the_run(run_dir, round_)
            with stopwatch() as timing:
                changed = secrets.scrub_tree(run_dir, values, record)
            timings.append(timing)
            if sorted(changed) != sorted(written):
                wrong.append(f"round {round_}: rewrote {[p.name for p in changed]}, not verify's two files")
        after_the_run(run_dir, REPEATS)
        with stopwatch() as timing:
            secrets.scrub_tree(run_dir, values)
        figures["rescan without the record"] = step(timing, "")
        left = leaks(run_dir, forms)
        if left:
            wrong.append(f"secrets left in {', '.join(left[:3])}")
        figures["rescan"] = step(least(timings), "; ".join(wrong[:2]))
        for name, data in planted.items():  # the live display sees the events as Ansible sent them
            (run_dir / name).write_bytes(data)
        figures["live"] = live(sorted((run_dir / "ansible" / "job_events").iterdir()), values, forms)
    figures["rss_mib"] = peak_rss_mib()
    return figures


def live(paths: Sequence[Path], values: set[str], forms: set[bytes]) -> dict[str, Any]:
    """The live display's redaction of every event (execute.run's handler), one at a time as they arrive: only
    ``redact_data`` is timed (ansible-runner parses each event anyway), best of REPEATS passes."""
    timings = []
    left: set[bytes] = set()
    for _ in range(REPEATS):
        redactor = secrets.Redactor(values)  # one per run, as execute.run makes it
        total = Timing()
        for path in paths:
            event = json.loads(path.read_bytes())
            with stopwatch() as timing:
                shown = secrets.redact_data(event, redactor)
            total += timing
            text = json.dumps(shown).encode()
            left |= {form for form in forms if form in text}
        timings.append(total)
    return {**step(least(timings), f"{len(left)} secret forms left in the shown events" if left else ""),
            "events": len(paths)}  # fmt: skip


def step(timing: Timing, wrong: str) -> dict[str, Any]:
    return {"seconds": timing.wall, "cpu": timing.cpu, "wrong": wrong}


def _isolated() -> dict[str, Any]:
    """measure() in a fresh process: its peak RSS is its own."""
    code = "import json; from benchmarks.run_dir_scrub import measure; print(json.dumps(measure()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"run_dir_scrub: the measuring process exited {out.returncode}:\n{out.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def judge(figures: Mapping[str, Any], load: str) -> list[Result]:
    """The rows, on CPU time: each target met only when its step did what the inputs call for."""
    size = f"{figures['files']} files, {figures['bytes'] / 1e6:.0f} MB"
    scrub, rescan, old, live = (figures[k] for k in ("scrub", "rescan", "rescan without the record", "live"))
    mbps = figures["bytes"] / 1e6 / scrub["cpu"]

    def detail(step: Mapping[str, Any], text: str) -> str:
        said = f"{text}; wall {step['seconds']:.2f} s; load average {load}"
        return f"wrong, not a measurement: {step['wrong']}; {said}" if step["wrong"] else said

    wrong = [name for name in ("scrub", "rescan", "live") if figures[name]["wrong"]]
    rss_detail = "a file at a time"
    if wrong:
        rss_detail = f"wrong in {', '.join(wrong)}: not a measurement; {rss_detail}"
    return [
        Result(f"run directory scrub after the run, {size}: speed", round(mbps, 1), "MB/CPU s",
               f">= {TARGET_MB_PER_CPU_SECOND:g} MB/CPU s", not scrub["wrong"] and mbps >= TARGET_MB_PER_CPU_SECOND,
               detail(scrub, f"{scrub['cpu']:.2f} CPU s; {figures['planted']} files held some of "
                             f"{figures['secrets']} secrets; least of {REPEATS}")),
        Result(f"end of the command's rescan with the record, {size}", round(rescan["cpu"], 3), "CPU s",
               f"< {TARGET_RESCAN_CPU_SECONDS:g} CPU s",
               not rescan["wrong"] and rescan["cpu"] < TARGET_RESCAN_CPU_SECONDS,
               detail(rescan, f"4 files written since, 2 holding secrets; least of {REPEATS}; without the record "
                              f"{old['cpu']:.2f} CPU s")),
        reference(f"end of the command's rescan without the record (before f3f56ca), {size}",
                  round(old["cpu"], 2), "CPU s", detail(old, "every file read again; once")),
        Result(f"live display's redaction of {live['events']} events", round(live["cpu"], 3), "CPU s",
               f"< {TARGET_LIVE_CPU_SECONDS:g} CPU s", not live["wrong"] and live["cpu"] < TARGET_LIVE_CPU_SECONDS,
               detail(live, f"redact_data with one Redactor; least of {REPEATS}")),
        Result(f"run directory scrub, {size}: peak RSS", round(figures["rss_mib"], 1), "MiB",
               f"<= {TARGET_RSS_MIB:g} MiB", not wrong and figures["rss_mib"] <= TARGET_RSS_MIB, rss_detail),
    ]  # fmt: skip


def run() -> list[Result]:
    before = os.getloadavg()[0]
    figures = _isolated()
    return judge(figures, f"{before:.1f} before / {os.getloadavg()[0]:.1f} after")
