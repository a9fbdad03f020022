# common/proto.mk - the control protocol: the codec (libproto, common/proto/*.c but zmq.c),
# its ZeroMQ transport (libprotozmq, common/proto/zmq.c: link `protozmq proto common`),
# their tests and the codec benchmark.
LIBS += proto
proto_SRCS = common/proto/msg.c common/proto/check.c common/proto/header.c \
	common/proto/compact.c common/proto/wide.c common/proto/bytes.c common/proto/encode.c \
	common/proto/decode.c common/proto/sparse.c common/proto/shares.c \
	common/proto/who.c
LIBS += protozmq
protozmq_SRCS = common/proto/zmq.c
$(call check_suite,test_proto,protozmq proto common)
test_proto_SRCS += common/bench/proto_sample.c
PROGS += bqos-proto-bench
bqos-proto-bench_SRCS = common/bench/proto_bench.c common/bench/proto_sample.c
bqos-proto-bench_LIBS = protozmq proto common
BENCHES += common/bench/bench-proto.sh
