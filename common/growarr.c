/* growarr.c - a per-index array that grows to cover an index (see growarr.h). */
#include "common/growarr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int growarr(void **arr, int *cap, int n, size_t size)
{
    if (n <= *cap)
        return 0;
    int c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    char *p = realloc(*arr, (size_t)c * size);
    if (!p)
        return -ENOMEM;
    memset(p + (size_t)*cap * size, 0, (size_t)(c - *cap) * size);
    *arr = p;
    *cap = c;
    return 0;
}
