# pshift/ - the pShift token allocation library (and, in tools.mk, its command-line tool)
LIBS += pshift
pshift_SRCS = pshift/pshift.c
-include pshift/tools.mk
