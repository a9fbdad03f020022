/* agent_shares.c - the node's share tokens (issue 28): a tokens message's share list onto the scheduler, the list fail static renews within the lease. */
#include "storage-node/core/agent_int.h"

#include <string.h>

#include "common/log.h"

/* Sets the scheduler's shares to list[n]: those held now and not in it
 * go to 0. */
static void set_list(agent_t *a, const agent_share_t *list, size_t n)
{
    for (size_t i = 0; i < a->sh_ncur; i++)
        sched_set_share(a->s, a->sh_cur[i].b, 0);
    a->sh_ncur = 0;
    for (size_t i = 0; i < n; i++)
        if (sched_set_share(a->s, list[i].b, list[i].n) == 0)
            a->sh_cur[a->sh_ncur++] = list[i];
}

void agent__shares_apply(agent_t *a, const proto_msg_t *m)
{
    if (!m->has_shares || m->nshares > PROTO_SHARES_MAX)
        return;
    for (size_t i = 0; i < m->nshares; i++)
        if (m->shares[i].bucket >= a->ctl_n) {
            proto_stats_note(&a->st.proto, PROTO_E_TABLE);
            if (a->peer)
                log_warn("controller shares refer to bucket %u beyond its table (%zu)",
                         m->shares[i].bucket, a->ctl_n);
            return;
        }
    agent_share_t list[PROTO_SHARES_MAX] = {{0, 0}};
    size_t n = 0;
    for (size_t i = 0; i < m->nshares; i++) {
        int b = a->ctl_map[m->shares[i].bucket];
        if (b >= 0)
            list[n++] = (agent_share_t){.b = b, .n = m->shares[i].tokens};
    }
    set_list(a, list, n);
    if (!a->sh_first_set) {
        memcpy(a->sh_first, list, n * sizeof *list);
        a->sh_nfirst = n;
        a->sh_first_set = 1;
    }
}

void agent__shares_period(agent_t *a, int covered)
{
    if (covered && a->sh_first_set) {
        memcpy(a->sh_snap, a->sh_first, a->sh_nfirst * sizeof *a->sh_first);
        a->sh_nsnap = a->sh_nfirst;
    }
    a->sh_first_set = 0;
}

void agent__shares_static(agent_t *a)
{
    if (a->lease_over || a->st.refused)
        set_list(a, NULL, 0);
    else
        set_list(a, a->sh_snap, a->sh_nsnap);
}
