# controller/ctl.mk - bqos-ctl, the admin command line (included by controller/module.mk).
PROGS += bqos-ctl
bqos-ctl_SRCS = controller/ctl/ctl.c
bqos-ctl_LIBS = proto common
TESTS += test_ctl
test_ctl_SRCS = tests/test_ctl.c
test_ctl_LIBS = common
ITESTS += tests/it/it_ctl.sh
