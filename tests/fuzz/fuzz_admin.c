/* fuzz_admin.c - libFuzzer harness for the controller's admin requests (controller/daemon/admin: admin_answer(), no socket; the changes through controller/daemon/conf): any bytes get one JSON object with "ok" back, and the configuration stays one the bucket file parser accepts. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "controller/daemon/admin.h"

/* Every run starts from this table (the file and the controller's state). */
static const char table[] =
    "{\"buckets\":[{\"name\":\"red\",\"reservation\":100,\"limit\":1000,\"weight\":2},"
    "{\"name\":\"blue\",\"reservation\":50},{\"name\":\"green\",\"reservation\":0,\"limit\":10}]}";

typedef struct {
    char path[64];
    ctrl_t *ctrl;
    pclock_t clk;
    timing_t tm;
    nodes_t nodes;
    cmetrics_t met;
    admin_t ad;
} world_t;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_admin: %s\n", what);
    abort();
}

/* The configuration in force, `table` parsed (anew at every run). */
static conf_t *table_conf(world_t *w)
{
    jsonloc_err_t err;
    char buf[600];
    bucketfile_t *bf = NULL;
    if (bucketfile_parse(table, strlen(table), "table", &bf, &err) < 0)
        die(bucketfile_strerror(&err, buf, sizeof buf));
    if (ctrl_set_buckets(w->ctrl, bf) < 0)
        die("ctrl_set_buckets");
    conf_t *c = conf_new(&(conf_config_t){.path = w->path, .mode = ADMISSION_ENFORCE,
                                          .ctrl = w->ctrl, .reply = admin_reply, .arg = &w->ad},
                         bf);
    if (!c)
        die("conf_new");
    return c;
}


/* The controller's state, made once: two nodes that said hello, metrics, the
 * buckets in a file in /dev/shm (tmpfs: "set" rewrites it with fsync). */
static world_t *world(void)
{
    static world_t w;
    static int made;
    if (made)
        return &w;
    made = 1;
    bqos_log_init("fuzz_admin", BQOS_LOG_ERROR);
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(w.path, sizeof w.path, "%s/fuzz_admin.%d.json", dir, (int)getpid());
    ctrl_config_t cc = ctrl_config_default();
    if (!(w.ctrl = ctrl_new(&cc)))
        die("ctrl_new");
    const char *names[] = {"red", "blue"};
    if (ctrl_node_hello(w.ctrl, "n1", 1, 1000, 1, names, 2) < 0 ||
        ctrl_node_hello(w.ctrl, "n2", 2, 0, 1, names, 1) < 0)
        die("ctrl_node_hello");
    pclock_init(&w.clk, cc.period_s, cc.intervals, 0, 0);
    nodes_init(&w.nodes, NULL, w.ctrl, &w.clk, &w.tm.cur, &(nodes_hooks_t){0});
    if (cmetrics_init(&w.met, w.ctrl, &w.nodes, &w.tm, &w.clk, NULL) < 0)
        die("cmetrics_init");
    w.ad = (admin_t){.ctrl = w.ctrl, .clk = &w.clk, .nodes = &w.nodes, .tm = &w.tm,
                     .met = &w.met};
    return &w;
}

/* Back to `table`, in the file and in force. */
static void reset(world_t *w)
{
    FILE *f = fopen(w->path, "w");
    if (!f || fputs(table, f) < 0 || fclose(f) != 0)
        die("cannot write the bucket file");
    /* The table replaced behind the admin's back: its journal and its
     * admission sums go with the old one (a new conf_t). */
    admin_close(&w->ad);
    conf_destroy(&w->ad.conf);
    char jp[sizeof w->path + 16];
    snprintf(jp, sizeof jp, "%s.journal", w->path);
    unlink(jp);
    w->ad.conf = table_conf(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    world_t *w = world();
    reset(w);
    proto_peer_t peer = {0};
    char *text = admin_answer(&w->ad, (const char *)data, size, &peer);
    if (!text)
        return 0; /* out of memory */
    json_error_t jerr;
    json_t *r = json_loads(text, 0, &jerr);
    if (!json_is_object(r) || !json_is_boolean(json_object_get(r, "ok")))
        die("a reply that is not an object with \"ok\"");
    json_decref(r);
    free(text);
    /* What is in force dumps to a file that loads back. */
    char *dump = bucketfile_dumps(conf_table(w->ad.conf));
    bucketfile_t *back = NULL;
    jsonloc_err_t err;
    if (!dump || bucketfile_parse(dump, strlen(dump), "dump", &back, &err) != 0)
        die("the configuration in force does not load back");
    free(dump);
    bucketfile_destroy(&back);
    return 0;
}
