# storage-node/ - bqos-node: the token scheduler core (no threads, no sockets) and the memcached front
LIBS += node
node_SRCS = storage-node/nodeconf.c storage-node/listener.c
# what both fronts share (gate) and both backends (workpool)
node_SRCS += storage-node/gate.c storage-node/workpool.c

TESTS += test_sched
test_sched_SRCS = tests/test_sched.c
test_sched_LIBS = nodecore common

TESTS += test_listener
test_listener_SRCS = tests/test_listener.c
test_listener_LIBS = node nodecore common

TESTS += test_gate
test_gate_SRCS = tests/test_gate.c
test_gate_LIBS = node nodecore common

TESTS += test_workpool
test_workpool_SRCS = tests/test_workpool.c
test_workpool_LIBS = node nodecore common

TESTS += test_nodeconf
test_nodeconf_SRCS = tests/test_nodeconf.c
test_nodeconf_LIBS = node nodecore common

PROGS += bqos-sched-bench
bqos-sched-bench_SRCS = storage-node/bench/sched_bench.c
bqos-sched-bench_LIBS = nodecore common
BENCHES += storage-node/bench/bench-sched.sh
include storage-node/core/core.mk storage-node/ctlclient.mk
-include storage-node/nbd.mk
-include storage-node/node.mk
