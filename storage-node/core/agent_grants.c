/* agent_grants.c - the node's side of changed grants only: which buckets a renewing tokens message applies again (their bases, the records of the last renewing message), a gap in the controller's gseq breaking the chain (fail closed: nothing renewed), and the bases a message leaves. */
#include <errno.h>
#include <string.h>

#include "common/growarr.h"
#include "storage-node/core/agent_int.h"

void agent__grants_reset(agent_t *a, int session)
{
    for (size_t i = 0; i < a->gl_n; i++)
        if ((int)a->gl[i] < a->gb_cap)
            a->gb[a->gl[i]].g = 0;
    a->gl_n = 0;
    a->renew_g = 0;
    if (session) {
        a->gseq = 0;
        /* every base g and seen mark is of the old session's count */
        if (a->gb && a->gb_cap > 0)
            memset(a->gb, 0, (size_t)a->gb_cap * sizeof *a->gb);
    }
}

/* Appends controller index i to the next list (room made by the caller). */
static void next_add(agent_t *a, size_t *n, uint32_t i)
{
    a->gl2[(*n)++] = i;
}

long agent__grants_take(agent_t *a, const proto_msg_t *m, const uint32_t **renew)
{
    *renew = NULL;
    if (!m->gseq)
        return 0; /* a controller that does not number them: nothing to keep */
    int gap = a->gseq && m->gseq != a->gseq + 1;
    if (!a->gseq && m->gseq != 1 && m->renew)
        gap = 1; /* the session's first message was lost */
    a->gseq = m->gseq;
    size_t n = a->ctl_n;
    size_t most = a->gl_n + m->count;
    if (growarr((void **)&a->gb, &a->gb_cap, (int)(n ? n : 1), sizeof *a->gb) < 0 ||
        growarr((void **)&a->gl2, &a->gl2_cap, (int)(most ? most : 1), sizeof *a->gl2) < 0) {
        agent__grants_reset(a, 0);
        a->regrant = 1;
        return -ENOMEM;
    }
    if (gap) {
        a->st.grant_gaps++;
        a->regrant = 1; /* the controller sends every grant again */
        agent__grants_reset(a, 0);
    }
    for (size_t i = 0; i < m->count; i++)
        a->gb[m->tokens[i].bucket].seen = m->gseq;
    size_t k = 0, nn = 0;
    if (m->renew && a->renew_g) {
        /* the bases of the last renewing message that m leaves out: the
         * controller means them again; their entries move to the front
         * of gl2, which becomes the list */
        for (size_t i = 0; i < a->gl_n; i++) {
            uint32_t c = a->gl[i];
            agent_gbase_t *g = &a->gb[c];
            if (g->g != a->renew_g)
                continue; /* cleared by a record since */
            if (g->seen == m->gseq) {
                g->g = 0; /* a record here replaces it (below) */
                continue;
            }
            g->g = m->gseq;
            next_add(a, &nn, c);
        }
        k = nn;
    } else if (m->renew) {
        agent__grants_reset(a, 0); /* no chain: nothing renewed */
    }
    for (size_t i = 0; i < m->count; i++) {
        uint32_t c = m->tokens[i].bucket;
        agent_gbase_t *g = &a->gb[c];
        if (m->renew && i < m->based) {
            g->r = m->tokens[i].r_tokens;
            g->l = (m->tokens[i].flags & PROTO_TOK_UNLIMITED) ? PROTO_UNLIMITED
                                                                : m->tokens[i].l_tokens;
            if (g->g != m->gseq)
                next_add(a, &nn, c);
            g->g = m->gseq;
        } else {
            g->g = 0; /* a record outside the bases: its base is gone */
        }
    }
    if (m->renew) {
        /* the list is now the bases of m; the old one's others are gone */
        for (size_t i = 0; i < a->gl_n; i++)
            if (a->gb[a->gl[i]].g != m->gseq)
                a->gb[a->gl[i]].g = 0;
        uint32_t *t = a->gl;
        int tc = a->gl_cap;
        a->gl = a->gl2;
        a->gl_cap = a->gl2_cap;
        a->gl2 = t;
        a->gl2_cap = tc;
        a->gl_n = nn;
        a->renew_g = m->gseq;
        a->st.grants_renewed += k;
    }
    *renew = a->gl;
    return (long)k;
}
