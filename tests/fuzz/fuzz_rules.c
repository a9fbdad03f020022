/* fuzz_rules.c - libFuzzer harness for the rule syntax (common/rules): garbage is refused with a position; an accepted list dumps to a text that parses to the same list, its analysis runs, and a match of subjects made from the input stays within the list. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rules.h"

static void ignore(void *arg, size_t i, const char *text)
{
    (void)arg;
    (void)i;
    (void)text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rules_t *r = NULL, *r2 = NULL;
    jsonloc_err_t err;
    if (rules_parse((const char *)data, size, "fuzz", &r, &err) != 0) {
        if (!err.text[0])
            abort(); /* every refusal says why */
        return 0;
    }
    char *s = rules_dumps(r);
    if (!s || rules_parse(s, strlen(s), "dump", &r2, &err) != 0 || !rules_equal(r, r2))
        abort(); /* our own output must load back to the same list */
    rules_analyze(r, ignore, NULL);
    /* subjects from the input's bytes: every op, IPv4 and IPv6, with and
     * without identities */
    char user[32];
    size_t ul = size < sizeof user - 1 ? size : sizeof user - 1;
    memcpy(user, data, ul);
    user[ul] = 0;
    for (int op = 0; op < RULES_OP_COUNT; op++) {
        rules_subject_t sj = {.user = op % 2 ? user : NULL, .cert_name = op % 3 ? NULL : user,
                              .psk_id = op == 5 ? user : NULL, .family = op % 2 ? 4 : 6,
                              .op = (rules_op_t)op, .name = (const char *)data,
                              .name_len = size < 64 ? size : 64};
        memcpy(sj.addr, data, size < 16 ? size : 16);
        rules_result_t res;
        rules_action_t a = rules_match(r, &sj, &res);
        if (a != RULES_NONE && (res.rule < 0 || (size_t)res.rule >= rules_count(r)))
            abort();
        if ((a == RULES_BUCKET || a == RULES_TEMPLATE) && (!res.bucket || !res.bucket[0]))
            abort();
    }
    free(s);
    rules_destroy(&r);
    rules_destroy(&r2);
    return 0;
}
