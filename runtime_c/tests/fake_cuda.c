/* fake_cuda.c - a test stand-in for libcuda.so.1: every entry point of src/cuda_api.h
 * (AOT__CUDA_FUNCTIONS and the v1 fallbacks), implemented on the CPU, so the runtime's CUDA
 * path runs end to end on a machine without a GPU. Built as $(BUILD_DIR)/fake_cuda/libcuda.so.1
 * (make fake-cuda); the runtime opens it when AOT_CUDA_DRIVER names it.
 *
 * It is strict: it exists to catch the runtime's mistakes. Every call checks what the real
 * driver checks and a little more (a current context for everything that needs one, handles
 * that are alive and of the current device, copies inside one allocation, launches whose
 * dimensions are the kernel's own and whose arguments point into live allocations of the
 * device), and answers with the driver's CUresult codes. Memory is host memory, filled with
 * 0xCD when allocated, as device memory holds no zeros either. Copies and launches run at
 * once, on the calling thread.
 *
 * Kernels: a module image (PTX text or cubin) is not compiled; the stand-in hashes it
 * (fake_cuda.h: the module key) and dlopens AOT_FAKE_CUDA_HOST_DIR/<key>.so, a library of
 * the same kernels built for the host (aot/codegen/nvptx/host_library.py), whose table
 * gives each kernel's launch dimensions and a function that runs all its blocks.
 *
 * Settings, read from the environment at every call that uses them (the runtime loads the
 * stand-in once per process and tests change them between runs):
 *   AOT_FAKE_CUDA_DEVICES   number of devices, 0..16 (default 1)
 *   AOT_FAKE_CUDA_SM        compute capability as digits, "90" (default), "86", "100"
 *   AOT_FAKE_CUDA_MEMORY    each device's memory in bytes (default 80 GiB); counted, not reserved
 *   AOT_FAKE_CUDA_HOST_DIR  where the host-code libraries are
 *   AOT_FAKE_CUDA_FAIL      "cuSymbol:N=CODE,...": the N-th call (1-based; "*" every call) of
 *                           that entry point returns CODE (a number or a driver name such as
 *                           CUDA_ERROR_LAUNCH_FAILED) and does nothing else; calls are counted
 *                           from when the value last changed (or aot_fake_cuda_reset_faults);
 *                           a launch failing with a sticky code (700, 710, 714-719) breaks
 *                           the context as a real fault does
 *   AOT_FAKE_CUDA_VERBOSE   set (not "0"): every rejection is explained on stderr
 *
 * Contexts: one primary context per device, reference counted; its last release destroys
 * it with everything made in it (counted as leaks, "destroyed_with_context"), and the next
 * retain makes a fresh one. A sticky error (an argument outside every allocation, an
 * injected launch failure) makes every later call on the context fail with it, but the
 * calls that release things (cuMemFree_v2, cuModuleUnload, cuStreamDestroy_v2,
 * cuGraphDestroy, cuGraphExecDestroy), which still work and succeed.
 *
 * Thread-safe: one mutex around all state; kernels run under it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_* in dlfcn.h, strdup, mincore */
#endif
#include <ctype.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_api.h"
#include "fake_cuda.h"

#define API __attribute__((visibility("default")))

/* driver result codes, short names */
#define FAKE_SUCCESS AOT__CUDA_SUCCESS
#define FAKE_INVALID_VALUE AOT__CUDA_ERROR_INVALID_VALUE
#define FAKE_OUT_OF_MEMORY AOT__CUDA_ERROR_OUT_OF_MEMORY
#define FAKE_NOT_INITIALIZED AOT__CUDA_ERROR_NOT_INITIALIZED
#define FAKE_INVALID_DEVICE AOT__CUDA_ERROR_INVALID_DEVICE
#define FAKE_INVALID_IMAGE AOT__CUDA_ERROR_INVALID_IMAGE
#define FAKE_INVALID_CONTEXT AOT__CUDA_ERROR_INVALID_CONTEXT
#define FAKE_NO_BINARY_FOR_GPU AOT__CUDA_ERROR_NO_BINARY_FOR_GPU
#define FAKE_INVALID_PTX AOT__CUDA_ERROR_INVALID_PTX
#define FAKE_INVALID_HANDLE AOT_FAKE_CUDA_ERROR_INVALID_HANDLE
#define FAKE_NOT_FOUND AOT__CUDA_ERROR_NOT_FOUND
#define FAKE_ILLEGAL_ADDRESS AOT__CUDA_ERROR_ILLEGAL_ADDRESS
#define FAKE_MISALIGNED_ADDRESS AOT_FAKE_CUDA_ERROR_MISALIGNED_ADDRESS

#define MAX_DEVICES 16
#define MAX_STACK 64    /* contexts pushed on one thread */
#define MAX_FAULTS 32   /* rules in AOT_FAKE_CUDA_FAIL */
#define SM_COUNT 132
#define SHARED_DEFAULT 49152u   /* dynamic shared memory a launch gets without opting in */
#define SHARED_OPTIN 232448     /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
#define ALLOC_ALIGN 256
#define BUFFER_ALIGN 16         /* every kernel buffer address (kernel.py BUFFER_ALIGNMENT) */
#define CHECKS_SYMBOL "aot_model_checks"  /* whose buffers are at their bases, any alignment */
#define DEFAULT_MEMORY (80ull << 30)
#define MAX_IMAGE (1ull << 30)  /* a larger ELF size is a damaged header */
#define EM_CUDA 190
#define STO_CUDA_ENTRY 0x10

/* ---- entry points: ids, names, and a compile-time check of their types ---------------- */

#define FAKE_ID(member, symbol, ret, params) FAKE_ID_##member,
enum {
  AOT__CUDA_FUNCTIONS(FAKE_ID) FAKE_ID_graph_add_kernel_node_v1,
  FAKE_ID_graph_exec_kernel_node_set_params_v1,
  FAKE_ID_COUNT
};
#define FAKE_NAME(member, symbol, ret, params) symbol,
static const char* const ENTRY_NAMES[FAKE_ID_COUNT] = {
    AOT__CUDA_FUNCTIONS(FAKE_NAME) "cuGraphAddKernelNode", "cuGraphExecKernelNodeSetParams"};

static const struct {
  CUresult code;
  const char* name;
  const char* text;
} ERRORS[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {717, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
     "operation not supported on global/shared address space"},
    {718, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* the errors after which a real context is unusable */
static bool is_sticky(CUresult code) {
  return code == 700 || code == 710 || (code >= 714 && code <= 719);
}

static const char* error_name(CUresult code) {
  for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
    if (ERRORS[i].code == code) return ERRORS[i].name;
  return NULL;
}

/* ---- state -------------------------------------------------------------------------- */

struct CUctx_st {
  int device;
  int refcount; /* 0: released (destroyed) */
  CUresult sticky;
  uint64_t used;
};

typedef struct fake_alloc {
  uint64_t base;
  size_t size;
  struct CUctx_st* ctx;
} fake_alloc_t;

struct CUfunc_st {
  struct CUfunc_st* next;
  struct CUmod_st* module;
  const aot_fake_kernel_record_t* record;
  unsigned max_dynamic_shared;
  uint64_t serial; /* tells a live function from a freed one at the same address */
};

struct CUmod_st {
  struct CUmod_st* next;
  struct CUctx_st* ctx;
  void* library;
  const aot_fake_kernel_record_t* table;
  uint32_t table_count;
  char* image; /* a copy; PTX text NUL-terminated */
  size_t image_size;
  bool ptx;
  struct CUfunc_st* functions;
};

struct CUstream_st {
  struct CUstream_st* next;
  struct CUctx_st* ctx;
};

/* one kernel launch as a graph holds it: the argument values are copied */
typedef struct fake_launch {
  struct CUfunc_st* function;
  uint64_t serial;
  unsigned grid[3], block[3], shared;
  uint64_t* values;
  uint32_t count;
} fake_launch_t;

struct CUgraphNode_st {
  struct CUgraph_st* graph;
  fake_launch_t launch;
};

struct CUgraph_st {
  struct CUgraph_st* next;
  struct CUctx_st* ctx;
  CUgraphNode* nodes;
  size_t count, capacity;
};

struct CUgraphExec_st {
  struct CUgraphExec_st* next;
  struct CUctx_st* ctx;
  CUgraphNode* nodes; /* the source graph's node handles, for SetParams */
  fake_launch_t* launches;
  size_t count;
};

typedef struct fake_rule {
  int id;
  uint64_t nth; /* 0: every call */
  CUresult code;
} fake_rule_t;

static struct {
  pthread_mutex_t mutex;
  bool initialized;
  struct CUctx_st contexts[MAX_DEVICES];
  fake_alloc_t* allocs;
  size_t alloc_count, alloc_capacity;
  struct CUmod_st* modules;
  struct CUstream_st* streams;
  struct CUgraph_st* graphs;
  struct CUgraphExec_st* execs;
  uint64_t serial;
  uint64_t calls[FAKE_ID_COUNT];
  uint64_t kernel_runs;
  uint64_t destroyed_with_context;
  char* fault_spec; /* the AOT_FAKE_CUDA_FAIL value the rules were parsed from */
  fake_rule_t rules[MAX_FAULTS];
  int rule_count;
  uint64_t fault_calls[FAKE_ID_COUNT];
  char last_rejection[1024];
} g = {.mutex = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local struct CUctx_st* t_stack[MAX_STACK];
static _Thread_local int t_depth;
static _Thread_local int t_entry; /* the entry point running, for messages */

/* ---- settings ------------------------------------------------------------------------ */

static bool verbose(void) {
  const char* v = getenv("AOT_FAKE_CUDA_VERBOSE");
  return v && *v && strcmp(v, "0") != 0;
}

/* a non-negative decimal setting, `fallback` when unset; a malformed one is said on stderr */
static uint64_t setting(const char* name, uint64_t fallback, uint64_t max) {
  const char* text = getenv(name);
  if (!text || !*text) return fallback;
  char* end = NULL;
  unsigned long long value = strtoull(text, &end, 10);
  if (*end || !isdigit((unsigned char)text[0]) || value > max) {
    fprintf(stderr, "aot fake driver: %s=%s is not a number in [0, %" PRIu64 "]; using %" PRIu64 "\n",
            name, text, max, fallback);
    return fallback;
  }
  return value;
}

static int device_count(void) { return (int)setting("AOT_FAKE_CUDA_DEVICES", 1, MAX_DEVICES); }

static int device_sm(void) { /* major * 10 + minor */
  int sm = (int)setting("AOT_FAKE_CUDA_SM", 90, 199);
  if (sm >= 10) return sm;
  fprintf(stderr, "aot fake driver: AOT_FAKE_CUDA_SM=%d is no compute capability; using 90\n", sm);
  return 90;
}

static uint64_t device_memory(void) {
  return setting("AOT_FAKE_CUDA_MEMORY", DEFAULT_MEMORY, UINT64_MAX / 2);
}

/* ---- rejections ---------------------------------------------------------------------- */

/* record why a call fails (and say it on stderr when verbose); returns `code` */
__attribute__((format(printf, 2, 3))) static CUresult reject(CUresult code, const char* format, ...) {
  int used = snprintf(g.last_rejection, sizeof g.last_rejection, "%s: ", ENTRY_NAMES[t_entry]);
  va_list args;
  va_start(args, format);
  vsnprintf(g.last_rejection + used, sizeof g.last_rejection - (size_t)used, format, args);
  va_end(args);
  if (verbose()) {
    const char* name = error_name(code);
    fprintf(stderr, "aot fake driver: %s (%s)\n", g.last_rejection, name ? name : "?");
  }
  return code;
}

/* ---- failure injection --------------------------------------------------------------- */

static bool parse_code(const char* text, size_t length, CUresult* out) {
  for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
    if (strlen(ERRORS[i].name) == length && strncmp(ERRORS[i].name, text, length) == 0) {
      *out = ERRORS[i].code;
      return true;
    }
  if (length == 0 || length > 9) return false;
  CUresult value = 0;
  for (size_t i = 0; i < length; i++) {
    if (!isdigit((unsigned char)text[i])) return false;
    value = value * 10 + (text[i] - '0');
  }
  *out = value;
  return true;
}

/* one "cuSymbol:N=CODE" rule of `length` bytes */
static bool parse_rule(const char* text, size_t length, fake_rule_t* rule) {
  const char* colon = memchr(text, ':', length);
  const char* equals = memchr(text, '=', length);
  if (!colon || !equals || equals < colon) return false;
  size_t name_length = (size_t)(colon - text);
  rule->id = -1;
  for (int id = 0; id < FAKE_ID_COUNT; id++)
    if (strlen(ENTRY_NAMES[id]) == name_length && strncmp(ENTRY_NAMES[id], text, name_length) == 0)
      rule->id = id;
  if (rule->id < 0) return false;
  const char* nth = colon + 1;
  size_t nth_length = (size_t)(equals - nth);
  if (nth_length == 1 && *nth == '*') {
    rule->nth = 0;
  } else {
    if (nth_length == 0 || nth_length > 18) return false;
    rule->nth = 0;
    for (size_t i = 0; i < nth_length; i++) {
      if (!isdigit((unsigned char)nth[i])) return false;
      rule->nth = rule->nth * 10 + (uint64_t)(nth[i] - '0');
    }
    if (rule->nth == 0) return false;
  }
  const char* code = equals + 1;
  return parse_code(code, (size_t)(text + length - code), &rule->code) && rule->code != 0;
}

/* (re)read AOT_FAKE_CUDA_FAIL when its value changed; the call counts restart then */
static void refresh_faults(void) {
  const char* spec = getenv("AOT_FAKE_CUDA_FAIL");
  if (!spec) spec = "";
  if (g.fault_spec && strcmp(g.fault_spec, spec) == 0) return;
  free(g.fault_spec);
  g.fault_spec = strdup(spec);
  g.rule_count = 0;
  memset(g.fault_calls, 0, sizeof g.fault_calls);
  for (const char* p = spec; *p;) {
    size_t length = strcspn(p, ",");
    fake_rule_t rule;
    if (length && g.rule_count < MAX_FAULTS && parse_rule(p, length, &rule))
      g.rules[g.rule_count++] = rule;
    else if (length)
      fprintf(stderr, "aot fake driver: AOT_FAKE_CUDA_FAIL rule '%.*s' is not cuSymbol:N=CODE "
                      "(N a count from 1 or *, CODE a nonzero number or CUDA_ERROR_ name; at most %d "
                      "rules); ignored\n", (int)length, p, MAX_FAULTS);
    p += length;
    if (*p == ',') p++;
  }
}

static struct CUctx_st* current_context(void) {
  struct CUctx_st* ctx = t_depth ? t_stack[t_depth - 1] : NULL;
  return ctx && ctx->refcount > 0 ? ctx : NULL;
}

/* count the call; true (with the code) when a rule says this call fails */
static bool injected(int id, CUresult* out) {
  g.calls[id]++;
  refresh_faults();
  if (!g.rule_count) return false;
  uint64_t nth = ++g.fault_calls[id];
  for (int i = 0; i < g.rule_count; i++) {
    const fake_rule_t* rule = &g.rules[i];
    if (rule->id != id || (rule->nth && rule->nth != nth)) continue;
    *out = reject(rule->code, "failure injected by AOT_FAKE_CUDA_FAIL (call %" PRIu64 ")", nth);
    struct CUctx_st* ctx = current_context();
    if ((id == FAKE_ID_launch_kernel || id == FAKE_ID_graph_launch) && is_sticky(rule->code) && ctx)
      ctx->sticky = rule->code;
    return true;
  }
  return false;
}

#define FAKE_ENTRY(member, call)                    \
  {                                                 \
    CUresult result_;                               \
    pthread_mutex_lock(&g.mutex);                   \
    t_entry = FAKE_ID_##member;                     \
    if (!injected(FAKE_ID_##member, &result_)) {    \
      result_ = (call);                             \
    }                                               \
    pthread_mutex_unlock(&g.mutex);                 \
    return result_;                                 \
  }

/* ---- contexts ------------------------------------------------------------------------ */

static CUresult initialized(void) {
  return g.initialized ? FAKE_SUCCESS : reject(FAKE_NOT_INITIALIZED, "cuInit was not called");
}

/* the calling thread's current context, usable (`sticky_ok`: one holding a sticky error too) */
static CUresult need_context(struct CUctx_st** out, bool sticky_ok) {
  CUresult r = initialized();
  if (r) return r;
  struct CUctx_st* ctx = current_context();
  if (!ctx)
    return reject(FAKE_INVALID_CONTEXT, t_depth ? "the current context was released"
                                                : "no context is current on this thread (push one)");
  if (ctx->sticky && !sticky_ok)
    return reject(ctx->sticky, "device %d's context is broken by an earlier error", ctx->device);
  *out = ctx;
  return FAKE_SUCCESS;
}

static CUresult need_device(CUdevice device) {
  CUresult r = initialized();
  if (r) return r;
  int count = device_count();
  if (device < 0 || device >= count)
    return reject(FAKE_INVALID_DEVICE, "device %d of %d", (int)device, count);
  return FAKE_SUCCESS;
}

/* a kernel's buffer breaks the context: a fault, as on the device */
__attribute__((format(printf, 3, 4))) static CUresult fault(struct CUctx_st* ctx, CUresult code,
                                                            const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  ctx->sticky = code;
  return reject(code, "%s; device %d's context is now broken", text, ctx->device);
}

/* ---- memory -------------------------------------------------------------------------- */

/* the allocation of `ctx`'s device holding [address, address + bytes]; its end counts as in it */
static fake_alloc_t* find_range(const struct CUctx_st* ctx, uint64_t address, uint64_t bytes) {
  for (size_t i = 0; i < g.alloc_count; i++) {
    fake_alloc_t* a = &g.allocs[i];
    if (a->ctx == ctx && address >= a->base && address - a->base <= a->size &&
        bytes <= a->size - (address - a->base))
      return a;
  }
  return NULL;
}

static void free_alloc(size_t index) {
  fake_alloc_t* a = &g.allocs[index];
  a->ctx->used -= a->size;
  free((void*)(uintptr_t)a->base);
  g.allocs[index] = g.allocs[--g.alloc_count];
}

static CUresult mem_alloc(CUdeviceptr* address, size_t bytes) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  if (!address) return reject(FAKE_INVALID_VALUE, "address is NULL");
  if (bytes == 0) return reject(FAKE_INVALID_VALUE, "0 bytes (the driver refuses them)");
  uint64_t total = device_memory();
  if (bytes > total || ctx->used > total - bytes)
    return reject(FAKE_OUT_OF_MEMORY, "%zu bytes with %" PRIu64 " of %" PRIu64 " in use", bytes,
                  ctx->used, total);
  if (g.alloc_count == g.alloc_capacity) {
    size_t capacity = g.alloc_capacity ? 2 * g.alloc_capacity : 64;
    fake_alloc_t* grown = realloc(g.allocs, capacity * sizeof *grown);
    if (!grown) return reject(FAKE_OUT_OF_MEMORY, "host memory for the allocation table");
    g.allocs = grown;
    g.alloc_capacity = capacity;
  }
  /* a guard after the end: an allocation's end address (valid as an argument) is never
     the base of another allocation, live or freed */
  size_t rounded = (bytes + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN + ALLOC_ALIGN;
  if (rounded < bytes) return reject(FAKE_OUT_OF_MEMORY, "%zu bytes", bytes);
  void* memory = NULL;
  if (posix_memalign(&memory, ALLOC_ALIGN, rounded) != 0)
    return reject(FAKE_OUT_OF_MEMORY, "host memory for %zu bytes", bytes);
  memset(memory, 0xCD, rounded); /* device memory is not zeroed */
  g.allocs[g.alloc_count++] = (fake_alloc_t){(uint64_t)(uintptr_t)memory, bytes, ctx};
  ctx->used += bytes;
  *address = (uint64_t)(uintptr_t)memory;
  return FAKE_SUCCESS;
}

static CUresult mem_free(CUdeviceptr address) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, true);
  if (r) return r;
  for (size_t i = 0; i < g.alloc_count; i++)
    if (g.allocs[i].base == address) {
      free_alloc(i);
      return FAKE_SUCCESS;
    }
  return reject(FAKE_INVALID_VALUE, "0x%" PRIx64 " is no live allocation", address);
}

static CUresult mem_get_info(size_t* free_bytes, size_t* total_bytes) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  if (!free_bytes || !total_bytes) return reject(FAKE_INVALID_VALUE, "a NULL out-parameter");
  uint64_t total = device_memory();
  *total_bytes = total;
  *free_bytes = total > ctx->used ? total - ctx->used : 0;
  return FAKE_SUCCESS;
}

static struct CUstream_st* find_stream(CUstream stream) {
  for (struct CUstream_st* s = g.streams; s; s = s->next)
    if (s == stream) return s;
  return NULL;
}

/* NULL or CU_STREAM_LEGACY (0x1): the legacy default stream; CU_STREAM_PER_THREAD (0x2): the
 * per-thread default stream; else a live stream of `ctx` */
static CUresult check_stream(const struct CUctx_st* ctx, CUstream stream) {
  if ((uintptr_t)stream <= 2) return FAKE_SUCCESS;
  struct CUstream_st* s = find_stream(stream);
  if (!s) return reject(FAKE_INVALID_HANDLE, "stream %p is not alive", (void*)stream);
  if (s->ctx != ctx)
    return reject(FAKE_INVALID_VALUE, "stream of device %d used in device %d's context", s->ctx->device,
                  ctx->device);
  return FAKE_SUCCESS;
}

static CUresult memcpy_checked(void* host, CUdeviceptr device, size_t bytes, CUstream stream, bool to_device) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  if ((r = check_stream(ctx, stream))) return r;
  if (!host && bytes) return reject(FAKE_INVALID_VALUE, "the host pointer is NULL");
  if (!find_range(ctx, device, bytes))
    return reject(FAKE_INVALID_VALUE, "[0x%" PRIx64 ", +%zu) is not inside one allocation of device %d", device,
                  bytes, ctx->device);
  if (bytes) {
    if (to_device)
      memcpy((void*)(uintptr_t)device, host, bytes);
    else
      memcpy(host, (const void*)(uintptr_t)device, bytes);
  }
  return FAKE_SUCCESS;
}

/* both ranges inside allocations of the current device, and apart (the driver's copies
 * between overlapping ranges are undefined) */
static CUresult memcpy_device(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  if ((r = check_stream(ctx, stream))) return r;
  if (!find_range(ctx, dst, bytes) || !find_range(ctx, src, bytes))
    return reject(FAKE_INVALID_VALUE, "[0x%" PRIx64 ", +%zu) or [0x%" PRIx64 ", +%zu) is not inside one "
                  "allocation of device %d", dst, bytes, src, bytes, ctx->device);
  if (bytes && dst < src + bytes && src < dst + bytes)
    return reject(FAKE_INVALID_VALUE, "[0x%" PRIx64 ", +%zu) and [0x%" PRIx64 ", +%zu) overlap", dst, bytes,
                  src, bytes);
  if (bytes) memcpy((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, bytes);
  return FAKE_SUCCESS;
}

static CUresult pointer_get_attribute(void* value, int attribute, CUdeviceptr address) {
  CUresult r = initialized();
  if (r) return r;
  if (!value) return reject(FAKE_INVALID_VALUE, "value is NULL");
  if (attribute != AOT__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
    return reject(FAKE_INVALID_VALUE, "pointer attribute %d is not modelled", attribute);
  for (size_t i = 0; i < g.alloc_count; i++)
    if (address >= g.allocs[i].base && address - g.allocs[i].base < g.allocs[i].size) {
      *(int*)value = g.allocs[i].ctx->device;
      return FAKE_SUCCESS;
    }
  return reject(FAKE_INVALID_VALUE, "0x%" PRIx64 " is in no allocation", address);
}

/* ---- modules ------------------------------------------------------------------------- */

static const char* skip_space_and_comments(const char* p) {
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (p[0] == '/' && p[1] == '/') {
      p += strcspn(p, "\n");
    } else if (p[0] == '/' && p[1] == '*') {
      const char* end = strstr(p + 2, "*/");
      if (!end) return p + strlen(p);
      p = end + 2;
    } else {
      return p;
    }
  }
}

static uint16_t u16(const unsigned char* p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const unsigned char* p) { return (uint32_t)u16(p) | (uint32_t)u16(p + 2) << 16; }
static uint64_t u64(const unsigned char* p) { return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32; }

/* whether [p, p + n) is mapped memory: the driver gets a cubin without its size and reads
 * the ELF headers where they say, and a damaged header must be an error, not a crash */
static bool readable(const void* p, uint64_t n) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)p & ~(page - 1);
  uintptr_t end = (uintptr_t)p + (uintptr_t)n;
  if (end < (uintptr_t)p) return false;
  unsigned char* pages = malloc((end - start) / page + 2);
  bool mapped = pages && mincore((void*)start, end - start, pages) == 0;
  free(pages);
  return mapped;
}

/* The size of an ELF64 cubin, which the driver gets without one: the furthest of its
 * header tables and the sections and segments they describe (ptxas 13 writes the program
 * headers after the section headers). 0: not a CUDA ELF64 or a damaged header. */
static uint64_t elf_size(const unsigned char* e) {
  if (!readable(e, 64) || e[4] != 2 || e[5] != 1 || u16(e + 18) != EM_CUDA) return 0;
  uint64_t phoff = u64(e + 32), shoff = u64(e + 40);
  uint64_t phentsize = u16(e + 54), phnum = u16(e + 56), shentsize = u16(e + 58), shnum = u16(e + 60);
  if (phoff > MAX_IMAGE || shoff > MAX_IMAGE || (phnum && phentsize < 56) || (shnum && shentsize < 64))
    return 0;
  if (!readable(e + shoff, shnum * shentsize) || !readable(e + phoff, phnum * phentsize)) return 0;
  uint64_t size = 64;
  if (shoff + shnum * shentsize > size) size = shoff + shnum * shentsize;
  if (phoff + phnum * phentsize > size) size = phoff + phnum * phentsize;
  for (uint64_t i = 0; i < shnum; i++) {
    const unsigned char* s = e + shoff + i * shentsize;
    uint64_t offset = u64(s + 24), bytes = u64(s + 32);
    if (u32(s + 4) == 8 /* SHT_NOBITS */ || u32(s + 4) == 0) continue;
    if (offset > MAX_IMAGE || bytes > MAX_IMAGE) return 0;
    if (offset + bytes > size) size = offset + bytes;
  }
  for (uint64_t i = 0; i < phnum; i++) {
    const unsigned char* p = e + phoff + i * phentsize;
    uint64_t offset = u64(p + 8), bytes = u64(p + 32);
    if (offset > MAX_IMAGE || bytes > MAX_IMAGE) return 0;
    if (offset + bytes > size) size = offset + bytes;
  }
  return readable(e, size) ? size : 0;
}

/* the SM a cubin is for: EF_CUDA_SM, in bits 8..15 from ELF ABI version 7 (CUDA 12) on */
static int elf_sm(const unsigned char* e) {
  uint32_t flags = u32(e + 48);
  return e[8] >= 7 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
}

/* the ".target sm_XY" of a PTX text (XY as a number), -1 without one */
static int ptx_target(const char* text) {
  for (const char* p = strstr(text, ".target"); p; p = strstr(p + 1, ".target")) {
    const char* q = p + 7;
    while (*q == ' ' || *q == '\t') q++;
    if (strncmp(q, "sm_", 3) != 0 || !isdigit((unsigned char)q[3])) continue;
    return atoi(q + 3);
  }
  return -1;
}

/* the parameter list of ".entry <name>(" in a PTX text, NULL when no such entry */
static const char* ptx_entry(const char* text, const char* name) {
  size_t length = strlen(name);
  for (const char* p = strstr(text, ".entry"); p; p = strstr(p + 1, ".entry")) {
    const char* q = p + 6;
    if (!isspace((unsigned char)*q)) continue;
    while (isspace((unsigned char)*q)) q++;
    if (strncmp(q, name, length) != 0) continue;
    q += length;
    while (isspace((unsigned char)*q)) q++;
    if (*q == '(') return q;
  }
  return NULL;
}

static uint32_t ptx_param_count(const char* list) {
  const char* end = strchr(list, ')');
  uint32_t count = 0;
  for (const char* p = strstr(list, ".param"); p && end && p < end; p = strstr(p + 1, ".param")) count++;
  return count;
}

/* whether a cubin's symbol table has a kernel (an entry function) of this name */
static bool elf_has_kernel(const unsigned char* e, uint64_t size, const char* name) {
  uint64_t shoff = u64(e + 40), shentsize = u16(e + 58), shnum = u16(e + 60);
  for (uint64_t i = 0; i < shnum; i++) {
    const unsigned char* s = e + shoff + i * shentsize;
    if (u32(s + 4) != 2 /* SHT_SYMTAB */) continue;
    uint64_t offset = u64(s + 24), bytes = u64(s + 32), entsize = u64(s + 56), link = u32(s + 40);
    if (link >= shnum || entsize < 24 || offset > size || bytes > size - offset) return false;
    const unsigned char* strtab = e + shoff + link * shentsize;
    uint64_t str_offset = u64(strtab + 24), str_bytes = u64(strtab + 32);
    if (str_offset > size || str_bytes > size - str_offset) return false;
    size_t length = strlen(name);
    for (uint64_t at = 0; at + entsize <= bytes; at += entsize) {
      const unsigned char* sym = e + offset + at;
      uint32_t name_at = u32(sym);
      bool entry = (sym[4] & 0xf) == 2 /* STT_FUNC */ && (sym[5] & STO_CUDA_ENTRY) && u16(sym + 6) != 0;
      if (entry && name_at < str_bytes && length < str_bytes - name_at &&
          memcmp(e + str_offset + name_at, name, length + 1) == 0)
        return true;
    }
  }
  return false;
}

/* write the JIT's error log, as the real driver does for CU_JIT_ERROR_LOG_BUFFER */
static void write_log(unsigned int count, const int* options, void** values, const char* text) {
  char* buffer = NULL;
  size_t size = 0;
  int size_slot = -1;
  for (unsigned int i = 0; i < count; i++) {
    if (options[i] == AOT__CU_JIT_ERROR_LOG_BUFFER) buffer = values[i];
    if (options[i] == AOT__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      size = (size_t)(uintptr_t)values[i];
      size_slot = (int)i;
    }
  }
  if (!buffer || !size) return;
  int written = snprintf(buffer, size, "%s", text);
  size_t filled = written < 0 ? 0 : (size_t)written < size ? (size_t)written : size - 1;
  values[size_slot] = (void*)(uintptr_t)filled;
}

/* a failed load: the code, with its reason in the log buffer and the last rejection */
static CUresult load_error(CUresult code, unsigned int count, int* options, void** values, const char* format,
                           ...) __attribute__((format(printf, 5, 6)));
static CUresult load_error(CUresult code, unsigned int count, int* options, void** values, const char* format,
                           ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  write_log(count, options, values, text);
  return reject(code, "%s", text);
}

static CUresult module_load(CUmodule* out, const void* image, unsigned int count, int* options, void** values) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  if (!out || !image) return reject(FAKE_INVALID_VALUE, "a NULL module or image");
  if (count && (!options || !values)) return reject(FAKE_INVALID_VALUE, "%u options without arrays", count);
  for (unsigned int i = 0; i < count; i++)
    if (options[i] < 0 || options[i] > 33) return reject(FAKE_INVALID_VALUE, "JIT option %d", options[i]);
  const unsigned char* bytes = image;
  int device = ctx->device, sm = device_sm();
  bool ptx = !(bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F');
  uint64_t size;
  int image_sm;
  if (ptx) {
    const char* text = image;
    if (strncmp(skip_space_and_comments(text), ".version", 8) != 0)
      return load_error(FAKE_INVALID_IMAGE, count, options, values,
                        "aot fake driver: the image is neither a cubin nor PTX text (.version first)");
    size = strlen(text);
    image_sm = ptx_target(text);
    if (image_sm < 0)
      return load_error(FAKE_INVALID_PTX, count, options, values, "aot fake driver: the PTX has no .target sm_XY");
    if (image_sm > sm)
      return load_error(FAKE_NO_BINARY_FOR_GPU, count, options, values,
                        "aot fake driver: PTX for sm_%d on device %d (sm_%d)", image_sm, device, sm);
  } else {
    size = elf_size(bytes);
    if (!size)
      return load_error(FAKE_INVALID_IMAGE, count, options, values,
                        "aot fake driver: not a CUDA ELF64 cubin, or a damaged header");
    image_sm = elf_sm(bytes);
    if (image_sm / 10 != sm / 10 || image_sm % 10 > sm % 10)
      return load_error(FAKE_NO_BINARY_FOR_GPU, count, options, values,
                        "aot fake driver: cubin for sm_%d on device %d (sm_%d)", image_sm, device, sm);
  }
  char key[17];
  snprintf(key, sizeof key, "%016" PRIx64, aot_fake_fnv1a(image, size));
  CUresult missing = ptx ? FAKE_INVALID_PTX : FAKE_INVALID_IMAGE;
  const char* dir = getenv("AOT_FAKE_CUDA_HOST_DIR");
  if (!dir || !*dir)
    return load_error(missing, count, options, values,
                      "aot fake driver: AOT_FAKE_CUDA_HOST_DIR is not set: no host code for module %s", key);
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s.so", dir, key) >= (int)sizeof path)
    return load_error(missing, count, options, values, "aot fake driver: AOT_FAKE_CUDA_HOST_DIR is too long");
  if (access(path, R_OK) != 0)
    return load_error(missing, count, options, values, "aot fake driver: no host code %s for this module", path);
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return load_error(FAKE_INVALID_IMAGE, count, options, values, "aot fake driver: cannot load %s: %s", path,
                      dlerror());
  const aot_fake_kernel_record_t* table = dlsym(library, AOT_FAKE_KERNEL_TABLE);
  const uint32_t* table_count = dlsym(library, AOT_FAKE_KERNEL_COUNT);
  bool valid = table && table_count && *table_count <= 1u << 20;
  for (uint32_t i = 0; valid && i < *table_count; i++)
    valid = table[i].symbol && table[i].run && table[i].param_count <= 4096 / 8;
  struct CUmod_st* module = valid ? calloc(1, sizeof *module) : NULL;
  char* copy = module ? malloc(size + 1) : NULL;
  if (!copy) {
    free(module);
    dlclose(library);
    return load_error(valid ? FAKE_OUT_OF_MEMORY : FAKE_INVALID_IMAGE, count, options, values,
                      "aot fake driver: %s %s", path, valid ? "(no host memory)" : "has no valid kernel table");
  }
  memcpy(copy, image, size);
  copy[size] = 0;
  *module = (struct CUmod_st){g.modules, ctx, library, table, *table_count, copy, size, ptx, NULL};
  g.modules = module;
  *out = module;
  write_log(count, options, values, ""); /* an empty log: nothing went wrong */
  return FAKE_SUCCESS;
}

static struct CUmod_st* find_module(CUmodule module) {
  for (struct CUmod_st* m = g.modules; m; m = m->next)
    if (m == module) return m;
  return NULL;
}

static CUresult check_module(const struct CUctx_st* ctx, CUmodule module) {
  struct CUmod_st* m = find_module(module);
  if (!m) return reject(FAKE_INVALID_HANDLE, "module %p is not loaded", (void*)module);
  if (m->ctx != ctx)
    return reject(FAKE_INVALID_VALUE, "module of device %d used in device %d's context", m->ctx->device,
                  ctx->device);
  return FAKE_SUCCESS;
}

static void free_module(struct CUmod_st* m) {
  for (struct CUmod_st** p = &g.modules; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      break;
    }
  while (m->functions) {
    struct CUfunc_st* f = m->functions;
    m->functions = f->next;
    free(f);
  }
  dlclose(m->library);
  free(m->image);
  free(m);
}

static CUresult module_unload(CUmodule module) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, true);
  if (r || (r = check_module(ctx, module))) return r;
  free_module(module);
  return FAKE_SUCCESS;
}

static CUresult module_get_function(CUfunction* out, CUmodule module, const char* name) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r || (r = check_module(ctx, module))) return r;
  if (!out || !name) return reject(FAKE_INVALID_VALUE, "a NULL function or name");
  for (struct CUfunc_st* f = module->functions; f; f = f->next)
    if (strcmp(f->record->symbol, name) == 0) {
      *out = f;
      return FAKE_SUCCESS;
    }
  const aot_fake_kernel_record_t* record = NULL;
  for (uint32_t i = 0; i < module->table_count; i++)
    if (strcmp(module->table[i].symbol, name) == 0) record = &module->table[i];
  if (module->ptx) {
    const char* params = ptx_entry(module->image, name);
    if (!params) return reject(FAKE_NOT_FOUND, "the PTX has no .entry %s", name);
    if (record && ptx_param_count(params) != record->param_count)
      return reject(FAKE_INVALID_IMAGE, "kernel %s: %u parameters in the PTX, %u in its host code", name,
                    ptx_param_count(params), record->param_count);
  } else if (!elf_has_kernel((const unsigned char*)module->image, module->image_size, name)) {
    return reject(FAKE_NOT_FOUND, "the cubin has no kernel %s", name);
  }
  if (!record) return reject(FAKE_NOT_FOUND, "kernel %s has no host code in the module's library", name);
  struct CUfunc_st* f = calloc(1, sizeof *f);
  if (!f) return reject(FAKE_OUT_OF_MEMORY, "host memory for a function");
  *f = (struct CUfunc_st){module->functions, module, record, SHARED_DEFAULT, ++g.serial};
  module->functions = f;
  *out = f;
  return FAKE_SUCCESS;
}

/* ---- functions ----------------------------------------------------------------------- */

static struct CUfunc_st* find_function(CUfunction function) {
  for (struct CUmod_st* m = g.modules; m; m = m->next)
    for (struct CUfunc_st* f = m->functions; f; f = f->next)
      if (f == function) return f;
  return NULL;
}

static CUresult check_function(const struct CUctx_st* ctx, CUfunction function) {
  struct CUfunc_st* f = find_function(function);
  if (!f) return reject(FAKE_INVALID_HANDLE, "function %p is not alive (its module unloaded?)", (void*)function);
  if (f->module->ctx != ctx)
    return reject(FAKE_INVALID_VALUE, "function of device %d used in device %d's context", f->module->ctx->device,
                  ctx->device);
  return FAKE_SUCCESS;
}

static CUresult func_get_attribute(int* value, int attribute, CUfunction function) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r || (r = check_function(ctx, function))) return r;
  if (!value) return reject(FAKE_INVALID_VALUE, "value is NULL");
  switch (attribute) {
    case AOT__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case AOT__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = 0; break;
    case 2: /* CONST_SIZE_BYTES */
    case 3: /* LOCAL_SIZE_BYTES */ *value = 0; break;
    case AOT__CU_FUNC_ATTRIBUTE_NUM_REGS: *value = 32; break;
    case AOT__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = (int)function->max_dynamic_shared; break;
    default: return reject(FAKE_INVALID_VALUE, "function attribute %d is not modelled", attribute);
  }
  return FAKE_SUCCESS;
}

static CUresult func_set_attribute(CUfunction function, int attribute, int value) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r || (r = check_function(ctx, function))) return r;
  if (attribute == AOT__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > SHARED_OPTIN)
      return reject(FAKE_INVALID_VALUE, "%d bytes of dynamic shared memory (at most %d)", value, SHARED_OPTIN);
    function->max_dynamic_shared = (unsigned)value;
    return FAKE_SUCCESS;
  }
  if (attribute == 9 /* PREFERRED_SHARED_MEMORY_CARVEOUT */ && value >= -1 && value <= 100) return FAKE_SUCCESS;
  return reject(FAKE_INVALID_VALUE, "function attribute %d = %d", attribute, value);
}

/* ---- launches ------------------------------------------------------------------------ */

/* what cuLaunchKernel and a kernel node check before anything runs: the limits of the
 * device, and that the dimensions are the kernel's own (its record in the host table) */
static CUresult check_dims(const struct CUfunc_st* f, const unsigned grid[3], const unsigned block[3],
                           unsigned shared) {
  uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  if (!threads || threads > 1024 || block[0] > 1024 || block[1] > 1024 || block[2] > 64)
    return reject(FAKE_INVALID_VALUE, "block (%u, %u, %u)", block[0], block[1], block[2]);
  if (!grid[0] || !grid[1] || !grid[2] || grid[0] > INT32_MAX || grid[1] > 65535 || grid[2] > 65535)
    return reject(FAKE_INVALID_VALUE, "grid (%u, %u, %u)", grid[0], grid[1], grid[2]);
  if (shared > f->max_dynamic_shared)
    return reject(FAKE_INVALID_VALUE, "%u bytes of dynamic shared memory, above the function's %u (%s)", shared,
                  f->max_dynamic_shared,
                  shared <= SHARED_OPTIN ? "set MAX_DYNAMIC_SHARED_SIZE_BYTES first" : "above the device's");
  const aot_fake_kernel_record_t* k = f->record;
  if (memcmp(grid, k->grid, sizeof k->grid) != 0 || memcmp(block, k->block, sizeof k->block) != 0 ||
      shared != k->shared_bytes)
    return reject(FAKE_INVALID_VALUE,
                  "%s launched with grid (%u, %u, %u) block (%u, %u, %u) shared %u; its code wants grid "
                  "(%u, %u, %u) block (%u, %u, %u) shared %u",
                  k->symbol, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, k->grid[0],
                  k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->shared_bytes);
  return FAKE_SUCCESS;
}

/* the launch `function` with these dimensions and kernelParams would be (values copied) */
static CUresult make_launch(const struct CUctx_st* ctx, CUfunction function, const unsigned grid[3],
                            const unsigned block[3], unsigned shared, void** params, void** extra,
                            fake_launch_t* out) {
  CUresult r = check_function(ctx, function);
  if (r) return r;
  if (extra) return reject(FAKE_INVALID_VALUE, "extra is not NULL (pass kernelParams)");
  if ((r = check_dims(function, grid, block, shared))) return r;
  uint32_t count = function->record->param_count;
  if (count && !params) return reject(FAKE_INVALID_VALUE, "%s takes %u parameters; kernelParams is NULL",
                                      function->record->symbol, count);
  for (uint32_t i = 0; i < count; i++)
    if (!params[i]) return reject(FAKE_INVALID_VALUE, "kernelParams[%u] is NULL", i);
  uint64_t* values = malloc(((size_t)count + 1) * sizeof *values);
  if (!values) return reject(FAKE_OUT_OF_MEMORY, "host memory for a launch");
  for (uint32_t i = 0; i < count; i++) memcpy(&values[i], params[i], sizeof values[i]);
  *out = (fake_launch_t){function, function->serial, {grid[0], grid[1], grid[2]},
                         {block[0], block[1], block[2]}, shared, values, count};
  return FAKE_SUCCESS;
}

/* run a launch on the host: its arguments must point into live allocations of the device */
static CUresult run_launch(struct CUctx_st* ctx, const fake_launch_t* launch) {
  struct CUfunc_st* f = find_function(launch->function);
  if (!f || f->serial != launch->serial)
    return reject(FAKE_INVALID_HANDLE, "a graph node's function is no longer loaded");
  const aot_fake_kernel_record_t* k = f->record;
  bool checks = strcmp(k->symbol, CHECKS_SYMBOL) == 0;
  for (uint32_t i = 0; i < launch->count; i++) {
    uint64_t address = launch->values[i];
    if (!find_range(ctx, address, 0))
      return fault(ctx, FAKE_ILLEGAL_ADDRESS, "%s argument %u: 0x%" PRIx64 " is in no allocation of device %d",
                   k->symbol, i, address, ctx->device);
    /* a kernel's buffers are 16-byte aligned (its loads assume it); the checks kernel's are
       at their bases, and its last argument is the int32 status word */
    uint64_t align = !checks ? BUFFER_ALIGN : i + 1 == launch->count ? 4 : 1;
    if (address % align)
      return fault(ctx, FAKE_MISALIGNED_ADDRESS, "%s argument %u: 0x%" PRIx64 " is not %" PRIu64 "-byte aligned",
                   k->symbol, i, address, align);
  }
  void** slots = malloc(((size_t)launch->count + 1) * sizeof *slots);
  if (!slots) return reject(FAKE_OUT_OF_MEMORY, "host memory for a launch");
  for (uint32_t i = 0; i < launch->count; i++) slots[i] = &launch->values[i];
  k->run(slots);
  free(slots);
  g.kernel_runs++;
  return FAKE_SUCCESS;
}

static CUresult launch_kernel(CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                              unsigned int block_x, unsigned int block_y, unsigned int block_z,
                              unsigned int shared_bytes, CUstream stream, void** params, void** extra) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r || (r = check_stream(ctx, stream))) return r;
  const unsigned grid[3] = {grid_x, grid_y, grid_z}, block[3] = {block_x, block_y, block_z};
  fake_launch_t launch;
  if ((r = make_launch(ctx, function, grid, block, shared_bytes, params, extra, &launch))) return r;
  r = run_launch(ctx, &launch);
  free(launch.values);
  return r;
}

/* ---- streams ------------------------------------------------------------------------- */

static CUresult stream_create(CUstream* out, unsigned int flags) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  if (!out) return reject(FAKE_INVALID_VALUE, "stream is NULL");
  if (flags != 0 && flags != AOT__CU_STREAM_NON_BLOCKING) return reject(FAKE_INVALID_VALUE, "flags %u", flags);
  struct CUstream_st* s = calloc(1, sizeof *s);
  if (!s) return reject(FAKE_OUT_OF_MEMORY, "host memory for a stream");
  *s = (struct CUstream_st){g.streams, ctx};
  g.streams = s;
  *out = s;
  return FAKE_SUCCESS;
}

static void free_stream(struct CUstream_st* s) {
  for (struct CUstream_st** p = &g.streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  free(s);
}

static CUresult stream_destroy(CUstream stream) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, true);
  if (r) return r;
  if (!stream) return reject(FAKE_INVALID_HANDLE, "the NULL stream cannot be destroyed");
  if ((r = check_stream(ctx, stream))) return r;
  free_stream(stream);
  return FAKE_SUCCESS;
}

static CUresult stream_synchronize(CUstream stream) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  return r ? r : check_stream(ctx, stream);
}

/* ---- graphs -------------------------------------------------------------------------- */

static struct CUgraph_st* find_graph(CUgraph graph) {
  for (struct CUgraph_st* x = g.graphs; x; x = x->next)
    if (x == graph) return x;
  return NULL;
}

static struct CUgraphExec_st* find_exec(CUgraphExec exec) {
  for (struct CUgraphExec_st* x = g.execs; x; x = x->next)
    if (x == exec) return x;
  return NULL;
}

static CUresult graph_create(CUgraph* out, unsigned int flags) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  if (!out) return reject(FAKE_INVALID_VALUE, "graph is NULL");
  if (flags) return reject(FAKE_INVALID_VALUE, "flags %u (must be 0)", flags);
  struct CUgraph_st* graph = calloc(1, sizeof *graph);
  if (!graph) return reject(FAKE_OUT_OF_MEMORY, "host memory for a graph");
  graph->next = g.graphs;
  graph->ctx = ctx;
  g.graphs = graph;
  *out = graph;
  return FAKE_SUCCESS;
}

static bool graph_has_node(const struct CUgraph_st* graph, CUgraphNode node, size_t limit) {
  for (size_t i = 0; i < limit && i < graph->count; i++)
    if (graph->nodes[i] == node) return true;
  return false;
}

/* the v2 fields the runtime leaves NULL: a CUkernel and a context other than the current */
static CUresult check_v2_fields(const struct CUctx_st* ctx, const aot__cuda_kernel_node_params_t* params) {
  if (params->kern) return reject(FAKE_INVALID_VALUE, "kern is set (the stand-in takes func)");
  if (params->ctx && params->ctx != ctx) return reject(FAKE_INVALID_VALUE, "ctx is not the current context");
  return FAKE_SUCCESS;
}

static CUresult node_launch(const struct CUctx_st* ctx, const aot__cuda_kernel_node_params_t* params, bool v2,
                            fake_launch_t* out) {
  if (!params) return reject(FAKE_INVALID_VALUE, "nodeParams is NULL");
  CUresult r = v2 ? check_v2_fields(ctx, params) : FAKE_SUCCESS;
  if (r) return r;
  const unsigned grid[3] = {params->grid_x, params->grid_y, params->grid_z};
  const unsigned block[3] = {params->block_x, params->block_y, params->block_z};
  return make_launch(ctx, params->func, grid, block, params->shared_bytes, params->kernel_params, params->extra,
                     out);
}

static CUresult graph_add_kernel_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* dependencies,
                                      size_t count, const aot__cuda_kernel_node_params_t* params, bool v2) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  struct CUgraph_st* x = find_graph(graph);
  if (!x) return reject(FAKE_INVALID_HANDLE, "graph %p is not alive", (void*)graph);
  if (!out) return reject(FAKE_INVALID_VALUE, "phGraphNode is NULL");
  if (count && !dependencies) return reject(FAKE_INVALID_VALUE, "%zu dependencies, NULL array", count);
  /* a dependency was added before: running the nodes in insertion order respects them all */
  for (size_t i = 0; i < count; i++)
    if (!graph_has_node(x, dependencies[i], x->count))
      return reject(FAKE_INVALID_VALUE, "dependency %zu is not a node of this graph", i);
  if (x->count == x->capacity) {
    size_t capacity = x->capacity ? 2 * x->capacity : 16;
    CUgraphNode* grown = realloc(x->nodes, capacity * sizeof *grown);
    if (!grown) return reject(FAKE_OUT_OF_MEMORY, "host memory for a node");
    x->nodes = grown;
    x->capacity = capacity;
  }
  struct CUgraphNode_st* node = calloc(1, sizeof *node);
  if (!node) return reject(FAKE_OUT_OF_MEMORY, "host memory for a node");
  if ((r = node_launch(ctx, params, v2, &node->launch))) {
    free(node);
    return r;
  }
  node->graph = x;
  x->nodes[x->count++] = node;
  *out = node;
  return FAKE_SUCCESS;
}

static void free_graph(struct CUgraph_st* graph) {
  for (struct CUgraph_st** p = &g.graphs; *p; p = &(*p)->next)
    if (*p == graph) {
      *p = graph->next;
      break;
    }
  for (size_t i = 0; i < graph->count; i++) {
    free(graph->nodes[i]->launch.values);
    free(graph->nodes[i]);
  }
  free(graph->nodes);
  free(graph);
}

static void free_exec(struct CUgraphExec_st* exec) {
  for (struct CUgraphExec_st** p = &g.execs; *p; p = &(*p)->next)
    if (*p == exec) {
      *p = exec->next;
      break;
    }
  for (size_t i = 0; i < exec->count; i++) free(exec->launches[i].values);
  free(exec->launches);
  free(exec->nodes);
  free(exec);
}

static CUresult graph_instantiate(CUgraphExec* out, CUgraph graph, unsigned long long flags) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r) return r;
  struct CUgraph_st* x = find_graph(graph);
  if (!x) return reject(FAKE_INVALID_HANDLE, "graph %p is not alive", (void*)graph);
  if (!out) return reject(FAKE_INVALID_VALUE, "phGraphExec is NULL");
  if (flags) return reject(FAKE_INVALID_VALUE, "flags %llu (must be 0)", flags);
  struct CUgraphExec_st* exec = calloc(1, sizeof *exec);
  if (exec) {
    exec->nodes = calloc(x->count + 1, sizeof *exec->nodes);
    exec->launches = calloc(x->count + 1, sizeof *exec->launches);
  }
  if (!exec || !exec->nodes || !exec->launches) {
    if (exec) free_exec(exec);
    return reject(FAKE_OUT_OF_MEMORY, "host memory for a graph exec");
  }
  exec->ctx = ctx;
  for (size_t i = 0; i < x->count; i++) {
    fake_launch_t launch = x->nodes[i]->launch;
    launch.values = malloc(((size_t)launch.count + 1) * sizeof *launch.values);
    if (!launch.values) {
      free_exec(exec);
      return reject(FAKE_OUT_OF_MEMORY, "host memory for a graph exec");
    }
    memcpy(launch.values, x->nodes[i]->launch.values, launch.count * sizeof *launch.values);
    exec->nodes[i] = x->nodes[i];
    exec->launches[i] = launch;
    exec->count = i + 1;
  }
  exec->next = g.execs;
  g.execs = exec;
  *out = exec;
  return FAKE_SUCCESS;
}

static CUresult check_exec(const struct CUctx_st* ctx, CUgraphExec exec) {
  struct CUgraphExec_st* x = find_exec(exec);
  if (!x) return reject(FAKE_INVALID_HANDLE, "graph exec %p is not alive", (void*)exec);
  if (x->ctx != ctx)
    return reject(FAKE_INVALID_VALUE, "graph exec of device %d used in device %d's context", x->ctx->device,
                  ctx->device);
  return FAKE_SUCCESS;
}

static CUresult graph_exec_set_params(CUgraphExec exec, CUgraphNode node,
                                      const aot__cuda_kernel_node_params_t* params, bool v2) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r || (r = check_exec(ctx, exec))) return r;
  size_t index = 0;
  while (index < exec->count && exec->nodes[index] != node) index++;
  if (index == exec->count) return reject(FAKE_INVALID_VALUE, "the node is not one of the exec's graph");
  if (params && params->func != exec->launches[index].function)
    return reject(FAKE_INVALID_VALUE, "a node's function cannot change in an exec");
  fake_launch_t launch;
  if ((r = node_launch(ctx, params, v2, &launch))) return r;
  free(exec->launches[index].values);
  exec->launches[index] = launch;
  return FAKE_SUCCESS;
}

static CUresult graph_launch(CUgraphExec exec, CUstream stream) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, false);
  if (r || (r = check_exec(ctx, exec)) || (r = check_stream(ctx, stream))) return r;
  for (size_t i = 0; i < exec->count; i++)
    if ((r = run_launch(ctx, &exec->launches[i]))) return r;
  return FAKE_SUCCESS;
}

static CUresult graph_exec_destroy(CUgraphExec exec) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, true);
  if (r || (r = check_exec(ctx, exec))) return r;
  free_exec(exec);
  return FAKE_SUCCESS;
}

static CUresult graph_destroy(CUgraph graph) {
  struct CUctx_st* ctx = NULL;
  CUresult r = need_context(&ctx, true);
  if (r) return r;
  struct CUgraph_st* x = find_graph(graph);
  if (!x) return reject(FAKE_INVALID_HANDLE, "graph %p is not alive", (void*)graph);
  free_graph(x);
  return FAKE_SUCCESS;
}

/* ---- devices and contexts ------------------------------------------------------------ */

static CUresult init(unsigned int flags) {
  if (flags) return reject(FAKE_INVALID_VALUE, "flags %u (must be 0)", flags);
  g.initialized = true;
  return FAKE_SUCCESS;
}

static CUresult driver_get_version(int* version) {
  if (!version) return reject(FAKE_INVALID_VALUE, "version is NULL");
  *version = 12080;
  return FAKE_SUCCESS;
}

static CUresult get_error_text(CUresult error, const char** out, bool name) {
  if (!out) return reject(FAKE_INVALID_VALUE, "the out-parameter is NULL");
  for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
    if (ERRORS[i].code == error) {
      *out = name ? ERRORS[i].name : ERRORS[i].text;
      return FAKE_SUCCESS;
    }
  *out = NULL;
  return reject(FAKE_INVALID_VALUE, "unknown CUresult %d", (int)error);
}

static CUresult device_get_count(int* count) {
  CUresult r = initialized();
  if (r) return r;
  if (!count) return reject(FAKE_INVALID_VALUE, "count is NULL");
  *count = device_count();
  return FAKE_SUCCESS;
}

static CUresult device_get(CUdevice* device, int ordinal) {
  CUresult r = need_device(ordinal);
  if (r) return r;
  if (!device) return reject(FAKE_INVALID_VALUE, "device is NULL");
  *device = ordinal;
  return FAKE_SUCCESS;
}

static CUresult device_get_name(char* name, int length, CUdevice device) {
  CUresult r = need_device(device);
  if (r) return r;
  if (!name || length <= 0) return reject(FAKE_INVALID_VALUE, "name buffer NULL or of %d bytes", length);
  int sm = device_sm();
  snprintf(name, (size_t)length, "aot fake GPU (sm_%d%d)", sm / 10, sm % 10);
  return FAKE_SUCCESS;
}

static CUresult device_get_attribute(int* value, int attribute, CUdevice device) {
  CUresult r = need_device(device);
  if (r) return r;
  if (!value) return reject(FAKE_INVALID_VALUE, "value is NULL");
  int sm = device_sm();
  switch (attribute) {
    case 1: /* MAX_THREADS_PER_BLOCK */ *value = 1024; break;
    case 2: /* MAX_BLOCK_DIM_X */
    case 3: /* MAX_BLOCK_DIM_Y */ *value = 1024; break;
    case 4: /* MAX_BLOCK_DIM_Z */ *value = 64; break;
    case 5: /* MAX_GRID_DIM_X */ *value = INT32_MAX; break;
    case 6: /* MAX_GRID_DIM_Y */
    case 7: /* MAX_GRID_DIM_Z */ *value = 65535; break;
    case 8: /* MAX_SHARED_MEMORY_PER_BLOCK */ *value = (int)SHARED_DEFAULT; break;
    case 10: /* WARP_SIZE */ *value = 32; break;
    case AOT__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = SM_COUNT; break;
    case 41: /* UNIFIED_ADDRESSING */ *value = 1; break;
    case AOT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = sm / 10; break;
    case AOT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = sm % 10; break;
    case AOT__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = SHARED_OPTIN; break;
    default: return reject(FAKE_INVALID_VALUE, "device attribute %d is not modelled", attribute);
  }
  return FAKE_SUCCESS;
}

static CUresult device_total_mem(size_t* bytes, CUdevice device) {
  CUresult r = need_device(device);
  if (r) return r;
  if (!bytes) return reject(FAKE_INVALID_VALUE, "bytes is NULL");
  *bytes = device_memory();
  return FAKE_SUCCESS;
}

static CUresult primary_ctx_retain(CUcontext* out, CUdevice device) {
  CUresult r = need_device(device);
  if (r) return r;
  if (!out) return reject(FAKE_INVALID_VALUE, "pctx is NULL");
  struct CUctx_st* ctx = &g.contexts[device];
  if (ctx->refcount++ == 0) *ctx = (struct CUctx_st){device, 1, FAKE_SUCCESS, 0};
  *out = ctx;
  return FAKE_SUCCESS;
}

/* the primary context's last release: it goes, with whatever was still made in it */
static void destroy_context(struct CUctx_st* ctx) {
  for (size_t i = g.alloc_count; i-- > 0;)
    if (g.allocs[i].ctx == ctx) {
      free_alloc(i);
      g.destroyed_with_context++;
    }
  for (struct CUgraphExec_st *x = g.execs, *next; x; x = next) {
    next = x->next;
    if (x->ctx == ctx) {
      free_exec(x);
      g.destroyed_with_context++;
    }
  }
  for (struct CUgraph_st *x = g.graphs, *next; x; x = next) {
    next = x->next;
    if (x->ctx == ctx) {
      free_graph(x);
      g.destroyed_with_context++;
    }
  }
  for (struct CUstream_st *x = g.streams, *next; x; x = next) {
    next = x->next;
    if (x->ctx == ctx) {
      free_stream(x);
      g.destroyed_with_context++;
    }
  }
  for (struct CUmod_st *x = g.modules, *next; x; x = next) {
    next = x->next;
    if (x->ctx == ctx) {
      free_module(x);
      g.destroyed_with_context++;
    }
  }
  ctx->sticky = FAKE_SUCCESS;
}

static CUresult primary_ctx_release(CUdevice device) {
  CUresult r = need_device(device);
  if (r) return r;
  struct CUctx_st* ctx = &g.contexts[device];
  if (ctx->refcount == 0) return reject(FAKE_INVALID_CONTEXT, "device %d's primary context is not retained", device);
  if (--ctx->refcount == 0) destroy_context(ctx);
  return FAKE_SUCCESS;
}

static CUresult ctx_push_current(CUcontext ctx) {
  CUresult r = initialized();
  if (r) return r;
  bool ours = ctx >= &g.contexts[0] && ctx < &g.contexts[MAX_DEVICES];
  if (!ours || ctx->refcount == 0) return reject(FAKE_INVALID_CONTEXT, "%p is no retained context", (void*)ctx);
  if (t_depth == MAX_STACK) return reject(FAKE_INVALID_VALUE, "%d contexts pushed on this thread", MAX_STACK);
  t_stack[t_depth++] = ctx;
  return FAKE_SUCCESS;
}

static CUresult ctx_pop_current(CUcontext* out) {
  CUresult r = initialized();
  if (r) return r;
  if (!t_depth) return reject(FAKE_INVALID_CONTEXT, "no context is pushed on this thread");
  struct CUctx_st* ctx = t_stack[--t_depth];
  if (out) *out = ctx;
  return FAKE_SUCCESS;
}

/* ---- the entry points ---------------------------------------------------------------- */

API CUresult cuInit(unsigned int flags) FAKE_ENTRY(init, init(flags))
API CUresult cuDriverGetVersion(int* version) FAKE_ENTRY(driver_get_version, driver_get_version(version))
API CUresult cuGetErrorName(CUresult error, const char** name)
    FAKE_ENTRY(get_error_name, get_error_text(error, name, true))
API CUresult cuGetErrorString(CUresult error, const char** text)
    FAKE_ENTRY(get_error_string, get_error_text(error, text, false))
API CUresult cuDeviceGetCount(int* count) FAKE_ENTRY(device_get_count, device_get_count(count))
API CUresult cuDeviceGet(CUdevice* device, int ordinal) FAKE_ENTRY(device_get, device_get(device, ordinal))
API CUresult cuDeviceGetName(char* name, int length, CUdevice device)
    FAKE_ENTRY(device_get_name, device_get_name(name, length, device))
API CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device)
    FAKE_ENTRY(device_get_attribute, device_get_attribute(value, attribute, device))
API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device)
    FAKE_ENTRY(device_total_mem, device_total_mem(bytes, device))
API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device)
    FAKE_ENTRY(primary_ctx_retain, primary_ctx_retain(ctx, device))
API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device)
    FAKE_ENTRY(primary_ctx_release, primary_ctx_release(device))
API CUresult cuCtxPushCurrent_v2(CUcontext ctx) FAKE_ENTRY(ctx_push_current, ctx_push_current(ctx))
API CUresult cuCtxPopCurrent_v2(CUcontext* ctx) FAKE_ENTRY(ctx_pop_current, ctx_pop_current(ctx))
API CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count, int* options,
                                void** values)
    FAKE_ENTRY(module_load_data_ex, module_load(module, image, count, options, values))
API CUresult cuModuleUnload(CUmodule module) FAKE_ENTRY(module_unload, module_unload(module))
API CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name)
    FAKE_ENTRY(module_get_function, module_get_function(function, module, name))
API CUresult cuFuncGetAttribute(int* value, int attribute, CUfunction function)
    FAKE_ENTRY(func_get_attribute, func_get_attribute(value, attribute, function))
API CUresult cuFuncSetAttribute(CUfunction function, int attribute, int value)
    FAKE_ENTRY(func_set_attribute, func_set_attribute(function, attribute, value))
API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes)
    FAKE_ENTRY(mem_get_info, mem_get_info(free_bytes, total_bytes))
API CUresult cuMemAlloc_v2(CUdeviceptr* address, size_t bytes) FAKE_ENTRY(mem_alloc, mem_alloc(address, bytes))
API CUresult cuMemFree_v2(CUdeviceptr address) FAKE_ENTRY(mem_free, mem_free(address))
API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream)
    FAKE_ENTRY(memcpy_htod_async, memcpy_checked((void*)(uintptr_t)src, dst, bytes, stream, true))
API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream)
    FAKE_ENTRY(memcpy_dtoh_async, memcpy_checked(dst, src, bytes, stream, false))
API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)
    FAKE_ENTRY(memcpy_dtod_async, memcpy_device(dst, src, bytes, stream))
API CUresult cuPointerGetAttribute(void* value, int attribute, CUdeviceptr address)
    FAKE_ENTRY(pointer_get_attribute, pointer_get_attribute(value, attribute, address))
API CUresult cuStreamCreate(CUstream* stream, unsigned int flags)
    FAKE_ENTRY(stream_create, stream_create(stream, flags))
API CUresult cuStreamDestroy_v2(CUstream stream) FAKE_ENTRY(stream_destroy, stream_destroy(stream))
API CUresult cuStreamSynchronize(CUstream stream) FAKE_ENTRY(stream_synchronize, stream_synchronize(stream))
API CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                            unsigned int block_x, unsigned int block_y, unsigned int block_z,
                            unsigned int shared_bytes, CUstream stream, void** params, void** extra)
    FAKE_ENTRY(launch_kernel, launch_kernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                                            shared_bytes, stream, params, extra))
API CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) FAKE_ENTRY(graph_create, graph_create(graph, flags))
API CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                     size_t count, const aot__cuda_kernel_node_params_t* params)
    FAKE_ENTRY(graph_add_kernel_node, graph_add_kernel_node(node, graph, dependencies, count, params, true))
API CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies, size_t count,
                                  const aot__cuda_kernel_node_params_t* params)
    FAKE_ENTRY(graph_add_kernel_node_v1, graph_add_kernel_node(node, graph, dependencies, count, params, false))
API CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags)
    FAKE_ENTRY(graph_instantiate, graph_instantiate(exec, graph, flags))
API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                               const aot__cuda_kernel_node_params_t* params)
    FAKE_ENTRY(graph_exec_kernel_node_set_params, graph_exec_set_params(exec, node, params, true))
API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                            const aot__cuda_kernel_node_params_t* params)
    FAKE_ENTRY(graph_exec_kernel_node_set_params_v1, graph_exec_set_params(exec, node, params, false))
API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) FAKE_ENTRY(graph_launch, graph_launch(exec, stream))
API CUresult cuGraphExecDestroy(CUgraphExec exec) FAKE_ENTRY(graph_exec_destroy, graph_exec_destroy(exec))
API CUresult cuGraphDestroy(CUgraph graph) FAKE_ENTRY(graph_destroy, graph_destroy(graph))

/* every entry point has exactly cuda_api.h's type: a mismatch does not compile */
#define FAKE_MEMBER(member, symbol, ret, params) ret(*member) params;
struct fake_entry_points {
  AOT__CUDA_FUNCTIONS(FAKE_MEMBER)
};
__attribute__((used)) static const struct fake_entry_points ENTRY_POINTS = {
    .init = cuInit,
    .driver_get_version = cuDriverGetVersion,
    .get_error_name = cuGetErrorName,
    .get_error_string = cuGetErrorString,
    .device_get_count = cuDeviceGetCount,
    .device_get = cuDeviceGet,
    .device_get_name = cuDeviceGetName,
    .device_get_attribute = cuDeviceGetAttribute,
    .device_total_mem = cuDeviceTotalMem_v2,
    .primary_ctx_retain = cuDevicePrimaryCtxRetain,
    .primary_ctx_release = cuDevicePrimaryCtxRelease_v2,
    .ctx_push_current = cuCtxPushCurrent_v2,
    .ctx_pop_current = cuCtxPopCurrent_v2,
    .module_load_data_ex = cuModuleLoadDataEx,
    .module_unload = cuModuleUnload,
    .module_get_function = cuModuleGetFunction,
    .func_get_attribute = cuFuncGetAttribute,
    .func_set_attribute = cuFuncSetAttribute,
    .mem_get_info = cuMemGetInfo_v2,
    .mem_alloc = cuMemAlloc_v2,
    .mem_free = cuMemFree_v2,
    .memcpy_htod_async = cuMemcpyHtoDAsync_v2,
    .memcpy_dtoh_async = cuMemcpyDtoHAsync_v2,
    .memcpy_dtod_async = cuMemcpyDtoDAsync_v2,
    .pointer_get_attribute = cuPointerGetAttribute,
    .stream_create = cuStreamCreate,
    .stream_destroy = cuStreamDestroy_v2,
    .stream_synchronize = cuStreamSynchronize,
    .launch_kernel = cuLaunchKernel,
    .graph_create = cuGraphCreate,
    .graph_add_kernel_node = cuGraphAddKernelNode_v2,
    .graph_instantiate = cuGraphInstantiateWithFlags,
    .graph_exec_kernel_node_set_params = cuGraphExecKernelNodeSetParams_v2,
    .graph_launch = cuGraphLaunch,
    .graph_exec_destroy = cuGraphExecDestroy,
    .graph_destroy = cuGraphDestroy,
};
__attribute__((used)) static const struct fake_entry_points V1_FALLBACKS = {
    .graph_add_kernel_node = cuGraphAddKernelNode,
    .graph_exec_kernel_node_set_params = cuGraphExecKernelNodeSetParams,
};

/* ---- for tests (fake_cuda.h) --------------------------------------------------------- */

API uint64_t aot_fake_cuda_stat(const char* what) {
  uint64_t value = UINT64_MAX;
  if (!what) return value;
  pthread_mutex_lock(&g.mutex);
  for (int id = 0; id < FAKE_ID_COUNT; id++)
    if (strcmp(what, ENTRY_NAMES[id]) == 0) value = g.calls[id];
  if (strcmp(what, "live_allocations") == 0) value = g.alloc_count;
  if (strcmp(what, "live_modules") == 0 || strcmp(what, "live_functions") == 0) {
    uint64_t modules = 0, functions = 0;
    for (struct CUmod_st* m = g.modules; m; m = m->next, modules++)
      for (struct CUfunc_st* f = m->functions; f; f = f->next) functions++;
    value = what[5] == 'm' ? modules : functions;
  }
  if (strcmp(what, "live_streams") == 0) {
    value = 0;
    for (struct CUstream_st* s = g.streams; s; s = s->next) value++;
  }
  if (strcmp(what, "live_graphs") == 0) {
    value = 0;
    for (struct CUgraph_st* x = g.graphs; x; x = x->next) value++;
  }
  if (strcmp(what, "live_execs") == 0) {
    value = 0;
    for (struct CUgraphExec_st* x = g.execs; x; x = x->next) value++;
  }
  if (strcmp(what, "primary_retains") == 0 || strcmp(what, "used_bytes") == 0 ||
      strcmp(what, "broken_contexts") == 0) {
    value = 0;
    for (int d = 0; d < MAX_DEVICES; d++) {
      const struct CUctx_st* ctx = &g.contexts[d];
      value += what[0] == 'p' ? (uint64_t)ctx->refcount
               : what[0] == 'u' ? ctx->used
                                : (uint64_t)(ctx->refcount > 0 && ctx->sticky);
    }
  }
  if (strcmp(what, "kernel_runs") == 0) value = g.kernel_runs;
  if (strcmp(what, "destroyed_with_context") == 0) value = g.destroyed_with_context;
  pthread_mutex_unlock(&g.mutex);
  return value;
}

API void aot_fake_cuda_reset_faults(void) {
  pthread_mutex_lock(&g.mutex);
  free(g.fault_spec);
  g.fault_spec = NULL;
  pthread_mutex_unlock(&g.mutex);
}

API size_t aot_fake_cuda_last_rejection(char* out, size_t size) {
  pthread_mutex_lock(&g.mutex);
  size_t length = strlen(g.last_rejection);
  if (out && size) snprintf(out, size, "%s", g.last_rejection);
  pthread_mutex_unlock(&g.mutex);
  return length;
}
