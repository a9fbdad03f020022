/* keyorder.c - same-key ordering on one memcached connection (see keyorder.h). */
#include "storage-node/mc/keyorder.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHAINS 256 /* per connection */

static unsigned key_hash(const char *k, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h & (CHAINS - 1);
}

static int same_key(const keyorder_entry_t *a, const keyorder_entry_t *b)
{
    return a->keylen == b->keylen && memcmp(a->key, b->key, a->keylen) == 0;
}

/* Puts e (no earlier IO of its key in the chains) at the head of its chain. */
static void chain_insert(keyorder_t *t, keyorder_entry_t *e)
{
    e->chain = key_hash(e->key, e->keylen);
    e->hnext = t->chains[e->chain];
    t->chains[e->chain] = e;
    e->in_tab = 1;
    t->n++;
}

int keyorder_register(keyorder_t *t, keyorder_entry_t *e, const char *key, size_t keylen)
{
    e->key = key;
    e->keylen = keylen;
    if (!t->only && t->n == 0) { /* alone: nothing to look up or hash */
        e->hnext = NULL;
        e->in_tab = 2;
        t->only = e;
        return 0;
    }
    if (!t->chains) {
        t->chains = calloc(CHAINS, sizeof *t->chains);
        if (!t->chains)
            return -ENOMEM;
    }
    if (t->only) { /* a second one: the first goes where lookups find it */
        chain_insert(t, t->only);
        t->only = NULL;
    }
    unsigned h = key_hash(key, keylen);
    keyorder_entry_t **pp = &t->chains[h];
    for (; *pp; pp = &(*pp)->hnext) {
        keyorder_entry_t *o = *pp;
        if (!same_key(o, e))
            continue;
        o->waiter = e;
        o->in_tab = 0;
        e->hnext = o->hnext;
        o->hnext = NULL;
        *pp = e;
        e->chain = h;
        e->in_tab = 1;
        return 1;
    }
    e->hnext = NULL;
    *pp = e;
    e->chain = h;
    e->in_tab = 1;
    t->n++;
    return 0;
}

keyorder_entry_t *keyorder_finish(keyorder_t *t, keyorder_entry_t *e)
{
    if (e->in_tab == 2 && t->only == e) {
        t->only = NULL;
    } else if (e->in_tab == 1 && t->chains) {
        keyorder_entry_t **pp = &t->chains[e->chain];
        while (*pp && *pp != e)
            pp = &(*pp)->hnext;
        if (*pp) {
            *pp = e->hnext;
            t->n--;
        }
    }
    e->in_tab = 0;
    e->hnext = NULL;
    keyorder_entry_t *w = e->waiter;
    e->waiter = NULL;
    return w;
}

void keyorder_forget(keyorder_entry_t *e)
{
    e->waiter = NULL;
    e->hnext = NULL;
    e->in_tab = 0;
}

void keyorder_free(keyorder_t *t)
{
    free(t->chains);
    t->chains = NULL;
    t->only = NULL;
    t->n = 0;
}
