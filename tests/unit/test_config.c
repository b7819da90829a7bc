/* Unit tests of daemon/base/config.c on its own (a leaf: nothing else of the
 * daemon is linked): --default-limits parsing, the size options, and the
 * defaults that follow other options. */
#include <errno.h>
#include <stdint.h>

#include "check.h"
#include "config.h"

static void limits(void)
{
    struct td_limits l = {.processes = 7};
    char err[256] = "";
    CHECK(td_limits_parse("cpu_ms=100,memory_mb=64", &l, err, sizeof(err)) == 0);
    CHECK(l.cpu_ms == 100 && l.memory_mb == 64);
    CHECK(l.processes == 7 && l.open_files == 0); /* the others untouched */
    CHECK(td_limits_parse("open_files=9,bogus=1", &l, err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "\"bogus\": unknown limit") != NULL);
    const char *bad[] = {"cpu_ms=0", "cpu_ms=-1", "cpu_ms", "cpu_ms=1x", "cpu_ms="};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK(td_limits_parse(bad[i], &l, err, sizeof(err)) == -EINVAL);
        CHECK(strstr(err, "expected KEY=N with N a positive integer") != NULL);
    }
    CHECK(td_limits_set(&l, "output_mb", 5) == 0 && l.output_mb == 5);
    CHECK(td_limits_set(&l, "output", 5) == -EINVAL);
}

static void sizes(void)
{
    uint64_t v = 0;
    CHECK(td_config_parse_size("10", 10, &v) && v == 10);
    CHECK(!td_config_parse_size("11", 10, &v));
    CHECK(!td_config_parse_size("0", 10, &v));
    CHECK(!td_config_parse_size("-1", UINT32_MAX, &v));
    CHECK(!td_config_parse_size("4294967296", UINT32_MAX, &v));
    CHECK(!td_config_parse_size("", 10, &v));
    CHECK(!td_config_parse_size("3k", 10, &v));
}

static void resolve(void)
{
    struct td_config saved = td_cfg;
    /* the built-in defaults */
    CHECK(td_config_resolve() == 0);
    CHECK(td_cfg.max_clients_per_uid == 128); /* 512 / 4 */
    CHECK(td_cfg.max_queued_calls == 4096);   /* 4 x 1024 */
    CHECK(td_cfg.max_request_buffer == 64u << 20);

    /* a small --max-clients still serves one user with all of them */
    td_cfg = saved;
    td_cfg.max_clients = 8;
    td_cfg.max_batch_calls = 2000;
    td_cfg.max_request = 32u << 20;
    CHECK(td_config_resolve() == 0);
    CHECK(td_cfg.max_clients_per_uid == 8);
    CHECK(td_cfg.max_queued_calls == 8000);
    CHECK(td_cfg.max_request_buffer == 128u << 20);

    /* limits that would refuse every full batch or longest line */
    td_cfg = saved;
    td_cfg.max_queued_calls = 10;
    CHECK(td_config_resolve() == -1);
    td_cfg = saved;
    td_cfg.max_request_buffer = 1000;
    CHECK(td_config_resolve() == -1);
    td_cfg = saved;
}

int main(void)
{
    limits();
    sizes();
    resolve();
    CHECK_DONE();
}
