/* version.h - the bqos version, the one string every program prints for --version. */
#ifndef BQOS_VERSION_H
#define BQOS_VERSION_H

/* A string literal, "MAJOR.MINOR.PATCH", so it can be pasted into other
 * literals ("bqos-node-" BQOS_VERSION). */
#define BQOS_VERSION "0.1.0"

#endif
