/* Tests of the strict manifest JSON parser. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static int g_failures = 0;

static void expect(const char* text, int ok) {
  aot__json_doc_t* doc = NULL;
  const aot__json_t* root = NULL;
  aot_error_t err = {0, ""};
  aot_status_t st = aot__json_parse(text, strlen(text), &doc, &root, &err);
  if ((st == AOT_OK) != ok) {
    g_failures++;
    fprintf(stderr, "json %s: expected %s, got %s (%s)\n", text, ok ? "ok" : "error",
            st == AOT_OK ? "ok" : "error", err.message);
  }
  aot__json_free(doc);
}

int main(void) {
  const char* good[] = {"{}", "[]", " [1, -2, 0, 3.5, -0.5e-3, 1E+2] ", "\"\\u00e9\\ud83d\\ude00\"",
                        "{\"a\": {\"b\": [null, true, false]}}", "\"caf\xc3\xa9\"",
                        "9223372036854775807", "-9223372036854775808", "123456789012345678901234"};
  const char* bad[] = {"", "{", "[1,]", "{\"a\":1,}", "01", "-", "1.", ".5", "1e", "NaN",
                       "Infinity", "tru", "[1 2]", "{\"a\" 1}", "{1: 2}", "\"\\x\"",
                       "\"\\ud83d\"", "\"\\ude00x\"", "\"a\nb\"", "\"\xc0\xaf\"",
                       "\"\xed\xa0\x80\"", "\"\xf5\x80\x80\x80\"", "\"abc", "{} {}",
                       "{\"a\":1,\"a\":2}", "/* c */ {}"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) expect(good[i], 1);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect(bad[i], 0);
  /* Nesting limit. */
  char deep[200];
  memset(deep, '[', 100);
  memset(deep + 100, ']', 100);
  aot__json_doc_t* doc = NULL;
  const aot__json_t* root = NULL;
  aot_error_t err;
  if (aot__json_parse(deep, 200, &doc, &root, &err) == AOT_OK || !strstr(err.message, "nesting")) {
    g_failures++;
    fprintf(stderr, "depth limit not enforced\n");
  }
  aot__json_free(doc);
  /* Values. */
  const char* t = "{\"n\": -42, \"s\": \"a\\\"b\", \"big\": 99999999999999999999}";
  if (aot__json_parse(t, strlen(t), &doc, &root, &err) != AOT_OK) {
    g_failures++;
  } else {
    const aot__json_t* n = aot__json_get(root, "n");
    const aot__json_t* s = aot__json_get(root, "s");
    const aot__json_t* big = aot__json_get(root, "big");
    if (!n || !n->is_int || n->integer != -42) g_failures++;
    if (!s || strcmp(s->str, "a\"b") != 0) g_failures++;
    if (!big || big->is_int) g_failures++;
    if (aot__json_get(root, "missing")) g_failures++;
    aot__json_free(doc);
  }
  printf("test_json: %d failures\n", g_failures);
  return g_failures ? 1 : 0;
}
