/* mcstats.c - the text of the memcached front's stats commands (see mcstats.h). */
#include "storage-node/mc/mcstats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/version.h"

/* Limits and roll-out (issue 28): the counters since the start, as
 * /metrics has them; a bucket in shadow also says so and what its limit
 * would have held. */
static void limit_lines(FILE *fp, const char *nm, const sched_bucket_stats_t *bs)
{
    fprintf(fp, "STAT %s:waited_for_limit %llu\r\n", nm,
            (unsigned long long)bs->waited_limit_total);
    fprintf(fp, "STAT %s:near_limit %llu\r\n", nm, (unsigned long long)bs->near_limit_total);
    if (bs->shadow)
        fprintf(fp, "STAT %s:shadow 1\r\nSTAT %s:shadow_held %llu\r\n", nm, nm,
                (unsigned long long)bs->shadow_held_total);
}

char *mcstats_text(const mcstats_t *st, const gate_t *g, const char *arg, size_t arglen,
                   size_t *len)
{
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, len);
    if (!fp)
        return NULL;
    if (arglen == 0) {
        gate_stats_t gs;
        gate_stats(g, &gs);
        fprintf(fp, "STAT pid %ld\r\n", (long)getpid());
        fprintf(fp, "STAT uptime %ld\r\n", (long)(time(NULL) - st->started));
        fprintf(fp, "STAT time %ld\r\n", (long)time(NULL));
        fprintf(fp, "STAT version %s\r\n", BQOS_MEMCACHED_VERSION);
        fprintf(fp, "STAT curr_connections %d\r\n", gs.conns.open);
        fprintf(fp, "STAT total_connections %llu\r\n", (unsigned long long)gs.conns.total);
        fprintf(fp, "STAT cmd_get %llu\r\n", (unsigned long long)st->cmd_get);
        fprintf(fp, "STAT cmd_set %llu\r\n", (unsigned long long)st->cmd_set);
        fprintf(fp, "STAT cmd_touch %llu\r\n", (unsigned long long)st->cmd_touch);
        fprintf(fp, "STAT get_hits %llu\r\n", (unsigned long long)st->get_hits);
        fprintf(fp, "STAT get_misses %llu\r\n", (unsigned long long)st->get_misses);
        fprintf(fp, "STAT threads %d\r\n", st->threads);
        fprintf(fp, "STAT bqos_node %s\r\n", st->name);
        fprintf(fp, "STAT bqos_policy %s\r\n",
                gs.policy == SCHED_POLICY_RR ? "rr" : "tokens");
        fprintf(fp, "STAT bqos_buckets %d\r\n", gs.buckets);
        fprintf(fp, "STAT bqos_outstanding %d\r\n", gs.inflight);
        fprintf(fp, "STAT bqos_rejected %llu\r\n", (unsigned long long)st->rejected);
        fprintf(fp, "STAT bqos_backend_errors %llu\r\n",
                (unsigned long long)st->backend_errors);
        fprintf(fp, "STAT bqos_completions %llu\r\n",
                (unsigned long long)gs.node.completions);
        fprintf(fp, "STAT bqos_busy_seconds %.6f\r\n", gs.node.busy_seconds);
        fprintf(fp, "STAT bqos_window %d\r\n", gs.window.window);
        fprintf(fp, "STAT bqos_window_latency_us %.1f\r\n", gs.window.latency * 1e6);
        fprintf(fp, "STAT bqos_window_base_us %.1f\r\n", gs.window.base * 1e6);
        fprintf(fp, "STAT bqos_window_throughput %.0f\r\n", gs.window.throughput);
        /* requests waiting at the node, beside the window's at the backend */
        fprintf(fp, "STAT bqos_queued %llu\r\n", (unsigned long long)gs.queued);
        fprintf(fp, "STAT bqos_conns_idle_closed %llu\r\n",
                (unsigned long long)gs.conns.idle_closed);
        fprintf(fp, "STAT bqos_conns_refused_per_ip %llu\r\n",
                (unsigned long long)gs.conns.refused_per_ip);
        fprintf(fp, "STAT bqos_accept_pauses %llu\r\n",
                (unsigned long long)gs.conns.accept_pauses);
        if (gs.status)
            gs.status(gs.status_arg, fp);
    } else if (arglen == 7 && memcmp(arg, "buckets", 7) == 0) {
        sched_bucket_stats_t bs;
        const char *nm;
        for (int b = 0; (nm = gate_bucket_stats(g, b, &bs)) != NULL; b++) {
            fprintf(fp, "STAT %s:queued %llu\r\n", nm, (unsigned long long)bs.queued);
            fprintf(fp, "STAT %s:arrivals %llu\r\n", nm, (unsigned long long)bs.arrivals);
            fprintf(fp, "STAT %s:served_r %llu\r\n", nm, (unsigned long long)bs.served_r);
            fprintf(fp, "STAT %s:served_l %llu\r\n", nm, (unsigned long long)bs.served_l);
            fprintf(fp, "STAT %s:served_o %llu\r\n", nm, (unsigned long long)bs.served_o);
            fprintf(fp, "STAT %s:r_tokens %lld\r\n", nm, (long long)bs.r_tokens);
            if (bs.l_tokens == SCHED_UNLIMITED)
                fprintf(fp, "STAT %s:l_tokens unlimited\r\n", nm);
            else
                fprintf(fp, "STAT %s:l_tokens %lld\r\n", nm, (long long)bs.l_tokens);
            fprintf(fp, "STAT %s:weight %u\r\n", nm, (unsigned)bs.weight);
            if (bs.units_on) { /* units of --cost-unit bytes (< 0: a debt) */
                fprintf(fp, "STAT %s:ru_tokens %lld\r\n", nm, (long long)bs.ru_tokens);
                if (bs.lu_tokens == SCHED_UNLIMITED)
                    fprintf(fp, "STAT %s:lu_tokens unlimited\r\n", nm);
                else
                    fprintf(fp, "STAT %s:lu_tokens %lld\r\n", nm, (long long)bs.lu_tokens);
            }
            fprintf(fp, "STAT %s:held ", nm); /* why it waits, e.g. byte_credit */
            if (!bs.held)
                fputs("none", fp);
            for (int i = 0, sep = 0; i < SCHED_HELD_NREASONS; i++)
                if (bs.held & (1 << i))
                    fprintf(fp, "%s%s", sep++ ? "," : "", sched_held_reason(i));
            fputs("\r\n", fp);
            limit_lines(fp, nm, &bs);
        }
    } else {
        fclose(fp);
        free(buf);
        return NULL;
    }
    fputs("END\r\n", fp);
    fclose(fp);
    return buf;
}
