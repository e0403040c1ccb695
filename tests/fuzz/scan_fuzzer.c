/* libFuzzer harness for profiling/trace/scan.c, built with AddressSanitizer and
 * UndefinedBehaviorSanitizer (fuzz/run.py builds and runs it; docs/testing.md says how long).
 *
 * Each input is a piece as the reader hands it: copied into a buffer of exactly its length
 * plus the NUL (so any read past that NUL is an ASan error), scanned with a small table that
 * grows by doubling as profiling/trace/scan.py grows it, and, where it is accepted, every
 * span checked to lie inside the piece and handed to same_spans and gather as the Python side
 * does. Differences from msgspec are tests/fuzz/differential.py's to find.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../profiling/trace/scan.c"

#define CHECK(condition)                                                          \
    do {                                                                          \
        if (!(condition)) {                                                       \
            fprintf(stderr, "scan_fuzzer: %s failed (line %d)\n", #condition, __LINE__); \
            abort();                                                              \
        }                                                                         \
    } while (0)

/* Every span field's pair inside [0, n] with start <= end, or both -1. */
static void check_spans(const int64_t *ints, int64_t capacity, int64_t rows, int64_t n) {
    static const int pairs[][2] = {{START, END},           {CAT_START, CAT_END},
                                   {NAME_START, NAME_END}, {ARGS_START, ARGS_END},
                                   {DIMS_START, DIMS_END}, {TYPES_START, TYPES_END},
                                   {CONCRETE_START, CONCRETE_END}};
    for (int64_t r = 0; r < rows; r++) {
        int64_t ph = ints[PH * capacity + r];
        CHECK(ph == PH_X || ph == PH_M);
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
            int64_t s = ints[pairs[k][0] * capacity + r], e = ints[pairs[k][1] * capacity + r];
            CHECK((s == -1 && e == -1) || (0 <= s && s <= e && e <= n));
        }
    }
}

/* gather() over the args spans into a buffer of exactly the room Python gives it, and
 * same_spans() over the names. */
static void check_gather(const uint8_t *data, const int64_t *ints, int64_t capacity,
                         int64_t rows) {
    const int64_t *starts = ints + ARGS_START * capacity, *ends = ints + ARGS_END * capacity;
    int64_t room = 2 + 3 * rows;
    for (int64_t r = 0; r < rows; r++)
        if (starts[r] >= 0) room += ends[r] - starts[r];
    uint8_t *out = malloc(room);
    CHECK(gather(data, rows, starts, ends, out) <= room);
    free(out);
    int64_t *firsts = calloc(rows + 1, sizeof(int64_t));
    int64_t *first_ends = calloc(rows + 1, sizeof(int64_t));
    for (int64_t r = 0; r < rows; r++) { /* every name against the first row's */
        firsts[r] = ints[NAME_START * capacity];
        first_ends[r] = ints[NAME_END * capacity];
    }
    same_spans(data, rows, ints + NAME_START * capacity, ints + NAME_END * capacity, firsts,
               first_ends);
    free(firsts);
    free(first_ends);
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size) {
    uint8_t *data = malloc(size + 1);
    memcpy(data, input, size);
    data[size] = 0;
    int64_t n = (int64_t)size, capacity = 1, counts[3];
    for (;;) {
        int64_t *ints = malloc(sizeof(int64_t) * N_INTS * capacity);
        double *floats = malloc(sizeof(double) * 2 * capacity);
        uint64_t *hashes = malloc(sizeof(uint64_t) * 3 * capacity);
        int status = scan_piece(data, n, capacity, ints, floats, hashes, counts);
        CHECK(status >= 0 && status <= 2);
        if (status == 0) {
            CHECK(0 <= counts[0] && counts[0] <= capacity && counts[0] <= counts[1]);
            CHECK(0 <= counts[2] && counts[2] <= counts[1]);
            CHECK(counts[0] <= n / 11 + 1); /* the bound trace/scan.py sizes tables by */
            check_spans(ints, capacity, counts[0], n);
            check_gather(data, ints, capacity, counts[0]);
        }
        free(ints);
        free(floats);
        free(hashes);
        if (status != 2) break;
        CHECK(capacity <= n / 11 + 1);
        capacity *= 2;
    }
    free(data);
    return 0;
}
