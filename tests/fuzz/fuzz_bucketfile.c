/* fuzz_bucketfile.c - libFuzzer harness for the bucket file parser (common/bucketfile): garbage is refused with a position; what is accepted dumps to a text that parses to the same dump. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/bucketfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bucketfile_t *bf = NULL, *bf2 = NULL;
    jsonloc_err_t err;
    if (bucketfile_parse((const char *)data, size, "fuzz", &bf, &err) != 0)
        return 0;
    char *s = bucketfile_dumps(bf);
    if (!s)
        abort();
    if (bucketfile_parse(s, strlen(s), "dump", &bf2, &err) != 0)
        abort(); /* our own output must load back */
    char *s2 = bucketfile_dumps(bf2);
    if (!s2 || strcmp(s, s2) != 0)
        abort();
    free(s);
    free(s2);
    bucketfile_destroy(&bf);
    bucketfile_destroy(&bf2);
    return 0;
}
