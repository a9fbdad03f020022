# common/ - code shared by every program (logging, helpers)
LIBS += common
common_SRCS = common/log.c
TESTS += test_log
test_log_SRCS = tests/test_log.c
test_log_LIBS = common
