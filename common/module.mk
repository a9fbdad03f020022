# common/ - code shared by every program (logging, helpers, version.h: the one BQOS_VERSION,
# bucketfile: the one owner of the bucket reservation file format)
LIBS += common
common_SRCS = common/log.c common/strmap.c common/bitset.c common/jsonloc.c common/opts.c common/num.c common/mono.c common/iheap.c \
	common/rng.c common/names.c common/bucketfile.c common/bucketjournal.c common/notify.c \
	common/promtext.c common/hostport.c common/metricsd.c common/growarr.c common/privdrop.c \
	common/rules.c common/shardmap.c common/shardgen.c
# $(call check_suite,NAME,LIBS): the Check suite NAME, from tests/NAME.c linked with the
# archives LIBS (dependents first), i.e. TESTS += NAME with its NAME_SRCS and NAME_LIBS.
# Defined here, in the first module.mk mk/build.mk includes (it sorts them by name), for all.
check_suite = $(eval TESTS += $(1))$(eval $(1)_SRCS = tests/$(1).c)$(eval $(1)_LIBS = $(2))

$(call check_suite,test_log,common)
$(call check_suite,test_strmap,common)
$(call check_suite,test_bitset,common)
$(call check_suite,test_iheap,common)
$(call check_suite,test_mono,common)
$(call check_suite,test_opts,common)
$(call check_suite,test_jsonloc,common)
$(call check_suite,test_names,proto common)
$(call check_suite,test_rng,common)
$(call check_suite,test_bucketfile,common)
$(call check_suite,test_rules,common)
$(call check_suite,test_bucketjournal,common)
$(call check_suite,test_version,common)
# libcurvekey: the CURVE key files (common/curvekey.c; links libzmq)
LIBS += curvekey
curvekey_SRCS = common/curvekey.c
$(call check_suite,test_curvekey,curvekey common)
$(call check_suite,test_promtext,common)
$(call check_suite,test_metricsd,common)
$(call check_suite,test_hostport,common)
$(call check_suite,test_growarr,common)
$(call check_suite,test_privdrop,common)
include common/proto.mk
# privdrop: --user of both daemons (issue 18 defect 13)
ITESTS += tests/it/it_privileges.sh
# bqos-rules-bench: one classification against 100 rules (docs/performance.md, "Rules")
PROGS += bqos-rules-bench
bqos-rules-bench_SRCS = common/bench/rules_bench.c
bqos-rules-bench_LIBS = common
BENCHES += common/bench/bench-rules.sh
