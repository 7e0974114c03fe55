# ctxwindow: `make demo` builds and runs the demo on bundled real data; `make test` runs every
# test tier (Rust, C under valgrind, Python with Hypothesis) and the linters.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(abspath $(BIN)/python)
STAMP := $(VENV)/.deps-installed
# The same interpreter for cargo and maturin, so both reuse one release build of the crates.
export PYO3_PYTHON := $(PY)
export VIRTUAL_ENV := $(abspath $(VENV))

CC ?= gcc
CFLAGS := -std=c11 -Wall -Wextra -Werror -O1 -g -Irust/ffi/include
FFI_LIB := target/release/libctxwindow.a
C_TESTS := $(patsubst tests/c/%.c,tests/c/bin/%,$(wildcard tests/c/*.c))
VALGRIND := valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite

.PHONY: demo test build rust-test c-test py-test lint header bench bench-dask soak clean postgres-server sanitize docs docs-check

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

build: $(STAMP)
	$(BIN)/maturin develop --release --quiet

demo: build
	$(BIN)/ctxwindow replay --max-tokens 2500 --plot out/replay.png --json out/replay.json

test: build rust-test c-test sanitize py-test lint docs-check

# The documentation site (mkdocs.yml, docs/), built into site/: `docs` shows the build's log,
# `docs-check` is the same strict build, quiet, as part of `make test`, so a broken link, anchor
# or API reference fails. Offline: the API reference is read from the sources and _native.pyi,
# and the theme uses the system fonts.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: $(STAMP)
	$(MKDOCS) build --strict

docs-check: $(STAMP)
	$(MKDOCS) build --strict --quiet

rust-test:
	cargo test --release --workspace --exclude ctxwindow-python

$(FFI_LIB): FORCE
	cargo build --release -p ctxwindow-ffi --quiet

tests/c/bin/%: tests/c/%.c rust/ffi/include/ctxwindow.h $(FFI_LIB)
	@mkdir -p tests/c/bin
	$(CC) $(CFLAGS) -o $@ $< $(FFI_LIB) -lpthread -ldl -lm

c-test: $(C_TESTS)
	@for t in $(C_TESTS); do echo "== $$t"; $$t || exit 1; done
	@for t in $(C_TESTS); do echo "== valgrind $$t"; $(VALGRIND) $$t > /dev/null || exit 1; done

# The C tests under AddressSanitizer + UndefinedBehaviorSanitizer (the C side instrumented, the
# Rust static library's allocations seen through ASan's malloc); any report fails.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_TESTS := $(patsubst tests/c/%.c,tests/c/bin/san-%,$(wildcard tests/c/*.c))

tests/c/bin/san-%: tests/c/%.c rust/ffi/include/ctxwindow.h $(FFI_LIB)
	@mkdir -p tests/c/bin
	$(CC) $(CFLAGS) $(SAN_FLAGS) -o $@ $< $(FFI_LIB) -lpthread -ldl -lm

sanitize: $(SAN_TESTS)
	@for t in $(SAN_TESTS); do echo "== asan+ubsan $$t"; \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		$$t || exit 1; done

py-test: build postgres-server
	$(BIN)/python -m pytest -q

# The PostgreSQL store's tests start a throwaway server; install the distribution's package when
# it is missing (as root). Without it those tests fail, unless CTXWINDOW_SKIP_POSTGRES=1.
postgres-server:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1 \
	    && [ -z "$$CTXWINDOW_PG_BIN" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; fi

lint: $(STAMP)
	cargo fmt --all --check
	cargo clippy --release --workspace --all-targets --quiet -- -D warnings
	$(BIN)/python -m mypy --strict python/ctxwindow tests benches
	$(BIN)/python -m mypy.stubtest ctxwindow._native

# The window's stateful Hypothesis machine for 100,000 steps (not part of `make test`).
SOAK_STEPS ?= 100000
# ... and 8 threads x THREAD_OPS mixed operations on one TokenHistory and one Tokenizer.
THREAD_OPS ?= 10000
soak: build
	CTXWINDOW_SOAK_STEPS=$(SOAK_STEPS) $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_window_machine.py -k soak
	CTXWINDOW_THREAD_OPS=$(THREAD_OPS) $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_threads.py

# Regenerate the committed C header (the Rust test `header_is_current` fails when it drifts).
header:
	CTXWINDOW_UPDATE_HEADER=1 cargo test --release -p ctxwindow-ffi --quiet header_is_current

bench: build postgres-server
	$(BIN)/python -m pip install --quiet -r benches/requirements.txt
	$(BIN)/python benches/bench_history.py
	$(BIN)/python benches/bench_tokenizer.py
	$(BIN)/python benches/bench_scoring.py
	$(BIN)/python benches/bench_window.py
	$(BIN)/python benches/bench_checkpoint.py
	$(BIN)/python benches/bench_fidelity.py
	$(BIN)/python benches/bench_recall.py
	$(BIN)/python benches/bench_sync.py
	$(BIN)/python benches/bench_estimate.py
	$(BIN)/python benches/bench_cost.py
	$(BIN)/python benches/embed_results.py

# ctxwindow.dask on local clusters of 1 and 2 workers, 10^8 generated items (ITEMS=... for another size).
ITEMS ?= 100000000
bench-dask: build
	$(BIN)/python benches/bench_dask.py $(ITEMS)

clean:
	rm -rf target $(VENV) tests/c/bin

FORCE:

# Exact counting on typical and adversarial text against Python tiktoken and, in Rust, the
# bpe-openai crate (benches/peer_bpe, built here; not part of `make bench`: its build generates
# ~70 MB of bpe-openai tables).
.PHONY: bench-worst
bench-worst: build
	$(BIN)/python -m pip install --quiet -r benches/requirements.txt
	$(BIN)/python benches/bench_worst_case.py
	$(BIN)/python benches/embed_results.py

# Mutation fuzzing on stable Rust (fuzz/): exact counting against tiktoken-rs, the image-header
# parser, chat accounting and the C entry points, FUZZ_SECONDS each (not part of `make test`).
# Crashing inputs are written to fuzz/crashes/; copied to fuzz/seeds/TARGET/ they are replayed
# first by every later run.
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	CARGO_TARGET_DIR=target/fuzz cargo build --release --quiet --manifest-path fuzz/Cargo.toml
	@for t in count image chat ffi; do target/fuzz/release/ctxwindow-fuzz $$t $(FUZZ_SECONDS) || exit 1; done

# The published wheel in dist/: abi3 (Python >= 3.10), manylinux2014 through zig (PyPI's ziglang),
# no debug info, symbols stripped (Cargo profile `wheel`). auditwheel checks the tag, and
# tests/test_wheel.py checks the size (<= 10 MB) and installs it into a fresh virtualenv without
# Rust on PATH, where `ctxwindow replay` runs (its dependencies come from the pip index).
.PHONY: wheel
wheel: $(STAMP)
	$(BIN)/python -m pip install --quiet ziglang auditwheel
	rm -rf dist
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/maturin build --profile wheel --zig --compatibility manylinux2014 --out dist
	$(BIN)/auditwheel show dist/ctxwindow-*.whl
	CTXWINDOW_WHEEL="$$(ls dist/ctxwindow-*.whl)" $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_wheel.py
	@ls -l dist/ctxwindow-*.whl
