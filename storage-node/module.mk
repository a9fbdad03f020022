# storage-node/ - bqos-node: the token scheduler core (no threads, no sockets) and the memcached front
LIBS += node
node_SRCS = storage-node/nodeconf.c storage-node/listener.c storage-node/iolat.c
# what both fronts share (gate, freelist) and both backends (workpool)
node_SRCS += storage-node/gate.c storage-node/workpool.c storage-node/freelist.c

$(call check_suite,test_sched,nodecore common)
$(call check_suite,test_listener,node nodecore common)
$(call check_suite,test_gate,node nodecore common)
$(call check_suite,test_workpool,node nodecore common)
$(call check_suite,test_freelist,node nodecore common)
$(call check_suite,test_nodeconf,node nodecore common)
$(call check_suite,test_iolat,node nodecore common)

PROGS += bqos-sched-bench
bqos-sched-bench_SRCS = storage-node/bench/sched_bench.c
bqos-sched-bench_LIBS = nodecore common
BENCHES += storage-node/bench/bench-sched.sh
include storage-node/core/core.mk storage-node/ctlclient.mk
-include storage-node/nbd.mk
-include storage-node/node.mk
