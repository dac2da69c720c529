"""What the benchmark report prints for a person: a node's unknown GPU count said as unknown."""

from __future__ import annotations

import pytest

from rdmaforge.bench.report import gpu_words


@pytest.mark.parametrize(
    ("gpus", "words"),
    [
        ({"n1": 8, "n2": 8}, "16 GPUs on 2 nodes"),
        ({"n1": 0, "n2": 0}, "CPU only, 2 nodes"),
        # A null count is unknown (the role had no preflight fact for the node), never 0 GPUs.
        ({"n1": None, "n2": 8}, "8 GPUs on 1 of 2 nodes, the GPU count of n1 unknown"),
        ({"n1": None, "n2": 0}, "no GPU on 1 of 2 nodes, the GPU count of n1 unknown"),
        ({"n1": None, "n2": None}, "2 nodes, their GPU counts unknown"),
        ({"n1": 4}, "4 GPUs on 1 of 2 nodes, the GPU count of n2 unknown"),
        ({"n1": 1, "n2": 0}, "1 GPU on 2 nodes"),
    ],
)
def test_gpu_words_says_which_counts_are_unknown(gpus: dict[str, int | None], words: str) -> None:
    assert gpu_words({"nodes": ["n1", "n2"], "gpus": gpus}) == words


def test_gpu_words_of_one_node() -> None:
    assert gpu_words({"nodes": ["n1"], "gpus": {"n1": 8}}) == "8 GPUs on 1 node"


def test_gpu_words_names_at_most_a_few_unknown_nodes() -> None:
    nodes = [f"n{i}" for i in range(1, 11)]
    words = gpu_words({"nodes": nodes, "gpus": {"n1": 8}})
    assert words == "8 GPUs on 1 of 10 nodes, the GPU counts of n2, n3, n4, n5, n6 and 4 more unknown"
