/* internal.h - declarations shared between the runtime's modules.
 * Nothing here is part of the ABI; every symbol is prefixed aot__ and has
 * hidden visibility in the shared library. */
#ifndef AOT_INTERNAL_H_
#define AOT_INTERNAL_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "aot_runtime.h"
#include "cuda_api.h"

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
  /* data is a private read-only mapping of the file: the pages a pass has read are dropped
   * behind it (they read back from the file if needed again), so opening holds the
   * decoded sections and a window of AOT__STREAM_WINDOW bytes, not the whole file too
   * (resnet18: its 46.8 MB of weights + 2.3 MB with a 1 MB window) */
  int release_behind;
  aot__section_t sections[AOT_MAX_SECTIONS];
} aot__container_t;

#define AOT__STREAM_WINDOW ((size_t)1 << 20)

/* Validate header, table and every section checksum; `release_behind` as in
 * aot__container_t. */
AOT_HIDDEN aot_status_t aot__container_parse_mapped(const void* data, size_t size,
                                                    int release_behind, aot__container_t* out,
                                                    aot_error_t* err);

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

/* ---- cuda_driver.c ---- */
/* The CUDA driver, opened with dlopen by each model that runs on a GPU (dlopen counts
 * references, so it is loaded once per process). */
typedef struct aot__cuda_api {
  void* handle;
#define AOT__CUDA_MEMBER(member, symbol, ret, params) ret(*member) params;
  AOT__CUDA_FUNCTIONS(AOT__CUDA_MEMBER)
#undef AOT__CUDA_MEMBER
} aot__cuda_api_t;

/* dlopen the driver (AOT_CUDA_DRIVER, else libcuda.so.1), resolve every entry point and
 * cuInit: AOT_ERR_NO_DEVICE says what is missing. */
AOT_HIDDEN aot_status_t aot__cuda_open(aot__cuda_api_t* api, aot_error_t* err);
AOT_HIDDEN void aot__cuda_close(aot__cuda_api_t* api);
/* A failed driver call as a status: AOT_ERR_NO_MEMORY for CUDA_ERROR_OUT_OF_MEMORY, else
 * AOT_ERR_DEVICE; the message is "<context>: <call>: CUDA_ERROR_... (<driver's text>)". */
AOT_HIDDEN aot_status_t aot__cuda_fail(const aot__cuda_api_t* api, aot_error_t* err, CUresult r,
                                       const char* call, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- gpu_plan.c: the manifest's "cuda" entry, validated at open ---- */
typedef enum {
  AOT__GPU_ARG_ARENA = 0,
  AOT__GPU_ARG_WEIGHTS = 1,
  AOT__GPU_ARG_INPUT = 2,
  AOT__GPU_ARG_OUTPUT = 3,
  AOT__GPU_ARG_STATUS = 4
} aot__gpu_arg_kind_t;

typedef struct aot__gpu_arg {
  aot__gpu_arg_kind_t kind;
  uint64_t value; /* arena/weights: byte offset; input/output: index */
} aot__gpu_arg_t;

typedef struct aot__gpu_launch {
  char* name;   /* the kernel's name, for messages ("checks" for the checks launch) */
  char* symbol; /* the .entry */
  uint32_t grid[3], block[3], shared_bytes;
  uint32_t arg_count;
  aot__gpu_arg_t* args;
} aot__gpu_launch_t;

/* A section kept as stored (compressed) from open until a device needs it decoded: CPU-only
 * users of a cpu,cuda artifact pay a copy of the compressed bytes, not a decode. */
typedef struct aot__stored_section {
  aot__section_t section; /* offset 0 into data */
  uint8_t* data;          /* NULL: absent */
} aot__stored_section_t;

/* Decode s into a new NUL-terminated buffer (free()). */
AOT_HIDDEN aot_status_t aot__stored_section_decode(const aot__stored_section_t* s, uint8_t** out,
                                                   aot_error_t* err);

typedef struct aot__gpu_sm {
  uint32_t sm; /* 80 for "sm_80" */
  aot__stored_section_t ptx;
  aot__stored_section_t cubin; /* data NULL when the artifact has none for this SM */
  uint32_t launch_count; /* the kernels', then the checks launch where there is one */
  int has_checks;
  aot__gpu_launch_t* launches;
} aot__gpu_sm_t;

typedef struct aot__gpu_device aot__gpu_device_t; /* gpu_device.c */

typedef struct aot__gpu_model {
  uint64_t arena_bytes;
  uint32_t sm_count;
  aot__gpu_sm_t* sms;
  /* what runs on devices, made on first use under `lock` (a pthread_mutex_t, opaque here) */
  void* lock;
  int api_loaded;
  aot__cuda_api_t api;
  aot__gpu_device_t* devices; /* a list, one per device ordinal used */
} aot__gpu_model_t;

/* ---- model.c ---- */
typedef void (*aot__entry_fn)(const void* const* inputs, void* const* outputs, uint8_t* arena,
                              const uint8_t* weights);
/* 0 when every run-time check passes, else 1 + the index of the first that fails */
typedef int32_t (*aot__checks_fn)(const void* const* inputs, void* const* outputs, uint8_t* arena,
                                  const uint8_t* weights);
typedef aot_kernel_fn_t aot__kernel_fn;

typedef struct aot__tensor_desc {
  char* name;
  aot_dtype_t dtype;
  uint32_t rank;
  int64_t* shape;
  uint64_t byte_size;
} aot__tensor_desc_t;

/* A kernel as the pool runs it (aot_runtime.h): fn, work and cost_ns (manifest "cost_ns":
 * estimated single-thread time of all items; -1: none) */
typedef aot_kernel_t aot__kernel_t;

/* A donated pair (manifest "donations"): output `output` takes over input `input`'s buffer.
 * The code reads the input from the output's buffer, which holds the input's value when a
 * run starts (the caller passed one buffer for both, or the run copies it there first). */
typedef struct aot__donation {
  uint32_t input, output;
} aot__donation_t;

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
  /* where the weights are stored uncompressed in a mapped file, they are read from the
   * mapping (weights points into it, read only) and the model keeps it: else NULL */
  const uint8_t* mapping;
  size_t mapping_bytes;
  uint64_t weights_bytes, weights_align; /* align: max(manifest alignment, 64) */
  aot__code_t code;
  char* cpu_variant; /* the loaded "cpu" entry's "cpu" name ("" when unnamed or no CPU code) */
  aot__entry_fn entry;
  uint32_t kernel_count;
  aot__kernel_t* kernels;
  char** kernel_names; /* kernel_count names, from the manifest */
  uint32_t check_count;  /* manifest "checks"; 0: no checks function */
  char** check_messages; /* check_count NUL-terminated messages */
  aot__checks_fn checks;
  aot__gpu_model_t* gpu; /* NULL when the artifact has no GPU code */
  uint32_t donation_count;    /* manifest "donations", in its order (by input) */
  aot__donation_t* donations; /* NULL when none */
};

/* model.c: the donation of input i (its index in m->donations), or -1 */
AOT_HIDDEN int64_t aot__donation_of_input(const aot_model_t* m, uint32_t input);

/* context.c: every output apart from every input, but that a donated output may be its
 * input's very buffer (the same address). `io`: each input's address, then each output's;
 * empty tensors are skipped. `on`: where the buffers are, for the message ("" or " on the
 * device"). */
AOT_HIDDEN aot_status_t aot__check_apart(const aot_model_t* m, const uint64_t* io, const char* on,
                                         aot_error_t* err);

/* Manifest readers shared by model.c and gpu_plan.c: a string member without NULs, an
 * integer member in [lo, hi] (dflt when absent and not required). */
AOT_HIDDEN aot_status_t aot__manifest_string(const aot__json_t* obj, const char* key,
                                             const char* where, int required, const char** out,
                                             aot_error_t* err);
AOT_HIDDEN aot_status_t aot__manifest_int(const aot__json_t* obj, const char* key,
                                          const char* where, int required, int64_t dflt,
                                          int64_t lo, int64_t hi, int64_t* out, aot_error_t* err);

/* gpu_plan.c: parse root's "cuda" (absent: *out NULL), keeping copies of its PTX and cubin
 * sections as stored; checked against m's inputs, outputs, arena, weights, checks and the
 * manifest's kernel count. *used: the bytes it holds, which must stay within `budget`. */
AOT_HIDDEN aot_status_t aot__gpu_plan_parse(const aot_model_t* m, const aot__container_t* c,
                                            const aot__json_t* root, uint32_t kernel_count,
                                            uint64_t budget, uint64_t* used,
                                            aot__gpu_model_t** out, aot_error_t* err);
/* Frees the launch plan and the sections (gpu_plan.c) */
AOT_HIDDEN void aot__gpu_plan_free(aot__gpu_model_t* g);
/* Frees everything made on devices (modules, weights, primary contexts retained), the
 * driver, then the plan (gpu_device.c); NULL is a no-op. */
AOT_HIDDEN void aot__gpu_model_free(aot__gpu_model_t* g);
/* "sm_80, sm_90" into buf */
AOT_HIDDEN void aot__gpu_sm_list(const aot__gpu_model_t* g, char* buf, size_t size);

/* ---- code_info.c ---- */
/* The code's description of what it was built for: uint64 words, exported by every code
 * section (packaging/FORMAT.md, "Code description"). */
#define AOT__CODE_INFO_SYMBOL "aot_code_info"
#define AOT__CODE_INFO_MAGIC "AOTCINFO" /* its first 8 bytes */
#define AOT__CODE_INFO_VERSION 1
#define AOT__CODE_INFO_VERSION_DONATIONS 2 /* version 1 and then the donated pairs */
/* Compare the table `symbol` of m's loaded code with m as the manifest describes it
 * (entry: the manifest's entry symbol, for the message); AOT_ERR_FORMAT names the first
 * field that differs and both values, AOT_ERR_UNSUPPORTED a missing table. */
AOT_HIDDEN aot_status_t aot__code_info_check(const aot_model_t* m, const char* symbol,
                                             const char* entry, aot_error_t* err);

/* ---- cpu_features.c ---- */
/* names the "cpu" entry (variant) to load instead of the first that runs (model.c) */
#define AOT_CPU_VARIANT_ENV "AOT_CPU_VARIANT"
/* A "cpu" entry's "x86_features" (absent in older artifacts: no check) against CPUID
 * and the OS's enabled register state; AOT_ERR_UNSUPPORTED names every missing one. */
AOT_HIDDEN aot_status_t aot__cpu_check(const aot__json_t* cpu_entry, aot_error_t* err);
/* The same look-up without the verdict: *out_count features of cpu_entry this machine
 * lacks, named (comma-separated, truncated to fit) in names[size]; AOT_ERR_FORMAT for a
 * malformed list. Picks the first variant that runs (model.c). */
AOT_HIDDEN aot_status_t aot__cpu_feature_list(const aot__json_t* cpu_entry, const char* key,
                                              const aot__json_t** out, aot_error_t* err);
AOT_HIDDEN aot_status_t aot__cpu_lacking(const aot__json_t* cpu_entry, char* names, size_t size,
                                         size_t* out_count, aot_error_t* err);

/* ---- schedule.c ---- */
/* chunks per thread of a kernel too small for a head and a tail (below):
 * threads claim chunks as they come, so a thread that starts late or runs
 * slow takes fewer; more chunks balance better but cost more claims */
#define AOT__CHUNKS_PER_THREAD 4
/* A kernel with work for more chunks than that is cut into a head of one
 * chunk per thread, AOT__HEAD_PERCENT of its items, and a tail of up to
 * AOT__TAIL_CHUNKS_PER_THREAD small chunks per thread. Threads that start
 * together each take a head chunk and then share the tail, so they finish
 * within a small chunk of each other, where equal chunks left them up to a
 * whole chunk apart (resnet18's 3x3 convs on 2 threads: 0.54-0.60 of their
 * 1-thread time in 8 equal chunks); and the caller takes the first chunk,
 * so consecutive kernels hand it the same rows of their planes, often still
 * in its cache. A thread that comes late finds the head taken and only shares
 * the tail. */
#define AOT__HEAD_PERCENT 75
#define AOT__TAIL_CHUNKS_PER_THREAD 8
/* the least estimated (or measured, threadpool.c) work of one chunk: well
 * above the cost of a claim and a hand-off between cores (a few hundred
 * nanoseconds) and of moving a chunk's operands to another core's cache and
 * its result back, which is what small kernels lose to: with 2 us, lenet's two
 * 4-5 us kernels went in two chunks each and its 2-thread runs took 1.15-1.5x
 * its 1-thread ones (21 us) on a 2-core Zen 4 VM; with 5 us, 0.98-1.01, and
 * mlp and bert_mini split alike (2-thread/1-thread 0.5-0.6) */
#define AOT__MIN_CHUNK_NS 5000
/* the most chunks of one kernel (the pool packs the count into 16 bits) */
#define AOT__MAX_CHUNKS 4096
/* How a kernel's [0, work) is cut: `chunks` chunks, the first `head_chunks`
 * of `items` items and the rest of `tail_items` (the last chunk may be
 * shorter). chunks == 1: the calling thread runs it whole. */
typedef struct aot__split {
  int64_t items;
  uint32_t chunks;
  uint32_t head_chunks;
  int64_t tail_items;
} aot__split_t;

/* the items [*begin, *end) of chunk `chunk` < s->chunks of a kernel of `work` items */
static inline void aot__chunk_range(const aot__split_t* s, int64_t work, uint32_t chunk,
                                    int64_t* begin, int64_t* end) {
  int64_t b, n;
  if (chunk < s->head_chunks) {
    b = (int64_t)chunk * s->items;
    n = s->items;
  } else {
    b = (int64_t)s->head_chunks * s->items + (int64_t)(chunk - s->head_chunks) * s->tail_items;
    n = s->tail_items;
  }
  *begin = b;
  *end = work - b < n ? work : b + n;
}

AOT_HIDDEN aot__split_t aot__split_kernel(const aot__kernel_t* k, uint32_t threads);
/* 1 when some kernel of m is split on `threads` threads: only then does a
 * context need a pool */
AOT_HIDDEN int aot__model_splits(const aot_model_t* m, uint32_t threads);

/* ---- threadpool.c ---- */
/* a pool's first runs, each kernel whole on the caller and timed; the splits
 * then follow the measured times instead of the manifest's estimates: the
 * first run also pays for first touches of the arena and cold caches, the
 * second is what later runs cost (each kernel keeps its faster time) */
#define AOT__CALIBRATION_RUNS 2
typedef struct aot__pool aot__pool_t;
typedef struct aot__job {
  const void* const* inputs;
  void* const* outputs;
  uint8_t* arena;
  const uint8_t* weights;
} aot__job_t;
/* the most threads of a context or a pool */
#define AOT__MAX_THREADS 1024u

/* A pool of `threads` - 1 workers; the caller of aot__pool_run is the last thread. It runs
 * no program until aot__pool_bind gives it one. */
AOT_HIDDEN aot_status_t aot__pool_create(uint32_t threads, aot__pool_t** out, aot_error_t* err);
AOT_HIDDEN void aot__pool_destroy(aot__pool_t* pool);
/* Make `count` kernels (not copied: they must outlive the binding) the program the pool
 * runs, split by their estimates until its calibration runs have timed them. Between runs
 * only. Binding the kernels already bound keeps their measured splits. */
AOT_HIDDEN aot_status_t aot__pool_bind(aot__pool_t* pool, const aot__kernel_t* kernels,
                                       uint32_t count, aot_error_t* err);
/* Run every kernel of the bound program in order: each split one (schedule.c) across
 * whichever threads come, the rest on the calling thread; the first
 * AOT__CALIBRATION_RUNS runs, every kernel on the calling thread. Returns when
 * every kernel has finished. */
AOT_HIDDEN void aot__pool_run(aot__pool_t* pool, const aot__job_t* job);

/* ---- gpu_device.c: a model's code and weights on one device ---- */
struct aot__gpu_device {
  aot__gpu_device_t* next;
  int32_t ordinal;
  CUdevice device;
  CUcontext context; /* the device's primary context, retained */
  char name[96];
  uint32_t sm;                 /* the device's, 90 for sm_90 */
  const aot__gpu_sm_t* code;   /* the launch plan of the code loaded */
  CUmodule module;
  CUfunction* functions;       /* one per launch of code */
  CUdeviceptr weights;         /* 0 when the model has no weights */
};

/* m's state on device `ordinal`, loaded on first use (driver, module, weights). */
AOT_HIDDEN aot_status_t aot__gpu_device_get(const aot_model_t* m, int32_t ordinal,
                                            aot__gpu_device_t** out, aot_error_t* err);

/* ---- gpu_context.c: CUDA contexts ---- */
typedef struct aot__gpu_context aot__gpu_context_t;
AOT_HIDDEN aot_status_t aot__gpu_context_create(const aot_model_t* m, int32_t ordinal,
                                                uint32_t flags, aot__gpu_context_t** out,
                                                aot_error_t* err);
AOT_HIDDEN void aot__gpu_context_destroy(aot__gpu_context_t* g);
AOT_HIDDEN int32_t aot__gpu_context_ordinal(const aot__gpu_context_t* g);
AOT_HIDDEN void* aot__gpu_context_stream(const aot__gpu_context_t* g);
/* Run with host buffers (copied in and out), or device buffers on `stream` (NULL: the
 * context's); pointers already checked against the model's tensors. */
AOT_HIDDEN aot_status_t aot__gpu_run_host(aot__gpu_context_t* g, const void* const* inputs,
                                          void* const* outputs, aot_error_t* err);
AOT_HIDDEN aot_status_t aot__gpu_run_device(aot__gpu_context_t* g, const void* const* inputs,
                                            void* const* outputs, void* stream,
                                            aot_error_t* err);
AOT_HIDDEN aot_status_t aot__gpu_alloc(aot__gpu_context_t* g, uint64_t bytes, uint64_t* out,
                                       aot_error_t* err);
AOT_HIDDEN aot_status_t aot__gpu_free(aot__gpu_context_t* g, uint64_t address, aot_error_t* err);
AOT_HIDDEN aot_status_t aot__gpu_copy(aot__gpu_context_t* g, void* host, uint64_t address,
                                      uint64_t bytes, int to_device, aot_error_t* err);

#endif /* AOT_INTERNAL_H_ */
