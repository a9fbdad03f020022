/* ctlreq.h - bqos-ctl's requests to controllers: one JSON request on a REQ socket (CURVE with keys), its reply parsed and said as an exit status, and one request to a list of endpoints answered by the leader among them.
 *
 * The admin protocol is docs/controller.md's ({"v":1,"cmd":...}, one JSON
 * object each way).  What goes wrong is printed on stderr prefixed
 * "bqos-ctl: " (an unreachable controller, no answer in time, a reply that
 * is not the protocol's, a refusal with its code and message), and said as
 * the exit status bqos-ctl documents in --help.  No state outlives a call:
 * each one makes its ZeroMQ context and ends it.  bqos-ctl is one thread. */
#ifndef BQOS_CTLREQ_H
#define BQOS_CTLREQ_H

#include <jansson.h>

#include "common/curvekey.h"

/* Exit statuses: done; refused by the controller (its reply says why); a
 * usage error (a bad endpoint); no controller answered as the protocol
 * says. */
enum { CTLREQ_OK = 0, CTLREQ_REFUSED = 1, CTLREQ_USAGE = 2, CTLREQ_UNREACHABLE = 3 };

/* Endpoints of one list taken at most (more are ignored). */
#define CTLREQ_ENDPOINTS_MAX 16

/* A REQ socket of context `ctx` connected to `endpoint` (with `keys`: our
 * pair, then the controller's public key: CURVE; NULL: plain), sends and
 * receives bounded by timeout_ms, ZMQ_IMMEDIATE (a request waits for a
 * connection), no linger.  Returns it (caller closes it before ending ctx),
 * or NULL with a message printed and *code set to CTLREQ_USAGE for a bad
 * endpoint (left as it was otherwise).  A ctlshards_open_fn. */
void *ctlreq_open(void *ctx, const char *endpoint, int timeout_ms, const curvekey_t *keys,
                  int *code);

/* Sends `req` (borrowed) to the comma-separated endpoint list `list` and
 * waits at most timeout_ms.  One endpoint: its reply.  Several: every one
 * is asked at once (a socket each, sent as soon as its connection is up),
 * so a dead one costs nothing while another answers; only the leader
 * applies a change (a standby answers not_leader), so a change sent to all
 * is made once.  A standby's answer (status with "leader": false, or a
 * not_leader refusal) that names a leader not in the list adds it; the
 * first leader's answer is returned, else (no leader within the timeout)
 * the first answer.  Messages of endpoints that did not answer are printed
 * only if none did, a standby's not_leader only if no leader answered.
 * Returns the parsed reply (caller owns it: json_decref()) with *code
 * CTLREQ_OK or CTLREQ_REFUSED (its "error" and "message" printed), or NULL
 * with a message printed and *code CTLREQ_UNREACHABLE or CTLREQ_USAGE. */
json_t *ctlreq_any(const char *list, int timeout_ms, json_t *req, int *code,
                   const curvekey_t *keys);

#endif
