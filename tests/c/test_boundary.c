/* C ABI soundness at the boundary: any uint32_t status has a message, sizes that overflow the
 * address space are CTXW_OVERFLOW (never a slice over them), pinned bytes other than 0/1 are
 * true, and the _free functions keep the thread's last error. */
#include <stdint.h>
#include <string.h>

#include "ctxwindow.h"
#include "check.h"

static void last_error(char *message, size_t cap) {
    size_t len = 0;
    CHECK_STATUS(ctxw_last_error_message(message, cap, &len), CTXW_OK);
}

static void test_status_messages(void) {
    CHECK(strcmp(ctxw_status_message(CTXW_OK), "ok") == 0);
    CHECK(strcmp(ctxw_status_message(CTXW_UNKNOWN_TOKEN), "token id outside the vocabulary") == 0);
    const uint32_t unknown[] = {7, 99, 104, 199, 203, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *message = ctxw_status_message(unknown[i]);
        CHECK(message != NULL && strcmp(message, "unknown status code") == 0);
    }
}

static void test_overflowing_lengths(void) {
    char message[256];
    int64_t values[1] = {0};
    double out[1] = {-1};
    ctxw_columns columns;
    memset(&columns, 0, sizeof columns);
    columns.last_access_turn = values;
    columns.access_count = values;
    /* len * sizeof(int64_t) overflows: refused before any read. */
    columns.len = SIZE_MAX / 4;
    CHECK_STATUS(ctxw_score("retention", 0, &columns, out, SIZE_MAX / 4), CTXW_OVERFLOW);
    CHECK(out[0] == -1);
    /* len * embedding_dim overflows. */
    float embedding[1] = {1};
    columns.len = 1;
    columns.embedding = embedding;
    columns.task_embedding = embedding;
    columns.embedding_dim = SIZE_MAX / 2 + 2;
    columns.len = 2;
    int64_t two[2] = {0, 0};
    columns.last_access_turn = two;
    columns.access_count = two;
    double out2[2] = {-1, -1};
    CHECK_STATUS(ctxw_score("retention", 0, &columns, out2, 2), CTXW_OVERFLOW);
    last_error(message, sizeof message);
    CHECK(strstr(message, "embedding_dim") != NULL);
    CHECK(out2[0] == -1);
    /* A size that fits usize but not isize. */
    columns.embedding_dim = SIZE_MAX / 8 + 1; /* 4 * dim = 2^63: fits size_t, not ptrdiff_t */
    columns.len = 1;
    columns.last_access_turn = values;
    columns.access_count = values;
    CHECK_STATUS(ctxw_score("retention", 0, &columns, out, 1), CTXW_OVERFLOW);

    double scores[1] = {0.5};
    size_t chosen[1];
    size_t n = 0;
    CHECK_STATUS(ctxw_select_by_ratio(scores, SIZE_MAX / 8 + 1, NULL, NULL, 0.5, 0, chosen, 1, &n),
                 CTXW_OVERFLOW);

    ctxw_tokenizer *t = NULL;
    CHECK_STATUS(ctxw_tokenizer_new("cl100k_base", &t), CTXW_OK);
    uint64_t count = 7;
    CHECK_STATUS(ctxw_tokenizer_count(t, "x", (size_t)PTRDIFF_MAX + 1, &count), CTXW_OVERFLOW);
    CHECK(count == 7);
    const char *texts[1] = {"x"};
    size_t lens[1] = {1};
    uint32_t counts[1] = {9};
    CHECK_STATUS(ctxw_tokenizer_count_many(t, texts, lens, SIZE_MAX / 4, counts), CTXW_OVERFLOW);
    CHECK(counts[0] == 9);
    lens[0] = SIZE_MAX;
    CHECK_STATUS(ctxw_tokenizer_count_many(t, texts, lens, 1, counts), CTXW_OVERFLOW);
    CHECK(counts[0] == 9);
    ctxw_tokenizer_free(t);
}

static void test_pinned_bytes(void) {
    int64_t created[4] = {0, 0, 0, 0};
    uint8_t pinned[4] = {0, 1, 2, 255};
    ctxw_columns columns;
    memset(&columns, 0, sizeof columns);
    columns.len = 4;
    columns.created_turn = created;
    columns.pinned = pinned;
    double out[4];
    CHECK_STATUS(ctxw_score("fifo", 5, &columns, out, 4), CTXW_OK);
    CHECK(out[0] < 1e300);
    for (int i = 1; i < 4; i++) CHECK(out[i] > 1e300); /* +inf */

    double scores[4] = {0.1, 0.2, 0.3, 0.4};
    size_t chosen[4];
    size_t n = 0;
    CHECK_STATUS(ctxw_select_by_ratio(scores, 4, pinned, NULL, 1.0, 0, chosen, 4, &n), CTXW_OK);
    CHECK(n == 1 && chosen[0] == 0);

    ctxw_history *h = NULL;
    CHECK_STATUS(ctxw_history_new(&h), CTXW_OK);
    CHECK_STATUS(ctxw_history_push(h, 1, 10, 1), CTXW_OK);
    CHECK_STATUS(ctxw_history_push(h, 2, 10, 0), CTXW_OK);
    CHECK_STATUS(ctxw_history_push(h, 3, 10, 200), CTXW_OK);
    bool starts = true;
    CHECK_STATUS(ctxw_history_get(h, 1, NULL, NULL, &starts), CTXW_OK);
    CHECK(!starts);
    CHECK_STATUS(ctxw_history_get(h, 2, NULL, NULL, &starts), CTXW_OK);
    CHECK(starts);
    ctxw_history_free(h);
}

static void test_free_keeps_last_error(void) {
    char message[256];
    ctxw_tokenizer *t = NULL;
    CHECK_STATUS(ctxw_tokenizer_new("no-such-encoding", &t), CTXW_UNKNOWN_ENCODING);
    ctxw_history *h = NULL;
    ctxw_snapshot *s = NULL;
    ctxw_history_free(h);
    ctxw_snapshot_free(s);
    ctxw_tokenizer_free(t);
    last_error(message, sizeof message);
    CHECK(strstr(message, "no-such-encoding") != NULL);

    /* Also when the freed objects are real. */
    CHECK_STATUS(ctxw_history_new(&h), CTXW_OK);
    CHECK_STATUS(ctxw_history_snapshot(h, &s), CTXW_OK);
    CHECK_STATUS(ctxw_history_get(h, 5, NULL, NULL, NULL), CTXW_INDEX_OUT_OF_RANGE);
    ctxw_snapshot_free(s);
    ctxw_history_free(h);
    last_error(message, sizeof message);
    CHECK(strstr(message, "5") != NULL && strlen(message) > 0);
}

int main(void) {
    test_status_messages();
    test_overflowing_lengths();
    test_pinned_bytes();
    test_free_keeps_last_error();
    return checks_report("test_boundary");
}
