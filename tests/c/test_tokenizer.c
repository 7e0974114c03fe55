/* C ABI tests of ctxw_tokenizer_*: exact counts, names, UTF-8 and NULL handling. */
#include <string.h>

#include "ctxwindow.h"
#include "check.h"

static uint64_t count(const ctxw_tokenizer *t, const char *text) {
    uint64_t n = UINT64_MAX;
    CHECK_STATUS(ctxw_tokenizer_count(t, text, strlen(text), &n), CTXW_OK);
    return n;
}

int main(void) {
    ctxw_tokenizer *t = NULL;
    CHECK_STATUS(ctxw_tokenizer_new("cl100k_base", &t), CTXW_OK);
    CHECK(count(t, "hello world") == 2);
    CHECK(count(t, "") == 0);
    CHECK(count(t, "caf\xc3\xa9 \xf0\x9f\x91\x8d") > 0);
    uint64_t n = 0;
    CHECK_STATUS(ctxw_tokenizer_count(t, NULL, 0, &n), CTXW_OK);
    CHECK(n == 0);

    const char *name = NULL;
    CHECK_STATUS(ctxw_tokenizer_name(t, &name), CTXW_OK);
    CHECK(name != NULL && strcmp(name, "cl100k_base") == 0);

    /* Invalid UTF-8: a lone continuation byte. */
    const char bad[] = {'a', (char)0x80, 'b'};
    n = 7;
    CHECK_STATUS(ctxw_tokenizer_count(t, bad, sizeof bad, &n), CTXW_INVALID_UTF8);
    CHECK(n == 7);

    const char *texts[] = {"hello world", "", "one two three"};
    size_t lens[] = {11, 0, 13};
    uint32_t counts[3] = {0, 0, 0};
    CHECK_STATUS(ctxw_tokenizer_count_many(t, texts, lens, 3, counts), CTXW_OK);
    CHECK(counts[0] == 2 && counts[1] == 0 && counts[2] == 3);
    CHECK_STATUS(ctxw_tokenizer_count_many(t, NULL, NULL, 0, NULL), CTXW_OK);
    CHECK_STATUS(ctxw_tokenizer_count_many(t, NULL, lens, 3, counts), CTXW_NULL_ARGUMENT);

    ctxw_tokenizer *unknown = NULL;
    CHECK_STATUS(ctxw_tokenizer_new("cl100k", &unknown), CTXW_UNKNOWN_ENCODING);
    CHECK(unknown == NULL);
    char message[512];
    size_t message_len = 0;
    CHECK_STATUS(ctxw_last_error_message(message, sizeof message, &message_len), CTXW_OK);
    CHECK(strstr(message, "o200k_base") != NULL);
    CHECK_STATUS(ctxw_tokenizer_for_model("no-such-model", &unknown), CTXW_UNKNOWN_MODEL);
    CHECK_STATUS(ctxw_tokenizer_new(NULL, &unknown), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_tokenizer_new("cl100k_base", NULL), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_tokenizer_count(NULL, "x", 1, &n), CTXW_NULL_ARGUMENT);
    CHECK_STATUS(ctxw_tokenizer_count(t, "x", 1, NULL), CTXW_NULL_ARGUMENT);

    ctxw_tokenizer *model = NULL;
    CHECK_STATUS(ctxw_tokenizer_for_model("gpt-4o-mini", &model), CTXW_OK);
    CHECK_STATUS(ctxw_tokenizer_name(model, &name), CTXW_OK);
    CHECK(strcmp(name, "o200k_base") == 0);
    CHECK(count(model, "hello world") == 2);

    ctxw_tokenizer_free(model);
    ctxw_tokenizer_free(t);
    ctxw_tokenizer_free(NULL);
    return checks_report("test_tokenizer");
}
