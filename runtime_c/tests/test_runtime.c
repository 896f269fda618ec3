/* C tests of the runtime: open/run a hand-built artifact, threads, concurrent
 * contexts, input validation, and damaged files (every truncation point, a
 * flipped bit in every byte) that must fail with a message, never crash.
 * usage: test_runtime TESTMODEL_SO BUILD_DIR */
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "aot_runtime.h"
#include "artifact_writer.h"
#include "check.h"

#define N 148
#define C 37

/* the "format_version" member every test manifest begins with */
#define FV "\"format_version\": 2"
_Static_assert(AOT_FORMAT_VERSION == 2, "FV spells AOT_FORMAT_VERSION");

/* arch, arch, extra cpu fields, extra kernel 0 fields, kernel 1's symbol, extra
 * kernel 1 fields, extra top-level fields */
static const char* kManifestFmt =
    "{" FV ",\n"
    " \"compiler\": {\"name\": \"aot\", \"version\": \"0.1.0\"},\n"
    " \"model\": {\"name\": \"axpb\", \"source_sha256\": \"00\"},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [4, 37]}],\n"
    " \"outputs\": [{\"name\": \"y\", \"dtype\": \"float32\", \"shape\": [4, 37]},\n"
    "             {\"name\": \"s\", \"dtype\": \"float32\", \"shape\": []}],\n"
    " \"arena\": {\"bytes\": 592, \"alignment\": 64},\n"
    " \"weights\": {\"section\": \"weights\", \"bytes\": 148, \"alignment\": 64},\n"
    " \"cpu\": [{\"section\": \"cpu.%s\", \"arch\": \"%s\", \"triple\": \"t\", \"cpu\": \"c\","
    " \"features\": \"\", \"entry\": \"aot_model_entry\"%s}],\n"
    " \"kernels\": [{\"name\": \"k0\", \"symbol\": \"aot_kernel_0\", \"work\": 148, \"ops\": [\"mul\"]%s},\n"
    "             {\"name\": \"k1\", \"symbol\": \"%s\", \"work\": 148%s},\n"
    "             {\"name\": \"k2\", \"symbol\": \"aot_kernel_2\", \"work\": 1}],\n"
    " \"unknown_key\": {\"nested\": [1, 2.5e3, null, true, \"\\u00e9\"]}%s\n"
    "}\n";

#if defined(__x86_64__)
#define ARCH "x86_64"
#else
#define ARCH "aarch64"
#endif

static uint8_t* g_code;
static size_t g_code_size;
static float g_w[C];

static uint8_t* build_kernels(const char* arch, const char* cpu_extra,
                              const char* k0_extra, const char* k1_symbol, const char* k1_extra,
                              const char* extra, int zstd_code, size_t* out_size) {
  char manifest[4096];
  snprintf(manifest, sizeof manifest, kManifestFmt, arch, arch, cpu_extra, k0_extra,
           k1_symbol, k1_extra, extra);
  char secname[32];
  snprintf(secname, sizeof secname, "cpu.%s", arch);
  tw_section_t secs[2] = {{"weights", g_w, sizeof g_w, 1}, {secname, g_code, g_code_size, zstd_code}};
  return tw_pack(manifest, secs, 2, out_size);
}

static uint8_t* build_manifest(const char* arch, const char* cpu_extra, const char* k1_symbol,
                               const char* extra, int zstd_code, size_t* out_size) {
  return build_kernels(arch, cpu_extra, "", k1_symbol, "", extra, zstd_code, out_size);
}

static uint8_t* build(const char* arch, const char* k1_symbol, int zstd_code, size_t* out_size) {
  return build_manifest(arch, "", k1_symbol, "", zstd_code, out_size);
}

#define CHECK_MESSAGES \
  ",\n \"checks\": [{\"message\": \"x[0] must be below 1000\"}, {\"message\": \"y[1] too big\"}]"

/* The test model with its two run-time checks, through the checks function `symbol`. */
static uint8_t* build_checked(const char* symbol, size_t* out_size) {
  char cpu_extra[192];
  /* testmodel.c's description of the code with this checks function */
  const char* info = strcmp(symbol, "aot_model_checks_broken") == 0 ? "aot_code_info_checks_broken"
                                                                    : "aot_code_info_checked";
  snprintf(cpu_extra, sizeof cpu_extra, ", \"checks\": \"%s\", \"code_info\": \"%s\"", symbol, info);
  return build_manifest(ARCH, cpu_extra, "aot_kernel_1", CHECK_MESSAGES, 1, out_size);
}

static void fill_input(float* x, int seed) {
  for (int i = 0; i < N; i++) x[i] = (float)((i * 7 + seed * 13) % 23) - 11.0f;
}

static aot_status_t run_once(aot_context_t* ctx, const float* x, float* y, float* s,
                             aot_error_t* err) {
  int64_t shape[2] = {4, 37};
  aot_tensor_t in = {AOT_DTYPE_FLOAT32, 2, shape, (void*)x, sizeof(float) * N};
  aot_tensor_t out[2] = {{AOT_DTYPE_FLOAT32, 2, shape, y, sizeof(float) * N},
                         {AOT_DTYPE_FLOAT32, 0, NULL, s, sizeof(float)}};
  return aot_run(ctx, &in, 1, out, 2, err);
}

static int check_result(const float* x, const float* y, float s) {
  float sum = 0.0f;
  for (int i = 0; i < N; i++) {
    float want = x[i] * g_w[i % C] + 1.0f;
    if (y[i] != want) return 0;
    sum += want;
  }
  return s == sum;
}

static void test_basic(const uint8_t* art, size_t size) {
  aot_error_t err;
  aot_model_t* m = NULL;
  aot_status_t st = aot_model_open_memory(art, size, &m, &err);
  CHECK(st == AOT_OK, "open: %s", err.message);
  if (st) return;
  CHECK(aot_model_input_count(m) == 1, "inputs");
  CHECK(aot_model_output_count(m) == 2, "outputs");
  CHECK(strcmp(aot_model_name(m), "axpb") == 0, "name %s", aot_model_name(m));
  CHECK(strcmp(aot_model_cpu_variant(m), "c") == 0, "cpu variant %s", aot_model_cpu_variant(m));
  CHECK(aot_model_arena_bytes(m) == 592, "arena");
  aot_tensor_info_t info;
  CHECK(aot_model_input_info(m, 0, &info, &err) == AOT_OK, "%s", err.message);
  CHECK(strcmp(info.name, "x") == 0 && info.dtype == AOT_DTYPE_FLOAT32 && info.rank == 2 &&
            info.shape[0] == 4 && info.shape[1] == 37 && info.byte_size == 592,
        "input info");
  CHECK(aot_model_output_info(m, 1, &info, &err) == AOT_OK, "%s", err.message);
  CHECK(strcmp(info.name, "s") == 0 && info.rank == 0 && info.byte_size == 4, "output info");
  CHECK(aot_model_output_info(m, 2, &info, &err) == AOT_ERR_INVALID_ARGUMENT, "index range");

  float x[N], y1[N], y4[N], s1 = 0, s4 = 0;
  fill_input(x, 1);
  aot_context_t* c1 = NULL;
  aot_context_t* c4 = NULL;
  CHECK(aot_context_create(m, NULL, &c1, &err) == AOT_OK, "%s", err.message);
  aot_context_options_t opt = {.struct_size = sizeof opt, .num_threads = 4};
  CHECK(aot_context_create(m, &opt, &c4, &err) == AOT_OK, "%s", err.message);
  CHECK(run_once(c1, x, y1, &s1, &err) == AOT_OK, "run1: %s", err.message);
  CHECK(check_result(x, y1, s1), "threads=1 result");
  for (int rep = 0; rep < 50; rep++) {
    memset(y4, 0, sizeof y4);
    s4 = 0;
    CHECK(run_once(c4, x, y4, &s4, &err) == AOT_OK, "run4: %s", err.message);
    CHECK(memcmp(y1, y4, sizeof y1) == 0 && s1 == s4, "threads=4 differs from threads=1");
  }

  /* Validation of the caller's tensors. */
  int64_t shape[2] = {4, 37}, bad_shape[2] = {4, 36};
  aot_tensor_t in = {AOT_DTYPE_FLOAT32, 2, shape, x, sizeof x};
  aot_tensor_t out[2] = {{AOT_DTYPE_FLOAT32, 2, shape, y1, sizeof y1},
                         {AOT_DTYPE_FLOAT32, 0, NULL, &s1, 4}};
  st = aot_run(c1, &in, 0, out, 2, &err);
  CHECK(st == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "expected 1 inputs, got 0"), "%s",
        err.message);
  in.shape = bad_shape;
  st = aot_run(c1, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_SHAPE_MISMATCH &&
            strstr(err.message, "input 'x' (index 0): expected shape [4,37], got [4,36]"),
        "%s", err.message);
  in.shape = shape;
  in.rank = 1;
  st = aot_run(c1, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_SHAPE_MISMATCH && strstr(err.message, "got [4]"), "%s", err.message);
  in.rank = 2;
  in.dtype = AOT_DTYPE_INT32;
  st = aot_run(c1, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_DTYPE_MISMATCH &&
            strstr(err.message, "input 'x' (index 0): expected dtype float32, got int32"),
        "%s", err.message);
  in.dtype = AOT_DTYPE_FLOAT32;
  in.byte_size = 100;
  st = aot_run(c1, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_SHAPE_MISMATCH && strstr(err.message, "byte_size 100"), "%s", err.message);
  in.byte_size = sizeof x;
  out[1].rank = 1;
  out[1].shape = shape;
  st = aot_run(c1, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_SHAPE_MISMATCH && strstr(err.message, "output 's' (index 1)"), "%s",
        err.message);
  out[1].rank = 0;
  out[0].data = NULL;
  st = aot_run(c1, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "data is NULL"), "%s", err.message);
  CHECK(aot_run(NULL, &in, 1, out, 2, NULL) == AOT_ERR_INVALID_ARGUMENT, "NULL ctx, NULL err");
  aot_context_options_t small = {.struct_size = 4, .num_threads = 2};
  aot_context_t* cx = NULL;
  CHECK(aot_context_create(m, &small, &cx, &err) == AOT_ERR_INVALID_ARGUMENT && !cx, "%s",
        err.message);

  aot_context_destroy(c1);
  aot_context_destroy(c4);
  aot_model_close(m);
}

typedef struct {
  const aot_model_t* model;
  int seed;
  int ok;
  uint32_t threads;
} worker_arg_t;

static void* worker(void* p) {
  worker_arg_t* a = (worker_arg_t*)p;
  aot_context_options_t opt = {.struct_size = sizeof opt, .num_threads = a->threads};
  aot_context_t* ctx = NULL;
  aot_error_t err;
  a->ok = aot_context_create(a->model, &opt, &ctx, &err) == AOT_OK;
  float x[N], y[N], s;
  for (int i = 0; a->ok && i < 200; i++) {
    fill_input(x, a->seed + i);
    a->ok = run_once(ctx, x, y, &s, &err) == AOT_OK && check_result(x, y, s);
  }
  aot_context_destroy(ctx);
  return NULL;
}

static void test_concurrent(const uint8_t* art, size_t size) {
  aot_model_t* m = NULL;
  aot_error_t err;
  if (aot_model_open_memory(art, size, &m, &err) != AOT_OK) {
    CHECK(0, "open: %s", err.message);
    return;
  }
  pthread_t t[2];
  worker_arg_t a[2] = {{m, 1, 0, 1}, {m, 1000, 0, 3}};
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, &a[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CHECK(a[0].ok && a[1].ok, "concurrent contexts");
  aot_model_close(m);
}

static void test_two_models(const uint8_t* art, size_t size) {
  /* Two models open at once load two independent code images. */
  aot_model_t *m1 = NULL, *m2 = NULL;
  aot_error_t err;
  CHECK(aot_model_open_memory(art, size, &m1, &err) == AOT_OK, "%s", err.message);
  CHECK(aot_model_open_memory(art, size, &m2, &err) == AOT_OK, "%s", err.message);
  aot_model_close(m1);
  aot_context_t* c = NULL;
  float x[N], y[N], s;
  fill_input(x, 5);
  if (m2 && aot_context_create(m2, NULL, &c, &err) == AOT_OK) {
    CHECK(run_once(c, x, y, &s, &err) == AOT_OK && check_result(x, y, s), "second model");
    aot_context_destroy(c);
  }
  aot_model_close(m2);
}

/* Which section (or "header") holds byte i of the artifact. */
static const char* owner_of(const uint8_t* art, size_t i, char* buf, size_t bufsize) {
  uint32_t count = art[12];
  if (i < 64 + 64 * (size_t)count) return "header";
  for (uint32_t k = 0; k < count; k++) {
    const uint8_t* e = art + 64 + 64 * k;
    uint64_t off = 0, n = 0;
    memcpy(&off, e + 32, 8);
    memcpy(&n, e + 40, 8);
    if (i < off) {
      snprintf(buf, bufsize, "section '%s': padding", (const char*)e);
      return buf;
    }
    if (i < off + n) {
      snprintf(buf, bufsize, "section '%s'", (const char*)e);
      return buf;
    }
  }
  return "?";
}

static void test_damage(const uint8_t* art, size_t size) {
  uint8_t* copy = malloc(size);
  aot_error_t err;
  /* Every truncation point. */
  for (size_t n = 0; n < size; n++) {
    aot_model_t* m = NULL;
    aot_status_t st = aot_model_open_memory(art, n, &m, &err);
    CHECK(st != AOT_OK && m == NULL && err.message[0], "truncated to %zu opened", n);
    if (n >= 64) CHECK(strstr(err.message, "truncated: file is"), "n=%zu: %s", n, err.message);
  }
  /* Trailing data. */
  uint8_t* longer = calloc(1, size + 1);
  memcpy(longer, art, size);
  aot_model_t* m = NULL;
  CHECK(aot_model_open_memory(longer, size + 1, &m, &err) == AOT_ERR_FORMAT &&
            strstr(err.message, "trailing data"),
        "%s", err.message);
  free(longer);
  /* A flipped bit in every byte is detected and attributed. */
  char owner[64];
  for (size_t i = 0; i < size; i++) {
    memcpy(copy, art, size);
    copy[i] ^= (uint8_t)(1u << (i % 8));
    m = NULL;
    aot_status_t st = aot_model_open_memory(copy, size, &m, &err);
    const char* who = owner_of(art, i, owner, sizeof owner);
    CHECK(st != AOT_OK && m == NULL, "flip at %zu (%s) opened", i, who);
    if (strcmp(who, "header") == 0) {
      CHECK(i < 8 ? strstr(err.message, "bad magic") != NULL
                  : (i < 12 ? strstr(err.message, "version") != NULL
                            : err.message[0] != 0),
            "flip at %zu: %s", i, err.message);
    } else {
      CHECK(strstr(err.message, who) != NULL, "flip at %zu: want '%s', got '%s'", i, who,
            err.message);
    }
    aot_model_close(m);
  }
  free(copy);
}

static void expect_open_error(const uint8_t* art, size_t size, aot_status_t code,
                              const char* needle, const char* what) {
  aot_model_t* m = NULL;
  aot_error_t err;
  aot_status_t st = aot_model_open_memory(art, size, &m, &err);
  CHECK(st == code && m == NULL && strstr(err.message, needle), "%s: status %d, '%s'", what, st,
        err.message);
  aot_model_close(m);
}

static void test_manifest_errors(void) {
  size_t size;
  uint8_t* art = build(ARCH, "aot_kernel_9", 1, &size);
  expect_open_error(art, size, AOT_ERR_FORMAT, "missing symbol 'aot_kernel_9'", "missing symbol");
  free(art);
  /* an artifact of another format version: refused at the header, saying which side to update */
  art = build(ARCH, "aot_kernel_1", 1, &size);
  art[8] = AOT_FORMAT_VERSION - 1;
  expect_open_error(art, size, AOT_ERR_UNSUPPORTED,
                    "format version 1; this runtime reads 2: recompile the model", "older format");
  art[8] = AOT_FORMAT_VERSION + 1;
  expect_open_error(art, size, AOT_ERR_UNSUPPORTED,
                    "format version 3; this runtime reads 2: a newer aot wrote it", "newer format");
  free(art);
  const char* other = strcmp(ARCH, "x86_64") == 0 ? "aarch64" : "x86_64";
  art = build(other, "aot_kernel_1", 1, &size);
  expect_open_error(art, size, AOT_ERR_UNSUPPORTED, "no CPU code for " ARCH, "wrong arch");
  free(art);

/* the least manifest that gets past the fields every model has (an output, an arena, weights) */
#define MIN_MANIFEST                                                                      \
  "{" FV ", \"inputs\": [], \"outputs\": [{\"name\": \"y\", \"dtype\": \"int8\", " \
  "\"shape\": []}]"
#define MIN_ARENA_WEIGHTS \
  ", \"arena\": {\"bytes\": 0}, \"weights\": {\"section\": \"weights\", \"bytes\": 0}"
  static const struct {
    const char* json;
    aot_status_t code;
    const char* needle;
  } cases[] = {
      {"[1]", AOT_ERR_FORMAT, "top level is not a JSON object"},
      {"{" FV ",}", AOT_ERR_FORMAT, "JSON error at byte"},
      /* the header's version was checked: a manifest that disagrees is malformed */
      {"{\"format_version\": 3}", AOT_ERR_FORMAT, "manifest: format_version 3, not the header's 2"},
      {"{\"format_version\": 1}", AOT_ERR_FORMAT, "manifest: format_version 1, not the header's 2"},
      {"{\"format_version\": \"2\"}", AOT_ERR_FORMAT, "\"format_version\" must be an integer"},
      {"{" FV ", \"format_version\": 1}", AOT_ERR_FORMAT, "duplicate key"},
      {"{" FV "}", AOT_ERR_FORMAT, "\"inputs\" must be an array"},
      {"{" FV ", \"inputs\": [{\"name\": \"x\", \"dtype\": \"complex64\", "
       "\"shape\": []}], \"outputs\": []}",
       AOT_ERR_UNSUPPORTED, "unknown dtype \"complex64\""},
      {"{" FV ", \"inputs\": [{\"name\": \"x\", \"dtype\": \"int8\", "
       "\"shape\": [-1]}], \"outputs\": []}",
       AOT_ERR_FORMAT, "shape[0] must be a non-negative integer"},
      {"{" FV ", \"inputs\": [{\"name\": \"x\", \"dtype\": \"int8\", "
       "\"shape\": [1.5]}], \"outputs\": []}",
       AOT_ERR_FORMAT, "shape[0] must be a non-negative integer"},
      {"{" FV ", \"inputs\": [{\"name\": \"x\", \"dtype\": \"float64\", "
       "\"shape\": [4294967296, 4294967296]}], \"outputs\": []}",
       AOT_ERR_FORMAT, "byte size overflows"},
      {MIN_MANIFEST MIN_ARENA_WEIGHTS ", \"cpu\": []}", AOT_ERR_UNSUPPORTED, "no CPU code"},
      /* GPU code only: its cuda entry is checked at open (gpu_plan.c) */
      {MIN_MANIFEST MIN_ARENA_WEIGHTS ", \"kernels\": [], \"cpu\": [], \"cuda\": {\"sms\": "
       "[{\"sm\": \"sm_80\"}, {\"sm\": \"sm_90\"}]}}",
       AOT_ERR_FORMAT, "manifest: cuda.arena must be an object"},
      {MIN_MANIFEST MIN_ARENA_WEIGHTS ", \"kernels\": [], \"cpu\": [], \"cuda\": {\"arena\": "
       "{\"bytes\": 0}, \"weights\": \"weights\", \"sms\": [{\"sm\": \"\\n\"}, 7, "
       "{\"sm\": \"sm_9999999999999999\"}]}}",
       AOT_ERR_FORMAT, "cuda.sms[0]: \"sm\" must name a GPU architecture"},
      {MIN_MANIFEST MIN_ARENA_WEIGHTS ", \"kernels\": [], \"cpu\": [], \"cuda\": 1}", AOT_ERR_FORMAT,
       "manifest: \"cuda\" must be an object"},
      {MIN_MANIFEST MIN_ARENA_WEIGHTS ", \"cpu\": [], \"cuda\": {}}", AOT_ERR_FORMAT,
       "manifest: \"kernels\" must be an array"},
      {MIN_MANIFEST ", \"arena\": {\"bytes\": 0}, \"weights\": {\"section\": \"weights\", "
       "\"bytes\": 8}, \"cpu\": []}",
       AOT_ERR_FORMAT, "section 'weights': missing"},
      {MIN_MANIFEST MIN_ARENA_WEIGHTS ", \"cpu\": [{\"arch\": \"" ARCH "\", \"section\": \"cpu.nope\"}]}",
       AOT_ERR_FORMAT, "section 'cpu.nope': missing"},
      {MIN_MANIFEST ", \"arena\": {\"bytes\": 1, \"alignment\": 3}, \"cpu\": []}", AOT_ERR_FORMAT,
       "not a power of two"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    art = tw_pack(cases[i].json, NULL, 0, &size);
    expect_open_error(art, size, cases[i].code, cases[i].needle, cases[i].json);
    free(art);
  }
  /* A code section that is not an ELF image. */
  char manifest[512];
  snprintf(manifest, sizeof manifest,
           MIN_MANIFEST MIN_ARENA_WEIGHTS ", \"cpu\": [{\"arch\": \"%s\", \"section\": \"cpu.%s\"}]}",
           ARCH, ARCH);
  static const char kJunk[100] = "not an ELF image at all";
  tw_section_t junk = {"cpu." ARCH, kJunk, sizeof kJunk, 0};
  art = tw_pack(manifest, &junk, 1, &size);
  expect_open_error(art, size, AOT_ERR_FORMAT, "not an ELF image", "junk code");
  free(art);
}

/* Runs `ctx` on the standard input with x[0] and x[1] replaced; returns the status. */
static aot_status_t run_with(aot_context_t* ctx, float x0, float x1, aot_error_t* err) {
  float x[N], y[N], s;
  fill_input(x, 2);
  x[0] = x0;
  x[1] = x1;
  aot_status_t st = run_once(ctx, x, y, &s, err);
  if (st == AOT_OK && !check_result(x, y, s)) return AOT_ERR_INTERNAL; /* wrong answer */
  return st;
}

static void test_checks(void) {
  CHECK(strcmp(aot_status_string(AOT_ERR_CHECK_FAILED), "run-time check failed") == 0,
        "check status string");
  size_t size;
  uint8_t* art = build_checked("aot_model_checks", &size);
  aot_error_t err;
  aot_model_t* m = NULL;
  CHECK(aot_model_open_memory(art, size, &m, &err) == AOT_OK, "open checked: %s", err.message);
  free(art);
  if (!m) return;
  for (uint32_t threads = 1; threads <= 4; threads += 3) {
    aot_context_options_t opt = {.struct_size = sizeof opt, .num_threads = threads};
    aot_context_t* ctx = NULL;
    CHECK(aot_context_create(m, &opt, &ctx, &err) == AOT_OK, "%s", err.message);
    if (!ctx) continue;
    for (int rep = 0; rep < 20; rep++) { /* the verdict must not depend on the threads' race */
      CHECK(run_with(ctx, 1.0f, 2.0f, &err) == AOT_OK && err.message[0] == 0,
            "threads=%u passing run: %s", threads, err.message);
      aot_status_t st = run_with(ctx, 5000.0f, 2.0f, &err);
      CHECK(st == AOT_ERR_CHECK_FAILED && err.code == st &&
                strcmp(err.message, "x[0] must be below 1000") == 0,
            "threads=%u check 0: %d '%s'", threads, st, err.message);
      st = run_with(ctx, 1.0f, 5000.0f, &err);
      CHECK(st == AOT_ERR_CHECK_FAILED && strcmp(err.message, "y[1] too big") == 0,
            "threads=%u check 1: %d '%s'", threads, st, err.message);
      st = run_with(ctx, 5000.0f, 5000.0f, &err);
      CHECK(st == AOT_ERR_CHECK_FAILED && strcmp(err.message, "x[0] must be below 1000") == 0,
            "threads=%u both fail, the first is reported: '%s'", threads, err.message);
    }
    aot_context_destroy(ctx);
  }
  aot_model_close(m);

  /* A checks function that answers out of range is the code's fault, not the input's. */
  art = build_checked("aot_model_checks_broken", &size);
  m = NULL;
  CHECK(aot_model_open_memory(art, size, &m, &err) == AOT_OK, "open broken: %s", err.message);
  free(art);
  aot_context_t* ctx = NULL;
  if (m && aot_context_create(m, NULL, &ctx, &err) == AOT_OK) {
    aot_status_t st = run_with(ctx, 1.0f, 2.0f, &err);
    CHECK(st == AOT_ERR_INTERNAL && strstr(err.message, "returned 3 (it has 2 checks)"), "%d '%s'",
          st, err.message);
    aot_context_destroy(ctx);
  }
  aot_model_close(m);

  art = build_checked("aot_model_no_such_checks", &size);
  expect_open_error(art, size, AOT_ERR_FORMAT, "aot_model_no_such_checks", "missing checks symbol");
  free(art);
  static const struct {
    const char* checks;
    const char* needle;
  } bad[] = {
      {",\"checks\": {}", "\"checks\" must be an array"},
      {",\"checks\": [1]", "checks[0]: must be an object"},
      {",\"checks\": [{\"message\": \"a\"}, {}]", "checks[1]: missing \"message\""},
      {",\"checks\": [{\"message\": \"\"}]", "checks[0]: empty message"},
      {",\"checks\": [{\"message\": 7}]", "\"message\" must be a string"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    art = build_manifest(ARCH, "", "aot_kernel_1", bad[i].checks, 1, &size);
    expect_open_error(art, size, AOT_ERR_FORMAT, bad[i].needle, bad[i].checks);
    free(art);
  }
  /* No checks opens and runs like a model without them. */
  art = build_manifest(ARCH, "", "aot_kernel_1", ",\"checks\": []", 1, &size);
  test_basic(art, size);
  free(art);
}

/* Threads of this process, from /proc (-1 where there is none). */
static int thread_count(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int n = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
  fclose(f);
  return n;
}

/* Opens an artifact built in memory and frees the bytes; NULL (a failed CHECK) if it does not open. */
static aot_model_t* open_built(uint8_t* art, size_t size) {
  aot_model_t* m = NULL;
  aot_error_t err;
  aot_status_t st = aot_model_open_memory(art, size, &m, &err);
  free(art);
  CHECK(st == AOT_OK, "open: %s", err.message);
  return st == AOT_OK ? m : NULL;
}


/* The model with its three kernels' cost estimates (manifest "cost_ns"): the
 * threads a 4-thread context starts, and its results against 1 thread's. */
static void check_costed(const char* k0_extra, const char* k1_extra, int want_workers) {
  size_t size;
  uint8_t* art = build_kernels(ARCH, "", k0_extra, "aot_kernel_1", k1_extra, "", 1, &size);
  aot_model_t* m = open_built(art, size);
  if (!m) return;
  aot_error_t err;
  float x[N], y1[N], y4[N], s1 = 0, s4 = 0;
  fill_input(x, 9);
  aot_context_t* c1 = NULL;
  aot_context_t* c4 = NULL;
  aot_context_options_t opt = {.struct_size = sizeof opt, .num_threads = 4};
  CHECK(aot_context_create(m, NULL, &c1, &err) == AOT_OK, "%s", err.message);
  int before = thread_count();
  CHECK(aot_context_create(m, &opt, &c4, &err) == AOT_OK, "%s", err.message);
  int after = thread_count();
  CHECK(before < 0 || after - before == want_workers, "%s %s: %d workers started, want %d",
        k0_extra, k1_extra, after - before, want_workers);
  CHECK(run_once(c1, x, y1, &s1, &err) == AOT_OK && check_result(x, y1, s1), "threads=1");
  for (int rep = 0; rep < 50; rep++) {
    memset(y4, 0, sizeof y4);
    CHECK(run_once(c4, x, y4, &s4, &err) == AOT_OK, "run4: %s", err.message);
    CHECK(memcmp(y1, y4, sizeof y1) == 0 && s1 == s4, "%s %s: threads=4 differs from threads=1",
          k0_extra, k1_extra);
  }
  aot_context_destroy(c1);
  aot_context_destroy(c4);
  aot_model_close(m);
}

static void test_costs(void) {
  /* every kernel too small to split: no threads at all, the caller runs all */
  check_costed(", \"cost_ns\": 10", ", \"cost_ns\": 0", 0);
  /* one large kernel: a pool; the small one runs on the caller in between */
  check_costed(", \"cost_ns\": 100000000", ", \"cost_ns\": 10", 3);
  /* no estimate (an older artifact): split by item count */
  check_costed("", "", 3);
  static const char* bad[] = {", \"cost_ns\": -1", ", \"cost_ns\": 1.5", ", \"cost_ns\": \"7\"",
                              ", \"cost_ns\": null"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t size;
    uint8_t* art = build_kernels(ARCH, "", bad[i], "aot_kernel_1", "", "", 1, &size);
    expect_open_error(art, size, AOT_ERR_FORMAT, "kernels[0]: \"cost_ns\" must be an integer",
                      bad[i]);
    free(art);
  }
}

/* Split kernels of different chunk counts in a row (15, then a few, then 15 on
 * 4 threads), each item of the two increments run exactly once, over many
 * runs: a claim that strays into the next kernel or past the last chunk shows
 * as a wrong sum or a hang. */
static void test_split_stress(void) {
  char manifest[2048];
  snprintf(manifest, sizeof manifest,
           "{" FV ",\n"
           " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [4, 37]}],\n"
           " \"outputs\": [{\"name\": \"y\", \"dtype\": \"float32\", \"shape\": [4, 37]},\n"
           "             {\"name\": \"s\", \"dtype\": \"float32\", \"shape\": []}],\n"
           " \"arena\": {\"bytes\": 592},\n"
           " \"weights\": {\"section\": \"weights\", \"bytes\": 148},\n"
           " \"cpu\": [{\"section\": \"cpu.%s\", \"arch\": \"%s\", \"entry\": \"aot_model_entry_inc\",\n"
           "          \"code_info\": \"aot_code_info_inc\"}],\n"
           " \"kernels\": [{\"symbol\": \"aot_kernel_0\", \"work\": 148, \"cost_ns\": 1000000000},\n"
           "             {\"symbol\": \"aot_kernel_1\", \"work\": 148, \"cost_ns\": 4500},\n"
           "             {\"symbol\": \"aot_kernel_inc\", \"work\": 148, \"cost_ns\": 6500},\n"
           "             {\"symbol\": \"aot_kernel_inc\", \"work\": 148},\n"
           "             {\"symbol\": \"aot_kernel_2\", \"work\": 1, \"cost_ns\": 100}]}\n",
           ARCH, ARCH);
  tw_section_t secs[2] = {{"weights", g_w, sizeof g_w, 1}, {"cpu." ARCH, g_code, g_code_size, 1}};
  size_t size;
  uint8_t* art = tw_pack(manifest, secs, 2, &size);
  aot_model_t* m = open_built(art, size);
  if (!m) return;
  aot_error_t err;
  for (uint32_t threads = 1; threads <= 4; threads++) {
    aot_context_options_t opt = {.struct_size = sizeof opt, .num_threads = threads};
    aot_context_t* ctx = NULL;
    CHECK(aot_context_create(m, &opt, &ctx, &err) == AOT_OK, "%s", err.message);
    int wrong = 0;
    for (int rep = 0; ctx && rep < 3000; rep++) {
      float x[N], y[N], s = 0, sum = 0;
      fill_input(x, rep);
      if (run_once(ctx, x, y, &s, &err) != AOT_OK) {
        wrong++;
        continue;
      }
      for (int i = 0; i < N; i++) {
        float want = x[i] * g_w[i % C] + 1.0f + 1.0f + 1.0f;
        wrong += y[i] != want;
        sum += want;
      }
      wrong += s != sum;
    }
    CHECK(wrong == 0, "threads=%u: %d wrong values", threads, wrong);
    aot_context_destroy(ctx);
  }
  aot_model_close(m);
}

static void test_file(const uint8_t* art, size_t size, const char* dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/test_runtime.aot", dir);
  CHECK(tw_write_file(path, art, size) == 0, "write %s", path);
  aot_model_t* m = NULL;
  aot_error_t err;
  CHECK(aot_model_open_file(path, &m, &err) == AOT_OK, "%s", err.message);
  aot_model_close(m);
  m = NULL;
  CHECK(aot_model_open_file("/nonexistent/x.aot", &m, &err) == AOT_ERR_IO &&
            strstr(err.message, "cannot open '/nonexistent/x.aot'"),
        "%s", err.message);
  CHECK(aot_model_open_file(dir, &m, &err) == AOT_ERR_IO, "directory: %s", err.message);
  /* Raw input for the example program (run by the Makefile's caller). */
  float x[N];
  fill_input(x, 3);
  snprintf(path, sizeof path, "%s/test_runtime.x.bin", dir);
  CHECK(tw_write_file(path, x, sizeof x) == 0, "write %s", path);
  float y[N], s = 0;
  for (int i = 0; i < N; i++) {
    y[i] = x[i] * g_w[i % C] + 1.0f;
    s += y[i];
  }
  snprintf(path, sizeof path, "%s/test_runtime.y.expected.bin", dir);
  CHECK(tw_write_file(path, y, sizeof y) == 0, "write %s", path);
  snprintf(path, sizeof path, "%s/test_runtime.s.expected.bin", dir);
  CHECK(tw_write_file(path, &s, sizeof s) == 0, "write %s", path);
}

/* Issue 11: a 4-thread context over kernels that all have zero work (the format
 * allows it), then over one split kernel followed by zero-work ones, run many
 * times. The pool once skipped its barriers when no kernel had work, returned,
 * and its workers then read the job from aot_run's dead stack frame: under
 * `make tsan-test` that was a race report, here the runs must simply succeed. */
static void test_zero_work(void) {
  static const char* kKernels[] = {
      "{\"symbol\": \"aot_kernel_0\", \"work\": 0}, {\"symbol\": \"aot_kernel_1\", \"work\": 0},"
      " {\"symbol\": \"aot_kernel_2\", \"work\": 0}",
      "{\"symbol\": \"aot_kernel_0\", \"work\": 148, \"cost_ns\": 1000000000},"
      " {\"symbol\": \"aot_kernel_1\", \"work\": 0}, {\"symbol\": \"aot_kernel_2\", \"work\": 0}"};
  /* testmodel.c's descriptions of the code with these kernel lists */
  static const char* kCodeInfo[] = {"aot_code_info_zero_work", "aot_code_info_zero_tail"};
  for (size_t v = 0; v < sizeof kKernels / sizeof kKernels[0]; v++) {
    char manifest[2048];
    snprintf(manifest, sizeof manifest,
             "{" FV ",\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [4, 37]}],\n"
             " \"outputs\": [{\"name\": \"y\", \"dtype\": \"float32\", \"shape\": [4, 37]},\n"
             "             {\"name\": \"s\", \"dtype\": \"float32\", \"shape\": []}],\n"
             " \"arena\": {\"bytes\": 592},\n"
             " \"weights\": {\"section\": \"weights\", \"bytes\": 148},\n"
             " \"cpu\": [{\"section\": \"cpu.%s\", \"arch\": \"%s\", \"code_info\": \"%s\"}],\n"
             " \"kernels\": [%s]}\n",
             ARCH, ARCH, kCodeInfo[v], kKernels[v]);
    tw_section_t secs[2] = {{"weights", g_w, sizeof g_w, 1}, {"cpu." ARCH, g_code, g_code_size, 1}};
    size_t size;
    uint8_t* art = tw_pack(manifest, secs, 2, &size);
    aot_model_t* m = open_built(art, size);
    if (!m) continue;
    aot_error_t err;
    aot_context_options_t opt = {.struct_size = sizeof opt, .num_threads = 4};
    aot_context_t* ctx = NULL;
    CHECK(aot_context_create(m, &opt, &ctx, &err) == AOT_OK, "%s", err.message);
    int failed = 0;
    for (int rep = 0; ctx && rep < 2000; rep++) {
      float x[N], y[N], s;
      fill_input(x, rep);
      failed += run_once(ctx, x, y, &s, &err) != AOT_OK;
    }
    CHECK(failed == 0, "variant %zu: %d runs failed: %s", v, failed, err.message);
    aot_context_destroy(ctx);
    aot_model_close(m);
  }
}

/* Issue 11: a shape error must not read more of the caller's dims than it can
 * trust. The caller's two dims end where an unreadable page begins, and its
 * rank says 1000: reading a third dim would fault. */
static void test_bogus_rank_report(const uint8_t* art, size_t size) {
  long page = sysconf(_SC_PAGESIZE);
  uint8_t* pages = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
  if (pages == MAP_FAILED || mprotect(pages + page, (size_t)page, PROT_NONE) != 0) {
    CHECK(0, "cannot map a guard page");
    return;
  }
  int64_t* dims = (int64_t*)(pages + page) - 2;
  dims[0] = 4;
  dims[1] = 37;
  aot_model_t* m = NULL;
  aot_context_t* ctx = NULL;
  aot_error_t err;
  CHECK(aot_model_open_memory(art, size, &m, &err) == AOT_OK, "%s", err.message);
  CHECK(m && aot_context_create(m, NULL, &ctx, &err) == AOT_OK, "%s", err.message);
  float x[N], y[N], s;
  fill_input(x, 1);
  int64_t scalar_shape[1] = {0};
  aot_tensor_t in = {AOT_DTYPE_FLOAT32, 1000, dims, x, sizeof x};
  aot_tensor_t out[2] = {{AOT_DTYPE_FLOAT32, 2, dims, y, sizeof y},
                         {AOT_DTYPE_FLOAT32, 0, NULL, &s, sizeof s}};
  aot_status_t st = aot_run(ctx, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_SHAPE_MISMATCH &&
            strstr(err.message, "input 'x' (index 0): expected shape [4,37], got rank 1000"),
        "%d '%s'", st, err.message);
  in.rank = 3;
  st = aot_run(ctx, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_SHAPE_MISMATCH && strstr(err.message, "got rank 3"), "'%s'", err.message);
  /* a scalar output given rank 2: the model's rank is 0, so no dim is read */
  in.rank = 2;
  out[1].rank = 2;
  out[1].shape = dims;
  st = aot_run(ctx, &in, 1, out, 2, &err);
  CHECK(st == AOT_ERR_SHAPE_MISMATCH && strstr(err.message, "output 's' (index 1): expected shape [], got rank 2"),
        "'%s'", err.message);
  out[1].rank = 0;
  out[1].shape = scalar_shape;
  CHECK(aot_run(ctx, &in, 1, out, 2, &err) == AOT_OK && check_result(x, y, s), "%s", err.message);
  aot_context_destroy(ctx);
  aot_model_close(m);
  munmap(pages, 2 * (size_t)page);
}

#ifndef __has_feature
#define __has_feature(x) 0
#endif
/* ASan and TSan both (rightly) report a read of freed memory */
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer) || \
    defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif

/* Issue 11: calls on a destroyed context or a closed model are refused
 * (AOT_ERR_INVALID_ARGUMENT), not run on freed memory. This reads freed memory
 * on purpose, which only works while nothing has reused it: the calls come
 * straight after the free, glibc is told never to hand freed heap back to the
 * OS, and sanitizer builds skip it. */
static void test_use_after_destroy(const uint8_t* art, size_t size) {
  if (UNDER_SANITIZER) {
    printf("test_use_after_destroy: skipped under a sanitizer (it reads freed memory on purpose)\n");
    return;
  }
#ifdef M_TRIM_THRESHOLD
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
  aot_model_t* m = NULL;
  aot_error_t err;
  if (aot_model_open_memory(art, size, &m, &err) != AOT_OK) {
    CHECK(0, "open: %s", err.message);
    return;
  }
  float x[N], y[N], s;
  fill_input(x, 4);
  aot_context_options_t opt = {.struct_size = sizeof opt, .num_threads = 4};
  aot_context_t *c1 = NULL, *c2 = NULL;
  CHECK(aot_context_create(m, &opt, &c1, &err) == AOT_OK, "%s", err.message);
  CHECK(aot_context_create(m, NULL, &c2, &err) == AOT_OK, "%s", err.message);
  CHECK(run_once(c1, x, y, &s, &err) == AOT_OK && check_result(x, y, s), "%s", err.message);
  aot_context_destroy(c1);
  aot_status_t st = run_once(c1, x, y, &s, &err);
  CHECK(st == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "context is destroyed"), "%d '%s'",
        st, err.message);
  aot_context_destroy(c1); /* twice: a no-op, not a double free */

  aot_model_close(m);
  st = run_once(c2, x, y, &s, &err);
  CHECK(st == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "the context's model is closed"),
        "%d '%s'", st, err.message);
  aot_tensor_info_t info;
  st = aot_model_input_info(m, 0, &info, &err);
  CHECK(st == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "model is closed"), "%d '%s'", st,
        err.message);
  st = aot_model_output_info(m, 0, &info, &err);
  CHECK(st == AOT_ERR_INVALID_ARGUMENT, "output_info on a closed model: %d", st);
  CHECK(aot_model_input_count(m) == 0 && aot_model_output_count(m) == 0 &&
            aot_model_arena_bytes(m) == 0 && strcmp(aot_model_name(m), "") == 0 &&
            strcmp(aot_model_cpu_variant(m), "") == 0 && strcmp(aot_model_cpu_variant(NULL), "") == 0,
        "queries on a closed model");
  aot_context_t* c3 = NULL;
  st = aot_context_create(m, NULL, &c3, &err);
  CHECK(st == AOT_ERR_INVALID_ARGUMENT && !c3 && strstr(err.message, "model is closed"), "%d '%s'",
        st, err.message);
  aot_model_close(m); /* twice: a no-op */
  aot_context_destroy(c2); /* a context may still be destroyed after its model is closed */
}

/* Issue 11: the chosen cpu entry's "x86_features" (what its code may use) is
 * checked at open. The names this CPU lacks are compared with LLVM's view of
 * the host by tests/codegen/cpu/test_cpu_features.py; here, what every CPU agrees on. */
static void test_cpu_features(void) {
  static const struct {
    const char* extra;
    aot_status_t code; /* on x86-64 */
    const char* needle;
  } cases[] = {
      {"", AOT_OK, ""}, /* an older artifact: no field, no check */
      {", \"x86_features\": null", AOT_OK, ""},
      {", \"x86_features\": []", AOT_OK, ""},
      {", \"x86_features\": [\"sse3\"]", AOT_OK, ""},
      {", \"x86_features\": [\"sse3\", \"avx9000\", \"x87x\"]", AOT_ERR_UNSUPPORTED,
       "this CPU lacks 2 features the code needs (built for c): avx9000 (unknown to this runtime), "
       "x87x (unknown to this runtime)"},
      {", \"x86_features\": \"avx2\"", AOT_ERR_FORMAT, "\"x86_features\" must be an array"},
      {", \"x86_features\": [\"avx2\", 2]", AOT_ERR_FORMAT, "must hold non-empty strings"},
      {", \"x86_features\": [\"\"]", AOT_ERR_FORMAT, "must hold non-empty strings"},
      {", \"x86_features\": [\"a\\u0000b\"]", AOT_ERR_FORMAT, "must hold non-empty strings"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t size;
    uint8_t* art = build_manifest(ARCH, cases[i].extra, "aot_kernel_1", "", 1, &size);
    aot_status_t want = cases[i].code;
    const char* needle = cases[i].needle;
#if !defined(__x86_64__)
    if (want == AOT_OK && strstr(cases[i].extra, "\"sse3\"")) { /* any x86 list: not this machine */
      want = AOT_ERR_UNSUPPORTED;
      needle = "this is not an x86-64 machine";
    } else if (want == AOT_ERR_UNSUPPORTED) {
      needle = "this is not an x86-64 machine";
    }
#endif
    if (want == AOT_OK) {
      aot_model_t* m = open_built(art, size);
      if (m) {
        aot_context_t* ctx = NULL;
        aot_error_t err;
        float x[N], y[N], s;
        fill_input(x, 6);
        CHECK(aot_context_create(m, NULL, &ctx, &err) == AOT_OK &&
                  run_once(ctx, x, y, &s, &err) == AOT_OK && check_result(x, y, s),
              "%s: %s", cases[i].extra, err.message);
        aot_context_destroy(ctx);
      }
      aot_model_close(m);
    } else {
      expect_open_error(art, size, want, needle, cases[i].extra);
      free(art);
    }
  }
}

/* ---- issue 11, items 3-5: what a manifest may make the runtime do ---- */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The process's peak resident memory so far, in MiB. */
static long peak_mib(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

/* The test model's manifest with some of its parts replaced (NULL: the part as built). */
typedef struct {
  const char* inputs;   /* JSON arrays */
  const char* outputs;
  const char* arena;    /* members with their leading ", "; "" leaves the member out */
  const char* weights;
  const char* cpu_extra;
  const char* kernels;
  const char* extra;
} parts_t;

#define P_INPUTS "[{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [4, 37]}]"
#define P_OUTPUTS                                                                        \
  "[{\"name\": \"y\", \"dtype\": \"float32\", \"shape\": [4, 37]}, {\"name\": \"s\", \"dtype\": " \
  "\"float32\", \"shape\": []}]"
#define P_ARENA ", \"arena\": {\"bytes\": 592, \"alignment\": 64}"
#define P_WEIGHTS ", \"weights\": {\"section\": \"weights\", \"bytes\": 148, \"alignment\": 64}"
#define P_K0 "{\"name\": \"k0\", \"symbol\": \"aot_kernel_0\", \"work\": 148}"
#define P_K1 "{\"name\": \"k1\", \"symbol\": \"aot_kernel_1\", \"work\": 148}"
#define P_K2 "{\"name\": \"k2\", \"symbol\": \"aot_kernel_2\", \"work\": 1}"
#define P_KERNELS ", \"kernels\": [" P_K0 ", " P_K1 ", " P_K2 "]"

/* The artifact of p, with `weights` (weights_size bytes) as its weights section. */
static uint8_t* build_parts(const parts_t* p, const void* weights, size_t weights_size,
                            size_t* out_size) {
  char manifest[4096];
  snprintf(manifest, sizeof manifest,
           "{" FV ", \"inputs\": %s, \"outputs\": %s%s%s,\n"
           " \"cpu\": [{\"section\": \"cpu.%s\", \"arch\": \"%s\"%s}]%s%s}\n",
           p->inputs ? p->inputs : P_INPUTS,
           p->outputs ? p->outputs : P_OUTPUTS, p->arena ? p->arena : P_ARENA,
           p->weights ? p->weights : P_WEIGHTS, ARCH, ARCH, p->cpu_extra ? p->cpu_extra : "",
           p->kernels ? p->kernels : P_KERNELS, p->extra ? p->extra : "");
  tw_section_t secs[2] = {{"weights", weights, weights_size, 1}, {"cpu." ARCH, g_code, g_code_size, 1}};
  return tw_pack(manifest, secs, 2, out_size);
}

/* Manifest edits, CRCs valid, that once opened and then crashed or overran a buffer (empty
 * inputs: a NULL input pointer; weights null: a 1-byte buffer read as 148; a kernel's work
 * 2^61 - 1 on 4 threads; arena 0), and every other field the code relies on: each one is
 * refused at open with the field and both values, or as missing. */
static void test_manifest_against_code(void) {
  static const struct {
    parts_t p;
    aot_status_t code;
    const char* needle;
  } cases[] = {
      {{.inputs = "[]"}, AOT_ERR_FORMAT, "manifest: the input count is 0, the code was built for 1"},
      {{.outputs = "[]"}, AOT_ERR_FORMAT, "manifest: \"outputs\" is empty"},
      {{.outputs = "[{\"name\": \"y\", \"dtype\": \"float32\", \"shape\": [4, 37]}]"}, AOT_ERR_FORMAT,
       "the output count is 1, the code was built for 2"},
      {{.inputs = "[{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [4, 36]}]"}, AOT_ERR_FORMAT,
       "manifest: inputs[0] ('x') is 576 bytes, the code was built for 592"},
      {{.inputs = "[{\"name\": \"x\", \"dtype\": \"float64\", \"shape\": [4, 37]}]"}, AOT_ERR_FORMAT,
       "inputs[0] ('x') is 1184 bytes, the code was built for 592"},
      {{.outputs = "[{\"name\": \"y\", \"dtype\": \"float32\", \"shape\": [4, 37]}, {\"name\": \"s\", "
                   "\"dtype\": \"float32\", \"shape\": [2]}]"},
       AOT_ERR_FORMAT, "outputs[1] ('s') is 8 bytes, the code was built for 4"},
      {{.arena = ""}, AOT_ERR_FORMAT, "manifest: \"arena\" must be an object"},
      {{.arena = ", \"arena\": null"}, AOT_ERR_FORMAT, "manifest: \"arena\" must be an object"},
      {{.arena = ", \"arena\": {\"alignment\": 64}"}, AOT_ERR_FORMAT, "arena: missing \"bytes\""},
      {{.arena = ", \"arena\": {\"bytes\": 0}"}, AOT_ERR_FORMAT,
       "manifest: arena.bytes is 0, the code was built for 592"},
      {{.arena = ", \"arena\": {\"bytes\": 591}"}, AOT_ERR_FORMAT, "arena.bytes is 591, the code"},
      {{.arena = ", \"arena\": {\"bytes\": 593}"}, AOT_ERR_FORMAT, "arena.bytes is 593, the code"},
      {{.arena = ", \"arena\": {\"bytes\": 592, \"alignment\": 128}"}, AOT_ERR_FORMAT,
       "arena.alignment (at least 64) is 128, the code was built for 64"},
      {{.weights = ", \"weights\": null"}, AOT_ERR_FORMAT, "manifest: \"weights\" must be an object"},
      {{.weights = ""}, AOT_ERR_FORMAT, "manifest: \"weights\" must be an object"},
      {{.weights = ", \"weights\": {\"section\": \"weights\", \"bytes\": 148, \"alignment\": 256}"},
       AOT_ERR_FORMAT, "weights.alignment (at least 64) is 256, the code was built for 64"},
      {{.kernels = ""}, AOT_ERR_FORMAT, "manifest: \"kernels\" must be an array"},
      {{.kernels = ", \"kernels\": null"}, AOT_ERR_FORMAT, "manifest: \"kernels\" must be an array"},
      {{.kernels = ", \"kernels\": []"}, AOT_ERR_FORMAT, "the kernel count is 0, the code was built for 3"},
      {{.kernels = ", \"kernels\": [" P_K0 ", " P_K1 "]"}, AOT_ERR_FORMAT,
       "the kernel count is 2, the code was built for 3"},
      {{.kernels = ", \"kernels\": [{\"name\": \"k0\", \"symbol\": \"aot_kernel_0\", \"work\": "
                   "2305843009213693952}, " P_K1 ", " P_K2 "]"},
       AOT_ERR_FORMAT, "kernels[0]: \"work\" must be an integer in [0, 2305843009213693951]"},
      {{.kernels = ", \"kernels\": [{\"name\": \"k0\", \"symbol\": \"aot_kernel_0\", \"work\": "
                   "2305843009213693951}, " P_K1 ", " P_K2 "]"},
       AOT_ERR_FORMAT, "kernels[0] ('k0'): work is 2305843009213693951, the code was built for 148"},
      {{.kernels = ", \"kernels\": [" P_K0 ", {\"name\": \"k1\", \"symbol\": \"aot_kernel_1\", \"work\": "
                   "149}, " P_K2 "]"},
       AOT_ERR_FORMAT, "kernels[1] ('k1'): work is 149, the code was built for 148"},
      {{.kernels = ", \"kernels\": [" P_K0 ", " P_K1 ", {\"name\": \"k2\", \"symbol\": \"aot_kernel_2\", "
                   "\"work\": 0}]"},
       AOT_ERR_FORMAT, "kernels[2] ('k2'): work is 0, the code was built for 1"},
      {{.kernels = ", \"kernels\": [{\"name\": \"k0\", \"symbol\": \"aot_kernel_1\", \"work\": 148}, "
                   "{\"name\": \"k1\", \"symbol\": \"aot_kernel_0\", \"work\": 148}, " P_K2 "]"},
       AOT_ERR_FORMAT, "kernels[0] ('k0'): its symbol is not the code's kernel 0"},
      {{.kernels = ", \"kernels\": [" P_K0 ", " P_K1 ", {\"name\": \"k2\", \"symbol\": "
                   "\"aot_model_entry\", \"work\": 1}]"},
       AOT_ERR_FORMAT, "kernels[2] ('k2'): its symbol is not the code's kernel 2"},
      {{.cpu_extra = ", \"entry\": \"aot_kernel_0\""}, AOT_ERR_FORMAT,
       "manifest: cpu entry 'aot_kernel_0' is not the code's entry function"},
      {{.cpu_extra = ", \"entry\": \"aot_code_info\""}, AOT_ERR_FORMAT,
       "cpu entry 'aot_code_info' is not the code's entry function"},
      {{.cpu_extra = ", \"code_info\": \"aot_code_info_nope\""}, AOT_ERR_UNSUPPORTED,
       "code: no 'aot_code_info_nope' table of what it was built for"},
      {{.cpu_extra = ", \"code_info\": \"aot_kernel_0\""}, AOT_ERR_FORMAT,
       "code: 'aot_kernel_0' is not a code description"},
      {{.cpu_extra = ", \"code_info\": \"aot_code_info_inc\""}, AOT_ERR_FORMAT,
       "the kernel count is 3, the code was built for 5"},
      /* checks the code has not, and the code's checks left out */
      {{.extra = CHECK_MESSAGES}, AOT_ERR_FORMAT,
       "the check count is 2, the code was built for 0"},
      {{.cpu_extra = ", \"code_info\": \"aot_code_info_checked\""}, AOT_ERR_FORMAT,
       "the check count is 0, the code was built for 2"},
      {{.cpu_extra = ", \"checks\": \"aot_model_checks_broken\", \"code_info\": "
                     "\"aot_code_info_checked\"", .extra = CHECK_MESSAGES},
       AOT_ERR_FORMAT, "the cpu entry's checks function is not the code's"},
  };
  size_t size;
  parts_t plain = {0};
  uint8_t* built = build_parts(&plain, g_w, sizeof g_w, &size);
  aot_model_t* m = open_built(built, size); /* the model as built opens */
  aot_model_close(m);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t* art = build_parts(&cases[i].p, g_w, sizeof g_w, &size);
    expect_open_error(art, size, cases[i].code, cases[i].needle, cases[i].needle);
    free(art);
  }
  /* weights that agree with their section but not with the code */
  parts_t fewer = {.weights = ", \"weights\": {\"section\": \"weights\", \"bytes\": 144}"};
  uint8_t* art = build_parts(&fewer, g_w, 144, &size);
  expect_open_error(art, size, AOT_ERR_FORMAT, "weights.bytes is 144, the code was built for 148",
                    "fewer weights");
  free(art);
}

/* testmodel.c's donated model (y takes over x's buffer, y = 2x in place, s = sum(y)), with
 * `extra` top-level members (NULL: its donation) and `info` its code description. */
#define DONATED_KERNELS                                                                         \
  ", \"kernels\": [{\"name\": \"double\", \"symbol\": \"aot_kernel_donated\", \"work\": 148}, " P_K2 "]"
#define DONATION ", \"donations\": [{\"input\": 0, \"output\": 0}]"

static uint8_t* build_donated(const char* info, const char* extra, size_t* out_size) {
  char cpu_extra[160];
  snprintf(cpu_extra, sizeof cpu_extra, ", \"entry\": \"aot_model_entry_donated\", \"code_info\": \"%s\"",
           info);
  parts_t p = {.cpu_extra = cpu_extra, .kernels = DONATED_KERNELS, .extra = extra ? extra : DONATION};
  return build_parts(&p, g_w, sizeof g_w, out_size);
}

static aot_status_t run_donated(aot_context_t* ctx, const float* x, float* y, float* s, aot_error_t* err) {
  int64_t shape[2] = {4, 37};
  aot_tensor_t in = {AOT_DTYPE_FLOAT32, 2, shape, (void*)x, sizeof(float) * N};
  aot_tensor_t out[2] = {{AOT_DTYPE_FLOAT32, 2, shape, y, sizeof(float) * N},
                         {AOT_DTYPE_FLOAT32, 0, NULL, s, sizeof(float)}};
  return aot_run(ctx, &in, 1, out, 2, err);
}

/* y = 2x and s = sum(y) for input x0 */
static int doubled(const float* x0, const float* y, float s) {
  float sum = 0.0f;
  for (int i = 0; i < N; i++) {
    if (y[i] != 2.0f * x0[i]) return 0;
    sum += 2.0f * x0[i];
  }
  return s == sum;
}

/* Buffer donation: one buffer for x and y is updated in place, two get x copied into y first
 * (x left as it was); any other overlap is refused; the manifest's pairs must be the code's. */
static void test_donation(void) {
  size_t size;
  uint8_t* built = build_donated("aot_code_info_donated", NULL, &size);
  aot_model_t* m = open_built(built, size);
  if (!m) return;
  uint32_t in = 9, out = 9;
  aot_error_t err;
  CHECK(aot_model_donation_count(m) == 1, "donation count");
  CHECK(aot_model_donation(m, 0, &in, &out, &err) == AOT_OK && in == 0 && out == 0, "pair 0: %u %u", in, out);
  CHECK(aot_model_donation(m, 1, &in, &out, &err) == AOT_ERR_INVALID_ARGUMENT &&
            strstr(err.message, "donation index 1 out of range"), "pair 1: %s", err.message);
  CHECK(aot_model_donation(m, 0, NULL, &out, &err) == AOT_ERR_INVALID_ARGUMENT, "NULL out_input");
  for (uint32_t threads = 1; threads <= 3; threads += 2) {
    aot_context_options_t opts = {sizeof opts, threads, AOT_DEVICE_CPU, 0, 0, 0};
    aot_context_t* ctx = NULL;
    CHECK(aot_context_create(m, &opts, &ctx, &err) == AOT_OK, "context: %s", err.message);
    float x0[N], x[N], y[N + 1], s = 0.0f;
    fill_input(x0, (int)threads);
    memcpy(x, x0, sizeof x);
    memset(y, 0xCD, sizeof y);
    CHECK(run_donated(ctx, x, y, &s, &err) == AOT_OK, "two buffers: %s", err.message);
    CHECK(doubled(x0, y, s) && memcmp(x, x0, sizeof x) == 0, "two buffers (%u threads): y = 2x, x kept", threads);
    for (int step = 1; step <= 3; step++) { /* a decode loop: one buffer, doubled in place each step */
      CHECK(run_donated(ctx, x, x, &s, &err) == AOT_OK, "one buffer: %s", err.message);
      for (int i = 0; i < N; i++) x0[i] *= 2.0f;
      CHECK(memcmp(x, x0, sizeof x) == 0, "one buffer (%u threads), step %d: x doubled in place", threads, step);
    }
    memcpy(y, x, sizeof x);
    CHECK(run_donated(ctx, y, y + 1, &s, &err) == AOT_ERR_INVALID_ARGUMENT &&
              strstr(err.message, "output 'y' overlaps its donated input 'x' without being the same buffer"),
          "y one float past x: %s", err.message);
    CHECK(run_donated(ctx, x, y, &x[3], &err) == AOT_ERR_INVALID_ARGUMENT &&
              strstr(err.message, "output 's' overlaps input 'x' (only a donated input may share"),
          "s inside x: %s", err.message);
    CHECK(run_donated(ctx, x, y, &s, &err) == AOT_OK, "apart again: %s", err.message);
    aot_context_destroy(ctx);
  }
  aot_model_close(m);
  /* a model without donations refuses one buffer for an input and an output */
  built = build(ARCH, "aot_kernel_1", 1, &size);
  m = open_built(built, size);
  aot_context_t* ctx = NULL;
  CHECK(m && aot_context_create(m, NULL, &ctx, &err) == AOT_OK, "plain context");
  float x[N], s;
  fill_input(x, 1);
  CHECK(run_once(ctx, x, x, &s, &err) == AOT_ERR_INVALID_ARGUMENT &&
            strstr(err.message, "output 'y' overlaps input 'x'") && !strstr(err.message, "donated"),
        "plain, one buffer: %s", err.message);
  aot_context_destroy(ctx);
  aot_model_close(m);
  static const struct {
    const char* info;
    const char* extra;
    const char* needle;
  } bad[] = {
      {"aot_code_info_donated", "", "manifest: 0 donations, the code was built for 1"},
      {"aot_code_info_donated", ", \"donations\": []", "manifest: 0 donations, the code was built for 1"},
      {"aot_code_info_donated_to_s", DONATION,
       "manifest: donations[0] gives input 0 to output 0, the code was built to give input 0 to output 1"},
      {"aot_code_info_donated", ", \"donations\": {}", "manifest: \"donations\" must be an array"},
      {"aot_code_info_donated", ", \"donations\": [0]", "manifest: donations[0]: must be an object"},
      {"aot_code_info_donated", ", \"donations\": [{\"input\": 0}]", "donations[0]: missing \"output\""},
      {"aot_code_info_donated", ", \"donations\": [{\"input\": 1, \"output\": 0}]",
       "donations[0]: \"input\" must be an integer in [0, 0]"},
      {"aot_code_info_donated", ", \"donations\": [{\"input\": 0, \"output\": 2}]",
       "donations[0]: \"output\" must be an integer in [0, 1]"},
      {"aot_code_info_donated", ", \"donations\": [{\"input\": 0, \"output\": 1}]",
       "donations[0]: input 'x' and output 's' differ in dtype or shape"},
      {"aot_code_info_donated", ", \"donations\": [{\"input\": 0, \"output\": 0}, {\"input\": 0, \"output\": 0}]",
       "manifest: 2 donations for 1 inputs"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint8_t* art = build_donated(bad[i].info, bad[i].extra, &size);
    expect_open_error(art, size, AOT_ERR_FORMAT, bad[i].needle, bad[i].needle);
    free(art);
  }
  /* code without donations (a version 1 table) under a manifest that has one */
  parts_t p = {.extra = DONATION};
  uint8_t* art = build_parts(&p, g_w, sizeof g_w, &size);
  expect_open_error(art, size, AOT_ERR_FORMAT, "manifest: 1 donations, the code was built for 0", "v1 code");
  free(art);
}

/* Decompression bombs and the caller's memory limit: each section's raw size is bounded
 * before anything is allocated for it, so a tiny file cannot take gigabytes or seconds. */
static void test_memory_bounds(const char* dir) {
  size_t size, frame_size;
  /* 1.5 GB of weights in a ~40 KB frame, the size the manifest claims, not the code */
  uint64_t bomb = UINT64_C(1500000000);
  uint8_t* frame = tw_zstd_zeros(bomb, &frame_size);
  CHECK(frame != NULL, "zstd bomb");
  if (!frame) return;
  char manifest[2048];
  snprintf(manifest, sizeof manifest,
           "{" FV ", \"inputs\": " P_INPUTS ", \"outputs\": " P_OUTPUTS P_ARENA
           ", \"weights\": {\"section\": \"weights\", \"bytes\": %llu},\n"
           " \"cpu\": [{\"section\": \"cpu.%s\", \"arch\": \"%s\"}]" P_KERNELS "}",
           (unsigned long long)bomb, ARCH, ARCH);
  tw_section_t secs[2] = {{"weights", frame, frame_size, 2}, {"cpu." ARCH, g_code, g_code_size, 1}};
  uint8_t* art = tw_pack(manifest, secs, 2, &size);
  long before = peak_mib();
  double t0 = now_s();
  expect_open_error(art, size, AOT_ERR_FORMAT, "weights.bytes is 1500000000, the code was built for 148",
                    "weights bomb");
  CHECK(peak_mib() - before < 64 && now_s() - t0 < 1.0,
        "weights bomb (%zu-byte artifact): peak memory +%ld MiB, %.2f s", size, peak_mib() - before,
        now_s() - t0);
  free(art);
  free(frame);

  /* a code section over its bound: refused before it is decoded */
  frame = tw_zstd_zeros((UINT64_C(256) << 20) + 1, &frame_size);
  CHECK(frame != NULL, "zstd code bomb");
  if (frame) {
    snprintf(manifest, sizeof manifest,
             "{" FV ", \"inputs\": " P_INPUTS ", \"outputs\": " P_OUTPUTS P_ARENA P_WEIGHTS
             ", \"cpu\": [{\"section\": \"cpu.%s\", \"arch\": \"%s\"}]" P_KERNELS "}",
             ARCH, ARCH);
    tw_section_t code_bomb[2] = {{"weights", g_w, sizeof g_w, 1}, {"cpu." ARCH, frame, frame_size, 2}};
    art = tw_pack(manifest, code_bomb, 2, &size);
    before = peak_mib();
    expect_open_error(art, size, AOT_ERR_FORMAT,
                      "section 'cpu." ARCH "': raw size 268435457 is over the 268435456 bytes a code "
                      "section may have", "code bomb");
    CHECK(peak_mib() - before < 64, "code bomb: peak memory +%ld MiB", peak_mib() - before);
    free(art);
    free(frame);
  }

  /* a manifest over 16 MiB: refused before it is decoded */
  size_t big = (16u << 20) + 1;
  char* text = malloc(big + 1);
  memset(text, ' ', big);
  memcpy(text, "{" FV "}", strlen("{" FV "}"));
  text[big] = 0;
  art = tw_pack(text, NULL, 0, &size);
  expect_open_error(art, size, AOT_ERR_FORMAT,
                    "section 'manifest': raw size 16777217 is over the 16777216 bytes a manifest may have",
                    "big manifest");
  free(art);
  /* 12 MiB of "0," is 6 million JSON values, 600 MB as a tree: stopped at 128 MiB */
  size_t n = 0;
  n += (size_t)sprintf(text, "{" FV ", \"pad\": [0");
  while (n < (12u << 20)) {
    memcpy(text + n, ",0", 2);
    n += 2;
  }
  memcpy(text + n, "]}", 3);
  art = tw_pack(text, NULL, 0, &size);
  before = peak_mib();
  double t1 = now_s();
  expect_open_error(art, size, AOT_ERR_NO_MEMORY, "section 'manifest': JSON parse tree would exceed 134217728 bytes",
                    "manifest tree bomb");
  /* 128 MiB of tree; ThreadSanitizer's allocator and shadow take about 6x that */
#if defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
  const long tree_peak_mib = 2048;
#else
  const long tree_peak_mib = 512;
#endif
  CHECK(peak_mib() - before < tree_peak_mib && now_s() - t1 < 5.0, "tree bomb: peak memory +%ld MiB, %.2f s",
        peak_mib() - before, now_s() - t1);
  /* the same under a caller's limit of 64 MiB */
  aot_model_options_t limit = {sizeof limit, 0, 64u << 20};
  aot_model_t* m = NULL;
  aot_error_t err;
  aot_status_t st = aot_model_open_memory_with_options(art, size, &limit, &m, &err);
  CHECK(st == AOT_ERR_NO_MEMORY && !m &&
            strstr(err.message, "section 'manifest' (over max_memory_bytes 67108864): JSON parse tree"),
        "%d '%s'", st, err.message);
  free(art);
  free(text);

  /* the caller's limit: every step of an open is counted before it is taken */
  art = build(ARCH, "aot_kernel_1", 1, &size);
  aot_model_options_t opt = {sizeof opt, 0, 0};
  int seen_manifest = 0, seen_code = 0, opened = 0;
  for (uint64_t lim = 1; lim < (1u << 20) && !opened; lim += lim < 4096 ? 255 : 1024) {
    opt.max_memory_bytes = lim;
    m = NULL;
    st = aot_model_open_memory_with_options(art, size, &opt, &m, &err);
    if (st == AOT_OK) {
      opened = 1;
      break;
    }
    CHECK(st == AOT_ERR_NO_MEMORY && !m && strstr(err.message, "max_memory_bytes"), "limit %llu: %d '%s'",
          (unsigned long long)lim, st, err.message);
    seen_manifest |= strstr(err.message, "section 'manifest'") != NULL;
    seen_code |= strstr(err.message, "section 'cpu." ARCH "'") != NULL;
  }
  CHECK(opened && seen_manifest && seen_code, "limits: opened %d, manifest %d, code %d", opened,
        seen_manifest, seen_code);
  aot_context_t* ctx = NULL;
  if (m && aot_context_create(m, NULL, &ctx, &err) == AOT_OK) {
    float x[N], y[N], s;
    fill_input(x, 4);
    CHECK(run_once(ctx, x, y, &s, &err) == AOT_OK && check_result(x, y, s), "run under a limit");
    aot_context_destroy(ctx);
  }
  aot_model_close(m);
  opt.max_memory_bytes = UINT64_C(1) << 40;
  m = NULL;
  CHECK(aot_model_open_memory_with_options(art, size, &opt, &m, &err) == AOT_OK, "%s", err.message);
  aot_model_close(m);
  CHECK(aot_model_open_memory_with_options(art, size, NULL, &m, &err) == AOT_OK, "NULL options");
  aot_model_close(m);
  /* a caller's struct from before max_memory_bytes existed: no limit */
  aot_model_options_t old = {8, 0, 1};
  CHECK(aot_model_open_memory_with_options(art, size, &old, &m, &err) == AOT_OK, "%s", err.message);
  aot_model_close(m);
  aot_model_options_t small = {4, 0, 0};
  m = NULL;
  CHECK(aot_model_open_memory_with_options(art, size, &small, &m, &err) == AOT_ERR_INVALID_ARGUMENT &&
            !m && strstr(err.message, "struct_size 4 is too small"),
        "%s", err.message);
  aot_model_options_t reserved = {sizeof reserved, 1, 0};
  CHECK(aot_model_open_memory_with_options(art, size, &reserved, &m, &err) == AOT_ERR_INVALID_ARGUMENT,
        "%s", err.message);
  /* open_file counts the file's bytes too */
  char path[1024];
  snprintf(path, sizeof path, "%s/test_runtime_limit.aot", dir);
  CHECK(tw_write_file(path, art, size) == 0, "write %s", path);
  opt.max_memory_bytes = size - 1;
  st = aot_model_open_file_with_options(path, &opt, &m, &err);
  CHECK(st == AOT_ERR_NO_MEMORY && strstr(err.message, "the file's bytes") && strstr(err.message, path),
        "%d '%s'", st, err.message);
  opt.max_memory_bytes = 1u << 20;
  CHECK(aot_model_open_file_with_options(path, &opt, &m, &err) == AOT_OK, "%s", err.message);
  aot_model_close(m);
  free(art);
}

/* 40,000 inputs (a 2 MB manifest) are read in well under a second: their names are checked
 * for duplicates by sorting (comparing every pair took 14 s). */
static void test_many_inputs(void) {
  enum { COUNT = 40000 };
  size_t cap = (size_t)COUNT * 64 + 4096;
  char* inputs = malloc(cap);
  for (int dup = 0; dup < 2; dup++) {
    size_t n = 0;
    inputs[n++] = '[';
    for (int i = 0; i < COUNT; i++)
      n += (size_t)snprintf(inputs + n, cap - n, "%s{\"name\": \"in%05d\", \"dtype\": \"float32\", \"shape\": [1]}",
                            i ? ", " : "", dup && i == COUNT - 1 ? 5 : i);
    inputs[n++] = ']';
    inputs[n] = 0;
    /* build_parts' buffer is too small for these: the manifest by hand */
    char* manifest = malloc(n + 2048);
    snprintf(manifest, n + 2048,
             "{" FV ", \"inputs\": %s, \"outputs\": " P_OUTPUTS P_ARENA P_WEIGHTS
             ", \"cpu\": [{\"section\": \"cpu.%s\", \"arch\": \"%s\"}]" P_KERNELS "}",
             inputs, ARCH, ARCH);
    tw_section_t secs[2] = {{"weights", g_w, sizeof g_w, 1}, {"cpu." ARCH, g_code, g_code_size, 1}};
    size_t size;
    uint8_t* art = tw_pack(manifest, secs, 2, &size);
    double t0 = now_s();
    if (dup)
      expect_open_error(art, size, AOT_ERR_FORMAT, "manifest: inputs[39999]: duplicate name 'in00005'",
                        "40,000 inputs, one repeated");
    else
      expect_open_error(art, size, AOT_ERR_FORMAT, "the input count is 40000, the code was built for 1",
                        "40,000 inputs");
    double took = now_s() - t0;
    CHECK(took < 1.0, "40,000 inputs (duplicate: %d): %.2f s", dup, took);
    free(art);
    free(manifest);
  }
  free(inputs);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TESTMODEL_SO BUILD_DIR\n", argv[0]);
    return 2;
  }
  alarm(300); /* a pool that loses a chunk waits forever: fail instead of hanging */
  g_code = tw_read_file(argv[1], &g_code_size);
  if (!g_code) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  for (int i = 0; i < C; i++) g_w[i] = 0.5f + (float)i * 0.25f;
  CHECK(aot_abi_version() == AOT_ABI_VERSION, "abi");
  CHECK(strcmp(aot_status_string(AOT_ERR_CHECKSUM), "checksum mismatch") == 0, "status string");
  CHECK(aot_dtype_size(AOT_DTYPE_BOOL) == 1 && aot_dtype_size(AOT_DTYPE_BFLOAT16) == 2, "sizes");

  test_memory_bounds(argv[2]); /* first: it measures the peak memory an open adds */
  size_t size;
  uint8_t* art = build(ARCH, "aot_kernel_1", 1, &size);
  test_basic(art, size);
  test_concurrent(art, size);
  test_two_models(art, size);
  test_damage(art, size);
  test_file(art, size, argv[2]);
  free(art);
  art = build(ARCH, "aot_kernel_1", 0, &size); /* uncompressed code section */
  test_basic(art, size);
  free(art);
  test_manifest_errors();
  test_checks();
  test_costs();
  test_split_stress();
  test_zero_work();
  test_cpu_features();
  art = build(ARCH, "aot_kernel_1", 1, &size);
  test_bogus_rank_report(art, size);
  test_use_after_destroy(art, size);
  free(art);
  test_manifest_against_code();
  test_donation();
  test_many_inputs();
  free(g_code);
  printf("test_runtime: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
