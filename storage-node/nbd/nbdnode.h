/* nbdnode.h - the block storage node as one call: token scheduler, NBD front, file backend, bucket file, token test hook, controller client and signals.  bqos-node hands its command line here when it names a block backend; bqos-nbd-node is a thin main() around it. */
#ifndef BQOS_NBDNODE_H
#define BQOS_NBDNODE_H

#include <stdio.h>

/* Returns 1 if the command line asks for a block node (--backend file:PATH,
 * --backend=file:PATH, or --nbd-listen), 0 otherwise.  Reads argv only. */
int nbdnode_wanted(int argc, char **argv);

/* Runs the block node: parses argv (options listed by
 * nbdnode_usage_options(); bqos-node's memcached-only options are accepted
 * and ignored), serves until SIGTERM/SIGINT, and returns the process exit
 * status: 0 after a clean stop, 1 on a start-up error, 2 on bad usage.
 * `prog` (a literal) names the program in messages and --help.  Call once,
 * from the main thread, before any other thread exists (it initialises
 * logging and handles signals on its own event loop). */
int nbdnode_main(int argc, char **argv, const char *prog);

/* Prints the block node's options, man-page style, to `out` (for a
 * program's --help); with `block_only`, only those a memcached node lacks
 * (--nbd-listen, --backend file:PATH, --export-size, --direct, ...). */
void nbdnode_usage_options(FILE *out, int block_only);

#endif
