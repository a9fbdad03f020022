/* fuzz_mcauth.c - libFuzzer harness for memcached logins (storage-node/mc/mcauth): an input whose first byte is odd is an auth file (loaded, then its users tried); an even one is a connection's bytes before and during its login, stepped through as the front does, every result checked against the buffer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage-node/mc/mcauth.h"

/* The gate's counters are not under test: no gate here. */
void gate_auth_failed(gate_t *g, gate_auth_reason_t why)
{
    (void)g, (void)why;
}

void gate_auth_ok(gate_t *g)
{
    (void)g;
}

/* Writes data to a new 0600 file; returns its path (static) or NULL. */
static const char *write_file(const uint8_t *data, size_t size)
{
    static char path[64];
    strcpy(path, "/tmp/fuzz_mcauth.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    int ok = write(fd, data, size) == (ssize_t)size;
    close(fd);
    if (!ok) {
        unlink(path);
        return NULL;
    }
    return path;
}

static mcauth_t *users(void)
{
    static mcauth_t *a;
    if (!a) {
        static const char text[] = "alice:secret\nbob:pw:2\r\n";
        const char *p = write_file((const uint8_t *)text, sizeof text - 1);
        a = p ? mcauth_load(p, NULL, NULL) : NULL;
        if (p)
            unlink(p);
        if (!a)
            abort();
    }
    return a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 0 && (data[0] & 1)) {
        const char *p = write_file(data + 1, size - 1);
        if (!p)
            return 0;
        jsonloc_err_t e;
        mcauth_t *a = mcauth_load(p, &e, NULL);
        unlink(p);
        if (a && (mcauth_users(a) < 1 || mcauth_check(a, "", 0, "", 0)))
            abort(); /* a loaded file has users, none of them empty */
        mcauth_destroy(&a);
        return 0;
    }
    mcauth_t *a = users();
    mcauth_conn_t c = {0};
    const char *p = (const char *)data + (size > 0);
    size_t left = size - (size > 0);
    while (left > 0 && !c.ok) {
        mcauth_result_t r;
        mcauth_status_t st = mcauth_step(a, NULL, &c, p, left, &r);
        if (r.consumed > left)
            abort();
        if (st == MCAUTH_NEED_MORE && r.consumed != 0)
            abort();
        if (st != MCAUTH_REPLY)
            break;
        if (r.consumed == 0 || !r.reply)
            abort(); /* a step that consumes nothing would spin a connection */
        if (c.ok && strcmp(c.user, "alice") != 0 && strcmp(c.user, "bob") != 0)
            abort();
        p += r.consumed;
        left -= r.consumed;
    }
    return 0;
}
