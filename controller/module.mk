# controller/ - bqos-controller: admission control, estimators, control loop;
# daemon/ is the program, ctl/ is bqos-ctl, bench/ the benchmarks.
LIBS += controller
controller_SRCS = controller/admission.c controller/estimate.c controller/ctrl.c controller/round.c \
  controller/ledger.c controller/bytes.c controller/plausible.c \
  controller/capacity.c controller/binfo.c controller/push.c controller/tree.c controller/dyn.c controller/ctrl_tmpl.c \
  controller/shares.c controller/fair.c \
  controller/shardroot.c controller/shardctl.c controller/shardset.c controller/reshard.c

PROGS += bqos-controller
bqos-controller_SRCS = controller/daemon/main.c controller/daemon/rounds.c controller/daemon/clock.c \
                      controller/daemon/nodes.c controller/daemon/admin.c controller/daemon/statuspage.c \
                      controller/daemon/conf.c controller/daemon/etcd.c \
                      controller/daemon/leader.c controller/daemon/ltable.c controller/daemon/auth.c \
                      controller/daemon/authkeys.c controller/daemon/metrics.c controller/daemon/history.c \
                       controller/daemon/stopguard.c controller/daemon/parked.c controller/daemon/rootx.c \
                       controller/daemon/memtrim.c
bqos-controller_LIBS = controller pshift protozmq proto curvekey common

PROGS += bqos-ctl
bqos-ctl_SRCS = controller/ctl/ctl.c controller/ctl/ctlreq.c controller/ctl/ctlmerge.c controller/ctl/ctlshards.c \
                controller/ctl/fanout.c
bqos-ctl_LIBS = proto curvekey common

PROGS += bqos-ctrl-bench
bqos-ctrl-bench_SRCS = controller/bench/ctrl_bench.c
bqos-ctrl-bench_LIBS = protozmq proto curvekey common
BENCHES += controller/bench/bench-controller.sh
BENCHES += controller/bench/bench-bigtable.sh
BENCHES += controller/bench/bench-etcdkeys.sh
BENCHES += controller/bench/bench-shares.sh controller/bench/bench-nested-nodes.sh

PROGS += bqos-shares-bench
bqos-shares-bench_SRCS = controller/bench/shares_bench.c
bqos-shares-bench_LIBS = controller common

PROGS += bqos-ctrl-prof
bqos-ctrl-prof_SRCS = controller/bench/ctrl_prof.c
bqos-ctrl-prof_LIBS = controller pshiftio pshift proto common

# the controller core's resident memory per configured bucket (issue 26); bench-ctrlmem.sh runs it
PROGS += bqos-ctrl-mem
bqos-ctrl-mem_SRCS = controller/bench/ctrl_mem.c
bqos-ctrl-mem_LIBS = controller pshift proto common

TESTS += test_estimate test_admission test_ctrl test_clock test_ctl test_leader test_cmetrics
test_estimate_SRCS = tests/test_estimate.c
test_estimate_LIBS = controller common
test_admission_SRCS = tests/test_admission.c
test_admission_LIBS = controller common
test_ctrl_SRCS = tests/test_ctrl.c
test_ctrl_LIBS = controller pshift proto common
test_clock_SRCS = tests/test_clock.c controller/daemon/clock.c
test_clock_LIBS = proto common
test_leader_SRCS = tests/test_leader.c controller/daemon/leader.c controller/daemon/ltable.c \
                   controller/daemon/etcd.c
test_leader_LIBS = common
test_cmetrics_SRCS = tests/test_cmetrics.c controller/daemon/metrics.c controller/daemon/nodes.c \
                     controller/daemon/leader.c controller/daemon/ltable.c controller/daemon/etcd.c \
                     controller/daemon/clock.c \
                     controller/daemon/auth.c controller/daemon/authkeys.c controller/daemon/history.c \
                     controller/daemon/rootx.c
test_cmetrics_LIBS = controller pshift protozmq proto curvekey common
test_ctl_SRCS = tests/test_ctl.c
test_ctl_LIBS = common
TESTS += test_ctlmerge
test_ctlmerge_SRCS = tests/test_ctlmerge.c controller/ctl/ctlmerge.c
test_ctlmerge_LIBS = common
TESTS += test_ctlshards
test_ctlshards_SRCS = tests/test_ctlshards.c controller/ctl/ctlshards.c controller/ctl/fanout.c
test_ctlshards_LIBS = proto curvekey common
TESTS += test_ctlreq
test_ctlreq_SRCS = tests/test_ctlreq.c controller/ctl/ctlreq.c controller/ctl/fanout.c
test_ctlreq_LIBS = proto curvekey common
TESTS += test_fanout
test_fanout_SRCS = tests/test_fanout.c controller/ctl/fanout.c
test_fanout_LIBS = common
TESTS += test_statuspage
test_statuspage_SRCS = tests/test_statuspage.c controller/daemon/statuspage.c
test_statuspage_LIBS = common
TESTS += test_parked
test_parked_SRCS = tests/test_parked.c controller/daemon/parked.c
test_parked_LIBS = common
TESTS += test_conf
test_conf_SRCS = tests/test_conf.c controller/daemon/conf.c controller/daemon/parked.c \
                 controller/daemon/leader.c controller/daemon/ltable.c controller/daemon/etcd.c
test_conf_LIBS = controller pshift proto common
TESTS += test_tree test_shares
test_shares_SRCS = tests/test_shares.c
test_shares_LIBS = controller common
test_tree_SRCS = tests/test_tree.c
test_tree_LIBS = controller pshift proto common
TESTS += test_history
test_history_SRCS = tests/test_history.c controller/daemon/history.c
test_history_LIBS = common
TESTS += test_nodes
test_nodes_SRCS = tests/test_nodes.c controller/daemon/nodes.c controller/daemon/clock.c \
                  controller/daemon/auth.c controller/daemon/authkeys.c
test_nodes_LIBS = controller pshift protozmq proto curvekey common
TESTS += test_authkeys
test_authkeys_SRCS = tests/test_authkeys.c controller/daemon/authkeys.c controller/daemon/auth.c
test_authkeys_LIBS = protozmq proto curvekey common
ITESTS += tests/it/it_template.sh
ITESTS += tests/it/it_controller.sh tests/it/it_controller_nodes.sh tests/it/it_ctl.sh tests/it/it_config.sh \
          tests/it/it_etcd_failover.sh
# no path around a limit: the default bucket, removed buckets, duplicate node names
ITESTS += tests/it/it_nolimitpath.sh
ITESTS += tests/it/it_hostile_ctrl.sh
# nested buckets: a tenant cap over two real nodes (issue 28)
ITESTS += tests/it/it_nested_nodes.sh
# four buckets on six real nodes under a tenant cap, node periods (issue 28)
ITESTS += tests/it/it_nested_six.sh
# three levels, a write limit under a read-heavy bucket, over two real nodes (issue 28)
ITESTS += tests/it/it_nested_ops.sh
# fair shares of spare capacity over four real (block) nodes (issue 28)
ITESTS += tests/it/it_shares_nodes.sh
# bqos-ctl history, watch and the status reasons; --log-format json
ITESTS += tests/it/it_history.sh
ITESTS += tests/it/it_stalled_node.sh
ITESTS += tests/it/it_names_parts.sh
ITESTS += tests/it/it_etcd_wipe.sh
ITESTS += tests/it/it_etcd_durable.sh
ITESTS += tests/it/it_etcd_keys.sh
ITESTS += tests/it/it_etcd_nested_set.sh
# the bucket file's journal: durable changes, a torn line, garbage, a hand edit (issue 26 case 5)
ITESTS += tests/it/it_journal.sh
# the journal on a slow disk (a throttled loop device): the loop keeps going, busy past 32 (issue 26)
ITESTS += tests/it/it_journal_slow.sh

# shadow mode: a paired run, the same limit enforced and in shadow (issue 28)
ITESTS += tests/it/it_shadow.sh

# issue 26 case 2: a node cut off from the controller past --forget-after (the fallback lease)
ITESTS += tests/it/it_partition_lease.sh

ITESTS += tests/it/it_etcd_slow.sh
# issue 26's partition suite: the leader paused past its lease, its CPU starved (cgroup), the leader cut
# from etcd (a relay that drops), etcd paused past the lease
ITESTS += tests/it/it_leader_paused.sh tests/it/it_ctrl_starved.sh tests/it/it_leader_etcd_cut.sh \
  tests/it/it_etcd_paused.sh

TESTS += test_dyn
test_dyn_SRCS = tests/test_dyn.c
test_dyn_LIBS = controller common

# issue 26: a node's reports late at the controller (delay_proxy.py) hold the limit and cost no interval
ITESTS += tests/it/report_delay.sh

# controller shards (issue 30): the shard map, the root step, a shard's side; the daemons
# as two shards with a leader each, two nodes, a shard leader killed
ITESTS += tests/it/it_shards.sh tests/it/it_shards_view.sh tests/it/it_reshard.sh \
  tests/it/it_reshard_down.sh
TESTS += test_rootx
test_rootx_SRCS = tests/test_rootx.c controller/daemon/rootx.c
test_rootx_LIBS = controller pshift proto curvekey common
TESTS += test_shardmap test_shardgen test_reshard test_shardroot test_shardset
test_reshard_SRCS = tests/test_reshard.c
test_reshard_LIBS = controller pshift proto common
test_shardgen_SRCS = tests/test_shardgen.c
test_shardgen_LIBS = common
test_shardmap_SRCS = tests/test_shardmap.c
test_shardmap_LIBS = common
test_shardroot_SRCS = tests/test_shardroot.c
test_shardroot_LIBS = controller pshift common
test_shardset_SRCS = tests/test_shardset.c
test_shardset_LIBS = controller pshift proto common
PROGS += bqos-shards-bench
bqos-shards-bench_SRCS = controller/bench/shards_bench.c
bqos-shards-bench_LIBS = controller pshift proto common
BENCHES += controller/bench/bench-shards.sh controller/bench/bench-sparse-cpu.sh controller/bench/bench-ctrlmem.sh
# the daemon's resident memory per configured bucket with 4 full-table nodes (issue 26)
BENCHES += controller/bench/bench-daemonmem.sh
# bench-idletable.sh: a million buckets, minutes; run by hand (docs/performance.md)
