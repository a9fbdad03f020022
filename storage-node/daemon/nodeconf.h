/* nodeconf.h - command-line values and JSON files that both node kinds (memcached and block) read. */
#ifndef BQOS_NODECONF_H
#define BQOS_NODECONF_H

#include <stddef.h>
#include <stdint.h>

/* Reads the buckets of a controller reservation file with the controller's
 * reader (common/bucketfile: the whole file is validated as the controller
 * does, before any add() call) and calls add(arg, name, weight) for each in
 * file order (weight 1 if absent).  Stops at add()'s first error.  Returns
 * 0; -EINVAL for a file that cannot be read or is not valid (logged as
 * "FILE:LINE:COL: PATH: TEXT"); -ENOMEM; or add()'s negative return.
 * Called on one thread; add() runs on it. */
int nodeconf_load_buckets(const char *path,
                          int (*add)(void *arg, const char *name, uint32_t weight), void *arg);

/* Reads a token test-hook file {"bucket":{"r":R,"l":L|null|"unlimited"},...}
 * and calls set(arg, name, r, l) for each bucket (r 0 if absent; l
 * SCHED_UNLIMITED for null, "unlimited" or absent).  Bad entries are
 * logged with their position and skipped.  Returns 0, or -EINVAL / set()'s negative return if
 * any entry failed. */
int nodeconf_load_tokens(const char *path,
                         int (*set)(void *arg, const char *name, int64_t r, int64_t l),
                         void *arg);

/* --check: validates bucket file `config` with the controller's validator
 * (common/bucketfile: every bad bucket) and token file `tokens_file`
 * (every bad entry); either may be NULL.  Prints each problem to stderr as
 * "PROG: FILE:LINE:COL: PATH: TEXT".  Returns the number of problems (0:
 * both valid) or -ENOMEM. */
int nodeconf_check(const char *prog, const char *config, const char *tokens_file);

#endif
