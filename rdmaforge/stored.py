"""Schemas of the JSON files rdmaforge stores and reads back, and one loader that checks them.

``load(path, SCHEMA)`` returns the parsed document or raises UserError naming the file, the key path
(``nccl.collectives[1]``), what was found and what is allowed. Consumers can then index the document
without ad-hoc ``.get`` guards. Unknown keys are allowed (newer writers may add some).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaforge import fabrics, magic_bytes
from rdmaforge.bench.verdict import threshold_problem
from rdmaforge.errors import UserError
from rdmaforge.plain_data import TOO_DEEP, too_deep
from rdmaforge.text import named_first

#: Stored files are written by rdmaforge itself and are small; anything bigger is not one of them.
MAX_BYTES = 64 << 20
#: A pairwise sweep's raw.json holds both directions of every pair on every rail: about 150 bytes a direction
#: (compact JSON), n(n-1) directions a rail, so 150 MB for 1000 nodes on one rail; a plan whose sweep would write
#: more is refused before anything is measured (rdmaforge.pairwise.plan.raw_size_problem).
PAIRWISE_RAW_MAX_BYTES = 1 << 30
#: Names that become file names (a collective's log ``nccl-NAME.log``): no separator, no dot-dot.
SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

Check = Callable[[Any], str | None]


class Spec:
    """A JSON value's expected shape."""

    def problems(self, value: Any, where: str) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True)
class Scalar(Spec):
    """A JSON scalar of one of ``kinds`` (``number`` excludes booleans); ``check`` adds a value rule."""

    kinds: tuple[str, ...]
    check: Check | None = None

    def problems(self, value: Any, where: str) -> list[str]:
        if not any(_is(kind, value) for kind in self.kinds):
            return [f"{where}: expected {' or '.join(self.kinds)}, got {shown(value)}"]
        problem = self.check(value) if self.check is not None and value is not None else None
        return [f"{where}: {problem}, got {shown(value)}"] if problem else []


@dataclass(frozen=True)
class ListOf(Spec):
    """A list of ``item``; with ``unique_key``, objects whose value of that key (a string) no other item has; with
    ``unique``, strings no other item repeats."""

    item: Spec
    nullable: bool = False
    unique_key: str | None = None
    unique: bool = False

    def problems(self, value: Any, where: str) -> list[str]:
        if value is None and self.nullable:
            return []
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {shown(value)}"]
        found: list[str] = []
        first: dict[str, int] = {}
        for index, item in enumerate(value):
            found += self.item.problems(item, f"{where}[{index}]")
            key = item.get(self.unique_key) if self.unique_key and isinstance(item, dict) else None
            key = item if self.unique and isinstance(item, str) else key
            if not isinstance(key, str):
                continue
            if key in first:
                named = f"{where}[{index}]" + (f".{self.unique_key}" if self.unique_key else "")
                found.append(f"{named}: {shown(key)} is listed more than once (also {where}[{first[key]}])")
            else:
                first[key] = index
        return found


@dataclass(frozen=True)
class MapOf(Spec):
    """An object whose every value is ``value``; ``key`` adds a rule for its keys."""

    value: Spec
    nullable: bool = False
    key: Check | None = None

    def problems(self, value: Any, where: str) -> list[str]:
        if value is None and self.nullable:
            return []
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {shown(value)}"]
        found: list[str] = []
        for key, item in value.items():
            problem = self.key(key) if self.key is not None else None
            if problem:
                found.append(f"{where}: key {problem}, got {shown(key)}")
            found += self.value.problems(item, f"{where}.{key}")
        return found


@dataclass(frozen=True)
class Obj(Spec):
    fields: Mapping[str, Spec]
    required: frozenset[str] = field(default_factory=frozenset)
    nullable: bool = False

    def problems(self, value: Any, where: str) -> list[str]:
        if value is None and self.nullable:
            return []
        if not isinstance(value, dict):
            return [f"{where or 'the document'}: expected an object, got {shown(value)}"]
        found = [f"{_join(where, key)}: missing (required)" for key in sorted(self.required) if key not in value]
        for key, spec in self.fields.items():
            if key in value:
                found += spec.problems(value[key], _join(where, key))
        return found


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _is(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return _numeric(value) and not beyond_float(value) and math.isfinite(value)
    if kind == "any number":  # NaN, Infinity and integers beyond a float's range too (pairwise: a failed rate)
        return _numeric(value)
    raise ValueError(kind)


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def beyond_float(value: Any) -> bool:
    """An integer too large for a float (above about 1.8e308, 309 digits): finite JSON, but float() and
    math.isfinite raise OverflowError on it. Comparing an int with a float is exact: this cannot overflow."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max


def shown(value: Any) -> str:
    """``value`` as JSON, cut to 60 characters; an integer beyond a float's range by its number of digits."""
    if beyond_float(value):
        try:
            digits = str(len(str(abs(value))))
        except ValueError:  # more digits than Python writes (json.loads never reads such an integer)
            digits = f"more than {sys.get_int_max_str_digits()}"
        return f"an integer of {digits} digits, beyond a float's range"
    try:
        text = json.dumps(value)
    except RecursionError:  # a schema's own check before check() ran (rdmaforge.bench.baseline's kind check)
        return f"a value {TOO_DEEP}"
    return text if len(text) <= 60 else text[:57] + "..."


#: The largest magnitude a plot draws. A plotting library adds the values it draws, steps its ticks by ten times a
#: power of ten and pads its axes: near the largest float (about 1.8e308) that overflows (matplotlib 3.11 warns from
#: 1e308 up, and draws 8e307 cleanly, as a line, a bar or a line-rate mark); 5e307 keeps a margin below that. No
#: rate or throughput comes within orders of magnitude of it: a value beyond is a corrupt record, which the tables
#: show and the plots leave out, saying so. (A line rate of 1e308 Gb/s, 1.25e307 GB/s, the schema takes, is drawn.)
PLOT_LIMIT = 5e307


def drawable(value: Any) -> bool:
    """Whether a plot can take ``value``: a finite number (no boolean, no integer beyond a float's range) of at most
    ``PLOT_LIMIT`` in magnitude."""
    return _numeric(value) and not beyond_float(value) and math.isfinite(value) and abs(value) <= PLOT_LIMIT


def undrawn_note(plot: str, named: Sequence[str], most: int = 4) -> str:
    """The note for the values a plot left out (``drawable`` false), ``named`` as the reader knows each one."""
    return (f"{plot}: {len(named)} value(s) left out of the plot, not finite or beyond {PLOT_LIMIT:g}: "
            f"{named_first(named, most)}")  # fmt: skip


def fraction(low: float, high: float, high_open: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, str):
            return None  # the string forms are checked by their own rule
        ok = low <= value < high if high_open else low <= value <= high
        return None if ok else f"must be from {low} to {'below ' if high_open else ''}{high}"

    return check


def positive(value: Any) -> str | None:
    return None if value > 0 else "must be greater than 0"


def non_negative(value: Any) -> str | None:
    return None if value >= 0 else "must be 0 or more"


def count(most: int) -> Check:
    """A whole count from 0 to ``most``: a bigger one is a corrupt file, not a machine."""

    def check(value: Any) -> str | None:
        return None if 0 <= value <= most else f"must be a count from 0 to {most}"

    return check


#: Bounds of a node's counts in summary.json (and of its GPUs in run.json and a baseline): logical CPUs (the largest
#: single-image machines have a few thousand) and GPUs (eight or so today).
MAX_CPUS = 1 << 16
MAX_GPUS = 1 << 10


def equals(expected: Any) -> Check:
    def check(value: Any) -> str | None:
        return None if value == expected else f"must be {json.dumps(expected)}"

    return check


#: A message size in bytes fits in 64 bits: 20 digits at most (Python refuses to read an int of over 4300).
MAX_SIZE_DIGITS = 20


def digits(value: Any) -> str | None:
    """A baseline's message-size key: as nccl-tests and the report write sizes. "016" named no size a run has, so a
    regression at 16 bytes was never compared (not judged rather than fail: review round 29b)."""
    if value.isascii() and value.isdigit() and len(value) <= MAX_SIZE_DIGITS and (value == "0" or value[0] != "0"):
        return None
    return f"must be a message size in bytes (digits only, no leading zero, {MAX_SIZE_DIGITS} at most)"


def one_of(*allowed: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}"

    return check


def safe_name(value: Any) -> str | None:
    if SAFE_NAME.match(value) and ".." not in value:
        return None
    return "must be a plain name (letters, digits, _ . -; no '/' or '..'): it becomes a file name"


def host_name(value: Any) -> str | None:
    """A node's name as the summary prints it on its own line: none is empty or holds a control character (a newline
    would print half of it as another line)."""
    if not value:
        return "must be a host name, not empty"
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        return "must be a host name without control characters (a newline, an escape)"
    return None


def _no_threshold_or_fraction(value: Any) -> str | None:
    return threshold_problem(value, 1.0)  # 0 would pass anything: an empty threshold is "not judged"


def _threshold(value: Any) -> str | None:
    return threshold_problem(value, None)


STRING = Scalar(("string",))
OPT_STRING = Scalar(("string", "null"))
SCALAR = Scalar(("string", "number", "boolean", "null"))
PERCENTILES = ("p50", "p75", "p90", "p95")
PERCENTILE = Obj({"samples_per_s": Scalar(("number", "null"), non_negative)}, frozenset({"samples_per_s"}))

#: run.json of a benchmark run (roles/benchmark/tasks/report.yml writes it).
RUN_JSON = Obj(
    {
        "fabric": Scalar(("string",), one_of(*fabrics.NAMES)),
        "nodes": ListOf(STRING),
        "line_rate_gbps": Scalar(("number", "null"), non_negative),  # 0: the fabric profile's default
        # Each node's rails (rdmaforge.bench.line_rate.node_line_rate); absent in runs recorded before them.
        "port_line_rates": MapOf(Obj({"gbps": Scalar(("number", "null"), non_negative), "detail": STRING},
                                     frozenset({"gbps", "detail"}))),  # fmt: skip
        "min_efficiency": Scalar(("number", "string", "null"), _no_threshold_or_fraction),
        "baseline": OPT_STRING,
        "tolerance": Scalar(("number",), fraction(0.0, 1.0, high_open=True)),
        "nccl": Obj(
            {
                "status": STRING,
                "reason": OPT_STRING,
                # Each collective's log is judged once: a name listed twice printed its line twice.
                "collectives": ListOf(Scalar(("string",), safe_name), unique=True),
            },
            frozenset({"status"}),
        ),
        "e2e_enabled": Scalar(("boolean",)),
        # Whether the e2e training ran, and why not; absent in runs recorded before it.
        "e2e": Obj({"status": STRING, "reason": OPT_STRING}, frozenset({"status"})),
        "accelerators": Obj({"acspeed": Scalar(("boolean",)), "net_plugin": Scalar(("string",))}),
        "gpus": MapOf(Scalar(("integer", "null"), count(MAX_GPUS))),
        # Each node's host name (its facts), which nccl-tests' Rank lines name; absent in runs recorded before.
        "hostnames": MapOf(OPT_STRING),
        # Each collective's launch exit code (timeout, mpirun, the binary); absent in runs recorded before.
        "nccl_exit_codes": MapOf(Scalar(("integer", "null"))),
        "required": ListOf(STRING),
        "optional": ListOf(STRING),
    },
    # The role always records the fabric: without it the transport and the line rate would be judged against a
    # guess (tcp), so a run.json without one is refused, naming the key.
    frozenset({"fabric"}),
)

#: The most nodes, ranks, steps or samples a training can count: a bigger number is a corrupt file, not a cluster
#: (and beyond a float's range it would end the linearity's arithmetic in an OverflowError).
MAX_TRAINING_COUNT = 1 << 40


def training_count(least: int) -> Check:
    """A whole count from ``least`` to MAX_TRAINING_COUNT."""

    def check(value: Any) -> str | None:
        if least <= value <= MAX_TRAINING_COUNT:
            return None
        return f"must be a count from {least} to {MAX_TRAINING_COUNT}"  # Scalar adds the value (shown)

    return check


_E2E_RUN = Obj(
    {
        "nodes": Scalar(("integer", "null"), training_count(1)),
        "world_size": Scalar(("integer", "null"), training_count(1)),
        "global_batch": Scalar(("integer", "null"), training_count(1)),
        "backend": OPT_STRING,
        # The training's torch release (absent in runs recorded before ddp_train.py printed it).
        "torch": OPT_STRING,
        "warmup_steps": Scalar(("integer", "null"), training_count(0)),
        # Measured steps: the percentiles are taken over them, so a result of none holds no measurement.
        "steps": Scalar(("integer", "null"), training_count(1)),
        "percentiles": Obj({p: PERCENTILE for p in PERCENTILES}, frozenset(PERCENTILES)),
        # ddp_train.py: whether the ranks' replicas ended the same (absent in runs recorded before it).
        "replicas_in_sync": Scalar(("boolean", "null")),
    },
    frozenset({"percentiles"}),
    nullable=True,
)

#: e2e.json of a benchmark run (the e2e training benchmark's result).
E2E_JSON = Obj(
    {
        "one": _E2E_RUN,
        "single": _E2E_RUN,
        "multi": _E2E_RUN,
        "ranks_per_node": Scalar(("integer", "null"), training_count(1)),
        # Training logs in the run directory per run (one, single, multi): file names, never paths, each once (one
        # node's log never stands for another's).
        "logs": MapOf(ListOf(Scalar(("string",), safe_name), unique=True), nullable=True),
        "min_linearity": Scalar(("number", "string", "null"), _threshold),
        "min_intra_node_linearity": Scalar(("number", "string", "null"), _threshold),
        "error": OPT_STRING,
    }
)

#: summary.json (roles/cluster_summary writes it; `rdmaforge summary` prints it).
SUMMARY_JSON = Obj(
    {
        "nodes": ListOf(
            Obj(
                {
                    "host": Scalar(("string",), host_name),
                    "address": SCALAR,
                    "os": SCALAR,
                    "fabric": SCALAR,
                    # null: the node's preflight fact was missing, or could not count the GPUs (unknown, not 0).
                    "cpus": Scalar(("integer", "null"), count(MAX_CPUS)),
                    "gpus": Scalar(("integer", "null"), count(MAX_GPUS)),
                    "rdma_devices": ListOf(STRING, nullable=True),
                    # One line per port (rdmaforge.cluster_summary.port_lines); absent in earlier summaries.
                    "rdma_ports": ListOf(STRING, nullable=True),
                    "rdma_packages": MapOf(SCALAR, nullable=True),
                    "mpi_version": SCALAR,
                    "nccl_build": SCALAR,
                    "nccl_plugin": SCALAR,
                    "nccl_plugin_version": SCALAR,
                    "nccl_plugin_api_versions": ListOf(Scalar(("string", "integer")), nullable=True),
                    "nccl_settings": MapOf(SCALAR, nullable=True),
                    # When the run that last saw this node wrote the entry (rdmaforge.cluster_summary).
                    "as_of": OPT_STRING,
                    # Why this run did not see the node: the entry (if any) is an earlier run's.
                    "not_in_this_run": OPT_STRING,
                    # The entry its last complete converge recorded, which the node still matches (site.yml's fast
                    # path, summary.yml on its own): read then, not by this run.
                    "recorded": Scalar(("boolean", "null")),
                },
                frozenset({"host"}),
            ),
            unique_key="host",  # two entries for one node: neither can be shown as the node's
        ),
        "time": OPT_STRING,
        "previous_summary_problem": OPT_STRING,
    },
    frozenset({"nodes"}),
)


#: What `rdmaforge baseline RUN_DIR -o FILE` writes (rdmaforge.bench.baseline.make) and a later run is compared
#: with: the kind and version first, the cluster fingerprint, busbw in GB/s per collective and message size, and
#: the e2e p50 throughput of the 1-node and N-node runs with the workload each was measured on (backend, world size,
#: per-rank batch, warm-up and measured steps: rdmaforge.bench.baseline.WORKLOAD). The workload keys are optional:
#: a baseline made before they were recorded still loads (its busbw is compared), and its e2e throughput is not
#: judged, naming what it lacks (rdmaforge.bench.baseline.other_workload), never a pass on an unknown workload.
BASELINE_KIND = Obj({"kind": Scalar(("string",), equals("rdmaforge-baseline"))}, frozenset({"kind"}))
BASELINE = Obj(
    {
        "kind": Scalar(("string",), equals("rdmaforge-baseline")),
        "version": Scalar(("integer",), equals(1)),
        "source": STRING,
        "fingerprint": Obj(
            {
                "fabric": OPT_STRING,
                "nodes": ListOf(STRING),
                "node_count": Scalar(("integer",), non_negative),
                "gpus": MapOf(Scalar(("integer",), count(MAX_GPUS))),
            }
        ),
        "nccl": MapOf(
            Obj({"busbw_gbs": MapOf(Scalar(("number",), non_negative), key=digits)}, frozenset({"busbw_gbs"}))
        ),
        "e2e": Obj(
            {
                "single_p50_samples_per_s": Scalar(("number", "null"), non_negative),
                "single_backend": OPT_STRING,
                "multi_p50_samples_per_s": Scalar(("number", "null"), non_negative),
                "multi_backend": OPT_STRING,
            }
        ),
    },
    frozenset({"kind", "version", "fingerprint", "nccl", "e2e"}),
)
#: The workload keys of a baseline's ``e2e`` (each run's world size, per-rank batch, warm-up and measured steps; its
#: backend is BASELINE's), checked by rdmaforge.bench.baseline.load after BASELINE, with the same wording. All
#: optional (null: the run did not say it; absent: a baseline made before they were recorded). Kept apart from
#: BASELINE so that tests/unit/test_bad_inputs.py's coverage of BASELINE's keys is not claimed for them:
#: tests/unit/test_bench_e2e_judged_fairly.py damages each of these keys instead.
BASELINE_WORKLOAD = Obj(
    {
        "e2e": Obj(
            {
                f"{run}_{key}": spec
                for run in ("single", "multi")
                for key, spec in (
                    ("world_size", Scalar(("integer", "null"), positive)),
                    ("per_rank_batch", Scalar(("number", "null"), positive)),
                    ("warmup_steps", Scalar(("integer", "null"), non_negative)),
                    ("steps", Scalar(("integer", "null"), non_negative)),
                )
            }
        )
    }
)


_PAIRWISE_MEASUREMENT = Obj(
    {
        "a": STRING,
        "b": STRING,
        "nic": STRING,
        # NaN, Infinity, a negative or a too large rate: a failed measurement (rdmaforge.pairwise.score.checked).
        "gbps": Scalar(("any number", "null")),
        "status": STRING,
        "round": Scalar(("integer",), non_negative),
        "detail": OPT_STRING,
    },
    frozenset({"a", "b", "nic", "status"}),
)

#: raw.json of a pairwise sweep (roles/pairwise/tasks/report.yml writes it; rdmaforge.pairwise.report reads it).
#: Its thresholds are the role's variables, checked (and named) by rdmaforge.pairwise.report.thresholds_from.
PAIRWISE_RAW = Obj(
    {
        "plan": Obj(
            {
                "nodes": ListOf(STRING, unique=True),
                "rails": ListOf(STRING, unique=True),
                "rounds": ListOf(ListOf(ListOf(STRING))),
                "notes": ListOf(STRING),
            },
            frozenset({"nodes", "rails", "rounds"}),
        ),
        "measurements": ListOf(_PAIRWISE_MEASUREMENT),
        "thresholds": MapOf(Scalar(("any number", "string", "null")), nullable=True),
        "method": STRING,
        "notes": ListOf(STRING),
        # MPI slots per node in hostfile.healthy: its GPU count, null where it is unknown (the role's
        # rdmaforge_gpu_counts gives null there, and hostfile.healthy names it): refused, it failed the whole report.
        "slots": MapOf(Scalar(("integer", "null"), count(MAX_GPUS)), nullable=True),
        "single_stream": Obj(
            {"streams": Scalar(("integer", "null"), non_negative), "measurements": ListOf(_PAIRWISE_MEASUREMENT)},
            nullable=True,
        ),
    },
    frozenset({"plan", "measurements"}),
)


def read_bounded(path: Path, limit: int = MAX_BYTES) -> bytes | None:
    """The bytes of ``path``, or None when it holds more than ``limit``: a sparse or huge file is refused by its
    size, a device (``/dev/zero``) that reports none after ``limit + 1`` bytes, never read whole. A named pipe or a
    socket is refused (OSError) before it is opened: opening a pipe no one writes to waits for ever."""
    # Opened without blocking, then looked at through the descriptor: a pipe swapped in after a look by name would
    # still be opened (review round 30).
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(descriptor)
        if stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode):
            raise OSError(errno.EINVAL, "a named pipe or socket, not a file", str(path))
        if info.st_size > limit:
            return None
        os.set_blocking(descriptor, True)
        data = handle.read(limit + 1)
    return None if len(data) > limit else data


#: What a stored document that is not UTF-8 is, by its first bytes (rdmaforge writes them as plain UTF-8 JSON): named,
#: with what turns it back into one.
_NOT_UTF8_KINDS: tuple[tuple[bytes, str], ...] = (
    *((bom, f"{codec[:6].upper()} text (save it as UTF-8)") for bom, codec in magic_bytes.BOMS if codec != "utf-8"),
    (magic_bytes.GZIP, "gzip-compressed (gunzip it first)"),
    (magic_bytes.BZIP2, "bzip2-compressed (bunzip2 it first)"),
    (magic_bytes.XZ, "xz-compressed (unxz it first)"),
    (magic_bytes.ZSTD, "zstd-compressed (unzstd it first)"),
    (magic_bytes.ZIP, "a zip archive (unzip it first)"),
)


def load(path: Path, schema: Spec, what: str, limit: int = MAX_BYTES) -> Any:
    """The JSON document at ``path`` checked against ``schema``; UserError naming the file otherwise. ``limit``: the
    most bytes such a document can hold (MAX_BYTES, or one that grows with the cluster: PAIRWISE_RAW_MAX_BYTES)."""
    try:
        data = read_bounded(path, limit)
        if data is None:
            raise UserError(f"{path}: more than {limit >> 20} MiB, too large for {what}")
    except IsADirectoryError as exc:
        raise UserError(f"{path}: is a directory, expected {what}") from exc
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        kind = next((words for magic, words in _NOT_UTF8_KINDS if data.startswith(magic)), None)
        if kind is not None:
            raise UserError(f"{path}: {kind}, not UTF-8 text; expected {what}") from exc
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected {what}") from exc
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise UserError(f"{path}: not valid JSON ({where}); expected {what}") from exc
    except RecursionError as exc:
        raise UserError(f"{path}: {TOO_DEEP}; expected {what}") from exc
    except ValueError as exc:
        # Python's own wording names an interpreter setting ("use sys.set_int_max_str_digits()"), no help to a user.
        detail = "an integer of more than 4300 digits" if "integer string conversion" in str(exc) else str(exc)
        raise UserError(f"{path}: not valid JSON ({detail}); expected {what}") from exc
    check(document, schema, f"{path}", what)
    return document


def check(document: Any, schema: Spec, name: str, what: str) -> None:
    """UserError listing (up to five) places where ``document`` does not match ``schema``, or saying that it nests
    too deeply (checking, printing or walking it would exhaust the interpreter's recursion limit)."""
    if too_deep(document):
        raise UserError(f"{name}: {TOO_DEEP}; expected {what}")
    found = schema.problems(document, "")
    if found:
        more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
        raise UserError(f"{name}: not a valid {what}: " + "; ".join(found[:5]) + more)
