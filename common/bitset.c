/* bitset.c - hierarchical bitmap with O(log64 n) find-next-set, for ready lists. */
#include "common/bitset.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 64^6 = 2^36 > 2^31 bits: six levels always end in a single top word. */
#define MAXLEV 6
#define MAXBITS ((size_t)1 << 31)

struct bitset {
    size_t nbits;
    int nlev;
    size_t nwords[MAXLEV];
    uint64_t *lv[MAXLEV]; /* lv[0] owns the single allocation of all levels */
};

/* Lays out the levels for nbits into b (nbits, nlev, nwords) and returns the
 * total word count.  Level 0 has at least one word so that the top level is
 * always exactly one word, even for an empty set. */
static size_t layout(struct bitset *b, size_t nbits)
{
    size_t total = 0, words = (nbits + 63) / 64;
    if (words == 0)
        words = 1;
    b->nbits = nbits;
    b->nlev = 0;
    for (;;) {
        b->nwords[b->nlev++] = words;
        total += words;
        if (words == 1)
            break;
        words = (words + 63) / 64;
    }
    return total;
}

static int alloc_levels(struct bitset *b, size_t nbits)
{
    size_t total = layout(b, nbits);
    uint64_t *w = calloc(total, sizeof(*w));
    if (!w)
        return -ENOMEM;
    for (int k = 0; k < b->nlev; k++) {
        b->lv[k] = w;
        w += b->nwords[k];
    }
    return 0;
}

bitset_t *bitset_new(size_t nbits)
{
    if (nbits > MAXBITS)
        return NULL;
    bitset_t *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    if (alloc_levels(b, nbits) < 0) {
        free(b);
        return NULL;
    }
    return b;
}

void bitset_destroy(bitset_t **bp)
{
    if (!bp || !*bp)
        return;
    free((*bp)->lv[0]);
    free(*bp);
    *bp = NULL;
}

int bitset_resize(bitset_t *b, size_t nbits)
{
    if (nbits > MAXBITS)
        return -EINVAL;
    struct bitset nb;
    if (alloc_levels(&nb, nbits) < 0)
        return -ENOMEM;
    size_t keep = b->nwords[0] < nb.nwords[0] ? b->nwords[0] : nb.nwords[0];
    memcpy(nb.lv[0], b->lv[0], keep * sizeof(uint64_t));
    if (nbits < b->nbits && (nbits & 63))
        nb.lv[0][nbits >> 6] &= ~(~UINT64_C(0) << (nbits & 63));
    if (nbits < b->nbits && nbits == 0)
        nb.lv[0][0] = 0;
    /* Rebuild the summary levels from the words below. */
    for (int k = 1; k < nb.nlev; k++)
        for (size_t w = 0; w < nb.nwords[k - 1]; w++)
            if (nb.lv[k - 1][w])
                nb.lv[k][w >> 6] |= UINT64_C(1) << (w & 63);
    free(b->lv[0]);
    *b = nb;
    return 0;
}

size_t bitset_size(const bitset_t *b)
{
    return b->nbits;
}

void bitset_set(bitset_t *b, size_t i)
{
    if (i >= b->nbits)
        return;
    for (int k = 0; k < b->nlev; k++) {
        size_t w = i >> 6;
        uint64_t old = b->lv[k][w];
        b->lv[k][w] = old | (UINT64_C(1) << (i & 63));
        if (old)
            break; /* the level above already knows this word is nonzero */
        i = w;
    }
}

void bitset_clear(bitset_t *b, size_t i)
{
    if (i >= b->nbits)
        return;
    for (int k = 0; k < b->nlev; k++) {
        size_t w = i >> 6;
        b->lv[k][w] &= ~(UINT64_C(1) << (i & 63));
        if (b->lv[k][w])
            break; /* word still nonzero: the levels above stay as they are */
        i = w;
    }
}

int bitset_test(const bitset_t *b, size_t i)
{
    if (i >= b->nbits)
        return 0;
    return (int)((b->lv[0][i >> 6] >> (i & 63)) & 1);
}

int bitset_any(const bitset_t *b)
{
    return b->lv[b->nlev - 1][0] != 0;
}

long bitset_next(const bitset_t *b, size_t from)
{
    if (from >= b->nbits)
        return -1;
    size_t p = from;
    int k = 0;
    /* Climb: look for a set bit at or after p in p's word at level k; if there
     * is none, the candidate is the next word, i.e. bit w+1 one level up. */
    for (;;) {
        size_t w = p >> 6;
        uint64_t m = b->lv[k][w] & (~UINT64_C(0) << (p & 63));
        if (m) {
            p = (w << 6) + (size_t)__builtin_ctzll(m);
            break;
        }
        if (k == b->nlev - 1 || w + 1 >= b->nwords[k])
            return -1;
        p = w + 1;
        k++;
    }
    /* Descend: each set summary bit names a nonzero word below. */
    while (k > 0) {
        k--;
        p = (p << 6) + (size_t)__builtin_ctzll(b->lv[k][p]);
    }
    return (long)p;
}

long bitset_next_wrap(const bitset_t *b, size_t from)
{
    long r = from < b->nbits ? bitset_next(b, from) : -1;
    if (r < 0 && from > 0)
        r = bitset_next(b, 0);
    return r;
}
