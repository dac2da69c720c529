"""Filters of the hugepages and eni roles; the logic lives in rdmaforge.tuning."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from rdmaforge import tuning
except ImportError:  # ansible-playbook run by a Python without rdmaforge installed: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rdmaforge import tuning


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "hugepages_pages_for": tuning.hugepages_count,
            "hugepages_kernel_args": tuning.hugepages_kernel_args,
            "boot_loader": tuning.boot_loader,
            "grub_config_output": tuning.grub_config_output,
            "grub_mkconfig_argv": tuning.grub_mkconfig_argv,
            "grub_cfg_missing_args": tuning.grub_cfg_missing_args,
            "kernel_cmdline_restore_plan": tuning.restore_plan,
            "eni_names": tuning.eni_names,
            "eni_gpu_problem": tuning.eni_gpu_problem,
            "eni_mtu": tuning.eni_mtu,
            "eni_plan": tuning.eni_plan,
            "eni_state_problems": tuning.eni_state_problems,
        }
