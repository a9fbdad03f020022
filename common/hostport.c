/* hostport.c - network addresses as the options write them (see hostport.h). */
#include "common/hostport.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/num.h"

int hostport_split(const char *s, char *host, size_t cap, unsigned *port)
{
    const char *colon = strrchr(s, ':');
    int64_t p;
    if (!colon || colon == s || (size_t)(colon - s) >= cap ||
        num_i64_in(colon + 1, 0, 65535, &p) < 0)
        return -EINVAL;
    size_t n = (size_t)(colon - s);
    if (s[0] == '[' && n >= 2 && s[n - 1] == ']') {
        memcpy(host, s + 1, n - 2);
        host[n - 2] = '\0';
    } else {
        memcpy(host, s, n);
        host[n] = '\0';
    }
    *port = (unsigned)p;
    return 0;
}

int hostport_zmq_ipv6(const char *endpoint)
{
    return endpoint && strncmp(endpoint, "tcp://", 6) == 0 && strchr(endpoint, '[') != NULL;
}
