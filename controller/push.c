/* push.c - one node's whole message of a round (tokens, bytes, names and weights, or a heartbeat) from the controller's state in one call. */
#include <errno.h>

#include "controller/ctrl_int.h"
#include "controller/push.h"

int push_msg(const ctrl_t *c, int node, int skipped, proto_msg_t *m, push_to_t *to)
{
    const node_t *nd = ctrl__get_node(c, node);
    if (!nd || !nd->up)
        return -EINVAL;
    size_t n = nd->nout;
    const proto_tokens_bytes_t *brecs;
    size_t nbytes = bytes_tokens(c->by, node, &brecs);
    int names_needed = nd->peer_table != c->table_gen;
    m->peer_table = nd->table;
    if (skipped && nbytes) /* the IO records stand: bytes only */
        n = 0;
    const proto_share_rec_t *srecs;
    long ns = skipped ? -1 : ctrl_node_shares(c, node, &srecs);
    if ((skipped && !nbytes) || (n == 0 && !names_needed && !nbytes && ns < 0)) {
        m->type = PROTO_HEARTBEAT;
    } else {
        m->type = PROTO_TOKENS;
        m->table = c->table_gen;
        m->count = n;
        m->tokens = nd->out; /* borrowed; never freed via m */
        m->nbytes = nbytes;
        m->tbytes = (proto_tokens_bytes_t *)brecs; /* borrowed too */
        if (ns >= 0) { /* the node's whole list (fair.h) */
            m->has_shares = 1;
            m->nshares = (size_t)ns;
            m->shares = srecs;
        }
        /* The counts are as of the node's latest report we hold (the one
         * this round computed from, on this thread): the node nets them
         * against what it served since that report, not since its own
         * latest, which may not have reached us. */
        if (nd->have_rep)
            m->basis = proto_basis(nd->rep_period, nd->rep_interval, (uint32_t)c->cfg.intervals);
        if (names_needed) {
            m->has_names = 1;
            m->nnames = c->nb;
            m->names = c->bnames;
            m->has_weights = 1; /* the weights go with the table */
            m->weights = c->bweights;
            m->shadow = c->bshadow;
        }
    }
    *to = (push_to_t){.name = nd->name, .instance = nd->instance};
    return 0;
}
