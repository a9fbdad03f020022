/* zmq.c - the protocol over ZeroMQ: proto_send() and proto_recv(), one
 * message as one multipart zmq message.  Its own archive (libprotozmq), so
 * that a user of the codec alone (libproto) does not link ZeroMQ. */
#include "common/proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define RECV_MAX_FRAMES (PROTO_MAX_FRAMES + 2) /* identity + frames + one extra to detect excess */

int proto_send(void *sock, const void *identity, size_t idlen, const proto_msg_t *m, proto_enc_t *e,
               int zflags)
{
    int rc = proto_encode(m, e);
    if (rc)
        return rc;
    zflags &= ZMQ_DONTWAIT;
    if (identity && zmq_send(sock, identity, idlen, ZMQ_SNDMORE | zflags) < 0)
        return -zmq_errno();
    for (size_t i = 0; i < e->nframes; i++) {
        int more = i + 1 < e->nframes ? ZMQ_SNDMORE : 0;
        /* Once the first part is queued the rest of a multipart message is
         * accepted atomically, so only the first part can see EAGAIN. */
        if (zmq_send(sock, e->data[i], e->len[i], more | zflags) < 0)
            return -zmq_errno();
    }
    return 0;
}

void proto_peer_get(void *zmsg, proto_peer_t *p)
{
    const char *u = zmq_msg_gets(zmsg, "User-Id");
    const char *k = zmq_msg_gets(zmsg, "X-Bqos-Key");
    snprintf(p->user, sizeof p->user, "%s", u ? u : "");
    snprintf(p->key, sizeof p->key, "%s", k ? k : "");
}

int proto_recv(void *sock, void *identity, size_t idcap, size_t *idlen, proto_msg_t *m,
               proto_stats_t *st, proto_reason_t *why, proto_known_fn known, void *known_arg,
               int zflags)
{
    return proto_recv_peer(sock, identity, idcap, idlen, m, st, why, known, known_arg, zflags,
                           NULL);
}

int proto_recv_peer(void *sock, void *identity, size_t idcap, size_t *idlen, proto_msg_t *m,
                    proto_stats_t *st, proto_reason_t *why, proto_known_fn known,
                    void *known_arg, int zflags, proto_peer_t *peer)
{
    zmq_msg_t parts[RECV_MAX_FRAMES];
    size_t n = 0;
    int rc = 0, more = 1, excess = 0;
    proto_reason_t r = PROTO_OK;
    zflags &= ZMQ_DONTWAIT;
    if (why)
        *why = PROTO_OK;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_t *p = n < RECV_MAX_FRAMES ? &parts[n] : &tmp;
        zmq_msg_init(p);
        if (zmq_msg_recv(p, sock, n == 0 && !excess ? zflags : 0) < 0) {
            rc = -zmq_errno();
            zmq_msg_close(p);
            goto out;
        }
        more = zmq_msg_more(p);
        if (p == &tmp) {
            zmq_msg_close(p); /* drop the excess part, keep draining */
            excess = 1;
        } else {
            n++;
        }
    }
    size_t first = 0;
    if (identity) {
        size_t l = zmq_msg_size(&parts[0]);
        if (l > idcap)
            l = idcap;
        memcpy(identity, zmq_msg_data(&parts[0]), l);
        if (idlen)
            *idlen = l;
        first = 1;
    }
    proto_frame_t fr[RECV_MAX_FRAMES];
    size_t nf = 0;
    for (size_t i = first; i < n; i++, nf++) {
        fr[nf].data = zmq_msg_data(&parts[i]);
        fr[nf].len = zmq_msg_size(&parts[i]);
    }
    if (excess) {
        r = PROTO_E_FRAMES;
    } else {
        /* Counted below, once the identity has been compared too. */
        if (proto_decode(m, fr, nf, NULL, &r) == -ENOMEM) {
            rc = -ENOMEM;
            goto out;
        }
    }
    if (r == PROTO_OK && identity) {
        uint32_t tag;
        if (proto_node_id_split(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), m->node,
                                &tag) < 0)
            r = PROTO_E_UNKNOWN_NODE;
    }
    if (r != PROTO_OK) {
        proto_stats_note(st, r);
        if (why)
            *why = r;
        rc = -EPROTO;
        goto out;
    }
    if (peer && n > 0)
        proto_peer_get(&parts[n - 1], peer);
    if (known && m->type != PROTO_HELLO && !known(m->node, known_arg)) {
        proto_stats_note(st, PROTO_E_UNKNOWN_NODE);
        if (why)
            *why = PROTO_E_UNKNOWN_NODE;
        rc = PROTO_RECV_UNKNOWN;
        goto out;
    }
    proto_stats_note(st, PROTO_OK);
    if (st)
        for (size_t i = 0; i < nf; i++)
            st->bytes += fr[i].len;
out:
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    return rc;
}
