/* rules_bench.c - bqos-rules-bench: CPU time of one classification (rules_match()) against a list of N rules (docs/performance.md, "Rules"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rules.h"

/* A list shaped like a tenant table: per user a read rule and a write rule
 * (exact user, an op class), some CIDR rules, some key globs, a template
 * and a final deny.  Returns the JSON text (caller frees). */
static char *make_list(int n)
{
    char *t = malloc((size_t)n * 160 + 64), *w = t;
    w += sprintf(w, "[");
    int i = 0;
    for (; i < n - 4; i++) {
        switch (i % 4) {
        case 0:
            w += sprintf(w, "{\"user\":\"user%d\",\"op\":\"write\",\"bucket\":\"w%d\"},", i, i);
            break;
        case 1:
            w += sprintf(w, "{\"user\":\"user%d\",\"op\":[\"read\",\"touch\"],\"bucket\":\"r%d\"},",
                         i - 1, i);
            break;
        case 2:
            w += sprintf(w, "{\"addr\":\"10.%d.0.0/16\",\"key\":\"k%d*\",\"bucket\":\"a%d\"},",
                         i % 256, i, i);
            break;
        default:
            w += sprintf(w, "{\"user\":\"svc-%d-*\",\"key\":\"p%d\",\"bucket\":\"g%d\"},", i, i, i);
        }
    }
    w += sprintf(w, "{\"addr\":\"192.168.0.0/16\",\"op\":\"delete\",\"deny\":true},"
                    "{\"user\":\"*\",\"template\":\"t-{user}\",\"reservation\":10},"
                    "{\"addr\":\"::/0\",\"bucket\":\"v6\"},"
                    "{\"deny\":true}]");
    (void)i;
    return t;
}

/* CPU seconds of this process: other jobs on the machine do not count. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double run(const rules_t *r, const rules_subject_t *s, int ns, long iters, int *hit)
{
    rules_result_t res;
    double t0 = cpu_now();
    int sum = 0;
    for (long k = 0; k < iters; k++)
        sum += rules_match(r, &s[k % ns], &res) + res.rule;
    double t = cpu_now() - t0;
    *hit = sum;
    return t * 1e9 / (double)iters;
}

int main(int argc, char **argv)
{
    int n = 100;
    long iters = 2000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rules") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            iters = atol(argv[++i]);
        else {
            printf("Usage: bqos-rules-bench [--rules N] [--iterations N]\n\n"
                   "Times rules_match() (common/rules.c) against N rules (default 100, at least\n"
                   "8): a subject matching the first rule, one matching late, a template\n"
                   "match and one matching no rule but the final deny; prints CPU ns per match.\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (n < 8 || n > RULES_MAX || iters < 1)
        return 2;
    char *text = make_list(n);
    rules_t *r = NULL;
    jsonloc_err_t err;
    if (rules_parse(text, strlen(text), "bench", &r, &err) != 0) {
        fprintf(stderr, "bqos-rules-bench: %s: %s\n", err.path, err.text);
        return 1;
    }
    free(text);
    static char users[4][32];
    snprintf(users[0], 32, "user0");
    snprintf(users[1], 32, "user%d", (n - 8) / 4 * 4);
    snprintf(users[2], 32, "carol");
    snprintf(users[3], 32, "svc-3-x");
    rules_subject_t cases[4][1];
    const char *labels[4] = {"first rule", "late rule (read of the last user)", "template (unknown user)",
                             "no user, v4: final deny"};
    for (int c = 0; c < 4; c++) {
        rules_subject_t s = {.user = users[c], .op = c == 1 ? RULES_OP_READ : RULES_OP_WRITE,
                             .name = "somekey", .name_len = 7, .family = 4};
        s.addr[0] = 172;
        if (c == 3)
            s.user = NULL;
        cases[c][0] = s;
    }
    rules_result_t res;
    printf("%d rules, %ld iterations per case\n", n, iters);
    for (int c = 0; c < 4; c++) {
        int hit;
        run(r, cases[c], 1, iters / 10, &hit); /* warm */
        double ns = run(r, cases[c], 1, iters, &hit);
        rules_match(r, cases[c], &res);
        printf("  %-36s rule %4d  %7.1f ns per match\n", labels[c], res.rule, ns);
    }
    rules_destroy(&r);
    return 0;
}
