# utvm: `make demo` and `make test` set everything up on a fresh Debian machine (see tools/bootstrap.sh).
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test test-fast lint bench clean

setup:
	@tools/bootstrap.sh

demo: setup
	@$(PY) -m utvm.demo

test: setup lint
	$(PY) -m pytest $(PYTEST_ARGS)

# Everything but the slow emulator / long fuzz tests, for quick local iterations.
test-fast: setup
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check src tests bench tools

bench: setup
	$(PY) -m bench

clean:
	rm -rf build .pytest_cache .ruff_cache
