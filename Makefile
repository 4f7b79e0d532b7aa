# rldiff: `make demo` and `make test` are all a fresh clone needs (Python 3.11, pip, make).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
# Without CUDA, pin the CPU build of torch before anything else asks for torch (a plain `torch`
# requirement would pull a multi-GB CUDA build). Override, e.g. TORCH_SPEC='torch>=2.9' on a GPU box.
TORCH_SPEC ?= $(if $(shell command -v nvidia-smi 2>/dev/null),torch>=2.9,torch==2.13.0)

.PHONY: demo test quick lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.torch: | $(BIN)/python
	$(BIN)/pip install --quiet '$(TORCH_SPEC)'
	touch $@

# Stamps make re-runs instant when pyproject.toml has not changed.
$(VENV)/.installed: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/rldiff demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check engine tui tests bench sample_data
	$(BIN)/lint-imports
	$(BIN)/mypy

# The whole suite on every core; each test module's fixtures stay on one worker (--dist loadscope), so the
# end-to-end study (`rldiff compare` on the demo pair, minutes) is analysed once, not once per worker.
test: lint
	$(BIN)/python -m pytest -q -n auto --dist loadscope

# The inner loop: everything but the tests marked slow (the end-to-end study, models loaded, replications),
# on every core (pytest-xdist; the cached sample study is built once, under a lock, for all workers).
quick: lint
	$(BIN)/python -m pytest -q -m "not slow" -n auto

bench: $(VENV)/.installed-dev
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) demo.duckdb demo.duckdb.rldiff
