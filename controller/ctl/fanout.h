/* fanout.h - bqos-ctl's one request sent to several controllers at once: a text to N ZeroMQ REQ sockets, each sent as soon as its connection is up, each reply handed to a callback until it says stop, every socket is done, or a deadline.
 *
 * The caller opens the sockets (its own transport, timeouts and CURVE
 * keys) and adds them (fanout_add(); the fanout closes them in
 * fanout_destroy()), then fanout_run() polls them all: a socket goes
 * FANOUT_TO_SEND -> FANOUT_SENT (sent on POLLOUT) -> FANOUT_DONE (reply
 * received on POLLIN, or a send that failed).  The callback sees each
 * reply's bytes, decides what they mean, and may stop the run, shorten the
 * deadline (fanout_cut()), leave sockets out of the next polls
 * (fanout_skip()) or add a socket (fanout_add()).  Used by ctl.c's
 * request_any() (stops at the leader) and ctlshards_ask_all() (the newest
 * shards configuration, a grace after the first answer).  No global state;
 * a fanout_t is used by one thread. */
#ifndef BQOS_FANOUT_H
#define BQOS_FANOUT_H

#include <stddef.h>

/* At most this many sockets in one fanout. */
#define FANOUT_MAX 64

/* A socket's state (fanout_state()). */
enum { FANOUT_TO_SEND = 0, FANOUT_SENT = 1, FANOUT_DONE = 2 };

/* What a fanout_reply_fn returns. */
enum { FANOUT_GO_ON = 0, FANOUT_STOP = 1 };

typedef struct fanout fanout_t;

/* Called by fanout_run() for socket i's reply: data/len its bytes (the
 * message is freed after the call: copy what you keep), data NULL if the
 * receive failed.  Socket i is FANOUT_DONE already.  Returns FANOUT_STOP to
 * end the run at once (the other replies of this poll are left unread),
 * else FANOUT_GO_ON. */
typedef int (*fanout_reply_fn)(fanout_t *f, int i, const char *data, size_t len, void *arg);

/* A fanout without sockets.  Returns it (fanout_destroy() it), or NULL
 * (out of memory). */
fanout_t *fanout_new(void);

/* Closes every socket added and frees f (NULL: nothing). */
void fanout_destroy(fanout_t *f);

/* Adds socket sock (owned by f from now on; NULL: a socket that could not
 * be opened, FANOUT_DONE at once, so indexes follow the caller's list).
 * May be called from the callback.  Returns its index (0, 1, ... in the
 * order added), or -ENOSPC (FANOUT_MAX already; sock is not taken). */
int fanout_add(fanout_t *f, void *sock);

/* The number of sockets added. */
int fanout_count(const fanout_t *f);

/* Socket i's state (FANOUT_TO_SEND, FANOUT_SENT, FANOUT_DONE). */
int fanout_state(const fanout_t *f, int i);

/* Leaves socket i out of the polls from the next one on (a reply already
 * polled in this round is still handed over); its state is kept. */
void fanout_skip(fanout_t *f, int i);

/* Moves the run's deadline to ms milliseconds from now if that is
 * earlier (from the callback). */
void fanout_cut(fanout_t *f, int ms);

/* Sends `text` (borrowed) to every socket and hands each reply to fn(f,
 * i, ..., arg), until fn says FANOUT_STOP, no socket is left to poll (all
 * done or skipped), or timeout_ms from now (fanout_cut() may bring it
 * closer); an interrupted poll is retried, another poll error ends the run.
 * Returns 1 if fn stopped it, else 0. */
int fanout_run(fanout_t *f, const char *text, int timeout_ms, fanout_reply_fn fn, void *arg);

#endif
