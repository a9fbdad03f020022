# common/proto.mk - the control protocol codec (libproto), its tests and benchmark.
LIBS += proto
proto_SRCS = common/proto.c
TESTS += test_proto
test_proto_SRCS = tests/test_proto.c
test_proto_LIBS = proto common
PROGS += bqos-proto-bench
bqos-proto-bench_SRCS = common/bench/proto_bench.c
bqos-proto-bench_LIBS = proto common
BENCHES += common/bench/bench-proto.sh
