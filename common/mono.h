/* mono.h - the monotonic clock in seconds, as every bqos program measures intervals. */
#ifndef BQOS_MONO_H
#define BQOS_MONO_H

/* Seconds on CLOCK_MONOTONIC (arbitrary origin, never goes back).
 * Thread-safe. */
double mono_now(void);

#endif
