# common/ - code shared by every program (logging, helpers, version.h: the one BQOS_VERSION,
# bucketfile: the one owner of the bucket reservation file format)
LIBS += common
common_SRCS = common/log.c common/strmap.c common/bitset.c common/jsonloc.c common/opts.c common/num.c common/mono.c \
	common/rng.c common/names.c common/bucketfile.c
TESTS += test_log
test_log_SRCS = tests/test_log.c
test_log_LIBS = common
TESTS += test_strmap test_bitset
test_strmap_SRCS = tests/test_strmap.c
test_strmap_LIBS = common
test_bitset_SRCS = tests/test_bitset.c
test_bitset_LIBS = common
TESTS += test_mono
test_mono_SRCS = tests/test_mono.c
test_mono_LIBS = common
TESTS += test_opts
test_opts_SRCS = tests/test_opts.c
test_opts_LIBS = common
TESTS += test_jsonloc
test_jsonloc_SRCS = tests/test_jsonloc.c
test_jsonloc_LIBS = common
TESTS += test_names
test_names_SRCS = tests/test_names.c
test_names_LIBS = proto common
TESTS += test_rng
test_rng_SRCS = tests/test_rng.c
test_rng_LIBS = common
TESTS += test_bucketfile
test_bucketfile_SRCS = tests/test_bucketfile.c
test_bucketfile_LIBS = common
TESTS += test_version
test_version_SRCS = tests/test_version.c
test_version_LIBS = common
include common/proto.mk
