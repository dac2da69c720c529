"""When the benchmark role leaves pip out: the installed version against benchmark_e2e_torch, by PEP 440's rules
(the cases are pip's: a local version label such as +cpu meets a plain ==, a pre-release meets only what names it)."""

from __future__ import annotations

import pytest

from rdmaforge.bench.environment import requirement_met, requirement_name


@pytest.mark.parametrize(
    ("installed", "requirement", "met"),
    [
        ("2.13.0", "torch==2.13.0", True),
        ("2.13.0+cpu", "torch==2.13.0", True),  # PyTorch's CPU wheels carry a local label
        ("2.13.0+cpu", "torch==2.13.0+cu121", False),
        ("2.12.1", "torch==2.13.0", False),
        ("2.13.1", "torch>=2.13,<2.14", True),
        ("2.14.0rc1", "torch>=2.13", True),  # an installed pre-release is what pip would keep
        ("2.1.0", "torch", True),  # no version asked: any installed one
        ("", "torch==2.13.0", False),  # not installed (or no venv yet)
        ("not-a-version", "torch==2.13.0", False),
        ("2.13.0", "torch[opt-einsum]==2.13.0", False),  # extras: pip alone knows whether they are there
        ("2.13.0", "torch @ https://example.invalid/torch-2.13.0-py3-none-any.whl", False),
        ("2.13.0", "--index-url x", False),
    ],
)
def test_an_installed_version_meets_the_requirement_as_pip_would_judge_it(
    installed: str, requirement: str, met: bool
) -> None:
    assert requirement_met(installed, requirement) is met


def test_the_name_of_a_plain_requirement_and_none_for_the_rest() -> None:
    assert requirement_name("torch==2.13.0") == "torch"
    assert requirement_name("Torch >= 2") == "Torch"
    assert requirement_name("torch @ https://example.invalid/t.whl") == ""
    assert requirement_name('torch==2.13.0; python_version < "3"') == ""
    assert requirement_name("./wheels/torch.whl") == ""
