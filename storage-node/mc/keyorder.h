/* keyorder.h - same-key ordering on one memcached connection: the newest
 * unfinished IO of each key, and the IO of the same key waiting behind it.
 *
 * memcached runs one connection's commands in order, so a pipelined
 * "set k; get k" reads its own write.  The front runs IOs of different keys
 * concurrently (batches, workers); to keep that guarantee, a later IO of a
 * key with an unfinished IO becomes the earlier one's waiter and enters the
 * scheduler only once it is finished.
 *
 * Entries are intrusive: embed a keyorder_entry_t in each IO; the table
 * holds pointers only.  Threads: a table belongs to its connection, on the
 * loop thread; nothing here locks. */
#ifndef BQOS_KEYORDER_H
#define BQOS_KEYORDER_H

#include <stddef.h>

typedef struct keyorder_entry {
    const char *key;               /* set by keyorder_register(); the IO's */
    size_t keylen;
    struct keyorder_entry *hnext;  /* table chain (the table's) */
    struct keyorder_entry *waiter; /* the next IO of this key, or NULL */
    unsigned chain;                /* its chain, while in_tab is 1 */
    int in_tab;                    /* 0: not registered, 1: in a chain, 2: the table's `only` */
} keyorder_entry_t;

/* One connection's table; zero it to start ({0}), free with
 * keyorder_free().  The usual case, one unfinished IO per connection,
 * hashes nothing: a lone IO is held as `only`, and moves into the chains
 * (allocated on first use) when a second one comes. */
typedef struct {
    keyorder_entry_t **chains;
    keyorder_entry_t *only;        /* the one entry while the chains hold none */
    int n;                         /* entries in the chains */
} keyorder_t;

/* Registers e (key `key`, `keylen` bytes, caller-owned and alive while e is
 * registered) as the newest unfinished IO of its key.  Returns 1 if an
 * earlier one exists (e is now its waiter and must not run yet), 0 if e
 * may run now, or -ENOMEM. */
int keyorder_register(keyorder_t *t, keyorder_entry_t *e, const char *key, size_t keylen);

/* e is finished: drops it from the table and returns its waiter (now free
 * to run; it stays registered as the newest IO of the key), or NULL. */
keyorder_entry_t *keyorder_finish(keyorder_t *t, keyorder_entry_t *e);

/* Forgets e's links without touching the table (its connection is going
 * away with the table). */
void keyorder_forget(keyorder_entry_t *e);

/* Frees the chains (not the entries). */
void keyorder_free(keyorder_t *t);

#endif
