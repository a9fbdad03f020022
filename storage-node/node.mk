# storage-node/node.mk - the memcached front of bqos-node (included by storage-node/module.mk)
node_SRCS += storage-node/mc/mcproto.c storage-node/mc/backend.c storage-node/mc/keyorder.c storage-node/mc/mcstats.c storage-node/mc/front.c storage-node/mc/frontcfg.c storage-node/mc/replybudget.c storage-node/mc/mcreply.c

# One node program, memcached or block (storage-node/main.c), built under
# both names: bqos-nbd-node is always a block node (by argv[0]).  noderun.c
# (bucket/token files, controller client, signals) is linked into the
# program, not libnode: it calls ctlclient, linked before node.
PROGS += bqos-node bqos-nbd-node
bqos-node_SRCS = storage-node/main.c storage-node/nodeargs.c storage-node/noderun.c storage-node/nodemetrics.c
bqos-node_LIBS = ctlclient node nodecore protozmq proto curvekey common
bqos-nbd-node_SRCS = $(bqos-node_SRCS)
bqos-nbd-node_LIBS = $(bqos-node_LIBS)
ITESTS += tests/it/it_node_memccapable.sh tests/it/it_node_order.sh tests/it/it_node_faults.sh tests/it/it_node_limits.sh
ITESTS += tests/it/it_failstatic.sh tests/it/it_node_pacing.sh

TESTS += test_mcproto
test_mcproto_SRCS = tests/test_mcproto.c
test_mcproto_LIBS = node nodecore common
TESTS += test_backend
test_backend_SRCS = tests/test_backend.c
test_backend_LIBS = node nodecore common

BENCHES += storage-node/bench/bench-front.sh
BENCHES += storage-node/bench/bench-twemproxy.sh
