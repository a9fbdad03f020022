/* mcstats.c - the text of the memcached front's stats commands (see mcstats.h). */
#include "storage-node/mc/mcstats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
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
        static const char *const tables[] = {"none", "default", "closed"};
        fprintf(fp, "STAT bqos_bucket_table %s\r\n", tables[gs.table % 3]);
        if (gs.auth) { /* memcached's two, then bqos's by reason */
            uint64_t failed = gs.auth_failures[GATE_AUTH_UNKNOWN_USER] +
                              gs.auth_failures[GATE_AUTH_BAD_PASSWORD];
            fprintf(fp, "STAT auth_cmds %llu\r\n", (unsigned long long)(gs.auth_ok + failed));
            fprintf(fp, "STAT auth_errors %llu\r\n", (unsigned long long)failed);
            for (int i = 0; i < GATE_AUTH_NREASONS; i++)
                fprintf(fp, "STAT bqos_auth_failures_%s %llu\r\n", gate_auth_reason_names[i],
                        (unsigned long long)gs.auth_failures[i]);
        }
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
        fprintf(fp, "STAT ssl_handshake_errors %llu\r\n", /* memcached's name */
                (unsigned long long)gs.conns.tls_failed);
        fprintf(fp, "STAT bqos_conns_idle_closed %llu\r\n",
                (unsigned long long)gs.conns.idle_closed);
        fprintf(fp, "STAT bqos_conns_refused_per_ip %llu\r\n",
                (unsigned long long)gs.conns.refused_per_ip);
        fprintf(fp, "STAT bqos_conns_evicted %llu\r\n",
                (unsigned long long)gs.conns.evicted);
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

/* "tcp:ADDR:PORT" (memcached's form), "unix:PATH" or "unknown" for a
 * socket address. */
static void format_addr(const struct sockaddr_storage *ss, socklen_t len, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "";
    if (len > 0 && ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(out, cap, "tcp:%s:%u", host, ntohs(a->sin_port));
    } else if (len > 0 && ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(out, cap, "tcp6:[%s]:%u", host, ntohs(a->sin6_port));
    } else if (len > 0 && ss->ss_family == AF_UNIX) {
        const struct sockaddr_un *a = (const void *)ss;
        snprintf(out, cap, "unix:%s", a->sun_path);
    } else {
        snprintf(out, cap, "unknown");
    }
}

static int arg_is(const char *arg, size_t arglen, const char *word)
{
    size_t n = strlen(word);
    return arglen == n && memcmp(arg, word, n) == 0;
}

char *mcstats_client_text(const mcstats_t *st, int fd, const char *arg, size_t arglen,
                          size_t *len)
{
    int settings = arg_is(arg, arglen, "settings"), conns = arg_is(arg, arglen, "conns");
    int sizes = arg_is(arg, arglen, "sizes");
    int empty = arg_is(arg, arglen, "items") || arg_is(arg, arglen, "slabs") || sizes ||
                (arglen > 10 && memcmp(arg, "cachedump ", 10) == 0);
    if (!settings && !conns && !empty)
        return NULL;
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, len);
    if (!fp)
        return NULL;
    struct sockaddr_storage me = {0}, peer = {0};
    socklen_t melen = sizeof me, peerlen = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&me, &melen) < 0)
        melen = 0;
    if (getpeername(fd, (struct sockaddr *)&peer, &peerlen) < 0)
        peerlen = 0;
    if (settings) {
        unsigned port = 0;
        if (melen && me.ss_family == AF_INET)
            port = ntohs(((const struct sockaddr_in *)(const void *)&me)->sin_port);
        else if (melen && me.ss_family == AF_INET6)
            port = ntohs(((const struct sockaddr_in6 *)(const void *)&me)->sin6_port);
        fprintf(fp, "STAT maxconns %d\r\n", st->maxconns);
        fprintf(fp, "STAT tcpport %u\r\n", port);
        fprintf(fp, "STAT udpport 0\r\n");
        fprintf(fp, "STAT num_threads %d\r\n", st->threads);
        fprintf(fp, "STAT cas_enabled yes\r\n");
        fprintf(fp, "STAT binding_protocol ascii\r\n");
        fprintf(fp, "STAT item_size_max %zu\r\n", st->item_size_max);
        fprintf(fp, "STAT flush_enabled %s\r\n", st->flush_enabled ? "yes" : "no");
        fprintf(fp, "STAT meta_response_old no\r\n");
        fprintf(fp, "STAT bqos_backend %s\r\n", st->backend ? st->backend : "");
    } else if (conns) {
        char a[160], l[160];
        format_addr(&peer, peerlen, a, sizeof a);
        format_addr(&me, melen, l, sizeof l);
        fprintf(fp, "STAT %d:addr %s\r\n", fd, a);
        fprintf(fp, "STAT %d:listen_addr %s\r\n", fd, l);
        fprintf(fp, "STAT %d:state conn_parse_cmd\r\n", fd);
        fprintf(fp, "STAT %d:secs_since_last_cmd 0\r\n", fd);
    } else if (sizes) {
        fputs("STAT sizes_status disabled\r\n", fp); /* memcached's, without -o track_sizes */
    }
    fputs("END\r\n", fp);
    fclose(fp);
    return buf;
}
