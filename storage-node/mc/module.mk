# storage-node/mc/module.mk - libnodemc: the memcached front of bqos-node (text protocol, front, backend on libmemcached, key order, reply budget, stats and replies).
# Floors: mc -> io, core, common (not nbd).
LIBS += nodemc
nodemc_SRCS = storage-node/mc/mcproto.c storage-node/mc/backend.c storage-node/mc/keyorder.c storage-node/mc/mcstats.c \
	storage-node/mc/front.c storage-node/mc/replybudget.c storage-node/mc/mcreply.c

$(call check_suite,test_mcproto,nodemc nodeio nodecore common)
$(call check_suite,test_backend,nodemc nodeio nodecore common)
$(call check_suite,test_keyorder,nodemc)
$(call check_suite,test_front,nodemc nodeio nodecore common)
$(call check_suite,test_replybudget,nodemc)
$(call check_suite,test_mcstats,nodemc nodeio nodecore common)
$(call check_suite,test_mcreply,nodemc nodeio nodecore common)
ITESTS += tests/it/it_node_memccapable.sh tests/it/it_node_order.sh tests/it/it_node_faults.sh tests/it/it_node_limits.sh
ITESTS += tests/it/it_failstatic.sh tests/it/it_node_pacing.sh
ITESTS += tests/it/it_node_meta.sh tests/it/it_node_threads.sh
BENCHES += storage-node/bench/bench-front.sh storage-node/bench/bench-twemproxy.sh storage-node/bench/bench-front-tls.sh
ITESTS += tests/it/it_conn_flood.sh

# mcauth: memcached's text-protocol logins (--auth-file); its mode check is common/curvekey's.
nodemc_SRCS += storage-node/mc/mcauth.c
test_front_LIBS += curvekey common
$(call check_suite,test_mcauth,nodemc nodeio nodecore curvekey common)
ITESTS += tests/it/it_node_auth.sh tests/it/it_node_tls.sh
# issue 27: rules from the controller, per user, per op, templates, kept for a restart
ITESTS += tests/it/it_rules.sh tests/it/it_who.sh tests/it/it_tenants.sh
