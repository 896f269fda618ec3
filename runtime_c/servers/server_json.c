/* server_json.c - see server_json.h. */
#define _POSIX_C_SOURCE 200809L
#include "server_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
  const unsigned char* s;
  size_t n, i;
  aot_sj_doc_t* doc;
  uint32_t max_nodes;
  char* err;
  size_t err_size;
} parser_t;

static int fail(parser_t* p, const char* what) {
  snprintf(p->err, p->err_size, "JSON error at byte %zu: %s", p->i, what);
  return -1;
}

static void skip_ws(parser_t* p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                         p->s[p->i] == '\r'))
    p->i++;
}

static uint32_t new_node(parser_t* p, uint32_t kind) {
  aot_sj_doc_t* d = p->doc;
  if (d->count >= p->max_nodes) {
    snprintf(p->err, p->err_size, "JSON error at byte %zu: more than %u values in one body",
             p->i, p->max_nodes);
    return AOT_SJ_NONE;
  }
  if (d->count == d->capacity) {
    uint32_t cap = d->capacity == 0 ? 64 : d->capacity > p->max_nodes / 2 ? p->max_nodes
                                                                           : d->capacity * 2;
    if (cap > p->max_nodes) cap = p->max_nodes;
    aot_sj_node_t* nodes = realloc(d->nodes, (size_t)cap * sizeof(*nodes));
    if (!nodes) {
      snprintf(p->err, p->err_size, "out of memory parsing JSON (%u values)", cap);
      return AOT_SJ_NONE;
    }
    d->nodes = nodes;
    d->capacity = cap;
  }
  uint32_t k = d->count++;
  d->nodes[k].kind = kind;
  d->nodes[k].start = (uint32_t)p->i;
  d->nodes[k].len = 0;
  d->nodes[k].first = AOT_SJ_NONE;
  d->nodes[k].next = AOT_SJ_NONE;
  return k;
}

static int hexval(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Length of the valid UTF-8 sequence at s[0, n) (1..4), 0 when invalid. */
static size_t utf8_seq(const unsigned char* s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t min, cp;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, min = 0x80, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, min = 0x800, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (len > n) return 0;
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[k] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

/* A string token starting at the quote; its node spans the inside. */
static int parse_string(parser_t* p, uint32_t node) {
  p->i++; /* the quote */
  p->doc->nodes[node].start = (uint32_t)p->i;
  while (p->i < p->n) {
    unsigned char c = p->s[p->i];
    if (c == '"') {
      p->doc->nodes[node].len = (uint32_t)(p->i - p->doc->nodes[node].start);
      p->i++;
      return 0;
    }
    if (c < 0x20) return fail(p, "control character in a string");
    if (c == '\\') {
      if (1 > p->n - p->i - 1) return fail(p, "unterminated escape");
      unsigned char e = p->s[p->i + 1];
      if (e == 'u') {
        if (4 > p->n - p->i - 2) return fail(p, "short \\u escape");
        for (int k = 0; k < 4; k++)
          if (hexval(p->s[p->i + 2 + k]) < 0) return fail(p, "bad hex digit in a \\u escape");
        p->i += 6;
      } else if (strchr("\"\\/bfnrt", e) && e) {
        p->i += 2;
      } else {
        return fail(p, "unknown escape");
      }
      continue;
    }
    size_t k = utf8_seq(p->s + p->i, p->n - p->i);
    if (!k) return fail(p, "invalid UTF-8 in a string");
    p->i += k;
  }
  return fail(p, "unterminated string");
}

static int digits(parser_t* p) {
  size_t start = p->i;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  return p->i > start;
}

static int match(parser_t* p, const char* word) {
  size_t n = strlen(word);
  if (n > p->n - p->i || memcmp(p->s + p->i, word, n) != 0) return 0;
  p->i += n;
  return 1;
}

static int parse_number(parser_t* p, uint32_t node) {
  size_t start = p->i;
  if (p->s[p->i] == '-') p->i++;
  if (match(p, "Infinity")) {
    p->doc->nodes[node].len = (uint32_t)(p->i - start);
    return 0;
  }
  if (p->i >= p->n) return fail(p, "a number ends after '-'");
  if (p->s[p->i] == '0') {
    p->i++;
  } else if (!digits(p)) {
    return fail(p, "expected a digit");
  }
  if (p->i < p->n && p->s[p->i] == '.') {
    p->i++;
    if (!digits(p)) return fail(p, "expected a digit after '.'");
  }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    if (!digits(p)) return fail(p, "expected a digit in an exponent");
  }
  p->doc->nodes[node].len = (uint32_t)(p->i - start);
  return 0;
}

static int parse_value(parser_t* p, int depth, uint32_t* out);

static int parse_container(parser_t* p, int depth, uint32_t node, int is_object) {
  char close = is_object ? '}' : ']';
  p->i++; /* the bracket */
  skip_ws(p);
  uint32_t last = AOT_SJ_NONE;
  if (p->i < p->n && p->s[p->i] == close) {
    p->i++;
    p->doc->nodes[node].len = (uint32_t)(p->i - p->doc->nodes[node].start);
    return 0;
  }
  for (;;) {
    skip_ws(p);
    uint32_t child;
    if (is_object) {
      if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "expected a string key");
      uint32_t key = new_node(p, AOT_SJ_STRING);
      if (key == AOT_SJ_NONE || parse_string(p, key)) return -1;
      if (last == AOT_SJ_NONE) p->doc->nodes[node].first = key;
      else p->doc->nodes[last].next = key;
      last = key;
      skip_ws(p);
      if (p->i >= p->n || p->s[p->i] != ':') return fail(p, "expected ':'");
      p->i++;
    }
    if (parse_value(p, depth + 1, &child)) return -1;
    if (last == AOT_SJ_NONE) p->doc->nodes[node].first = child;
    else p->doc->nodes[last].next = child;
    last = child;
    skip_ws(p);
    if (p->i >= p->n) return fail(p, is_object ? "unterminated object" : "unterminated array");
    if (p->s[p->i] == ',') {
      p->i++;
      continue;
    }
    if (p->s[p->i] == close) {
      p->i++;
      p->doc->nodes[node].len = (uint32_t)(p->i - p->doc->nodes[node].start);
      return 0;
    }
    return fail(p, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int parse_value(parser_t* p, int depth, uint32_t* out) {
  if (depth > MAX_DEPTH) return fail(p, "nesting deeper than 64");
  skip_ws(p);
  if (p->i >= p->n) return fail(p, "expected a value");
  unsigned char c = p->s[p->i];
  uint32_t node;
  if (c == '{' || c == '[') {
    node = new_node(p, c == '{' ? AOT_SJ_OBJECT : AOT_SJ_ARRAY);
    if (node == AOT_SJ_NONE || parse_container(p, depth, node, c == '{')) return -1;
  } else if (c == '"') {
    node = new_node(p, AOT_SJ_STRING);
    if (node == AOT_SJ_NONE || parse_string(p, node)) return -1;
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    node = new_node(p, AOT_SJ_NUMBER);
    if (node == AOT_SJ_NONE || parse_number(p, node)) return -1;
  } else {
    static const struct {
      const char* word;
      uint32_t kind;
    } words[] = {{"true", AOT_SJ_TRUE},     {"false", AOT_SJ_FALSE},
                 {"null", AOT_SJ_NULL},     {"NaN", AOT_SJ_NUMBER},
                 {"Infinity", AOT_SJ_NUMBER}};
    size_t w = 0;
    while (w < sizeof(words) / sizeof(words[0]) && !match(p, words[w].word)) w++;
    if (w == sizeof(words) / sizeof(words[0])) return fail(p, "unexpected character");
    size_t n = strlen(words[w].word);
    p->i -= n;
    node = new_node(p, words[w].kind);
    if (node == AOT_SJ_NONE) return -1;
    p->i += n;
    p->doc->nodes[node].len = (uint32_t)n;
  }
  *out = node;
  return 0;
}

int aot_sj_parse(const char* text, size_t len, uint32_t max_nodes, aot_sj_doc_t* doc, char* err,
                 size_t err_size) {
  memset(doc, 0, sizeof(*doc));
  doc->text = text;
  doc->text_len = len;
  parser_t p = {(const unsigned char*)text, len, 0, doc, max_nodes ? max_nodes : 1, err, err_size};
  if (len >= UINT32_MAX) return fail(&p, "document of 4 GiB or more");
  uint32_t root;
  if (parse_value(&p, 0, &root)) {
    aot_sj_free(doc);
    return -1;
  }
  skip_ws(&p);
  if (p.i != p.n) {
    aot_sj_free(doc);
    return fail(&p, "text after the value");
  }
  return 0;
}

void aot_sj_free(aot_sj_doc_t* doc) {
  free(doc->nodes);
  doc->nodes = NULL;
  doc->count = doc->capacity = 0;
}

/* Decode a string node; writes at most size bytes (no NUL added); returns the decoded
 * length (which may exceed size: then the output is truncated), or -1 for a NUL. */
static long decode(const aot_sj_doc_t* doc, uint32_t node, char* out, size_t size) {
  const aot_sj_node_t* nd = &doc->nodes[node];
  const unsigned char* s = (const unsigned char*)doc->text + nd->start;
  size_t n = nd->len, o = 0;
  for (size_t i = 0; i < n;) {
    unsigned char buf[4];
    size_t k = 0;
    if (s[i] != '\\') {
      buf[k++] = s[i++];
    } else {
      unsigned char e = s[i + 1];
      if (e != 'u') {
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        buf[k++] = (unsigned char)to[strchr(from, e) - from];
        i += 2;
      } else {
        uint32_t cp = 0;
        for (int d = 0; d < 4; d++) cp = cp << 4 | (uint32_t)hexval(s[i + 2 + d]);
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF && 6 <= n - i && s[i] == '\\' && s[i + 1] == 'u') {
          uint32_t lo = 0;
          for (int d = 0; d < 4; d++) lo = lo << 4 | (uint32_t)hexval(s[i + 2 + d]);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; /* a lone surrogate */
        if (cp == 0) return -1;
        if (cp < 0x80) {
          buf[k++] = (unsigned char)cp;
        } else if (cp < 0x800) {
          buf[k++] = (unsigned char)(0xC0 | cp >> 6);
          buf[k++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          buf[k++] = (unsigned char)(0xE0 | cp >> 12);
          buf[k++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
          buf[k++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else {
          buf[k++] = (unsigned char)(0xF0 | cp >> 18);
          buf[k++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
          buf[k++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
          buf[k++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
      }
    }
    for (size_t j = 0; j < k; j++, o++)
      if (o < size) out[o] = (char)buf[j];
  }
  return (long)o;
}

int aot_sj_string(const aot_sj_doc_t* doc, uint32_t node, char* out, size_t size) {
  if (node >= doc->count || doc->nodes[node].kind != AOT_SJ_STRING || size == 0) return -1;
  long n = decode(doc, node, out, size - 1);
  if (n < 0 || (size_t)n > size - 1) return -1;
  out[n] = '\0';
  return 0;
}

int aot_sj_string_is(const aot_sj_doc_t* doc, uint32_t node, const char* s) {
  char buf[256];
  size_t n = strlen(s);
  if (n >= sizeof(buf)) return 0;
  return aot_sj_string(doc, node, buf, sizeof(buf)) == 0 && strcmp(buf, s) == 0;
}

uint32_t aot_sj_get(const aot_sj_doc_t* doc, uint32_t obj, const char* key) {
  if (obj >= doc->count || doc->nodes[obj].kind != AOT_SJ_OBJECT) return AOT_SJ_NONE;
  for (uint32_t k = doc->nodes[obj].first; k != AOT_SJ_NONE;) {
    uint32_t v = doc->nodes[k].next;
    if (aot_sj_string_is(doc, k, key)) return v;
    k = doc->nodes[v].next;
  }
  return AOT_SJ_NONE;
}

static int is_integer_token(const aot_sj_doc_t* doc, uint32_t node, const char** s, size_t* n) {
  if (node >= doc->count || doc->nodes[node].kind != AOT_SJ_NUMBER) return 0;
  *s = doc->text + doc->nodes[node].start;
  *n = doc->nodes[node].len;
  for (size_t k = 0; k < *n; k++)
    if (!((*s)[k] >= '0' && (*s)[k] <= '9') && !(k == 0 && (*s)[k] == '-')) return 0;
  return 1;
}

int aot_sj_uint64(const aot_sj_doc_t* doc, uint32_t node, uint64_t* out) {
  const char* s;
  size_t n;
  if (!is_integer_token(doc, node, &s, &n) || s[0] == '-') return -1;
  uint64_t v = 0;
  for (size_t k = 0; k < n; k++) {
    uint64_t d = (uint64_t)(s[k] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int aot_sj_int64(const aot_sj_doc_t* doc, uint32_t node, int64_t* out) {
  const char* s;
  size_t n;
  if (!is_integer_token(doc, node, &s, &n)) return -1;
  int neg = s[0] == '-';
  uint64_t v = 0, max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (size_t k = (size_t)neg; k < n; k++) {
    uint64_t d = (uint64_t)(s[k] - '0');
    if (v > (max - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

/* The number token as a double, or (as_float) a float: strtof rounds once, where a double
 * cast to float could round twice and miss the nearest float by one ulp. */
static int number(const aot_sj_doc_t* doc, uint32_t node, int as_float, double* out) {
  if (node >= doc->count || doc->nodes[node].kind != AOT_SJ_NUMBER) return -1;
  const char* s = doc->text + doc->nodes[node].start;
  size_t n = doc->nodes[node].len;
  char buf[64];
  if (n == 3 && memcmp(s, "NaN", 3) == 0) {
    *out = NAN;
    return 0;
  }
  if (n == 8 && memcmp(s, "Infinity", 8) == 0) {
    *out = INFINITY;
    return 0;
  }
  if (n == 9 && memcmp(s, "-Infinity", 9) == 0) {
    *out = -INFINITY;
    return 0;
  }
  if (n >= sizeof(buf)) {
    /* a longer token is all digits past double's precision: strtod on the whole of it */
    char* big = malloc(n + 1);
    if (!big) return -1;
    memcpy(big, s, n);
    big[n] = '\0';
    *out = as_float ? strtof(big, NULL) : strtod(big, NULL);
    free(big);
    return 0;
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
  /* the grammar was checked: strtod reads all of it */
  *out = as_float ? strtof(buf, NULL) : strtod(buf, NULL);
  return 0;
}

int aot_sj_double(const aot_sj_doc_t* doc, uint32_t node, double* out) {
  return number(doc, node, 0, out);
}

int aot_sj_float(const aot_sj_doc_t* doc, uint32_t node, float* out) {
  double v;
  if (number(doc, node, 1, &v)) return -1;
  *out = (float)v; /* exact: v came from strtof */
  return 0;
}

void aot_sb_init(aot_sb_t* sb, size_t limit) {
  memset(sb, 0, sizeof(*sb));
  sb->limit = limit;
}

void aot_sb_free(aot_sb_t* sb) {
  free(sb->data);
  memset(sb, 0, sizeof(*sb));
}

static int reserve(aot_sb_t* sb, size_t n) {
  if (sb->failed) return -1;
  if (n > SIZE_MAX / 2 - sb->len || (sb->limit && n > sb->limit - sb->len)) {
    sb->failed = 1;
    return -1;
  }
  if (n <= sb->cap - sb->len) return 0;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap - sb->len < n) cap *= 2;
  char* data = realloc(sb->data, cap);
  if (!data) {
    sb->failed = 1;
    return -1;
  }
  sb->data = data;
  sb->cap = cap;
  return 0;
}

void aot_sb_append(aot_sb_t* sb, const void* data, size_t n) {
  if (n == 0 || reserve(sb, n)) return;
  memcpy(sb->data + sb->len, data, n);
  sb->len += n;
}

void aot_sb_str(aot_sb_t* sb, const char* s) { aot_sb_append(sb, s, strlen(s)); }

void aot_sb_printf(aot_sb_t* sb, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) {
    sb->failed = 1;
    return;
  }
  if ((size_t)n < sizeof(buf)) {
    aot_sb_append(sb, buf, (size_t)n);
    return;
  }
  if (reserve(sb, (size_t)n + 1)) return;
  va_start(ap, fmt);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

void aot_sb_json_string(aot_sb_t* sb, const char* s, size_t n) {
  const unsigned char* u = (const unsigned char*)s;
  aot_sb_append(sb, "\"", 1);
  for (size_t i = 0; i < n;) {
    unsigned char c = u[i];
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      aot_sb_append(sb, esc, 2);
      i++;
    } else if (c < 0x20 || c == 0x7F) {
      aot_sb_printf(sb, "\\u%04x", c);
      i++;
    } else {
      size_t k = utf8_seq(u + i, n - i);
      if (k) {
        aot_sb_append(sb, u + i, k);
        i += k;
      } else {
        aot_sb_str(sb, "\xEF\xBF\xBD");
        i++;
      }
    }
  }
  aot_sb_append(sb, "\"", 1);
}
