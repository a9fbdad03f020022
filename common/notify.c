/* notify.c - sd_notify(3) READY=1 and STOPPING=1 when built with libsystemd, nothing otherwise. */
#include "common/notify.h"

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static void send_state(const char *state)
{
    (void)sd_notify(0, state);
}
#else
static void send_state(const char *state)
{
    (void)state;
}
#endif

void notify_ready(void)
{
    send_state("READY=1");
}

void notify_stopping(void)
{
    send_state("STOPPING=1");
}
