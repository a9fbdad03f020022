/* strmap.c - string -> int open-addressing hash map with backward-shift deletion. */
#include "common/strmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/hashmix.h"

#define MIN_SLOTS 16

/* An empty slot has key == NULL.  16 bytes: a map of a million names
 * (2^21 slots at 3/4 load) is 32 MB, not 64 (issue 26: memory per bucket);
 * the key's length sits in its own allocation, just before it. */
typedef struct {
    char *key;     /* owned copy, NUL-terminated, after its length (klen()) */
    uint32_t hash; /* the low 32 bits of hash_bytes() */
    int val;
} slot_t;

/* The length of key copy k (stored in the 4 bytes before it). */
static size_t klen(const char *k)
{
    uint32_t n;
    memcpy(&n, k - sizeof n, sizeof n);
    return n;
}

/* Frees key copy k (NULL: nothing). */
static void kfree(char *k)
{
    if (k)
        free(k - sizeof(uint32_t));
}

struct strmap {
    slot_t *slots;
    size_t mask;  /* number of slots - 1 (a power of two) */
    size_t count;
};

/* FNV-1a followed by hashmix64() (MurmurHash3's finaliser), so that the low
 * bits used for the slot index depend on every byte. */
static uint64_t hash_bytes(const char *key, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= UINT64_C(1099511628211);
    }
    return hashmix64(h);
}

strmap_t *strmap_new(void)
{
    strmap_t *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->slots = calloc(MIN_SLOTS, sizeof(slot_t));
    if (!m->slots) {
        free(m);
        return NULL;
    }
    m->mask = MIN_SLOTS - 1;
    return m;
}

void strmap_destroy(strmap_t **mp)
{
    if (!mp || !*mp)
        return;
    strmap_t *m = *mp;
    for (size_t i = 0; i <= m->mask; i++)
        kfree(m->slots[i].key);
    free(m->slots);
    free(m);
    *mp = NULL;
}

size_t strmap_count(const strmap_t *m)
{
    return m->count;
}

/* Returns the slot holding the key, or the empty slot where it would go. */
static size_t probe(const strmap_t *m, const char *key, size_t len, uint32_t h)
{
    size_t i = (size_t)h & m->mask;
    for (;;) {
        const slot_t *s = &m->slots[i];
        if (!s->key)
            return i;
        if (s->hash == h && klen(s->key) == len && memcmp(s->key, key, len) == 0)
            return i;
        i = (i + 1) & m->mask;
    }
}

/* Doubles the table.  Returns 0 or -ENOMEM (table unchanged). */
static int grow(strmap_t *m)
{
    size_t nslots = (m->mask + 1) * 2;
    if (nslots == 0 || nslots > SIZE_MAX / sizeof(slot_t))
        return -ENOMEM;
    slot_t *ns = calloc(nslots, sizeof(slot_t));
    if (!ns)
        return -ENOMEM;
    for (size_t i = 0; i <= m->mask; i++) {
        slot_t *s = &m->slots[i];
        if (!s->key)
            continue;
        size_t j = (size_t)s->hash & (nslots - 1);
        while (ns[j].key)
            j = (j + 1) & (nslots - 1);
        ns[j] = *s;
    }
    free(m->slots);
    m->slots = ns;
    m->mask = nslots - 1;
    return 0;
}

int strmap_find(const strmap_t *m, const char *key, size_t len, int *val)
{
    if (!key && len > 0)
        return -ENOENT;
    if (!key)
        key = ""; /* memcmp() must not see NULL, even for 0 bytes */
    const slot_t *s = &m->slots[probe(m, key, len, (uint32_t)hash_bytes(key, len))];
    if (!s->key)
        return -ENOENT;
    if (val)
        *val = s->val;
    return 0;
}

const char *strmap_key(const strmap_t *m, const char *key, size_t len)
{
    if (!key && len > 0)
        return NULL;
    if (!key)
        key = "";
    return m->slots[probe(m, key, len, (uint32_t)hash_bytes(key, len))].key;
}

/* Shared by insert and set: `replace` says what to do with a present key. */
static int put(strmap_t *m, const char *key, size_t len, int val, int replace)
{
    if (!key && len > 0)
        return -EINVAL;
    if (!key)
        key = "";
    if (len > UINT32_MAX - 8)
        return -ENOMEM;
    uint32_t h = (uint32_t)hash_bytes(key, len);
    size_t i = probe(m, key, len, h);
    if (m->slots[i].key) {
        if (!replace)
            return -EEXIST;
        m->slots[i].val = val;
        return 0;
    }
    /* Keep the load factor at or below 3/4. */
    if ((m->count + 1) * 4 > (m->mask + 1) * 3) {
        if (grow(m) < 0)
            return -ENOMEM;
        i = probe(m, key, len, h);
    }
    uint32_t n = (uint32_t)len;
    char *mem = malloc(sizeof n + len + 1);
    if (!mem)
        return -ENOMEM;
    memcpy(mem, &n, sizeof n);
    char *copy = mem + sizeof n;
    if (len)
        memcpy(copy, key, len);
    copy[len] = '\0';
    m->slots[i] = (slot_t){.key = copy, .hash = h, .val = val};
    m->count++;
    return 0;
}

int strmap_insert(strmap_t *m, const char *key, size_t len, int val)
{
    return put(m, key, len, val, 0);
}

int strmap_set(strmap_t *m, const char *key, size_t len, int val)
{
    return put(m, key, len, val, 1);
}

int strmap_remove(strmap_t *m, const char *key, size_t len, int *val)
{
    if (!key && len > 0)
        return -ENOENT;
    if (!key)
        key = "";
    size_t i = probe(m, key, len, (uint32_t)hash_bytes(key, len));
    if (!m->slots[i].key)
        return -ENOENT;
    if (val)
        *val = m->slots[i].val;
    kfree(m->slots[i].key);
    m->count--;
    /* Backward-shift: pull later entries of the probe run into the hole when
     * their home slot is not inside (hole, j], so every remaining key stays
     * reachable from its home without tombstones. */
    size_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        slot_t *s = &m->slots[j];
        if (!s->key)
            break;
        size_t home = (size_t)s->hash & m->mask;
        /* Distance from home to j vs. from hole to j, cyclically. */
        if (((j - home) & m->mask) >= ((j - hole) & m->mask)) {
            m->slots[hole] = *s;
            hole = j;
        }
    }
    m->slots[hole] = (slot_t){0};
    return 0;
}

void strmap_foreach(const strmap_t *m,
                    void (*fn)(const char *key, size_t len, int val, void *arg),
                    void *arg)
{
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].key)
            fn(m->slots[i].key, klen(m->slots[i].key), m->slots[i].val, arg);
}
