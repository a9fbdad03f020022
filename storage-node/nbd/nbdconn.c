/* nbdconn.c - the NBD front's reply helpers, shared by the option-haggling phase (nbdopts.c) and the transmission phase (nbdfront.c): queue bytes on a connection for the end-of-pass write, option replies, transmission flags. */
#include "storage-node/nbd/nbdconn.h"

#include <event2/buffer.h>
#include <event2/event.h>

/* Queues connection c for the writing of its replies at the end of the
 * current loop iteration (after every callback that may add more). */
static void mark_dirty(nconn_t *c)
{
    if (c->dirty || c->sock.writing)
        return; /* already queued, or the write event will send it */
    c->dirty = 1;
    c->dnext = c->f->dirty;
    if (!c->f->dirty)
        event_active(c->f->flush_ev, EV_TIMEOUT, 1);
    c->f->dirty = c;
}

void nbdf_out(nconn_t *c, const void *p, size_t n)
{
    if (evbuffer_add(c->sock.out, p, n) < 0)
        c->state = ST_CLOSING; /* out of memory: the stream is broken */
    mark_dirty(c);
}

void nbdf_opt_reply(nconn_t *c, uint32_t opt, uint32_t type)
{
    uint8_t b[NBD_REP_HDR_LEN];
    nbdf_out(c, b, nbd_encode_rep_header(b, opt, type, 0));
}

uint16_t nbdf_tflags(const nconn_t *c)
{
    return (uint16_t)(TFLAGS | (c->structured ? NBD_FLAG_SEND_DF : 0));
}
