/* C ABI tests of ctxw_score* and ctxw_select_*: formulas, +inf for pinned, selection order,
 * buffer sizes and errors. */
#include <math.h>
#include <string.h>

#include "ctxwindow.h"
#include "check.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

static void test_retention(void) {
    int64_t last[4] = {10, 5, 0, 12};
    int64_t access[4] = {0, 1, 10, 3};
    uint8_t pinned[4] = {0, 0, 0, 2}; /* any non-zero byte is true */
    ctxw_columns columns;
    memset(&columns, 0, sizeof columns);
    columns.len = 4;
    columns.last_access_turn = last;
    columns.access_count = access;
    columns.pinned = pinned;
    double out[4] = {0};
    CHECK_STATUS(ctxw_score("retention", 10, &columns, out, 4), CTXW_OK);
    for (int i = 0; i < 3; i++) {
        double age = 10 - last[i] > 0 ? (double)(10 - last[i]) : 0.0;
        double freq = log((double)access[i] + 1) / log(5.0);
        double want = 0.7 * exp(-age / 30.0) + 0.3 * (freq < 1 ? freq : 1);
        CHECK(close_to(out[i], want));
    }
    CHECK(isinf(out[3]) && out[3] > 0);

    ctxw_retention_params params = ctxw_retention_params_default();
    CHECK(params.max_age_turns == 30.0);
    params.recency_weight = 1.0;
    params.frequency_weight = 0.0;
    CHECK_STATUS(ctxw_score_retention(10, &columns, &params, out, 4), CTXW_OK);
    CHECK(close_to(out[1], exp(-5.0 / 30.0)));

    /* Argument errors leave out untouched; a negative count is found while scoring. */
    out[0] = -1;
    CHECK_STATUS(ctxw_score("retention", 10, &columns, out, 3), CTXW_INVALID_ARGUMENT);
    CHECK_STATUS(ctxw_score("lfu", 10, &columns, out, 4), CTXW_INVALID_ARGUMENT);
    CHECK_STATUS(ctxw_score("fifo", 10, &columns, out, 4), CTXW_INVALID_ARGUMENT);
    char message[256];
    size_t len = 0;
    CHECK_STATUS(ctxw_last_error_message(message, sizeof message, &len), CTXW_OK);
    CHECK(strstr(message, "created_turn") != NULL);
    CHECK(out[0] == -1);
    access[1] = -1;
    CHECK_STATUS(ctxw_score("retention", 10, &columns, out, 4), CTXW_INVALID_ARGUMENT);
    CHECK_STATUS(ctxw_last_error_message(message, sizeof message, &len), CTXW_OK);
    CHECK(strstr(message, "access_count must be >= 0, got -1 at index 1") != NULL);
    CHECK_STATUS(ctxw_score(NULL, 10, &columns, out, 4), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_score("retention", 10, NULL, out, 4), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_score("retention", 10, &columns, NULL, 4), CTXW_NULL_ARGUMENT);
}

static void test_other_policies(void) {
    int64_t created[3] = {0, 5, 9};
    uint8_t types[3] = {4, 0, 2};
    float embedding[6] = {1, 0, 0, 1, 1, 1};
    float task[2] = {1, 0};
    ctxw_columns columns;
    memset(&columns, 0, sizeof columns);
    columns.len = 3;
    columns.created_turn = created;
    columns.last_access_turn = created;
    columns.content_type = types;
    columns.embedding = embedding;
    columns.task_embedding = task;
    columns.embedding_dim = 2;
    double out[3];
    const char *policies[] = {"fifo", "lru", "priority", "type_ttl", "hybrid"};
    for (int p = 0; p < 5; p++) {
        CHECK_STATUS(ctxw_score(policies[p], 10, &columns, out, 3), CTXW_OK);
        CHECK(isinf(out[1]));
        CHECK(out[0] >= 0 && out[2] >= 0 && !isinf(out[0]));
    }
    CHECK_STATUS(ctxw_score("fifo", 10, &columns, out, 3), CTXW_OK);
    CHECK(close_to(out[0], exp(-1.0)));
    CHECK_STATUS(ctxw_score("type_ttl", 10, &columns, out, 3), CTXW_OK);
    CHECK(out[0] == 0.0 && close_to(out[2], 1.0 - 1.0 / 50.0));
}

static void test_selection(void) {
    double scores[5] = {0.5, 0.1, 0.5, 0.1, INFINITY};
    int64_t tokens[5] = {10, 20, 30, 40, 50};
    size_t out[5];
    size_t n = 0;
    CHECK_STATUS(ctxw_select_by_ratio(scores, 5, NULL, NULL, 0.6, 0, out, 5, &n), CTXW_OK);
    CHECK(n == 3 && out[0] == 1 && out[1] == 3 && out[2] == 0);
    CHECK_STATUS(ctxw_select_by_ratio(scores, 5, NULL, NULL, 1.0, 0, out, 5, &n), CTXW_OK);
    CHECK(n == 4); /* the +inf item is never selected */
    CHECK_STATUS(ctxw_select_by_ratio(scores, 5, NULL, NULL, 1.0, 0, out, 2, &n), CTXW_BUFFER_TOO_SMALL);
    CHECK(n == 4);
    uint8_t pinned[5] = {0, 255, 0, 0, 0};
    CHECK_STATUS(ctxw_select_by_ratio(scores, 5, pinned, NULL, 0.4, 0, out, 5, &n), CTXW_OK);
    CHECK(n == 1 && out[0] == 3);
    /* 20 + 40 tokens from the two lowest scores reach 55. */
    CHECK_STATUS(ctxw_select_by_tokens(scores, tokens, 5, NULL, NULL, 55, 0, out, 5, &n), CTXW_OK);
    CHECK(n == 2 && out[0] == 1 && out[1] == 3);
    CHECK_STATUS(ctxw_select_by_tokens(scores, tokens, 5, NULL, NULL, 55, 4, out, 5, &n), CTXW_OK);
    CHECK(n == 1);
    CHECK_STATUS(ctxw_select_by_ratio(scores, 5, NULL, NULL, 1.5, 0, out, 5, &n), CTXW_INVALID_ARGUMENT);
    CHECK_STATUS(ctxw_select_by_tokens(scores, NULL, 5, NULL, NULL, 5, 0, out, 5, &n), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_select_by_ratio(NULL, 0, NULL, NULL, 0.5, 0, NULL, 0, &n), CTXW_OK);
    CHECK(n == 0);
    double nan_scores[2] = {NAN, 1.0};
    CHECK_STATUS(ctxw_select_by_ratio(nan_scores, 2, NULL, NULL, 0.5, 0, out, 5, &n), CTXW_INVALID_ARGUMENT);
}

int main(void) {
    test_retention();
    test_other_policies();
    test_selection();
    return checks_report("test_scoring");
}
