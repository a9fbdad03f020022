# storage-node/nbd.mk - the block I/O path of bqos-node: NBD protocol, NBD front, file/device backend (included by storage-node/module.mk)
node_SRCS += storage-node/nbd.c storage-node/blockdev.c storage-node/nbdfront.c storage-node/nbdnode.c

PROGS += bqos-nbd-node
bqos-nbd-node_SRCS = storage-node/nbdmain.c storage-node/nbdnode.c storage-node/noderun.c
bqos-nbd-node_LIBS = ctlclient proto node common

TESTS += test_nbd test_blockdev test_nbdfront
test_nbd_SRCS = tests/test_nbd.c
test_nbd_LIBS = node common
test_blockdev_SRCS = tests/test_blockdev.c
test_blockdev_LIBS = node common
test_nbdfront_SRCS = tests/test_nbdfront.c
test_nbdfront_LIBS = node common

ITESTS += tests/it_nbd.sh
BENCHES += storage-node/bench-nbd.sh

PROGS += bqos-nbd-load
bqos-nbd-load_SRCS = storage-node/nbdload.c
bqos-nbd-load_LIBS = workloads node common
