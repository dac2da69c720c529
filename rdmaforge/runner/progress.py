"""Live progress from ansible-runner events: a line per task with its host counts, failures as they happen,
and the elapsed time of long asynchronous work (the NCCL build polls with async/poll).

On a terminal one status line is redrawn in place (and by a ticker thread every second, so the elapsed
time of a long build keeps moving). Anywhere else (CI logs, pipes), with TERM=dumb or with NO_COLOR set
(https://no-color.org), only plain lines are printed, with no escape sequence at all, and the "still running"
lines of an async task are throttled. ``AnsibleEcho`` shows Ansible's own output instead (``-v``).

Both pass what they show (task and host names, messages, node output) through ``rdmaforge.terminal.escaped``
themselves, since on a terminal the progress writes past its EscapingStream (the redraw is escape sequences): an
``ESC [2J`` or a carriage return there is printed as ``\\x1b[2J`` or ``\\x0d``, never acted on.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TextIO

from rdmaforge.runner.events import result_message
from rdmaforge.runner.recap import message_lines
from rdmaforge.terminal import escaped

CLEAR = "\r\x1b[K"
COUNTERS = ("ok", "changed", "failed", "unreachable", "skipped", "ignored")


def escapes_allowed(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Escape sequences (the redrawn status line, colour) only on a terminal, not with TERM=dumb nor NO_COLOR."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False
    return tty and environ.get("TERM", "") != "dumb" and not environ.get("NO_COLOR")


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class TaskState:
    name: str
    started: float
    handler: bool = False
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    running: dict[str, float] = field(default_factory=dict)  # host -> when its task started
    waiting: set[str] = field(default_factory=set)  # hosts in an async poll or an until/retries loop
    reported: dict[str, float] = field(default_factory=dict)  # host -> when "still running" was last printed

    def summary(self) -> str:
        parts = [f"ok={self.counts['ok']}"] + [f"{k}={v}" for k, v in self.counts.items() if k != "ok" and v]
        return " ".join(parts)


class Progress:
    """Renders events as they arrive; ``handle`` is ansible-runner's event_handler (it returns True: keep the event)."""

    def __init__(
        self,
        out: TextIO,
        tty: bool,
        clock: Callable[[], float] = time.monotonic,
        poll_every: float = 60.0,
        width: Callable[[], int] | None = None,
    ) -> None:
        self.out = out
        self.tty = tty
        self.clock = clock
        self.poll_every = poll_every
        self.width = width or (lambda: shutil.get_terminal_size((100, 24)).columns)
        self.started = clock()
        self.task: TaskState | None = None
        self.tasks = 0
        self.lock = threading.RLock()

    # --- events -----------------------------------------------------------------------------------------

    def handle(self, event: Mapping[str, Any]) -> bool:
        with self.lock:
            self._dispatch(str(event.get("event", "")), event.get("event_data") or {})
        return True

    def _dispatch(self, name: str, data: Mapping[str, Any]) -> None:
        if name == "playbook_on_play_start":
            self._finish_task()
            self._line(f"PLAY [{data.get('name') or data.get('play') or ''}]")
        elif name in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self._finish_task()
            self._start_task(str(data.get("name") or data.get("task") or ""), name.endswith("handler_task_start"))
        elif name in ("playbook_on_stats", "playbook_on_no_hosts_remaining"):
            self._finish_task()
            if name == "playbook_on_no_hosts_remaining":
                self._line("no hosts remaining: the play stopped")
        elif name.startswith("runner_on_") or name == "runner_retry":
            self._host_event(name, str(data.get("host") or ""), data)

    def _host_event(self, name: str, host: str, data: Mapping[str, Any]) -> None:
        task = self.task
        if task is None:
            return
        res: Mapping[str, Any] = data.get("res") or {}
        now = self.clock()
        if name == "runner_on_start":
            task.running[host] = now
        elif name in ("runner_on_async_poll", "runner_retry"):
            task.waiting.add(host)
            self._still_running(task, host, now - task.running.get(host, task.started), name, res)
        elif name in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped"):
            task.running.pop(host, None)
            task.waiting.discard(host)
            self._count(task, name, host, data, res)
        self._status()

    def _count(self, task: TaskState, name: str, host: str, data: Mapping[str, Any], res: Mapping[str, Any]) -> None:
        if name == "runner_on_ok":
            task.counts["ok"] += 1
            task.counts["changed"] += 1 if res.get("changed") else 0
        elif name == "runner_on_skipped":
            task.counts["skipped"] += 1
        elif name == "runner_on_unreachable":
            task.counts["unreachable"] += 1
            self._problem("UNREACHABLE", host, data, res)
        elif data.get("ignore_errors"):
            task.counts["ignored"] += 1
        else:
            task.counts["failed"] += 1
            self._problem("FAILED", host, data, res)

    def _problem(self, what: str, host: str, data: Mapping[str, Any], res: Mapping[str, Any]) -> None:
        """``  FAILED HOST: MESSAGE``, the message's further lines (recap.message_lines: every problem preflight
        lists, an argument spec's errors) indented under it."""
        action = str(data.get("task_action") or data.get("resolved_action") or "")
        first, *rest = message_lines(result_message(res), action)
        self._line(f"  {what} {host}: {first}")
        for line in rest:
            self._line(f"    {line}")

    def _still_running(self, task: TaskState, host: str, elapsed: float, name: str, res: Mapping[str, Any]) -> None:
        if self.tty:
            return  # the status line shows it, redrawn every second
        last = task.reported.get(host)
        if last is not None and self.clock() - last < self.poll_every:
            return
        task.reported[host] = self.clock()
        what = "retrying" if name == "runner_retry" else "still running"
        retries = f", {res['retries'] - res.get('attempts', 0)} retries left" if "retries" in res else ""
        self._line(f"  {host}: {what} ({duration(elapsed)}{retries})")

    # --- tasks ------------------------------------------------------------------------------------------

    def _start_task(self, name: str, handler: bool) -> None:
        self.tasks += 1
        self.task = TaskState(name=name, started=self.clock(), handler=handler)
        if not self.tty:
            self._line(f"[{duration(self.clock() - self.started):>7}] {'HANDLER' if handler else 'TASK'} [{name}]")
        self._status()

    def _finish_task(self) -> None:
        task, self.task = self.task, None
        if task is None:
            return
        took = duration(self.clock() - task.started)
        if self.tty:
            mark = "x" if task.counts["failed"] or task.counts["unreachable"] else "+"
            self._line(f"{mark} {task.name}  {task.summary()}  ({took})")
        else:
            self._line(f"{'':>9}  {task.summary()} ({took})")

    # --- output -----------------------------------------------------------------------------------------

    def status_text(self) -> str:
        task = self.task
        if task is None:
            return ""
        now = self.clock()
        parts = [f"[{duration(now - self.started)}] {task.name}", task.summary()]
        if task.running:
            parts.append(f"running on {len(task.running)}")
        for host in sorted(task.waiting):
            parts.append(f"{host} {duration(now - task.running.get(host, task.started))}")
        return "  ".join(parts)

    def _status(self) -> None:
        if not self.tty:
            return
        text = escaped(self.status_text(), one_line=True)  # cut after escaping: the escapes take columns too
        limit = max(20, self.width() - 1)
        self.out.write(CLEAR + (text if len(text) <= limit else text[: limit - 3] + "..."))
        self.out.flush()

    def _line(self, text: str) -> None:
        # One line each: a name with a newline in it must not start a line of its own (a forged "PLAY RECAP").
        self.out.write((CLEAR if self.tty else "") + escaped(text, one_line=True) + "\n")
        self.out.flush()
        if self.tty and self.task is not None:
            self._status()

    def tick(self) -> None:
        """Redraw the status line (terminal only): the elapsed times move even when no event arrives."""
        with self.lock:
            self._status()

    def close(self) -> None:
        with self.lock:
            self._finish_task()
            if self.tty:
                self.out.write(CLEAR)
                self.out.flush()


class AnsibleEcho:
    """Ansible's own output, event by event (each event's ``stdout``), in place of the condensed progress (-v).

    Every escape sequence in it is shown escaped: Ansible's colour is off in rdmaforge runs (execute.runner_env),
    so any there came from a node's output or a name. Its line ends are CR LF (Ansible writes to a pty): those
    are newlines; a lone CR, which would overwrite the line, is escaped.
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()

    def handle(self, event: Mapping[str, Any]) -> bool:
        text = str(event.get("stdout") or "")
        if text:
            with self.lock:
                self.out.write(escaped(text.replace("\r\n", "\n")) + "\n")
                self.out.flush()
        return True

    def close(self) -> None:
        pass


class Ticker:
    """Calls ``progress.tick()`` every ``interval`` seconds in a daemon thread while the run lasts."""

    def __init__(self, progress: Progress, interval: float = 1.0) -> None:
        self.progress = progress
        self.interval = interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rdmaforge-progress", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self.progress.tick()

    def __enter__(self) -> Ticker:
        if self.progress.tty:
            self.thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
