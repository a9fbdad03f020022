# workloads/ - bqos-load, the YCSB-like load generator, and its scenario files
LIBS += workloads
workloads_SRCS = workloads/zipf.c workloads/scenario.c workloads/report.c
PROGS += bqos-load
bqos-load_SRCS = workloads/load.c
bqos-load_LIBS = workloads common
TESTS += test_scenario
test_scenario_SRCS = tests/test_scenario.c
test_scenario_LIBS = workloads common
ITESTS += tests/it_load.sh
-include workloads/sim.mk
# The end-to-end Experiment 3 needs bqos-node's memcached front with its
# controller client linked in.
ifneq ($(and $(filter bqos-node,$(PROGS)),$(filter ctlclient,$(bqos-node_LIBS))),)
ITESTS += tests/it_exp3.sh
endif
