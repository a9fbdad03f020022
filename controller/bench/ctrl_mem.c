/* ctrl_mem.c - bqos-ctrl-mem: the controller core's resident memory per configured bucket (issue 26): N limited buckets with no demand, then K nodes whose tables hold every bucket (named in parts as the daemon takes them), one computed round (each node's full push) and the rounds after it. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "controller/ctrl.h"

/* Resident bytes of this process (/proc/self/statm), or 0. */
static double rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (double)res * (double)sysconf(_SC_PAGESIZE);
}

/* Resident bytes after giving malloc's free memory back (what a process
 * that runs on keeps). */
static double rss_now(void)
{
    malloc_trim(0);
    return rss_bytes();
}

static int usage(void)
{
    fprintf(stderr, "usage: bqos-ctrl-mem [BUCKETS [NODES [PART [MAX_BYTES]]]]\n"
                    "  BUCKETS limited buckets (default 1000000), NODES nodes holding every one\n"
                    "  (default 4), PART names per part (default 16384; 0: the whole table in\n"
                    "  the hello); exits 1 if the bytes per bucket at the end exceed MAX_BYTES.\n");
    return 2;
}

int main(int argc, char **argv)
{
    long nb = argc > 1 ? atol(argv[1]) : 1000000;
    int nn = argc > 2 ? atoi(argv[2]) : 4;
    long part = argc > 3 ? atol(argv[3]) : 16384;
    double most = argc > 4 ? atof(argv[4]) : 0;
    if (nb < 1 || nb > 10000000 || nn < 0 || nn > 64 || part < 0 || argc > 5)
        return usage();
    bqos_log_init("bqos-ctrl-mem", BQOS_LOG_WARN);
    /* The names as bench-bigtable.sh's table has them, in one block: the
     * probe's own data, resident before the first figure. */
    char *text = malloc((size_t)nb * 16);
    const char **names = malloc((size_t)nb * sizeof *names);
    bucketfile_t *bf = bucketfile_new();
    if (!text || !names || !bf)
        return 2;
    for (long i = 0; i < nb; i++) {
        names[i] = text + i * 16;
        snprintf(text + i * 16, 16, "tenant-%07ld", i % 10000000);
        bucketfile_bucket_t x = {.name = names[i], .reservation = 10 + i % 90,
                                 .limit = 1000 + i % 9000, .weight = 1};
        if (bucketfile_set(bf, &x, NULL) < 0)
            return 2;
    }
    double r0 = rss_now();
    ctrl_config_t cc = ctrl_config_default();
    ctrl_t *c = ctrl_new(&cc);
    if (!c || ctrl_set_buckets(c, bf) < 0)
        return 2;
    ctrl_round_begin(c, 1, 0, 1.0);
    ctrl_result_t res;
    if (ctrl_compute(c, &res) < 0)
        return 2;
    double r1 = rss_now();
    printf("buckets %ld: the controller alone %.0f B per bucket\n", nb, (r1 - r0) / nb);
    double rh = r1;
    for (int i = 0; i < nn; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "node%02d", i);
        size_t first = part ? (size_t)(part < nb ? part : nb) : (size_t)nb;
        int id = ctrl_node_hello(c, nm, 0, 100000, 1, names, first);
        if (id < 0) {
            fprintf(stderr, "bqos-ctrl-mem: hello: %s\n", strerror(-id));
            return 2;
        }
        if (first < (size_t)nb)
            ctrl_node_table_reserve(c, id, (size_t)nb);
        for (size_t at = first; at < (size_t)nb; at += (size_t)part) {
            size_t n = (size_t)nb - at < (size_t)part ? (size_t)nb - at : (size_t)part;
            int rc = ctrl_node_table_part(c, id, 1, at, names + at, n);
            if (rc < 0) {
                fprintf(stderr, "bqos-ctrl-mem: part at %zu: %s\n", at, strerror(-rc));
                return 2;
            }
        }
    }
    double r2 = rss_now();
    if (nn)
        printf("hellos: %.0f B per pair (each node's table)\n", (r2 - rh) / nb / nn);
    /* Round 1: every node's full push; then rounds with nothing new. */
    size_t recs = 0;
    for (uint32_t k = 1; k <= 3; k++) {
        ctrl_round_begin(c, 1, k, 1.0 - k / 10.0);
        for (int i = 0; i < nn; i++) /* a report with nothing busy */
            if (ctrl_node_report(c, i, 1, k, 1, 0, 1000 * k, 0.1 * k, NULL, 0) < 0)
                return 2;
        if (ctrl_compute(c, &res) < 0)
            return 2;
        for (int i = 0; i < nn; i++)
            recs += ctrl_node_tokens(c, i, NULL);
        if (k == 1) {
            double r3 = rss_now();
            if (nn)
                printf("first push (%zu records): %.0f B per pair more\n", recs,
                       (r3 - r2) / nb / nn);
        }
    }
    double r4 = rss_now();
    if (nn)
        printf("after 3 rounds: %.0f B per pair over the hellos; per full-table node %.0f B "
               "per bucket\n",
               (r4 - r2) / nb / nn, (r4 - r1) / nb / nn);
    double per = (r4 - r0) / nb;
    printf("total: %.0f B per configured bucket (%d full-table nodes, no demand)\n", per, nn);
    ctrl_destroy(&c);
    bucketfile_destroy(&bf);
    free(names);
    free(text);
    if (most > 0 && per > most) {
        printf("over %.0f B per bucket\n", most);
        return 1;
    }
    return 0;
}
