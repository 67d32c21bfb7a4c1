PYTHON ?= python3
PYZ ?= golem.pyz

.PHONY: all check test test-serial demo ask-demo pyz clean bench realworld

all: check test demo

# stdlib-only, and every module compiles
check:
	$(PYTHON) -X dev -W error -m unittest tests.test_stdlib

# -X dev -W error: leaked files, sockets and processes fail the run. Each test module runs in
# its own such process, JOBS at once, longest first, with one summary (tests/parallel.py)
JOBS ?= 4
test:
	$(PYTHON) -m tests.parallel -j $(JOBS)

# the whole suite in one process, one module after another
test-serial:
	$(PYTHON) -X dev -W error -m unittest discover -s tests -t .

# the scripted model fixes a temporary copy of the bundled example; nothing here changes
demo:
	$(PYTHON) -m golem demo

# read-only: the scripted model answers a question about examples/notes, naming its files
ask-demo:
	$(PYTHON) -m golem ask -dir examples/notes -provider demo \
		"which release added rate limiting, and what is the default?"

# measures start-up, loop overhead, context economy, search, memory, the evidence's cost
# per test, whole suites under `golem fix` (generated, and a pinned real project) and the
# attempts' disk against their targets and rewrites docs/benchmarks.md (15 to 25 minutes
# on 2 cores; compares search with grep; the first run fetches the real project's sdist
# with pip into a cache outside the repository, and without the network its rows say
# "not measured"); one measurement: python3 -m tests.bench.run NAME
bench:
	$(PYTHON) -m tests.bench.run

# golem on pinned sdists of real projects (needs the network for pip; not part of `make test`):
# fix honest/partial/cheating, fix -attempts 3, verify -base and pick against pytest's own
# counts; writes its table into docs/benchmarks.md and exits 1 when a verdict or count is wrong
realworld:
	$(PYTHON) -m tests.realworld.run

# one file that runs golem anywhere Python 3.11+ does: python3 golem.pyz --help
# (only golem/ goes in, without caches, started by golem/__main__.py so the exit code
# carries; written beside $(PYZ) and moved into place)
pyz:
	@tmp=$$(mktemp -d) && mkdir "$$tmp/src" && cp -R golem "$$tmp/src/golem" && \
	find "$$tmp/src" -name __pycache__ -type d -prune -exec rm -rf {} + && \
	find "$$tmp/src" -name '*.py[co]' -exec rm -f {} + && \
	cp golem/__main__.py "$$tmp/src/__main__.py" && \
	$(PYTHON) -m zipapp "$$tmp/src" -o "$(PYZ).part" -p '/usr/bin/env python3' -c && \
	mv "$(PYZ).part" "$(PYZ)"; \
	status=$$?; rm -rf "$$tmp"; [ $$status -eq 0 ] && echo "built $(PYZ)"; exit $$status

clean:
	rm -rf build dist *.egg-info golem.pyz
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
