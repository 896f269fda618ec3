/* The server's JSON parser and writer (servers/server_json.c): valid documents, spans and
 * numbers, every kind of malformed text refused with a byte offset, the node limit, and
 * seeded garbage that must never read out of bounds (run under ASan by `make asan-test`). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server_json.h"

static int parses(const char* text, uint32_t max_nodes) {
  aot_sj_doc_t d;
  char err[200];
  int rc = aot_sj_parse(text, strlen(text), max_nodes, &d, err, sizeof(err));
  if (rc == 0) aot_sj_free(&d);
  return rc == 0;
}

static void test_values(void) {
  const char* text =
      "{\"id\":\"a\\u00e9\\n\",\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"data\":[[1.5,-2e3,NaN],"
      "[-Infinity,0,18446744073709551615]]}],\"b\":true,\"n\":null}";
  aot_sj_doc_t d;
  char err[200];
  CHECK(aot_sj_parse(text, strlen(text), 1000, &d, err, sizeof(err)) == 0, "%s", err);
  char id[16];
  CHECK(aot_sj_string(&d, aot_sj_get(&d, 0, "id"), id, sizeof(id)) == 0 && strcmp(id, "a\xc3\xa9\n") == 0,
        "id decoded");
  CHECK(aot_sj_string(&d, aot_sj_get(&d, 0, "id"), id, 3) == -1, "too small a buffer is refused");
  CHECK(d.nodes[aot_sj_get(&d, 0, "b")].kind == AOT_SJ_TRUE, "true");
  CHECK(d.nodes[aot_sj_get(&d, 0, "n")].kind == AOT_SJ_NULL, "null");
  CHECK(aot_sj_get(&d, 0, "missing") == AOT_SJ_NONE, "absent key");
  uint32_t inputs = aot_sj_get(&d, 0, "inputs");
  uint32_t in0 = d.nodes[inputs].first;
  CHECK(aot_sj_string_is(&d, aot_sj_get(&d, in0, "name"), "x"), "name");
  uint32_t shape = aot_sj_get(&d, in0, "shape");
  CHECK(d.nodes[shape].len == 5 && memcmp(text + d.nodes[shape].start, "[1,3]", 5) == 0,
        "an array's span is its text");
  uint32_t row0 = d.nodes[aot_sj_get(&d, in0, "data")].first;
  uint32_t e = d.nodes[row0].first;
  double v;
  CHECK(aot_sj_double(&d, e, &v) == 0 && v == 1.5, "1.5");
  float fv;
  CHECK(aot_sj_float(&d, e, &fv) == 0 && fv == 1.5f, "1.5 as a float");
  int64_t iv;
  CHECK(aot_sj_int64(&d, e, &iv) == -1, "1.5 is no integer");
  e = d.nodes[e].next;
  CHECK(aot_sj_double(&d, e, &v) == 0 && v == -2000.0, "-2e3");
  e = d.nodes[e].next;
  CHECK(aot_sj_double(&d, e, &v) == 0 && isnan(v), "NaN");
  uint32_t row1 = d.nodes[row0].next;
  e = d.nodes[row1].first;
  CHECK(aot_sj_double(&d, e, &v) == 0 && isinf(v) && v < 0, "-Infinity");
  e = d.nodes[e].next;
  CHECK(aot_sj_int64(&d, e, &iv) == 0 && iv == 0, "0");
  e = d.nodes[e].next;
  uint64_t uv;
  CHECK(aot_sj_uint64(&d, e, &uv) == 0 && uv == UINT64_MAX, "uint64 max");
  CHECK(aot_sj_int64(&d, e, &iv) == -1, "past int64 is refused");
  aot_sj_free(&d);
}

static void test_float_rounds_once(void) {
  /* 1 + 2^-24 + 2^-60: as a double it rounds to 1 + 2^-24, a tie that a float cast breaks
   * to even (1.0f); the nearest float is 1 + 2^-23 */
  const char* text = "[1.00000005960464477550,1e39,-1e-50]";
  aot_sj_doc_t d;
  char err[200];
  CHECK(aot_sj_parse(text, strlen(text), 100, &d, err, sizeof(err)) == 0, "%s", err);
  uint32_t e = d.nodes[0].first;
  float f;
  CHECK(aot_sj_float(&d, e, &f) == 0 && f == 1.00000011920928955078f, "got %.9g", f);
  e = d.nodes[e].next;
  CHECK(aot_sj_float(&d, e, &f) == 0 && isinf(f), "1e39 overflows a float");
  e = d.nodes[e].next;
  CHECK(aot_sj_float(&d, e, &f) == 0 && f == 0.0f && signbit(f), "-1e-50 is -0");
  aot_sj_free(&d);
}

static void test_malformed(void) {
  static const char* bad[] = {
      "",         "{",           "[1,]",        "{\"a\":1,}",   "[01]",       "[1.]",
      "[.5]",     "[1e]",        "[-]",         "\"abc",        "\"\\x\"",    "\"\\u12\"",
      "[1] 2",    "{1:2}",       "{\"a\" 1}",   "tru",          "nul",        "[\"\x01\"]",
      "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "[-NaN]", "{\"a\":}",   "[,1]",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    aot_sj_doc_t d;
    char err[200] = "";
    int rc = aot_sj_parse(bad[i], strlen(bad[i]), 1000, &d, err, sizeof(err));
    CHECK(rc == -1, "'%s' was accepted", bad[i]);
    CHECK(strstr(err, "at byte") != NULL, "'%s': message '%s' names no offset", bad[i], err);
  }
  /* nesting */
  char deep[200];
  memset(deep, '[', 100);
  memset(deep + 100, ']', 100);
  aot_sj_doc_t d;
  char err[200];
  CHECK(aot_sj_parse(deep, sizeof(deep), 1000, &d, err, sizeof(err)) == -1, "100 levels deep");
  CHECK(parses("[[[[1]]]]", 1000), "4 levels deep");
  /* the node limit */
  CHECK(parses("[1,2,3]", 4), "4 values fit 4 nodes");
  CHECK(!parses("[1,2,3]", 3), "4 values do not fit 3 nodes");
}

static void test_garbage(void) {
  /* seeded random bytes and mutations of a valid request: no crash, no read past the end
   * (the text is copied to a buffer of exactly its length, so ASan sees an over-read) */
  static const char seed[] =
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1.0,\"\\u0041\"]}]}";
  uint32_t rng = 12345;
  for (int round = 0; round < 20000; round++) {
    size_t n = sizeof(seed) - 1;
    char* text = malloc(n);
    memcpy(text, seed, n);
    int edits = 1 + round % 4;
    for (int k = 0; k < edits; k++) {
      rng = rng * 1103515245u + 12345u;
      size_t at = (rng >> 8) % n;
      rng = rng * 1103515245u + 12345u;
      text[at] = (char)(rng >> 16);
    }
    rng = rng * 1103515245u + 12345u;
    size_t len = round % 3 == 0 ? (rng >> 8) % (n + 1) : n;
    aot_sj_doc_t d;
    char err[200];
    if (aot_sj_parse(text, len, 1000, &d, err, sizeof(err)) == 0) {
      for (uint32_t i = 0; i < d.count; i++) {
        char s[64];
        double v;
        (void)aot_sj_string(&d, i, s, sizeof(s));
        (void)aot_sj_double(&d, i, &v);
      }
      aot_sj_free(&d);
    }
    free(text);
  }
  CHECK(1, "garbage");
}

static void test_writer(void) {
  aot_sb_t sb;
  aot_sb_init(&sb, 0);
  aot_sb_json_string(&sb, "a\"b\\\n\x01\xff\xc3\xa9", 9);
  aot_sb_append(&sb, "", 1);
  CHECK(!sb.failed && strcmp(sb.data, "\"a\\\"b\\\\\\u000a\\u0001\xef\xbf\xbd\xc3\xa9\"") == 0,
        "escaped: %s", sb.data);
  aot_sb_free(&sb);
  aot_sb_init(&sb, 8);
  aot_sb_printf(&sb, "%s", "0123456789");
  CHECK(sb.failed, "the limit is kept");
  aot_sb_free(&sb);
}

int main(void) {
  test_values();
  test_float_rounds_once();
  test_malformed();
  test_garbage();
  test_writer();
  printf("test_server_json: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
