/* json.c - a small strict JSON (RFC 8259) parser for the manifest.
 *
 * Strict: UTF-8 is validated, no trailing commas, no comments, no NaN or
 * Infinity, no leading zeros, no duplicate keys, nesting depth <= 64,
 * objects have at most 1024 members (a manifest's objects have a few fixed
 * keys; the compiler's tables keyed by name are in the tooling section, which
 * the runtime never decodes). Numbers are kept as int64 when they are
 * integers (the manifest needs only those); other numbers are accepted and
 * flagged is_int = 0 (no strtod: the library must not depend on the locale).
 * Errors give the byte offset.
 *
 * Bounded in time and memory, since the text is hostile: the tree (nodes and
 * strings) may not grow past the caller's byte limit (a 2-byte "0," costs a
 * ~100-byte node), and duplicate keys are found by sorting each object's keys,
 * not by comparing every pair. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_DEPTH 64
#define MAX_MEMBERS 1024

struct aot__json_doc {
  aot__json_t* root;
  uint64_t bytes; /* of the tree: nodes and strings */
};

typedef struct {
  const unsigned char* s;
  size_t n, i;
  int depth;
  aot_error_t* err;
  uint64_t used, max; /* tree bytes allocated, and the most allowed */
} parser_t;

/* malloc (zeroed when `zero`) counted against the tree's byte limit; NULL with
 * the error filled in when over it or out of memory. */
static void* tree_alloc(parser_t* p, size_t n, int zero) {
  if (n > p->max || p->used > p->max - n) {
    aot__fail(p->err, AOT_ERR_NO_MEMORY,
              "JSON parse tree would exceed %llu bytes at byte %zu (the limit for a manifest)",
              (unsigned long long)p->max, p->i);
    return NULL;
  }
  void* q = zero ? calloc(1, n) : malloc(n);
  if (!q) {
    aot__fail(p->err, AOT_ERR_NO_MEMORY, "out of memory parsing JSON");
    return NULL;
  }
  p->used += n;
  return q;
}

static aot_status_t syntax(parser_t* p, const char* what) {
  return aot__fail(p->err, AOT_ERR_FORMAT, "JSON error at byte %zu: %s", p->i, what);
}

static void node_free(aot__json_t* v) {
  while (v) {
    aot__json_t* next = v->next;
    node_free(v->first);
    free(v->str);
    free(v->key);
    free(v);
    v = next;
  }
}

static void skip_ws(parser_t* p) {
  while (p->i < p->n &&
         (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
    p->i++;
}

static int hex4(const unsigned char* s, uint32_t* out) {
  uint32_t v = 0;
  for (int k = 0; k < 4; k++) {
    unsigned char c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return 0;
  }
  *out = v;
  return 1;
}

static size_t put_utf8(char* o, uint32_t cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid. */
static size_t utf8_len(const unsigned char* s, size_t n) {
  unsigned char c = s[0];
  size_t len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[k] & 0x3f);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0; /* overlong */
  if (cp >= 0xd800 && cp <= 0xdfff) return 0;                          /* surrogate */
  if (cp > 0x10ffff) return 0;
  return len;
}

/* Parse a string at p->i (which is at '"'); returns malloc'ed decoded text. */
static aot_status_t parse_string(parser_t* p, char** out, size_t* out_len) {
  p->i++; /* opening quote */
  size_t start = p->i;
  /* First pass: find the end and validate, to size the buffer. */
  size_t j = start;
  while (1) {
    if (j >= p->n) {
      p->i = j;
      return syntax(p, "unterminated string");
    }
    unsigned char c = p->s[j];
    if (c == '"') break;
    if (c < 0x20) {
      p->i = j;
      return syntax(p, "control character in string");
    }
    if (c == '\\') {
      j += 2;
      continue;
    }
    size_t l = utf8_len(p->s + j, p->n - j);
    if (!l) {
      p->i = j;
      return syntax(p, "invalid UTF-8 in string");
    }
    j += l;
  }
  char* buf = tree_alloc(p, j - start + 1, 0);
  if (!buf) return AOT_ERR_NO_MEMORY;
  size_t o = 0;
  size_t i = start;
  while (i < j) {
    unsigned char c = p->s[i];
    if (c != '\\') {
      buf[o++] = (char)c;
      i++;
      continue;
    }
    if (i + 1 >= j) {
      p->i = i;
      free(buf);
      return syntax(p, "bad escape");
    }
    unsigned char e = p->s[i + 1];
    i += 2;
    switch (e) {
      case '"': buf[o++] = '"'; break;
      case '\\': buf[o++] = '\\'; break;
      case '/': buf[o++] = '/'; break;
      case 'b': buf[o++] = '\b'; break;
      case 'f': buf[o++] = '\f'; break;
      case 'n': buf[o++] = '\n'; break;
      case 'r': buf[o++] = '\r'; break;
      case 't': buf[o++] = '\t'; break;
      case 'u': {
        uint32_t cp;
        if (j - i < 4 || !hex4(p->s + i, &cp)) {
          p->i = i;
          free(buf);
          return syntax(p, "bad \\u escape");
        }
        i += 4;
        if (cp >= 0xd800 && cp <= 0xdbff) {
          uint32_t lo;
          if (j - i < 6 || p->s[i] != '\\' || p->s[i + 1] != 'u' || !hex4(p->s + i + 2, &lo) ||
              lo < 0xdc00 || lo > 0xdfff) {
            p->i = i;
            free(buf);
            return syntax(p, "unpaired surrogate in \\u escape");
          }
          i += 6;
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
          p->i = i;
          free(buf);
          return syntax(p, "unpaired surrogate in \\u escape");
        }
        o += put_utf8(buf + o, cp);
        break;
      }
      default:
        p->i = i - 1;
        free(buf);
        return syntax(p, "bad escape");
    }
  }
  buf[o] = '\0';
  p->i = j + 1;
  *out = buf;
  *out_len = o;
  return AOT_OK;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static aot_status_t parse_number(parser_t* p, aot__json_t* v) {
  size_t i = p->i;
  int neg = 0;
  if (i < p->n && p->s[i] == '-') {
    neg = 1;
    i++;
  }
  if (i >= p->n || !is_digit(p->s[i])) {
    p->i = i;
    return syntax(p, "bad number");
  }
  uint64_t mag = 0;
  int overflow = 0;
  if (p->s[i] == '0') {
    i++;
    if (i < p->n && is_digit(p->s[i])) {
      p->i = i;
      return syntax(p, "leading zero in number");
    }
  } else {
    while (i < p->n && is_digit(p->s[i])) {
      uint64_t d = (uint64_t)(p->s[i] - '0');
      if (mag > (UINT64_MAX - d) / 10) overflow = 1;
      else mag = mag * 10 + d;
      i++;
    }
  }
  int is_int = 1;
  if (i < p->n && p->s[i] == '.') {
    is_int = 0;
    i++;
    if (i >= p->n || !is_digit(p->s[i])) {
      p->i = i;
      return syntax(p, "bad fraction");
    }
    while (i < p->n && is_digit(p->s[i])) i++;
  }
  if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
    is_int = 0;
    i++;
    if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) i++;
    if (i >= p->n || !is_digit(p->s[i])) {
      p->i = i;
      return syntax(p, "bad exponent");
    }
    while (i < p->n && is_digit(p->s[i])) i++;
  }
  v->kind = AOT_JSON_NUMBER;
  if (is_int && !overflow) {
    if (!neg && mag <= (uint64_t)INT64_MAX) {
      v->is_int = 1;
      v->integer = (int64_t)mag;
    } else if (neg && mag <= (uint64_t)INT64_MAX + 1) {
      v->is_int = 1;
      v->integer = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    }
  }
  p->i = i;
  return AOT_OK;
}

static aot_status_t parse_value(parser_t* p, aot__json_t** out);

static int key_order(const void* a, const void* b) {
  const aot__json_t* x = *(const aot__json_t* const*)a;
  const aot__json_t* y = *(const aot__json_t* const*)b;
  if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
  int c = memcmp(x->key, y->key, x->key_len);
  if (c) return c;
  return x->key_at < y->key_at ? -1 : x->key_at > y->key_at;
}

/* Fails on the first key (in text order) that repeats an earlier one of obj. Sorted,
 * O(m log m): comparing every pair of an object's 1024 members, over a manifest of
 * such objects, took seconds. */
static aot_status_t check_unique_keys(parser_t* p, const aot__json_t* obj) {
  if (obj->count < 2) return AOT_OK;
  const aot__json_t** keys = malloc(obj->count * sizeof *keys);
  if (!keys) return aot__fail(p->err, AOT_ERR_NO_MEMORY, "out of memory parsing JSON");
  size_t n = 0;
  for (const aot__json_t* m = obj->first; m; m = m->next) keys[n++] = m;
  qsort(keys, n, sizeof *keys, key_order);
  size_t dup = SIZE_MAX;
  for (size_t k = 1; k < n; k++)
    if (keys[k]->key_len == keys[k - 1]->key_len &&
        memcmp(keys[k]->key, keys[k - 1]->key, keys[k]->key_len) == 0 && keys[k]->key_at < dup)
      dup = keys[k]->key_at;
  free(keys);
  if (dup == SIZE_MAX) return AOT_OK;
  p->i = dup;
  return syntax(p, "duplicate key");
}

static aot_status_t parse_container(parser_t* p, aot__json_t* v, int object) {
  unsigned char close = object ? '}' : ']';
  if (++p->depth > MAX_DEPTH) return syntax(p, "nesting deeper than 64");
  p->i++;
  skip_ws(p);
  aot__json_t** tail = &v->first;
  if (p->i < p->n && p->s[p->i] == close) {
    p->i++;
    p->depth--;
    return AOT_OK;
  }
  while (1) {
    char* key = NULL;
    size_t key_len = 0, key_at = 0;
    if (object) {
      skip_ws(p);
      if (p->i >= p->n || p->s[p->i] != '"') return syntax(p, "expected a string key");
      key_at = p->i;
      aot_status_t st = parse_string(p, &key, &key_len);
      if (st) return st;
      if (v->count >= MAX_MEMBERS) {
        free(key);
        return syntax(p, "object has more than 1024 members");
      }
      skip_ws(p);
      if (p->i >= p->n || p->s[p->i] != ':') {
        free(key);
        return syntax(p, "expected ':'");
      }
      p->i++;
    }
    aot__json_t* child = NULL;
    aot_status_t st = parse_value(p, &child);
    if (st) {
      free(key);
      return st;
    }
    child->key = key;
    child->key_len = key_len;
    child->key_at = key_at;
    *tail = child;
    tail = &child->next;
    v->count++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ',') {
      p->i++;
      continue;
    }
    if (p->i < p->n && p->s[p->i] == close) {
      p->i++;
      p->depth--;
      return object ? check_unique_keys(p, v) : AOT_OK;
    }
    return syntax(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int match_lit(parser_t* p, const char* lit) {
  size_t l = strlen(lit);
  if (p->n - p->i < l || memcmp(p->s + p->i, lit, l) != 0) return 0;
  p->i += l;
  return 1;
}

static aot_status_t parse_value(parser_t* p, aot__json_t** out) {
  skip_ws(p);
  if (p->i >= p->n) return syntax(p, "unexpected end of input");
  aot__json_t* v = tree_alloc(p, sizeof *v, 1);
  if (!v) return AOT_ERR_NO_MEMORY;
  aot_status_t st = AOT_OK;
  unsigned char c = p->s[p->i];
  if (c == '{') {
    v->kind = AOT_JSON_OBJECT;
    st = parse_container(p, v, 1);
  } else if (c == '[') {
    v->kind = AOT_JSON_ARRAY;
    st = parse_container(p, v, 0);
  } else if (c == '"') {
    v->kind = AOT_JSON_STRING;
    st = parse_string(p, &v->str, &v->str_len);
  } else if (c == '-' || is_digit(c)) {
    st = parse_number(p, v);
  } else if (match_lit(p, "true")) {
    v->kind = AOT_JSON_BOOL;
    v->boolean = 1;
  } else if (match_lit(p, "false")) {
    v->kind = AOT_JSON_BOOL;
  } else if (match_lit(p, "null")) {
    v->kind = AOT_JSON_NULL;
  } else {
    st = syntax(p, "unexpected character");
  }
  if (st) {
    node_free(v);
    return st;
  }
  *out = v;
  return AOT_OK;
}

aot_status_t aot__json_parse(const char* text, size_t len, aot__json_doc_t** out_doc,
                             const aot__json_t** out_root, aot_error_t* err) {
  return aot__json_parse_limited(text, len, AOT__MAX_MANIFEST_TREE_BYTES, out_doc, out_root, err);
}

aot_status_t aot__json_parse_limited(const char* text, size_t len, uint64_t max_tree_bytes,
                                     aot__json_doc_t** out_doc, const aot__json_t** out_root,
                                     aot_error_t* err) {
  *out_doc = NULL;
  *out_root = NULL;
  parser_t p = {(const unsigned char*)text, len, 0, 0, err, 0, max_tree_bytes};
  aot__json_t* root = NULL;
  aot_status_t st = parse_value(&p, &root);
  if (st) return st;
  skip_ws(&p);
  if (p.i != p.n) {
    node_free(root);
    return syntax(&p, "trailing characters after the JSON value");
  }
  aot__json_doc_t* doc = malloc(sizeof *doc);
  if (!doc) {
    node_free(root);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory parsing JSON");
  }
  doc->root = root;
  doc->bytes = p.used;
  *out_doc = doc;
  *out_root = root;
  return AOT_OK;
}

uint64_t aot__json_doc_bytes(const aot__json_doc_t* doc) { return doc ? doc->bytes : 0; }

void aot__json_free(aot__json_doc_t* doc) {
  if (!doc) return;
  node_free(doc->root);
  free(doc);
}

const aot__json_t* aot__json_get(const aot__json_t* obj, const char* key) {
  if (!obj || obj->kind != AOT_JSON_OBJECT) return NULL;
  size_t len = strlen(key);
  for (const aot__json_t* m = obj->first; m; m = m->next)
    if (m->key_len == len && memcmp(m->key, key, len) == 0) return m;
  return NULL;
}
