#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nic_facts
short_description: Report every network interface with its driver, PCI address, NUMA node, MTU and IPv4 addresses
description:
  - Lists the interfaces in O(sysfs_root) (C(/sys/class/net)) and returns, for each, its MAC address,
    driver, PCI address, NUMA node, MTU, operational state, IPv4 addresses and whether it carries the
    default route, as the C(nics) fact, plus C(default_route_interface).
  - The driver is the name of the C(device/driver) link; the PCI address is the PCI function the
    C(device) link resolves to (for virtio-net, the parent of the C(virtioN) device); the NUMA node is
    the device's C(numa_node), or its PCI function's, with -1 (no affinity) reported as null. Virtual
    interfaces (bridges, veth, bonds) have no C(device) link, so all three are null and C(virtual) is true.
  - IPv4 addresses come from C(ip -j addr show), the default route from C(ip -j route show default)
    (the lowest metric wins; for a multipath route, its first next hop).
  - Read-only; never reports a change. Works the same in check mode.
  - The parser is rdmaforge's C(rdmaforge/parsers/nic_facts.py), shipped to the target as
    C(plugins/module_utils/nic_facts.py) of the collection.
version_added: "0.1.0"
author:
  - rdmaforge contributors
options:
  sysfs_root:
    description: The directory with one entry per interface (tests point it at a fake tree).
    type: path
    default: /sys/class/net
  ip_path:
    description:
      - The iproute2 C(ip) executable; the module fails when it is given but not executable.
      - By default it is looked up on E(PATH) and in the sbin directories. It must support C(-j) (JSON
        output, iproute2 4.14 and later).
    type: path
  exclude:
    description: Interfaces to leave out, as names or shell patterns (V(veth*)).
    type: list
    elements: str
    default: [lo]
  routing_tables:
    description:
      - Also read the policy routing state and return it as RV(routing) - the rules (C(ip -j rule show)), the
        routes of each table listed (C(ip -j route show table N)) and the main table's default routes - in this
        one module run instead of one command task each.
      - A table the kernel does not have (C(ip) says so and exits 2) has no routes.
      - Not given, none of it is read.
    type: list
    elements: int
  command_timeout:
    description:
      - Seconds each command the module runs (ip) may take; one that takes longer is killed
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
requirements:
  - iproute2 with JSON output (C(ip -j)).
"""

EXAMPLES = r"""
- name: Inventory the NICs
  nic_facts:

- name: Secondary NICs (everything but the default-route one), leaving container veths out
  nic_facts:
    exclude: [lo, "veth*", "docker*"]

- name: The NICs and the policy routing of tables 1001 and 1002, in one run
  nic_facts:
    routing_tables: [1001, 1002]
  register: state

- name: Use the facts
  ansible.builtin.debug:
    msg: "{{ nics | rejectattr('default_route') | map(attribute='name') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts set for the host.
  returned: always
  type: dict
  contains:
    nics:
      description: The same list as RV(nics).
      type: list
      elements: dict
    default_route_interface:
      description: The same as RV(default_route_interface).
      type: str
nics:
  description: One record per interface, in ifindex order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Interface name.
      type: str
    ifindex:
      description: Kernel interface index.
      type: int
    mac:
      description: Hardware address as the kernel prints it.
      type: str
    driver:
      description: Kernel driver, for example C(mlx5_core), C(ena), C(virtio_net); null for virtual interfaces.
      type: str
    pci_address:
      description: PCI function, for example C(0000:3b:00.0); null when the device is not on PCI.
      type: str
    numa_node:
      description: NUMA node of the device; null when the kernel reports none (-1) or the interface is virtual.
      type: int
    mtu:
      description: MTU in bytes.
      type: int
    operstate:
      description: Operational state in lower case (C(up), C(down), C(unknown), ...).
      type: str
    virtual:
      description: Whether the interface has no underlying device (bridge, veth, bond, dummy, ...).
      type: bool
    ipv4:
      description: IPv4 addresses, each with C(address), C(prefixlen), C(network) and C(broadcast).
      type: list
      elements: dict
    default_route:
      description: Whether this interface carries the default route.
      type: bool
default_route_interface:
  description: The interface of the default route (lowest metric); null when there is none.
  returned: always
  type: str
default_route:
  description: The default route's C(interface), C(gateway) and C(metric); null when there is none.
  returned: always
  type: dict
routing:
  description: The policy routing state, as C(ip -j) lists it.
  returned: when O(routing_tables) is given
  type: dict
  contains:
    rules:
      description: C(ip -j rule show).
      type: list
      elements: dict
    tables:
      description: The routes of each table in O(routing_tables), by table number (a string).
      type: dict
    main_default:
      description: C(ip -j route show default).
      type: list
      elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.probes import ProbeError, TimedRunner, read_nics

ARGUMENT_SPEC = {
    "sysfs_root": {"type": "path", "default": "/sys/class/net"},
    "ip_path": {"type": "path"},
    "exclude": {"type": "list", "elements": "str", "default": ["lo"]},
    "routing_tables": {"type": "list", "elements": "int"},
    "command_timeout": {"type": "int", "default": 60},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = read_nics(
            TimedRunner(module, module.params["command_timeout"]),
            sysfs_root=module.params["sysfs_root"],
            ip_path=module.params["ip_path"],
            exclude=module.params["exclude"],
            routing_tables=module.params["routing_tables"],
        )
    except ProbeError as error:
        module.fail_json(msg=error.msg)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
