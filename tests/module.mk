# tests/ - checks over the whole tree (the suites themselves are registered by the component they test)
ITESTS += tests/it/it_layout.sh tests/it/it_install.sh
include tests/fuzz/fuzz.mk
