# Makefile - bqos public targets; each installs the missing Debian packages of its group, then builds through mk/build.mk.
#
#   make          build every program into bin/ (needs only the build group of scripts/deps.sh)
#   make check    build and run the whole test suite (unit + integration)
#   make demo     run the main job: memcached, controller and nodes on loopback
#   make demo-ha  controller failover: etcd, two controllers, kill -9 the leader
#   make soak     SOAK_MINUTES (default 10) of checked load, hostile peers and kill -9 chaos (not in check)
#   make bench    run the benchmarks recorded in docs/performance.md
#   make asan     build and run the test suite under ASan/UBSan (build-asan/)
#   make tsan     the threaded parts under ThreadSanitizer (clang, Archer for OpenMP; build-tsan/)
#   make fuzz     libFuzzer harnesses (clang), FUZZ_SECONDS each (default 30); fails on a crash
#   make install  PREFIX=/usr/local DESTDIR= : programs, man pages, systemd units, examples
#   make uninstall  the same PREFIX and DESTDIR: removes what install put there
MAKEFLAGS += --no-print-directory
BUILD = $(MAKE) -f mk/build.mk -j$(shell nproc 2>/dev/null || echo 2)

.PHONY: all check bench demo demo-ha soak asan tsan fuzz install uninstall clean
all install:
	@scripts/deps.sh build
	@$(BUILD) $@
uninstall:
	@$(BUILD) $@
check:
	@scripts/deps.sh build test
	@$(BUILD) $@
bench:
	@scripts/deps.sh build bench
	@$(BUILD) $@
demo demo-ha:
	@scripts/deps.sh build demo
	@$(BUILD) $@
soak:
	@scripts/deps.sh build test
	@$(BUILD) $@
asan:
	@scripts/deps.sh build test
	@$(BUILD) check O=build-asan BIN=build-asan/bin SAN="-fsanitize=address,undefined -fno-omit-frame-pointer"
tsan:
	@scripts/deps.sh build test sanitize
	@$(BUILD) tsan-check CC=clang O=build-tsan BIN=build-tsan/bin SAN="-fsanitize=thread -fno-omit-frame-pointer"
fuzz:
	@scripts/deps.sh build sanitize
	@$(BUILD) fuzz
clean:
	rm -rf bin build build-asan build-tsan build-fuzz
