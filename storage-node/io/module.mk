# storage-node/io/module.mk - libnodeio: the libevent runtime both fronts use (gate: the scheduler's door (it owns the node's sched_t); conns: the listener, connections, their limits and write buffers; listener: the listening socket; workpool: the backends' worker threads; handoff: items from any thread to one loop thread; writers: the reply-writer threads of --threads; sendbatch: many sockets' sends in one system call (io_uring); freelist; iolat: per-bucket IO accounting; who: the identities active in each bucket).
# Floors: io -> core, common.  Users link it after their front (nodemc, nodenbd) and before nodecore.
LIBS += nodeio
nodeio_SRCS = storage-node/io/gate.c storage-node/io/conns.c storage-node/io/listener.c storage-node/io/workpool.c storage-node/io/freelist.c \
	storage-node/io/iolat.c storage-node/io/tls.c storage-node/io/handoff.c storage-node/io/writers.c \
	storage-node/io/who.c storage-node/io/sendbatch.c

$(call check_suite,test_listener,nodeio nodecore common)
$(call check_suite,test_gate,nodeio nodecore common)
$(call check_suite,test_conns,nodeio nodecore common)
$(call check_suite,test_workpool,nodeio nodecore common)
$(call check_suite,test_handoff,nodeio nodecore common)
$(call check_suite,test_writers,nodeio nodecore common)
$(call check_suite,test_sendbatch,nodeio nodecore common)
$(call check_suite,test_freelist,nodeio nodecore common)
$(call check_suite,test_iolat,nodeio nodecore common)
$(call check_suite,test_who,nodeio nodecore common)

# tls: GnuTLS credentials, sessions and identities for both fronts; its file-mode check is common/curvekey's.
$(call check_suite,test_tls,nodeio nodecore curvekey common)
