# tests/fuzz/fuzz.mk - libFuzzer harnesses (clang, ASan+UBSan), one per parser: FUZZERS += NAME builds
# tests/fuzz/NAME.c with NAME_SRCS (compiled into the harness, no archives), run by `make fuzz`
# over the seed corpus tests/fuzz/corpus/NAME/.
FUZZERS += fuzz_mcproto fuzz_nbd fuzz_proto fuzz_bucketfile fuzz_scenario
fuzz_mcproto_SRCS = storage-node/mc/mcproto.c
fuzz_nbd_SRCS = storage-node/nbd/nbd.c
fuzz_proto_SRCS = $(proto_SRCS) $(common_SRCS)
fuzz_bucketfile_SRCS = $(common_SRCS)
fuzz_scenario_SRCS = workloads/scenario.c workloads/scenario_query.c $(common_SRCS)
