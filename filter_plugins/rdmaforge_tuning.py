"""Filters of the hugepages and eni roles; the logic lives in rdmaforge.tuning."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from rdmaforge import tuning
    _missing: ImportError | None = None
except ModuleNotFoundError as error:  # no rdmaforge package on the controller: each filter says so when used
    _missing = error


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        if _missing is not None:
            from ansible_collections.rdmaforge.cluster.plugins.module_utils.controller_package import (
                unavailable_filters,
            )

            return unavailable_filters(_missing, __file__)
        return {
            "rdmaforge_hugepages_pages_for": tuning.hugepages_pages_for,
            "rdmaforge_hugepages_kernel_args": tuning.hugepages_kernel_args,
            "rdmaforge_hugepages_memory_problem": tuning.hugepages_memory_problem,
            "rdmaforge_hugepages_other_pools": tuning.hugepages_other_pools,
            "rdmaforge_boot_loader": tuning.boot_loader,
            "rdmaforge_grub_config_output": tuning.grub_config_output,
            "rdmaforge_grub_mkconfig_argv": tuning.grub_mkconfig_argv,
            "rdmaforge_grub_cfg_missing_args": tuning.grub_cfg_missing_args,
            "rdmaforge_grub_cfg_carried_args": tuning.grub_cfg_carried_args,
            "rdmaforge_grub_dropin_is_empty": tuning.grub_dropin_is_empty,
            "rdmaforge_kernel_cmdline_restore_plan": tuning.restore_plan,
            "rdmaforge_eni_names": tuning.eni_names,
            "rdmaforge_eni_gpu_problem": tuning.eni_gpu_problem,
            "rdmaforge_eni_mtu": tuning.eni_mtu,
            "rdmaforge_eni_plan": tuning.eni_plan,
            "rdmaforge_eni_state_problems": tuning.eni_state_problems,
            "rdmaforge_eni_drifted": tuning.eni_drifted,
            "rdmaforge_eni_withdraw_plan": tuning.eni_withdraw_plan,
        }
