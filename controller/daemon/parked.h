/* parked.h - the changes whose journal line is not yet durable: each one's reply held, what undoes it, at most PARKED_MAX at once, oldest first.
 *
 * Without etcd a set or remove is made to the table in force and to ctrl at
 * once, and its line queued for the journal's writer (common/bucketjournal);
 * its reply waits here until the line is durable (issue 26, docs/decisions.md
 * "A change's fdatasync off the loop").  The journal takes lines in the order
 * they are queued and says "durable up to ticket N" or "tickets F..G failed"
 * (a failed write fails every line queued after it), so the parked changes
 * are a ring in ticket order: the durable ones leave from the oldest end,
 * the failed ones from the newest (each is undone on top of the ones before
 * it: newest first).  The ring holds as many changes as the journal holds
 * lines (BUCKETJOURNAL_PENDING_MAX): the next change is refused (busy), never
 * queued without bound.
 *
 * A parked_t keeps the data only: the envelope the reply goes back behind
 * and the record an undo needs; undoing is the configuration's
 * (controller/daemon/conf.c), sending the admin endpoint's (admin.c, through
 * conf's reply callback).  It belongs to the controller's loop thread;
 * nothing locks. */
#ifndef BQOS_PARKED_H
#define BQOS_PARKED_H

#include <stddef.h>
#include <stdint.h>

#include "common/bucketfile.h"
#include "common/bucketjournal.h"
#include "controller/admission.h"

/* Changes waiting at most: one per line the journal holds. */
#define PARKED_MAX BUCKETJOURNAL_PENDING_MAX

/* Frames of a ROUTER envelope kept, and the largest frame (bytes). */
#define PARKED_ENV_FRAMES 4
#define PARKED_ENV_SIZE 256

/* Where a reply goes: the request's ROUTER envelope (the peer's routing id,
 * then the empty delimiter of a REQ client) and its connection. */
typedef struct {
    unsigned char env[PARKED_ENV_FRAMES][PARKED_ENV_SIZE];
    size_t envl[PARKED_ENV_FRAMES];
    int nenv;                /* 0: asked without a socket (admin_answer()) */
    int fd;                  /* the client's connection (ZMQ_SRCFD), -1
                                unknown */
} parked_env_t;

/* A change waiting for the journal's disk, with what undoes it if the write
 * fails. */
typedef struct {
    uint64_t ticket;         /* the journal's (bucketjournal_queue_set()) */
    char *text;              /* the reply once durable (owned; NULL: none yet) */
    parked_env_t to;         /* where the reply goes */
    int is_set, was;         /* a set (else a remove); was: the bucket's
                                index before, -1 new */
    char name[BUCKETFILE_NAME_MAX + 1]; /* the bucket set or removed */
    bucketfile_bucket_t old; /* what it was (its name the table's) */
    uint64_t version_before; /* the table's version before */
    admission_sums_t sums_before; /* the admission sums before */
    double t0;               /* when it was asked (mono_now()) */
} parked_change_t;

typedef struct parked parked_t;

/* A new, empty ring.  Returns it (caller owns it: parked_destroy()), or NULL
 * when out of memory. */
parked_t *parked_new(void);

/* Frees the ring and the replies of the changes still in it (not sent: a
 * caller that answers them takes them first, parked_take_oldest()); sets *pp
 * to NULL.  Accepts NULL and *pp == NULL. */
void parked_destroy(parked_t **pp);

/* How many changes wait (0 for NULL). */
size_t parked_count(const parked_t *p);

/* The slot the next change is written into, zeroed (to.fd -1), or NULL when
 * PARKED_MAX wait (the change is then refused busy).  Borrowed: it waits
 * only once parked_add() is called; until then the ring is unchanged and the
 * next parked_slot() returns the same slot. */
parked_change_t *parked_slot(parked_t *p);

/* The slot parked_slot() returned now waits, the newest.  Its ticket must be
 * above every waiting one's (the journal's order). */
void parked_add(parked_t *p);

/* The newest waiting change (borrowed), or NULL when none waits. */
parked_change_t *parked_newest(parked_t *p);

/* Takes the oldest change out if its ticket is <= `durable` (its line is
 * durable), else returns NULL.  The change returned is borrowed until the
 * next parked_slot(); the caller takes its reply (c->text). */
parked_change_t *parked_take_durable(parked_t *p, uint64_t durable);

/* Takes the newest change out if its ticket is in from..to (its line
 * failed), else returns NULL: called until NULL, it gives the failed ones
 * newest first, the order they are undone in.  Borrowed and the reply
 * taken as parked_take_durable(). */
parked_change_t *parked_take_failed(parked_t *p, uint64_t from, uint64_t to);

/* Takes the oldest change out whatever its state (the stop answers it), or
 * returns NULL when none waits.  Borrowed and the reply taken as
 * parked_take_durable(). */
parked_change_t *parked_take_oldest(parked_t *p);

#endif
