#!/usr/bin/python
# Copyright: rdmaforge contributors
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_net_api
short_description: Read which net-plugin API versions a built libnccl can load
description:
  - Scans an NCCL library for the C(ncclNetPlugin_vN) symbol names its plugin loader looks up and for the
    version string it prints at init, and, given the versions a plugin exports, returns the versions both
    know and the one NCCL will use (the newest common one).
  - Read-only; never reports a change. Works the same in check mode.
  - The parser is rdmaforge's C(rdmaforge/parsers/nccl_net_api.py), shipped to the target as
    C(plugins/module_utils/nccl_net_api.py) of the collection.
version_added: "0.1.0"
author:
  - rdmaforge contributors
options:
  path:
    description: The NCCL library (C(libnccl.so.2)); a symbolic link is followed.
    type: path
    required: true
  plugin_versions:
    description: The API versions the plugin exports (from C(nm -D)); empty for no comparison.
    type: list
    elements: int
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: What can the cluster's NCCL load?
  nccl_net_api:
    path: /opt/nccl/current/lib/libnccl.so.2
    plugin_versions: [2, 3, 4, 5, 6]
  register: api
"""

RETURN = r"""
nccl_version:
  description: The version the library prints (C(2.29.7)); null when the string is not found.
  returned: always
  type: str
nccl:
  description: API versions the library's loader looks up.
  returned: always
  type: list
  elements: int
plugin:
  description: The plugin_versions given, sorted.
  returned: always
  type: list
  elements: int
common:
  description: Versions in both lists.
  returned: always
  type: list
  elements: int
chosen:
  description: The version NCCL will use (the newest common one); null when there is none.
  returned: always
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaforge.cluster.plugins.module_utils.nccl_net_api import compatibility, scan_library

ARGUMENT_SPEC = {
    "path": {"type": "path", "required": True},
    "plugin_versions": {"type": "list", "elements": "int", "default": []},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    path = module.params["path"]
    if not os.path.isfile(path):
        module.fail_json(
            msg=f"path={path} is not a file: install NCCL first (nccl_build) or point path at libnccl.so.2"
        )
    try:
        versions, nccl_version = scan_library(path)
    except OSError as error:
        module.fail_json(msg=f"path={path} cannot be read: {error}")
    if not versions:
        module.fail_json(msg=f"{path} holds no ncclNetPlugin_vN name: it is not an NCCL library with a plugin loader")
    result = compatibility(versions, module.params["plugin_versions"])
    module.exit_json(changed=False, nccl_version=nccl_version, **result)


if __name__ == "__main__":
    main()
