# Benchmarks (see BENCHMARKS.md). Root is needed by the daemon benchmark:
# it runs the real ibacm in network and mount namespaces of its own.

CARGO ?= cargo

.PHONY: bench bench-quick build-release dist

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

# 64 real daemons on one bridge, each resolving all the others, against the
# simulation's prediction (BENCHMARKS.md section 6). The bench raises the
# kernel's neighbour-table limits for the run and puts them back.
.PHONY: fleet
fleet: build-release
	$(CARGO) bench --bench fleet -- --hosts 64

# Fuzzing (cargo-fuzz, libFuzzer). The machines this project builds on carry
# only the stable toolchain; RUSTC_BOOTSTRAP lets it take the sanitizer
# flags cargo-fuzz passes. Seeds are in fuzz/corpus/<target>/.
FUZZ_TARGETS = request wire options hosts
FUZZ_SECONDS ?= 60

.PHONY: fuzz fuzz-smoke
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
		RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run $$t fuzz/corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

# A few seconds each: what the test command runs.
fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=5

# Reliability (docs/reliability.md). Root is needed: both run the real
# daemon in namespaces of its own.
SOAK_SECONDS ?= 600

.PHONY: soak memcheck
soak:
	SOAK_SECONDS=$(SOAK_SECONDS) scripts/soak.sh

# The end-to-end suites with every daemon under valgrind memcheck.
memcheck:
	scripts/memcheck.sh

# What ships, into target/dist/: the glibc 2.28 build of the provider and
# urdma-acm, and the .deb and .rpm made from it (scripts/check-dist.sh
# checks them).
dist:
	scripts/dist.sh

# The real urdma stack (docs/urdma-device.md): the kernel module, built against
# Debian's linux-headers-amd64, and the libibverbs provider, into
# target/urdma/.
.PHONY: urdma
urdma:
	$(MAKE) -C urdma OUT=$(CURDIR)/target/urdma
