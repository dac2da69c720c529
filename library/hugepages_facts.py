#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hugepages_facts
short_description: Report reserved huge pages per page size, hugetlbfs mounts, and whether they are as expected
description:
  - Reads C(/proc/meminfo) (C(HugePages_Total), C(HugePages_Free), C(HugePages_Rsvd), C(HugePages_Surp),
    C(Hugepagesize), C(Hugetlb)), every C(/sys/kernel/mm/hugepages/hugepages-*kB) pool and the hugetlbfs
    mounts in C(/proc/mounts), and returns them as the C(hugepages) fact.
  - Compares the pool of O(expected_size) with O(expected_pages) and says in RV(reason), in plain words,
    why it differs - for example that the kernel was asked for 1 GiB pages but could not reserve them,
    which is what a container sharing its host's kernel reports. RV(satisfied) is never true on a guess.
  - Read-only; never reports a change. Works the same in check mode.
  - The parser is rdmaforge's C(rdmaforge/parsers/hugepages.py), shipped to the target as
    C(plugins/module_utils/hugepages.py) of the collection.
version_added: "0.1.0"
author:
  - rdmaforge contributors
options:
  meminfo_path:
    description: Where to read meminfo (tests point it at captured samples).
    type: path
    default: /proc/meminfo
  sysfs_path:
    description:
      - The directory of per-size pools. When it cannot be read, the default size from meminfo is the only
        size reported.
    type: path
    default: /sys/kernel/mm/hugepages
  mounts_path:
    description: The mount table to search for hugetlbfs mounts.
    type: path
    default: /proc/mounts
  cmdline_path:
    description:
      - The running kernel's command line, read to tell "not asked for at boot" from "asked for but not
        reserved" in RV(reason). A missing file just leaves that distinction out.
    type: path
    default: /proc/cmdline
  expected_pages:
    description: How many pages of O(expected_size) must be reserved, exactly (more is reported too).
    type: int
  expected_size:
    description:
      - The page size O(expected_pages) counts, with a unit - V(1G), V(1GB), V(2M), V(2048kB). A number
        without a unit is refused (kB and bytes are both common).
      - Defaults to the kernel's default huge page size (C(Hugepagesize)).
    type: str
  require:
    description: Fail the task, with RV(reason) as the message, when the expectation is not met.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - Without O(expected_pages) and O(expected_size) nothing is expected and RV(satisfied) is true.
    With O(expected_size) alone, at least one page of that size must be reserved.
"""

EXAMPLES = r"""
- name: Read huge page facts
  hugepages_facts:

- name: Fifty 1 GiB pages must be reserved after the reboot
  hugepages_facts:
    expected_pages: 50
    expected_size: 1G
  register: hugepages_check

- name: Say plainly when they are not
  ansible.builtin.debug:
    msg: "{{ hugepages_check.reason }}"
  when: not hugepages_check.satisfied

- name: Or stop the play
  hugepages_facts:
    expected_pages: 50
    expected_size: 1G
    require: true
"""

RETURN = r"""
ansible_facts:
  description: Facts set for the host.
  returned: always
  type: dict
  contains:
    hugepages:
      description: The same dict as RV(hugepages).
      type: dict
hugepages:
  description: Huge page state. Values the kernel did not report are null.
  returned: always
  type: dict
  contains:
    default_size_kb:
      description: C(Hugepagesize) - the default page size in kB (2048 or 1048576 on x86).
      type: int
    total:
      description: C(HugePages_Total) - pages reserved of the default size.
      type: int
    free:
      description: C(HugePages_Free) of the default size.
      type: int
    rsvd:
      description: C(HugePages_Rsvd) - promised to mappings but not yet faulted in.
      type: int
    surp:
      description: C(HugePages_Surp) - surplus pages above the pool (overcommit).
      type: int
    hugetlb_kb:
      description: C(Hugetlb) - memory in huge pages of all sizes, kB (kernel 4.16 and later).
      type: int
    mem_total_kb:
      description: C(MemTotal), kB.
      type: int
    by_size:
      description:
        - Per page size in kB (as a string key), the pool's C(nr), C(free), C(rsvd) and C(surp), from sysfs.
        - Every size the kernel offers appears, reserved or not.
      type: dict
      sample:
        "2048": {"nr": 0, "free": 0, "rsvd": 0, "surp": 0}
        "1048576": {"nr": 50, "free": 50, "rsvd": 0, "surp": 0}
    mounts:
      description: hugetlbfs mounts, each with C(path) and C(pagesize_kb).
      type: list
      elements: dict
      sample: [{"path": "/dev/hugepages", "pagesize_kb": 1048576}]
    cmdline_pages:
      description: Pages the running kernel's command line asks for, by size in kB.
      type: dict
      sample: {"1048576": 50}
satisfied:
  description: Whether the expectation holds (true when nothing is expected).
  returned: always
  type: bool
reason:
  description: What was found against what was expected, and the likely cause when they differ.
  returned: always
  type: str
  sample: >-
    HugePages_Total for 1048576 kB pages is 0, expected 50: the kernel could not reserve them
    (not enough contiguous memory, or a container sharing the host's kernel)
"""

import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.hugepages import (
    build_facts,
    evaluate,
    read_sysfs_pools,
    size_kb,
)

ARGUMENT_SPEC = {
    "meminfo_path": {"type": "path", "default": "/proc/meminfo"},
    "sysfs_path": {"type": "path", "default": "/sys/kernel/mm/hugepages"},
    "mounts_path": {"type": "path", "default": "/proc/mounts"},
    "cmdline_path": {"type": "path", "default": "/proc/cmdline"},
    "expected_pages": {"type": "int"},
    "expected_size": {"type": "str"},
    "require": {"type": "bool", "default": False},
}


def read_optional(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    expected_pages = params["expected_pages"]
    if expected_pages is not None and expected_pages < 0:
        module.fail_json(msg=f"expected_pages={expected_pages} must be 0 or more")
    expected_size = None
    if params["expected_size"] is not None:
        expected_size = size_kb(params["expected_size"])
        if expected_size is None:
            module.fail_json(
                msg=f"expected_size={params['expected_size']} is not a size with a unit: write 1G, 2M or 1048576kB"
            )

    meminfo = read_optional(params["meminfo_path"])
    if meminfo is None:
        module.fail_json(msg=f"meminfo_path={params['meminfo_path']} cannot be read")
    pools = read_sysfs_pools(params["sysfs_path"])
    if pools is None and os.path.exists(params["sysfs_path"]):
        module.warn(f"{params['sysfs_path']} cannot be listed; only the default page size from meminfo is reported")
    facts = build_facts(meminfo, pools, read_optional(params["mounts_path"]), read_optional(params["cmdline_path"]))
    satisfied, reason = evaluate(facts, expected_pages, expected_size)

    result: dict[str, Any] = {
        "changed": False,
        "hugepages": facts,
        "satisfied": satisfied,
        "reason": reason,
        "ansible_facts": {"hugepages": facts},
    }
    if params["require"] and not satisfied:
        module.fail_json(msg=reason, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
