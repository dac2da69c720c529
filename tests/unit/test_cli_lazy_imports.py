"""`rdmaforge nccl-report` imports only its own command: importing every sub-command (ansible-runner, the benchmark
code) costs about 0.4 s of CPU, a fifth of what parsing a 200 MB run takes at the 100 MB/s target (issue 17).
Every other way in (no command, --help, a typo) still sees every command."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from rdmaforge.cli import build_parser, command_modules, parser_for
from rdmaforge.paths import PROJECT_ROOT

SAMPLE = PROJECT_ROOT / "tests" / "data" / "nccl-json" / "all_reduce_v2.17.8_ok.json"


def test_nccl_report_does_not_import_the_other_commands() -> None:
    code = (
        "import json, sys\n"
        "from rdmaforge.cli import main\n"
        f"rc = main(['nccl-report', '--json', {str(SAMPLE)!r}])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('ansible_runner', 'rdmaforge.commands.', "
        "'rdmaforge.runner.execute', 'rdmaforge.bench.report')))\n"
        "print(json.dumps({'rc': rc, 'loaded': loaded}), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    assert result == {"rc": 0, "loaded": ["rdmaforge.commands.nccl_report"]}
    assert json.loads(proc.stdout)["runs"]


def commands_of(parser: argparse.ArgumentParser) -> set[str]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(action.choices)


def test_help_and_typos_see_every_command() -> None:
    everything = commands_of(build_parser())
    assert {"provision", "verify", "doctor", "bench", "nccl-report", "report"} <= everything
    for argv in ([], ["--help"], ["nccl_report"], ["provison"], ["-v", "provision"]):
        assert commands_of(parser_for(argv)) == everything, argv
    assert commands_of(parser_for(["nccl-report", "x"])) == {"nccl-report"}
    assert len(command_modules()) >= len(everything) - 1  # one module per command (completion included)
