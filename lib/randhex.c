/*
 * randhex.c - random bytes, raw or as hex (randhex.h).
 */
#include <errno.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>

#include "randhex.h"

int te_random_bytes(void *buf, size_t len)
{
    uint8_t *b = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(b + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        got += (size_t)n;
    }
    return 0;
}

int te_random_hex(char *hex, size_t nbytes)
{
    uint8_t b[64];
    static const char digits[] = "0123456789abcdef";
    size_t o = 0;
    /* in pieces: a long id needs no buffer of its size */
    while (o < nbytes) {
        size_t k = nbytes - o < sizeof(b) ? nbytes - o : sizeof(b);
        int rc = te_random_bytes(b, k);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < k; i++, o++) {
            hex[2 * o] = digits[b[i] >> 4];
            hex[2 * o + 1] = digits[b[i] & 15];
        }
    }
    hex[2 * nbytes] = '\0';
    return 0;
}
