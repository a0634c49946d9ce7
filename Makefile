# Every target bootstraps .venv itself: `make demo` and `make test` are the whole set-up.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-test

.PHONY: demo test bench fixtures-check real-subjects clean

# A second environment for the real libraries judged as conformance subjects (GPTQModel on CPU:
# torch 2.13.0+cpu, its import dependencies, gptqmodel itself without dependencies; notes gptq.md §9).
# A failed install leaves no stamp: tests/conformance/test_real_libraries.py then skips, saying why.
REAL       := $(VENV)/real
REAL_STAMP := $(REAL)/.installed
REAL_DEPS  := torch==2.13.0 "transformers>=5.20.2" "accelerate>=1.15.0" threadpoolctl packaging device-smi \
              protobuf pillow requests pypcre tokenicer logbar dill defuser

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test,kernels]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m qformats.demo

test: $(STAMP) real-subjects
	$(BIN)/python -m pytest -q

real-subjects: $(STAMP)
	@test -f $(REAL_STAMP) || { \
	  $(PY) -m venv $(REAL) && $(REAL)/bin/python -m pip install -q --upgrade pip && \
	  $(REAL)/bin/python -m pip install -q $(REAL_DEPS) && \
	  $(REAL)/bin/python -m pip install -q --no-deps gptqmodel==7.7.0 && \
	  $(REAL)/bin/python -m pip install -q -e . && touch $(REAL_STAMP); \
	} > $(VENV)/real-install.log 2>&1 || echo "real subjects: install failed, see $(VENV)/real-install.log"

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
	$(BIN)/python tests/conformance/third_party_builder.py $$tmp/third_party_pack > /dev/null && \
	diff -r $$tmp/checkpoints fixtures/checkpoints && \
	diff -r $$tmp/containers/gguf fixtures/containers/gguf && \
	diff -r $$tmp/containers/safetensors fixtures/containers/safetensors && \
	diff -r $$tmp/regressions fixtures/regressions && \
	diff -r $$tmp/third_party_pack conformance/data/third_party && \
	rm -rf $$tmp && \
	$(BIN)/python -m qformats.fixtures

clean:
	rm -rf $(VENV) build *.egg-info
