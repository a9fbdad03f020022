# storage-node/nbd.mk - the block I/O path of bqos-node: NBD protocol, NBD front, file/device backend (included by storage-node/module.mk)
node_SRCS += storage-node/nbd/nbd.c storage-node/nbd/blockdev.c storage-node/nbd/nbdfront.c storage-node/nbd/nbdcfg.c storage-node/nbd/nbdopts.c storage-node/nbd/nbdtls.c

TESTS += test_nbd test_blockdev test_nbdfront
test_nbd_SRCS = tests/test_nbd.c
test_nbd_LIBS = node nodecore common
test_blockdev_SRCS = tests/test_blockdev.c
test_blockdev_LIBS = node nodecore common
test_nbdfront_SRCS = tests/test_nbdfront.c
test_nbdfront_LIBS = node nodecore curvekey common

ITESTS += tests/it/it_nbd.sh tests/it/it_nbd_tls.sh
BENCHES += storage-node/bench/bench-nbd.sh storage-node/bench/bench-nbd-tls.sh

