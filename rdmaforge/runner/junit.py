"""JUnit XML for CI: one testsuite per command run, one testcase per host (and per extra check, such as the
benchmark verdict). The schema is the one Jenkins, GitLab and GitHub test reporters read."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    name: str
    classname: str
    time: float = 0.0
    #: outcome: "passed", "failed" (an assertion about the host failed), "error" (unreachable, could not run),
    #: or "skipped".
    outcome: str = "passed"
    message: str = ""
    details: str = ""


def _xml_safe(text: str) -> str:
    # XML 1.0 forbids most control characters, which command output sometimes carries.
    return "".join(c for c in text if c in "\t\n\r" or ord(c) >= 0x20)


def build(
    suite: str,
    cases: Sequence[Case],
    time: float = 0.0,
    timestamp: dt.datetime | None = None,
    properties: Mapping[str, str] | None = None,
) -> ET.ElementTree[ET.Element]:
    counts = {o: sum(1 for c in cases if c.outcome == o) for o in ("failed", "error", "skipped")}
    root = ET.Element("testsuites", name="rdmaforge", tests=str(len(cases)), failures=str(counts["failed"]),
                      errors=str(counts["error"]), skipped=str(counts["skipped"]), time=f"{time:.3f}")  # fmt: skip
    stamp = (timestamp or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(counts["failed"]),
                         errors=str(counts["error"]), skipped=str(counts["skipped"]), time=f"{time:.3f}",
                         timestamp=stamp)  # fmt: skip
    if properties:
        props = ET.SubElement(node, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=key, value=_xml_safe(str(value)))
    for case in cases:
        element = ET.SubElement(node, "testcase", name=case.name, classname=case.classname, time=f"{case.time:.3f}")
        tag = {"failed": "failure", "error": "error", "skipped": "skipped"}.get(case.outcome)
        if tag is not None:
            child = ET.SubElement(element, tag, message=_xml_safe(case.message.splitlines()[0] if case.message else ""))
            if tag != "skipped":
                child.set("type", case.outcome)
            child.text = _xml_safe(case.details or case.message)
    ET.indent(root)
    return ET.ElementTree(root)


def write(
    path: Path,
    suite: str,
    cases: Sequence[Case],
    time: float = 0.0,
    timestamp: dt.datetime | None = None,
    properties: Mapping[str, str] | None = None,
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    build(suite, cases, time, timestamp, properties).write(path, encoding="utf-8", xml_declaration=True)
    return path
