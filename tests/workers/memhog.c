/*
 * memhog - a plain-protocol test worker that allocates memory and touches
 * every page, so that a cgroup's memory.max is really reached (RLIMIT_AS
 * fails the allocation itself).
 *
 *   stdin:  {"mb": N}   (one line of JSON, as the plain protocol sends it)
 *   stdout: {"allocated_mb": N} or, when malloc fails, {"errno": "ENOMEM"}
 *
 * Built without sanitizers: AddressSanitizer reserves terabytes of address
 * space at start, which no RLIMIT_AS test could grant it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char line[256] = "";
    if (!fgets(line, sizeof(line), stdin))
        return 2;
    const char *p = strstr(line, "\"mb\"");
    long mb = p ? strtol(strchr(p + 4, ':') + 1, NULL, 10) : 64;
    char *mem = malloc((size_t)mb << 20);
    if (!mem) {
        printf("{\"errno\": \"%s\"}\n", errno == ENOMEM ? "ENOMEM" : strerror(errno));
        return 0;
    }
    for (long i = 0; i < mb << 20; i += 4096)
        mem[i] = 1;
    free(mem);
    printf("{\"allocated_mb\": %ld}\n", mb);
    return 0;
}
