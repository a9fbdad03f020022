/* who_bench.c - bqos-who-bench: the CPU a request costs the node's who registry (storage-node/io/who.h): cached (the connection stays in its bucket) and missed (it alternates between two buckets whose chains are full, the worst walk). */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "storage-node/io/who.h"

static const char *bucket_name(void *arg, int b)
{
    (void)arg;
    (void)b;
    return "b";
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void conn_at(conns_conn_t *c, int net, int host)
{
    memset(c, 0, sizeof *c);
    c->family = AF_INET;
    c->peer[0] = (unsigned char)net;
    c->peer[3] = (unsigned char)host;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    struct event_base *base = event_base_new();
    who_t *w = base ? who_new(base, bucket_name, NULL, NULL) : NULL;
    if (!w || n <= 0) {
        fprintf(stderr, "usage: bqos-who-bench [REQUESTS]\n");
        return 2;
    }
    conns_conn_t c, x;
    conn_at(&c, 10, 1);
    conns_set_identity(&c, CONN_ID_USER, "alice");
    for (int i = 0; i < WHO_PER_BUCKET; i++) { /* buckets 1 and 2 full: the longest walk */
        conn_at(&x, 11, i);
        who_seen(w, &x, 1);
        who_seen(w, &x, 2);
    }
    double t0 = cpu_now();
    for (long i = 0; i < n; i++)
        who_seen(w, &c, 0);
    double t1 = cpu_now();
    for (long i = 0; i < n; i++)
        who_seen(w, &c, 1 + (int)(i & 1));
    double t2 = cpu_now();
    printf("who_seen: %.2f ns a request in the connection's bucket (cached), %.2f ns when it "
           "alternates between two full buckets (a miss each time), %ld requests each\n",
           (t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)n * 1e9, n);
    conns_set_identity(&c, CONN_ID_USER, NULL);
    who_destroy(&w);
    event_base_free(base);
    return 0;
}
