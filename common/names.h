/* names.h - the bucket and node name rule: what the control protocol, the
 * scheduler, the bucket files and the scenario files accept as a name. */
#ifndef BQOS_NAMES_H
#define BQOS_NAMES_H

#include <stddef.h>

#define NAMES_MAX 250 /* a name is 1..NAMES_MAX bytes (PROTO_NAME_MAX is the same) */

/* Returns 0 if `name` (`len` bytes, need not be NUL-terminated) is a valid
 * node or bucket name: 1..NAMES_MAX bytes, none of them a space or a control
 * character (no byte <= 0x20, no 0x7f; memcached's key rule, so bytes from
 * 0x80 up are allowed).  Else -EINVAL (also for NULL).  Pure; any thread. */
int names_check(const char *name, size_t len);

/* Returns 0 if `name` (`len` bytes) is a valid bucket name as configured
 * (bucket files, scenarios): names_check() and no ':', because a bucket
 * name is the prefix of its memcached keys ("NAME:key").  Else -EINVAL.
 * Pure; any thread. */
int names_check_bucket(const char *name, size_t len);

#endif
