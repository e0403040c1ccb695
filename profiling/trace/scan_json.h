/* JSON's grammar, validated, for profiling/trace/scan.c: whitespace, strings, numbers (with
 * their exact conversion where one IEEE operation gives it), literals, and any value skipped.
 * Each answers the position after what it read, or -1 for what it refuses: anything not
 * valid JSON, and what msgspec would refuse or read differently (see profiling/trace/scan.c). Every
 * read stops at the NUL one byte past the input (profiling/trace/scan.c says why that is safe).
 */
#ifndef TRACE_SCAN_JSON_H
#define TRACE_SCAN_JSON_H

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum { NOT_INT, INT, LONG_INT };
#define MAX_DEPTH 64

static const double POWERS[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                  1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int64_t ws(const uint8_t *d, int64_t p) {
    while (d[p] == ' ' || d[p] == '\n' || d[p] == '\r' || d[p] == '\t') p++;
    return p;
}

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Bytes a string holds as they are: printable ASCII but the quote and the backslash (the rest,
 * from 128 on, zero). */
static const uint8_t PLAIN[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

/* The four hex digits at d[p:p+4] as a number, or -1 (stopping at the first that is not). */
static int hex4(const uint8_t *d, int64_t p) {
    int code = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t c = d[p + k], lower = c | 32;
        if (is_digit(c)) code = code * 16 + (c - '0');
        else if (lower >= 'a' && lower <= 'f') code = code * 16 + (lower - 'a' + 10);
        else return -1;
    }
    return code;
}

/* d[p] is '"': the position after the closing quote, or -1 (a control or non-ASCII byte, a
 * bad escape, no end). *escaped says whether it held an escape. */
static int64_t string_end(const uint8_t *d, int64_t n, int64_t p, int *escaped) {
    *escaped = 0;
    for (p++;; p++) {
#ifdef __SSE2__
        while (p + 16 <= n) { /* 16 bytes a step: any quote, backslash, control or non-ASCII? */
            __m128i bytes = _mm_loadu_si128((const __m128i *)(d + p));
            __m128i stops = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('"')),
                             _mm_cmpeq_epi8(bytes, _mm_set1_epi8('\\'))),
                _mm_cmplt_epi8(bytes, _mm_set1_epi8(32))); /* signed: < 32 and >= 128 */
            int found = _mm_movemask_epi8(stops);
            if (found) {
                p += __builtin_ctz(found);
                break;
            }
            p += 16;
        }
#endif
        while (PLAIN[d[p]]) p++;
        uint8_t c = d[p];
        if (c == '"') return p + 1;
        if (c == '\\') {
            *escaped = 1;
            c = d[++p];
            if (c == 'u') {
                int code = hex4(d, p + 1);
                p += 4;
                if (code >= 0xDC00 && code <= 0xDFFF) return -1; /* a low surrogate alone */
                if (code >= 0xD800 && code <= 0xDBFF) {           /* must pair with a low one */
                    if (d[p + 1] != '\\' || d[p + 2] != 'u') return -1;
                    int low = hex4(d, p + 3);
                    if (low < 0xDC00 || low > 0xDFFF) return -1;
                    p += 6;
                }
                if (code < 0) return -1;
            } else if (!strchr("\"\\/bfnrt", c) || c == 0) {
                return -1;
            }
        } else if (c < 32 || c >= 128) {
            return -1;
        }
    }
}

typedef struct {
    int64_t end;     /* -1: not a number */
    int kind;        /* NOT_INT, INT (<= 18 digits), LONG_INT */
    int exact;       /* value is what a correctly rounding parser gives */
    double value;
    int64_t integer; /* when INT */
} Number;

/* A JSON number at p. Exact: a mantissa below 2^53 and a power of ten within 1e22, where one
 * IEEE multiply or divide rounds correctly (Clinger's fast path), as msgspec's parser does. */
static Number number(const uint8_t *d, int64_t p) {
    Number out = {-1, NOT_INT, 0, 0.0, 0};
    int negative = d[p] == '-';
    uint64_t mantissa = 0;
    int plain = 1;
    /* 64-bit counts: a number of 2^31 digits must not wrap one (it once made a pid of one) */
    int64_t digits = 0, exponent = 0, scale = 0; /* scale: 10's power of its size */
    int64_t start = p;
    if (negative) p++;
    if (!is_digit(d[p])) return out;
    if (d[p] == '0') {
        p++;
    } else {
        for (; is_digit(d[p]); p++, digits++)
            if (digits < 19) mantissa = mantissa * 10 + (d[p] - '0');
        scale = digits;
    }
    if (d[p] == '.') {
        plain = 0;
        if (!is_digit(d[++p])) return out;
        for (; is_digit(d[p]); p++) {
            if (digits < 19) {
                mantissa = mantissa * 10 + (d[p] - '0');
                exponent--;
            }
            if (mantissa > 0 || d[p] != '0') digits++;
        }
    }
    if ((d[p] | 32) == 'e') {
        int sign = 1, power = 0;
        plain = 0;
        p++;
        if (d[p] == '+' || d[p] == '-') sign = d[p++] == '-' ? -1 : 1;
        if (!is_digit(d[p])) return out;
        for (; is_digit(d[p]); p++)
            if (power < 10000) power = power * 10 + (d[p] - '0');
        exponent += sign * power;
        scale += sign * power;
    }
    if (scale > 300) return out; /* past a double (msgspec refuses it where it reads it) */
    out.end = p;
    out.kind = plain ? (digits <= 18 ? INT : LONG_INT) : NOT_INT;
    if (out.kind == INT) /* below 10^18: its negation is an int64 (-2^63 is never one) */
        out.integer = negative ? -(int64_t)mantissa : (int64_t)mantissa;
    out.exact = digits < 19 && mantissa < (1ULL << 53) && exponent >= -22 && exponent <= 22 &&
                p - start < 40 && !(negative && mantissa == 0); /* -0: msgspec's to sign */
    if (out.exact) {
        double v = (double)mantissa;
        v = exponent >= 0 ? v * POWERS[exponent] : v / POWERS[-exponent];
        out.value = negative ? -v : v;
    }
    return out;
}

static int64_t literal(const uint8_t *d, int64_t p) {
    const char *word = d[p] == 't' ? "true" : d[p] == 'f' ? "false" : d[p] == 'n' ? "null" : 0;
    if (!word) return -1;
    for (size_t k = 0; word[k]; k++)
        if (d[p + k] != (uint8_t)word[k]) return -1;
    return p + (int64_t)strlen(word);
}

/* Any value but an object or an array. */
static int64_t scalar(const uint8_t *d, int64_t n, int64_t p) {
    int escaped;
    if (d[p] == '"') return string_end(d, n, p, &escaped);
    if (d[p] == '-' || is_digit(d[p])) return number(d, p).end;
    return literal(d, p);
}

/* A key and its colon at p: the value's position, or -1. The key's span into *start, *end. */
static int64_t key_colon(const uint8_t *d, int64_t n, int64_t p, int64_t *start, int64_t *end) {
    int escaped;
    if (d[p] != '"') return -1;
    int64_t after = string_end(d, n, p, &escaped);
    if (after < 0 || escaped) return -1; /* an escaped key could spell one of ours */
    *start = p + 1;
    *end = after - 1;
    p = ws(d, after);
    if (d[p] != ':') return -1;
    return ws(d, p + 1);
}

/* Any JSON value at p, validated: the position after it, or -1 (also past MAX_DEPTH). */
static int64_t skip(const uint8_t *d, int64_t n, int64_t p) {
    uint8_t stack[MAX_DEPTH];
    int depth = 0;
    int64_t ks, ke;
    for (;;) {
        uint8_t c = d[p];
        if (c == '{' || c == '[') {
            int64_t inner = ws(d, p + 1);
            if (d[inner] == (c == '{' ? '}' : ']')) {
                p = inner + 1;
            } else {
                if (depth == MAX_DEPTH) return -1;
                stack[depth++] = c;
                p = c == '{' ? key_colon(d, n, inner, &ks, &ke) : inner;
                if (p < 0) return -1;
                continue;
            }
        } else if ((p = scalar(d, n, p)) < 0) {
            return -1;
        }
        for (;;) { /* a value ended: close what it ends, or go on to the next one */
            if (depth == 0) return p;
            p = ws(d, p);
            if (d[p] == ',') {
                p = ws(d, p + 1);
                if (stack[depth - 1] == '{' && (p = key_colon(d, n, p, &ks, &ke)) < 0) return -1;
                break;
            }
            if (d[p] != (stack[depth - 1] == '{' ? '}' : ']')) return -1;
            depth--;
            p++;
        }
    }
}

#endif
