/* http.h - the inference server's HTTP/1.1: a request's head parsed, an answer built.
 *
 * Only what the server needs: a request line, headers (Content-Length, Transfer-Encoding,
 * Connection, Expect, Content-Encoding, Inference-Header-Content-Length) and a body of
 * Content-Length bytes; the caller does the socket I/O and decides what to refuse. The head
 * is hostile: every line is bounded by the buffer, names and the target are checked byte by
 * byte, and numbers are digits only. */
#ifndef AOT_SERVER_HTTP_H_
#define AOT_SERVER_HTTP_H_

#include <stddef.h>
#include <stdint.h>

#include "server_json.h"

#define AOT_HTTP_MAX_HEADERS 100

typedef struct aot_http_request {
  char method[16];
  char path[2048];
  int http_minor; /* 0 or 1 */
  int keep_alive;
  int has_content_length;
  uint64_t content_length;
  int chunked;
  int expect_continue;
  int has_infer_header_len;
  uint64_t infer_header_len;
  char content_encoding[64];
  size_t header_bytes; /* through the blank line */
} aot_http_request_t;

typedef struct aot_http_response {
  int status;
  aot_sb_t body;
  int binary;              /* body is JSON + binary data */
  size_t json_len;         /* Inference-Header-Content-Length when binary */
  const char* allow;       /* the Allow header of a 405 */
} aot_http_response_t;

/* "OK", "Not Found", ... for a status code. */
const char* aot_http_reason(int status);

/* Make r an error answer: `status` and the body {"error": "<message>"} (KServe's form). */
void aot_http_error(aot_http_response_t* r, int status, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parse the request line and headers in buf[0, n) (through the blank line) into q. 0 on
 * success; else -1 with r made the error answer (400, 431 or 505). */
int aot_http_parse_head(const char* buf, size_t n, aot_http_request_t* q, aot_http_response_t* r);

/* The status line and headers of answer r (Content-Type, Inference-Header-Content-Length for
 * a binary answer, Allow, Content-Length, Connection) appended to out. */
void aot_http_write_head(const aot_http_response_t* r, int keep_alive, aot_sb_t* out);

#endif /* AOT_SERVER_HTTP_H_ */
