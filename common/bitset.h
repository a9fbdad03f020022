/* bitset.h - hierarchical bitmap: set, clear and find-next-set (with wrap) in O(log64 n).
 *
 * Level 0 holds one bit per index; a bit of level k+1 is set exactly when the
 * matching 64-bit word of level k is nonzero.  Finding the next set bit climbs
 * until a word has a candidate and descends with count-trailing-zeros, so every
 * operation touches at most one word per level: 3 levels cover 262,144 bits,
 * 4 levels 16.7 million.
 *
 * A bitset_t is not thread-safe: its owner serialises every call (the
 * scheduler's loop thread, for bqos-node). */
#ifndef BQOS_BITSET_H
#define BQOS_BITSET_H

#include <stddef.h>

typedef struct bitset bitset_t;

/* Returns a bitset of `nbits` bits, all clear (nbits may be 0), or NULL if out
 * of memory or nbits is too large (> 2^31).  Caller owns it. */
bitset_t *bitset_new(size_t nbits);

/* Frees the bitset and sets *bp to NULL.  Accepts NULL and *bp == NULL. */
void bitset_destroy(bitset_t **bp);

/* Changes the size to `nbits`, keeping the bits below min(old, new) size;
 * new bits are clear.  O(nbits / 64).  Returns 0, -EINVAL if nbits > 2^31,
 * or -ENOMEM (the bitset is then unchanged). */
int bitset_resize(bitset_t *b, size_t nbits);

/* Returns the number of bits. */
size_t bitset_size(const bitset_t *b);

/* Sets / clears bit i.  An index >= size is ignored.  O(levels). */
void bitset_set(bitset_t *b, size_t i);
void bitset_clear(bitset_t *b, size_t i);

/* Returns 1 if bit i is set, 0 if clear or i >= size.  O(1). */
int bitset_test(const bitset_t *b, size_t i);

/* Returns 1 if any bit is set.  O(1). */
int bitset_any(const bitset_t *b);

/* Returns the lowest set index >= from, or -1 if there is none (also when
 * from >= size).  O(levels). */
long bitset_next(const bitset_t *b, size_t from);

/* Returns the first set index in cyclic order from, from+1, ..., size-1, 0,
 * ..., from-1 (from >= size starts at 0), or -1 if no bit is set.
 * O(levels). */
long bitset_next_wrap(const bitset_t *b, size_t from);

#endif
