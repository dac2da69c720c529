"""What a command writes into its run directory after Ansible's run (verify's pytest.log and testinfra's JUnit XML,
bench's copy of the benchmark run, recap.json, the JUnit reports) holds no secret either: the run's secret values
(execute.secret_values) are redacted from all of it, and the run directory is scrubbed once more at its end."""

from __future__ import annotations

import argparse
import datetime as dt
import html
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rdmaforge.cli import main
from rdmaforge.commands import verify
from rdmaforge.runner import command, junit, secrets
from rdmaforge.runner.exit_codes import ExitCode
from rdmaforge.runner.secrets import REDACTED

#: The inventory's secret: XML escapes two of its characters (testinfra's junit.xml holds it as &lt;&amp;).
TOKEN = "c0ffee-token<&9"
#: Found by its form, whatever variable holds it.
URL = "https://ci:url-pw-c0ffee@mirror.example/simple"

SUITE = f"""
def test_the_inventory_token(host):
    token = host.ansible.get_variables()["api_token"]
    print("pip index {URL}")
    assert token == "the expected one", "the token was " + token
"""


def leaks(text: str) -> list[str]:
    forms = {TOKEN, json.dumps(TOKEN)[1:-1], html.escape(TOKEN, quote=False), "url-pw-c0ffee"}
    return [form for form in forms if form in text]


def test_verify_keeps_what_pytest_prints_of_a_secret_out_of_every_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failing testinfra test that prints a host's secret variable and a URL with a password: pytest.log was
    written after the run's scrub and kept both (and testinfra's junit.xml, recap.json and the JUnit reports the
    failure message)."""
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "memory")  # this fake host's facts stay out of .cache/facts
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_leak.py").write_text(SUITE)
    monkeypatch.setattr(verify, "SUITE", suite)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "api_token": TOKEN,
             "rdmaforge_fabric": "tcp"}  # fmt: skip
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"hosts": {"localhost": local}}}}}))
    runs = tmp_path / "runs"
    code = main(["verify", "-i", str(inventory), "--runs-dir", str(runs), "-v", "--junit", str(tmp_path / "ci.xml")])
    out, err = capsys.readouterr()
    assert code == ExitCode.HOST_FAILED, (out + err)[-3000:]
    log = next(runs.rglob("pytest.log")).read_text()
    assert f"the token was {REDACTED}" in log and f"https://ci:{REDACTED}@mirror.example" in log  # it was there
    files = [p for p in runs.rglob("*") if p.is_file()] + [tmp_path / "ci.xml"]
    assert {p.name for p in files} >= {"pytest.log", "junit.xml", "recap.json", "ci.xml"}
    for path in files:
        assert not leaks(path.read_text(errors="replace")), path
    assert not leaks(out + err)  # -v echoes pytest's output; the table names the failure


def test_the_end_of_a_command_scrubs_what_it_wrote_after_the_run(tmp_path: Path) -> None:
    """bench copies the benchmark's run directory in after Ansible's run; the record and the JUnit cases come from
    what the command read: recap.json, both JUnit reports and every file in the run directory are redacted."""
    run_dir = tmp_path / "run"
    (run_dir / "benchmark").mkdir(parents=True)
    (run_dir / "benchmark" / "run.json").write_text(json.dumps({"env": {"HF_TOKEN": TOKEN}, "index": URL}))
    session = command.Session("bench", run_dir, dt.datetime.now(dt.UTC), io.StringIO(), secret_values={TOKEN})
    args = argparse.Namespace(junit=tmp_path / "ci.xml")
    case = junit.Case("n1", "rdmaforge.bench", outcome="failed", message=f"token {TOKEN}", details=URL)
    assert command.finish(session, args, ExitCode.HOST_FAILED, [case], {"problem": f"{TOKEN} {URL}"}) == 2
    for path in [*run_dir.rglob("*"), tmp_path / "ci.xml"]:
        if path.is_file():
            assert not leaks(path.read_text()), path
    recap = json.loads((run_dir / "recap.json").read_text())
    assert recap["problem"] == f"{REDACTED} https://ci:{REDACTED}@mirror.example/simple"


def test_verify_hides_each_line_of_a_multi_line_secret_from_its_line_by_line_output(tmp_path: Path) -> None:
    """pytest's output is redacted line by line (-v shows each as it comes): no line is a whole private key, so each
    line of one went to the screen and to pytest.log, as they are and as pytest shows a failure (``E  `` first)."""
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)], check=True, timeout=60)
    pem = key.read_text()
    body = pem.splitlines()[1:-1]  # between BEGIN and END: what must not show
    assert len(body) >= 3
    printed = f"print({pem!r}); print(''.join('E       ' + line + chr(10) for line in {pem!r}.splitlines()))"
    screen = io.StringIO()
    log = tmp_path / "pytest.log"
    rc = verify.run_suite([sys.executable, "-c", printed], log, True, None, screen, secrets.Redactor({pem}))
    assert rc == 0
    for text in (screen.getvalue(), log.read_text()):
        assert text.count(REDACTED) >= 2 * len(body)  # every line of the body, twice
        assert not [line for line in body if line in text]
