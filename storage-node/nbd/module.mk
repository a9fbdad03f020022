# storage-node/nbd/module.mk - libnodenbd: the block I/O path of bqos-node (NBD protocol, NBD front and option haggling, TLS, file/device backend).
# Floors: nbd -> io, core, common (not mc).
LIBS += nodenbd
nodenbd_SRCS = storage-node/nbd/nbd.c storage-node/nbd/blockdev.c storage-node/nbd/nbdfront.c storage-node/nbd/nbdconn.c \
	storage-node/nbd/nbdopts.c

$(call check_suite,test_nbd,nodenbd nodeio nodecore common)
$(call check_suite,test_blockdev,nodenbd nodeio nodecore common)
$(call check_suite,test_nbdfront,nodenbd nodeio nodecore curvekey common)
ITESTS += tests/it/it_nbd.sh tests/it/it_nbd_tls.sh tests/it/it_nbd_classes.sh
BENCHES += storage-node/bench/bench-nbd.sh storage-node/bench/bench-nbd-tls.sh
