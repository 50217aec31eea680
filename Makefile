# Benchmarks (see BENCHMARKS.md). Root is needed by the daemon benchmark:
# it runs the real ibacm in network and mount namespaces of its own.

CARGO ?= cargo

.PHONY: bench bench-quick build-release

build-release:
	$(CARGO) build --workspace --release

# The full run: in-process engine costs, then the real daemon (about 3-4
# minutes on a 2-core machine).
bench: build-release
	$(CARGO) bench --bench engine
	$(CARGO) bench --bench daemon

# Shorter runs and fewer cases (no 1M-entry callgrind or throughput rows).
bench-quick: build-release
	$(CARGO) bench --bench engine -- --quick
	$(CARGO) bench --bench daemon -- --quick
