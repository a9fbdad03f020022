# controller/ - bqos-controller: reservation files, admission control, estimators, control loop
LIBS += controller
controller_SRCS = controller/bucketfile.c

TESTS += test_bucketfile
test_bucketfile_SRCS = tests/test_bucketfile.c
test_bucketfile_LIBS = controller common

# bqos-ctl and friends (another engineer's fragment), if present.
-include controller/ctl.mk
