/* server_json.h - the inference server's JSON: a strict parser whose tree keeps spans of
 * the text (numbers are parsed only when a tensor needs them, as the tensor's dtype), and
 * a growable byte buffer with JSON writers.
 *
 * Not the runtime's src/json.c: that one is for manifests (integers only, no strtod, a
 * malloc per node); a request body holds up to millions of floats, and here a node is 20
 * bytes in one array. The text is hostile: the parser checks RFC 8259 grammar, UTF-8 and
 * escapes, caps nesting at 64 and nodes at the caller's limit, and never reads past `len`.
 * As Python's json module does, it accepts the number tokens NaN, Infinity and -Infinity
 * (the server writes them for non-finite floats).
 *
 * Thread-safety: a document and a buffer belong to one thread at a time. */
#ifndef AOT_SERVER_JSON_H_
#define AOT_SERVER_JSON_H_

#include <stddef.h>
#include <stdint.h>

typedef enum aot_sj_kind {
  AOT_SJ_NULL = 0,
  AOT_SJ_FALSE,
  AOT_SJ_TRUE,
  AOT_SJ_NUMBER, /* span: the token's text */
  AOT_SJ_STRING, /* span: between the quotes, escapes undecoded */
  AOT_SJ_ARRAY,
  AOT_SJ_OBJECT /* children alternate key (a STRING), value */
} aot_sj_kind_t;

#define AOT_SJ_NONE UINT32_MAX

typedef struct aot_sj_node {
  uint32_t kind;
  uint32_t start, len; /* span in the text */
  uint32_t first;      /* first child, AOT_SJ_NONE when none */
  uint32_t next;       /* next sibling, AOT_SJ_NONE when last */
} aot_sj_node_t;

typedef struct aot_sj_doc {
  const char* text;
  size_t text_len;
  aot_sj_node_t* nodes; /* nodes[0] is the root */
  uint32_t count, capacity;
} aot_sj_doc_t;

/* Parse text[0, len) (len < 4 GiB) into `doc`, using at most max_nodes nodes (each
 * sizeof(aot_sj_node_t) bytes). 0 on success; else -1 with a message naming the byte offset
 * in err (size err_size). The document refers to `text`, which must outlive it. */
int aot_sj_parse(const char* text, size_t len, uint32_t max_nodes, aot_sj_doc_t* doc, char* err,
                 size_t err_size);
void aot_sj_free(aot_sj_doc_t* doc);

/* The member `key` of object `obj`, AOT_SJ_NONE when absent or obj is not an object. */
uint32_t aot_sj_get(const aot_sj_doc_t* doc, uint32_t obj, const char* key);
/* Decode string node `node` into out (NUL-terminated). 0 on success, -1 when it is not a
 * string, holds a NUL, or needs more than size - 1 bytes. */
int aot_sj_string(const aot_sj_doc_t* doc, uint32_t node, char* out, size_t size);
/* 1 when node is a string equal to `s` (after decoding escapes). */
int aot_sj_string_is(const aot_sj_doc_t* doc, uint32_t node, const char* s);
/* A number node's value as an int64: 0 on success, -1 when it is not an integer token
 * in range (no fraction, no exponent). */
int aot_sj_int64(const aot_sj_doc_t* doc, uint32_t node, int64_t* out);
int aot_sj_uint64(const aot_sj_doc_t* doc, uint32_t node, uint64_t* out);
/* A number node's value as a double (strtod in the C locale, which the server never
 * changes; NaN and the infinities as their tokens): 0 on success, -1 when not a number. */
int aot_sj_double(const aot_sj_doc_t* doc, uint32_t node, double* out);
/* The same as the nearest float (strtof: one rounding, not double's then float's). */
int aot_sj_float(const aot_sj_doc_t* doc, uint32_t node, float* out);

/* A growable byte buffer; `failed` is set once an allocation fails (then appends do
 * nothing) or the buffer would pass `limit` (0: no limit). */
typedef struct aot_sb {
  char* data;
  size_t len, cap, limit;
  int failed;
} aot_sb_t;

void aot_sb_init(aot_sb_t* sb, size_t limit);
void aot_sb_free(aot_sb_t* sb);
void aot_sb_append(aot_sb_t* sb, const void* data, size_t n);
void aot_sb_str(aot_sb_t* sb, const char* s);
void aot_sb_printf(aot_sb_t* sb, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0, n) as a JSON string with quotes: control characters escaped, and bytes that are not
 * valid UTF-8 written as U+FFFD, so what the server echoes (a path, a name) is valid JSON. */
void aot_sb_json_string(aot_sb_t* sb, const char* s, size_t n);

#endif /* AOT_SERVER_JSON_H_ */
