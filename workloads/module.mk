# workloads/ - bqos-load, the YCSB-like load generator, and its scenario files
LIBS += workloads
workloads_SRCS = workloads/scenario.c workloads/report.c workloads/driver.c
PROGS += bqos-load
bqos-load_SRCS = workloads/load/load.c
bqos-load_LIBS = workloads common
TESTS += test_scenario
test_scenario_SRCS = tests/test_scenario.c
test_scenario_LIBS = workloads common
ITESTS += tests/it/it_load.sh
# Load tools for the node benches: memcached (bqos-mcload) and NBD (bqos-nbd-load, speaks storage-node/nbd's codec).
PROGS += bqos-mcload
bqos-mcload_SRCS = workloads/load/mcload.c
bqos-mcload_LIBS = common
PROGS += bqos-nbd-load
bqos-nbd-load_SRCS = workloads/load/nbdload.c
bqos-nbd-load_LIBS = workloads nodenbd common
-include workloads/sim.mk
# The end-to-end Experiment 3 needs bqos-node's memcached front with its
# controller client linked in.
ifneq ($(and $(filter bqos-node,$(PROGS)),$(filter nodedaemon,$(bqos-node_LIBS))),)
ITESTS += tests/it/it_exp3.sh
# The property test's real-node run (issue 25): one seed on memcached + bqos-node pairs and a controller.
ITESTS += tests/it/it_simprop_real.sh
endif
# workloads/report: per-window accuracy and bqos-load's counters (issue 25: the demanding rule).
TESTS += test_report
test_report_SRCS = tests/test_report.c
test_report_LIBS = workloads common
