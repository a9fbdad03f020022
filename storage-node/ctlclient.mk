# storage-node/ctlclient.mk - libctlclient: bqos-node's controller client, the agent (core/agent.c) on a ZeroMQ DEALER (included by storage-node/module.mk).
# A node program links `ctlclient node nodecore protozmq proto curvekey common`.
LIBS += ctlclient
ctlclient_SRCS = storage-node/ctlclient.c
TESTS += test_ctlclient
test_ctlclient_SRCS = tests/test_ctlclient.c
test_ctlclient_LIBS = ctlclient nodecore protozmq proto curvekey common
ITESTS += tests/it/it_ctlclient.sh
