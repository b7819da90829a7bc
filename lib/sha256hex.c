/*
 * sha256hex.c - SHA-256 as hex (sha256hex.h).
 */
#include <stdint.h>
#include <stdio.h>

#include <nettle/sha2.h>

#include "sha256hex.h"

void te_sha256_hex(const void *data, size_t len, char *hex)
{
    struct sha256_ctx ctx;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, (const uint8_t *)data);
    sha256_digest(&ctx, sizeof(d), d);
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof(d); i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[2 * sizeof(d)] = '\0';
}
