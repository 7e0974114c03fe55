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

.PHONY: demo test build rust-test c-test py-test lint header bench soak clean

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

build: $(STAMP)
	$(BIN)/maturin develop --release --quiet

demo: build
	$(BIN)/ctxwindow replay --max-tokens 2500 --plot out/replay.png --json out/replay.json

test: build rust-test c-test py-test lint

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

py-test: build
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	cargo fmt --all --check
	cargo clippy --release --workspace --all-targets --quiet -- -D warnings
	$(BIN)/python -m mypy --strict python/ctxwindow tests benches
	$(BIN)/python -m mypy.stubtest ctxwindow._native

# The window's stateful Hypothesis machine for 100,000 steps (not part of `make test`).
SOAK_STEPS ?= 100000
soak: build
	CTXWINDOW_SOAK_STEPS=$(SOAK_STEPS) $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_window_machine.py -k soak

# Regenerate the committed C header (the Rust test `header_is_current` fails when it drifts).
header:
	CTXWINDOW_UPDATE_HEADER=1 cargo test --release -p ctxwindow-ffi --quiet header_is_current

bench: build
	$(BIN)/python -m pip install --quiet -r benches/requirements.txt
	$(BIN)/python benches/bench_history.py
	$(BIN)/python benches/bench_tokenizer.py
	$(BIN)/python benches/bench_scoring.py
	$(BIN)/python benches/bench_window.py
	$(BIN)/python benches/bench_checkpoint.py
	$(BIN)/python benches/bench_sync.py
	$(BIN)/python benches/embed_results.py

clean:
	rm -rf target $(VENV) tests/c/bin

FORCE:
