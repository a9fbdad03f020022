/* nbdtls.h - what is NBD's own in NBD over TLS: the --tls modes of the NBD front (NBD_OPT_STARTTLS); the credentials, sessions and record I/O are the shared io/tls.h.
 *
 * The front owns when TLS starts (after the STARTTLS ACK left in clear) and
 * drives the handshake from the connection's read and write events
 * (tls_handshake(), tls_wants_write()); from then on every byte in and out
 * goes through tls_read() and tls_write().  docs/nbd.md ("TLS"),
 * docs/security.md. */
#ifndef BQOS_NBDTLS_H
#define BQOS_NBDTLS_H

#include "storage-node/io/tls.h"

/* --tls: what a plain client may do. */
typedef enum {
    NBDTLS_OFF = 0,  /* STARTTLS answered NBD_REP_ERR_UNSUP */
    NBDTLS_ALLOW,    /* plain and TLS clients */
    NBDTLS_REQUIRE   /* every option but STARTTLS and ABORT refused before TLS */
} nbdtls_mode_t;

#endif
