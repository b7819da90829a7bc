/* Numbers pass through as written: reals in their
 * shortest round-tripping form (19.99, not 19.989999999999998), integers
 * beyond 64 bits and reals beyond a double unchanged, through every lib path
 * that reads or writes JSON (a worker's response, content, JSON lines), and
 * the schema validator compares them exactly. */
#include <errno.h>
#include <math.h> /* isfinite: a macro, no libm */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "toolexec.h"

/* A response {"KEY": value} through te_response_parse(), of that kind, and
 * back out as content. */
static void content_of(const char *key, int want_kind, const char *value, const char *want)
{
    char body[512], err[256];
    snprintf(body, sizeof(body), "{\"%s\":%s}", key, value);
    json_t *res = NULL;
    int kind = te_response_parse(body, strlen(body), &res, err, sizeof(err));
    CHECK(kind == want_kind);
    if (kind != want_kind) {
        fprintf(stderr, "  %s: %s\n", body, err);
        json_decref(res);
        return;
    }
    size_t len;
    int rc = 0;
    char *text = te_content_encode(res, 1 << 20, &len, &rc);
    CHECK_STR(text, want);
    free(text);
    json_decref(res);
}

static void response_content(const char *ok_value, const char *want)
{
    content_of("ok", TE_RESULT_OK, ok_value, want);
}

/* An error response's reason, as its content {"error": TEXT}. */
static void error_content(const char *reason, const char *want)
{
    content_of("error", TE_RESULT_ERROR, reason, want);
}

/* text through te_json_loads() and te_json_dumps() */
static void round_trip(const char *text, const char *want)
{
    json_error_t jerr;
    json_t *v = te_json_loads(text, JSON_DECODE_ANY, &jerr);
    CHECK(v != NULL);
    if (!v) {
        fprintf(stderr, "  %s: %s\n", text, jerr.text);
        return;
    }
    char *back = te_json_dumps(v, JSON_ENCODE_ANY, NULL);
    CHECK_STR(back, want ? want : text);
    free(back);
    json_decref(v);
}

static void faithful(void)
{
    round_trip("{\"price\":19.99,\"qty\":0.1}", NULL);
    round_trip("59.97", NULL);
    round_trip("[0.30000000000000004,1.0,-2.5,1e22,5e-324,1.7976931348623157e308]", NULL);
    round_trip("[1E22,1e+22,100.0e0,1e-400,0.001,1e-5]", "[1e22,1e22,100.0,1e-400,0.001,1e-5]");
    round_trip("18446744073709551616", NULL);
    round_trip("{\"n\":18446744073709551616,\"m\":-99999999999999999999999999}", NULL);
    round_trip("[1e400,-1e400,1e-400,9223372036854775807,-9223372036854775808]", NULL);
    round_trip("{\"a\":[{\"deep\":[340282366920938463463374607431768211456]}],\"s\":\"1e400\"}",
               NULL);
    /* A string that spells a number stays a string, whatever it says. */
    round_trip("[\"18446744073709551616\",\"te-num#0\",18446744073709551616]", NULL);

    response_content("{\"price\":19.99,\"qty\":0.1}", "{\"price\":19.99,\"qty\":0.1}");
    response_content("18446744073709551616", "18446744073709551616");
    response_content("59.97", "59.97");
    /* a reason that is not a string is its JSON text, a number past a
     * double's range too (it was written raw: {"error":5e1021}, no JSON) */
    error_content("5e1021", "{\"error\":\"5e1021\"}");
    error_content("19.99", "{\"error\":\"19.99\"}");
    error_content("\"x\"", "{\"error\":\"x\"}");

    /* JSON lines, the daemon's and the client's wire format */
    json_t *v = json_pack("{s:f}", "total", 19.99 * 3);
    size_t len;
    char *line = te_lines_dump(v, &len);
    CHECK(line && len == strlen("{\"total\":59.97}\n") &&
          memcmp(line, "{\"total\":59.97}\n", len) == 0);
    free(line);
    json_decref(v);
}

/* Everything but reals and raw numbers is jansson's own compact text. */
static void same_as_jansson(void)
{
    const char *texts[] = {
        "{\"a\":\"tab\\there \\\"q\\\" \\\\ \\/ \\u0001\\u001f \\u00e9 \\ud83d\\ude00\",\"b\":[]}",
        "[null,true,false,{},[[]],-0,42,\"\"]",
        "{\"nul\":\"a\\u0000b\",\"\\n\":{\"x\":[1,2,{\"y\":null}]}}",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        json_t *v = json_loads(texts[i], JSON_ALLOW_NUL, NULL);
        CHECK(v != NULL);
        char *a = json_dumps(v, JSON_COMPACT), *b = te_json_dumps(v, 0, NULL);
        CHECK_STR(b, a);
        free(a);
        free(b);
        json_decref(v);
    }
    /* not an object or array: only with JSON_ENCODE_ANY */
    json_t *s = json_string("x");
    CHECK(te_json_dumps(s, 0, NULL) == NULL);
    json_decref(s);
}

/* Raw numbers cannot be forged by input: no parsed string is one. */
static void unforgeable(void)
{
    json_t *v = te_json_loads("[\"\\u00c0\\u0080123\",\"\\u0000123\"]", JSON_ALLOW_NUL, NULL);
    CHECK(v && !te_json_is_rawnum(json_array_get(v, 0)) &&
          !te_json_is_rawnum(json_array_get(v, 1)));
    json_decref(v);
    json_error_t jerr;
    CHECK(te_json_loads("[18446744073709551616,", 0, &jerr) == NULL);
    CHECK(te_json_loads("{\"a\":1e400 x}", 0, &jerr) == NULL);
}

/* 1 valid, 0 invalid */
static int valid(const char *schema_text, const char *inst_text)
{
    json_t *sj = te_json_loads(schema_text, 0, NULL),
           *inst = te_json_loads(inst_text, JSON_DECODE_ANY, NULL);
    te_schema *s = NULL;
    char err[256];
    int rc = -1;
    if (sj && inst && te_schema_compile(sj, &s, err, sizeof(err)) == 0)
        rc = te_schema_validate(s, inst, NULL) == 0;
    else
        fprintf(stderr, "  cannot compile %s: %s\n", schema_text, err);
    te_schema_free(s);
    json_decref(sj);
    json_decref(inst);
    return rc;
}

static void schema_compares_exactly(void)
{
    CHECK(valid("{\"type\":\"integer\"}", "18446744073709551616") == 1);
    CHECK(valid("{\"type\":\"string\"}", "18446744073709551616") == 0);
    CHECK(valid("{\"type\":\"number\"}", "1e400") == 1);
    CHECK(valid("{\"type\":\"integer\"}", "1e-400") == 0);
    CHECK(valid("{\"maximum\":18446744073709551615}", "18446744073709551616") == 0);
    CHECK(valid("{\"maximum\":18446744073709551616}", "18446744073709551616") == 1);
    CHECK(valid("{\"minimum\":18446744073709551616}", "9223372036854775807") == 0);
    CHECK(valid("{\"exclusiveMaximum\":1e400}", "1e399") == 1);
    CHECK(valid("{\"exclusiveMaximum\":1e400}", "1e401") == 0);
    CHECK(valid("{\"maximum\":19.99}", "19.99") == 1);
    CHECK(valid("{\"maximum\":19.99}", "19.990000000000002") == 0);
    CHECK(valid("{\"multipleOf\":2}", "18446744073709551616") == 1);
    CHECK(valid("{\"multipleOf\":3}", "18446744073709551616") == 0);
    CHECK(valid("{\"multipleOf\":0.01}", "19.99") == 1);
    CHECK(valid("{\"multipleOf\":0.01}", "123456789012345678901234.56") == 1);
    CHECK(valid("{\"const\":18446744073709551616}", "18446744073709551616") == 1);
    CHECK(valid("{\"const\":18446744073709551616}", "18446744073709551617") == 0);
    CHECK(valid("{\"const\":18446744073709551616}", "\"18446744073709551616\"") == 0);
    CHECK(valid("{\"enum\":[1,18446744073709551616.0]}", "18446744073709551616") == 1);
    CHECK(valid("{\"uniqueItems\":true}", "[18446744073709551616,18446744073709551616]") == 0);
    CHECK(valid("{\"uniqueItems\":true}", "[18446744073709551616,\"18446744073709551616\"]") == 1);
}

/* te_json_real_text() against its definition, the search it takes when its
 * arithmetic does not apply: the fewest %e digits that read back, laid out
 * positionally from 1e-4 to 1e16, else as an exponent without '+' or
 * leading zeros; ".0" on an integer. Durations, prices, powers of ten and
 * random bit patterns: the arithmetic path must write the same text. */
static void by_definition(double d, char *buf, size_t size)
{
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, size, "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    snprintf(buf, size, "%.*e", prec - 1, d);
    char *e = strchr(buf, 'e');
    int exp = atoi(e + 1);
    if (exp >= -4 && exp < 16) {
        int decimals = prec - 1 - exp;
        snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, d);
    } else {
        char *p = e + 1, *w = e + 1;
        if (*p == '-')
            *w++ = *p++;
        else if (*p == '+')
            p++;
        while (*p == '0' && p[1])
            p++;
        memmove(w, p, strlen(p) + 1);
    }
    if (!strchr(buf, '.') && !strchr(buf, 'e'))
        strcat(buf, ".0");
}

static unsigned mismatches;

static void same_text(double d)
{
    char want[64], got[64];
    if (!isfinite(d))
        return;
    by_definition(d, want, sizeof(want));
    size_t n = te_json_real_text(d, got, sizeof(got));
    if ((n != strlen(want) || strcmp(got, want) != 0) && mismatches++ < 10)
        fprintf(stderr, "  %.17g: %s, by definition %s\n", d, got, want);
}

static void real_text_by_definition(void)
{
    uint64_t x = 0x9E3779B97F4A7C15ULL; /* xorshift64, a fixed seed */
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof(d));
        same_text(d);                              /* any double */
        same_text((double)(x % 100000000) / 1e6);  /* a duration in ms */
        same_text((double)(x % 1000000) / 100.0);  /* a price */
        same_text(-(double)(x % 1000) / 1e7);      /* small, negative */
        same_text((double)(x % 1000000000000000)); /* integers below 1e15 */
    }
    for (int k = -30; k <= 30; k++)
        for (int m = 1; m <= 9; m++) {
            char t[16];
            snprintf(t, sizeof(t), "%de%d", m, k);
            same_text(strtod(t, NULL));
        }
    CHECK(mismatches == 0);
}

int main(void)
{
    faithful();
    same_as_jansson();
    unforgeable();
    schema_compares_exactly();
    real_text_by_definition();
    CHECK_DONE();
}
