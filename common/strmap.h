/* strmap.h - small string -> int hash map (open addressing, linear probing).
 *
 * Keys are byte strings given as (pointer, length): they need not be
 * NUL-terminated and may contain any byte, so a lookup can use a slice of a
 * request line without copying it.  The map copies keys on insert and owns
 * the copies.  Removal uses backward-shift deletion, so there are no
 * tombstones and lookups stay short after many insert/remove cycles.
 *
 * Why not a library: glib's GHashTable needs NUL-terminated (or boxed) keys
 * for lookup, so every lookup of a slice would allocate; hsearch(3) cannot
 * remove and is process-global.  This is ~200 lines with its own tests.
 *
 * A strmap_t is not thread-safe: its owner serialises every call. */
#ifndef BQOS_STRMAP_H
#define BQOS_STRMAP_H

#include <stddef.h>

typedef struct strmap strmap_t;

/* Returns an empty map, or NULL if out of memory.  Caller owns it. */
strmap_t *strmap_new(void);

/* Frees the map and its key copies and sets *mp to NULL.  Accepts NULL and
 * *mp == NULL. */
void strmap_destroy(strmap_t **mp);

/* Number of keys. */
size_t strmap_count(const strmap_t *m);

/* Looks up key[0..len).  Returns 0 and sets *val (if val is non-NULL), or
 * -ENOENT.  O(1) expected. */
int strmap_find(const strmap_t *m, const char *key, size_t len, int *val);

/* The map's copy of key[0..len) (NUL-terminated), or NULL if the key is
 * not in the map.  The copy is the map's and stays where it is until the
 * key is removed or the map destroyed (growth moves slots, not keys): an
 * owner may borrow it as the key's name rather than keep a copy of its
 * own. */
const char *strmap_key(const strmap_t *m, const char *key, size_t len);

/* Inserts key[0..len) -> val (key copied).  Returns 0, -EEXIST if the key is
 * present (its value is left unchanged), -EINVAL if key is NULL with len > 0,
 * or -ENOMEM (map unchanged). */
int strmap_insert(strmap_t *m, const char *key, size_t len, int val);

/* Inserts or replaces the value of key[0..len).  Returns 0, -EINVAL or
 * -ENOMEM (map unchanged). */
int strmap_set(strmap_t *m, const char *key, size_t len, int val);

/* Removes key[0..len).  Returns 0 and sets *val to its old value (if val is
 * non-NULL), or -ENOENT. */
int strmap_remove(strmap_t *m, const char *key, size_t len, int *val);

/* Calls fn(key, len, val, arg) once for every entry, in no particular order;
 * the key is the map's copy (NUL-terminated for convenience) and is valid
 * until it is removed.  fn must not modify the map. */
void strmap_foreach(const strmap_t *m,
                    void (*fn)(const char *key, size_t len, int val, void *arg),
                    void *arg);

#endif
