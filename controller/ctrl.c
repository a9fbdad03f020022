/* ctrl.c - the controller's state: configuration, buckets, nodes and their tables, reports, rounds, and what the status reads; the computation is round.c. */
#include "controller/ctrl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "controller/ctrl_int.h"
#include "controller/plausible.h"

_Static_assert(BUCKETFILE_MAX_WEIGHT <= PROTO_WEIGHT_MAX, "bucket weights must fit the protocol");

ctrl_config_t ctrl_config_default(void)
{
    return (ctrl_config_t){
        .period_s = 1.0,
        .intervals = 5,
        .threads = 1,
        .down_after = 3,
        .skip_rel = 0.10,
        .skip_abs = 2,
        .default_capacity = 50000,
        .cap_sd = 0,
        .cap_cold = 0.2,
        .cap_recent = 3,
        .conv_slack = 0.05,
        .limit_depth = 0.02,
        .max_profile = 1e8,
        .max_nodes = CTRL_NODES_MAX,
        .max_names = CTRL_NAMES_DEFAULT,
        .forget_after = 10,
        .fallback_lease = 10,
    };
}

ctrl_t *ctrl_new(const ctrl_config_t *cfg)
{
    if (!cfg || !(cfg->period_s > 0) || cfg->intervals < 1 || cfg->down_after < 1 ||
        cfg->fallback_lease < 1 || cfg->fallback_lease > (int)PROTO_LEASE_MAX)
        return NULL;
    ctrl_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cfg = *cfg;
    if (!(c->cfg.default_capacity >= 1))
        c->cfg.default_capacity = 50000;
    if (!(c->cfg.max_profile >= 1))
        c->cfg.max_profile = 1e8;
    if (c->cfg.max_nodes < 1 || c->cfg.max_nodes > CTRL_NODES_MAX)
        c->cfg.max_nodes = CTRL_NODES_MAX;
    if (c->cfg.max_names < 1)
        c->cfg.max_names = CTRL_NAMES_DEFAULT;
    for (int i = 0; i < CTRL_IMPL__COUNT; i++)
        c->impl_logged[i] = -CTRL_IMPL_LOG_ROUNDS; /* the first one is logged */
    c->bf = bucketfile_new();
    c->node_ix = strmap_new();
    c->dyn = dyn_new(c->cfg.dyn_max > 0 ? (size_t)c->cfg.dyn_max : DYN_MAX_TOTAL,
                     c->cfg.dyn_max_rule > 0 ? (size_t)c->cfg.dyn_max_rule : DYN_MAX_RULE,
                     c->cfg.dyn_idle_periods > 0 ? (uint64_t)c->cfg.dyn_idle_periods
                                                 : DYN_IDLE_PERIODS);
    if (c->cfg.shares && !(c->fair = fair_new())) {
        ctrl_destroy(&c);
        return NULL;
    }
    c->chlog = calloc(CTRL_CHANGE_LOG, sizeof *c->chlog);
    if (!c->bf || !c->node_ix || !c->dyn || !c->chlog) {
        ctrl_destroy(&c);
        return NULL;
    }
    c->table_gen = cfg->table_seed ? cfg->table_seed : 1;
    c->left = 1;
    c->force = 1;
    c->io.lazy = !c->cfg.full_passes; /* quiet buckets' conversion replayed when read */
    return c;
}

/* Frees what a node's bucket table owns: its names and the per-pair arrays
 * indexed by them (not the scratch arrays of a computation). */
static void table_free(node_t *n)
{
    for (size_t i = 0; i < n->ntable; i++)
        free(n->tnames[i]);
    free(n->tnames);
    free(n->pref);
    free(n->pst);
    free(n->psv);
    free(n->push);
    free(n->act);
    free(n->inact);
    strmap_destroy(&n->unconf);
}

/* Frees everything node n holds but its name, and leaves it a node with
 * an empty table. */
static void node_clear(node_t *n)
{
    table_free(n);
    free(n->jof);
    free(n->out);
    char *name = n->name;
    int64_t last_seen = n->last_seen;
    memset(n, 0, sizeof *n);
    n->name = name;
    n->last_seen = last_seen;
    n->act_sorted = 1; /* an empty list */
}

static void node_free(node_t *n)
{
    node_clear(n);
    free(n->name);
}

void ctrl__node_forget(ctrl_t *c, int node)
{
    node_t *nd = &c->nodes[node];
    log_info("node %s down for %d rounds: forgotten (its tables freed)", nd->name,
             (int)(c->round_no - nd->last_seen));
    node_clear(nd);
    nd->forgotten = 1;
    c->st.nodes_forgotten++;
}

/* A slot for a new node: a new one, or (at max_nodes) the forgotten node
 * silent the longest, renamed.  Returns its index, -EUSERS if every slot
 * is taken by a node not forgotten, or -ENOMEM. */
static int node_slot(ctrl_t *c, const char *name)
{
    int idx = -1;
    if (c->nn >= c->cfg.max_nodes) {
        for (int i = 0; i < c->nn; i++)
            if (c->nodes[i].forgotten &&
                (idx < 0 || c->nodes[i].last_seen < c->nodes[idx].last_seen))
                idx = i;
        if (idx < 0)
            return -EUSERS;
        char *nm = strdup(name);
        if (!nm)
            return -ENOMEM;
        node_t *nd = &c->nodes[idx];
        strmap_remove(c->node_ix, nd->name, strlen(nd->name), NULL);
        if (strmap_insert(c->node_ix, name, strlen(name), idx) < 0) {
            strmap_insert(c->node_ix, nd->name, strlen(nd->name), idx);
            free(nm);
            return -ENOMEM;
        }
        free(nd->name);
        memset(nd, 0, sizeof *nd);
        nd->name = nm;
        nd->last_seen = -1;
        return idx;
    }
    if (c->nn == c->capn) {
        int cap = c->capn ? c->capn * 2 : 8;
        node_t *nv = realloc(c->nodes, (size_t)cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        c->nodes = nv;
        c->capn = cap;
    }
    node_t *nd = &c->nodes[c->nn];
    memset(nd, 0, sizeof *nd);
    nd->name = strdup(name);
    if (!nd->name || strmap_insert(c->node_ix, name, strlen(name), c->nn) < 0) {
        free(nd->name);
        return -ENOMEM;
    }
    nd->last_seen = -1;
    return c->nn++;
}

void ctrl_destroy(ctrl_t **cp)
{
    if (!cp || !*cp)
        return;
    ctrl_t *c = *cp;
    for (int i = 0; i < c->nn; i++)
        node_free(&c->nodes[i]);
    free(c->nodes);
    strmap_destroy(&c->node_ix);
    bucketfile_destroy(&c->bf);
    bucketfile_destroy(&c->conf);
    dyn_destroy(&c->dyn);
    free(c->dyn_ix);
    free(c->bnames);
    free(c->bweights);
    free(c->bshadow);
    free(c->b);
    free(c->pv);
    tree_destroy(&c->tree);
    fair_destroy(&c->fair);
    free(c->chlog);
    free(c->ahead);
    free(c->play);
    free(c->walkl);
    free(c->need_tot);
    ledger_free(&c->io);
    bytes_destroy(&c->by);
    free(c);
    *cp = NULL;
}

const ctrl_config_t *ctrl_config(const ctrl_t *c)
{
    return &c->cfg;
}

/* A new pair of bucket b (< 0: not configured, read back as -1): no slot
 * (ctrl__pair_none: never reported, no tokens left known), nothing pushed. */
static void pair_init(int32_t *pref, pair_push_t *pp, int b)
{
    *pref = b < 0 ? -1 : -b - 2;
    *pp = (pair_push_t){.tok_r = -1, .tok_l = CTRL_UNLIMITED, .gperiod = UINT64_MAX};
}

int ctrl__pairs_reserve(node_t *nd, size_t n)
{
    size_t want = nd->npst + n;
    if (want > nd->ntable)
        want = nd->ntable; /* one slot per pair at most */
    if (want <= nd->cappst)
        return 0;
    size_t cap = nd->cappst ? nd->cappst : 64;
    while (cap < want)
        cap *= 2;
    if (cap > nd->ntable)
        cap = nd->ntable;
    pair_t *pst = realloc(nd->pst, cap * sizeof *pst);
    if (!pst)
        return -ENOMEM;
    nd->pst = pst;
    pair_served_t *psv = realloc(nd->psv, cap * sizeof *psv);
    if (!psv)
        return -ENOMEM; /* pst's larger room stays: harmless */
    nd->psv = psv;
    nd->cappst = cap;
    return 0;
}

/* Tokens per period for `rate`; CTRL_BUCKET_TOKENS_MAX + 1 if more
 * (ctrl_check_buckets() refuses those). */
static int64_t rate_to_tokens(int64_t rate, double period_s)
{
    double t = round((double)rate * period_s);
    return t > (double)CTRL_BUCKET_TOKENS_MAX ? CTRL_BUCKET_TOKENS_MAX + 1 : (int64_t)t;
}

/* The nested buckets' part of ctrl_check_buckets(): a tree that can be
 * built, and no leaf without a byte limit under an ancestor with one (such
 * a leaf gets no byte tokens at all, so nothing would hold the ancestor's
 * byte limit; an IO limit is inherited instead, tree_static_limit()). */
static int nested_check(const ctrl_t *c, const bucketfile_t *bf, char *msg, size_t msgsize)
{
    tree_t *t = NULL;
    int rc = tree_new(bf, c->cfg.period_s, &t);
    size_t bad = 0;
    if (rc < 0) {
        if (msg)
            snprintf(msg, msgsize, rc == -ENOMEM ? "out of memory"
                                                 : "the buckets' parents make a cycle, name an "
                                                   "unknown bucket or nest too deep");
    } else if (tree_unlimited_under_limit(t, TREE_BYTES, &bad)) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, bad);
        if (msg)
            snprintf(msg, msgsize,
                     "bucket %s: an ancestor has a byte limit (limit_bytes) and it has none; "
                     "give it a limit_bytes (at most its ancestors')", x->name);
        rc = -ERANGE;
    } else if (msg && msgsize) {
        msg[0] = 0;
    }
    tree_destroy(&t);
    return rc == -EINVAL ? -ERANGE : rc;
}

/* max(reservation, limit) of x in tokens per period (CTRL_BUCKET_TOKENS_MAX
 * + 1 if more). */
static int64_t most_tokens(const bucketfile_bucket_t *x, double period_s)
{
    return rate_to_tokens(x->limit == BUCKETFILE_NO_LIMIT ? x->reservation : x->limit, period_s);
}

/* A configuration change: the nodes need the table again, and the next
 * computation may not be skipped. */
static void new_generation(ctrl_t *c)
{
    c->table_gen++;
    if (c->table_gen == 0)
        c->table_gen = 1;
    c->force = 1;
    c->play_stale = 1; /* indexes moved: the next round rebuilds the buckets in play */
}

/* Logs a change made in place (ctrl_changes()). */
static void log_change(ctrl_t *c, ctrl_change_kind_t kind, size_t b, size_t moved)
{
    c->chseq++;
    c->chlog[c->chseq % CTRL_CHANGE_LOG] = (ctrl_change_t){kind, (int)b, (int)moved};
}

uint64_t ctrl_change_seq(const ctrl_t *c)
{
    return c->chseq;
}

int ctrl_changes(const ctrl_t *c, uint64_t since, void (*fn)(void *arg, const ctrl_change_t *ch),
                 void *arg)
{
    if (since > c->chseq || since < c->chreset || c->chseq - since >= CTRL_CHANGE_LOG)
        return -ERANGE;
    for (uint64_t k = since + 1; k <= c->chseq; k++)
        fn(arg, &c->chlog[k % CTRL_CHANGE_LOG]);
    return 0;
}

/* Fair shares divide IOs only (fair.c takes the IO ledger's spare): a
 * bucket with a byte rate under cfg.shares would get its byte spare per
 * node, by footprint, while its IOs divide by weight.  Refused rather than
 * half-applied (decisions.md, "Fair shares on real nodes, byte rates
 * refused, the policies' checks").  0 or -ERANGE with msg. */
static int shares_bytes_check(const ctrl_t *c, const bucketfile_bucket_t *x, char *msg,
                              size_t msgsize)
{
    if (!c->cfg.shares || (x->reservation_bytes == 0 && x->limit_bytes == 0))
        return 0;
    if (msg)
        snprintf(msg, msgsize,
                 "bucket %s: a byte rate (reservation_bytes, limit_bytes) with --shares on: fair "
                 "shares divide IOs only; take its byte rates away or run with --shares off",
                 x->name);
    return -ERANGE;
}

int ctrl_check_bucket(const ctrl_t *c, const bucketfile_bucket_t *x, char *msg, size_t msgsize)
{
    int i = bucketfile_find(c->bf, x->name);
    const bucketfile_bucket_t *old = i >= 0 ? bucketfile_get(c->bf, (size_t)i) : NULL;
    int64_t t = most_tokens(x, c->cfg.period_s);
    if (t > CTRL_BUCKET_TOKENS_MAX) {
        if (msg)
            snprintf(msg, msgsize,
                     "bucket %s: %lld IOs/s over the %g s period is more than 2^53 IOs; "
                     "lower it or the period",
                     x->name, (long long)(x->limit == BUCKETFILE_NO_LIMIT ? x->reservation : x->limit),
                     c->cfg.period_s);
        return -ERANGE;
    }
    if (x->shadow && !(old && old->shadow) && c->nshadow + 1 > CTRL_SHADOW_MAX) {
        if (msg)
            snprintf(msg, msgsize,
                     "bucket %s: more than %d buckets in shadow (the list goes in one message "
                     "header); enforce some first",
                     x->name, CTRL_SHADOW_MAX);
        return -ERANGE;
    }
    if (shares_bytes_check(c, x, msg, msgsize) < 0)
        return -ERANGE;
    int64_t total = c->tok_total - (old ? most_tokens(old, c->cfg.period_s) : 0) + t;
    if (total > CTRL_TOTAL_TOKENS_MAX) {
        if (msg)
            snprintf(msg, msgsize,
                     "bucket %s: the buckets add up to more than 2^62 IOs per %g s period (the "
                     "sum of max(reservation, limit) x period must fit); lower their limits or "
                     "the period",
                     x->name, c->cfg.period_s);
        return -ERANGE;
    }
    if (msg && msgsize)
        msg[0] = 0;
    return 0;
}

int ctrl_check_buckets(const ctrl_t *c, const bucketfile_t *bf, char *msg, size_t msgsize)
{
    int64_t total = 0;
    int nshadow = 0;
    for (size_t b = 0; b < bucketfile_count(bf); b++) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, b);
        int64_t most = x->limit == BUCKETFILE_NO_LIMIT ? x->reservation : x->limit;
        int64_t t = rate_to_tokens(most, c->cfg.period_s);
        if (t > CTRL_BUCKET_TOKENS_MAX) {
            if (msg)
                snprintf(msg, msgsize,
                         "bucket %s: %lld IOs/s over the %g s period is more than 2^53 IOs; "
                         "lower it or the period",
                         x->name, (long long)most, c->cfg.period_s);
            return -ERANGE;
        }
        if (shares_bytes_check(c, x, msg, msgsize) < 0)
            return -ERANGE;
        total += t; /* <= 2^62 + 2^53: no overflow */
        if (x->shadow && ++nshadow > CTRL_SHADOW_MAX) {
            if (msg)
                snprintf(msg, msgsize,
                         "bucket %s: more than %d buckets in shadow (the list goes in one "
                         "message header); enforce some first",
                         x->name, CTRL_SHADOW_MAX);
            return -ERANGE;
        }
        if (total > CTRL_TOTAL_TOKENS_MAX) {
            if (msg)
                snprintf(msg, msgsize,
                         "bucket %s: the buckets up to it (%zu) add up to more than 2^62 IOs "
                         "per %g s period (the sum of max(reservation, limit) x period must fit); "
                         "lower their limits or the period",
                         x->name, b + 1, c->cfg.period_s);
            return -ERANGE;
        }
    }
    return nested_check(c, bf, msg, msgsize);
}

/* Gives node n a copy of each name of its table that is the current
 * table's (not copied) and that `bf` lacks, so that node_remap() onto bf
 * can drop nothing.  Returns 0 or -ENOMEM (the copies made stay: a copy of
 * a configured name is harmless). */
static int node_keep_names(const ctrl_t *c, const bucketfile_t *bf, node_t *n)
{
    for (size_t j = 0; j < n->ntable; j++)
        if (!n->tnames[j] && bucketfile_find(bf, c->bnames[ctrl__pair_b(n, j)]) < 0 &&
            !(n->tnames[j] = strdup(c->bnames[ctrl__pair_b(n, j)])))
            return -ENOMEM;
    return 0;
}

/* Points node n's pairs at the buckets of `bf` and rebuilds its reverse
 * index into `jof` (nb entries, owned by the node afterwards).  A name not
 * copied is c's current table's (bnames); after node_keep_names(c, bf, n)
 * every name bf lacks is a copy, and the copies of names bf has are freed
 * (read from bf's rows once c->bnames is bf's). */
static void node_remap(const ctrl_t *c, const bucketfile_t *bf, node_t *n, int *jof, size_t nb)
{
    for (size_t b = 0; b < nb; b++)
        jof[b] = -1;
    strmap_destroy(&n->unconf);
    n->unconf = strmap_new();
    for (size_t j = 0; j < n->ntable; j++) {
        const char *name = ctrl__tname(c, n, j);
        int b = bucketfile_find(bf, name);
        ctrl__pair_set_b(n, j, b);
        if (b >= 0) {
            jof[b] = (int)j;
            free(n->tnames[j]);
            n->tnames[j] = NULL;
        } else if (n->unconf && strmap_insert(n->unconf, name, strlen(name), (int)j) == -ENOMEM)
            strmap_destroy(&n->unconf); /* ctrl_set_bucket() scans instead */
    }
    free(n->jof);
    n->jof = jof;
}

/* The index in node n's table of the bucket named `name` that the
 * configuration lacked, or -1. */
static int node_unconf(const node_t *n, const char *name)
{
    int j;
    if (n->unconf)
        return strmap_find(n->unconf, name, strlen(name), &j) == 0 ? j : -1;
    for (size_t k = 0; k < n->ntable; k++)
        if (ctrl__pair_b(n, k) < 0 && strcmp(n->tnames[k], name) == 0)
            return (int)k;
    return -1;
}

/* The buckets of bf in shadow as the protocol's list ("3,17", "" if
 * none), or NULL if out of memory.  Caller owns it. */
static char *shadow_list(const bucketfile_t *bf)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    int first = 1;
    for (size_t b = 0; b < bucketfile_count(bf); b++)
        if (bucketfile_get(bf, b)->shadow) {
            fprintf(f, first ? "%zu" : ",%zu", b);
            first = 0;
        }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

int ctrl__table_set(ctrl_t *c, const bucketfile_t *bf)
{
    if (ctrl_check_buckets(c, bf, NULL, 0) < 0)
        return -ERANGE;
    size_t nb = bucketfile_count(bf);
    /* A copy of the rows, not a shared dup: the caller's table and this
     * one are each edited in place by a change (ctrl_set_bucket()), and
     * sharing would make the first such change copy the whole table,
     * text and all, on the loop (2.8 s at a million buckets). */
    bucketfile_t *copy = bucketfile_copy_rows(bf);
    /* Room for a quarter more: buckets added by ctrl_set_bucket() fill it
     * before the arrays grow (a copy of each, O(n), every n/4 additions). */
    size_t capb = nb + nb / 4 + 16;
    const char **names = calloc(capb, sizeof *names);
    uint32_t *weights = calloc(capb, sizeof *weights);
    ledger_bucket_t *bs = calloc(capb, sizeof *bs);
    prov_t *pv = calloc(capb, sizeof *pv);
    int **jofs = calloc(c->nn ? (size_t)c->nn : 1, sizeof *jofs);
    tree_t *tree = NULL;
    if (!copy || !names || !weights || !bs || !pv || !jofs || tree_new(copy, c->cfg.period_s, &tree) < 0)
        goto fail;
    for (int i = 0; i < c->nn; i++)
        if (!(jofs[i] = malloc(capb * sizeof **jofs)))
            goto fail;
    if (bytes_config(&c->by, c->bf, copy, c->cfg.period_s, c->cfg.intervals) < 0)
        goto fail;
    int64_t tok_total = 0;
    int nshadow = 0;
    for (size_t b = 0; b < nb; b++) {
        const bucketfile_bucket_t *x = bucketfile_get(copy, b);
        tok_total += most_tokens(x, c->cfg.period_s);
        nshadow += x->shadow != 0;
        names[b] = x->name;
        weights[b] = x->weight;
        bs[b].cseq = c->io.cseq; /* converted from the next round on */
        bs[b].r = rate_to_tokens(x->reservation, c->cfg.period_s);
        bs[b].l = x->limit == BUCKETFILE_NO_LIMIT ? CTRL_UNLIMITED
                                                   : rate_to_tokens(x->limit, c->cfg.period_s);
        /* Nested (tree.h): a parent has no queue, R 0 and L 0 at the
         * nodes (its rates are the tree's); a leaf without a limit under a
         * limited ancestor is held to the smallest ancestor limit. */
        if (tree_is_parent(tree, b))
            bs[b].r = bs[b].l = 0;
        else
            bs[b].l = tree_static_limit(tree, TREE_IO, b, bs[b].l);
    }
    for (int i = 0; i < c->nn; i++)
        if (!c->nodes[i].forgotten && node_keep_names(c, copy, &c->nodes[i]) < 0)
            goto fail;
    char *shadow = shadow_list(copy);
    if (!shadow)
        goto fail;
    free(c->bshadow);
    c->bshadow = shadow;
    for (int i = 0; i < c->nn; i++) {
        if (c->nodes[i].forgotten) { /* holds no table */
            free(jofs[i]);
            continue;
        }
        node_remap(c, copy, &c->nodes[i], jofs[i], nb);
        c->nodes[i].nout = 0;
        c->nodes[i].full_push = 1; /* new buckets' limits must reach every node */
    }
    free(jofs);
    bucketfile_destroy(&c->bf);
    c->bf = copy;
    free(c->bnames);
    c->bnames = names;
    free(c->bweights);
    c->bweights = weights;
    free(c->b);
    c->b = bs;
    free(c->pv);
    c->pv = pv;
    tree_destroy(&c->tree);
    c->tree = tree;
    c->nb = nb;
    c->capb = capb;
    c->tok_total = tok_total;
    c->nshadow = nshadow;
    c->st.full_rebuilds++;
    c->chreset = ++c->chseq; /* observers read the whole table again */
    /* Reports ahead name the old indexes: until their period has passed,
     * ctrl_touched_buckets() names every bucket (-ENOMEM). */
    for (size_t k = 0; k < c->nahead; k++)
        if (c->ahead[k].period + 1 > c->ahead_lost)
            c->ahead_lost = c->ahead[k].period + 1;
    c->nahead = 0;
    new_generation(c);
    return 0;
fail:
    if (jofs)
        for (int i = 0; i < c->nn; i++)
            free(jofs[i]);
    free(jofs);
    free(bs);
    free(pv);
    tree_destroy(&tree);
    free(names);
    free(weights);
    bucketfile_destroy(&copy);
    return -ENOMEM;
}

/* Makes room for one more bucket in c's arrays and every node's jof.
 * Returns 0 or -ENOMEM (what grew stays grown: harmless). */
static int room_for_one(ctrl_t *c)
{
    if (c->nb < c->capb)
        return 0;
    size_t cap = c->capb ? c->capb * 2 : 16;
    const char **names = realloc(c->bnames, cap * sizeof *names);
    if (names)
        c->bnames = names;
    uint32_t *weights = realloc(c->bweights, cap * sizeof *weights);
    if (weights)
        c->bweights = weights;
    ledger_bucket_t *bs = realloc(c->b, cap * sizeof *bs);
    if (bs)
        c->b = bs;
    prov_t *pv = realloc(c->pv, cap * sizeof *pv);
    if (pv)
        c->pv = pv;
    if (!names || !weights || !bs || !pv)
        return -ENOMEM;
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        if (nd->forgotten || !nd->jof)
            continue;
        int *jof = realloc(nd->jof, cap * sizeof *jof);
        if (!jof)
            return -ENOMEM;
        nd->jof = jof;
    }
    c->capb = cap;
    return 0;
}

/* Rebuilds the protocol's shadow list after a change that touched it. */
static int reshadow(ctrl_t *c)
{
    char *shadow = shadow_list(c->bf);
    if (!shadow)
        return -ENOMEM;
    free(c->bshadow);
    c->bshadow = shadow;
    return 0;
}

/* Bucket b's controller state from its row x: tokens, weight, a fresh
 * ledger entry and provisional split (as ctrl_set_buckets() gives every
 * bucket); the nodes holding it push its limit at the next computation. */
static void bucket_state(ctrl_t *c, size_t b, const bucketfile_bucket_t *x)
{
    c->bnames[b] = x->name;
    c->bweights[b] = x->weight;
    memset(&c->b[b], 0, sizeof c->b[b]);
    c->b[b].cseq = c->io.cseq; /* converted from the next round on */
    c->b[b].r = rate_to_tokens(x->reservation, c->cfg.period_s);
    c->b[b].l = x->limit == BUCKETFILE_NO_LIMIT ? CTRL_UNLIMITED
                                                 : rate_to_tokens(x->limit, c->cfg.period_s);
    memset(&c->pv[b], 0, sizeof c->pv[b]);
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        nd->nout = 0; /* records of the old table's indexes */
        if (!nd->forgotten && ctrl__node_slot(nd, b) >= 0)
            nd->full_push = 1;
    }
}

int ctrl__set_bucket_here(ctrl_t *c, const bucketfile_bucket_t *x)
{
    int i = bucketfile_find(c->bf, x->name);
    const bucketfile_bucket_t *old = i >= 0 ? bucketfile_get(c->bf, (size_t)i) : NULL;
    int64_t old_tok = old ? most_tokens(old, c->cfg.period_s) : 0;
    int old_shadow = old ? old->shadow : 0;
    if (i < 0 && room_for_one(c) < 0)
        return -ENOMEM;
    const bucketfile_bucket_t *v0 = bucketfile_get(c->bf, 0);
    if (bucketfile_set(c->bf, x, NULL) < 0)
        return -ENOMEM;
    if (old_shadow != x->shadow && reshadow(c) < 0) {
        /* the table is changed already: the rest follows, the list is old */
        log_warn("out of memory: the shadow list is not updated until the next change");
    }
    size_t b = i >= 0 ? (size_t)i : c->nb;
    if (bucketfile_get(c->bf, 0) != v0) /* the rows moved (copied or grown) */
        for (size_t k = 0; k < bucketfile_count(c->bf); k++)
            c->bnames[k] = bucketfile_get(c->bf, k)->name;
    c->bnames[b] = bucketfile_get(c->bf, b)->name; /* the table's copy of the name */
    if (i < 0) {
        c->nb++;
        c->nconf++;
        for (int n = 0; n < c->nn; n++) {
            node_t *nd = &c->nodes[n];
            if (nd->forgotten || !nd->jof)
                continue;
            int j = node_unconf(nd, x->name);
            nd->jof[b] = j;
            if (j >= 0) {
                ctrl__pair_set_b(nd, (size_t)j, (int)b);
                if (nd->unconf)
                    strmap_remove(nd->unconf, x->name, strlen(x->name), NULL);
                free(nd->tnames[j]); /* the table's name from now on */
                nd->tnames[j] = NULL;
            }
        }
    }
    bucket_state(c, b, bucketfile_get(c->bf, b));
    log_change(c, i < 0 ? CTRL_CHANGE_ADD : CTRL_CHANGE_SET, b, b);
    c->tok_total += most_tokens(x, c->cfg.period_s) - old_tok;
    c->nshadow += (x->shadow != 0) - (old_shadow != 0);
    c->st.bucket_changes++;
    c->conf_stale = 1;
    new_generation(c);
    return 0;
}

int ctrl__remove_bucket_here(ctrl_t *c, const char *name)
{
    int i = bucketfile_find(c->bf, name);
    if (i < 0)
        return -ENOENT;
    const bucketfile_bucket_t *old = bucketfile_get(c->bf, (size_t)i);
    int64_t old_tok = most_tokens(old, c->cfg.period_s);
    int old_shadow = old->shadow;
    /* The name stays known to the nodes that hold it, as unconfigured:
     * each takes its own copy first (nothing changed yet if one fails). */
    for (int n = 0; n < c->nn; n++) {
        node_t *nd = &c->nodes[n];
        int j = nd->forgotten ? -1 : ctrl__node_slot(nd, (size_t)i);
        if (j >= 0 && !nd->tnames[j] && !(nd->tnames[j] = strdup(name)))
            return -ENOMEM;
    }
    for (int n = 0; n < c->nn; n++) {
        node_t *nd = &c->nodes[n];
        int j = nd->forgotten ? -1 : ctrl__node_slot(nd, (size_t)i);
        if (j >= 0 && nd->unconf &&
            strmap_set(nd->unconf, name, strlen(name), j) < 0)
            strmap_destroy(&nd->unconf); /* scans instead */
    }
    const bucketfile_bucket_t *v0 = bucketfile_get(c->bf, 0);
    if (bucketfile_remove_swap(c->bf, name) < 0)
        return -ENOMEM;
    /* The last bucket takes index b (as in the table): its state and its
     * name (a pointer at the table's copy) move with it. */
    size_t b = (size_t)i, m = c->nb - 1;
    c->nb--;
    c->nconf--;
    if (bucketfile_get(c->bf, 0) != v0 && c->nb) /* copied: every row moved */
        for (size_t k = 0; k < c->nb; k++)
            c->bnames[k] = bucketfile_get(c->bf, k)->name;
    if (b != m) {
        c->bnames[b] = c->bnames[m];
        c->bweights[b] = c->bweights[m];
        c->b[b] = c->b[m];
        c->pv[b] = c->pv[m];
    }
    for (int n = 0; n < c->nn; n++) {
        node_t *nd = &c->nodes[n];
        nd->nout = 0; /* records of the old indexes */
        if (nd->forgotten || !nd->jof)
            continue;
        int j = nd->jof[b], jm = nd->jof[m];
        if (j >= 0) {
            ctrl__pair_set_b(nd, (size_t)j, -1);
            nd->full_push = 1;
        }
        if (b != m) {
            nd->jof[b] = jm;
            if (jm >= 0)
                ctrl__pair_set_b(nd, (size_t)jm, (int)b);
        }
    }
    log_change(c, CTRL_CHANGE_REMOVE, b, m);
    for (size_t k = 0; k < c->nahead; k++) /* reports ahead follow the move */
        if ((size_t)c->ahead[k].b == m)
            c->ahead[k].b = (int)b;
    c->tok_total -= old_tok;
    c->nshadow -= old_shadow != 0;
    if ((old_shadow || c->nshadow) && reshadow(c) < 0)
        log_warn("out of memory: the shadow list is not updated until the next change");
    c->st.bucket_changes++;
    c->conf_stale = 1;
    new_generation(c);
    return 0;
}

uint32_t ctrl_table(const ctrl_t *c, const char *const **names, size_t *n)
{
    if (names)
        *names = c->bnames;
    if (n)
        *n = c->nb;
    return c->table_gen;
}

const uint32_t *ctrl_table_weights(const ctrl_t *c)
{
    return c->bweights;
}

const char *ctrl_table_shadow(const ctrl_t *c)
{
    return c->bshadow;
}

const rules_t *ctrl_rules(const ctrl_t *c)
{
    return bucketfile_rules(c->bf);
}

/* Index of node `name`, forgotten or not, or -ENOENT. */
static int node_lookup(const ctrl_t *c, const char *name)
{
    int v;
    if (!name || strmap_find(c->node_ix, name, strlen(name), &v) < 0)
        return -ENOENT;
    return v;
}

int ctrl_node_find(const ctrl_t *c, const char *name)
{
    int v = node_lookup(c, name);
    return v >= 0 && c->nodes[v].forgotten ? -ENOENT : v;
}

int ctrl_nnodes(const ctrl_t *c)
{
    return c->nn;
}

/* Puts table entry j on node nd's active list.  Returns 0 or -ENOMEM. */
/* A bucket absent from a report is idle on that node (docs/protocol.md: the
 * node leaves out exactly the buckets whose counters are all zero): every
 * active pair the report of `period` did not carry but an earlier report of
 * the same period did reads zero queued and arrivals from now on (what it
 * served this period stays counted).  Clears the marks the report's records
 * left.  O(active pairs of the node). */
static void absent_idle(node_t *nd, uint64_t period)
{
    for (size_t k = 0; k < nd->nact; k++) {
        uint32_t j = nd->act[k];
        if (nd->inact[j] & INACT_REPORTED) {
            nd->inact[j] &= (uint8_t)~INACT_REPORTED;
            continue;
        }
        pair_t *p = ctrl__pair_held(nd, j);
        if (!p || !p->has_report || p->period != period)
            continue; /* an older period's record: the idle reset of the
                         computation reads it, the provisional split
                         remembers where the demand was */
        p->queued = 0;
        p->arrivals = 0;
        p->throttled = 0;
    }
}

/* After a full report: what the node assumes of the pairs it left out
 * (idle: zeros as of now), so that its next sparse report predicts from
 * the same base.  A pair without a slot never reported: its base is read
 * only once a record wrote one (which makes the slot).  The record's period
 * goes with its base, so a carried pair's counts by class (computed from
 * the record's when read, ctrl__pair_classes()) are made what they are as
 * carried so far, first.  O(active pairs of the node). */
static void absent_base(node_t *nd, uint64_t period, uint32_t interval)
{
    for (size_t k = 0; k < nd->nact; k++) {
        pair_t *p = ctrl__pair_held(nd, nd->act[k]);
        if (!p || (nd->inact[nd->act[k]] & INACT_REPORTED))
            continue;
        pair_served_t *sv = &nd->psv[nd->pref[nd->act[k]]];
        if (ctrl__pair_moved(p, sv))
            ctrl__pair_classes(p, sv);
        p->bserved = 0;
        p->bperiod = period;
        p->binterval = interval;
    }
}

/* Clears the marks of a report that was not taken to its end. */
static void unmark(node_t *nd)
{
    for (size_t k = 0; k < nd->nact; k++)
        nd->inact[nd->act[k]] &= (uint8_t)~INACT_REPORTED;
}

/* Doubles the array v of *cap elements of `size` bytes (to `first` when
 * empty).  Returns the new array, *cap updated; NULL with v and *cap
 * unchanged when out of memory. */
static void *grow(void *v, size_t *cap, size_t size, size_t first)
{
    size_t nc = *cap ? *cap * 2 : first;
    void *p = realloc(v, nc * size);
    if (p)
        *cap = nc;
    return p;
}

static int act_add(node_t *nd, size_t j)
{
    if (nd->inact[j])
        return 0;
    if (nd->nact == nd->capact) {
        uint32_t *a = grow(nd->act, &nd->capact, sizeof *a, 64);
        if (!a)
            return -ENOMEM;
        nd->act = a;
    }
    nd->act[nd->nact++] = (uint32_t)j;
    nd->inact[j] = INACT_LISTED;
    nd->act_sorted = 0;
    return 0;
}

int ctrl_node_table(ctrl_t *c, int node, uint32_t table, const char *const *names, size_t n)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd || (n && !names))
        return -EINVAL;
    if (n > c->nb + (size_t)c->cfg.max_names)
        return -E2BIG;
    char **tn = calloc(n ? n : 1, sizeof *tn);
    int32_t *pref = malloc((n ? n : 1) * sizeof *pref);
    pair_push_t *push = malloc((n ? n : 1) * sizeof *push);
    /* The slots of the pairs the node keeps, in a room of their own: at
     * most one per slot it had, and per pair of the new table. */
    size_t cs = nd->npst < n ? nd->npst : n, ns = 0;
    pair_t *pst = malloc((cs ? cs : 1) * sizeof *pst);
    pair_served_t *psv = malloc((cs ? cs : 1) * sizeof *psv);
    /* The old slots already copied: a name given twice copies its state
     * once, so that it never takes the room of another pair's slot. */
    uint8_t *taken = calloc(nd->npst / 8 + 1, 1);
    int *jof = malloc((c->capb > c->nb ? c->capb : (c->nb ? c->nb : 1)) * sizeof *jof);
    uint8_t *inact = calloc(n ? n : 1, 1);
    uint32_t *act = malloc((n ? n : 1) * sizeof *act);
    if (!tn || !pref || !push || !pst || !psv || !taken || !jof || !inact || !act)
        goto nomem;
    for (size_t j = 0; j < n; j++) {
        /* A configured name is read from the table (ctrl__tname()): only
         * the names the configuration lacks are copied. */
        int b = bucketfile_find(c->bf, names[j]);
        if (b < 0 && !(tn[j] = strdup(names[j])))
            goto nomem;
        /* A bucket the node already had keeps its state. */
        int old = b >= 0 ? ctrl__node_slot(nd, (size_t)b) : -1;
        if (old >= 0) {
            push[j] = nd->push[old];
            int32_t r = nd->pref[old];
            if (r >= 0 && !(taken[r / 8] & (1u << (r % 8)))) {
                /* one per old slot (a name given twice: the first copy
                 * keeps the state, the others start anew) */
                taken[r / 8] |= (uint8_t)(1u << (r % 8));
                pst[ns] = nd->pst[r];
                psv[ns] = nd->psv[r];
                pref[j] = (int32_t)ns++;
            } else
                pref[j] = r >= 0 ? -b - 2 : r;
        } else
            pair_init(&pref[j], &push[j], b);
    }
    free(taken);
    table_free(nd);
    nd->tnames = tn;
    nd->pref = pref;
    nd->pst = pst;
    nd->psv = psv;
    nd->npst = ns;
    nd->cappst = cs ? cs : 1;
    nd->push = push;
    nd->ntable = n;
    nd->captable = n ? n : 1;
    nd->tail_from = n;
    nd->table = table;
    nd->act = act;
    nd->capact = n ? n : 1;
    nd->nact = 0;
    nd->inact = inact;
    for (size_t j = 0; j < n; j++)
        if (ctrl__pair(nd, j)->has_report)
            act_add(nd, j); /* cannot fail: capacity n */
    nd->full_push = 1;
    node_remap(c, c->bf, nd, jof, c->nb);
    c->force = 1;
    return 0;
nomem:
    if (tn)
        for (size_t j = 0; j < n; j++)
            free(tn[j]);
    free(tn);
    free(pref);
    free(push);
    free(pst);
    free(psv);
    free(taken);
    free(inact);
    free(act);
    free(jof);
    return -ENOMEM;
}

/* Grows node nd's per-pair arrays to hold `want` pairs (doubling).
 * Returns 0 or -ENOMEM (nothing lost: each array keeps what it held). */
static int table_room(node_t *nd, size_t want)
{
    if (want <= nd->captable)
        return 0;
    size_t cap = nd->captable ? nd->captable : 1;
    while (cap < want)
        cap *= 2;
    /* tnames is NULL past ntable, in room never written (calloc's): a
     * part's configured names leave it so (ctrl_node_table_part()), and
     * only the copies move here, so that a table of configured names
     * costs no resident byte in it. */
    char **tn = calloc(cap, sizeof *tn);
    if (tn) {
        for (size_t j = 0; j < nd->ntable; j++)
            if (nd->tnames[j])
                tn[j] = nd->tnames[j];
        free(nd->tnames);
        nd->tnames = tn;
    }
    int32_t *pref = tn ? realloc(nd->pref, cap * sizeof *pref) : NULL;
    if (pref)
        nd->pref = pref;
    pair_push_t *push = pref ? realloc(nd->push, cap * sizeof *push) : NULL;
    if (push)
        nd->push = push;
    uint8_t *inact = push ? realloc(nd->inact, cap) : NULL;
    if (!inact)
        return -ENOMEM;
    nd->inact = inact;
    nd->captable = cap;
    return 0;
}

int ctrl_node_table_part(ctrl_t *c, int node, uint32_t table, size_t at,
                         const char *const *names, size_t n)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd || (n && !names) || !table)
        return -EINVAL;
    if (at == 0)
        return ctrl_node_table(c, node, table, names, n);
    if (table != nd->table || at != nd->ntable)
        return -ESTALE;
    if (n > c->nb + (size_t)c->cfg.max_names - nd->ntable || nd->ntable > c->nb + (size_t)c->cfg.max_names)
        return -E2BIG;
    for (size_t k = 0; k < n; k++) { /* nothing appended unless all are new */
        if (!names[k] || proto_name_check(names[k], strlen(names[k])) < 0)
            return -EINVAL;
        int b = bucketfile_find(c->bf, names[k]);
        if (b >= 0 ? ctrl__node_slot(nd, (size_t)b) >= 0 : node_unconf(nd, names[k]) >= 0)
            return -EINVAL; /* a name it already declared */
    }
    if (table_room(nd, nd->ntable + n) < 0)
        return -ENOMEM;
    size_t j0 = nd->ntable;
    for (size_t k = 0; k < n; k++) {
        size_t j = j0 + k;
        int b = bucketfile_find(c->bf, names[k]);
        /* Only a name the configuration lacks is copied (ctrl__tname());
         * tnames[j] is NULL already (table_room()), and left unwritten. */
        if (b < 0 && !(nd->tnames[j] = strdup(names[k]))) {
            for (size_t i = j0; i < j; i++) { /* undo: as if never sent */
                int bi = ctrl__pair_b(nd, i);
                if (bi >= 0)
                    nd->jof[bi] = -1;
                else if (nd->unconf)
                    strmap_remove(nd->unconf, nd->tnames[i], strlen(nd->tnames[i]), NULL);
                free(nd->tnames[i]);
                nd->tnames[i] = NULL; /* NULL past ntable (table_room()) */
            }
            return -ENOMEM;
        }
        pair_init(&nd->pref[j], &nd->push[j], b); /* no slot until a record */
        nd->inact[j] = 0;
        if (b >= 0)
            nd->jof[b] = (int)j;
        else if (nd->unconf &&
                 strmap_insert(nd->unconf, names[k], strlen(names[k]), (int)j) == -ENOMEM)
            strmap_destroy(&nd->unconf); /* node_unconf() scans instead */
    }
    nd->ntable = j0 + n;
    /* No forced computation: the next one computed visits the new pairs
     * (tail_from); until then they hold no tokens from us (fail closed). */
    return 0;
}

int ctrl_node_table_reserve(ctrl_t *c, int node, size_t n)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    size_t most = c->nb + (size_t)c->cfg.max_names;
    return table_room(nd, n < most ? n : most);
}

size_t ctrl_node_table_size(const ctrl_t *c, int node)
{
    const node_t *nd = ctrl__get_node(c, node);
    return nd ? nd->ntable : 0;
}

int ctrl_node_hello(ctrl_t *c, const char *name, uint64_t instance, uint64_t capacity,
                    uint32_t table, const char *const *names, size_t n)
{
    if (!name || proto_name_check(name, strlen(name)) < 0)
        return -EINVAL;
    int idx = node_lookup(c, name);
    if (idx >= 0 && c->nodes[idx].up && c->nodes[idx].instance && instance &&
        c->nodes[idx].instance != instance) {
        c->st.duplicate_names++;
        return -EEXIST;
    }
    if (n > c->nb + (size_t)c->cfg.max_names)
        return -E2BIG;
    if (idx < 0 && (idx = node_slot(c, name)) < 0)
        return idx;
    node_t *nd = &c->nodes[idx];
    nd->forgotten = 0;
    nd->instance = instance;
    nd->leases = 0; /* ctrl_node_set_leases() says */
    double prof = capacity > 0 ? (double)capacity : c->cfg.default_capacity;
    double most = c->cfg.max_profile;
    if (nd->cap.samples + nd->cap.steps > 0 && CTRL_PLAUSIBLE_FACTOR * nd->cap.estimate < most)
        most = CTRL_PLAUSIBLE_FACTOR * nd->cap.estimate; /* its history */
    if (prof > most) {
        plausible_note(c, nd, CTRL_IMPL_CAPACITY, NULL, prof, most);
        prof = most;
    }
    if (!nd->cap.estimate || nd->cap.cfg.profile != prof) {
        estimate_cap_cfg_t cc = estimate_cap_defaults(prof);
        cc.k_sd = c->cfg.cap_sd;
        cc.cold_margin = c->cfg.cap_cold;
        cc.recent = c->cfg.cap_recent;
        estimate_cap_init(&nd->cap, &cc);
    }
    int rc = ctrl_node_table(c, idx, table, names, n);
    if (rc < 0)
        return rc;
    /* Whatever we pushed before is unknown now (a restarted node starts
     * from defaults): push everything next time. */
    for (size_t j = 0; j < nd->ntable; j++)
        nd->push[j].tok_r = -1;
    nd->full_push = 1;
    nd->peer_table = 0;
    if (!nd->up && nd->last_seen >= 0) {
        c->st.nodes_back_up++;
        log_info("node %s is back", nd->name);
    }
    nd->up = 1;
    nd->gone = 0;
    nd->back_period = UINT64_MAX; /* a new process: the old one's tokens died with it */
    nd->last_seen = c->round_no;
    c->force = 1;
    return idx;
}

int ctrl_node_set_leases(ctrl_t *c, int node, int leases)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    nd->leases = leases != 0;
    return 0;
}

int ctrl_node_seen(ctrl_t *c, int node, uint32_t peer_table)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    nd->last_seen = c->round_no;
    if (peer_table)
        nd->peer_table = peer_table;
    if (!nd->up) {
        nd->up = 1;
        if (!nd->gone)
            nd->back_period = c->period;
        nd->gone = 0;
        c->st.nodes_back_up++;
        c->force = 1;
        for (size_t j = 0; j < nd->ntable; j++)
            nd->push[j].tok_r = -1;
        nd->full_push = 1;
        log_info("node %s is back", nd->name);
    }
    return 0;
}

int ctrl_node_goodbye(ctrl_t *c, int node)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    if (!nd->gone)
        c->force = 1; /* what it was granted is free again */
    nd->gone = 1;
    if (nd->up) {
        nd->up = 0;
        nd->nout = 0;
        c->st.nodes_marked_down++;
        c->force = 1;
        log_info("node %s said goodbye: down", nd->name);
    }
    return 0;
}

void ctrl_forget_pushed(ctrl_t *c)
{
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        for (size_t j = 0; j < nd->ntable; j++)
            nd->push[j].tok_r = -1;
        nd->full_push = 1;
        nd->peer_table = 0;
    }
    c->force = 1;
}

uint32_t ctrl_node_table_gen(const ctrl_t *c, int node)
{
    const node_t *nd = ctrl__get_node(c, node);
    return nd ? nd->table : 0;
}

int ctrl_node_up(const ctrl_t *c, int node)
{
    const node_t *nd = ctrl__get_node(c, node);
    return nd && nd->up;
}

int ctrl_node_needs_names(const ctrl_t *c, int node)
{
    const node_t *nd = ctrl__get_node(c, node);
    return nd && nd->peer_table != c->table_gen;
}

int ctrl_node_reported(const ctrl_t *c, int node)
{
    const node_t *nd = ctrl__get_node(c, node);
    if (!nd || !nd->have_rep)
        return 0;
    return nd->rep_period > c->period ||
           (nd->rep_period == c->period && nd->rep_interval >= c->interval);
}

int ctrl_node_set_sparse(ctrl_t *c, int node, int sparse)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    nd->sparse = sparse != 0;
    return 0;
}

static int node_report(ctrl_t *c, int node, uint64_t period, uint32_t interval, uint32_t table,
                       uint32_t peer_table, uint64_t completions, double busy_seconds,
                       const proto_report_rec_t *recs, size_t n, int sparse);

int ctrl_node_report(ctrl_t *c, int node, uint64_t period, uint32_t interval, uint32_t table,
                     uint32_t peer_table, uint64_t completions, double busy_seconds,
                     const proto_report_rec_t *recs, size_t n)
{
    return node_report(c, node, period, interval, table, peer_table, completions, busy_seconds,
                       recs, n, 0);
}

int ctrl_node_report_sparse(ctrl_t *c, int node, uint64_t period, uint32_t interval,
                            uint32_t table, uint32_t peer_table, uint64_t completions,
                            double busy_seconds, const proto_report_rec_t *recs, size_t n)
{
    return node_report(c, node, period, interval, table, peer_table, completions, busy_seconds,
                       recs, n, 1);
}

int ctrl_node_inflight(ctrl_t *c, int node, uint32_t table, uint64_t base_us,
                       const proto_share_rec_t *recs, size_t n)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd || (n && !recs))
        return -EINVAL;
    if (table != nd->table)
        return -ESTALE;
    for (size_t i = 0; i < n; i++)
        if (recs[i].bucket >= nd->ntable || recs[i].tokens < 1)
            return -EINVAL;
    if (ctrl__pairs_reserve(nd, n) < 0)
        return -ENOMEM;
    if (base_us > 0 && base_us <= PROTO_BASE_US_MAX)
        nd->base_s = (double)base_us * 1e-6;
    for (size_t i = 0; i < n; i++)
        ctrl__pair_slot(nd, recs[i].bucket)->inflight =
            recs[i].tokens > UINT32_MAX ? UINT32_MAX : (uint32_t)recs[i].tokens;
    return 0;
}

/* Bucket b was reported served for `period`, after the current one
 * (ctrl_touched_buckets()).  Out of memory, the loss is noted. */
static void note_ahead(ctrl_t *c, int b, uint64_t period)
{
    if (c->nahead && c->ahead[c->nahead - 1].b == b && c->ahead[c->nahead - 1].period == period)
        return;
    if (c->nahead == c->capahead) {
        struct ctrl_ahead *a = grow(c->ahead, &c->capahead, sizeof *a, 16);
        if (!a) {
            if (period + 1 > c->ahead_lost)
                c->ahead_lost = period + 1;
            return;
        }
        c->ahead = a;
    }
    c->ahead[c->nahead++] = (struct ctrl_ahead){b, period};
}

int ctrl_touched_buckets(const ctrl_t *c, void (*fn)(void *arg, int b), void *arg)
{
    if (c->ahead_lost)
        return -ENOMEM;
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        for (size_t k = 0; k < nd->nact; k++) {
            int b = ctrl__pair_b(nd, nd->act[k]);
            if (b >= 0)
                fn(arg, b);
        }
    }
    for (size_t k = 0; k < c->nahead; k++)
        if ((size_t)c->ahead[k].b < c->nb)
            fn(arg, c->ahead[k].b);
    return 0;
}

static int node_report(ctrl_t *c, int node, uint64_t period, uint32_t interval, uint32_t table,
                       uint32_t peer_table, uint64_t completions, double busy_seconds,
                       const proto_report_rec_t *recs, size_t n, int sparse)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    ctrl_node_seen(c, node, peer_table);
    if (table != nd->table)
        return -ESTALE;
    c->st.reports++;
    /* Only the current period, or the next one (a node whose timer fired a
     * little before ours), carries counters we can use. */
    if (c->started && period != c->period && period != c->period + 1) {
        c->st.stale_reports++;
        return 0;
    }
    /* Each record's pair gets its slot (ctrl__pair_slot()): the room first,
     * so that nothing below fails for it. */
    if (ctrl__pairs_reserve(nd, n) < 0)
        return -ENOMEM;
    double interval_s = c->cfg.period_s / c->cfg.intervals;
    double rate = plausible_rate(nd), per = rate * c->cfg.period_s;
    uint64_t ub = per < (double)CTRL_COUNT_MAX ? (uint64_t)per : (uint64_t)CTRL_COUNT_MAX;
    if (nd->have_rep && nd->rep_period == period && interval == nd->rep_interval + 1 &&
        completions >= nd->completions && busy_seconds >= nd->busy) {
        double done = (double)(completions - nd->completions), most = rate * interval_s;
        if (done > most) {
            plausible_note(c, nd, CTRL_IMPL_CAPACITY, NULL, done, most);
            done = most;
        }
        estimate_cap_update(&nd->cap, (uint64_t)done, busy_seconds - nd->busy, interval_s);
    }
    if (!nd->have_rep || period > nd->rep_period ||
        (period == nd->rep_period && interval >= nd->rep_interval)) {
        nd->have_rep = 1;
        nd->rep_period = period;
        nd->rep_interval = interval;
        nd->completions = completions;
        nd->busy = busy_seconds;
    }
    for (size_t i = 0; i < n; i++) {
        const proto_report_rec_t *r = &recs[i];
        if (r->bucket >= nd->ntable) {
            unmark(nd);
            return -EINVAL;
        }
        /* Ahead of use: the pair's slot number and push record, then its
         * slot, then its bucket's limit (plausible_report_rec()). */
        if (i + PAIR_AHEAD < n && recs[i + PAIR_AHEAD].bucket < nd->ntable) {
            __builtin_prefetch(&nd->pref[recs[i + PAIR_AHEAD].bucket], 0);
            ctrl__prefetch(&nd->push[recs[i + PAIR_AHEAD].bucket], sizeof(pair_push_t));
        }
        if (i + PAIR_AHEAD * 3 / 4 < n && recs[i + PAIR_AHEAD * 3 / 4].bucket < nd->ntable) {
            int32_t ar = nd->pref[recs[i + PAIR_AHEAD * 3 / 4].bucket];
            if (ar >= 0) {
                ctrl__prefetch(&nd->pst[ar], sizeof(pair_t));
                __builtin_prefetch(&nd->psv[ar], 1);
            }
        }
        if (i + PAIR_AHEAD / 2 < n && recs[i + PAIR_AHEAD / 2].bucket < nd->ntable) {
            int ab = ctrl__pair_b(nd, recs[i + PAIR_AHEAD / 2].bucket);
            if (ab >= 0)
                __builtin_prefetch(&c->b[ab].l, 0);
        }
        pair_t *p = ctrl__pair_slot(nd, r->bucket); /* room reserved above */
        if (p->bk < 0) {
            /* Not configured: nothing to plan, but the status shows it;
             * a template's name becomes a dynamic bucket (ctrl_tmpl.c). */
            c->st.unknown_records++;
            if (r->arrivals_period || r->queued)
                ctrl__dyn_note(c, ctrl__tname(c, nd, r->bucket));
            nd->psv[nd->pref[r->bucket]] = (pair_served_t){r->served_r, r->served_l, r->served_o,
                                                           r->arrivals_period};
            p->period = period; /* has_report stays 0: no computation reads it */
            continue;
        }
        if (p->has_report && p->period != UINT64_MAX && period < p->period)
            continue; /* older than what we hold */
        if (r->arrivals_period || r->queued || r->served_r || r->served_l || r->served_o)
            ctrl__dyn_touch(c, p->bk);
        plausible_report_rec(c, nd, p, r, period, ub);
        if (period > c->period && p->served > 0)
            note_ahead(c, p->bk, period);
        p->throttled = r->r_left <= 0 && r->l_left <= 0;
        p->period = period;
        p->bserved = (uint64_t)p->served;
        p->bperiod = period;
        p->binterval = interval;
        p->has_report = 1;
        if (act_add(nd, r->bucket) < 0) {
            unmark(nd);
            return -ENOMEM;
        }
        if (!sparse)
            nd->inact[r->bucket] |= INACT_REPORTED;
    }
    /* A sparse report's absent pairs are carried on by the computation
     * (ctrl__pair_carry()), from their last record to the node's newest
     * report (a late report moves nothing on): O(records) here. */
    if (sparse)
        return 0;
    if (!sparse)
        absent_base(nd, period, interval);
    absent_idle(nd, period);
    return 0;
}

int ctrl_round_begin(ctrl_t *c, uint64_t period, uint32_t interval, double left)
{
    if (interval >= (uint32_t)c->cfg.intervals)
        return -EINVAL;
    if (!c->started || period != c->period) {
        c->force = 1;
        c->lost = 0;
        c->lost_open = 1;
        size_t keep = 0; /* reports ahead of a period not yet passed */
        for (size_t k = 0; k < c->nahead; k++)
            if (c->ahead[k].period >= period)
                c->ahead[keep++] = c->ahead[k];
        c->nahead = keep;
        if (c->ahead_lost && period >= c->ahead_lost)
            c->ahead_lost = 0; /* the period it was of has passed */
    }
    c->started = 1;
    c->period = period;
    c->interval = interval;
    if (!(left > 0) || left > 1)
        left = (double)(c->cfg.intervals - (int)interval) / c->cfg.intervals;
    c->left = left;
    c->round_no++;
    c->st.rounds++;
    return 0;
}

void ctrl_round_late(ctrl_t *c, double seconds)
{
    if (!c->lost_open || !(seconds > 0))
        return;
    double f = seconds / c->cfg.period_s, iv = 1.0 / c->cfg.intervals;
    c->lost = f < iv ? f : iv;
}

uint64_t ctrl_period(const ctrl_t *c)
{
    return c->period;
}

uint32_t ctrl_interval(const ctrl_t *c)
{
    return c->interval;
}

int ctrl_nbuckets(const ctrl_t *c)
{
    return (int)c->nb;
}

int ctrl_bucket_find(const ctrl_t *c, const char *name)
{
    return bucketfile_find(c->bf, name);
}

int ctrl_nested(const ctrl_t *c)
{
    return c->tree != NULL;
}

int ctrl_bucket_nesting(const ctrl_t *c, int b, const char **parent, int *children)
{
    const char *p = NULL;
    int k = 0;
    if (c->tree && b >= 0 && (size_t)b < c->nb) {
        const bucketfile_bucket_t *x = bucketfile_get(c->bf, (size_t)b);
        p = bucketfile_has_parent(x) ? x->parent_name : NULL;
        k = tree_nchildren(c->tree, (size_t)b);
    }
    if (parent)
        *parent = p;
    if (children)
        *children = k;
    return p || k;
}

/* A parent's figures (nested buckets): the sums of its children's. */
static void parent_info(const ctrl_t *c, int b, ctrl_bucket_info_t *out)
{
    int unl = 0, unl_b = 0;
    for (int k = 0; k < out->children; k++) {
        ctrl_bucket_info_t ci;
        if (ctrl_bucket_info(c, tree_child(c->tree, (size_t)b, k), &ci) < 0)
            continue;
        out->served_r = count_uadd(out->served_r, ci.served_r);
        out->served_l = count_uadd(out->served_l, ci.served_l);
        out->served_o = count_uadd(out->served_o, ci.served_o);
        out->queued = count_uadd(out->queued, ci.queued);
        out->demand = count_add(out->demand, ci.demand);
        out->servers = ci.servers > out->servers ? ci.servers : out->servers;
        out->r_tokens = count_add(out->r_tokens, ci.r_tokens);
        unl |= ci.l_tokens == CTRL_UNLIMITED;
        out->l_tokens = unl ? CTRL_UNLIMITED : count_add(out->l_tokens, ci.l_tokens);
        out->served_bytes = count_uadd(out->served_bytes, ci.served_bytes);
        out->r_bytes = count_add(out->r_bytes, ci.r_bytes);
        unl_b |= ci.l_bytes == CTRL_UNLIMITED;
        out->l_bytes = unl_b ? CTRL_UNLIMITED : count_add(out->l_bytes, ci.l_bytes);
    }
}

int ctrl_bucket_info(const ctrl_t *c, int b, ctrl_bucket_info_t *out)
{
    if (b < 0 || (size_t)b >= c->nb)
        return -EINVAL;
    const bucketfile_bucket_t *x = bucketfile_get(c->bf, (size_t)b);
    memset(out, 0, sizeof *out);
    out->parent = bucketfile_has_parent(x) ? x->parent_name : NULL;
    out->children = tree_nchildren(c->tree, (size_t)b);
    out->name = x->name;
    out->reservation = x->reservation;
    out->limit = x->limit;
    out->weight = x->weight;
    out->reservation_bytes = x->reservation_bytes;
    out->limit_bytes = x->limit_bytes;
    out->shadow = x->shadow;
    if (out->children > 0) { /* no queue of its own */
        parent_info(c, b, out);
        return 0;
    }
    const bytes_view_t v = ctrl__bytes_view(c);
    bytes_info(c->by, &v, b, out);
    int unl = c->b[b].l == CTRL_UNLIMITED;
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        int j = ctrl__node_slot(nd, (size_t)b);
        if (j < 0)
            continue;
        ctrl__bucket_add_pair(c, nd, (size_t)j, unl, out);
    }
    if (unl)
        out->l_tokens = CTRL_UNLIMITED;
    return 0;
}

int ctrl_pair_info(const ctrl_t *c, int n, int b, ctrl_pair_info_t *out)
{
    const node_t *nd = ctrl__get_node(c, n);
    if (!nd || b < 0 || (size_t)b >= c->nb)
        return -EINVAL;
    int j = ctrl__node_slot(nd, (size_t)b);
    if (j < 0)
        return -ENOENT;
    pair_t pc = *ctrl__pair(nd, (size_t)j);
    pair_served_t sv = ctrl__pair_served(nd, (size_t)j);
    pc.bk = b;
    ctrl__pair_carry_to(nd, &pc, &sv); /* a sparse node's pair, as of its newest report */
    const pair_t *p = &pc;
    const pair_push_t *ps = &nd->push[j];
    int unl = c->b[b].l == CTRL_UNLIMITED;
    *out = (ctrl_pair_info_t){
        .reported = p->has_report && p->period == c->period,
        .queued = p->has_report ? p->queued : 0,
        .demand = p->demand,
        .r_tokens = ps->tok_r < 0 ? -1 : ps->tok_r,
        .l_tokens = unl || ps->tok_l == CTRL_UNLIMITED ? CTRL_UNLIMITED
                    : ps->tok_r < 0                   ? 0
                                                      : ps->tok_l,
    };
    if (out->reported) {
        out->served_r = sv.r;
        out->served_l = sv.l;
        out->served_o = sv.o;
    }
    return 0;
}

int ctrl_node_info(const ctrl_t *c, int n, ctrl_node_info_t *out)
{
    const node_t *nd = ctrl__get_node(c, n);
    if (!nd)
        return -EINVAL;
    *out = (ctrl_node_info_t){
        .name = nd->name,
        .up = nd->up,
        .rounds_silent = nd->last_seen < 0 ? -1 : c->round_no - nd->last_seen,
        .capacity = nd->cap.estimate,
        .conservative = nd->cap.conservative,
        .profile = nd->cap.cfg.profile,
        .buckets = nd->ntable,
        .pairs_held = nd->npst,
        .instance = nd->instance,
        .period = nd->rep_period,
        .interval = nd->rep_interval,
        .byte_capacity = bytes_capacity(c->by, n),
    };
    return 0;
}

const ctrl_stats_t *ctrl_stats(const ctrl_t *c)
{
    return &c->st;
}

static int unconf_busier(const void *x, const void *y)
{
    const ctrl_unconf_t *a = x, *b = y;
    if (a->arrivals != b->arrivals)
        return a->arrivals > b->arrivals ? -1 : 1;
    return strcmp(a->name, b->name);
}

int ctrl_unconfigured(const ctrl_t *c, ctrl_unconf_t *out, size_t max, ctrl_unconf_t *rest)
{
    int rc = -ENOMEM;
    size_t n = 0, cap = 0;
    ctrl_unconf_t *all = NULL;
    strmap_t *ix = strmap_new();
    if (!ix)
        goto out;
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        for (size_t j = 0; j < nd->ntable; j++) {
            const pair_t *p = ctrl__pair(nd, j);
            if (ctrl__pair_b(nd, j) >= 0 || p->period != c->period)
                continue;
            const pair_served_t *sv = &nd->psv[nd->pref[j]]; /* period written: a slot */
            const char *name = ctrl__tname(c, nd, j);
            int k;
            if (strmap_find(ix, name, strlen(name), &k) < 0) {
                if (n == cap) {
                    ctrl_unconf_t *v = grow(all, &cap, sizeof *v, 16);
                    if (!v)
                        goto out;
                    all = v;
                }
                if (strmap_insert(ix, name, strlen(name), (int)n) < 0)
                    goto out;
                k = (int)n;
                all[n++] = (ctrl_unconf_t){.name = name};
            }
            all[k].arrivals = count_uadd(all[k].arrivals, sv->arrivals);
            all[k].served = count_uadd(
                all[k].served, count_uadd(count_uadd(sv->r, sv->l), sv->o));
            all[k].nodes++;
        }
    }
    if (n > 1)
        qsort(all, n, sizeof *all, unconf_busier);
    *rest = (ctrl_unconf_t){.name = "(other)"};
    size_t w = n < max ? n : max;
    for (size_t k = 0; k < n; k++) {
        if (k < w) {
            out[k] = all[k];
            continue;
        }
        rest->arrivals = count_uadd(rest->arrivals, all[k].arrivals);
        rest->served = count_uadd(rest->served, all[k].served);
        rest->nodes++;
    }
    rc = (int)w;
out:
    strmap_destroy(&ix);
    free(all);
    return rc;
}

/* ---- the bytes/s dimension (bytes.h) ------------------------------------- */

/* bytes_view_t.node and .pair over c's nodes, their tables and last
 * reports. */
static void view_node(const void *arg, int i, bytes_node_t *out)
{
    const ctrl_t *c = arg;
    const node_t *nd = &c->nodes[i];
    *out = (bytes_node_t){.up = nd->up != 0, .holds = (uint8_t)ctrl__holds_grants(c, nd),
                          .down_rep = nd->down_rep};
}

static int view_pair(const void *arg, int i, size_t b)
{
    const node_t *nd = &((const ctrl_t *)arg)->nodes[i];
    int j = ctrl__node_slot(nd, b);
    return j < 0 ? -1 : ctrl__pair(nd, (size_t)j)->queued > 0;
}

bytes_view_t ctrl__bytes_view(const ctrl_t *c)
{
    return (bytes_view_t){.nn = c->nn, .period = c->period, .node = view_node,
                          .pair = view_pair, .arg = c};
}

int ctrl_node_report_bytes(ctrl_t *c, int node, uint64_t period, uint64_t served_bytes,
                           double busy_seconds, const proto_report_bytes_t *recs, size_t n)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    if (!c->by)
        return 0; /* no bucket has a byte rate: nothing to keep */
    int rc = bytes_report(c->by, node, period, served_bytes, busy_seconds);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const proto_report_bytes_t *r = &recs[i];
        if (r->bucket >= nd->ntable)
            return -EINVAL;
        rc = bytes_report_rec(c->by, node, ctrl__pair_b(nd, r->bucket), period, r->arrivals_interval,
                              r->served);
    }
    return rc;
}

size_t ctrl_node_tokens_bytes(const ctrl_t *c, int node, const proto_tokens_bytes_t **recs)
{
    const node_t *nd = ctrl__get_node(c, node);
    return bytes_tokens(nd && nd->up ? c->by : NULL, node, recs);
}
