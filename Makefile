# Two commands set everything up on a fresh machine:
#   make bench   - the main job: the quick benchmark suite, ending in a leaderboard
#   make test    - the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Pinned: an unpinned torch pulls several GB of CUDA wheels; 2.13.0 resolves to the CPU build here.
TORCH  := torch==2.13.0
# Test-only: DGL's last release, to test the DGL graph adapter against real DGL graphs.
DGL    := dgl==2.1.0
SUITE  ?= quick
OUT    ?= results/$(SUITE)

.PHONY: install test test-all bench clean

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[test,ray]"
	$(BIN)/python -m pip install -q -e ".[cuda]" || echo "warning: triton could not be installed; the Triton kernel tests will be skipped"
	$(BIN)/python -m pip install -q $(DGL) || echo "warning: $(DGL) could not be installed; DGL adapter tests will be skipped"
	touch $@

test: $(STAMP)
	ZOO_DATA_MIRROR="$${ZOO_DATA_MIRROR:-$(abspath ../shared/datasets)}" $(BIN)/python -m pytest -q

test-all: $(STAMP)
	ZOO_DATA_MIRROR="$${ZOO_DATA_MIRROR:-$(abspath ../shared/datasets)}" $(BIN)/python -m pytest -q -m "slow or not slow"

bench: $(STAMP)
	ZOO_DATA_MIRROR="$${ZOO_DATA_MIRROR:-$(abspath ../shared/datasets)}" $(BIN)/zoo bench $(SUITE) --out $(OUT)

clean:
	rm -rf $(VENV) build dist *.egg-info
