# storage-node/core/module.mk - libnodecore: the node's socket-free core (sched: the token scheduler, sched_bytes its unit accounts; pace: paced token credit; window: the adaptive backend window; cost: a request's price in byte tokens; grant: a period's grant; agent: the node's side of the control protocol).
# Users link it after nodeio and before proto: the agent calls the protocol codec.  The simulator links it too.
LIBS += nodecore
nodecore_SRCS = storage-node/core/sched.c storage-node/core/pace.c storage-node/core/window.c storage-node/core/agent.c \
	storage-node/core/agent_fallback.c storage-node/core/agent_bytes.c storage-node/core/agent_shares.c \
	storage-node/core/agent_grants.c storage-node/core/grant.c storage-node/core/cost.c \
	storage-node/core/sched_bytes.c

TESTS += test_agent
test_agent_SRCS = tests/test_agent.c
test_agent_LIBS = nodecore proto common
$(call check_suite,test_sched,nodecore common)
$(call check_suite,test_pace,nodecore common)
$(call check_suite,test_window,nodecore common)
$(call check_suite,test_cost,nodecore common)
$(call check_suite,test_sched_bytes,nodecore common)
