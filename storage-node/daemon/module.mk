# storage-node/daemon/module.mk - the node programs: bqos-node and bqos-nbd-node (one program, storage-node/daemon/main.c; bqos-nbd-node is always a block node, by argv[0]).
# libnodedaemon holds what main wires together: options (nodeargs), the run loop (noderun: bucket and token files, signals),
# node files (nodeconf), metrics (nodemetrics) and the controller client (ctlclient: the agent on a ZeroMQ DEALER).
# Floors: daemon -> mc, nbd, io, core, common.
LIBS += nodedaemon
nodedaemon_SRCS = storage-node/daemon/nodeargs.c storage-node/daemon/noderun.c storage-node/daemon/nodeconf.c \
	storage-node/daemon/nodemetrics.c storage-node/daemon/ctlclient.c

PROGS += bqos-node bqos-nbd-node
bqos-node_SRCS = storage-node/daemon/main.c
bqos-node_LIBS = nodedaemon nodemc nodenbd nodeio nodecore protozmq proto curvekey common
bqos-nbd-node_SRCS = $(bqos-node_SRCS)
bqos-nbd-node_LIBS = $(bqos-node_LIBS)

$(call check_suite,test_nodeconf,nodedaemon nodecore common)
$(call check_suite,test_nodeargs,nodedaemon nodemc nodenbd nodeio nodecore common)
$(call check_suite,test_ctlclient,nodedaemon nodecore protozmq proto curvekey common)
ITESTS += tests/it/it_ctlclient.sh
