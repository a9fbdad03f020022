/* proto_bench.c - bqos-proto-bench: time to encode and decode report and
 * tokens messages at a given number of buckets (docs/performance.md). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/bench/proto_sample.h"
#include "common/mono.h"
#include "common/num.h"
#include "common/opts.h"
#include "common/proto.h"
#include "common/version.h"



/* The command line; read-only once parsed. */
typedef struct {
    const char *list;
    int64_t iters;
    int names, zmq;
    int help, version;
} settings_t;

/* The short letters -b -i -n -z -h -V were never listed in --help: they are
 * unlisted rows after the listed ones (getopt_long matches a long name to
 * the first row that has it). */
/* What --help prints around the option rows. */
static const opts_usage_t usage = {
    .head = "Usage: bqos-proto-bench [--buckets N[,N...]] [--iterations N] [--names]\n"
            "\n"
            "Measures the bqos control protocol codec (common/proto/): for each bucket\n"
            "count, builds a report message (one compact 36-byte record per bucket) and a\n"
            "tokens message (one compact 12-byte record per bucket), then times\n"
            "proto_encode() and proto_decode() separately, averaged over the iterations,\n"
            "with buffers reused as a daemon reuses them.  Prints one line per message\n"
            "type and size.\n"
            "\n"
            "Options:\n",
    .layout = OPTS_LAYOUT_LIST,
    .width = 19,
    .tail = "\nExit status: 0 on success, 1 on a failed encode/decode, 2 on bad usage.\n",
};

#define NOPTS 12

/* Fills rows[NOPTS], the option table, with targets in *s. */
static void option_rows(settings_t *s, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "buckets", .type = OPTS_STRING, .target = &s->list, .arg = "LIST",
         .deflt = "200,10000", .help = "comma-separated bucket counts"},
        {.name = "iterations", .type = OPTS_I64, .target = &s->iters, .arg = "N",
         .flags = OPTS_XMIN,
         .help = "repetitions per measurement (default: enough for ~0.2 s)"},
        {.name = "names", .type = OPTS_FLAG, .target = &s->names,
         .help = "also include the names frame (first contact / table\nchange) in every message"},
        {.name = "zmq", .type = OPTS_FLAG, .target = &s->zmq,
         .help = "also time the whole trip: encode, send over a ZeroMQ\n"
                 "DEALER -> ROUTER pair on TCP loopback, receive, decode\n"
                 "(one message in flight; column wire_us)"},
        OPTS_HELP_ROW(0, &s->help, "show this text"),
        OPTS_VERSION_ROW(0, &s->version, "show the version"),
        {.name = "buckets", .shrt = 'b', .type = OPTS_STRING, .target = &s->list},
        {.name = "iterations", .shrt = 'i', .type = OPTS_I64, .target = &s->iters,
         .flags = OPTS_XMIN},
        {.name = "names", .shrt = 'n', .type = OPTS_FLAG, .target = &s->names},
        {.name = "zmq", .shrt = 'z', .type = OPTS_FLAG, .target = &s->zmq},
        OPTS_HELP_ROW('h', &s->help, NULL),
        OPTS_VERSION_ROW('V', &s->version, NULL),
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

/* Times one message shape; prints a row.  Returns 0 or -1. */
/* Times encode + send + receive + decode over TCP loopback, one message in
 * flight.  Returns microseconds per message, or -1. */
static double wire(const proto_msg_t *m, long iters)
{
    double us = -1;
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
    char ep[128];
    size_t len = sizeof ep;
    proto_enc_t e;
    proto_msg_t d;
    proto_enc_init(&e);
    proto_msg_init(&d);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dealer, ZMQ_ROUTING_ID, m->node, strlen(m->node));
    if (zmq_bind(router, "tcp://127.0.0.1:*") || zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &len) ||
        zmq_connect(dealer, ep))
        goto out;
    char id[256];
    size_t idl;
    for (long it = 0; it < iters + 3; it++) {
        if (it == 3)
            us = mono_now();
        if (proto_send(dealer, NULL, 0, m, &e, 0) ||
            proto_recv(router, id, sizeof id, &idl, &d, NULL, NULL, NULL, NULL, 0)) {
            us = -1;
            goto out;
        }
    }
    us = (mono_now() - us) / (double)iters * 1e6;
out:
    proto_enc_clear(&e);
    proto_msg_clear(&d);
    zmq_close(router);
    zmq_close(dealer);
    zmq_ctx_term(ctx);
    return us;
}

static int bench(proto_type_t type, size_t n, int names, long iters, int zmq)
{
    proto_msg_t m, d;
    proto_enc_t e;
    proto_msg_init(&m);
    proto_msg_init(&d);
    proto_enc_init(&e);
    int rc = -1;
    char *namebuf = NULL;
    if (proto_sample(&m, type, n, names, &namebuf) < 0)
        goto out;
    if (proto_encode(&m, &e))
        goto out;
    size_t bytes = 0;
    for (size_t i = 0; i < e.nframes; i++)
        bytes += e.len[i];
    if (iters <= 0) { /* calibrate to ~0.2 s of encode+decode */
        double t0 = mono_now();
        long k = 0;
        proto_frame_t f[3];
        while (mono_now() - t0 < 0.05) {
            proto_encode(&m, &e);
            for (size_t i = 0; i < e.nframes; i++)
                f[i] = (proto_frame_t){e.data[i], e.len[i]};
            proto_decode(&d, f, e.nframes, NULL, NULL);
            k++;
        }
        iters = k * 4 < 10 ? 10 : k * 4;
    }
    double t0 = mono_now();
    for (long it = 0; it < iters; it++)
        if (proto_encode(&m, &e))
            goto out;
    double tenc = (mono_now() - t0) / (double)iters;
    proto_frame_t f[3];
    for (size_t i = 0; i < e.nframes; i++)
        f[i] = (proto_frame_t){e.data[i], e.len[i]};
    t0 = mono_now();
    for (long it = 0; it < iters; it++)
        if (proto_decode(&d, f, e.nframes, NULL, NULL))
            goto out;
    double tdec = (mono_now() - t0) / (double)iters;
    if (d.count != n)
        goto out;
    printf("%-7s %8zu %6s %10zu %12.1f %12.1f %12.1f %10.1f", proto_type_str(type), n,
           names ? "yes" : "no", bytes, tenc * 1e6, tdec * 1e6, (tenc + tdec) * 1e6,
           (double)bytes / (tenc + tdec) / 1e6);
    if (zmq) {
        long wi = iters / 4 < 20 ? 20 : iters / 4;
        double w = wire(&m, wi > 2000 ? 2000 : wi);
        if (w < 0)
            goto out;
        printf(" %10.1f", w);
    }
    putchar('\n');
    rc = 0;
out:
    free(namebuf);
    proto_msg_clear(&m);
    proto_msg_clear(&d);
    proto_enc_clear(&e);
    return rc;
}

int main(int argc, char **argv)
{
    settings_t s = {0};
    opts_row_t rows[NOPTS];
    option_rows(&s, rows);
    const opts_cmd_t cmd = {.prog = "bqos-proto-bench", .rows = rows, .n = NOPTS};
    char note[32];
    snprintf(note, sizeof note, " (protocol v%d)", PROTO_VERSION);
    int early = opts_start(&cmd, argc, argv, NULL, &usage, note);
    if (early >= 0)
        return early;
    const char *list = s.list;
    long iters = (long)s.iters;
    int names = s.names, zmq = s.zmq;
    printf("%-7s %8s %6s %10s %12s %12s %12s %10s%s\n", "type", "buckets", "names", "bytes",
           "encode_us", "decode_us", "total_us", "MB/s", zmq ? "    wire_us" : "");
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return 1;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t n;
        if (num_i64_in(tok, 0, PROTO_MAX_RECORDS, &n) < 0) {
            fprintf(stderr, "bqos-proto-bench: bad bucket count '%s'\n", tok);
            free(copy);
            return 2;
        }
        if (bench(PROTO_REPORT, (size_t)n, names, iters, zmq) ||
            bench(PROTO_TOKENS, (size_t)n, names, iters, zmq)) {
            fprintf(stderr, "bqos-proto-bench: encode/decode failed at %lld buckets\n", (long long)n);
            rc = 1;
        }
    }
    free(copy);
    return rc;
}
