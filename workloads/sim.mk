# workloads/sim.mk - bqos-sim, the discrete-event simulator (included by workloads/module.mk).
# controller/estimate.c is linked as an object: it is the controller's code,
# not a copy, and controller/module.mk does not archive it (yet).
LIBS += sim
sim_SRCS = workloads/sim_engine.c workloads/sim_model.c workloads/sim_run.c controller/estimate.c

PROGS += bqos-sim
bqos-sim_SRCS = workloads/sim.c
bqos-sim_LIBS = sim workloads pshift node common

TESTS += test_sim
test_sim_SRCS = tests/test_sim.c
test_sim_LIBS = sim workloads pshift node common

ITESTS += tests/it_sim.sh
