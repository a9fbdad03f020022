# pshift/tools.mk - the bqos-pshift command (solve, gen, bench), its tests and benchmark; included by pshift/module.mk.
LIBS += pshiftio
pshiftio_SRCS = pshift/pjson.c pshift/gen.c

PROGS += bqos-pshift
bqos-pshift_SRCS = pshift/cli.c pshift/bench.c tests/maxflow.c
bqos-pshift_LIBS = pshiftio pshift common



TESTS += test_pshift
test_pshift_SRCS = tests/test_pshift.c tests/maxflow.c
test_pshift_LIBS = pshiftio pshift common

TESTS += test_pjson
test_pjson_SRCS = tests/test_pjson.c
test_pjson_LIBS = pshiftio pshift common

ITESTS += tests/it_pshift_cli.sh
BENCHES += pshift/bench.sh
