# storage-node/bench/module.mk - the node's benchmarks: the scheduler alone (bqos-sched-bench) and the fronts' scripts.
PROGS += bqos-sched-bench
bqos-sched-bench_SRCS = storage-node/bench/sched_bench.c
bqos-sched-bench_LIBS = nodecore common
BENCHES += storage-node/bench/bench-sched.sh
