/* names.c - the bucket and node name rule (see names.h). */
#include "common/names.h"

#include <errno.h>

int names_check(const char *name, size_t len)
{
    if (!name || len == 0 || len > NAMES_MAX)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= 0x20 || c == 0x7f)
            return -EINVAL;
    }
    return 0;
}

int names_check_bucket(const char *name, size_t len)
{
    int rc = names_check(name, len);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < len; i++)
        if (name[i] == ':')
            return -EINVAL;
    return 0;
}
