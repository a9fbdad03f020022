# storage-node/bench/module.mk - the node's benchmarks: the scheduler alone (bqos-sched-bench), the thread hand-off alone (bqos-handoff-bench), the identities registry (bqos-who-bench) and the fronts' scripts (bench-percpu.sh: CPU per memcached request against another build, interleaved; bench-pair.sh: the same with both builds served at once; bench-cpu-ab.sh: many short interleaved pairs with the median's interval, and system calls per request).
PROGS += bqos-sched-bench
bqos-sched-bench_SRCS = storage-node/bench/sched_bench.c
bqos-sched-bench_LIBS = nodecore common
BENCHES += storage-node/bench/bench-sched.sh
BENCHES += storage-node/bench/bench-percpu.sh
BENCHES += storage-node/bench/bench-pair.sh
BENCHES += storage-node/bench/bench-cpu-ab.sh
PROGS += bqos-handoff-bench
bqos-handoff-bench_SRCS = storage-node/bench/handoff_bench.c
bqos-handoff-bench_LIBS = nodeio nodecore common
PROGS += bqos-who-bench
bqos-who-bench_SRCS = storage-node/bench/who_bench.c
bqos-who-bench_LIBS = nodeio nodecore common
