# Every target bootstraps .venv itself: `make demo` and `make test` are the whole set-up.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-test

.PHONY: demo test bench fixtures-check clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m qformats.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	for script in benchmarks/*.py; do $(BIN)/python $$script || exit 1; done

# Regenerate every reference-made fixture into a scratch folder and require byte identity.
fixtures-check: $(STAMP)
	@tmp=$$(mktemp -d) && \
	$(BIN)/python -m qformats.samples $$tmp/checkpoints > /dev/null && \
	$(BIN)/python tests/containers/gguf_builder.py $$tmp > /dev/null && \
	$(BIN)/python tests/checkpoints/st_builder.py $$tmp > /dev/null && \
	$(BIN)/python tests/checkpoints/hostile_builder.py $$tmp > /dev/null && \
	diff -r $$tmp/checkpoints fixtures/checkpoints && \
	diff -r $$tmp/containers/gguf fixtures/containers/gguf && \
	diff -r $$tmp/containers/safetensors fixtures/containers/safetensors && \
	diff -r $$tmp/regressions fixtures/regressions && \
	rm -rf $$tmp && \
	$(BIN)/python -m qformats.fixtures

clean:
	rm -rf $(VENV) build *.egg-info
