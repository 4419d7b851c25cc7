/* Helpers shared by hotset's test programs: checks that count failures and
 * keep going, data paths from $HS_DATA, and the skip convention (exit 77). */
#ifndef HS_TEST_H
#define HS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hs_test_failures;

#define CHECK(cond, ...)                                                             \
	do {                                                                         \
		if (!(cond)) {                                                       \
			hs_test_failures++;                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
		}                                                                    \
	} while (0)

/* Exits with automake's "skipped" status after saying why. */
#define SKIP(...)                                  \
	do {                                       \
		fprintf(stderr, "SKIP: ");         \
		fprintf(stderr, __VA_ARGS__);      \
		fputc('\n', stderr);               \
		exit(77);                          \
	} while (0)

/* Path of a file under tests/data (the harness sets $HS_DATA). */
static inline const char *hs_test_data(const char *rel)
{
	static char buf[4][4096];
	static int k;
	const char *dir = getenv("HS_DATA");
	char *b = buf[k++ & 3];

	snprintf(b, sizeof buf[0], "%s/%s", dir ? dir : "tests/data", rel);
	return b;
}

static inline int hs_test_end(void)
{
	if (hs_test_failures) {
		fprintf(stderr, "%d check%s failed\n", hs_test_failures, hs_test_failures == 1 ? "" : "s");
		return 1;
	}
	return 0;
}

#endif
