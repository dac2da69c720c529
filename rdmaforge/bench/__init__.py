"""Benchmarks run on the cluster (nccl-tests, the e2e DDP benchmark) and their reports."""
