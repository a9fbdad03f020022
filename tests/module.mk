# tests/ - checks over the whole tree (the suites themselves are registered by the component they test)
ITESTS += tests/it/it_layout.sh tests/it/it_install.sh tests/it/it_metrics.sh
# the CURVE control plane: keys, ZAP, roles, secure by default (docs/security.md)
ITESTS += tests/it/it_curve.sh
include tests/fuzz/fuzz.mk
ITESTS += tests/it/it_alerts.sh
ITESTS += tests/it/it_deploy_guide.sh
