# harnessevolve: `make demo` and `make test` each work from a fresh clone (they install first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# llama-cpp-python has no wheel here, and its default build compiles for the build machine's CPU (a
# build once crashed on a host with AMX). tools/build_llama_cpp.py builds llama.cpp's CPU backend in
# several instruction-set variants instead; the best one this CPU runs is loaded at run time
# (`harnessevolve models info` says which). LLAMA_VARIANTS=none builds the one AVX2 backend of before.
LLAMA_VARIANTS ?= all
DEMO_DIR := .demo
DEMO_GENERATIONS ?= 4
DEMO_BATCH ?= 8
DEMO_BENCHMARK ?= shell-onecall

.PHONY: install system-packages demo test test-fast test-under-load lint format clean

install: system-packages $(VENV)/.installed

# The agent sandbox needs bubblewrap (bwrap) and util-linux (prlimit, setpriv). As root with apt-get
# they are installed here; otherwise this stops before the long build with the command to run.
# SKIP_SYSTEM_PACKAGES=1 skips the check (e.g. for --sandbox docker only).
system-packages:
	@[ -n "$(SKIP_SYSTEM_PACKAGES)" ] && exit 0; missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	{ command -v prlimit && command -v setpriv; } >/dev/null 2>&1 || missing="$$missing util-linux"; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing the sandbox's system packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$$missing; \
	else \
		echo "harnessevolve's sandbox needs$$missing. Install it first, then rerun make:" >&2; \
		echo "  sudo apt-get update && sudo apt-get install -y$$missing" >&2; \
		echo "  (Fedora: sudo dnf install -y$$missing; Arch: sudo pacman -S$$missing)" >&2; \
		exit 2; \
	fi

$(VENV)/.installed: pyproject.toml | system-packages
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python tools/build_llama_cpp.py $(BIN)/python --variants $(LLAMA_VARIANTS)
	$(BIN)/python -m pip install --quiet -e ".[dev,local,train,tracking,ray,compare,nl2bash,humaneval,mcp,bfcl,agents]"
	$(BIN)/python -m pip install --quiet --no-deps 'bfcl-eval==2026.3.23'
	touch $@

demo: install
	rm -rf $(DEMO_DIR)
	$(BIN)/harnessevolve init $(DEMO_DIR)/harness
	$(BIN)/harnessevolve run --harness $(DEMO_DIR)/harness --benchmark $(DEMO_BENCHMARK) \
		--generations $(DEMO_GENERATIONS) --batch-size $(DEMO_BATCH) || test $$? -eq 1
	$(BIN)/harnessevolve report --harness $(DEMO_DIR)/harness --final

# pytest-xdist spreads the tests over the cores (auto: one worker per core, 8 at most); JOBS=0 runs
# them in this one process.
JOBS ?= auto
XDIST := -n $(JOBS) --maxprocesses 8
PYTEST := $(BIN)/python -m pytest -q $(XDIST)

test: install
	$(PYTEST)

test-fast: install
	$(PYTEST) -m "not slow"

# The suite under artificial load (two busy processes per core), REPEAT times in a row: no test may
# depend on timing. Part of it: .venv/bin/python tests/under_load.py -- tests/cli -k interrupt
REPEAT ?= 3
test-under-load: install
	$(BIN)/python tests/under_load.py --repeat $(REPEAT) -- $(XDIST)

# zizmor checks the shipped GitHub workflows offline (pinned actions, no template injection, ...).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/zizmor --offline --no-progress --quiet docs/ci/*.yml

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache .ruff_cache
