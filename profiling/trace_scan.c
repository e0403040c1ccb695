/* A piece of a trace's `traceEvents` array, `[ev, ev, ...]`, scanned into tables: the streaming
 * reader's fast path (profiling/trace_scan.py builds and loads this; why it exists is said
 * there). A validating JSON parser for exactly what it accepts: any byte it is not sure to read
 * as msgspec's typed decode would makes scan_piece return 1, and msgspec reads that piece.
 *
 * The input must be NUL-terminated one byte past its length (a Python bytes object is): a NUL
 * is never valid where the parser looks, so every loop stops at it without a bounds check.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { PH, START, END, CAT_START, CAT_END, NAME_START, NAME_END, PID, TID, ARGS_START,
       ARGS_END, CORRELATION, EXTERNAL, DIMS_START, DIMS_END, TYPES_START, TYPES_END,
       CONCRETE_START, CONCRETE_END, HAS_ID, N_INTS };
enum { PH_MISSING, PH_X, PH_M, PH_S, PH_OTHER };
enum { CAT_HASH, NAME_HASH, SHAPE_HASH };
enum { NOT_INT, INT, LONG_INT };
enum { PID_SEEN = 1, TID_SEEN = 2, PID_TEXT = 4, TID_TEXT = 8 };
#define MAX_DEPTH 64
#define FNV_BASIS 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

typedef struct {
    const uint8_t *data;
    int64_t capacity, row;
    int64_t *ints;    /* ints[field * capacity + row]: columns, as numpy reads them */
    double *floats;   /* floats[(0: ts, 1: dur) * capacity + row] */
    uint64_t *hashes; /* hashes[(CAT_HASH, NAME_HASH, SHAPE_HASH) * capacity + row] */
    int64_t n;
} Tables;

#define INT_AT(t, field) ((t)->ints[(int64_t)(field) * (t)->capacity + (t)->row])
#define HASH_AT(t, which) ((t)->hashes[(int64_t)(which) * (t)->capacity + (t)->row])
#define FLOAT_AT(t, which) ((t)->floats[(int64_t)(which) * (t)->capacity + (t)->row])

static const double POWERS[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                  1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int64_t ws(const uint8_t *d, int64_t p) {
    while (d[p] == ' ' || d[p] == '\n' || d[p] == '\r' || d[p] == '\t') p++;
    return p;
}

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Bytes a string holds as they are: printable ASCII but the quote and the backslash. */
static const uint8_t PLAIN[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
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
        while (p + 4 <= n && (PLAIN[d[p]] & PLAIN[d[p + 1]] & PLAIN[d[p + 2]] & PLAIN[d[p + 3]]))
            p += 4;
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
    int digits = 0, exponent = 0, plain = 1, scale = 0; /* scale: 10's power of its size */
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

/* The index of the key d[start:end] in `keys` (-1: none). The first byte and the length pick
 * the candidate: a full compare only where both match. */
static int which(const uint8_t *d, int64_t start, int64_t end, const char *const *keys,
                 const int64_t *lengths, int n) {
    for (int k = 0; k < n; k++) {
        if (lengths[k] != end - start || (uint8_t)keys[k][0] != d[start]) continue;
        int64_t i = 1; /* keys are a few bytes: a loop beats a call to memcmp */
        while (i < lengths[k] && (uint8_t)keys[k][i] == d[start + i]) i++;
        if (i == lengths[k]) return k;
    }
    return -1;
}

static uint64_t fnv(const uint8_t *d, int64_t start, int64_t end, uint64_t value) {
    for (int64_t k = start; k < end; k++) value = (value ^ d[k]) * FNV_PRIME;
    return value;
}

/* A hash of d[start:end], eight bytes a step (names run to hundreds of bytes): equal bytes,
 * equal hash; the caller checks the bytes of rows that share one. */
static uint64_t text_hash(const uint8_t *d, int64_t start, int64_t end) {
    uint64_t value = FNV_BASIS ^ (uint64_t)(end - start), word;
    int64_t k = start;
    for (; k + 8 <= end; k += 8) {
        memcpy(&word, d + k, 8);
        value = (value ^ word) * 0x9E3779B97F4A7C15ULL;
        value ^= value >> 29;
    }
    return fnv(d, k, end, value);
}

static const char *const EVENT_KEYS[] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"};
static const int64_t EVENT_LENGTHS[] = {2, 3, 4, 3, 3, 2, 3, 4};
static const char *const ARGS_KEYS[] = {"correlation", "External id", "Input Dims", "Input type",
                                        "Concrete Inputs"};
static const int64_t ARGS_LENGTHS[] = {11, 11, 10, 10, 15};

/* An id in args: its end; *value as valid_id reads it (-1 for anything but an int). -1 for an
 * int of 19 or more digits, which only Python reads exactly. */
static int64_t id_value(const uint8_t *d, int64_t n, int64_t p, int64_t *value) {
    *value = -1;
    if (d[p] != '-' && !is_digit(d[p])) return skip(d, n, p);
    Number found = number(d, p);
    if (found.kind == LONG_INT) return -1;
    if (found.kind == INT) *value = found.integer;
    return found.end;
}

/* The members of a non-empty args object from p: its end after '}', or -1. */
static int64_t args_members(Tables *t, int64_t p) {
    const uint8_t *d = t->data;
    int seen = 0;
    for (;;) {
        int64_t ks, ke, end, id;
        int64_t value = key_colon(d, t->n, p, &ks, &ke);
        if (value < 0) return -1;
        int key = which(d, ks, ke, ARGS_KEYS, ARGS_LENGTHS, 5);
        if (key >= 0) {
            if (seen & (1 << key)) return -1; /* a repeated key: msgspec keeps the last */
            seen |= 1 << key;
        }
        if (key == 0 || key == 1) {
            end = id_value(d, t->n, value, &id);
            INT_AT(t, key == 0 ? CORRELATION : EXTERNAL) = id;
        } else {
            end = skip(d, t->n, value);
            if (key >= 2) {
                INT_AT(t, DIMS_START + 2 * (key - 2)) = value;
                INT_AT(t, DIMS_END + 2 * (key - 2)) = end;
            }
        }
        if (end < 0) return -1;
        p = ws(d, end);
        if (d[p] == '}') return p + 1;
        if (d[p] != ',') return -1;
        p = ws(d, p + 1);
    }
}

static int64_t args_object(Tables *t, int64_t p) {
    const uint8_t *d = t->data;
    int64_t inner = ws(d, p + 1), end;
    INT_AT(t, ARGS_START) = p;
    end = d[inner] == '}' ? inner + 1 : args_members(t, inner);
    INT_AT(t, ARGS_END) = end;
    if (end < 0) return -1;
    uint64_t shape = FNV_BASIS;
    for (int k = 0; k < 3; k++) {
        int64_t start = INT_AT(t, DIMS_START + 2 * k);
        if (start >= 0) shape = fnv(d, start, INT_AT(t, DIMS_END + 2 * k), shape ^ (k + 1));
    }
    HASH_AT(t, SHAPE_HASH) = shape;
    return end;
}

/* The value of event key `key` (-1: another key) at p, read into the row: its end, or -1 where
 * it is not of the type msgspec's typed decode takes. */
static int64_t field(Tables *t, int key, int64_t p) {
    const uint8_t *d = t->data;
    int escaped;
    if (key <= 2 && key >= 0) { /* ph, cat, name: strings */
        if (d[p] != '"') return -1;
        int64_t end = string_end(d, t->n, p, &escaped);
        if (end < 0) return -1;
        if (key == 0) {
            uint8_t c = end == p + 3 ? d[p + 1] : 0;
            if (escaped) return -1;
            INT_AT(t, PH) = c == 'X' ? PH_X : c == 'M' ? PH_M : c == 's' ? PH_S : PH_OTHER;
        } else {
            int column = key == 1 ? CAT_START : NAME_START;
            INT_AT(t, column) = p;
            INT_AT(t, column + 1) = end;
            HASH_AT(t, key - 1) = text_hash(d, p, end);
        }
        return end;
    }
    if (key == 3 || key == 4) { /* pid, tid: ints, or text (noted: msgspec's to read) */
        if (d[p] == '"') {
            INT_AT(t, HAS_ID) |= key == 3 ? PID_TEXT : TID_TEXT;
            return string_end(d, t->n, p, &escaped);
        }
        Number found = number(d, p);
        if (found.end < 0 || found.kind != INT) return -1;
        INT_AT(t, key == 3 ? PID : TID) = found.integer;
        INT_AT(t, HAS_ID) |= key == 3 ? PID_SEEN : TID_SEEN;
        return found.end;
    }
    if (key == 5 || key == 6) { /* ts, dur: numbers or null */
        if (d[p] == 'n') return literal(d, p);
        Number found = number(d, p);
        if (found.end < 0 || !found.exact) return -1;
        FLOAT_AT(t, key - 5) = found.value;
        return found.end;
    }
    if (key == 7) return d[p] == '{' ? args_object(t, p) : -1;
    return skip(d, t->n, p);
}

/* The event object at p into the row: the position after it, or -1. */
static int64_t event(Tables *t, int64_t p) {
    const uint8_t *d = t->data;
    int seen = 0;
    if (d[p] != '{') return -1;
    for (int k = 0; k < N_INTS; k++) INT_AT(t, k) = -1;
    INT_AT(t, PH) = PH_MISSING;
    INT_AT(t, HAS_ID) = 0;
    INT_AT(t, START) = p;
    FLOAT_AT(t, 0) = FLOAT_AT(t, 1) = NAN;
    for (int k = 0; k < 3; k++) HASH_AT(t, k) = 0;
    p = ws(d, p + 1);
    if (d[p] == '}') {
        INT_AT(t, END) = p + 1;
        return p + 1;
    }
    for (;;) {
        int64_t ks, ke;
        int64_t value = key_colon(d, t->n, p, &ks, &ke);
        if (value < 0) return -1;
        int key = which(d, ks, ke, EVENT_KEYS, EVENT_LENGTHS, 8);
        if (key >= 0) {
            if (seen & (1 << key)) return -1; /* a repeated key: msgspec keeps the last */
            seen |= 1 << key;
        }
        int64_t end = field(t, key, value);
        if (end < 0) return -1;
        p = ws(d, end);
        if (d[p] == '}') {
            INT_AT(t, END) = p + 1;
            return p + 1;
        }
        if (d[p] != ',') return -1;
        p = ws(d, p + 1);
    }
}

/* The piece data[0:n] (data[n] == 0) into the tables: 0 and *count events; 1: msgspec's to
 * read; 2: more events than `capacity` rows. */
int scan_piece(const uint8_t *data, int64_t n, int64_t capacity, int64_t *ints, double *floats,
               uint64_t *hashes, int64_t *count) {
    Tables t = {data, capacity, 0, ints, floats, hashes, n};
    int64_t p = ws(data, 0);
    *count = 0;
    if (data[n] != 0 || data[p] != '[') return 1;
    p = ws(data, p + 1);
    if (data[p] == ']') {
        p++;
    } else {
        for (;;) {
            if (t.row >= capacity) return 2; /* more events than room: asked again */
            if ((p = event(&t, p)) < 0) return 1;
            t.row++;
            p = ws(data, p);
            if (data[p] == ']') {
                p++;
                break;
            }
            if (data[p] != ',') return 1;
            p = ws(data, p + 1);
        }
    }
    if (ws(data, p) != n) return 1;
    *count = t.row;
    return 0;
}

/* Whether each span's bytes equal its hash group's first span's (-1: absent, equal only to
 * absent): what makes interning by hash exact. */
int same_spans(const uint8_t *data, int64_t rows, const int64_t *starts, const int64_t *ends,
               const int64_t *first_starts, const int64_t *first_ends) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t start = starts[r], first = first_starts[r];
        if (start < 0 || first < 0) {
            if (start != first) return 0;
            continue;
        }
        int64_t length = ends[r] - start;
        if (first_ends[r] - first != length || memcmp(data + start, data + first, length))
            return 0;
    }
    return 1;
}

/* The spans data[starts[r]:ends[r]] written as a JSON array into out (room for their lengths,
 * the commas and brackets); `{}` for an absent one (-1). Returns the bytes written. */
int64_t gather(const uint8_t *data, int64_t rows, const int64_t *starts, const int64_t *ends,
               uint8_t *out) {
    int64_t at = 0;
    out[at++] = '[';
    for (int64_t r = 0; r < rows; r++) {
        if (r) out[at++] = ',';
        if (starts[r] < 0) {
            out[at++] = '{';
            out[at++] = '}';
            continue;
        }
        memcpy(out + at, data + starts[r], ends[r] - starts[r]);
        at += ends[r] - starts[r];
    }
    out[at++] = ']';
    return at;
}
