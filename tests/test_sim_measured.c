/* test_sim_measured.c - Check suite of workloads/sim/sim_measured: bqos-load's outputs read into a result the property test's checker judges; garbage refused with file and line; the checker fails a measured miss. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workloads/report.h"
#include "workloads/scenario.h"
#include "workloads/sim/sim_measured.h"
#include "workloads/sim/sim_model.h"
#include "workloads/sim/sim_prop.h"
#include "tests/testlib.h"

/* Two servers of 1,000 IOs/s, RTT0 1 ms + 1 ms of service; a: R 600 on s1,
 * 4 in flight (2,000/s allowed: inside the guarantee), limit 700; b: R 200
 * on s1 and s2, 4 in flight each; 4 periods of 1 s, the first warm-up.  A
 * runtime set raises a's limit to 900 from period 3 (0-based: from 3 s on,
 * the files' period 4). */
static const char scen_text[] =
    "{\"duration\": 4, \"period\": 1, \"intervals\": 5, \"warmup_periods\": 1,"
    " \"capacity\": 1000, \"workload\": {\"rtt_ms\": 1},"
    " \"servers\": [{\"name\": \"s1\", \"address\": \"127.0.0.1:1\"},"
    "               {\"name\": \"s2\", \"address\": \"127.0.0.1:2\"}],"
    " \"buckets\": [{\"name\": \"a\", \"reservation\": 600, \"limit\": 700, \"servers\": [\"s1\"],"
    "                \"outstanding\": 4,"
    "                \"set\": [{\"period\": 3, \"reservation\": 600, \"limit\": 900}]},"
    "               {\"name\": \"b\", \"reservation\": 200, \"servers\": [\"s1\", \"s2\"],"
    "                \"outstanding\": 4}]}";

static char dir[64];
static scenario_t *sc;
static sim_model_t *m;

static void setup(void)
{
    jsonloc_err_t je;
    char err[256];
    strcpy(dir, "/tmp/test_sim_measured.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_msg(scenario_parse(scen_text, strlen(scen_text), "t", NULL, &sc, &je) == 0, "%s",
                  je.text);
    sim_config_t run = sim_config_default();
    run.warmup = 0;
    ck_assert_msg(sim_model_from_scenario(sc, &run, &m, err, sizeof err) == 0, "%s", err);
}

static void put(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void teardown(void)
{
    const char *names[] = {"periods.csv", "servers.csv", "summary.json"};
    char path[128];
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    sim_model_destroy(&m);
    scenario_destroy(&sc);
}

static const char servers_ok[] = "period,server,completed\n1,s1,900\n1,s2,800\n2,s1,950\n2,s2,800\n"
                                 "3,s1,950\n3,s2,800\n4,s1,950\n4,s2,800\n";

/* a's served per period 1..4 (b gets 200 each). */
static void periods(int a1, int a2, int a3, int a4)
{
    char text[512];
    snprintf(text, sizeof text,
             "period,bucket,reservation,limit,completed,met,over\n"
             "1,a,600,700,%d,1,0\n1,b,200,,200,1,0\n2,a,600,700,%d,1,0\n2,b,200,,200,1,0\n"
             "3,a,600,700,%d,1,0\n3,b,200,,200,1,0\n4,a,600,700,%d,1,0\n4,b,200,,200,1,0\n",
             a1, a2, a3, a4);
    put("periods.csv", text);
}

START_TEST(test_sim_measured_reads_what_bqos_load_wrote)
{
    char err[256];
    sim_result_t *r = NULL;
    periods(100, 650, 690, 880);
    put("servers.csv", servers_ok);
    ck_assert_msg(sim_measured_load(sc, m, dir, &r, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(r->periods, 3);          /* after the warm-up */
    ck_assert_uint_eq(r->served[0], 650);     /* period 2, a */
    ck_assert_uint_eq(r->served[1], 200);
    ck_assert_uint_eq(r->delivered[2], 950);  /* period 3, s1 */
    /* 1 s windows are the periods, against the set's limit in the last:
     * 880 / 900 there, below period 3's 690 / 700. */
    ck_assert_double_eq_tol(r->win[REPORT_WIN_LONG].l_worst, 690.0 / 700, 1e-9);
    sim_prop_verdict_t v;
    ck_assert_int_eq(sim_prop_check(m, r, &v), 0);
    ck_assert_uint_eq(v.fit, 3);
    ck_assert_uint_eq(v.judged, 6);
    ck_assert_uint_eq(v.met99, 6);
    ck_assert_uint_eq(v.l_over, 0);
    sim_result_destroy(&r);
}
END_TEST

/* The checker fails what it must on measured service: a at half its R in
 * period 3 (judged: 4 in flight allow 2,000/s, s1 delivered enough), and
 * over its limit in period 4. */
START_TEST(test_sim_measured_checker_fails_a_measured_miss)
{
    char err[256];
    sim_result_t *r = NULL;
    periods(600, 600, 300, 950);
    put("servers.csv", servers_ok);
    ck_assert_msg(sim_measured_load(sc, m, dir, &r, err, sizeof err) == 0, "%s", err);
    sim_prop_verdict_t v;
    ck_assert_int_eq(sim_prop_check(m, r, &v), 0);
    ck_assert_uint_eq(v.judged, 6);
    ck_assert_uint_eq(v.below90, 1);
    ck_assert_double_eq_tol(v.worst, 0.5, 1e-9);
    ck_assert_int_eq(v.worst_bucket, 0);
    ck_assert_int_eq(v.worst_period, 2);
    ck_assert_uint_eq(v.l_over, 1);
    ck_assert_double_eq_tol(v.l_win_worst, 950.0 / 900, 1e-9);
    sim_result_destroy(&r);
}
END_TEST

static void refused(const char *want)
{
    char err[256];
    sim_result_t *r = (sim_result_t *)1;
    ck_assert_int_eq(sim_measured_load(sc, m, dir, &r, err, sizeof err), -EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(err, want) != NULL, "'%s' lacks '%s'", err, want);
}

START_TEST(test_sim_measured_refuses_garbage_with_file_and_line)
{
    periods(600, 600, 600, 600);
    put("servers.csv", "period,server,completed\n1,s1,900\n1,s9,800\n");
    refused("servers.csv:3: \"s9\" is not in the scenario");
    put("servers.csv", "period,server,completed\n1,s1,9x\n");
    refused("servers.csv:2: count \"9x\" is not a whole number");
    put("servers.csv", "period,server,completed\n1,s1,900\n");
    refused("no row for period 1 of \"s2\"");
    put("servers.csv", "period,server,completed\n1,s1,900\n1,s2,800\n1,s1,900\n");
    refused("servers.csv:4: period 1 of \"s1\" again");
    put("servers.csv", "period,server,completed\n0,s1,900\n");
    refused("servers.csv:2: period \"0\" is not 1..4");
    put("servers.csv", "period,server\n");
    refused("servers.csv:1: header");
    put("servers.csv", "period,server,completed\n1,s1,900,7\n");
    refused("servers.csv:2: 3 fields expected");
    /* only the warm-up period measured */
    put("servers.csv", "period,server,completed\n1,s1,900\n1,s2,800\n");
    refused("none after the 1 of warm-up");
}
END_TEST

/* What bqos-load writes (report_write_servers()) is what the reader takes:
 * per server and period, the IOs of every bucket there. */
START_TEST(test_sim_measured_reads_report_servers_csv)
{
    report_t *rep = report_new(sc);
    ck_assert_ptr_nonnull(rep);
    report_add(rep, 0, 0, 0.5);
    report_add(rep, 1, 0, 1.5);
    report_add(rep, 1, 1, 1.7);
    report_add(rep, 0, 0, 3.9);
    report_set_end(rep, 4);
    char path[128];
    snprintf(path, sizeof path, "%s/servers.csv", dir);
    FILE *f = fopen(path, "w");
    ck_assert_int_eq(report_write_servers(rep, f), 0);
    fclose(f);
    snprintf(path, sizeof path, "%s/periods.csv", dir);
    f = fopen(path, "w");
    ck_assert_int_eq(report_write_periods(rep, f), 0);
    fclose(f);
    report_destroy(&rep);
    char err[256];
    sim_result_t *r = NULL;
    ck_assert_msg(sim_measured_load(sc, m, dir, &r, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(r->periods, 3);
    ck_assert_uint_eq(r->delivered[0], 1); /* period 2: s1 one (b), s2 one (b) */
    ck_assert_uint_eq(r->delivered[1], 1);
    ck_assert_uint_eq(r->delivered[4], 1); /* period 4: s1 one (a) */
    ck_assert_uint_eq(r->served[0 * 2 + 1], 2);
    ck_assert_uint_eq(r->served[2 * 2 + 0], 1);
    sim_result_destroy(&r);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_sim_measured_reads_what_bqos_load_wrote,
                                  test_sim_measured_checker_fails_a_measured_miss,
                                  test_sim_measured_refuses_garbage_with_file_and_line,
                                  test_sim_measured_reads_report_servers_csv};
    const testlib_case_t c = {.name = "sim_measured", .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
