# Two entry points: `make run` (set up + run the log on embedded defaults) and
# `make test` (set up + ruff + mypy --strict + the whole pytest suite).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test test-fast lint typecheck pytest proto bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[server,dev,langchain,otel]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/ledger serve

test: $(STAMP) lint typecheck docs pytest

lint: $(STAMP)
	$(BIN)/ruff check ledger client tests tools
	$(BIN)/ruff format --check ledger client tests tools

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest

# The unit and property tests only (about a minute): for the edit-test loop. `make test` stays
# the README's and CI's command.
test-fast: $(STAMP) lint typecheck
	$(BIN)/pytest tests/unit tests/property

# The docs site (mkdocs.yml): a broken link or anchor fails the build. Output in site/ (ignored).
.PHONY: docs
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

proto: $(STAMP)
	$(BIN)/python tools/gen_proto.py

bench: $(STAMP)
	$(BIN)/python tools/bench.py

clean:
	rm -rf $(VENV) build *.egg-info
