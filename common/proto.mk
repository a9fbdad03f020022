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

# bqos-node's controller client (storage-node/ctlclient.c); bqos-node links
# it by adding `ctlclient proto` before `node` in bqos-node_LIBS.
LIBS += ctlclient
ctlclient_SRCS = storage-node/ctlclient.c
TESTS += test_ctlclient
test_ctlclient_SRCS = tests/test_ctlclient.c
test_ctlclient_LIBS = ctlclient proto node common
ITESTS += tests/it/it_ctlclient.sh
