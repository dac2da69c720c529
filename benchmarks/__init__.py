"""Benchmarks run by `make bench`. Each module defines ``run() -> list[Result]``; targets are checked here,
never in timed tests."""
