/* Tests of the strict manifest JSON parser. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* `objects` objects of `members` members each, keys alike but for their last digits (so
 * comparing two costs their whole length), in one array; *out_len its length. */
static char* many_keys(int objects, int members, size_t* out_len) {
  size_t cap = (size_t)objects * (size_t)members * 48 + 64, n = 0;
  char* t = malloc(cap);
  t[n++] = '[';
  for (int o = 0; o < objects; o++) {
    n += (size_t)snprintf(t + n, cap - n, "%s{", o ? "," : "");
    for (int k = 0; k < members; k++)
      n += (size_t)snprintf(t + n, cap - n, "%s\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkk%04d\":0", k ? "," : "", k);
    t[n++] = '}';
  }
  t[n++] = ']';
  *out_len = n;
  return t;
}

static double parse_time(const char* t, size_t n) {
  aot__json_doc_t* doc = NULL;
  const aot__json_t* root = NULL;
  aot_error_t err;
  double t0 = now_s();
  aot_status_t st = aot__json_parse(t, n, &doc, &root, &err);
  double took = now_s() - t0;
  if (st != AOT_OK) {
    g_failures++;
    fprintf(stderr, "many keys: %s\n", err.message);
  }
  aot__json_free(doc);
  return took;
}

/* Duplicate keys are found by sorting: 300 objects of 1,024 members (12 MB) parse about as
 * fast as the same members in objects of 16 (comparing every pair took 10x longer), and a
 * repeated key is reported where it repeats. */
static void test_many_keys(void) {
  size_t n_big, n_small;
  char* big = many_keys(300, 1024, &n_big);
  char* small = many_keys(300 * 64, 16, &n_small);
  double t_small = parse_time(small, n_small);
  double t_big = parse_time(big, n_big);
  if (t_big > 3 * t_small + 0.05) {
    g_failures++;
    fprintf(stderr, "1,024-member objects: %.3f s, 16-member objects: %.3f s\n", t_big, t_small);
  }
  free(big);
  free(small);
  size_t n;
  char* dup = many_keys(1, 1024, &n);
  /* the last key becomes a repeat of the sixth: ...0005":0}] */
  size_t last = n - 2 - strlen("\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkk1023\":0");
  memcpy(dup + last + 31, "0005", 4);
  aot__json_doc_t* doc = NULL;
  const aot__json_t* root = NULL;
  aot_error_t err;
  char want[64];
  snprintf(want, sizeof want, "JSON error at byte %zu: duplicate key", last);
  if (aot__json_parse(dup, n, &doc, &root, &err) == AOT_OK || !strstr(err.message, want)) {
    g_failures++;
    fprintf(stderr, "repeated key: want '%s', got '%s'\n", want, err.message);
  }
  aot__json_free(doc);
  free(dup);
  /* the tree's byte limit */
  const char* arr = "[0,0,0,0,0,0,0,0,0,0]";
  if (aot__json_parse_limited(arr, strlen(arr), 5 * sizeof(aot__json_t), &doc, &root, &err) !=
          AOT_ERR_NO_MEMORY ||
      !strstr(err.message, "JSON parse tree would exceed")) {
    g_failures++;
    fprintf(stderr, "tree limit: '%s'\n", err.message);
  }
  aot__json_free(doc);
  if (aot__json_parse_limited(arr, strlen(arr), 11 * sizeof(aot__json_t), &doc, &root, &err) != AOT_OK ||
      aot__json_doc_bytes(doc) != 11 * sizeof(aot__json_t)) {
    g_failures++;
    fprintf(stderr, "tree of 11 nodes: '%s'\n", err.message);
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
  test_many_keys();
  printf("test_json: %d failures\n", g_failures);
  return g_failures ? 1 : 0;
}
