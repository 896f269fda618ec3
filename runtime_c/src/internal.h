/* internal.h - declarations shared between the runtime's modules.
 * Nothing here is part of the ABI; every symbol is prefixed aot__ and has
 * hidden visibility in the shared library. */
#ifndef AOT_INTERNAL_H_
#define AOT_INTERNAL_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "aot_runtime.h"

#define AOT_HIDDEN __attribute__((visibility("hidden")))

/* ---- status.c ---- */
/* Fill err (may be NULL) and return code. */
AOT_HIDDEN aot_status_t aot__fail(aot_error_t* err, aot_status_t code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
AOT_HIDDEN aot_status_t aot__ok(aot_error_t* err);
/* Prefix err->message with a formatted string (keeps the code). */
AOT_HIDDEN void aot__error_prefix(aot_error_t* err, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
AOT_HIDDEN aot_dtype_t aot__dtype_from_name(const char* name);
/* 64-byte (or `align`, a power of two) aligned allocation of at least 1 byte. */
AOT_HIDDEN void* aot__aligned_alloc(uint64_t align, uint64_t size);

/* ---- limits on what an artifact may make the runtime allocate (packaging/FORMAT.md, "Limits") ---- */
/* A manifest's raw size: real ones are tens of KB (GPT-2's 31 KB, 1,500 JSON values) */
#define AOT__MAX_MANIFEST_BYTES (UINT64_C(16) << 20)
/* Its parse tree (nodes and strings): a node takes ~100 bytes, real manifests ~21 bytes of
 * text per node, while hostile text spends 2 ("0,") */
#define AOT__MAX_MANIFEST_TREE_BYTES (8 * AOT__MAX_MANIFEST_BYTES)
/* A code section's raw size: real ones are 20 KB to a few MB */
#define AOT__MAX_CODE_BYTES (UINT64_C(256) << 20)

/* ---- crc32.c ---- */
AOT_HIDDEN uint32_t aot__crc32(uint32_t crc, const void* data, size_t n);

/* ---- container.c ---- */
#define AOT_MAX_SECTIONS 64u
#define AOT_SECTION_NAME_SIZE 24u

enum { AOT_CODEC_NONE = 0, AOT_CODEC_ZSTD = 1 };

typedef struct aot__section {
  char name[AOT_SECTION_NAME_SIZE];
  uint32_t codec;
  uint64_t offset;
  uint64_t stored_size;
  uint64_t raw_size;
  uint32_t crc32;
} aot__section_t;

typedef struct aot__container {
  const uint8_t* data; /* borrowed */
  uint64_t size;
  uint32_t count;
  aot__section_t sections[AOT_MAX_SECTIONS];
} aot__container_t;

/* Validate header, table and every section checksum. */
AOT_HIDDEN aot_status_t aot__container_parse(const void* data, size_t size,
                                             aot__container_t* out, aot_error_t* err);
AOT_HIDDEN const aot__section_t* aot__container_find(const aot__container_t* c,
                                                     const char* name);
/* Decode a section into a new buffer aligned to `align` (power of two >= 64),
 * with one extra NUL byte after raw_size bytes. Free with free(). */
AOT_HIDDEN aot_status_t aot__section_decode(const aot__container_t* c, const aot__section_t* s,
                                            uint64_t align, uint8_t** out, aot_error_t* err);

/* ---- json.c ---- */
typedef enum {
  AOT_JSON_NULL,
  AOT_JSON_BOOL,
  AOT_JSON_NUMBER,
  AOT_JSON_STRING,
  AOT_JSON_ARRAY,
  AOT_JSON_OBJECT
} aot__json_kind_t;

typedef struct aot__json aot__json_t;
struct aot__json {
  aot__json_kind_t kind;
  int boolean;
  int is_int;      /* number without fraction/exponent that fits int64 */
  int64_t integer; /* valid when is_int */
  char* str;       /* STRING: decoded, NUL-terminated; OBJECT member key */
  size_t str_len;  /* may contain NULs when decoded from \u0000 */
  aot__json_t* first; /* ARRAY/OBJECT children */
  aot__json_t* next;  /* sibling */
  char* key;          /* key when a member of an OBJECT */
  size_t key_len;
  size_t key_at;      /* byte offset of the key in the text */
  size_t count;       /* ARRAY/OBJECT number of children */
};

typedef struct aot__json_doc aot__json_doc_t;
/* Strict RFC 8259 parser: UTF-8 validated, no duplicate keys, no NaN, depth <= 64; its tree
 * takes at most AOT__MAX_MANIFEST_TREE_BYTES (_limited: max_tree_bytes), else
 * AOT_ERR_NO_MEMORY. */
AOT_HIDDEN aot_status_t aot__json_parse(const char* text, size_t len, aot__json_doc_t** out_doc,
                                        const aot__json_t** out_root, aot_error_t* err);
AOT_HIDDEN aot_status_t aot__json_parse_limited(const char* text, size_t len,
                                                uint64_t max_tree_bytes, aot__json_doc_t** out_doc,
                                                const aot__json_t** out_root, aot_error_t* err);
/* Bytes the tree of doc takes (nodes and strings). */
AOT_HIDDEN uint64_t aot__json_doc_bytes(const aot__json_doc_t* doc);
AOT_HIDDEN void aot__json_free(aot__json_doc_t* doc);
AOT_HIDDEN const aot__json_t* aot__json_get(const aot__json_t* obj, const char* key);

/* ---- loader.c ---- */
typedef struct aot__code {
  void* handle;
  int fd; /* kept open while loaded: the /proc/self/fd/N name must stay unique */
} aot__code_t;

AOT_HIDDEN aot_status_t aot__code_load(const uint8_t* image, uint64_t size, const char* section,
                                       aot__code_t* out, aot_error_t* err);
AOT_HIDDEN aot_status_t aot__code_symbol(const aot__code_t* code, const char* symbol, void** out,
                                         aot_error_t* err);
/* A data symbol and its size in bytes (UINT64_MAX where the C library cannot tell). */
AOT_HIDDEN aot_status_t aot__code_object(const aot__code_t* code, const char* symbol,
                                         const void** out, uint64_t* out_size, aot_error_t* err);
AOT_HIDDEN void aot__code_unload(aot__code_t* code);

/* ---- model.c ---- */
typedef void (*aot__entry_fn)(const void* const* inputs, void* const* outputs, uint8_t* arena,
                              const uint8_t* weights);
/* 0 when every run-time check passes, else 1 + the index of the first that fails */
typedef int32_t (*aot__checks_fn)(const void* const* inputs, void* const* outputs, uint8_t* arena,
                                  const uint8_t* weights);
typedef void (*aot__kernel_fn)(const void* const* inputs, void* const* outputs, uint8_t* arena,
                               const uint8_t* weights, int64_t begin, int64_t end);

typedef struct aot__tensor_desc {
  char* name;
  aot_dtype_t dtype;
  uint32_t rank;
  int64_t* shape;
  uint64_t byte_size;
} aot__tensor_desc_t;

typedef struct aot__kernel {
  char* name;
  aot__kernel_fn fn;
  int64_t work;
  int64_t cost_ns; /* manifest "cost_ns": estimated single-thread time of all items; -1: none */
} aot__kernel_t;

/* A live model's `magic`; aot_model_close clears it before freeing, so a call on
 * a closed model is refused (in the common case: freed memory may be reused). */
#define AOT__MODEL_MAGIC 0x4d544f41u /* "AOTM" */

struct aot_model {
  uint32_t magic; /* AOT__MODEL_MAGIC while open */
  char* name;
  uint32_t input_count, output_count;
  aot__tensor_desc_t* inputs;
  aot__tensor_desc_t* outputs;
  uint64_t arena_bytes, arena_align;
  uint8_t* weights; /* NULL-free: at least a 1-byte aligned buffer */
  uint64_t weights_bytes, weights_align; /* align: max(manifest alignment, 64) */
  aot__code_t code;
  aot__entry_fn entry;
  uint32_t kernel_count;
  aot__kernel_t* kernels;
  uint32_t check_count;  /* manifest "checks"; 0: no checks function */
  char** check_messages; /* check_count NUL-terminated messages */
  aot__checks_fn checks;
};

/* ---- code_info.c ---- */
/* The code's description of what it was built for: uint64 words, exported by every code
 * section (packaging/FORMAT.md, "Code description"). */
#define AOT__CODE_INFO_SYMBOL "aot_code_info"
#define AOT__CODE_INFO_MAGIC "AOTCINFO" /* its first 8 bytes */
#define AOT__CODE_INFO_VERSION 1
/* Compare the table `symbol` of m's loaded code with m as the manifest describes it
 * (entry: the manifest's entry symbol, for the message); AOT_ERR_FORMAT names the first
 * field that differs and both values, AOT_ERR_UNSUPPORTED a missing table. */
AOT_HIDDEN aot_status_t aot__code_info_check(const aot_model_t* m, const char* symbol,
                                             const char* entry, aot_error_t* err);

/* ---- cpu_features.c ---- */
/* The chosen "cpu" entry's "x86_features" (absent in older artifacts: no check)
 * against CPUID and the OS's enabled register state; AOT_ERR_UNSUPPORTED names
 * every missing one. */
AOT_HIDDEN aot_status_t aot__cpu_check(const aot__json_t* cpu_entry, aot_error_t* err);

/* ---- schedule.c ---- */
/* chunks per thread: threads claim chunks as they come, so a thread that
 * starts late or runs slow takes fewer; more chunks balance better but cost
 * more claims */
#define AOT__CHUNKS_PER_THREAD 4
/* the least estimated work of one chunk: well above the cost of a claim and
 * a hand-off between cores (a few hundred nanoseconds) and of moving a
 * chunk's operands to another core's cache */
#define AOT__MIN_CHUNK_NS 2000
/* the most chunks of one kernel (the pool packs the count into 16 bits) */
#define AOT__MAX_CHUNKS 4096
/* How a kernel's [0, work) is cut: `chunks` chunks of `items` items (the last
 * may be shorter). chunks == 1: the calling thread runs it whole. */
typedef struct aot__split {
  int64_t items;
  uint32_t chunks;
} aot__split_t;

AOT_HIDDEN aot__split_t aot__split_kernel(const aot__kernel_t* k, uint32_t threads);
/* 1 when some kernel of m is split on `threads` threads: only then does a
 * context need a pool */
AOT_HIDDEN int aot__model_splits(const aot_model_t* m, uint32_t threads);

/* ---- threadpool.c ---- */
typedef struct aot__pool aot__pool_t;
typedef struct aot__job {
  const void* const* inputs;
  void* const* outputs;
  uint8_t* arena;
} aot__job_t;

/* A pool of `threads` - 1 workers for model m; the caller of aot__pool_run is
 * the last thread. */
AOT_HIDDEN aot_status_t aot__pool_create(const aot_model_t* m, uint32_t threads,
                                         aot__pool_t** out, aot_error_t* err);
AOT_HIDDEN void aot__pool_destroy(aot__pool_t* pool);
/* Run every kernel of the pool's model in order: each split one (schedule.c) across
 * whichever threads come, the rest on the calling thread. Returns when every
 * kernel has finished. */
AOT_HIDDEN void aot__pool_run(aot__pool_t* pool, const aot__job_t* job);

#endif /* AOT_INTERNAL_H_ */
