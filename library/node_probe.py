#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_probe
short_description: Read a node's GPUs, RDMA devices and NICs in one module call
description:
  - The node probe of preflight and doctor (C(roles/preflight/tasks/node_probe.yml)), in one round trip to the node
    instead of one task per probe. Read-only; never reports a change. Works the same in check mode.
  - Looks for the GPU tools (C(nvidia-smi), C(lspci)) in O(tool_dirs), as C(ansible.builtin.find) would list them.
    With C(nvidia-smi), runs C(nvidia-smi -L) and, when that answers, C(nvidia-smi --query-gpu=compute_cap
    --format=csv,noheader); without a working C(nvidia-smi), runs C(lspci -n -mm). Each result is what
    C(ansible.builtin.command) would register (C(cmd), C(rc), C(stdout), C(stderr)), or C(skipped) when not run.
  - Maps each GPU to its nearest RDMA device as the C(gpu_topology) module does (RV(topology), fact
    C(rdmaforge_topology)), reads the RDMA devices as the C(rdma_devices) module does (RV(rdma), fact
    C(rdma_devices)) and the NICs as the C(nic_facts) module does (RV(nics), facts C(nics) and
    C(default_route_interface)). The three share rdmaforge's C(rdmaforge/parsers/probes.py), shipped to the target as
    C(plugins/module_utils/probes.py) of the collection.
  - With O(df_paths), measures their free space with C(df -P -k) (RV(df)), as preflight's free-space check reads it.
  - A node without iproute2 (or with one too old for C(ip -j)) is not failed; RV(nics) holds the message C(nic_facts)
    would have failed with. An C(nvidia-smi topo -m) that prints no matrix fails the module, as it fails
    C(gpu_topology).
version_added: "0.1.0"
author:
  - rdmaforge contributors
options:
  tool_dirs:
    description: Directories (not below them) where the GPU tools are looked for.
    type: list
    elements: path
    default: [/usr/bin, /usr/sbin]
  tool_names:
    description:
      - Names (or shell patterns) of the entries of O(tool_dirs) to list; C(nvidia-smi) and C(lspci) are the
        entries of exactly those names, the first in sorted path order.
    type: list
    elements: str
    default: [nvidia-smi, lspci]
  nic_exclude:
    description: Interfaces that are not NICs of the node, as names or shell patterns (C(nic_facts)' O(exclude)).
    type: list
    elements: str
    default: [lo]
  ip_path:
    description:
      - The iproute2 C(ip) executable (C(nic_facts)' O(ip_path)); looked up when not given.
      - A path given that is not an executable file is named in RV(ip_path_problem) (a typo in the inventory, which
        preflight refuses); a node where C(ip) is not found, or is too old for C(ip -j), only has RV(nics) say why.
    type: path
  df_paths:
    description: Paths whose filesystems' free space C(df -P -k) measures (RV(df)); none by default.
    type: list
    elements: path
    default: []
  sys_root:
    description:
      - The sysfs mount point (tests point it at a fake tree). The PCI tree, C(class/infiniband) and C(class/net)
        under it are what C(gpu_topology), C(rdma_devices) and C(nic_facts) read by default.
    type: path
    default: /sys
  command_timeout:
    description:
      - Seconds each command the module runs (nvidia-smi, lspci, df, ibv_devinfo, rdma, ibstat, ip) may take; one
        that takes longer is killed and read as failing (rc 124, a stderr saying so).
      - A tool that hangs while SSH still answers (a GPU off the bus, a stale NFS mount, a wedged HCA) otherwise
        holds the task, the run and the inventory's lock for ever.
    type: int
    default: 60
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Probe the GPUs, RDMA devices and NICs
  rdmaforge.cluster.node_probe:
    nic_exclude: [lo, "docker*", "veth*"]
  register: probe

- name: Show what nvidia-smi listed
  ansible.builtin.debug:
    msg: "{{ probe.nvidia_smi.stdout }}"
  when: probe.nvidia_smi.rc | default(1) == 0
"""

RETURN = r"""
tool_files:
  description: The entries of O(tool_dirs) whose name matches O(tool_names), sorted (what C(find) would list).
  returned: always
  type: list
  elements: str
tools:
  description: The C(nvidia-smi) and C(lspci) found (keys C(nvidia_smi) and C(lspci)); empty when not found.
  returned: always
  type: dict
nvidia_smi:
  description: C(nvidia-smi -L) (C(cmd), C(rc), C(stdout), C(stderr)), or C(skipped) without C(nvidia-smi).
  returned: always
  type: dict
compute_caps:
  description: C(nvidia-smi --query-gpu=compute_cap --format=csv,noheader), or C(skipped) unless C(nvidia-smi -L)
    exited 0.
  returned: always
  type: dict
lspci:
  description: C(lspci -n -mm), or C(skipped) with a working C(nvidia-smi) or without C(lspci).
  returned: always
  type: dict
df:
  description: C(df -P -k) on O(df_paths) (C(cmd), C(rc), C(stdout), C(stderr)), or C(skipped) without them.
  returned: always
  type: dict
topology:
  description: The C(gpu_topology) module's rail map (also the C(rdmaforge_topology) fact).
  returned: always
  type: dict
sysfs_gpus:
  description: How many GPUs the PCI tree in sysfs lists when the rail map came from it; null otherwise.
  returned: always
  type: int
rdma:
  description: The C(rdma_devices) module's result (C(devices), C(source), C(tool_present), C(inactive_ports),
    C(ibstat), C(msg)).
  returned: always
  type: dict
nics:
  description: The C(nic_facts) module's result (C(nics), C(default_route_interface), C(default_route)), or
    C(failed) and the C(msg) it would have failed with.
  returned: always
  type: dict
ip_path_problem:
  description: Why the O(ip_path) given is no executable file (the inventory's typo, which preflight refuses); null
    when it is one or none was given.
  returned: always
  type: str
ansible_facts:
  description: C(rdmaforge_topology), C(rdma_devices) and, unless the NIC probe failed, C(nics) and
    C(default_route_interface), as the three modules set them.
  returned: always
  type: dict
"""

import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.probes import (
    ProbeError,
    TimedRunner,
    executable,
    list_tools,
    read_nics,
    read_rdma_devices,
    read_topology,
    run_tool,
    skipped,
)

ARGUMENT_SPEC = {
    "tool_dirs": {"type": "list", "elements": "path", "default": ["/usr/bin", "/usr/sbin"]},
    "tool_names": {"type": "list", "elements": "str", "default": ["nvidia-smi", "lspci"]},
    "nic_exclude": {"type": "list", "elements": "str", "default": ["lo"]},
    "ip_path": {"type": "path"},
    "df_paths": {"type": "list", "elements": "path", "default": []},
    "sys_root": {"type": "path", "default": "/sys"},
    "command_timeout": {"type": "int", "default": 60},
}


def without_facts(result: dict[str, Any]) -> dict[str, Any]:
    """A probe's result as node_probe returns it: its facts are node_probe's own, and nothing changed."""
    return {key: value for key, value in result.items() if key not in ("ansible_facts", "changed")}


def ask_gpu_tools(module: AnsibleModule, runner: TimedRunner) -> dict[str, Any]:
    """The GPU tools in tool_dirs and their answers (RV(tool_files), RV(tools), RV(nvidia_smi), RV(compute_caps),
    RV(lspci)), as preflight's find and command tasks read them before this module."""
    found = sorted(list_tools(module.params["tool_dirs"], module.params["tool_names"]))
    tools = {
        key: next((path for path in found if path.endswith("/" + name)), "")
        for key, name in (("nvidia_smi", "nvidia-smi"), ("lspci", "lspci"))
    }
    # nvidia-smi answers only when the driver is loaded; lspci also sees GPUs on a bare host.
    nvidia_smi = run_tool(runner, [tools["nvidia_smi"], "-L"]) if tools["nvidia_smi"] else skipped("no nvidia-smi")
    driver_answers = nvidia_smi.get("rc") == 0
    # The compute capability decides which NCCL archs can run here; drivers before 510 cannot say.
    compute_caps = (
        run_tool(runner, [tools["nvidia_smi"], "--query-gpu=compute_cap", "--format=csv,noheader"])
        if driver_answers
        else skipped("nvidia-smi -L did not answer")
    )
    lspci = (
        run_tool(runner, [tools["lspci"], "-n", "-mm"])
        if tools["lspci"] and not driver_answers
        else skipped("nvidia-smi answered" if driver_answers else "no lspci")
    )
    return {"tool_files": found, "tools": tools, "nvidia_smi": nvidia_smi, "compute_caps": compute_caps, "lspci": lspci}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        runner = TimedRunner(module, module.params["command_timeout"])
    except ProbeError as error:
        module.fail_json(msg=error.msg)
    # A path given explicitly is the inventory's: a typo there is named apart (ip_path_problem), for preflight to
    # refuse with the other settings, before any node changes; a node without iproute2 only lacks its NIC list.
    ip_path_problem = None
    if module.params["ip_path"] is not None:
        try:
            executable("ip_path", module.params["ip_path"])
        except ProbeError as error:
            ip_path_problem = error.msg
    gpu_tools = ask_gpu_tools(module, runner)
    df_paths = module.params["df_paths"]
    df = (
        run_tool(runner, [module.get_bin_path("df") or "df", "-P", "-k", *df_paths])
        if df_paths
        else skipped("no df_paths")
    )
    sys_root = module.params["sys_root"]
    try:
        topology = read_topology(runner, sys_root=sys_root)
    except ProbeError as error:
        module.fail_json(msg=error.msg)
    rdma = read_rdma_devices(runner, sysfs_root=os.path.join(sys_root, "class", "infiniband"))
    facts: dict[str, Any] = {"rdmaforge_topology": topology, "rdma_devices": rdma["devices"]}
    try:
        if ip_path_problem is not None:
            raise ProbeError(ip_path_problem)
        nics = read_nics(
            runner,
            sysfs_root=os.path.join(sys_root, "class", "net"),
            ip_path=module.params["ip_path"],
            exclude=module.params["nic_exclude"],
        )
        facts.update(nics["ansible_facts"])
    except ProbeError as error:
        nics = {"failed": True, "msg": error.msg}
    module.exit_json(
        changed=False,
        **gpu_tools,
        df=df,
        topology=topology,
        sysfs_gpus=len(topology["gpus"]) if topology["source"] == "sysfs" else None,
        rdma=without_facts(rdma),
        nics=without_facts(nics),
        ip_path_problem=ip_path_problem,
        ansible_facts=facts,
    )


if __name__ == "__main__":
    main()
