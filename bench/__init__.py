"""utvm benchmarks: `python -m bench [NAME ...]` (or `make bench`) runs every bench/bench_<NAME>.py.

Each benchmark module has `main(argv: list[str]) -> int` and prints its figures as ratios against a
baseline measured in the same run, so numbers from different machines stay comparable.
"""
