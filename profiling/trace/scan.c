/* A piece of a trace's `traceEvents` array, `[ev, ev, ...]`, scanned into tables: the streaming
 * reader's fast path (profiling/trace/scan.py builds and loads this; why it exists is said
 * there). A validating JSON parser for exactly what it accepts: any byte it is not sure to read
 * as msgspec's typed decode would makes scan_piece return 1, and msgspec reads that piece.
 *
 * The input must be NUL-terminated one byte past its length (a Python bytes object is): a NUL
 * is never valid where the parser looks, so every loop stops at it without a bounds check.
 */
#include <math.h>

#include "scan_json.h"

enum { PH, START, END, CAT_START, CAT_END, NAME_START, NAME_END, PID, TID, ARGS_START,
       ARGS_END, CORRELATION, EXTERNAL, DIMS_START, DIMS_END, TYPES_START, TYPES_END,
       CONCRETE_START, CONCRETE_END, HAS_ID, N_INTS };
enum { PH_MISSING, PH_X, PH_M, PH_S, PH_OTHER };
enum { CAT_HASH, NAME_HASH, SHAPE_HASH };
enum { PID_SEEN = 1, TID_SEEN = 2, PID_TEXT = 4, TID_TEXT = 8 };
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

static int same(const uint8_t *d, int64_t start, const char *key, int length) {
    for (int k = 1; k < length; k++)
        if (d[start + k] != (uint8_t)key[k]) return 0;
    return 1;
}

#define KEY(length, first) ((length) * 256 + (first)) /* a key's length and first byte */

/* The event key d[start:end]: 0 ph, 1 cat, 2 name, 3 pid, 4 tid, 5 ts, 6 dur, 7 args; -1 any
 * other. Its length and first byte pick the one candidate. */
static int event_key(const uint8_t *d, int64_t start, int64_t end) {
    switch (KEY(end - start, d[start])) {
    case KEY(2, 'p'): return same(d, start, "ph", 2) ? 0 : -1;
    case KEY(3, 'c'): return same(d, start, "cat", 3) ? 1 : -1;
    case KEY(4, 'n'): return same(d, start, "name", 4) ? 2 : -1;
    case KEY(3, 'p'): return same(d, start, "pid", 3) ? 3 : -1;
    case KEY(3, 't'): return same(d, start, "tid", 3) ? 4 : -1;
    case KEY(2, 't'): return same(d, start, "ts", 2) ? 5 : -1;
    case KEY(3, 'd'): return same(d, start, "dur", 3) ? 6 : -1;
    case KEY(4, 'a'): return same(d, start, "args", 4) ? 7 : -1;
    default: return -1;
    }
}

/* The args key d[start:end]: 0 correlation, 1 External id, 2 Input Dims, 3 Input type,
 * 4 Concrete Inputs; -1 any other. */
static int args_key(const uint8_t *d, int64_t start, int64_t end) {
    switch (KEY(end - start, d[start])) {
    case KEY(11, 'c'): return same(d, start, "correlation", 11) ? 0 : -1;
    case KEY(11, 'E'): return same(d, start, "External id", 11) ? 1 : -1;
    case KEY(10, 'I'):
        return same(d, start, "Input Dims", 10) ? 2 : same(d, start, "Input type", 10) ? 3 : -1;
    case KEY(15, 'C'): return same(d, start, "Concrete Inputs", 15) ? 4 : -1;
    default: return -1;
    }
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
    for (; k < end; k++) value = (value ^ d[k]) * FNV_PRIME;
    return value;
}

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

static int64_t members(Tables *t, int64_t p, int in_args);

/* The value of args key `key` (-1: another key) at p: ids and shapes' spans into the row. */
static int64_t arg_field(Tables *t, int key, int64_t p) {
    int64_t end, id;
    if (key == 0 || key == 1) {
        end = id_value(t->data, t->n, p, &id);
        INT_AT(t, key == 0 ? CORRELATION : EXTERNAL) = id;
        return end;
    }
    end = skip(t->data, t->n, p);
    if (key >= 2) {
        INT_AT(t, DIMS_START + 2 * (key - 2)) = p;
        INT_AT(t, DIMS_END + 2 * (key - 2)) = end;
    }
    return end;
}

static int64_t args_object(Tables *t, int64_t p) {
    INT_AT(t, ARGS_START) = p;
    int64_t end = INT_AT(t, ARGS_END) = members(t, p, 1);
    uint64_t shape = FNV_BASIS;
    for (int k = 0; k < 3 && end >= 0; k++) {
        int64_t start = INT_AT(t, DIMS_START + 2 * k);
        if (start >= 0)
            shape = (shape ^ text_hash(t->data, start, INT_AT(t, DIMS_END + 2 * k))) * FNV_PRIME + k;
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

/* The object whose '{' is at p, each member read by field() (an event) or arg_field() (its
 * args): the position after its '}', or -1. A tracked key seen twice is msgspec's to read. */
static int64_t members(Tables *t, int64_t p, int in_args) {
    const uint8_t *d = t->data;
    int seen = 0;
    p = ws(d, p + 1);
    if (d[p] == '}') return p + 1;
    for (;;) {
        int64_t ks, ke, value = key_colon(d, t->n, p, &ks, &ke);
        if (value < 0) return -1;
        int key = in_args ? args_key(d, ks, ke) : event_key(d, ks, ke);
        if (key >= 0 && (seen & (1 << key))) return -1;
        if (key >= 0) seen |= 1 << key;
        int64_t end = in_args ? arg_field(t, key, value) : field(t, key, value);
        if (end < 0) return -1;
        p = ws(d, end);
        if (d[p] == '}') return p + 1;
        if (d[p] != ',') return -1;
        p = ws(d, p + 1);
    }
}

/* The event object at p into the row: the position after it, or -1. */
static int64_t event(Tables *t, int64_t p) {
    if (t->data[p] != '{') return -1;
    for (int k = 0; k < N_INTS; k++) INT_AT(t, k) = -1;
    INT_AT(t, PH) = PH_MISSING;
    INT_AT(t, HAS_ID) = 0;
    INT_AT(t, START) = p;
    FLOAT_AT(t, 0) = FLOAT_AT(t, 1) = NAN;
    for (int k = 0; k < 3; k++) HASH_AT(t, k) = 0;
    return INT_AT(t, END) = members(t, p, 0);
}

/* The piece data[0:n] (data[n] == 0) into the tables: 0, and counts[ROWS, EVENTS, FLOWS];
 * 1: msgspec's to read; 2: more kept events than `capacity` rows. A row is kept only for a
 * complete (X) or metadata (M) event, the only ones read from the tables; the others are
 * counted, their row reused: a piece of `{},` costs no rows. A kept event is at least
 * `{"ph":"X"}` and a comma: 11 bytes a row at most. */
int scan_piece(const uint8_t *data, int64_t n, int64_t capacity, int64_t *ints, double *floats,
               uint64_t *hashes, int64_t *counts) {
    Tables t = {data, capacity, 0, ints, floats, hashes, n};
    int64_t p = ws(data, 0), events = 0, flows = 0;
    counts[0] = counts[1] = counts[2] = 0;
    if (data[n] != 0 || data[p] != '[') return 1;
    p = ws(data, p + 1);
    if (data[p] == ']') {
        p++;
    } else {
        for (;;) {
            if (t.row >= capacity) return 2; /* more events than room: asked again */
            if ((p = event(&t, p)) < 0) return 1;
            int64_t ph = INT_AT(&t, PH);
            events++;
            flows += ph == PH_S;
            t.row += ph == PH_X || ph == PH_M;
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
    counts[0] = t.row;
    counts[1] = events;
    counts[2] = flows;
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

/* One lane's spans (sorted by start, longest first) nested as torch nests them: a span's
 * parent is the innermost open span that holds it whole; a span it crosses is closed, and
 * both are flagged. profiling/trace/nesting.py's renest_crossings says why, and holds the same
 * loop in Python for a machine without a compiler (the tests hold the two equal). Rows
 * lo..lo+n-1 of depth, parent and overlap are written; `stack` has room for n rows. */
void renest(int64_t n, int64_t lo, const double *start, const double *end, double eps,
            int64_t *depth, int64_t *parent, uint8_t *overlap, int64_t *stack) {
    int64_t top = 0; /* rows on the stack */
    for (int64_t i = 0; i < n; i++) {
        while (top) {
            int64_t open = stack[top - 1];
            if (start[i] >= end[open] - eps) { /* ended before i starts */
                top--;
            } else if (end[i] > end[open] + eps) { /* i crosses its end: it cannot hold i */
                overlap[lo + i] = overlap[lo + open] = 1;
                top--;
            } else {
                break;
            }
        }
        parent[lo + i] = top ? lo + stack[top - 1] : -1;
        depth[lo + i] = top;
        stack[top++] = i;
    }
}
