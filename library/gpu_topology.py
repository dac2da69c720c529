#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_topology
short_description: Map each GPU to its nearest RDMA device and derive the NCCL_IB_HCA order
description:
  - Reads the GPU-to-NIC link classes (C(PIX), C(PXB), C(PHB), C(NODE), C(SYS), nearest first) from
    C(nvidia-smi topo -m) when the driver answers, else from the PCI tree in sysfs (a bare host without the
    driver), and returns each GPU's nearest RDMA device, the C(NCCL_IB_HCA) order that follows from it and
    the RDMA devices no GPU is near, as the C(rdmaforge_topology) fact.
  - A node without GPUs or without RDMA devices gets an empty rail map and a C(reason) saying which.
  - Read-only; never reports a change. Works the same in check mode.
  - The parser is rdmaforge's C(rdmaforge/parsers/gpu_topology.py), shipped to the target as
    C(plugins/module_utils/gpu_topology.py) of the collection.
version_added: "0.1.0"
author:
  - rdmaforge contributors
options:
  source:
    description:
      - Where the link classes come from. V(auto) uses C(nvidia-smi topo -m) when it exits 0, else sysfs.
    type: str
    choices: [auto, nvidia_smi, sysfs]
    default: auto
  nvidia_smi_path:
    description: The C(nvidia-smi) executable; looked up on E(PATH) when not given.
    type: path
  sys_root:
    description: The sysfs mount point (tests point it at a fake tree).
    type: path
    default: /sys
  command_timeout:
    description:
      - Seconds each command the module runs (nvidia-smi) may take; one that takes longer is killed
        and read as failing (rc 124, a stderr saying so).
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
- name: Map GPUs to rails
  gpu_topology:

- name: Use the NCCL_IB_HCA order the PCI tree implies
  ansible.builtin.debug:
    msg: "NCCL_IB_HCA={{ rdmaforge_topology.nccl_ib_hca }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts set for the host.
  returned: always
  type: dict
  contains:
    rdmaforge_topology:
      description: The rail map (the keys below).
      type: dict
source:
  description: C(nvidia-smi), C(sysfs), or C(none) when C(/sys/bus/pci/devices) could not be read (no GPU list).
  returned: always
  type: str
gpus:
  description: GPU names (C(GPU0), ...), in nvidia-smi's order (PCI bus order for sysfs).
  returned: always
  type: list
  elements: str
nics:
  description: RDMA device names (C(mlx5_0), ...).
  returned: always
  type: list
  elements: str
rails:
  description: Per GPU, its nearest RDMA device (C(nic)), the link class (C(link)) and every equally near device
    (C(candidates)); C(nic) is null when the node has no RDMA device.
  returned: always
  type: list
  elements: dict
nccl_ib_hca:
  description: The RDMA devices in GPU order, comma-separated, each once; empty when there is no rail.
  returned: always
  type: str
unused_nics:
  description: RDMA devices that are no GPU's nearest (for example a front-end bond).
  returned: always
  type: list
  elements: str
reason:
  description: Why the rail map is empty (no GPU, no RDMA device); empty otherwise.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.probes import ProbeError, TimedRunner, read_topology

ARGUMENT_SPEC = {
    "source": {"type": "str", "choices": ["auto", "nvidia_smi", "sysfs"], "default": "auto"},
    "nvidia_smi_path": {"type": "path"},
    "sys_root": {"type": "path", "default": "/sys"},
    "command_timeout": {"type": "int", "default": 60},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        rails = read_topology(
            TimedRunner(module, module.params["command_timeout"]),
            module.params["source"],
            module.params["nvidia_smi_path"],
            module.params["sys_root"],
        )
    except ProbeError as error:
        module.fail_json(msg=error.msg)
    module.exit_json(changed=False, ansible_facts={"rdmaforge_topology": rails}, **rails)


if __name__ == "__main__":
    main()
