/* growarr.h - a per-index array that grows to cover an index (doubling, new elements zeroed), as the per-bucket arrays of the exporters do. */
#ifndef BQOS_GROWARR_H
#define BQOS_GROWARR_H

#include <stddef.h>

/* Makes the array *arr of *cap elements of `size` bytes hold at least n
 * (capacity doubles from 64; the new elements are zeroed).  Returns 0, or
 * -ENOMEM with *arr and *cap unchanged.  Not thread-safe on one array. */
int growarr(void **arr, int *cap, int n, size_t size);

#endif
