# Makefile - bqos public targets; each installs the missing Debian packages of its group, then builds through mk/build.mk.
#
#   make          build every program into bin/ (needs only the build group of scripts/deps.sh)
#   make check    build and run the whole test suite (unit + integration)
#   make demo     run the main job: memcached, controller and nodes on loopback
#   make demo-ha  controller failover: etcd, two controllers, kill -9 the leader
#   make soak     SOAK_MINUTES (default 10) of checked load, hostile peers and kill -9 chaos, then the
#                 partition pass (tests/soak/partition.sh, about 10 min) and the busy-host bound
#                 (tests/soak/busy-host.sh, DURATION 600 s at load TARGET_LOAD 6; not in check)
#   make bench    run the benchmarks recorded in docs/performance.md
#   make asan     build and run the test suite under ASan/UBSan (build-asan/)
#   make tsan     the threaded parts under ThreadSanitizer (clang, Archer for OpenMP; build-tsan/)
#   make fuzz     libFuzzer harnesses (clang), FUZZ_SECONDS each (default 30); fails on a crash
#   make install  PREFIX=/usr/local DESTDIR= : programs, man pages, systemd units, examples
#   make uninstall  the same PREFIX and DESTDIR: removes what install put there
#   make deb      the Debian package in build-deb/ (dpkg-buildpackage -us -uc -b), lintian, hardening-check
MAKEFLAGS += --no-print-directory
BUILD = $(MAKE) -f mk/build.mk -j$(shell nproc 2>/dev/null || echo 2)

.PHONY: all check bench demo demo-ha soak asan tsan fuzz install uninstall deb clean
# The package groups of scripts/deps.sh each target installs first.
all install: DEPS = build
check soak asan: DEPS = build test
bench: DEPS = build bench
demo demo-ha: DEPS = build demo
tsan: DEPS = build test sanitize
fuzz: DEPS = build sanitize
deb: DEPS = build deb
all install check soak bench demo demo-ha fuzz:
	@scripts/deps.sh $(DEPS)
	@$(BUILD) $@
uninstall:
	@$(BUILD) $@
asan:
	@scripts/deps.sh $(DEPS)
	@$(BUILD) check O=build-asan BIN=build-asan/bin SAN="-fsanitize=address,undefined -fno-omit-frame-pointer"
tsan:
	@scripts/deps.sh $(DEPS)
	@$(BUILD) tsan-check CC=clang O=build-tsan BIN=build-tsan/bin SAN="-fsanitize=thread -fno-omit-frame-pointer"
deb:
	@scripts/deps.sh $(DEPS)
	@scripts/deb.sh
clean:
	rm -rf bin build build-asan build-tsan build-fuzz build-deb
