# utvm: `make demo` and `make test` set everything up on a fresh Debian machine (see tools/bootstrap.sh).
PY := .venv/bin/python
PYTEST_ARGS ?=
# Tests run in parallel on pytest-xdist, one worker more than there are cores (many tests wait on a compiler,
# an emulator or a device process). `loadgroup` keeps each xdist_group on one worker (the fuzz campaign);
# everything else is spread by load. PYTEST_WORKERS=N chooses, 0 runs them in this process.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadgroup

.PHONY: setup demo test test-fast lint bench clean

setup:
	@tools/bootstrap.sh

demo: setup
	@$(PY) -m utvm.demo

test: setup lint
	$(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# Everything but the slow emulator tests and the fuzz campaign, for quick local iterations.
test-fast: setup
	$(PY) -m pytest $(PYTEST_PARALLEL) -m "not slow and not fuzz" $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check src tests bench tools

bench: setup
	$(PY) -m bench

clean:
	rm -rf build .pytest_cache .ruff_cache
