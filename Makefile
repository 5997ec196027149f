# Two commands set everything up on a fresh machine:
#   make bench   - the main job: the quick benchmark suite, ending in a leaderboard
#   make test    - the test suite
#   make test-dgl - (slow: ~3 GB of wheels the first time) the DGL tests against real DGL, in .venv-dgl
#   make test-gpu - on a GPU machine: the CUDA checks (fail, not skip, without a GPU)
#   make gpu-check - on a GPU machine, with no .venv and no package index: the CUDA tests, graph against eager
#                    records, speed, GPU busy, the Cornell slice of balance_table2 and the refitted GPU cost entry
#                    in <= 8 minutes, one summary file (benchmarks/gpu_check.py); make gpu-check-smoke: the same on
#                    the CPU, small; make gpu-bundle: one archive of what a GPU machine without an index needs
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Pinned: an unpinned torch pulls several GB of CUDA wheels; 2.13.0 resolves to the CPU build here.
TORCH  := torch==2.13.0
# DGL is not in the default venv: its last release does not import with this torch (graphbolt and
# torchdata's datapipes need torch <= 2.2), and OGB's `import dgl` of it would print "DGL backend not
# selected" and write ~/.dgl/config.json. The DGL tests run in .venv-dgl (make test-dgl).
# The DGL environment (docs/dgl.md): dgl 2.1.0 ships kernels for torch 2.0.0 .. 2.2.1; torchdata 0.7.1
# still has datapipes; graphbolt imports pandas, pydantic and yaml without declaring them.
DGL_VENV := .venv-dgl
DGL_PINS := torch==2.2.1 torchdata==0.7.1 dgl==2.1.0 "numpy<2" "pandas<2.3" pydantic pyyaml wheel
SUITE  ?= quick
OUT    ?= results/$(SUITE)

.PHONY: install test test-all test-dgl test-gpu gpu-check gpu-check-smoke gpu-bundle bench clean

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[test,ray]"
	$(BIN)/python -m pip install -q -e ".[cuda]" || echo "warning: triton could not be installed; the Triton kernel tests will be skipped"
	touch $@

# Two workers (pytest-xdist; CI machines have 2 cores). --dist loadgroup keeps the modules marked
# xdist_group (an expensive module-scoped fixture) in one worker. PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
XDIST  = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadgroup)
# The tests start many Python processes (CLI runs, workers, fresh-process checks), each importing the
# zoo: let them share compiled bytecode (__pycache__, git-ignored) even where the environment sets
# PYTHONDONTWRITEBYTECODE, instead of each compiling the package from source.
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

test: $(STAMP)
	ZOO_DATA_MIRROR="$${ZOO_DATA_MIRROR:-$(abspath ../shared/datasets)}" $(PYTEST) -q $(XDIST)

test-all: $(STAMP)
	ZOO_DATA_MIRROR="$${ZOO_DATA_MIRROR:-$(abspath ../shared/datasets)}" $(PYTEST) -q $(XDIST) -m "slow or not slow"

$(DGL_VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(DGL_VENV)
	$(DGL_VENV)/bin/python -m pip install -q --upgrade pip
	$(DGL_VENV)/bin/python -m pip install -q $(DGL_PINS)
	printf '%s\n' $(DGL_PINS) > $(DGL_VENV)/pins.txt
	$(DGL_VENV)/bin/python -m pip install -q -c $(DGL_VENV)/pins.txt -e ".[test]"
	touch $@

# The DGL tests (-m dgl) and the torch-2.2 fallback of the edge operations, with import failures
# turned into test failures (ZOO_REQUIRE_DGL=1): this target cannot pass by skipping.
test-dgl: $(DGL_VENV)/.installed
	ZOO_REQUIRE_DGL=1 OUTDATED_IGNORE=1 ZOO_DATA_MIRROR="$${ZOO_DATA_MIRROR:-$(abspath ../shared/datasets)}" \
		$(DGL_VENV)/bin/python -m pytest -q -m "dgl or fallback"

# The CUDA checks, on a GPU machine with a CUDA build of torch in .venv: the Triton attention as compiled
# for the GPU, models on CUDA against the CPU, and the training epoch replayed as CUDA graphs against eager.
# ZOO_REQUIRE_CUDA=1: no GPU or no Triton fails, not skips.
test-gpu: $(STAMP)
	ZOO_REQUIRE_CUDA=1 TRITON_INTERPRET=0 $(BIN)/python -m pytest -q -rs tests/ops/compiled/test_triton_cuda.py \
		tests/nn/test_base_hidden_heads.py tests/trainer/test_cuda_graphs_gpu.py

# The GPU check with the machine's own Python (torch, torch_geometric, triton, pytest; no .venv, nothing
# downloaded): GPU_CHECK_ARGS='--data DIR --wheels DIR' as in benchmarks/gpu_check.py's docstring.
GPU_CHECK_OUT ?= gpu-check
gpu-check:
	$(PYTHON) benchmarks/gpu_check.py --out $(GPU_CHECK_OUT) $(GPU_CHECK_ARGS)

# The GPU check's CPU smoke run: every step, a few epochs, graphs through the tests' capture double.
gpu-check-smoke: $(STAMP)
	$(BIN)/python benchmarks/gpu_check.py --device cpu --quick --out $(GPU_CHECK_OUT)-smoke $(GPU_CHECK_ARGS)

# The project at HEAD, the check's datasets and the wheels a stock CUDA image lacks, in one archive (<= 60 MB).
gpu-bundle: $(STAMP)
	$(BIN)/python benchmarks/gpu_bundle.py --download --out gpu-bundle.tar.gz

# The C++ kernels are compiled once up front (about a minute, announced), not by each worker at first use;
# without a compiler the suite runs on the plain torch path.
bench: $(STAMP)
	-$(BIN)/zoo build-kernels > /dev/null
	ZOO_DATA_MIRROR="$${ZOO_DATA_MIRROR:-$(abspath ../shared/datasets)}" $(BIN)/zoo bench $(SUITE) --out $(OUT)

clean:
	rm -rf $(VENV) $(DGL_VENV) build dist *.egg-info
