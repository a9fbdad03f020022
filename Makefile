# Makefile - bqos public targets; each installs missing Debian packages, then builds through mk/build.mk.
#
#   make          build every program into bin/
#   make check    build and run the whole test suite (unit + integration)
#   make demo     run the main job: memcached, controller and nodes on loopback
#   make demo-ha  controller failover: etcd, two controllers, kill -9 the leader
#   make bench    run the benchmarks recorded in docs/performance.md
#   make asan     build and run the test suite under ASan/UBSan (build-asan/)
#   make tsan     the threaded parts under ThreadSanitizer (clang, Archer for OpenMP; build-tsan/)
#   make fuzz     libFuzzer harnesses (clang), FUZZ_SECONDS each (default 30); fails on a crash
MAKEFLAGS += --no-print-directory
BUILD = $(MAKE) -f mk/build.mk -j$(shell nproc 2>/dev/null || echo 2)

.PHONY: all check bench demo demo-ha asan tsan fuzz deps clean
all check bench demo demo-ha: deps
	@$(BUILD) $@
asan: deps
	@$(BUILD) check O=build-asan BIN=build-asan/bin SAN="-fsanitize=address,undefined -fno-omit-frame-pointer"
tsan: deps
	@$(BUILD) tsan-check CC=clang O=build-tsan BIN=build-tsan/bin SAN="-fsanitize=thread -fno-omit-frame-pointer"
fuzz: deps
	@$(BUILD) fuzz
deps:
	@scripts/deps.sh
clean:
	rm -rf bin build build-asan build-tsan build-fuzz
