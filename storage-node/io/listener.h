/* listener.h - the node fronts' listening socket: TCP on a numeric address and port, or a Unix-domain socket path. */
#ifndef BQOS_LISTENER_H
#define BQOS_LISTENER_H

#include <event2/util.h>
#include <stdint.h>

struct event_base;
struct sockaddr;

typedef struct listener listener_t;

/* Called on the loop thread for every accepted connection.  fd is
 * non-blocking and close-on-exec (TCP ones with TCP_NODELAY set), and the
 * callee's to close. */
typedef void (*listener_cb)(evutil_socket_t fd, const struct sockaddr *peer, int peerlen,
                            void *arg);

/* Where to listen, as listener_parse() reads it. */
typedef struct {
    char host[64];   /* numeric IPv4 or IPv6 address (TCP) */
    unsigned port;   /* TCP port; 0 picks a free one (listener_port()) */
    char path[108];  /* non-empty: a Unix-domain socket at this path */
} listener_addr_t;

/* Parses "HOST:PORT", "[V6]:PORT" (HOST a numeric address, PORT 0..65535)
 * or "unix:PATH" (PATH 1..107 bytes) into *a.  Returns 0 or -EINVAL;
 * LISTENER_SYNTAX says what is accepted, for error messages. */
int listener_parse(const char *spec, listener_addr_t *a);
#define LISTENER_SYNTAX "HOST:PORT (numeric IPv4 address, or [IPv6]:PORT) or unix:PATH"

/* Listens on *a and calls cb(fd, peer, peerlen, arg) for every accepted
 * connection.  A Unix socket file left at the path by a
 * process that is gone is replaced; a live one is not.
 * Returns the listener, or NULL and *err: -EADDRINUSE (in use, or a live
 * Unix socket there), -EEXIST (a file that is not a socket is at the path),
 * -ENOMEM, or another bind/listen -errno.  Loop thread only, as libevent's
 * listener. */
listener_t *listener_new(struct event_base *base, const listener_addr_t *a,
                         listener_cb cb, void *arg, int *err);

/* The bound TCP port (useful after port 0); 0 for a Unix socket. */
unsigned listener_port(const listener_t *l);

/* "ADDR:PORT" (the bound port) or "unix:PATH", for log lines.  Owned by l. */
const char *listener_name(const listener_t *l);

/* Stops accepting for good (connections already accepted are not touched). */
void listener_disable(listener_t *l);

/* An accept error libevent does not retry (EMFILE, ENFILE: out of file
 * descriptors) pauses accepting, with one warning per 10 s at most, until
 * listener_resume() or 0.1 s later (then it tries again).  Call
 * listener_resume() when a descriptor frees (a connection closed); it does
 * nothing unless paused.  NULL-safe. */
void listener_resume(listener_t *l);

/* How many times accepting paused so far. */
uint64_t listener_pauses(const listener_t *l);

/* Closes the socket, removes its Unix socket file if it is still the one
 * this listener made, frees, sets *lp = NULL.  NULL-safe. */
void listener_destroy(listener_t **lp);

#endif
