# tests/fuzz/fuzz.mk - libFuzzer harnesses (clang, ASan+UBSan), one per parser: FUZZERS += NAME builds
# tests/fuzz/NAME.c with NAME_SRCS (compiled into the harness, no archives; NAME_FLAGS and
# NAME_LDLIBS added), run by `make fuzz` over the seed corpus tests/fuzz/corpus/NAME/.
FUZZERS += fuzz_mcproto fuzz_nbd fuzz_proto fuzz_bucketfile fuzz_scenario
fuzz_mcproto_SRCS = storage-node/mc/mcproto.c
fuzz_nbd_SRCS = storage-node/nbd/nbd.c
fuzz_proto_SRCS = $(proto_SRCS) $(common_SRCS)
fuzz_bucketfile_SRCS = $(common_SRCS)
fuzz_scenario_SRCS = workloads/scenario.c $(common_SRCS)
# the controller's admin requests (admin_answer(): no socket) and the settings file (common/opts)
FUZZERS += fuzz_admin fuzz_settings
fuzz_admin_SRCS = controller/daemon/admin.c controller/daemon/conf.c controller/daemon/statuspage.c controller/daemon/parked.c controller/daemon/metrics.c controller/daemon/nodes.c \
  controller/daemon/leader.c controller/daemon/ltable.c controller/daemon/rootx.c controller/daemon/etcd.c controller/daemon/clock.c \
  controller/daemon/auth.c controller/daemon/authkeys.c controller/daemon/history.c \
  $(controller_SRCS) $(pshift_SRCS) $(protozmq_SRCS) $(proto_SRCS) $(curvekey_SRCS) $(common_SRCS)
fuzz_admin_FLAGS = -fopenmp
fuzz_admin_LDLIBS = -lzmq -lcurl
fuzz_settings_SRCS = $(common_SRCS)
# memcached logins (--auth-file): the auth file and the login exchange
FUZZERS += fuzz_mcauth
fuzz_mcauth_SRCS = storage-node/mc/mcauth.c $(curvekey_SRCS) $(common_SRCS)
fuzz_mcauth_LDLIBS = -lzmq
# the rule syntax (issue 27): parse, dump round trip, analysis, matching
FUZZERS += fuzz_rules
fuzz_rules_SRCS = $(common_SRCS)
