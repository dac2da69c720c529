#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_devices
short_description: Report RDMA devices and port states from ibv_devinfo, or from the kernel's sysfs
description:
  - Runs C(ibv_devinfo -v) and, when iproute2's C(rdma) tool is installed, C(rdma link show), and
    returns every RDMA device with its ports (state, physical state, MTUs, link layer, LIDs, link rate, GIDs,
    netdev) as the C(rdma_devices) fact.
  - When infiniband-diags' C(ibstat) is installed (seed 001's port check; the V(infiniband) and V(acs_type1)
    profiles install it), it runs too. Its port states are compared with C(ibv_devinfo)'s (a disagreement is a
    warning and is listed in RV(ibstat.notes)), and its C(Rate) fills each port's C(rate_gbps) (the lower of the two
    when both tools give one). A host where C(ibstat) lists no device reports that in RV(ibstat.cas), never as
    healthy ports.
  - When C(ibv_devinfo) is not installed (a bare host, whose kernel drivers load before rdma-core's user space), or
    fails without listing a device, the devices and their ports' states, link layers and LIDs come from
    O(sysfs_root) instead; RV(source) says which answered. The one RDMA probe of preflight, doctor and rdma_core.
  - Read-only; never reports a change. Works the same in check mode.
  - When C(ibv_devinfo) is not installed and O(sysfs_root) does not exist, the module succeeds with
    O(require_active) ignored, an empty RV(devices) list and RV(source=none), so the calling role decides what
    that means.
  - The parser is rdmaforge's C(rdmaforge/parsers/rdma_devinfo.py), shipped to the target as
    C(plugins/module_utils/rdma_devinfo.py) of the collection.
version_added: "0.1.0"
author:
  - rdmaforge contributors
options:
  ibv_devinfo_path:
    description:
      - Path of the C(ibv_devinfo) executable; the module fails when it is given but not executable.
      - By default it is looked up on E(PATH) and in the sbin directories.
    type: path
  rdma_path:
    description:
      - Path of iproute2's C(rdma) executable, used to learn each port's netdev; the module fails when
        it is given but not executable.
      - By default it is looked up like C(ibv_devinfo); when it is absent, every port's C(netdev) is null.
    type: path
  ibstat_path:
    description:
      - Path of infiniband-diags' C(ibstat); the module fails when it is given but not executable.
      - By default it is looked up like C(ibv_devinfo); when it is absent, RV(ibstat) is null.
    type: path
  sysfs_root:
    description:
      - The kernel's RDMA device directory, read when C(ibv_devinfo) cannot answer (tests point it at a fake tree).
    type: path
    default: /sys/class/infiniband
  expected_ports:
    description:
      - Ports that must exist, as V(DEVICE:PORT) (for example V(mlx5_0:1)) or V(DEVICE) for every port
        of that device. V(DEVICE/PORT), the spelling of C(rdma link), is accepted too.
      - Only checked when O(require_active=true).
    type: list
    elements: str
    default: []
  require_active:
    description:
      - Fail when an expected port is missing or is not C(PORT_ACTIVE). The message names the device,
        the port, its state and physical state, and what to check.
      - Without O(expected_ports) every port of every device must be active, and a host where
        C(ibv_devinfo) finds no device at all fails too (usually a driver that did not load).
      - Not applied where neither C(ibv_devinfo) nor O(sysfs_root) exists, since nothing can be read there; the
        module then succeeds with RV(source=none), and the caller decides (role rdma_core fails an RDMA profile
        without devices).
    type: bool
    default: false
  min_rate_gbps:
    description:
      - With O(require_active=true), also fail when an expected port that is active runs slower than this many
        Gbit/s (a link that trained down, 100 on an HDR fabric), or when its rate cannot be read.
      - Unset, the rate is reported and not judged.
    type: float
  device_pattern:
    description:
      - The fabric's RDMA device names, a shell pattern (V(erdma*), V(mlx5*)). With O(require_active=true) only
        these devices are judged. Another device (a storage HCA, Soft-RoCE's C(rxe0)) neither stands in for a
        missing one nor fails the check by being down, and a host with none of them fails.
      - Unset, every device is the fabric's.
    type: str
  link_layer:
    description:
      - With O(require_active=true), the link layer every selected port must be on, where it was read (a VPI HCA
        left in the other mode takes the profile's NCCL settings for a network it is not on).
    type: str
    choices: [InfiniBand, Ethernet]
  command_timeout:
    description:
      - Seconds each command the module runs (ibv_devinfo, rdma, ibstat) may take; one that takes longer is killed
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
  - C(ibv_devinfo) from rdma-core on the target (package C(ibverbs-utils) on Debian/Ubuntu,
    C(libibverbs-utils) on RHEL).
notes:
  - C(ibv_devinfo) exits with status 255 and prints C(No IB devices found) when libibverbs sees no
    usable device; that is reported as an empty RV(devices) list, not as an error.
"""

EXAMPLES = r"""
- name: Inventory RDMA devices
  rdma_devices:

- name: Both HDR ports must be up before NCCL tests run
  rdma_devices:
    expected_ports: [mlx5_0:1, mlx5_1:1]
    require_active: true

- name: Both HDR ports active and at 200 Gbit/s
  rdma_devices:
    expected_ports: [mlx5_0:1, mlx5_1:1]
    require_active: true
    min_rate_gbps: 200

- name: Every port of the eRDMA device must be active
  rdma_devices:
    expected_ports: [erdma_0]
    require_active: true

- name: Every InfiniBand port of the mlx5 devices active; a storage NIC of another driver is not judged
  rdma_devices:
    device_pattern: "mlx5*"
    link_layer: InfiniBand
    require_active: true

- name: Use the fact
  ansible.builtin.debug:
    msg: "{{ rdma_devices | map(attribute='name') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts set for the host.
  returned: always
  type: dict
  contains:
    rdma_devices:
      description: The same list as RV(devices).
      type: list
      elements: dict
devices:
  description: Each RDMA device, in the order ibv_devinfo printed them. Values it did not print are null.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The hca_id, for example C(mlx5_0), C(erdma_0) or C(rxe0).
      type: str
    transport:
      description: Transport name without its numeric code, for example C(InfiniBand), C(iWARP), C(eRDMA).
      type: str
    fw_ver:
      description: Firmware version.
      type: str
    node_guid:
      description: Node GUID as printed, for example C(7cfe:9003:00a5:95c0).
      type: str
    sys_image_guid:
      description: System image GUID as printed.
      type: str
    vendor_id:
      description: Vendor id as printed, for example C(0x02c9) (Mellanox/NVIDIA).
      type: str
    vendor_part_id:
      description: Vendor part id, for example C(4123) for a ConnectX-6.
      type: int
    hw_ver:
      description: Hardware version as printed.
      type: str
    board_id:
      description: Board id (PSID); null when the driver exposes none (rxe, eRDMA).
      type: str
    phys_port_cnt:
      description: Number of physical ports.
      type: int
    ports:
      description: The ports of the device.
      type: list
      elements: dict
      contains:
        port:
          description: Port number.
          type: int
        state:
          description: "Port state name: C(PORT_ACTIVE), C(PORT_DOWN), C(PORT_INIT) or C(PORT_ARMED)."
          type: str
        state_code:
          description: Numeric port state (4 is active).
          type: int
        physical_state:
          description:
            - Physical state such as C(LINK_UP), C(POLLING) or C(DISABLED).
            - Taken from C(rdma link show) when ibv_devinfo did not print it.
          type: str
        max_mtu:
          description: Largest IB MTU the port supports, in bytes.
          type: int
        active_mtu:
          description: IB MTU in use, in bytes.
          type: int
        link_layer:
          description: C(InfiniBand) or C(Ethernet) (RoCE); null when the tool does not print it.
          type: str
        sm_lid:
          description: LID of the subnet manager (0 on Ethernet).
          type: int
        port_lid:
          description: LID of the port (0 on Ethernet).
          type: int
        lmc:
          description: LID mask control.
          type: int
        active_width:
          description: Link width such as C(4X).
          type: str
        active_speed:
          description: Per-lane speed such as C(25.0 Gbps).
          type: str
        rate_gbps:
          description:
            - Link rate in Gbit/s, for example V(200.0) for 4X HDR.
            - From C(ibv_devinfo -v)'s width times lane speed, C(ibstat)'s C(Rate), or the kernel's C(rate) file
              when the devices come from sysfs; the lower one when two sources differ; null when none says.
            - Meaningful for active ports only.
          type: float
        netdev:
          description: Network interface of the port, from C(rdma link show).
          type: str
        gids:
          description:
            - Non-zero GID table entries, each with C(index), C(gid) and C(type).
            - C(type) is C(RoCE v1) or C(RoCE v2) on Ethernet ports (rdma-core 28 and newer), else null.
          type: list
          elements: dict
inactive_ports:
  description: "One C(DEVICE/PORT: STATE) string for every port that is not C(PORT_ACTIVE)."
  returned: always
  type: list
  elements: str
  sample: ["mlx5_3/1: PORT_DOWN"]
tool_present:
  description: Whether C(ibv_devinfo) was found on the host.
  returned: always
  type: bool
ibstat:
  description:
    - What C(ibstat) reported, or null when it is not installed.
    - C(path) the executable, C(rc) its exit status, C(cas) the device names it listed (empty on a host without
      an InfiniBand or RoCE device, or without the C(ib_umad) kernel module), C(errors) its C(ibpanic) lines,
      C(notes) where it and C(ibv_devinfo) disagree (each also a warning).
  returned: always
  type: dict
  sample: {path: /usr/sbin/ibstat, rc: 0, cas: [mlx5_0, mlx5_1], errors: [], notes: []}
source:
  description:
    - Where RV(devices) came from. V(ibv_devinfo) when it answered (with or without devices); V(sysfs) when it
      is absent or failed and O(sysfs_root) exists (fields sysfs does not hold are null, C(gids) empty); V(none)
      when neither.
  returned: always
  type: str
  sample: ibv_devinfo
fabric_devices:
  description: The names of the devices that match O(device_pattern) (every device's when it is unset).
  returned: always
  type: list
  elements: str
  sample: [erdma_0]
kernel_devices:
  description:
    - The RDMA devices O(sysfs_root) lists when ibv_devinfo answered with none. The kernel's driver is loaded and
      libibverbs has no user-space provider for them (a failure with O(require_active) says so).
  returned: when ibv_devinfo lists no device and the kernel lists some
  type: list
  elements: str
  sample: [mlx5_0, mlx5_1]
"""

import fnmatch

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.probes import ProbeError, TimedRunner, read_rdma_devices
from ansible_collections.rdmaforge.cluster.plugins.module_utils.rdma_devinfo import parse_expected_port, port_problems

ARGUMENT_SPEC = {
    "ibv_devinfo_path": {"type": "path"},
    "rdma_path": {"type": "path"},
    "ibstat_path": {"type": "path"},
    "sysfs_root": {"type": "path", "default": "/sys/class/infiniband"},
    "expected_ports": {"type": "list", "elements": "str", "default": []},
    "require_active": {"type": "bool", "default": False},
    "min_rate_gbps": {"type": "float"},
    "device_pattern": {"type": "str"},
    "link_layer": {"type": "str", "choices": ["InfiniBand", "Ethernet"]},
    "command_timeout": {"type": "int", "default": 60},
}


def check_expected_syntax(module: AnsibleModule) -> None:
    """Fail early on an ``expected_ports`` entry that can never match, rather than report it missing."""
    bad = [spec for spec in module.params["expected_ports"] if parse_expected_port(spec) is None]
    if bad:
        module.fail_json(msg=f"expected_ports entries must be DEVICE or DEVICE:PORT, got: {', '.join(bad)}")


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    check_expected_syntax(module)
    min_rate = module.params["min_rate_gbps"]
    if min_rate is not None and not min_rate > 0:
        module.fail_json(msg=f"min_rate_gbps must be a positive number of Gbit/s, got {min_rate}")
    try:
        result = read_rdma_devices(
            TimedRunner(module, module.params["command_timeout"]),
            ibv_devinfo_path=module.params["ibv_devinfo_path"],
            rdma_path=module.params["rdma_path"],
            ibstat_path=module.params["ibstat_path"],
            sysfs_root=module.params["sysfs_root"],
        )
    except ProbeError as error:
        module.fail_json(msg=error.msg)
    pattern = module.params["device_pattern"]
    result["fabric_devices"] = [str(d["name"]) for d in result["devices"]
                                if not pattern or fnmatch.fnmatch(str(d["name"]), pattern)]  # fmt: skip
    if (result["tool_present"] or result["source"] == "sysfs") and module.params["require_active"]:
        problems = port_problems(result["devices"], module.params["expected_ports"], module.params["min_rate_gbps"],
                                 result.get("kernel_devices") or [], pattern, module.params["link_layer"])  # fmt: skip
        if problems:
            # The result's own msg (where the devices came from) goes after the ports: fail_json takes one msg.
            note = result.pop("msg", None)
            module.fail_json(msg="RDMA ports not ready: " + "; ".join(problems) + (f" ({note})" if note else ""),
                             **result)  # fmt: skip
    module.exit_json(**result)


if __name__ == "__main__":
    main()
