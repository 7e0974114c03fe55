/* C ABI tests of ctxw_history_*: eviction by whole groups, buffer sizes, snapshots, errors. */
#include <string.h>

#include "ctxwindow.h"
#include "check.h"

static void test_evict_whole_groups(void) {
    ctxw_history *h = NULL;
    CHECK_STATUS(ctxw_history_new(&h), CTXW_OK);
    CHECK(h != NULL);
    CHECK_STATUS(ctxw_history_push(h, 1, 5, true), CTXW_OK);    /* user */
    CHECK_STATUS(ctxw_history_push(h, 2, 3, true), CTXW_OK);    /* assistant call */
    CHECK_STATUS(ctxw_history_push(h, 3, 30, false), CTXW_OK);  /* its tool result */
    CHECK_STATUS(ctxw_history_push(h, 4, 5, true), CTXW_OK);    /* user */

    size_t len = 0;
    uint64_t total = 0;
    CHECK_STATUS(ctxw_history_len(h, &len), CTXW_OK);
    CHECK(len == 4);
    CHECK_STATUS(ctxw_history_total_tokens(h, &total), CTXW_OK);
    CHECK(total == 43);

    uint64_t out[8];
    size_t n = 99;
    CHECK_STATUS(ctxw_history_evict(h, 50, 0, NULL, out, 8, &n), CTXW_OK);
    CHECK(n == 0);
    CHECK_STATUS(ctxw_history_evict(h, 40, 0, NULL, out, 8, &n), CTXW_OK);
    CHECK(n == 1 && out[0] == 1);

    /* Too small a buffer: nothing evicted, the size needed reported. */
    CHECK_STATUS(ctxw_history_evict(h, 40, 10, NULL, out, 1, &n), CTXW_BUFFER_TOO_SMALL);
    CHECK(n == 2);
    CHECK_STATUS(ctxw_history_len(h, &len), CTXW_OK);
    CHECK(len == 3);
    CHECK_STATUS(ctxw_history_evict(h, 40, 10, NULL, out, 8, &n), CTXW_OK);
    CHECK(n == 2 && out[0] == 2 && out[1] == 3);

    uint64_t payload = 0, tokens = 0;
    bool starts = false;
    CHECK_STATUS(ctxw_history_get(h, 0, &payload, &tokens, &starts), CTXW_OK);
    CHECK(payload == 4 && tokens == 5 && starts);
    CHECK_STATUS(ctxw_history_get(h, 1, &payload, NULL, NULL), CTXW_INDEX_OUT_OF_RANGE);
    ctxw_history_free(h);
}

static void test_low_watermark(void) {
    ctxw_history *h = NULL;
    CHECK_STATUS(ctxw_history_new(&h), CTXW_OK);
    for (uint64_t i = 0; i < 10; i++) {
        CHECK_STATUS(ctxw_history_push(h, i, 10, true), CTXW_OK);
    }
    uint64_t out[10];
    size_t n = 0;
    uint64_t too_high = 100;
    CHECK_STATUS(ctxw_history_evict(h, 99, 0, &too_high, out, 10, &n), CTXW_WATERMARK_ABOVE_MAX);
    uint64_t low = 50;
    CHECK_STATUS(ctxw_history_evict(h, 99, 0, &low, out, 10, &n), CTXW_OK);
    CHECK(n == 5 && out[0] == 0 && out[4] == 4);
    uint64_t total = 0;
    CHECK_STATUS(ctxw_history_total_tokens(h, &total), CTXW_OK);
    CHECK(total == 50);
    ctxw_history_free(h);
}

static void test_snapshot_rollback(void) {
    ctxw_history *h = NULL, *other = NULL;
    CHECK_STATUS(ctxw_history_new(&h), CTXW_OK);
    CHECK_STATUS(ctxw_history_new(&other), CTXW_OK);
    for (uint64_t i = 0; i < 5; i++) {
        CHECK_STATUS(ctxw_history_push(h, 100 + i, 10, true), CTXW_OK);
    }
    ctxw_snapshot *snap = NULL;
    CHECK_STATUS(ctxw_history_snapshot(h, &snap), CTXW_OK);
    uint64_t out[5];
    size_t n = 0;
    CHECK_STATUS(ctxw_history_evict(h, 20, 0, NULL, out, 5, &n), CTXW_OK);
    CHECK(n == 3);
    CHECK_STATUS(ctxw_history_push(h, 999, 1, true), CTXW_OK);
    CHECK_STATUS(ctxw_history_rollback(other, snap), CTXW_FOREIGN_SNAPSHOT);
    CHECK_STATUS(ctxw_history_rollback(h, snap), CTXW_OK);
    size_t len = 0;
    uint64_t total = 0, payload = 0;
    CHECK_STATUS(ctxw_history_len(h, &len), CTXW_OK);
    CHECK(len == 5);
    CHECK_STATUS(ctxw_history_total_tokens(h, &total), CTXW_OK);
    CHECK(total == 50);
    CHECK_STATUS(ctxw_history_get(h, 0, &payload, NULL, NULL), CTXW_OK);
    CHECK(payload == 100);
    CHECK_STATUS(ctxw_history_clear(h), CTXW_OK);
    CHECK_STATUS(ctxw_history_len(h, &len), CTXW_OK);
    CHECK(len == 0);
    CHECK_STATUS(ctxw_history_rollback(h, snap), CTXW_OK);
    CHECK_STATUS(ctxw_history_len(h, &len), CTXW_OK);
    CHECK(len == 5);
    ctxw_snapshot_free(snap);
    ctxw_history_free(other);
    ctxw_history_free(h);
}

static void test_null_arguments(void) {
    size_t len = 0;
    uint64_t total = 0;
    size_t n = 0;
    CHECK_STATUS(ctxw_history_new(NULL), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_history_push(NULL, 1, 1, true), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_history_len(NULL, &len), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_history_total_tokens(NULL, &total), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_history_evict(NULL, 1, 0, NULL, NULL, 0, &n), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_history_rollback(NULL, NULL), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_history_clear(NULL), CTXW_NULL_ARGUMENT);

    char message[128];
    size_t message_len = 0;
    CHECK_STATUS(ctxw_last_error_message(message, sizeof message, &message_len), CTXW_OK);
    CHECK(strstr(message, "history") != NULL);
    CHECK_STATUS(ctxw_last_error_message(message, 2, &message_len), CTXW_BUFFER_TOO_SMALL);
    CHECK(message_len > 2);

    ctxw_history *h = NULL;
    CHECK_STATUS(ctxw_history_new(&h), CTXW_OK);
    CHECK_STATUS(ctxw_history_len(h, NULL), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_history_push(h, 1, 10, true), CTXW_OK);
    /* Eviction needed but no output buffer. */
    CHECK_STATUS(ctxw_history_evict(h, 1, 0, NULL, NULL, 0, &n), CTXW_BUFFER_TOO_SMALL);
    CHECK(n == 1);
    CHECK_STATUS(ctxw_history_push(h, 2, UINT64_MAX, true), CTXW_OVERFLOW);
    CHECK_STATUS(ctxw_history_len(h, &len), CTXW_OK);
    CHECK(len == 1);
    ctxw_history_free(h);
    ctxw_history_free(NULL);
    ctxw_snapshot_free(NULL);

    CHECK(strcmp(ctxw_status_message(CTXW_OK), "ok") == 0);
    CHECK(ctxw_version() >= 100);
}

int main(void) {
    test_evict_whole_groups();
    test_low_watermark();
    test_snapshot_rollback();
    test_null_arguments();
    return checks_report("test_history");
}
