"""Filters for rdmaforge roles; the logic lives in rdmaforge.parsers (one implementation for filters,
modules, CLI and tests)."""

from __future__ import annotations

from typing import Any, Callable, Dict

from rdmaforge.parsers import gpg, nccl_env


class FilterModule:
    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {
            "gpg_fingerprints": gpg.fingerprints,
            "nccl_env_merge": nccl_env.merge,
            "nccl_env_problems": nccl_env.problems,
            "nccl_env_unknown": nccl_env.unknown_names,
            "nccl_env_split_nccl": lambda env: nccl_env.split(env)[0],
            "nccl_env_split_other": lambda env: nccl_env.split(env)[1],
            "nccl_conf_render": nccl_env.render_conf,
            "nccl_plugin_api_versions": nccl_env.plugin_api_versions,
        }
