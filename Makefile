# Every target bootstraps .venv itself: `make demo` and `make test` are the whole set-up.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-test

.PHONY: demo test bench fixtures-check real-subjects ggml-oracle llama-cpp llama-test fuzz clean matrix browser

# A second environment for the real libraries judged as conformance subjects (GPTQModel on CPU:
# torch 2.13.0+cpu, its import dependencies, gptqmodel itself without dependencies; notes gptq.md §9).
# A failed install leaves no stamp: tests/conformance/test_real_libraries.py then skips, saying why.
REAL       := $(VENV)/real
REAL_STAMP := $(REAL)/.installed
# AutoAWQ (deprecated, its package __init__ needs datasets): only its sdist, unpacked; the adapter imports
# two modules from it (conformance/adapters/autoawq.py). compressed-tensors 0.20.0 is pure torch.
AUTOAWQ_VERSION := 0.2.9
AUTOAWQ_SHA256  := f3397687118c7d23c769de0de05ff1dca8950a2644acbe1b6eb1399c691fe7ee
REAL_DEPS  := torch==2.13.0 transformers==5.24.0 accelerate==1.15.0 threadpoolctl packaging device-smi \
              protobuf pillow requests pypcre tokenicer logbar dill defuser

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test,kernels,hub,cluster,audit]'
	touch $(STAMP)

# The demo needs qformats' own dependencies only (numpy, safetensors, pydantic, jsonschema: about 115 MB),
# not torch and triton (1.75 GB), which only the Triton kernels and their tests use.
DEMO_STAMP := $(VENV)/.installed-demo
$(DEMO_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python -m qformats.demo

# llama.cpp (make llama-cpp) builds in the background, niced, from the start: through the installs and the
# rest of the suite; then tests/llama_cpp runs against it. A failed build fails `make test` (its log's tail
# is printed), as does any failed install. The suite runs as two parts at once (tests/conftest.py --shard, whole
# files balanced by tests/durations.json), one per core; the second part's output is printed when both end.
TEST_ENV = QFORMATS_GGML_LIB=$(abspath $(GGML_LIB)) QFORMATS_GGML_VERSION=$(GGML_VERSION) QFORMATS_CHROMIUM=$(CHROMIUM)
test: $(BIN)/python
	@{ t0=$$(date +%s); nice -n 10 $(MAKE) --no-print-directory llama-cpp > $(VENV)/llama-cpp-make.log 2>&1; \
	   echo $$? > $(VENV)/llama-cpp-make.rc; echo "llama.cpp: ready after $$(( $$(date +%s) - t0 )) s" >> $(VENV)/llama-cpp-make.log; } & \
	$(MAKE) --no-print-directory $(STAMP) real-subjects ggml-oracle browser || { wait; exit 1; }; \
	$(TEST_ENV) $(BIN)/python -m pytest -q --ignore=tests/llama_cpp --shard 2/2 > $(VENV)/test-part2.log 2>&1 & part2=$$!; \
	$(TEST_ENV) $(BIN)/python -m pytest -q --ignore=tests/llama_cpp --shard 1/2; rc=$$?; \
	wait $$part2 || rc=1; echo "== the suite's second part (--shard 2/2, log: $(VENV)/test-part2.log)"; \
	tail -40 $(VENV)/test-part2.log; \
	echo "waiting for the llama.cpp build (make llama-cpp, log: $(VENV)/llama-cpp-make.log)"; wait; \
	tail -1 $(VENV)/llama-cpp-make.log; \
	if [ "$$(cat $(VENV)/llama-cpp-make.rc)" != 0 ]; then tail -30 $(VENV)/llama-cpp-make.log; \
	  echo "make test: the llama.cpp build failed"; exit 1; fi; \
	$(TEST_ENV) QFORMATS_LLAMA_CPP=$(abspath $(LLAMA))/build $(BIN)/python -m pytest -q tests/llama_cpp || exit 1; \
	exit $$rc

# The results page's browser test (tests/conformance/test_html_browser.py) drives headless Chromium from the
# distribution's package over the DevTools pipe. Installed when missing (about 1.5 minutes); a failed install
# stops `make test` here rather than letting the test skip.
CHROMIUM ?= /usr/bin/chromium
browser: $(BIN)/python
	@test -x $(CHROMIUM) || { 	  echo "installing chromium for the results page's browser test (apt-get, log: $(VENV)/chromium-install.log)"; 	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); 	  $$SUDO apt-get update -q > $(VENV)/chromium-install.log 2>&1 && 	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >> $(VENV)/chromium-install.log 2>&1 && 	  test -x $(CHROMIUM); 	} || { tail -20 $(VENV)/chromium-install.log; echo "chromium could not be installed at $(CHROMIUM): the browser test needs it"; exit 1; }

# Every real library that installs here as a conformance subject (ggml, gguf-py, GPTQModel): the runs kept in
# results/real_libraries.json, the results page build/matrix/index.html (with qformats' reference as a column)
# and the README's real-library table, all from the same runs (conformance/realruns.py).
matrix: $(STAMP) real-subjects ggml-oracle
	QFORMATS_GGML_LIB=$(abspath $(GGML_LIB)) $(BIN)/python -m conformance.realruns --out build/matrix \
	  --bundle results/real_libraries.json --readme README.md --real-python $(REAL)/bin/python --reference

real-subjects: $(STAMP)
	@test -f $(REAL_STAMP) || { \
	  $(PY) -m venv $(REAL) && $(REAL)/bin/python -m pip install -q --upgrade pip && \
	  $(REAL)/bin/python -m pip install -q $(REAL_DEPS) && \
	  $(REAL)/bin/python -m pip install -q --no-deps gptqmodel==7.7.0 && \
	  $(REAL)/bin/python -m pip install -q -e . && touch $(REAL_STAMP); \
	} > $(VENV)/real-install.log 2>&1 || echo "real subjects: install failed, see $(VENV)/real-install.log"
	@test -f $(REAL)/.installed-awq-ct || test ! -f $(REAL_STAMP) || { \
	  $(REAL)/bin/python -m pip install -q torch==2.13.0 compressed-tensors==0.20.0 && mkdir -p $(REAL)/src && \
	  $(REAL)/bin/python -m pip download -q --no-deps --no-binary :all: autoawq==$(AUTOAWQ_VERSION) -d $(REAL)/src && \
	  echo "$(AUTOAWQ_SHA256)  $(REAL)/src/autoawq-$(AUTOAWQ_VERSION).tar.gz" | sha256sum --check --quiet && \
	  tar -xzf $(REAL)/src/autoawq-$(AUTOAWQ_VERSION).tar.gz -C $(REAL)/src && touch $(REAL)/.installed-awq-ct; \
	} >> $(VENV)/real-install.log 2>&1 || echo "real subjects (AutoAWQ, compressed-tensors): install failed, see $(VENV)/real-install.log"
	@test -f $(REAL)/.installed-bnb || test ! -f $(REAL_STAMP) || { \
	  $(REAL)/bin/python -m pip install -q torch==2.13.0 bitsandbytes==0.50.2 && touch $(REAL)/.installed-bnb; \
	} >> $(VENV)/real-install.log 2>&1 || echo "real subjects (bitsandbytes): install failed, see $(VENV)/real-install.log"
	@test -f $(REAL)/.installed-modelopt || test ! -f $(REAL_STAMP) || { \
	  $(REAL)/bin/python -m pip install -q torch==2.13.0 nvidia-modelopt==0.47.0 requests && \
	  touch $(REAL)/.installed-modelopt; \
	} >> $(VENV)/real-install.log 2>&1 || echo "real subjects (ModelOpt): install failed, see $(VENV)/real-install.log"

# The ggml oracle (Q4K-6.2): ggml's own q4_K quantizer and decoder, built from the C source that the
# ggml-py sdist vendors (vendor/ggml: ggml 0.10.1, llama.cpp sync 3142f1db), pinned by hash. Only
# ggml-base is built: it holds ggml-quants.c, where quantize_q4_K and dequantize_row_q4_K live.
# Baseline ISA (GGML_NATIVE=OFF, no -march) and -ffp-contract=off: the arithmetic model of Q4K-4.1.
GGML_VERSION := 0.10.1
GGML_SDIST  := ggml_py-$(GGML_VERSION).tar.gz
GGML_SHA256 := 77e840e8b87c319456331296333c641bc96232076dac00bb6b4563ab9422c71a
GGML        := $(VENV)/ggml
GGML_LIB    := $(GGML)/libggml-base.so
GGML_FLAGS  := -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_CPU=OFF -DGGML_OPENMP=OFF \
               -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=ON \
               -DCMAKE_C_FLAGS=-ffp-contract=off -DCMAKE_CXX_FLAGS=-ffp-contract=off

ggml-oracle: $(GGML_LIB)

$(GGML_LIB): $(BIN)/python
	rm -rf $(GGML) && mkdir -p $(GGML)
	$(BIN)/python -m pip download -q --no-deps --no-binary :all: ggml-py==$(GGML_VERSION) -d $(GGML) > $(GGML)/build.log 2>&1
	echo "$(GGML_SHA256)  $(GGML)/$(GGML_SDIST)" | sha256sum --check --quiet
	tar -xzf $(GGML)/$(GGML_SDIST) -C $(GGML) ggml_py-$(GGML_VERSION)/vendor/ggml
	# GIT_CEILING_DIRECTORIES: ggml's cmake asks git for a commit and would otherwise find this repository's
	GIT_CEILING_DIRECTORIES=$(abspath $(GGML)) cmake -S $(GGML)/ggml_py-$(GGML_VERSION)/vendor/ggml -B $(GGML)/build $(GGML_FLAGS) >> $(GGML)/build.log 2>&1
	cmake --build $(GGML)/build --target ggml-base -j2 >> $(GGML)/build.log 2>&1 || { tail -20 $(GGML)/build.log; exit 1; }
	cp -L $(GGML)/build/src/libggml-base.so $(GGML_LIB)

# Whole llama.cpp (issue 19): llama-quantize, llama-imatrix and llama-completion (loads a model, takes
# --check-tensors, evaluates a prompt), built from the llama.cpp that the llama-cpp-python sdist vendors
# (vendor/llama.cpp, ggml 0.25.3), pinned by hash. -O0: the tools run on a tiny model, and the build is
# what costs (IEEE arithmetic without contraction gives the same bits at any optimisation level: the tests
# hold decode and encode to ggml 0.10.1's -O2 build and to qformats).
# The tests in tests/llama_cpp/ run when QFORMATS_LLAMA_CPP names $(LLAMA) (the folder of the binaries).
LLAMA_VERSION := 0.3.36
LLAMA_SDIST   := llama_cpp_python-$(LLAMA_VERSION).tar.gz
LLAMA_SHA256  := 832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA         := $(VENV)/llama.cpp
LLAMA_STAMP   := $(LLAMA)/.built
LLAMA_TARGETS := llama-quantize llama-imatrix llama-completion
LLAMA_FLAGS   := -DCMAKE_BUILD_TYPE= -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
                 -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=ON -DGGML_OPENMP=OFF \
                 -DCMAKE_C_FLAGS=-ffp-contract=off -DCMAKE_CXX_FLAGS=-ffp-contract=off

llama-cpp: $(LLAMA_STAMP)

$(LLAMA_STAMP): $(BIN)/python
	rm -rf $(LLAMA) && mkdir -p $(LLAMA)
	$(BIN)/python -m pip download -q --no-deps --no-binary :all: llama-cpp-python==$(LLAMA_VERSION) -d $(LLAMA) > $(LLAMA)/build.log 2>&1 || { tail -20 $(LLAMA)/build.log; exit 1; }
	echo "$(LLAMA_SHA256)  $(LLAMA)/$(LLAMA_SDIST)" | sha256sum --check --quiet
	tar -xzf $(LLAMA)/$(LLAMA_SDIST) -C $(LLAMA) llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp
	# GIT_CEILING_DIRECTORIES: llama.cpp's cmake asks git for a commit and would otherwise find this repository's
	GIT_CEILING_DIRECTORIES=$(abspath $(LLAMA)) cmake -S $(LLAMA)/llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp -B $(LLAMA)/build $(LLAMA_FLAGS) >> $(LLAMA)/build.log 2>&1 || { tail -20 $(LLAMA)/build.log; exit 1; }
	cmake --build $(LLAMA)/build --target $(LLAMA_TARGETS) -j2 >> $(LLAMA)/build.log 2>&1 || { tail -20 $(LLAMA)/build.log; exit 1; }
	for t in $(LLAMA_TARGETS); do test -x $(LLAMA)/build/bin/$$t || { echo "llama-cpp: $$t missing"; exit 1; }; done
	touch $(LLAMA_STAMP)

# llama.cpp in the loop: llama-quantize writes every common file type of a tiny model, qformats judges it
# against llama.cpp's loader (--check-tensors), decoder (ggml 0.25.3) and quantizer (tests/llama_cpp/).
llama-test: $(STAMP) ggml-oracle llama-cpp
	QFORMATS_LLAMA_CPP=$(abspath $(LLAMA))/build QFORMATS_GGML_LIB=$(abspath $(GGML_LIB)) $(BIN)/python -m pytest -q tests/llama_cpp

# Fuzzing in process (tests/fuzz/inproc.py): N cases per entry point (validate, validate --deep, inspect, decode,
# convert, conformance checkpoint, the Python readers, remote, audit), resumable from FUZZ_STATE (stop it any time;
# the same command carries on), failure classes and minimized repros in FUZZ_STATE/repros; at the end every class's
# repro is replayed against the code as it is, and the exit is 1 while one still fails.
# `make test` runs a fixed-seed slice (tests/fuzz/test_inproc.py). `make fuzz N=1000 FUZZ_WORKERS=1`; a goal per
# entry point: `make fuzz N=validate=1000,audit=500 SEED=1 FUZZ_STATE=.venv/fuzz-state-seed1`.
N            ?= 1000000
SEED         ?= 0
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_STATE   ?= .venv/fuzz-state
FUZZ_WORKERS ?= $(JOBS)
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz/inproc.py --cases $(N) --seed $(SEED) --workers $(FUZZ_WORKERS) --state $(FUZZ_STATE)

# Mutation testing (issue 33): `make mutation MODULE=qformats/bits.py` runs mutmut, pinned and installed into .venv
# on first use (not by `make test`), on that one module with its area's tests (tests/mutation/areas.json), niced,
# one worker, in build/mutation/ (the working tree is untouched); prints module, mutants, killed, equivalent
# (tests/mutation/equivalent/, with reasons), survivors and the score; exit 1 under 95 %.
.PHONY: mutation
MUTMUT_VERSION := 3.8.1
mutation: $(STAMP)
	@test -n "$(MODULE)" || { echo "make mutation MODULE=qformats/bits.py: name a module of tests/mutation/areas.json"; exit 2; }
	@$(BIN)/python -c "import importlib.metadata as m, sys; sys.exit(m.version('mutmut') != '$(MUTMUT_VERSION)')" 2>/dev/null || \
	  $(BIN)/python -m pip install -q mutmut==$(MUTMUT_VERSION)
	nice -n 15 $(BIN)/python tests/mutation/run.py $(MODULE)

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	for script in benchmarks/*.py; do $(BIN)/python $$script || exit 1; done

# The Triton kernels' figures on a fresh GPU machine that has python3 with torch, triton and numpy but no
# network and none of qformats' other dependencies (the device machine: carry build/wheels there).
# `make gpu-bench OUT=DIR` installs those from build/wheels into build/gpu-site and runs
# benchmarks/kernels.py (check, then time; DIR/kernels.json and DIR/kernels.txt). The wheels are made here
# (numpy-free, for GPU_PYVER, at the versions .venv tested); `make gpu-bench-smoke OUT=DIR` makes them,
# resolves them for GPU_PYVER offline, and runs the script's --cpu-smoke in the interpreter.
.PHONY: gpu-bench gpu-bench-smoke
GPU_PY     ?= python3
GPU_PYVER  ?= 3.12
GPU_WHEELS := build/wheels
GPU_SITE   := build/gpu-site
GPU_DEPS   := pydantic pydantic-core annotated-types typing-extensions typing-inspection safetensors jsonschema \
              jsonschema-specifications referencing rpds-py attrs
GPU_PIP    = --only-binary=:all: --python-version $(GPU_PYVER) --implementation cp --platform manylinux_2_28_x86_64 \
             --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64

$(GPU_WHEELS)/.complete:
	$(MAKE) --no-print-directory $(STAMP)
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(BIN)/python -m pip download -q --no-deps $(GPU_PIP) -d $(GPU_WHEELS) \
	  $$($(BIN)/python -c "import importlib.metadata as m, sys; print(' '.join(f'{n}=={m.version(n)}' for n in sys.argv[1:]))" $(GPU_DEPS))
	touch $@

gpu-bench: $(GPU_WHEELS)/.complete
	@test -n "$(OUT)" || { echo "make gpu-bench OUT=DIR: name the folder for the results"; exit 2; }
	$(GPU_PY) -m pip install -q --no-index --find-links $(GPU_WHEELS) --no-compile --upgrade --target $(GPU_SITE) \
	  pydantic safetensors jsonschema
	PYTHONPATH=$(GPU_SITE):$(CURDIR) PYTHONUNBUFFERED=1 $(GPU_PY) benchmarks/kernels.py --out $(OUT) $(ARGS)

gpu-bench-smoke: $(GPU_WHEELS)/.complete
	@test -n "$(OUT)" || { echo "make gpu-bench-smoke OUT=DIR: name the folder for the results"; exit 2; }
	$(BIN)/python -m pip install -q --dry-run --no-index --find-links $(GPU_WHEELS) $(GPU_PIP) --target $(GPU_SITE) \
	  pydantic safetensors jsonschema
	TRITON_INTERPRET=1 $(BIN)/python benchmarks/kernels.py --cpu-smoke --out $(OUT) $(ARGS)

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
