/* mono.c - the monotonic clock in seconds. */
#include "common/mono.h"

#include <time.h>

double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
