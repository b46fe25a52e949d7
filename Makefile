# protolab — entry points. `make demo` and `make test` set everything up themselves.
# Run as root (namespaces, TUN devices, apt-get). `make help` lists the targets.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# cargo from rustup lives in ~/.cargo/bin; use it when cargo is not already on PATH.
export PATH := $(PATH):$(HOME)/.cargo/bin

VENV    := .venv
PYTHON  := $(VENV)/bin/python
NET     := target/release/protolab-net
RESULTS := results

# Extra arguments, e.g. `make validate VALIDATE_ARGS=--quick`, `make bench BENCH_ARGS='--seconds 5'`.
DEMO_ARGS ?=
VALIDATE_ARGS ?=
BENCH_ARGS ?=
# Arguments of benches/endpoints.py, e.g. `make bench ENDPOINTS_BENCH_ARGS='--repeat 9'`.
ENDPOINTS_BENCH_ARGS ?=
# Arguments of benches/flows_bench.py and benches/traffic_classify.py.
FLOWS_BENCH_ARGS ?=
CLASSIFY_BENCH_ARGS ?=
# `make fuzz`: seconds per target, and which targets (default: every one in fuzz/).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
# `make cleanup LAB=name` cleans one lab; without LAB, every protolab lab on this machine.
LAB ?=

.PHONY: help setup build demo validate test bench cleanup schemas stacks fuzz

help: ## list the targets
	@echo "protolab make targets (run as root):"
	@grep -E '^[a-z]+:.*## ' $(firstword $(MAKEFILE_LIST)) | \
	  awk 'BEGIN {FS = ":.*## "} {printf "  make %-8s %s\n", $$1, $$2}'

setup: ## install Debian packages, build Rust (release), create .venv and install the package (idempotent)
	bash scripts/setup.sh

build: ## build the Rust workspace only (cargo build --release --workspace)
	cargo build --release --workspace

stacks: ## build the external QUIC stacks of the interop runs: aioquic (pip), quic-go (go install; needs Go); docs/interop.md
	bash scripts/build_stacks.sh

demo: setup ## set up, then run the wifi-loss demo (specs/demo.toml, ~10 min) and its report: results/demo
	$(VENV)/bin/protolab demo $(DEMO_ARGS)

validate: setup ## set up, then validate the emulator: results/validation.json + a table
	mkdir -p $(RESULTS)
	$(VENV)/bin/protolab validate-emulator --out $(RESULTS)/validation.json $(VALIDATE_ARGS)

test: setup ## set up, then run all tests (Rust, then Python)
	cargo test --release --workspace
	$(VENV)/bin/pytest -q tests

bench: setup ## set up, then run the benchmarks (emulator throughput; endpoints vs nginx/caddy; flow extraction; classifier; analysis of results/demo)
	$(PYTHON) benches/emu_throughput.py $(BENCH_ARGS)
	$(PYTHON) benches/endpoints.py $(ENDPOINTS_BENCH_ARGS)
	$(PYTHON) benches/flows_bench.py $(FLOWS_BENCH_ARGS)
	$(PYTHON) benches/traffic_classify.py $(CLASSIFY_BENCH_ARGS)
	@if [[ -f $(RESULTS)/demo/results.duckdb ]]; then $(PYTHON) benches/analysis.py $(RESULTS)/demo; \
	  else echo "bench: no $(RESULTS)/demo (make demo): the analysis benchmark is skipped"; fi

schemas: setup ## after changing a document in crates/contract: rewrite schemas/, the Python models and docs/store.md's tables
	$(NET) schema --out schemas
	$(PYTHON) scripts/generate_models.py
	$(PYTHON) -m protolab.store.doc

fuzz: ## opt-in: run every cargo-fuzz target (fuzz/) FUZZ_SECONDS each, installing cargo-fuzz if missing (needs nightly)
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	cd fuzz && for t in $(or $(FUZZ_TARGETS),$$(cargo +nightly fuzz list)); do \
	  echo "fuzz: $$t ($(FUZZ_SECONDS) s)"; \
	  mkdir -p "scratch/$$t"; \
	  cargo +nightly fuzz run "$$t" "scratch/$$t" "corpus/$$t" -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

cleanup: ## remove what crashed labs left behind (all labs, or LAB=name)
	@if [[ ! -x $(NET) ]]; then \
	  echo "cleanup: $(NET) not built; run 'make build' first" >&2; exit 1; fi
	$(NET) emu cleanup $(if $(LAB),--lab $(LAB))
