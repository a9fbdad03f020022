/* shardmap.c - rendezvous hashing of bucket names over controller shards (shardmap.h has the rule). */
#include <errno.h>

#include "common/hashmix.h"
#include "common/shardmap.h"

uint64_t shardmap_name_hash(const char *name)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    return h;
}

uint64_t shardmap_score(uint64_t h, int j)
{
    return hashmix64(h ^ hashmix64((uint64_t)j + 1));
}

int shardmap_of_hash(uint64_t h, int k)
{
    if (k < 1 || k > SHARDMAP_MAX)
        return -EINVAL;
    int best = 0;
    uint64_t top = shardmap_score(h, 0);
    for (int j = 1; j < k; j++) {
        uint64_t s = shardmap_score(h, j);
        if (s > top) { /* ties stay with the lower shard */
            top = s;
            best = j;
        }
    }
    return best;
}

int shardmap_of(const char *name, int k)
{
    if (!name)
        return -EINVAL;
    return shardmap_of_hash(shardmap_name_hash(name), k);
}

long shardmap_moves(const char *const *names, size_t n, int k_old, int k_new, int *from, int *to)
{
    if (k_old < 1 || k_old > SHARDMAP_MAX || k_new < 1 || k_new > SHARDMAP_MAX || (n && !names))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!names[i])
            return -EINVAL;
    long moved = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = shardmap_name_hash(names[i]);
        int a = shardmap_of_hash(h, k_old), b = shardmap_of_hash(h, k_new);
        if (from)
            from[i] = a;
        if (to)
            to[i] = b;
        moved += a != b;
    }
    return moved;
}
