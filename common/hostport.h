/* hostport.h - network addresses as the options write them: "HOST:PORT", "[IPv6]:PORT", and whether a ZeroMQ endpoint needs ZMQ_IPV6. */
#ifndef BQOS_HOSTPORT_H
#define BQOS_HOSTPORT_H

#include <stddef.h>

/* Splits "HOST:PORT" or "[V6]:PORT" into host (NUL-terminated, brackets
 * removed, at most cap - 1 bytes) and port 0..65535.  Returns 0 or -EINVAL.
 * Thread-safe. */
int hostport_split(const char *s, char *host, size_t cap, unsigned *port);

/* 1 if the ZeroMQ endpoint names an IPv6 address ("tcp://[::1]:7070",
 * "tcp://[::]:7070"), so that its socket needs ZMQ_IPV6 set before
 * bind/connect; else 0.  Host names and IPv4 addresses keep IPv4 (with
 * ZMQ_IPV6 a name such as localhost would resolve to ::1 only).
 * Thread-safe. */
int hostport_zmq_ipv6(const char *endpoint);

#endif
