/*
 * fuzz_credentials - the credential headers and their files (daemon/confine/
 * credentials.c) on arbitrary bytes. The input up to its first NUL is a
 * "headers" object's JSON; what follows is the content of the credential
 * file "api" (mode 0600, the fuzzer's own, in a directory of its own).
 *
 *   file:    td_credential_read of "api": the value is the content less one
 *            trailing newline, one line of 1 to 8192 bytes without CR, LF or
 *            NUL; anything else is refused with a reason and no value.
 *   headers: td_creds_parse of the JSON with that directory: on success each
 *            host is lower case without a trailing dot or wildcard, its port
 *            0-65535, each header named and valued (the file's value), and
 *            td_creds_find finds each host at its port; on failure a reason.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "credentials.h"
#include "fuzz_common.h"

static char dir[64];

static void cleanup(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/api", dir);
    unlink(path);
    rmdir(dir);
}

static void write_file(const char *name, const uint8_t *data, size_t size)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "cannot write %s", path);
    CHECK(size == 0 || write(fd, data, size) == (ssize_t)size, "short write");
    close(fd);
}

static void file(const uint8_t *data, size_t size)
{
    write_file("api", data, size);
    char *value = NULL, err[512] = "";
    int rc = td_credential_read(dir, "api", &value, err, sizeof(err));
    size_t want = size && data[size - 1] == '\n' ? size - 1 : size;
    bool clean = want > 0 && want <= TD_CREDENTIAL_MAX;
    for (size_t i = 0; clean && i < want; i++)
        clean = data[i] != '\r' && data[i] != '\n' && data[i] != '\0';
    if (rc == 0) {
        CHECK(value && clean, "a value from an unclean file");
        CHECK(strlen(value) == want && memcmp(value, data, want) == 0, "the value differs");
        free(value);
    } else {
        CHECK(!clean || size > TD_CREDENTIAL_MAX, "refused a clean value: %s", err);
        CHECK(*err, "no reason");
    }
}

static void headers(const char *json)
{
    json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
    if (!v)
        return;
    struct td_creds *c = NULL;
    char err[512] = "";
    if (td_creds_parse(v, &c, err, sizeof(err)) < 0) {
        CHECK(*err && !c, "a failure without a reason");
        json_decref(v);
        return;
    }
    CHECK(c, "success without creds");
    for (size_t i = 0; i < c->n; i++) {
        const struct td_cred_host *h = &c->hosts[i];
        size_t hl = strlen(h->host);
        CHECK(hl > 0 && !strchr(h->host, '*') && !strchr(h->host, '/'), "host %s", h->host);
        CHECK(h->port >= 0 && h->port <= 65535, "port %d", h->port);
        for (const char *p = h->host; *p; p++)
            CHECK(*p < 'A' || *p > 'Z', "host %s not lower case", h->host);
        CHECK(h->n > 0, "a host without headers");
        for (size_t k = 0; k < h->n; k++) {
            CHECK(h->h[k].name && *h->h[k].name, "a header without a name");
            CHECK(h->h[k].value && *h->h[k].value && !strpbrk(h->h[k].value, "\r\n"),
                  "a bad value");
            CHECK(td_creds_names(h, h->h[k].name, strlen(h->h[k].name)), "its own name");
        }
        const struct td_cred_host *f = td_creds_find(c, h->host, h->port ? (unsigned)h->port : 443);
        CHECK(f, "%s not found at its port", h->host);
    }
    td_creds_free(c);
    json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!*dir) {
        snprintf(dir, sizeof(dir), "/tmp/fuzz-creds-XXXXXX");
        CHECK(mkdtemp(dir), "no directory");
        td_credentials_dir = dir;
        atexit(cleanup);
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t jl = nul ? (size_t)(nul - data) : size;
    const uint8_t *rest = nul ? nul + 1 : data + size;
    size_t rl = size - jl - (nul ? 1 : 0);
    file(rest, rl);
    char *json = malloc(jl + 1);
    memcpy(json, data, jl);
    json[jl] = '\0';
    headers(json);
    free(json);
    return 0;
}
