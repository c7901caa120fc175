# The two commands of the README, and their parts.
#   make demo   set up, build, and show untrusted code running contained
#   make test   set up, build, and run every test (what CI runs)
BUILD ?= build
# One clang tree for the ASAN/UBSAN tests and the fuzzers (asan-test, fuzz).
ASAN_BUILD ?= build-asan-fuzz
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc)
# Each phase of `make test` says when it ended: CI's log shows where the time goes.
DONE = echo "== make $@: done at $$(date -u +%T)"
# Unity builds (CMakeLists.txt: RF_UNITY): a clean build in a fraction of the
# time; UNITY=OFF for a developer's tree where one file changes at a time.
UNITY ?= ON

.PHONY: all deps agents build demo demo-workflow demo-fleet demo-session test unit-test sandbox-test workflow-test asan-configure asan-test tsan-test bench fuzz format clean

all: build

deps:
	./scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRF_UNITY=$(UNITY) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	@$(DONE)

demo: build
	./scripts/demo.sh $(BUILD)

# The real agent CLIs (Claude Code, Codex) that cli_agent steps run, pinned
# in agents/npm, from the npm registry.
agents: deps
	./scripts/install-agents.sh
	@$(DONE)

# The portfolio workflow end to end: fake model, git server, worker, Claude Code.
demo-workflow: build agents
	./scripts/demo-workflow.sh $(BUILD)

# A fleet on this machine: PostgreSQL (its own cluster in a temp dir), three
# labelled workers, calls and a workflow routed by label, fleet status, and a
# worker killed mid-call (docs/fleet.md).
demo-fleet: build
	./scripts/demo-fleet.sh $(BUILD)

# A sandbox that lives (issue 41): a web server in it opened through a port
# URL in chromium, a watch, a build's output left and followed again, expiry.
demo-session: build
	./scripts/demo-session.sh $(BUILD)

# Every test: unit, integration, security and fault tests against real
# sandboxes, then the unit tests again under ASAN/UBSAN, the tests of code that
# runs threads under TSAN, then a short fuzz run.
# The unit tests run as two processes (scripts/run-gtest-shards.sh), not one
# per test: starting a test binary ~460 times cost more than the tests.
# ctest starts the tests it knows to be long first, from its cost data; a
# clean tree has none, so it gets tests/ctest-costs.txt (the longest, measured
# here), or a 90 s test that starts last keeps one core busy alone. Three at
# a time on 2 cores: the tests wait on sandboxes, servers and clocks, and two
# left the cores a third idle (608 s wall for 811 s of CPU); with CI=true all
# 422 passed in 421 s at -j 3 here.
test: build agents asan-test tsan-test fuzz
	./scripts/run-gtest-shards.sh $(BUILD)/tests/rf_unit_tests 2 900
	@mkdir -p $(BUILD)/Testing/Temporary
	@[ -f $(BUILD)/Testing/Temporary/CTestCostData.txt ] || \
	  cp tests/ctest-costs.txt $(BUILD)/Testing/Temporary/CTestCostData.txt
	ctest --test-dir $(BUILD) --output-on-failure -j 3 --timeout 300 -LE '^unit$$'
	@$(DONE)


# ctest labels are the test folders: unit, integration, security, docker, proxy, identity, workflow.
unit-test: build
	ctest --test-dir $(BUILD) --output-on-failure -L unit

sandbox-test: build
	ctest --test-dir $(BUILD) --output-on-failure -L 'integration|security'

workflow-test: build agents
	ctest --test-dir $(BUILD) --output-on-failure -L workflow

# The unit and identity tests under ASAN/UBSAN, and the fuzzers, are built in
# one clang tree, so the libraries are compiled once for both: instrumented for
# libFuzzer's coverage, whose callbacks ASAN's runtime answers in the tests.
# -O0: clang compiles this tree in half the CPU of -O1 (1766 s -> ~900 s of
# compiles, 17 -> 8 min on 2 cores), the sanitized unit tests take 54 s
# instead of 33, and a fuzzer makes 5-15x fewer runs a second (the CI run is a
# smoke of the seeds and their near mutations; ASAN_OPT=-O1 for long runs:
# make fuzz ASAN_OPT=-O1 ASAN_BUILD=build-fuzz-O1 FUZZ_SECONDS=600).
ASAN_OPT ?= -O0
asan-configure: deps
	CC=clang CXX=clang++ cmake -S . -B $(ASAN_BUILD) -DRF_SANITIZE=ON -DRF_FUZZ=ON -DRF_BENCH=OFF \
	  -DCMAKE_BUILD_TYPE=Debug -DRF_UNITY=$(UNITY) "-DCMAKE_CXX_FLAGS_DEBUG=$(ASAN_OPT) -g1" "-DCMAKE_C_FLAGS_DEBUG=$(ASAN_OPT) -g1" >/dev/null

asan-test: asan-configure
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target rf_unit_tests rf_identity_tests rf_fuzzers
	./scripts/run-gtest-shards.sh $(ASAN_BUILD)/tests/rf_unit_tests 2 1800
	./scripts/run-gtest-shards.sh $(ASAN_BUILD)/tests/rf_identity_tests 2 900
	@$(DONE)

# The tests labelled tsan (tests/CMakeLists.txt): unit, local, proxy, and the
# sandbox tests of the CLI, worker, fallback, pool and proxy, and the workflow
# engine's tests, under ThreadSanitizer. ctest runs each without ASLR and with tests/tsan.supp; any
# report fails the test (exit 66).
tsan-test: deps
	cmake -S . -B $(TSAN_BUILD) -DRF_TSAN=ON -DRF_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug -DRF_UNITY=$(UNITY) >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target rf_unit_tests rf_local_tests rf_proxy_tests rf_sandbox_tests rf_fallback_tests \
	  rf_identity_tests rf_workflow_tests
	for t in rf_unit_tests rf_proxy_tests rf_identity_tests; do \
	  RF_SHARD_WRAPPER="setarch $$(uname -m) -R" TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1" \
	    ./scripts/run-gtest-shards.sh $(TSAN_BUILD)/tests/$$t 2 1800 || exit 1; done
	ctest --test-dir $(TSAN_BUILD) --output-on-failure -L tsan -LE '^(unit|proxy|identity)$$' -j 2 --timeout 300
	@$(DONE)

# Each fuzzer for a short while (17 of them, two at a time: 8 s each is
# ~75 s of CI), from the seed corpora in fuzz/corpus; longer runs:
# make fuzz FUZZ_SECONDS=600 (and ASAN_OPT=-O1, above)
FUZZ_SECONDS ?= 8
fuzz: asan-configure
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target rf_fuzzers
	./scripts/run-fuzzers.sh $(ASAN_BUILD) $(FUZZ_SECONDS)
	@$(DONE)

# The benchmarks are not in the default build (CI does not run them): this
# builds all of them (build/bench/rf_*_bench), then runs rf_bench.
bench: build
	cmake --build $(BUILD) -j $(JOBS) --target rf_benches
	./$(BUILD)/bench/rf_bench
	./$(BUILD)/bench/rf_fleet_bench

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
