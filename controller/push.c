/* push.c - one node's whole message of a round (tokens, bytes, names and weights, or a heartbeat) from the controller's state in one call; under changed grants only, the records the node renews from its bases are left out. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/ctrl_int.h"
#include "controller/push.h"

/* Frees every page of bases (every base zero again). */
static void drop_pages(push_grants_t *g)
{
    for (size_t i = 0; i < g->npage; i++) {
        free(g->page[i]);
        g->page[i] = NULL;
    }
}

void push_grants_session(push_grants_t *g, int on)
{
    g->on = on;
    g->gseq = 0;
    g->renew_g = 0;
    g->nlist = 0;
    drop_pages(g);
}

/* Slot j's base, or NULL when its page was never made (a zero base). */
static push_base_t *base_get(const push_grants_t *g, size_t j)
{
    push_base_t *p = g->page[j / PUSH_BASE_PAGE];
    return p ? &p[j % PUSH_BASE_PAGE] : NULL;
}

/* Slot j's base, its page made (zeroed) if it had none; NULL when out of
 * memory. */
static push_base_t *base_make(push_grants_t *g, size_t j)
{
    push_base_t **p = &g->page[j / PUSH_BASE_PAGE];
    if (!*p && !(*p = calloc(PUSH_BASE_PAGE, sizeof **p)))
        return NULL;
    return &(*p)[j % PUSH_BASE_PAGE];
}

void push_grants_regrant(push_grants_t *g)
{
    g->renew_g = 0;
    g->regrants++;
}

void push_grants_clear(push_grants_t *g)
{
    if (!g)
        return;
    drop_pages(g);
    free(g->page);
    free(g->buf);
    free(g->list);
    free(g->next);
    memset(g, 0, sizeof *g);
}

/* Grows *a to hold `need` slot numbers, or gives back a room over four
 * times what is needed (a full push's).  Returns 0 or -ENOMEM. */
static int slots_fit(uint32_t **a, size_t *cap, size_t need)
{
    if (*cap > 4 * (need + 1024)) {
        free(*a);
        *a = NULL;
        *cap = 0;
    }
    if (need <= *cap)
        return 0;
    uint32_t *x = realloc(*a, need * sizeof *x);
    if (!x)
        return -ENOMEM;
    *a = x;
    *cap = need;
    return 0;
}

/* Makes room for the node's table (nslots slots) and nrec records.
 * Returns 0 or -ENOMEM. */
static int grants_fit(push_grants_t *g, size_t nslots, size_t nrec)
{
    if (nslots > g->nbase) {
        size_t np = (nslots + PUSH_BASE_PAGE - 1) / PUSH_BASE_PAGE;
        if (np > g->npage) {
            push_base_t **p = realloc(g->page, np * sizeof *p);
            if (!p)
                return -ENOMEM;
            memset(p + g->npage, 0, (np - g->npage) * sizeof *p);
            g->page = p;
            g->npage = np;
        }
        g->nbase = nslots;
    }
    /* next: a slot once (its base is made of this message), at most one
     * per record and one per slot of the list */
    if (slots_fit(&g->next, &g->capnext, nrec + g->nlist) < 0) {
        g->renew_g = 0; /* the list may be short of the bases: none */
        g->nlist = 0;
        return -ENOMEM;
    }
    if (g->cap > 4 * (nrec + 1024)) {
        /* a full push's room (a record per pair), sent: given back */
        free(g->buf);
        g->buf = NULL;
        g->cap = 0;
    }
    if (nrec > g->cap) {
        proto_tokens_rec_t *r = realloc(g->buf, nrec * sizeof *r);
        if (!r)
            return -ENOMEM;
        g->buf = r;
        g->cap = nrec;
    }
    return 0;
}

static int64_t rec_l(const proto_tokens_rec_t *t)
{
    return (t->flags & PROTO_TOK_UNLIMITED) ? PROTO_UNLIMITED : t->l_tokens;
}

/* The renewing message's records from the round's n records: unchanged
 * bases left out, the changed ones (new bases) first, then the
 * provisional splits (not bases).  Sets m->tokens, count, based, renew.
 * Returns 0, or -ENOMEM (a page of bases could not be made: m is left as
 * it was, and the caller sends the whole message, not renewing). */
static int renewing(const ctrl_t *c, const node_t *nd, push_grants_t *g, uint64_t gs,
                    size_t n, proto_msg_t *m)
{
    size_t k = 0, nx = 0;
    uint64_t left = 0;
    const uint64_t prev = g->renew_g;
    if (!prev)
        g->nlist = 0; /* no chain: the node renews nothing we know of */
    for (size_t i = 0; i < n; i++) {
        const proto_tokens_rec_t *t = &nd->out[i];
        int j = ctrl__node_slot(nd, t->bucket);
        if (j < 0 || (size_t)j >= g->nbase || c->pv[t->bucket].prov)
            continue;
        push_base_t *b = base_get(g, (size_t)j);
        int64_t l = rec_l(t);
        if (b && prev && b->g == prev && b->r == t->r_tokens && b->l == l) {
            b->g = gs; /* the node renews it */
            g->next[nx++] = (uint32_t)j;
            left++;
            continue;
        }
        if (!b && !(b = base_make(g, (size_t)j)))
            return -ENOMEM; /* bases changed so far are of gs, never a later prev */
        if (b->g != gs)
            g->next[nx++] = (uint32_t)j;
        *b = (push_base_t){.r = t->r_tokens, .l = l, .g = gs};
        g->buf[k++] = *t;
    }
    size_t based = k;
    for (size_t i = 0; i < n; i++) {
        const proto_tokens_rec_t *t = &nd->out[i];
        int j = ctrl__node_slot(nd, t->bucket);
        if (!(j < 0 || (size_t)j >= g->nbase || c->pv[t->bucket].prov))
            continue;
        push_base_t *b = j >= 0 && (size_t)j < g->nbase ? base_get(g, (size_t)j) : NULL;
        if (b)
            b->g = 0; /* the node clears it too */
        g->buf[k++] = *t;
    }
    /* the bases of our last renewing message that this one does not
     * mention: the node renews them too (R 0 and L 0 or unlimited, the
     * pairs a round does not visit), so they stay bases on both ends */
    for (size_t i = 0; i < g->nlist; i++) {
        push_base_t *b = g->list[i] < g->nbase ? base_get(g, g->list[i]) : NULL;
        if (prev && b && b->g == prev) {
            b->g = gs;
            g->next[nx++] = g->list[i];
        }
    }
    uint32_t *t = g->list;
    g->list = g->next;
    g->next = t;
    size_t tc = g->caplist;
    g->caplist = g->capnext;
    g->capnext = tc;
    g->nlist = nx;
    g->omitted += left;
    g->renew_g = gs;
    m->tokens = g->buf;
    m->count = k;
    m->based = based;
    m->renew = 1;
    return 0;
}

int push_msg(const ctrl_t *c, int node, int skipped, push_grants_t *g, proto_msg_t *m,
             push_to_t *to)
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
    int grants = g && g->on;
    if (grants && (names_needed || g->table != c->table_gen || g->peer_table != nd->table)) {
        g->renew_g = 0; /* slots and indexes of another table */
        g->table = c->table_gen;
        g->peer_table = nd->table;
    }
    if (grants && grants_fit(g, nd->ntable, n) < 0) {
        g->renew_g = 0; /* the whole message, numbered, not renewing */
        grants = 0;
    }
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
        if (grants) {
            m->gseq = ++g->gseq;
            if (!skipped) {
                if (renewing(c, nd, g, m->gseq, n, m) < 0) {
                    g->renew_g = 0; /* the whole message, numbered, not renewing */
                    g->nlist = 0;
                }
            } else if (g->renew_g) { /* a record outside a renewing message is no base */
                for (size_t i = 0; i < n; i++) {
                    int j = ctrl__node_slot(nd, nd->out[i].bucket);
                    push_base_t *b = j >= 0 && (size_t)j < g->nbase ? base_get(g, (size_t)j) : NULL;
                    if (b)
                        b->g = 0;
                }
            }
        } else if (g && g->on) {
            m->gseq = ++g->gseq; /* out of memory: no renewal, still numbered */
        }
    }
    *to = (push_to_t){.name = nd->name, .instance = nd->instance};
    return 0;
}
