"""golem's benchmark: `make bench` runs tests/bench/run.py and writes docs/benchmarks.md."""
