/* The server's HTTP request-head parser (servers/http.c): the fields a request sets, each
 * malformed head refused with its status, and seeded garbage that must never read out of
 * bounds (each head is copied to a buffer of exactly its length: ASan sees an over-read). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "http.h"

/* Parse `text`; on success 0 and *q filled, else the error's status. */
static int parse(const char* text, aot_http_request_t* q, char* error, size_t error_size) {
  size_t n = strlen(text);
  char* copy = malloc(n ? n : 1);
  memcpy(copy, text, n);
  aot_http_response_t r;
  memset(&r, 0, sizeof(r));
  memset(q, 0, sizeof(*q));
  aot_sb_init(&r.body, 0);
  int rc = aot_http_parse_head(copy, n, q, &r);
  if (error && error_size) {
    size_t k = r.body.len < error_size - 1 ? r.body.len : error_size - 1;
    if (k) memcpy(error, r.body.data, k);
    error[k] = '\0';
  }
  aot_sb_free(&r.body);
  free(copy);
  return rc == 0 ? 0 : r.status;
}

static void test_fields(void) {
  aot_http_request_t q;
  char err[512];
  int st = parse("POST /v2/models/m/infer?x=1 HTTP/1.1\r\nHost: a\r\ncontent-length:  42 \r\n"
                 "Inference-Header-Content-Length: 7\r\nConnection: foo, Close\r\n"
                 "Expect: 100-continue\r\nContent-Encoding: gzip\r\n\r\n",
                 &q, err, sizeof(err));
  CHECK(st == 0, "status %d: %s", st, err);
  CHECK(strcmp(q.method, "POST") == 0 && strcmp(q.path, "/v2/models/m/infer?x=1") == 0, "line");
  CHECK(q.http_minor == 1 && q.keep_alive == 0, "Connection: close in a list");
  CHECK(q.has_content_length && q.content_length == 42, "Content-Length, case and blanks");
  CHECK(q.has_infer_header_len && q.infer_header_len == 7, "Inference-Header-Content-Length");
  CHECK(q.expect_continue && strcmp(q.content_encoding, "gzip") == 0 && !q.chunked, "others");
  st = parse("GET /v2 HTTP/1.0\r\n\r\n", &q, err, sizeof(err));
  CHECK(st == 0 && q.http_minor == 0 && q.keep_alive == 0, "HTTP/1.0 closes");
  st = parse("GET /v2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &q, err, sizeof(err));
  CHECK(st == 0 && q.keep_alive == 1, "HTTP/1.0 keep-alive");
  st = parse("GET /v2 HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", &q, err, sizeof(err));
  CHECK(st == 0 && q.content_length == 5, "a repeated equal Content-Length");
  st = parse("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &q, err, sizeof(err));
  CHECK(st == 0 && q.chunked, "chunked is seen (the server refuses it)");
}

static void test_refused(void) {
  static const struct {
    const char* head;
    int status;
    const char* phrase;
  } cases[] = {
      {"\r\n\r\n", 400, "malformed request line"},
      {"GET\r\n\r\n", 400, "malformed request line"},
      {"GET /v2\r\n\r\n", 400, "malformed request line"},
      {"get /v2 HTTP/1.1\r\n\r\n", 400, "upper-case"},
      {"GET /v2 HTTP/2.0\r\n\r\n", 505, "HTTP/1.0 and HTTP/1.1"},
      {"GET /v2 FTP/1.1\r\n\r\n", 400, "expected 'HTTP/1.1'"},
      {"GET /v\x01 HTTP/1.1\r\n\r\n", 400, "control or non-ASCII"},
      {"GET /v\xc3\xa9 HTTP/1.1\r\n\r\n", 400, "control or non-ASCII"},
      {"GET /v2 HTTP/1.1\r\nNoColon\r\n\r\n", 400, "malformed header line"},
      {"GET /v2 HTTP/1.1\r\n folded: x\r\n\r\n", 400, "malformed header line"},
      {"GET /v2 HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "malformed header name"},
      {"GET /v2 HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400, "not a number of bytes"},
      {"GET /v2 HTTP/1.1\r\nContent-Length: \r\n\r\n", 400, "not a number of bytes"},
      {"GET /v2 HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400, "not a number"},
      {"GET /v2 HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "two different"},
      {"GET /v2 HTTP/1.1\nHost: x\n\n\r\n\r\n", 400, "malformed request line"},
      {"GET /v2 HTTP/1.1\r\nHost: x\n\r\n\r\n", 400, "a control character in Host"},
      {"GET /v2 HTTP/1.1\r\nHost: x\x01y\r\n\r\n", 400, "a control character in Host"},
      {"GET /v2 HTTP/1.12\r\n\r\n", 400, "expected 'HTTP/1.1'"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    aot_http_request_t q;
    char err[512];
    int st = parse(cases[i].head, &q, err, sizeof(err));
    CHECK(st == cases[i].status, "case %zu: status %d, want %d (%s)", i, st, cases[i].status, err);
    CHECK(strstr(err, cases[i].phrase) != NULL, "case %zu: '%s' lacks '%s'", i, err, cases[i].phrase);
  }
  /* more than AOT_HTTP_MAX_HEADERS lines */
  aot_sb_t sb;
  aot_sb_init(&sb, 0);
  aot_sb_str(&sb, "GET /v2 HTTP/1.1\r\n");
  for (int k = 0; k <= AOT_HTTP_MAX_HEADERS; k++) aot_sb_str(&sb, "X: y\r\n");
  aot_sb_str(&sb, "\r\n");
  aot_sb_append(&sb, "", 1);
  aot_http_request_t q;
  char err[512];
  CHECK(parse(sb.data, &q, err, sizeof(err)) == 431, "too many headers: %s", err);
  aot_sb_free(&sb);
  /* a target one byte past the limit */
  char long_line[sizeof(q.path) + 32]; /* "GET /aaa... HTTP/1.1": a target of sizeof(path) bytes */
  memcpy(long_line, "GET /", 5);
  memset(long_line + 5, 'a', sizeof(q.path) - 1);
  strcpy(long_line + 4 + sizeof(q.path), " HTTP/1.1\r\n\r\n");
  CHECK(parse(long_line, &q, err, sizeof(err)) == 400 && strstr(err, "longer than"), "%s", err);
}

static void test_garbage(void) {
  static const char seed[] =
      "POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 12\r\nConnection: keep-alive, x\r\n\r\n";
  uint32_t rng = 99;
  int accepted = 0;
  for (int round = 0; round < 20000; round++) {
    char text[sizeof(seed)];
    memcpy(text, seed, sizeof(seed));
    for (int k = 0; k < 1 + round % 5; k++) {
      rng = rng * 1103515245u + 12345u;
      size_t at = (rng >> 8) % (sizeof(seed) - 1);
      rng = rng * 1103515245u + 12345u;
      text[at] = (char)(rng >> 16);
    }
    rng = rng * 1103515245u + 12345u;
    size_t n = round % 3 ? sizeof(seed) - 1 : (rng >> 8) % sizeof(seed);
    char* copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    aot_http_request_t q;
    aot_http_response_t r;
    memset(&r, 0, sizeof(r));
    aot_sb_init(&r.body, 0);
    if (aot_http_parse_head(copy, n, &q, &r) == 0) {
      accepted++;
    } else {
      CHECK(r.status >= 400 && r.body.len > 0, "a refusal has a status and a body");
    }
    aot_sb_free(&r.body);
    free(copy);
  }
  CHECK(accepted > 0, "some mutations stay valid");
}

static void test_write_head(void) {
  aot_http_response_t r;
  memset(&r, 0, sizeof(r));
  aot_sb_init(&r.body, 0);
  aot_http_error(&r, 405, "use %s", "GET");
  r.allow = "GET";
  aot_sb_t head;
  aot_sb_init(&head, 0);
  aot_http_write_head(&r, 1, &head);
  aot_sb_append(&head, "", 1);
  CHECK(strstr(head.data, "HTTP/1.1 405 Method Not Allowed\r\n") == head.data, "%s", head.data);
  CHECK(strstr(head.data, "Allow: GET\r\n") && strstr(head.data, "Connection: keep-alive\r\n\r\n"),
        "%s", head.data);
  CHECK(strstr(head.data, "Content-Length: 19\r\n") != NULL, "the body {\"error\":\"use GET\"}: %s",
        head.data);
  aot_sb_free(&head);
  aot_sb_free(&r.body);
}

int main(void) {
  test_fields();
  test_refused();
  test_garbage();
  test_write_head();
  printf("test_server_http: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
