/* http.c - see http.h. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "http.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char* aot_http_reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

void aot_http_error(aot_http_response_t* r, int status, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  r->status = status;
  r->binary = 0;
  aot_sb_free(&r->body);
  aot_sb_init(&r->body, 0);
  aot_sb_str(&r->body, "{\"error\":");
  aot_sb_json_string(&r->body, msg, strlen(msg));
  aot_sb_str(&r->body, "}");
}

int aot_http_parse_head(const char* buf, size_t n, aot_http_request_t* q, aot_http_response_t* r) {
  const char* end = buf + n;
  const char* line = buf;
  const char* eol = memchr(line, '\r', (size_t)(end - line));
  if (!eol || eol + 1 >= end || eol[1] != '\n') {
    aot_http_error(r, 400, "malformed request line");
    return -1;
  }
  /* METHOD SP target SP HTTP/1.x */
  const char* sp1 = memchr(line, ' ', (size_t)(eol - line));
  const char* sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
  if (!sp1 || !sp2 || sp1 == line || sp2 == sp1 + 1) {
    aot_http_error(r, 400, "malformed request line: expected 'METHOD /path HTTP/1.1'");
    return -1;
  }
  size_t mlen = (size_t)(sp1 - line), plen = (size_t)(sp2 - sp1 - 1), vlen = (size_t)(eol - sp2 - 1);
  if (mlen >= sizeof(q->method)) {
    aot_http_error(r, 400, "malformed request line: method too long");
    return -1;
  }
  for (size_t k = 0; k < mlen; k++)
    if (line[k] < 'A' || line[k] > 'Z') {
      aot_http_error(r, 400, "malformed request line: the method is not an upper-case token");
      return -1;
    }
  memcpy(q->method, line, mlen);
  q->method[mlen] = '\0';
  if (plen >= sizeof(q->path)) {
    aot_http_error(r, 400, "request target longer than %zu bytes", sizeof(q->path) - 1);
    return -1;
  }
  for (size_t k = 0; k < plen; k++)
    if ((unsigned char)sp1[1 + k] <= 0x20 || (unsigned char)sp1[1 + k] >= 0x7F) {
      aot_http_error(r, 400, "malformed request line: the target has a control or non-ASCII byte");
      return -1;
    }
  memcpy(q->path, sp1 + 1, plen);
  q->path[plen] = '\0';
  if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1')) {
    const char* v = sp2 + 1; /* HTTP/d.d of another version: 505; anything else: 400 */
    if (vlen == 8 && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' && v[5] <= '9' && v[6] == '.' &&
        v[7] >= '0' && v[7] <= '9') {
      aot_http_error(r, 505, "only HTTP/1.0 and HTTP/1.1 are served");
    } else {
      aot_http_error(r, 400, "malformed request line: expected 'HTTP/1.1' after the target");
    }
    return -1;
  }
  q->http_minor = sp2[8] - '0';
  q->keep_alive = q->http_minor == 1;
  int headers = 0;
  for (line = eol + 2; line < end;) {
    eol = memchr(line, '\r', (size_t)(end - line));
    if (!eol || eol + 1 >= end || eol[1] != '\n') {
      aot_http_error(r, 400, "malformed header line (lines end with CRLF)");
      return -1;
    }
    if (eol == line) break; /* the blank line */
    if (++headers > AOT_HTTP_MAX_HEADERS) {
      aot_http_error(r, 431, "more than %d header lines", AOT_HTTP_MAX_HEADERS);
      return -1;
    }
    const char* colon = memchr(line, ':', (size_t)(eol - line));
    if (!colon || colon == line || line[0] == ' ' || line[0] == '\t') {
      aot_http_error(r, 400, "malformed header line: expected 'Name: value'");
      return -1;
    }
    size_t nlen = (size_t)(colon - line);
    for (size_t k = 0; k < nlen; k++)
      if ((unsigned char)line[k] <= 0x20 || (unsigned char)line[k] >= 0x7F) {
        aot_http_error(r, 400, "malformed header name");
        return -1;
      }
    const char* v = colon + 1;
    const char* vend = eol;
    while (v < vend && (*v == ' ' || *v == '\t')) v++;
    while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t')) vend--;
    size_t vl = (size_t)(vend - v);
    for (size_t k = 0; k < vl; k++)
      if (((unsigned char)v[k] < 0x20 && v[k] != '\t') || v[k] == 0x7F) {
        aot_http_error(r, 400, "malformed header value: a control character in %.*s", (int)nlen, line);
        return -1;
      }
#define IS(name) (nlen == sizeof(name) - 1 && strncasecmp(line, name, nlen) == 0)
    if (IS("Content-Length") || IS("Inference-Header-Content-Length")) {
      int infer = IS("Inference-Header-Content-Length");
      uint64_t x = 0;
      if (vl == 0 || vl > 19) {
        aot_http_error(r, 400, "%.*s is not a number of bytes", (int)nlen, line);
        return -1;
      }
      for (size_t k = 0; k < vl; k++) {
        if (v[k] < '0' || v[k] > '9') {
          aot_http_error(r, 400, "%.*s is not a number of bytes", (int)nlen, line);
          return -1;
        }
        x = x * 10 + (uint64_t)(v[k] - '0');
      }
      int* has = infer ? &q->has_infer_header_len : &q->has_content_length;
      uint64_t* val = infer ? &q->infer_header_len : &q->content_length;
      if (*has && *val != x) {
        aot_http_error(r, 400, "two different %.*s headers", (int)nlen, line);
        return -1;
      }
      *has = 1;
      *val = x;
    } else if (IS("Transfer-Encoding")) {
      if (!(vl == 8 && strncasecmp(v, "identity", 8) == 0)) q->chunked = 1;
    } else if (IS("Connection")) {
      /* a comma-separated list of tokens */
      for (const char* t = v; t < vend;) {
        const char* c = memchr(t, ',', (size_t)(vend - t));
        const char* te = c ? c : vend;
        while (t < te && (*t == ' ' || *t == '\t')) t++;
        const char* tt = te;
        while (tt > t && (tt[-1] == ' ' || tt[-1] == '\t')) tt--;
        if (tt - t == 5 && strncasecmp(t, "close", 5) == 0) q->keep_alive = 0;
        if (tt - t == 10 && strncasecmp(t, "keep-alive", 10) == 0) q->keep_alive = 1;
        t = c ? c + 1 : vend;
      }
    } else if (IS("Expect")) {
      if (vl == 12 && strncasecmp(v, "100-continue", 12) == 0) q->expect_continue = 1;
    } else if (IS("Content-Encoding")) {
      size_t k = vl < sizeof(q->content_encoding) - 1 ? vl : sizeof(q->content_encoding) - 1;
      memcpy(q->content_encoding, v, k);
      q->content_encoding[k] = '\0';
    }
#undef IS
    line = eol + 2;
  }
  return 0;
}

void aot_http_write_head(const aot_http_response_t* r, int keep_alive, aot_sb_t* out) {
  aot_sb_printf(out, "HTTP/1.1 %d %s\r\n", r->status, aot_http_reason(r->status));
  if (r->binary) {
    aot_sb_printf(out,
                  "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: %zu\r\n",
                  r->json_len);
  } else {
    aot_sb_str(out, "Content-Type: application/json\r\n");
  }
  if (r->allow) aot_sb_printf(out, "Allow: %s\r\n", r->allow);
  aot_sb_printf(out, "Content-Length: %zu\r\n", r->body.len);
  aot_sb_str(out, keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");
}
