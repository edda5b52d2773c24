# Two entry points: `make run` (set up + run the log on embedded defaults) and
# `make test` (set up + ruff + mypy --strict + the whole pytest suite).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test test-fast lint typecheck pytest pytest-parallel pytest-serial pytest-pure native \
	bytecode proto bench clean

# pip first: the pip that `venv` brings (23.2 with Python 3.11) matched every file of every
# release on the index pages against ~1,000 platform tags one by one (143,000 links: ~35 s of CPU
# of its ~80 s in a clean clone); pip >= 25 installs the same packages in about half the CPU.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q 'pip>=25'
	$(BIN)/pip install -q -e '.[server,dev,langchain,otel]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/ledger serve

# `make test`: lint and the docs build (seconds), then the parallel pytest run; beside it, at the
# lowest CPU priority (nice 19), mypy and the pure pass, which take the CPU the workers leave idle
# while their tests wait on servers, disks, SeaweedFS and Chromium (`setsid`: a group of their
# own, reniced to the normal priority once the parallel run is over, killed if it is
# interrupted). Their output follows pytest's. Then the serial tests, alone. Fails if any fails.
test: $(STAMP) native lint docs bytecode
	@log=$$(mktemp); \
	setsid nice -n 19 $(MAKE) --no-print-directory typecheck pytest-pure >$$log 2>&1 & beside=$$!; \
	trap 'kill -TERM -- -$$beside 2>/dev/null' INT TERM; \
	$(MAKE) --no-print-directory pytest-parallel; parallel=$$?; \
	renice -n 0 -g $$beside >/dev/null 2>&1; \
	echo "(mypy and the pure pass, run beside it:)"; \
	wait $$beside; beside=$$?; cat $$log; rm -f $$log; \
	test $$parallel = 0 && test $$beside = 0
	$(MAKE) --no-print-directory pytest-serial

# The compiled core (ledger/core/_hot.c, _strictjson.c, _recordread.c) built in place: editable installs are
# pure until this runs. Fails when it cannot build (no C compiler or Python headers: `.ci/run`
# installs them).
native: $(STAMP)
	$(BIN)/python -W ignore setup.py -q build_ext --inplace
	$(BIN)/python -c "from ledger.core import accel; assert accel.CORE == 'native', accel.native_error"
	$(BIN)/python -c "from ledger.core import accel; assert accel.JSON_CORE == 'native', accel.json_error"
	$(BIN)/python -c "from ledger.core import accel; from ledger.records import decision; \
		assert accel.RECORD_CORE == 'native', accel.record_error; \
		assert decision._read_fast is accel.record_read"

# Our modules compiled to bytecode before the tests run. Where PYTHONDONTWRITEBYTECODE is set
# (as on the CI runs here), Python writes no __pycache__, so each of the suite's Python
# processes (every `ledger serve`, CLI call, witness and xdist worker: several hundred) compiled
# them all from source again, ~0.3 s of CPU each. compileall writes the caches regardless; a
# file edited later is compiled from source as before (its cache is stale) until the next run.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q ledger client tests tools

# The core's unit and property tests again on the pure twin (`pytest` runs all on the compiled),
# but for the twin comparisons that call both modules by name (`hot` and `_hot`, never the
# selected core): here they would run the very code the compiled run ran (~100 s of CPU) again.
PURE_SAME := --deselect tests/property/test_hot_twins.py::test_compiled_and_pure_agree \
	--deselect tests/property/test_hot_twins.py::test_bundle_leaf_hashes_agree \
	--deselect tests/property/test_dedup_table_twins.py::test_compiled_and_pure_tables_are_identical \
	--deselect tests/property/test_dedup_table_twins.py::test_bundle_digests_twins \
	--deselect tests/property/test_dedup_table_twins.py::test_batches_longer_than_the_prefetch_window_are_identical \
	--deselect tests/property/test_record_read_twins.py::test_compiled_and_pure_read_alike \
	--deselect tests/property/test_record_read_twins.py::test_compiled_and_pure_refuse_alike
CORE_TESTS := tests/property/test_hot_twins.py tests/property/test_tile_layout.py \
	tests/property/test_merkle_property.py tests/unit/test_merkle.py \
	tests/unit/test_merkle_vectors.py tests/unit/test_tiles.py tests/unit/test_log.py \
	tests/unit/test_storage_contract.py tests/property/test_loads_strict_property.py \
	tests/property/test_jcs_fast_property.py tests/property/test_dedup_table_twins.py \
	tests/unit/test_dedup_store.py tests/property/test_record_read_twins.py \
	tests/unit/test_records.py tests/property/test_records_property.py
pytest-pure: $(STAMP) bytecode
	LEDGER_PURE=1 LEDGER_EXPECT_CORE=pure $(PYTEST) $(WORKERS) $(CORE_TESTS) $(PURE_SAME)

lint: $(STAMP)
	$(BIN)/ruff check ledger client tests tools
	$(BIN)/ruff format --check ledger client tests tools

typecheck: $(STAMP)
	$(BIN)/mypy

# Three pytest-xdist workers on the two cores (most tests wait on real servers, SeaweedFS,
# Chromium and subprocesses: two workers kept the cores about 64 % busy), each taking whole files
# (a module's fixtures are built once), for all but the tests marked `serial` (they measure
# memory or latency under attack), which then run alone. The files go out in collection order,
# which puts the longest first (tests/schedule.py), not xdist's default order (by number of
# tests). The serial run collects only the files that hold them (SERIAL; a rule test keeps it
# equal to the marked files), not the whole suite again (~15 s alone).
# PYTHONDONTWRITEBYTECODE is emptied for pytest (and what it starts): where it is set, pytest
# cannot keep its rewritten test modules in __pycache__ and every worker rewrote all ~300 of
# them (~8 s of CPU each); now the first run writes them and the others load them.
WORKERS := -n 3 --dist loadfile --no-loadscope-reorder
SERIAL := tests/integration/test_memory_bound.py tests/integration/test_reader_attack.py
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest
pytest: $(STAMP) bytecode
	$(MAKE) --no-print-directory pytest-parallel
	$(MAKE) --no-print-directory pytest-serial

pytest-parallel: $(STAMP) bytecode
	LEDGER_EXPECT_CORE=native $(PYTEST) $(WORKERS) -m "not serial"

pytest-serial: $(STAMP) bytecode
	LEDGER_EXPECT_CORE=native $(PYTEST) -m serial $(SERIAL)

# The unit and property tests without the slow ones (fuzz, crash, bench smoke, browser, anything
# over ~5 s): under 90 s on an idle 2-core machine, for the edit-test loop. `make test` runs
# everything and stays the README's and CI's command.
test-fast: $(STAMP) bytecode lint typecheck
	$(PYTEST) $(WORKERS) -m "not slow" tests/unit tests/property

# The docs site (mkdocs.yml): a broken link or anchor fails the build. Output in site/ (ignored).
.PHONY: docs
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

proto: $(STAMP)
	$(BIN)/python tools/gen_proto.py

bench: $(STAMP)
	$(BIN)/python tools/bench.py

clean:
	rm -rf $(VENV) build *.egg-info ledger/core/_hot*.so ledger/core/_strictjson*.so
