/* The C tests' assertion: CHECK(cond, fmt, ...) counts a check, and on failure
 * counts it, prints where and why, and goes on (the test's main reports). */
#ifndef AOT_TESTS_CHECK_H
#define AOT_TESTS_CHECK_H

#include <stdio.h>

static int g_failures = 0;
static int g_checks = 0;

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    g_checks++;                                                            \
    if (!(cond)) {                                                         \
      g_failures++;                                                        \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
    }                                                                      \
  } while (0)

#endif
