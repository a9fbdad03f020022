# workloads/sim.mk - bqos-sim, the discrete-event simulator (included by workloads/module.mk).
LIBS += sim
sim_SRCS = workloads/sim/sim_engine.c workloads/sim/sim_model.c workloads/sim/sim_run.c \
           workloads/sim/sim_tokens.c workloads/sim/sim_prop.c workloads/sim/sim_shards.c

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
