/* stopguard.h - SIGTERM and SIGINT answered within a bound even while the main loop is busy.
 *
 * The controller blocks its signals and reads them from a signalfd in its
 * loop; a long operation in the loop (a change to a table of a million
 * buckets, a slow disk) would leave a SIGTERM pending until it ends.  The
 * guard is one thread that looks at the process's pending signals every
 * 50 ms (sigpending(): it never consumes them, so SIGHUP and a normal stop
 * stay the loop's): a SIGTERM or SIGINT still pending after `bound_s`
 * seconds means the loop is stuck, and the guard logs so and ends the
 * process with _exit(0).
 *
 * What an exit in the middle of a change leaves: the change was not
 * acknowledged (the reply is sent after it is applied), the bucket file is
 * the old one (bucketfile_save() renames a complete temporary file, which
 * may stay behind as FILE.tmp.XXXXXX), and with etcd the leader key expires
 * with its lease instead of being resigned. */
#ifndef BQOS_STOPGUARD_H
#define BQOS_STOPGUARD_H

typedef struct stopguard stopguard_t;

/* Starts the guard; call it after the signals are blocked.  Returns a new
 * guard (caller owns it, stops it with stopguard_stop()), or NULL if the
 * thread cannot start (the controller then works without it). */
stopguard_t *stopguard_start(double bound_s);

/* The loop has ended: from now on the guard also ends the process if it
 * is still running `bound_s` after this call (a clean stop that frees a
 * table of a million buckets, waits for a compaction of its file or for
 * etcd).  What such an exit leaves is what an exit in a change leaves,
 * above.  Accepts NULL. */
void stopguard_stopping(stopguard_t *g);

/* Stops and joins the guard's thread and frees it; sets *gp to NULL.
 * Accepts NULL and *gp == NULL. */
void stopguard_stop(stopguard_t **gp);

#endif
