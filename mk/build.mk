# build.mk - the real build: components describe themselves in */module.mk (and their folders in */*/module.mk), this file turns that into rules.
#
# A component's module.mk may add to:
#   LIBS     += NAME      archive $(O)/libNAME.a built from NAME_SRCS
#   PROGS    += PROG      program bin/PROG from PROG_SRCS, linked with archives PROG_LIBS (dependents first)
#   TESTS    += TEST      Check suite $(O)/tests/TEST from TEST_SRCS + archives TEST_LIBS, run by make check
#   ITESTS   += SCRIPT    integration script run by make check after the unit tests (gets BIN and O in env)
#   BENCHES  += SCRIPT    benchmark script run by make bench
#   FUZZERS  += NAME      libFuzzer harness tests/fuzz/NAME.c + NAME_SRCS, run by make fuzz
#
# Targets: all (programs and man pages), tests (the Check suites), check, bench, demo, demo-ha,
# soak (SOAK_MINUTES, default 10: tests/soak/soak.sh, then tests/soak/partition.sh and tests/soak/busy-host.sh), tsan-check, fuzz-build, fuzz,
# install and uninstall (PREFIX, DESTDIR and the *DIR variables below).
O   ?= build
BIN ?= bin
SAN ?=
# What every program needs (scripts/deps.sh build), what only the tests need (deps.sh test), and
# optional libraries: libsystemd (sd_notify, common/notify.c), liburing (the memcached front's
# replies of a pass in one system call, storage-node/io/sendbatch.c; without it one sendmsg each)
# and igraph (bqos-pshift's max-flow baseline; the tests and benches install it).  WITH_SYSTEMD,
# WITH_LIBURING and WITH_IGRAPH choose each: auto
# (the default: used when pkg-config finds it), yes (the build stops if pkg-config does not) or
# no (not used even if installed); debian/rules names each, so a package does not depend on what
# the build machine happens to have.  HAVE_X macros say which are used; $(O)/features changes
# when that does, and every object depends on it.
PKGS      := libzmq jansson libmemcached libevent libevent_pthreads libcurl gnutls
TEST_PKGS := check
WITH_SYSTEMD ?= auto
WITH_IGRAPH  ?= auto
WITH_LIBURING ?= auto
OPTIONAL  := libsystemd:HAVE_SYSTEMD:WITH_SYSTEMD igraph:HAVE_IGRAPH:WITH_IGRAPH liburing:HAVE_LIBURING:WITH_LIBURING
# opt_use PKG,MACRO,WITHVAR: PKG:MACRO when it is to be used, else nothing; an error for a WITH
# value other than auto, yes or no, and for yes when pkg-config does not find PKG.
opt_use = $(if $(filter-out auto yes no,$($(3))),$(error $(3)=$($(3)): use auto, yes or no))$(if \
  $(filter no,$($(3))),,$(if $(shell pkg-config --exists $(1) && echo y),$(1):$(2),$(if \
  $(filter yes,$($(3))),$(error $(3)=yes, but pkg-config does not find $(1)))))
FOUND     := $(foreach o,$(OPTIONAL),$(call opt_use,$(word 1,$(subst :, ,$(o))),$(word 2,$(subst :, ,$(o))),$(word 3,$(subst :, ,$(o)))))
FOUND_PKGS := $(foreach o,$(FOUND),$(word 1,$(subst :, ,$(o))))
FEATURES  := $(foreach o,$(FOUND),-D$(word 2,$(subst :, ,$(o))))
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) $(FOUND_PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) $(FOUND_PKGS))
TEST_LIBS   = $(shell pkg-config --libs $(TEST_PKGS)) -lsubunit
CC      ?= gcc
OPT     ?= -O2 -g
# Our flags, then the caller's CPPFLAGS, CFLAGS and LDFLAGS (environment or command line; a
# package build's come from dpkg-buildflags: hardening), last so that theirs win.  WERROR is
# -Werror in development builds; debian/rules sets WERROR= (a newer compiler's new warning must
# not stop a distribution's build).
WERROR  ?= -Werror
ALL_CFLAGS  := $(OPT) $(SAN) -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -fopenmp -MMD -MP -I. $(PKG_CFLAGS) \
               $(FEATURES) $(CPPFLAGS) $(CFLAGS)
ALL_LDFLAGS := $(SAN) -fopenmp -Wl,--as-needed $(LDFLAGS)
LDLIBS  := $(PKG_LIBS) -lm -lpthread -lrt
$(shell mkdir -p $(O); echo '$(FEATURES)' | cmp -s - $(O)/features || echo '$(FEATURES)' > $(O)/features)

LIBS :=
PROGS :=
TESTS :=
ITESTS :=
BENCHES :=
FUZZERS :=
include $(sort $(wildcard */module.mk */*/module.mk))

obj = $(patsubst %.c,$(O)/obj/%.o,$(1))
arc = $(foreach l,$(1),$(O)/lib$(l).a)

.PHONY: all tests man units check bench demo demo-ha soak install uninstall
all: $(addprefix $(BIN)/,$(PROGS)) man units
tests: $(addprefix $(O)/tests/,$(TESTS))

$(O)/obj/%.o: %.c $(O)/features
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

define lib_rule
$(O)/lib$(1).a: $(call obj,$($(1)_SRCS))
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LIBS),$(eval $(call lib_rule,$(l))))

define link_rule
$(2)/$(1): $(call obj,$($(1)_SRCS)) $(call arc,$($(1)_LIBS))
	@mkdir -p $$(dir $$@)
	$(CC) $(ALL_LDFLAGS) -o $$@ $$^ $(LDLIBS) $(3)
endef
$(foreach p,$(PROGS),$(eval $(call link_rule,$(p),$(BIN))))
$(foreach t,$(TESTS),$(eval $(call link_rule,$(t),$(O)/tests,$$(TEST_LIBS))))

check: all tests
	@BIN=$(BIN) O=$(O) scripts/run-tests.sh $(addprefix $(O)/tests/,$(TESTS)) $(ITESTS)

bench: all
	@set -e; for b in $(BENCHES); do echo "== $$b"; BIN=$(BIN) O=$(O) $$b; done

demo: all
	@BIN=$(BIN) examples/demo.sh

demo-ha: all
	@BIN=$(BIN) sh examples/demo-ha.sh

soak: all
	@BIN=$(BIN) SOAK_MINUTES=$(or $(SOAK_MINUTES),10) sh tests/soak/soak.sh
	@BIN=$(BIN) sh tests/soak/partition.sh
	@BIN=$(BIN) sh tests/soak/busy-host.sh

# ---- make tsan (CC=clang O=build-tsan SAN=-fsanitize=thread): the threaded parts only: the
# worker pool under both backends, the node with --workers and --threads, the controller client's ZeroMQ
# glue, pShift with OpenMP threads, the log's rate limit and the metrics thread.  clang's libomp with Archer (OMP_TOOL_LIBRARIES) tells
# TSan about OpenMP's barriers, so pShift runs multi-threaded under it (gcc's libgomp is not
# instrumented: TSan reports false races there); ignore_noninstrumented_modules keeps libzmq's
# and libmemcached's own threads (not instrumented) out of the reports (docs/fuzzing.md). ----
TSAN_TESTS := test_bucketjournal test_workpool test_handoff test_writers test_backend test_blockdev test_gate test_front test_ctlclient test_pshift test_ctrl \
	test_log test_metricsd
TSAN_ITESTS := tests/it/it_nbd.sh tests/it/it_node_order.sh tests/it/it_node_threads.sh
ARCHER ?= $(firstword $(wildcard /usr/lib/llvm-*/lib/libarcher.so))
.PHONY: tsan-check
tsan-check: $(addprefix $(BIN)/,$(PROGS)) $(addprefix $(O)/tests/,$(TSAN_TESTS))
	@OMP_TOOL_LIBRARIES=$(ARCHER) \
		TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1 $(TSAN_OPTIONS)" \
		BIN=$(BIN) O=$(O) scripts/run-tests.sh $(addprefix $(O)/tests/,$(TSAN_TESTS)) $(TSAN_ITESTS)

# ---- make fuzz: clang, ASan+UBSan, every harness FUZZ_SECONDS on a scratch copy of its seeds ----
FUZZ_O ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_CC ?= clang
FUZZ_CFLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -fno-omit-frame-pointer $(shell pkg-config --cflags jansson)
FUZZ_LIBS := $(shell pkg-config --libs jansson libevent) -lm
define fuzz_rule
$(FUZZ_O)/$(1): tests/fuzz/$(1).c $($(1)_SRCS)
	@mkdir -p $$(dir $$@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $($(1)_FLAGS) -o $$@ $$^ $(FUZZ_LIBS) $($(1)_LDLIBS)
endef
$(foreach f,$(FUZZERS),$(eval $(call fuzz_rule,$(f))))

.PHONY: fuzz fuzz-build
fuzz-build: $(addprefix $(FUZZ_O)/,$(FUZZERS))
fuzz: fuzz-build
	@FUZZ_O=$(FUZZ_O) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run-fuzz.sh $(FUZZERS)
include mk/install.mk

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
