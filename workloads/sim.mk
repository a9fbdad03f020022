# workloads/sim.mk - bqos-sim, the discrete-event simulator (included by workloads/module.mk).
LIBS += sim
sim_SRCS = workloads/sim/sim_engine.c workloads/sim/sim_model.c workloads/sim/sim_run.c \
           workloads/sim/sim_tokens.c workloads/sim/sim_prop.c workloads/sim/sim_shards.c \
           workloads/sim/sim_measured.c

PROGS += bqos-sim
bqos-sim_SRCS = workloads/sim/sim.c
bqos-sim_LIBS = sim workloads controller pshift nodecore proto common

TESTS += test_sim
test_sim_SRCS = tests/test_sim.c
test_sim_LIBS = sim workloads controller pshift nodecore proto common

ITESTS += tests/it/it_sim.sh
BENCHES += workloads/bench/bench-sim.sh

# The QoS property test over random scenarios (issue 25).
PROGS += bqos-sim-prop
bqos-sim-prop_SRCS = workloads/sim/simprop.c
bqos-sim-prop_LIBS = sim workloads controller pshift nodecore proto common
ITESTS += tests/it/it_simprop.sh
# nested buckets: a tenant cap in the simulator (issue 28)
ITESTS += tests/it/it_nested_sim.sh
ITESTS += tests/it/it_shares_sim.sh
BENCHES += workloads/bench/bench-simprop.sh
# ... and on real nodes: seeds of 4-6 servers, one controller and a failover on etcd (bench-simprop-real.sh).
BENCHES += workloads/bench/bench-simprop-real.sh
# bqos-sim-prop --measured: bqos-load's outputs of a real-node run for the same checker (issue 25).
TESTS += test_sim_measured
test_sim_measured_SRCS = tests/test_sim_measured.c
test_sim_measured_LIBS = sim workloads controller pshift nodecore proto common
