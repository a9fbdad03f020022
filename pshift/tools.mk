# pshift/tools.mk - the bqos-pshift command (solve, gen, bench), its tests and benchmark; included by pshift/module.mk.
LIBS += pshiftio
pshiftio_SRCS = pshift/tools/pjson.c pshift/tools/gen.c

PROGS += bqos-pshift
bqos-pshift_SRCS = pshift/tools/cli.c pshift/tools/bench.c pshift/tools/maxflow.c
bqos-pshift_LIBS = pshiftio pshift common



TESTS += test_pshift
test_pshift_SRCS = tests/test_pshift.c pshift/tools/maxflow.c
test_pshift_LIBS = pshiftio pshift common

TESTS += test_pjson
test_pjson_SRCS = tests/test_pjson.c
test_pjson_LIBS = pshiftio pshift common

ITESTS += tests/it/it_pshift_cli.sh
BENCHES += pshift/bench/bench-pshift.sh
BENCHES += pshift/bench/bench-pshift-cold.sh
