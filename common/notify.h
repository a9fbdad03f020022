/* notify.h - tell the service manager (systemd, Type=notify) that a daemon is ready or stopping. */
#ifndef BQOS_NOTIFY_H
#define BQOS_NOTIFY_H

/* Both send one sd_notify(3) message when the program was built with
 * libsystemd (mk/build.mk's HAVE_SYSTEMD) and runs under a service manager
 * that asked for it ($NOTIFY_SOCKET); otherwise, and on any error, they do
 * nothing: a daemon never fails for want of a service manager.  Any thread
 * may call them; they block only for one datagram to a local socket. */

/* READY=1: the daemon listens on its endpoints and serves.  Call once,
 * after binding. */
void notify_ready(void);

/* STOPPING=1: a graceful stop has begun (the daemon may take a while to
 * drain). */
void notify_stopping(void);

#endif
