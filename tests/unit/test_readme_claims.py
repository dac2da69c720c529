"""What README.md and docs/*.md say that can be checked without a lab, checked against the code: every `rdmaforge`
command line they show parses (a concrete one with the CLI's own parser, a synopsis option by option), every role
variable they name is one, every repository path, `make` target, module and test they name exists, their exit-code
table is the CLI's, and the counts they give (bad inventories, bad inputs, seed steps) are the current ones.

The expected values are the CLI's parser, the roles' defaults, vars and argument specs, the Makefile and the test
modules: a doc that drifted from them fails here, naming the file and line."""

from __future__ import annotations

import argparse
import re
import shlex
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import ansible.modules
import pytest
import yaml

from rdmaforge import cli
from rdmaforge.commands import completion
from rdmaforge.paths import PROJECT_ROOT
from rdmaforge.runner.exit_codes import ExitCode

README = PROJECT_ROOT / "README.md"
DOCS = (README, *sorted((PROJECT_ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"`([^`\n]+)`")
#: README, "Remove a node": the lifecycle commands, which the synopsis's shared options also name.
LIFECYCLE = ("remove-node", "upgrade-nccl", "rollback-nccl", "reset")


@dataclass(frozen=True)
class Where:
    doc: Path
    line: int

    def __str__(self) -> str:
        return f"{self.doc.relative_to(PROJECT_ROOT)}:{self.line}"


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def spans(doc: Path) -> Iterator[tuple[Where, str]]:
    """Every inline code span outside fenced blocks."""
    text = doc.read_text()
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)  # the same line numbers
    for match in SPAN.finditer(prose):
        yield Where(doc, _line(prose, match.start())), match.group(1)


def code_lines(doc: Path) -> Iterator[tuple[Where, str]]:
    """Every line of the fenced blocks, continuation lines joined (a shell `\\`, or a YAML scalar's next line that
    is an option), comments left out."""
    text = doc.read_text()
    for block in FENCE.finditer(text):
        first = _line(text, block.start())
        lines = block.group(0).splitlines()[1:-1]
        index = 0
        while index < len(lines):
            start, line = index, lines[index]
            while line.rstrip().endswith("\\") and index + 1 < len(lines):
                index += 1
                line = line.rstrip()[:-1] + " " + lines[index].strip()
            while index + 1 < len(lines) and re.match(r"\s+-[-\w]", lines[index + 1]):
                index += 1
                line += " " + lines[index].strip()
            yield Where(doc, first + 1 + start), line
            index += 1


# --- rdmaforge command lines -------------------------------------------------------------------------------------


@cache
def parser() -> argparse.ArgumentParser:
    return cli.build_parser()


def commands() -> dict[str, argparse.ArgumentParser]:
    return completion.sub_parsers(parser())


COMMAND = re.compile(r"(?:^|[\s(:])(?:[\w.$()/-]*/)?rdmaforge\s+([a-z][\w|-]*(?:\s.*)?)$")
#: An option word: after a space, `[` or `|`, never inside a placeholder (`<a good run>-bench`).
OPTION = re.compile(r"(?:^|(?<=[\s\[|]))(--?[A-Za-z][\w-]*)")


def command_lines() -> Iterator[tuple[Where, str, bool]]:
    """(where, the words after `rdmaforge`, whether it is a concrete command rather than a synopsis or fragment)."""
    for doc in DOCS:
        for where, line in code_lines(doc):
            code = line.split(" #", 1)[0].strip()
            if code.startswith("#"):
                continue
            match = COMMAND.search(code)
            if match:
                rest = match.group(1).strip()
                yield where, rest, not re.search(r"[\[\]|]|\.\.\.", rest)
        for where, span in spans(doc):
            match = COMMAND.search(span)
            if match:
                yield where, match.group(1).strip().rstrip(")"), False  # `source <(rdmaforge completion bash)`


def shared_option_lines(doc: Path) -> Iterator[tuple[Where, list[str], str]]:
    """The synopsis's `# and on provision, bench, ... and the lifecycle commands above:` comment and the options
    listed on the comment lines under it."""
    for where, line in code_lines(doc):
        match = re.match(r"\s*# and on (.*):\s*$", line)
        if match:
            named = [word for word in re.findall(r"[a-z][\w-]*", match.group(1)) if word in commands()]
            if "lifecycle commands" in match.group(1):
                named += LIFECYCLE
            lines = doc.read_text().splitlines()[where.line :]
            options = " ".join(next_line for next_line in lines if next_line.startswith("#   "))
            yield where, named, options


def command_problems(where: Where, rest: str, concrete: bool) -> list[str]:
    words = rest.split()
    subs = commands()
    names = words[0].split("|")
    unknown = [name for name in names if name not in subs]
    if unknown:
        return [f"{where}: rdmaforge {rest}: no command {unknown} (commands: {sorted(subs)})"]
    if len(names) > 1:
        return []
    target = subs[names[0]]
    verbs = completion.sub_parsers(target)
    if verbs and len(words) > 1 and not words[1].startswith("-"):
        unknown = [verb for verb in words[1].split("|") if verb not in verbs]
        if unknown:
            return [f"{where}: rdmaforge {rest}: no {names[0]} verb {unknown} (verbs: {sorted(verbs)})"]
        if "|" in words[1]:
            return []
        target = verbs[words[1]]
    known = set(completion.options(target))
    problems = [f"{where}: rdmaforge {rest}: no option {option} (options: {sorted(known)})"
                for option in OPTION.findall(" ".join(words[1:])) if option not in known]  # fmt: skip
    if concrete and not problems:
        try:
            parser().parse_args(shlex.split(rest))
        except SystemExit as exc:
            problems.append(f"{where}: rdmaforge {rest}: does not parse (exit {exc.code})")
    return problems


def test_every_rdmaforge_command_line_in_the_docs_parses(capsys: pytest.CaptureFixture[str]) -> None:
    found = list(command_lines())
    assert sum(concrete for _, _, concrete in found) >= 20, "the docs' command lines were not found"
    problems = [problem for where, rest, concrete in found for problem in command_problems(where, rest, concrete)]
    capsys.readouterr()  # argparse's usage lines; the problems say what failed
    assert not problems, "\n".join(problems)


def test_the_options_the_synopsis_gives_every_command_are_theirs() -> None:
    shared = list(shared_option_lines(README))
    assert shared, "README's synopsis no longer lists the options shared by the commands"
    problems = []
    for where, named, options in shared:
        assert len(named) >= 5, (str(where), named)
        for name in named:
            known = set(completion.options(commands()[name]))
            problems += [f"{where}: {name} has no option {option}"
                         for option in OPTION.findall(options) if option not in known]  # fmt: skip
    assert not problems, "\n".join(problems)


# --- role variables ----------------------------------------------------------------------------------------------


def _role_dirs() -> list[Path]:
    return sorted(path for path in (PROJECT_ROOT / "roles").iterdir() if (path / "tasks").is_dir())


def _spec_options(options: dict[str, object] | None) -> Iterator[str]:
    for name, spec in (options or {}).items():
        yield name
        if isinstance(spec, dict) and isinstance(spec.get("options"), dict):
            yield from _spec_options(spec["options"])


@cache
def role_variables() -> frozenset[str]:
    """Every variable a role declares (defaults, vars, argument specs) and every one a playbook reads with a
    default (`rdmaforge_upgrade_serial | default(1)`)."""
    names: set[str] = set()
    for role in _role_dirs():
        for part in ("defaults", "vars"):
            for path in (role / part).glob("*.yml"):
                names |= set(yaml.safe_load(path.read_text()) or {})
        specs = role / "meta" / "argument_specs.yml"
        if specs.exists():
            for entry in (yaml.safe_load(specs.read_text())["argument_specs"] or {}).values():
                names |= set(_spec_options(entry.get("options")))
    for playbook in (PROJECT_ROOT / "playbooks").glob("*.yml"):
        names |= set(re.findall(r"\b(\w+) \| default\(", playbook.read_text()))
    return frozenset(names)


#: Names the docs give that start like a role variable but are not variables: facts and records the roles publish,
#: doctor's checks, results' keys, devices. Each must still be in the code (below), so this list cannot go stale.
NOT_VARIABLES = {
    "benchmark_results": "the benchmark role's fact",
    "hugepages_boot": "a doctor check",
    "mpi_version": "the mpi role's fact",
    "nccl_builder": "an inventory group (the builder)",
    "nccl_exit_codes": "run.json's key",
    "nccl_networks": "a fabric profile's field",
    "nccl_parser": "a benchmark of benchmarks/",
    "nccl_plugin_api_in_use": "the nccl_plugin role's fact",
    "nccl_plugin_api_versions": "the nccl_plugin role's fact",
    "nccl_tests_build_seconds": "the nccl_tests role's fact",
    "nccl_tests_make_argv": "a function of rdmaforge/nccl_build.py",
    "rdma_cm": "a device under /dev/infiniband",
    "rdma_netdevs": "a key of the rdmaforge_node fact",
    "rdma_source": "a key of the rdmaforge_node fact",
    "rdmaforge_node": "preflight's fact",
    "rdmaforge_topology": "preflight's fact",
    "ssh_trust_matrix": "the ssh_trust role's fact",
}
CODE_DIRS = ("roles", "library", "filter_plugins", "rdmaforge", "benchmarks", "playbooks")


@cache
def other_names() -> frozenset[str]:
    """Names of what is not a variable but may look like one: roles, modules, filters, callbacks."""
    names = {path.name for path in _role_dirs()}
    names |= {path.stem for path in (PROJECT_ROOT / "library").glob("*.py")}
    names |= {path.stem for path in (PROJECT_ROOT / "filter_plugins").glob("*.yml")}
    names |= {path.stem for path in (PROJECT_ROOT / "callback_plugins").glob("*.py")}
    return frozenset(names)


def variable_prefixes() -> tuple[str, ...]:
    return tuple(f"{name}_" for name in (*(path.name for path in _role_dirs()), "rdmaforge", "rdma", "nccl"))


#: `-e NAME=...`, `-e '{"NAME": ...}'`, and a backticked `NAME: value` or `NAME=value`.
EXTRA_VAR = re.compile(r"""-e\s+(?:'\{\s*"(\w+)"|([a-z]\w*)=)""")
SETTING = re.compile(r"^([a-z]\w*)(?::\s|=)")
#: A bare name in a code span: not part of a path, a dotted name, a call or an option.
BARE = re.compile(r"(?<![\w./:@-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w(/.-])")


def named_variables() -> Iterator[tuple[Where, str, bool]]:
    """(where, name, whether the docs set it) for every name that starts like a role variable (not `changed=0`, nor
    the syntax example `-e '{"json": 1}'`)."""
    prefixes = variable_prefixes()
    found: list[tuple[Where, str, bool]] = []
    for doc in DOCS:
        for where, line in code_lines(doc):
            found += [(where, match.group(1) or match.group(2), True) for match in EXTRA_VAR.finditer(line)]
        for where, span in spans(doc):
            found += [(where, match.group(1) or match.group(2), True) for match in EXTRA_VAR.finditer(span)]
            found += [(where, match.group(1), True) for match in SETTING.finditer(span)]
            found += [(where, match.group(1), False) for match in BARE.finditer(span)]
    yield from ((where, name, certain) for where, name, certain in found if name.startswith(prefixes))


def test_every_variable_the_docs_name_is_a_role_variable() -> None:
    known, others = role_variables(), other_names()
    problems = []
    for where, name, certain in named_variables():
        if name in known:
            continue
        if certain:
            problems.append(f"{where}: {name} is set like a variable, but no role or playbook declares it")
        elif name not in others and name not in NOT_VARIABLES:
            problems.append(f"{where}: {name} is neither a role variable nor a role, module, filter or callback")
    assert not problems, "\n".join(sorted(set(problems)))


def test_the_names_that_are_not_variables_are_in_the_code() -> None:
    code = "\n".join(path.read_text() for part in CODE_DIRS for path in (PROJECT_ROOT / part).rglob("*")
                     if path.suffix in {".py", ".yml", ".j2"})  # fmt: skip
    gone = [name for name in NOT_VARIABLES if not re.search(rf"\b{name}\b", code)]
    assert not gone, f"no longer in the code; take them out of NOT_VARIABLES and the docs: {gone}"
    declared = sorted(set(NOT_VARIABLES) & role_variables())
    assert not declared, f"these are variables now: {declared}"


# --- paths, make targets, modules, tests -------------------------------------------------------------------------

#: Top-level directories of the repository whose files the docs name by path (inventories/lab/ is written by
#: `rdmaforge lab up`, artifacts/ and build/ by runs: not in a checkout).
REPO_DIRS = ("playbooks", "roles", "tests", "benchmarks", "docs", "rdmaforge", "library", "filter_plugins",
             "callback_plugins", "scripts", "collection", "inventories/example")  # fmt: skip
PATH_WORD = re.compile(r"(?<![\w./~-])((?:" + "|".join(map(re.escape, REPO_DIRS)) + r")/[\w./<>*{}-]*)")
LINK = re.compile(r"\]\(((?!https?:|#)[^)#\s]+)")


def named_paths() -> Iterator[tuple[Where, str]]:
    for doc in DOCS:
        for where, text in [*spans(doc), *code_lines(doc)]:
            for match in PATH_WORD.finditer(text):
                yield where, match.group(1).split("::")[0].rstrip(".,;:")
        text = doc.read_text()
        for match in LINK.finditer(text):
            yield (
                Where(doc, _line(text, match.start())),
                str((doc.parent / match.group(1)).resolve().relative_to(PROJECT_ROOT)),
            )


def test_every_path_the_docs_name_exists() -> None:
    found = list(named_paths())
    assert len(found) >= 50, "the docs' paths were not found"
    missing = [f"{where}: {path}" for where, path in found
               if not list(PROJECT_ROOT.glob(re.sub(r"<[^>]*>", "*", path).rstrip("/") or "."))]  # fmt: skip
    assert not missing, "\n".join(missing)


def test_every_make_target_the_docs_name_is_in_the_makefile() -> None:
    targets = set(re.findall(r"^([\w-]+):", (PROJECT_ROOT / "Makefile").read_text(), re.MULTILINE))
    named = [
        (where, match.group(1))
        for doc in DOCS
        for where, text in [*spans(doc), *code_lines(doc)]
        for match in [re.match(r"make ([a-z][\w-]*)(?:\s|$)", text.strip())]
        if match
    ]
    assert len(named) >= 5, "the docs' make targets were not found"
    missing = [f"{where}: make {target}" for where, target in named if target not in targets]
    assert not missing, "\n".join(missing)


def test_every_module_and_filter_the_docs_name_exists() -> None:
    ours = {path.stem for path in (PROJECT_ROOT / "library").glob("*.py")}
    builtin = {path.stem for path in Path(ansible.modules.__file__).parent.glob("*.py")}
    filters = {path.stem for path in (PROJECT_ROOT / "filter_plugins").glob("*.yml")}
    problems = []
    for doc in DOCS:
        text = FENCE.sub("", doc.read_text())
        for name in re.findall(r"`(\w+)` module\b|\bmodule `(\w+)`", text):
            module = name[0] or name[1]
            if module not in ours | builtin:
                problems.append(f"{doc.name}: module {module}")
        for name in re.findall(r"\bfilter `(\w+)`|`(\w+)` filter\b|rdmaforge\.cluster\.(rdmaforge_\w+)", text):
            found = next(part for part in name if part)
            if found not in filters:
                problems.append(f"{doc.name}: filter {found}")
    assert not problems, problems


def test_every_test_the_docs_name_is_in_the_file_they_name() -> None:
    """`tests/x.py::test_y`, and `::test_z` after it for the same file."""
    problems = []
    for doc in DOCS:
        last: str | None = None
        for where, span in spans(doc):
            match = re.fullmatch(r"(tests/[\w/]+\.py)?(?:::(\w+)(?:\[[^\]]*\])?)?", span)
            if not match or not (match.group(1) or match.group(2)):
                continue
            last = match.group(1) or last
            if match.group(2) is None:
                continue
            if last is None:
                problems.append(f"{where}: ::{match.group(2)} names no file")
            elif not re.search(rf"^def {match.group(2)}\(", (PROJECT_ROOT / last).read_text(), re.MULTILINE):
                problems.append(f"{where}: {last} has no {match.group(2)}")
    assert not problems, "\n".join(problems)


# --- exit codes and counts ---------------------------------------------------------------------------------------


def section(doc: Path, heading: str) -> str:
    text = doc.read_text()
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start : end if end >= 0 else None]


def table_codes(text: str) -> list[int]:
    return [int(code) for code in re.findall(r"^\| (\d+) \|", text, re.MULTILINE)]


def test_the_exit_code_tables_are_the_clis() -> None:
    assert table_codes(section(README, "### Exit codes")) == sorted(int(code) for code in ExitCode)
    ci = table_codes((PROJECT_ROOT / "docs" / "ci.md").read_text())
    assert ci and set(ci) <= {int(code) for code in ExitCode}, ci


def said(pattern: str, doc: Path = README) -> list[int]:
    found = [int(number) for number in re.findall(pattern, " ".join(doc.read_text().split()))]
    assert found, f"{doc.name} no longer says {pattern!r}: update this test"
    return found


def test_the_counts_of_bad_inputs_are_the_tests() -> None:
    from inventory_cases import CASES as INVENTORIES

    from tests.unit.test_bad_inputs import BOUNDED, CASES

    assert set(said(r"(\d+) bad inventories")) == {len(INVENTORIES)}
    assert said(r"through (\d+) bad inputs") == [len(CASES) + len(BOUNDED)]
    assert said(r"for all (\d+)\)") == [len(BOUNDED)]


def test_the_seed_step_counts_are_the_rows() -> None:
    doc = PROJECT_ROOT / "docs" / "seed-coverage.md"
    rows: Counter[tuple[str, str]] = Counter()
    for line in doc.read_text().splitlines():
        match = re.match(r"\| (\d{3})\.\d+ \|", line)
        if match:
            status = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]][2]
            rows[match.group(1), status] += 1
    statuses = ("automated", "rendered-only", "out of scope")
    summary = {}
    for line in section(doc, "## Summary").splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and cells[1].isdigit():
            summary[cells[0].split()[0]] = [int(cell) for cell in cells[1:]]
    for seed in {seed for seed, _ in rows}:
        counts = [rows[seed, status] for status in statuses]
        assert summary[seed] == [*counts, sum(counts)], seed
    totals = [sum(count for (_, status_of), count in rows.items() if status_of == status) for status in statuses]
    assert summary["all"] == [*totals, sum(totals)]
    page = " ".join(doc.read_text().split())
    automated, rendered, out_of_scope = totals
    assert (
        f"**{sum(totals)} steps: {automated} automated, {rendered} rendered-only, {out_of_scope} out of scope**" in page
    )
    readme = " ".join(README.read_text().split())
    assert f"({sum(totals)}): {automated} automated" in readme
    assert f"{rendered} rendered-only and {out_of_scope} out of scope" in readme
