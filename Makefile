# Two entry points: `make run` (set up + run the log on embedded defaults) and
# `make test` (set up + ruff + mypy --strict + the whole pytest suite).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck pytest proto bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[server,dev,langchain,otel]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/ledger serve

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check ledger client tests tools
	$(BIN)/ruff format --check ledger client tests tools

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest

proto: $(STAMP)
	$(BIN)/python tools/gen_proto.py

bench: $(STAMP)
	$(BIN)/python tools/bench.py

clean:
	rm -rf $(VENV) build *.egg-info
