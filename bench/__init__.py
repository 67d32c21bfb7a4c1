"""golem's benchmark: `make bench` runs bench/run.py and writes docs/benchmarks.md."""
