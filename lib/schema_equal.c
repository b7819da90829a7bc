/*
 * schema_equal.c - JSON Schema validator: JSON equality (enum, const, uniqueItems) and a hash
 * consistent with it. See schema_int.h for the whole.
 */
#include "schema_int.h"

/* ------------------------------------------------------------------------ */
/* JSON equality (enum, const, uniqueItems) and a hash consistent with it.  */

/* 1 when equal, 0 when not, -1 when nested deeper than TE_SCHEMA_MAX_DEPTH
 * (the comparison would otherwise recurse without bound). */
int json_eq(const json_t *a, const json_t *b, int depth)
{
    if (depth > TE_SCHEMA_MAX_DEPTH)
        return -1;
    bool an = json_is_number(a) || te_json_is_rawnum(a),
         bn = json_is_number(b) || te_json_is_rawnum(b);
    if (an || bn)
        return an && bn && num_cmp(a, b) == 0;
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY: {
        size_t n = json_array_size(a);
        if (n != json_array_size(b))
            return 0;
        for (size_t i = 0; i < n; i++) {
            int r = json_eq(json_array_get(a, i), json_array_get(b, i), depth + 1);
            if (r != 1)
                return r;
        }
        return 1;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return 0;
        const char *key;
        const json_t *va;
        json_object_foreach((json_t *)a, key, va)
        {
            const json_t *vb = json_object_get(b, key);
            if (!vb)
                return 0;
            int r = json_eq(va, vb, depth + 1);
            if (r != 1)
                return r;
        }
        return 1;
    }
    default: /* null, true, false: the type says it all */
        return 1;
    }
}

uint64_t mix64(uint64_t x)
{
    /* splitmix64's finaliser: every input bit affects every output bit. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return mix64(h);
}

/* Hash equal values (in the json_eq sense) equally. -1 when too deep. */
int json_hash(const json_t *v, int depth, uint64_t *out)
{
    if (depth > TE_SCHEMA_MAX_DEPTH)
        return -1;
    uint64_t h = (uint64_t)json_typeof(v) + 1;
    if (te_json_is_rawnum(v)) {
        /* Beyond 64 bits or a double: equal only to other raw numbers of the
         * same text, or to numbers that hash alike here. */
        *out = mix64(0x6e756d626572ull);
        return 0;
    }
    switch (json_typeof(v)) {
    case JSON_INTEGER:
    case JSON_REAL: {
        uint64_t bits;
        double d = json_is_real(v) ? json_real_value(v) : 0;
        if (json_is_integer(v))
            bits = (uint64_t)json_integer_value(v);
        else if (real_is_integral(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            bits = (uint64_t)(json_int_t)d; /* 1.0 hashes as 1 */
        else
            memcpy(&bits, &d, sizeof(bits));
        h = mix64(bits ^ 0x6e756d626572ull);
        break;
    }
    case JSON_STRING:
        h = hash_bytes(json_string_value(v), json_string_length(v));
        break;
    case JSON_ARRAY:
        for (size_t i = 0; i < json_array_size(v); i++) {
            uint64_t e;
            if (json_hash(json_array_get(v, i), depth + 1, &e) < 0)
                return -1;
            h = mix64(h ^ e) + i;
        }
        break;
    case JSON_OBJECT: {
        /* Members are combined with a sum: key order does not matter. */
        const char *key;
        json_t *m;
        json_object_foreach((json_t *)v, key, m)
        {
            uint64_t e;
            if (json_hash(m, depth + 1, &e) < 0)
                return -1;
            h += mix64(hash_bytes(key, strlen(key)) ^ e);
        }
        break;
    }
    default:
        break;
    }
    *out = h;
    return 0;
}
