PYTHON ?= python3

.PHONY: all check test demo ask-demo pyz clean bench

all: check test demo

# stdlib-only, and every module compiles
check:
	@$(PYTHON) tools/check_stdlib.py

# -X dev -W error: leaked files, sockets and processes fail the run
test:
	$(PYTHON) -X dev -W error -m unittest discover -s tests -t .

# the scripted model fixes a temporary copy of the example; the checkout stays clean
demo:
	@tmp=$$(mktemp -d) && cp -r examples/broken-calculator "$$tmp/repo" && \
	GOLEM_STATE_DIR="$$tmp/state" $(PYTHON) -m golem fix -dir "$$tmp/repo" -provider demo; \
	status=$$?; rm -rf "$$tmp"; exit $$status

# read-only: the scripted model answers a question about examples/notes, naming its files
ask-demo:
	$(PYTHON) -m golem ask -dir examples/notes -provider demo \
		"which release added rate limiting, and what is the default?"

# measures start-up, loop overhead, context economy, search and memory against their
# targets and rewrites docs/benchmarks.md (about a minute; compares search with grep)
bench:
	$(PYTHON) bench/run.py

# one file that runs golem anywhere Python 3.11+ does: python3 golem.pyz --help
pyz:
	$(PYTHON) tools/build_pyz.py golem.pyz

clean:
	rm -rf build dist *.egg-info golem.pyz
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
