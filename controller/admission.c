/* admission.c - Haechi admission control for bucket configurations. */
#include "controller/admission.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int admission_parse_mode(const char *s, admission_mode_t *out)
{
    if (s && strcmp(s, "warn") == 0)
        *out = ADMISSION_WARN;
    else if (s && strcmp(s, "enforce") == 0)
        *out = ADMISSION_ENFORCE;
    else
        return -EINVAL;
    return 0;
}

int admission_check(const bucketfile_t *bf, const admission_view_t *view, char *msg,
                    size_t msgsize)
{
    char dummy[1];
    if (!msg || msgsize == 0) {
        msg = dummy;
        msgsize = sizeof dummy;
    }
    msg[0] = '\0';
    size_t len = 0;
    int bad = 0;
    double total = 0;
    for (size_t i = 0; i < bucketfile_count(bf); i++)
        total += (double)bucketfile_get(bf, i)->reservation;
    if (!view || !(view->total_capacity > 0)) {
        snprintf(msg, msgsize, "cluster capacity unknown (no live node): not checked");
        return 0;
    }
    if (total > view->total_capacity) {
        bad++;
        len += (size_t)snprintf(msg, msgsize,
                                "total reservation %.0f IOs/s exceeds the cluster's estimated "
                                "capacity %.0f IOs/s",
                                total, view->total_capacity);
    }
    for (size_t i = 0; view->bucket_capacity && i < bucketfile_count(bf); i++) {
        const bucketfile_bucket_t *b = bucketfile_get(bf, i);
        if (b->reservation == 0)
            continue;
        double cap = view->bucket_capacity(b->name, view->arg);
        if (cap < 0 || (double)b->reservation <= cap)
            continue;
        if (bad++ < 4 && len < msgsize)
            len += (size_t)snprintf(msg + len, msgsize - len,
                                    "%sbucket %s: reservation %lld IOs/s exceeds the %.0f IOs/s "
                                    "of the servers it is placed on",
                                    len ? "; " : "", b->name, (long long)b->reservation, cap);
    }
    if (bad > 4 && len < msgsize)
        snprintf(msg + len, msgsize - len, "; and %d more", bad - 4);
    return bad ? -EDQUOT : 0;
}
