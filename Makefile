# harnessevolve: `make demo` and `make test` each work from a fresh clone (they install first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# llama-cpp-python has no wheel here; its default build uses CPU features (AMX) some machines lack.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
DEMO_DIR := .demo
DEMO_GENERATIONS ?= 4
DEMO_BATCH ?= 8
DEMO_BENCHMARK ?= shell-onecall

.PHONY: install demo test test-fast lint format clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet -e ".[dev,local,train,tracking,ray,compare,nl2bash]"
	touch $@

demo: install
	rm -rf $(DEMO_DIR)
	$(BIN)/harnessevolve init $(DEMO_DIR)/harness
	$(BIN)/harnessevolve run --harness $(DEMO_DIR)/harness --benchmark $(DEMO_BENCHMARK) \
		--generations $(DEMO_GENERATIONS) --batch-size $(DEMO_BATCH) || test $$? -eq 1
	$(BIN)/harnessevolve report --harness $(DEMO_DIR)/harness --final

test: install
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache .ruff_cache
