/* version.h - the bqos version, the one string every program prints for --version. */
#ifndef BQOS_VERSION_H
#define BQOS_VERSION_H

/* A string literal, "MAJOR.MINOR.PATCH", so it can be pasted into other
 * literals ("bqos-node-" BQOS_VERSION). */
#define BQOS_VERSION "0.2.0"

/* What the memcached node answers to `version` (and shows as `stats`
 * version): a memcached version number first, as libmemcached's tools
 * (memcstat, memcping) parse it, then the bqos release.  1.6.18 is the
 * memcached whose replies the front reproduces byte for byte
 * (it_node_memccapable); memccapable holds a server below 1.6 to older,
 * stricter replies. */
#define BQOS_MEMCACHED_VERSION "1.6.18-bqos-" BQOS_VERSION

#endif
