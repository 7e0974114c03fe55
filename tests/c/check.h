/* A minimal checking harness for the C ABI tests. */
#ifndef CTXW_TEST_CHECK_H
#define CTXW_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int checks_run = 0;
static int checks_failed = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        checks_run++;                                                            \
        if (!(cond)) {                                                           \
            checks_failed++;                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_STATUS(call, expected) CHECK((call) == (expected))

static int checks_report(const char *name) {
    printf("%s: %d passed, %d failed\n", name, checks_run - checks_failed, checks_failed);
    return checks_failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
