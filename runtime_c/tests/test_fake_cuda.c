/* test_fake_cuda.c - C tests of the test stand-in for libcuda.so.1 (fake_cuda.c) alone:
 * it is dlopened as the runtime opens it, its entry points resolved by the names of
 * cuda_api.h, and each is driven through what it must accept and what it must refuse (no
 * cuInit, no current context, addresses outside allocations, sticky errors, graphs, failure
 * injection, several threads).
 *
 *   test_fake_cuda <libcuda.so.1> <fixture.so> <scratch dir>
 *
 * The trick: this file is its own fixture. Compiled with -DAOT_FAKE_CUDA_FIXTURE -shared
 * (make fake-cuda-test does both) it is a host-code library as host_library.py writes them,
 * with a small kernel table in C; FIXTURE_PTX below is the PTX text it stands for, and the
 * test links the library into a scratch directory under that text's module key (and under
 * the keys of two cubins it writes byte by byte), so the stand-in finds it there. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_* in dlfcn.h, setenv, mkdtemp, realpath */
#endif
#include <stdint.h>
#include <string.h>

#include "cuda_api.h"
#include "fake_cuda.h"

#define AXPY_BLOCKS 4
#define AXPY_THREADS 64
#define AXPY_N (AXPY_BLOCKS * AXPY_THREADS)
#define SHARED_BYTES 65536

#ifdef AOT_FAKE_CUDA_FIXTURE

/* ---- the fixture: a host-code library of four kernels ---------------------------------- */

static void* param(void** params, int i) {
  uint64_t address;
  memcpy(&address, params[i], sizeof address);
  return (void*)(uintptr_t)address;
}

/* y = 2 x + 1, one block of AXPY_THREADS elements after another */
static void run_axpy(void** params) {
  const float* x = param(params, 0);
  float* y = param(params, 1);
  for (int block = 0; block < AXPY_BLOCKS; block++)
    for (int t = 0; t < AXPY_THREADS; t++) y[block * AXPY_THREADS + t] = 2 * x[block * AXPY_THREADS + t] + 1;
}

/* the checks kernel's shape: buffers at their bases, then the int32 status word */
static void run_checks(void** params) {
  const float* x = param(params, 0);
  int32_t* status = param(params, 1);
  *status = x[0] < 0 ? 1 : 0;
}

static void run_fill(void** params) {
  float* out = param(params, 0);
  out[0] = 42;
}

__attribute__((visibility("default"))) const aot_fake_kernel_record_t aot_fake_kernel_table[] = {
    {"aot_fake_test_axpy", run_axpy, 2, {AXPY_BLOCKS, 1, 1}, {AXPY_THREADS, 1, 1}, 0, AXPY_BLOCKS},
    {"aot_model_checks", run_checks, 2, {1, 1, 1}, {1, 1, 1}, 0, 1},
    {"aot_fake_test_shared", run_fill, 1, {1, 1, 1}, {32, 1, 1}, SHARED_BYTES, 1},
    {"aot_fake_test_host_only", run_fill, 1, {1, 1, 1}, {32, 1, 1}, 0, 1},
};
__attribute__((visibility("default"))) const uint32_t aot_fake_kernel_count =
    sizeof aot_fake_kernel_table / sizeof aot_fake_kernel_table[0];

#else

/* ---- the test ------------------------------------------------------------------------- */

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

/* the PTX the fixture stands for: axpy and the checks kernel are in both; the PTX has one
 * kernel without host code, the library one without PTX */
static const char FIXTURE_PTX[] =
    "//\n// test_fake_cuda.c's fixture\n//\n\n"
    ".version 7.8\n.target sm_80\n.address_size 64\n\n"
    ".visible .entry aot_fake_test_axpy(\n"
    "\t.param .u64 .ptr .align 16 aot_fake_test_axpy_param_0,\n"
    "\t.param .u64 .ptr .align 16 aot_fake_test_axpy_param_1\n)\n{\n\tret;\n}\n"
    ".visible .entry aot_model_checks(\n\t.param .u64 p0,\n\t.param .u64 p1\n)\n{\n\tret;\n}\n"
    ".visible .entry aot_fake_test_shared(\n\t.param .u64 p0\n)\n{\n\tret;\n}\n"
    ".visible .entry aot_fake_test_ptx_only (.param .u64 p0)\n{\n\tret;\n}\n";

#define FAKE_MEMBER(member, symbol, ret, params) ret(*member) params;
static struct {
  AOT__CUDA_FUNCTIONS(FAKE_MEMBER)
} cu, cu_v1;
static aot_fake_cuda_stat_fn stat_of;
static aot_fake_cuda_reset_faults_fn reset_faults;
static aot_fake_cuda_last_rejection_fn last_rejection;
static char g_host_dir[PATH_MAX];
static char g_fixture[PATH_MAX];

static void* symbol(void* library, const char* name) {
  void* found = dlsym(library, name);
  CHECK(found != NULL, "the stand-in lacks %s", name);
  return found;
}

/* every entry point by its cuda_api.h name, the v1 fallbacks too, as the runtime's loader */
static void resolve(void* library) {
  void* p;
#define RESOLVE(member, name, ret, params) \
  p = symbol(library, name);               \
  memcpy(&cu.member, &p, sizeof p);
  AOT__CUDA_FUNCTIONS(RESOLVE)
  static const char* const fallbacks[][2] = {AOT__CUDA_V1_FALLBACKS};
  CHECK(strcmp(fallbacks[0][0], "cuGraphAddKernelNode_v2") == 0 &&
            strcmp(fallbacks[1][0], "cuGraphExecKernelNodeSetParams_v2") == 0,
        "the v1 fallbacks changed: %s, %s", fallbacks[0][0], fallbacks[1][0]);
  p = symbol(library, fallbacks[0][1]);
  memcpy(&cu_v1.graph_add_kernel_node, &p, sizeof p);
  p = symbol(library, fallbacks[1][1]);
  memcpy(&cu_v1.graph_exec_kernel_node_set_params, &p, sizeof p);
  p = symbol(library, "aot_fake_cuda_stat");
  memcpy(&stat_of, &p, sizeof p);
  p = symbol(library, "aot_fake_cuda_reset_faults");
  memcpy(&reset_faults, &p, sizeof p);
  p = symbol(library, "aot_fake_cuda_last_rejection");
  memcpy(&last_rejection, &p, sizeof p);
}

static const char* why(void) {
  static char text[1024];
  last_rejection(text, sizeof text);
  return text;
}

/* the fixture library installed under the key of `image` (`size` bytes) */
static void install(const void* image, size_t size) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/%016llx.so", g_host_dir, (unsigned long long)aot_fake_fnv1a(image, size));
  unlink(path);
  CHECK(symlink(g_fixture, path) == 0, "symlink %s", path);
}

/* ---- a cubin, byte by byte: a header, a string table, a symbol table with one entry
 * function (axpy) and one plain function (shared), the section headers, then the program
 * headers after them (as ptxas 13 lays them out), then bytes that are not the image's */
#define CUBIN_SIZE (64 + 64 + 72 + 3 * 64 + 56)
static size_t put(unsigned char* at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; i++) at[i] = (unsigned char)(value >> (8 * i));
  return (size_t)bytes;
}

static void write_cubin(unsigned char* e, int sm, int abi_version) {
  memset(e, 0, CUBIN_SIZE + 16);
  memcpy(e, "\177ELF\2\1\1", 7);
  e[7] = 0x41; /* ELFOSABI_CUDA */
  e[8] = (unsigned char)abi_version;
  put(e + 16, 2, 2);   /* ET_EXEC */
  put(e + 18, 190, 2); /* EM_CUDA */
  put(e + 20, 1, 4);
  put(e + 32, 64 + 64 + 72 + 3 * 64, 8); /* e_phoff: after the section headers */
  put(e + 40, 64 + 64 + 72, 8);          /* e_shoff */
  put(e + 48, abi_version >= 7 ? (uint32_t)sm << 8 | 0x6000004 : (uint32_t)sm, 4);
  put(e + 52, 64, 2);
  put(e + 54, 56, 2);
  put(e + 56, 1, 2);
  put(e + 58, 64, 2);
  put(e + 60, 3, 2);
  put(e + 62, 1, 2);
  static const char strings[] = "\0.strtab\0.symtab\0aot_fake_test_axpy\0aot_fake_test_shared";
  memcpy(e + 64, strings, sizeof strings); /* 57 bytes, NUL included */
  unsigned char* sym = e + 128;            /* [0] null; [1] axpy: FUNC GLOBAL entry; [2] shared: FUNC */
  put(sym + 24, 17, 4);
  sym[24 + 4] = 0x12;
  sym[24 + 5] = 0x10;
  put(sym + 24 + 6, 1, 2);
  put(sym + 48, 36, 4);
  sym[48 + 4] = 0x12;
  put(sym + 48 + 6, 1, 2);
  unsigned char* sh = e + 200; /* [0] null, [1] .strtab, [2] .symtab */
  put(sh + 64, 1, 4);
  put(sh + 64 + 4, 3, 4);
  put(sh + 64 + 24, 64, 8);
  put(sh + 64 + 32, sizeof strings, 8);
  put(sh + 128, 9, 4);
  put(sh + 128 + 4, 2, 4);
  put(sh + 128 + 24, 128, 8);
  put(sh + 128 + 32, 72, 8);
  put(sh + 128 + 40, 1, 4);
  put(sh + 128 + 56, 24, 8);
  unsigned char* ph = e + 392; /* one PT_LOAD over the symbol table */
  put(ph, 1, 4);
  put(ph + 8, 128, 8);
  put(ph + 32, 72, 8);
  memset(e + CUBIN_SIZE, 0xEE, 16);
}

/* ---- the tests ---------------------------------------------------------------------- */

static void test_before_init(void) {
  int version = 0, count = -1;
  CHECK(cu.driver_get_version(&version) == 0 && version == 12080, "version %d", version);
  const char* name = NULL;
  CHECK(cu.get_error_name(AOT__CUDA_ERROR_NOT_INITIALIZED, &name) == 0 && name &&
            strcmp(name, "CUDA_ERROR_NOT_INITIALIZED") == 0, "name %s", name ? name : "(null)");
  CHECK(cu.device_get_count(&count) == AOT__CUDA_ERROR_NOT_INITIALIZED, "count before cuInit");
  CUdeviceptr address;
  CHECK(cu.mem_alloc(&address, 64) == AOT__CUDA_ERROR_NOT_INITIALIZED, "alloc before cuInit");
  CHECK(cu.ctx_pop_current(NULL) == AOT__CUDA_ERROR_NOT_INITIALIZED, "pop before cuInit");
  CHECK(cu.init(1) == AOT__CUDA_ERROR_INVALID_VALUE, "cuInit(1)");
  CHECK(cu.init(0) == 0, "cuInit(0)");
}

static void test_errors(void) {
  const char *name = "x", *text = NULL;
  CHECK(cu.get_error_name(AOT__CUDA_ERROR_ILLEGAL_ADDRESS, &name) == 0 &&
            strcmp(name, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0, "700: %s", name);
  CHECK(cu.get_error_string(AOT__CUDA_ERROR_LAUNCH_FAILED, &text) == 0 &&
            strcmp(text, "unspecified launch failure") == 0, "719: %s", text);
  CHECK(cu.get_error_name(12345, &name) == AOT__CUDA_ERROR_INVALID_VALUE && name == NULL, "unknown code");
  CHECK(cu.get_error_name(0, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "NULL out");
}

static void test_devices(void) {
  int count = -1, value = -1;
  CUdevice device = -1;
  char name[64];
  size_t bytes = 0;
  CHECK(cu.device_get_count(&count) == 0 && count == 1, "default count %d", count);
  setenv("AOT_FAKE_CUDA_DEVICES", "0", 1);
  CHECK(cu.device_get_count(&count) == 0 && count == 0, "no devices: %d", count);
  CHECK(cu.device_get(&device, 0) == AOT__CUDA_ERROR_INVALID_DEVICE, "device 0 of 0");
  setenv("AOT_FAKE_CUDA_DEVICES", "2", 1);
  CHECK(cu.device_get_count(&count) == 0 && count == 2, "two devices: %d", count);
  CHECK(cu.device_get(&device, 1) == 0 && device == 1, "device 1");
  CHECK(cu.device_get(&device, 2) == AOT__CUDA_ERROR_INVALID_DEVICE, "device 2 of 2");
  CHECK(cu.device_get_name(name, sizeof name, 1) == 0 && strcmp(name, "aot fake GPU (sm_90)") == 0, "%s", name);
  CHECK(cu.device_get_attribute(&value, AOT__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) == 0 && value == 132,
        "SMs %d", value);
  CHECK(cu.device_get_attribute(&value, AOT__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0) == 0 &&
            value == 232448, "opt-in shared %d", value);
  CHECK(cu.device_get_attribute(&value, 12345, 0) == AOT__CUDA_ERROR_INVALID_VALUE, "unknown attribute");
  setenv("AOT_FAKE_CUDA_SM", "86", 1);
  int major = 0, minor = 0;
  CHECK(cu.device_get_attribute(&major, AOT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) == 0 &&
            cu.device_get_attribute(&minor, AOT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0) == 0 &&
            major == 8 && minor == 6, "sm %d.%d", major, minor);
  CHECK(cu.device_get_name(name, 8, 0) == 0 && strcmp(name, "aot fak") == 0, "truncated: %s", name);
  unsetenv("AOT_FAKE_CUDA_SM");
  CHECK(cu.device_total_mem(&bytes, 0) == 0 && bytes == 80ull << 30, "memory %zu", bytes);
  setenv("AOT_FAKE_CUDA_MEMORY", "4096", 1);
  CHECK(cu.device_total_mem(&bytes, 0) == 0 && bytes == 4096, "memory %zu", bytes);
  unsetenv("AOT_FAKE_CUDA_MEMORY");
  unsetenv("AOT_FAKE_CUDA_DEVICES");
}

static void test_no_context(void) {
  CUdeviceptr address;
  CUstream stream;
  CUgraph graph;
  CUmodule module;
  size_t free_bytes, total;
  CHECK(cu.mem_alloc(&address, 64) == AOT__CUDA_ERROR_INVALID_CONTEXT, "alloc");
  CHECK(cu.mem_get_info(&free_bytes, &total) == AOT__CUDA_ERROR_INVALID_CONTEXT, "mem info");
  CHECK(cu.stream_create(&stream, 0) == AOT__CUDA_ERROR_INVALID_CONTEXT, "stream");
  CHECK(cu.graph_create(&graph, 0) == AOT__CUDA_ERROR_INVALID_CONTEXT, "graph");
  CHECK(cu.module_load_data_ex(&module, FIXTURE_PTX, 0, NULL, NULL) == AOT__CUDA_ERROR_INVALID_CONTEXT, "module");
  CHECK(cu.ctx_pop_current(NULL) == AOT__CUDA_ERROR_INVALID_CONTEXT, "pop of an empty stack");
  CHECK(strstr(why(), "cuCtxPopCurrent_v2") != NULL, "the reason names the call: %s", why());
}

static CUcontext push_primary(CUdevice device) {
  CUcontext ctx = NULL;
  CHECK(cu.primary_ctx_retain(&ctx, device) == 0 && ctx, "retain %d", device);
  CHECK(cu.ctx_push_current(ctx) == 0, "push %d", device);
  return ctx;
}

static void pop_release(CUdevice device) {
  CHECK(cu.ctx_pop_current(NULL) == 0, "pop");
  CHECK(cu.primary_ctx_release(device) == 0, "release %d", device);
}

static void test_contexts(void) {
  CUcontext a = NULL, b = NULL, popped = NULL;
  CHECK(cu.primary_ctx_retain(&a, 0) == 0 && cu.primary_ctx_retain(&b, 0) == 0 && a == b, "one per device");
  CHECK(stat_of("primary_retains") == 2, "retains %llu", (unsigned long long)stat_of("primary_retains"));
  CHECK(cu.ctx_push_current(a) == 0 && cu.ctx_pop_current(&popped) == 0 && popped == a, "push, pop");
  CHECK(cu.primary_ctx_release(0) == 0 && cu.primary_ctx_release(0) == 0, "two releases");
  CHECK(cu.primary_ctx_release(0) == AOT__CUDA_ERROR_INVALID_CONTEXT, "a third release");
  CHECK(cu.ctx_push_current(a) == AOT__CUDA_ERROR_INVALID_CONTEXT, "push of a released context");
  CHECK(cu.ctx_push_current((CUcontext)&popped) == AOT__CUDA_ERROR_INVALID_CONTEXT, "push of a stranger");
  /* a context released while current is no context */
  CUdeviceptr address;
  push_primary(0);
  CHECK(cu.primary_ctx_release(0) == 0, "release while pushed");
  CHECK(cu.mem_alloc(&address, 64) == AOT__CUDA_ERROR_INVALID_CONTEXT, "alloc in a released context");
  CHECK(cu.ctx_pop_current(NULL) == 0, "pop");
  CHECK(stat_of("primary_retains") == 0, "retains %llu", (unsigned long long)stat_of("primary_retains"));
}

static void test_memory(void) {
  push_primary(0);
  CUdeviceptr a = 0, b = 0, other = 0;
  size_t free_bytes = 0, total = 0;
  unsigned char host[2048], back[2048];
  for (size_t i = 0; i < sizeof host; i++) host[i] = (unsigned char)i;
  CHECK(cu.mem_alloc(&a, 0) == AOT__CUDA_ERROR_INVALID_VALUE, "0 bytes");
  CHECK(cu.mem_alloc(&a, 1000) == 0 && a % 256 == 0, "1000 bytes at 0x%llx", (unsigned long long)a);
  CHECK(cu.mem_get_info(&free_bytes, &total) == 0 && total == 80ull << 30 && free_bytes == total - 1000,
        "free %zu of %zu", free_bytes, total);
  CHECK(cu.memcpy_htod_async(a, host, 1000, NULL) == 0, "upload");
  CHECK(cu.memcpy_dtoh_async(back, a + 10, 990, NULL) == 0 && memcmp(back, host + 10, 990) == 0, "download");
  CHECK(cu.memcpy_htod_async(a + 1, host, 1000, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "one byte past the end");
  CHECK(cu.memcpy_dtoh_async(back, a - 16, 16, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "before the start");
  CHECK(cu.memcpy_dtoh_async(back, a + 1000, 0, NULL) == 0, "nothing at the end");
  CHECK(cu.memcpy_htod_async(a, NULL, 8, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "NULL source");
  CHECK(cu.memcpy_htod_async(a, host, 8, (CUstream)host) == AOT_FAKE_CUDA_ERROR_INVALID_HANDLE, "no such stream");
  CHECK(cu.mem_alloc(&b, 1000) == 0 && b != a, "a second allocation");
  CHECK(cu.memcpy_htod_async(a + 512, host, 1000, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "across two");
  CHECK(cu.memcpy_dtoh_async(back, b, 4, NULL) == 0 && back[0] == 0xCD, "not zeroed: %d", back[0]);
  CHECK(cu.memcpy_dtod_async(b + 8, a + 16, 900, NULL) == 0 && cu.memcpy_dtoh_async(back, b + 8, 900, NULL) == 0 &&
            memcmp(back, host + 16, 900) == 0, "device to device");
  CHECK(cu.memcpy_dtod_async(b + 100, a, 901, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "to one byte past the end");
  CHECK(cu.memcpy_dtod_async(b, a + 100, 901, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "from one byte past the end");
  CHECK(cu.memcpy_dtod_async(a + 8, a, 16, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "overlapping ranges");
  CHECK(cu.memcpy_dtod_async(a + 16, a, 16, NULL) == 0, "adjacent ranges");
  int device = -1;
  CHECK(cu.pointer_get_attribute(&device, AOT__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b + 999) == 0 && device == 0,
        "ordinal %d", device);
  CHECK(cu.pointer_get_attribute(&device, AOT__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b + 1000) ==
            AOT__CUDA_ERROR_INVALID_VALUE, "past the end");
  CHECK(cu.mem_free(b) == 0 && cu.mem_free(b) == AOT__CUDA_ERROR_INVALID_VALUE, "double free");
  CHECK(cu.mem_free(a + 8) == AOT__CUDA_ERROR_INVALID_VALUE, "free inside an allocation");
  /* memory is counted against the device's total */
  setenv("AOT_FAKE_CUDA_MEMORY", "4096", 1);
  CHECK(cu.mem_alloc(&b, 3097) == AOT__CUDA_ERROR_OUT_OF_MEMORY, "over the total");
  CHECK(cu.mem_alloc(&b, 3096) == 0, "up to the total");
  CHECK(cu.mem_get_info(&free_bytes, &total) == 0 && free_bytes == 0 && total == 4096, "free %zu", free_bytes);
  CHECK(cu.mem_free(b) == 0, "free");
  unsetenv("AOT_FAKE_CUDA_MEMORY");
  /* another device's memory is not this context's */
  setenv("AOT_FAKE_CUDA_DEVICES", "2", 1);
  push_primary(1);
  CHECK(cu.mem_alloc(&other, 256) == 0, "alloc on device 1");
  CHECK(cu.pointer_get_attribute(&device, AOT__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, other) == 0 && device == 1,
        "ordinal %d", device);
  CHECK(cu.memcpy_htod_async(a, host, 8, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "device 0's memory on 1");
  CHECK(cu.ctx_pop_current(NULL) == 0, "pop 1");
  CHECK(cu.memcpy_htod_async(other, host, 8, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "device 1's memory on 0");
  CHECK(cu.mem_free(other) == 0, "free of device 1's memory");
  CHECK(cu.primary_ctx_release(1) == 0, "release 1");
  unsetenv("AOT_FAKE_CUDA_DEVICES");
  CHECK(cu.mem_free(a) == 0, "free");
  CHECK(stat_of("live_allocations") == 0, "live %llu", (unsigned long long)stat_of("live_allocations"));
  pop_release(0);
}

static int log_options[2] = {AOT__CU_JIT_ERROR_LOG_BUFFER, AOT__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};

static CUresult load(CUmodule* module, const void* image, char* log, size_t size) {
  void* values[2] = {log, (void*)(uintptr_t)size};
  log[0] = 0;
  return cu.module_load_data_ex(module, image, 2, log_options, values);
}

static void test_modules(void) {
  push_primary(0);
  CUmodule module = NULL;
  CUfunction f = NULL, again = NULL;
  char log[256];
  unsetenv("AOT_FAKE_CUDA_HOST_DIR");
  CHECK(load(&module, FIXTURE_PTX, log, sizeof log) == AOT__CUDA_ERROR_INVALID_PTX, "no host dir");
  CHECK(strstr(log, "AOT_FAKE_CUDA_HOST_DIR") != NULL, "log: %s", log);
  setenv("AOT_FAKE_CUDA_HOST_DIR", "/nonexistent-aot-dir", 1);
  CHECK(load(&module, FIXTURE_PTX, log, sizeof log) == AOT__CUDA_ERROR_INVALID_PTX, "missing library");
  CHECK(strstr(log, "no host code /nonexistent-aot-dir/") != NULL, "log: %s", log);
  CHECK(load(&module, FIXTURE_PTX, log, 12) == AOT__CUDA_ERROR_INVALID_PTX && strlen(log) == 11, "short log");
  setenv("AOT_FAKE_CUDA_HOST_DIR", g_host_dir, 1);
  CHECK(load(&module, "hello", log, sizeof log) == AOT__CUDA_ERROR_INVALID_IMAGE, "not an image");
  CHECK(load(&module, "// x\n.target sm_80\n.version 7.8\n", log, sizeof log) == AOT__CUDA_ERROR_INVALID_IMAGE,
        "PTX must open with .version");
  char newer[sizeof FIXTURE_PTX];
  memcpy(newer, FIXTURE_PTX, sizeof newer);
  memcpy(strstr(newer, "sm_80"), "sm_99", 5);
  CHECK(load(&module, newer, log, sizeof log) == AOT__CUDA_ERROR_NO_BINARY_FOR_GPU, "PTX for a newer SM: %s", log);
  CHECK(cu.module_load_data_ex(&module, FIXTURE_PTX, 1, NULL, NULL) == AOT__CUDA_ERROR_INVALID_VALUE, "options");
  CHECK(load(&module, FIXTURE_PTX, log, sizeof log) == 0 && log[0] == 0, "load: %s", why());
  CHECK(stat_of("live_modules") == 1, "modules %llu", (unsigned long long)stat_of("live_modules"));
  CHECK(cu.module_get_function(&f, module, "aot_fake_test_axpy") == 0 && f, "axpy: %s", why());
  CHECK(cu.module_get_function(&again, module, "aot_fake_test_axpy") == 0 && again == f, "one handle");
  CHECK(cu.module_get_function(&again, module, "aot_fake_test_ptx_only") == AOT__CUDA_ERROR_NOT_FOUND,
        "no host code");
  CHECK(cu.module_get_function(&again, module, "aot_fake_test_host_only") == AOT__CUDA_ERROR_NOT_FOUND,
        "not in the PTX");
  CHECK(cu.module_get_function(&again, module, "aot_fake_test") == AOT__CUDA_ERROR_NOT_FOUND, "a prefix");
  int value = 0;
  CHECK(cu.func_get_attribute(&value, AOT__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == 0 && value == 1024,
        "threads %d", value);
  CHECK(cu.func_get_attribute(&value, AOT__CU_FUNC_ATTRIBUTE_NUM_REGS, f) == 0 && value == 32, "regs %d", value);
  CHECK(cu.func_set_attribute(f, AOT__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232449) ==
            AOT__CUDA_ERROR_INVALID_VALUE, "above the opt-in");
  CHECK(cu.module_unload(module) == 0, "unload");
  CHECK(cu.module_unload(module) == AOT_FAKE_CUDA_ERROR_INVALID_HANDLE, "unload twice");
  CHECK(cu.func_get_attribute(&value, AOT__CU_FUNC_ATTRIBUTE_NUM_REGS, f) == AOT_FAKE_CUDA_ERROR_INVALID_HANDLE,
        "a function of an unloaded module");
  /* cubins: the SM in e_flags (two ABIs), the size from the headers, kernels from the symbol table */
  unsigned char cubin[CUBIN_SIZE + 16];
  write_cubin(cubin, 90, 8);
  install(cubin, CUBIN_SIZE);
  CHECK(load(&module, cubin, log, sizeof log) == 0, "sm_90 cubin: %s", log);
  CHECK(cu.module_get_function(&f, module, "aot_fake_test_axpy") == 0, "axpy in the cubin: %s", why());
  CHECK(cu.module_get_function(&f, module, "aot_fake_test_shared") == AOT__CUDA_ERROR_NOT_FOUND, "not an entry");
  CHECK(cu.module_get_function(&f, module, "aot_model_checks") == AOT__CUDA_ERROR_NOT_FOUND, "not in the cubin");
  CHECK(cu.module_unload(module) == 0, "unload");
  write_cubin(cubin, 86, 8);
  CHECK(load(&module, cubin, log, sizeof log) == AOT__CUDA_ERROR_NO_BINARY_FOR_GPU, "sm_86 on sm_90: %s", log);
  write_cubin(cubin, 80, 6);
  CHECK(load(&module, cubin, log, sizeof log) == AOT__CUDA_ERROR_NO_BINARY_FOR_GPU, "sm_80 on sm_90: %s", log);
  setenv("AOT_FAKE_CUDA_SM", "86", 1);
  CHECK(load(&module, cubin, log, sizeof log) == AOT__CUDA_ERROR_INVALID_IMAGE, "no library: %s", log);
  CHECK(strstr(log, "no host code") != NULL, "log: %s", log);
  install(cubin, CUBIN_SIZE);
  CHECK(load(&module, cubin, log, sizeof log) == 0, "old-ABI sm_80 cubin on sm_86: %s", log);
  CHECK(cu.module_unload(module) == 0, "unload");
  unsetenv("AOT_FAKE_CUDA_SM");
  cubin[18] = 62; /* EM_X86_64 */
  CHECK(load(&module, cubin, log, sizeof log) == AOT__CUDA_ERROR_INVALID_IMAGE, "not a CUDA ELF");
  /* a cubin whose section headers lie past mapped memory: refused, not read */
  long page = sysconf(_SC_PAGESIZE);
  unsigned char* pages = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(pages != MAP_FAILED && munmap(pages + page, (size_t)page) == 0, "a page and a hole");
  if (pages != MAP_FAILED) {
    write_cubin(cubin, 90, 8);
    unsigned char* last = pages + page - 256;
    memcpy(last, cubin, 200); /* the header, strings and symbols; the section headers would be in the hole */
    CHECK(load(&module, last, log, sizeof log) == AOT__CUDA_ERROR_INVALID_IMAGE, "headers in a hole: %s", log);
    munmap(pages, (size_t)page);
  }
  CHECK(stat_of("live_modules") == 0, "modules %llu", (unsigned long long)stat_of("live_modules"));
  pop_release(0);
}

typedef struct {
  CUmodule module;
  CUfunction axpy, checks, shared;
  CUdeviceptr x, y, status;
} loaded_t;

static loaded_t load_fixture(void) {
  loaded_t l;
  memset(&l, 0, sizeof l);
  CHECK(cu.module_load_data_ex(&l.module, FIXTURE_PTX, 0, NULL, NULL) == 0, "load: %s", why());
  CHECK(cu.module_get_function(&l.axpy, l.module, "aot_fake_test_axpy") == 0, "axpy");
  CHECK(cu.module_get_function(&l.checks, l.module, "aot_model_checks") == 0, "checks");
  CHECK(cu.module_get_function(&l.shared, l.module, "aot_fake_test_shared") == 0, "shared");
  float x[AXPY_N];
  for (int i = 0; i < AXPY_N; i++) x[i] = (float)i;
  CHECK(cu.mem_alloc(&l.x, sizeof x) == 0 && cu.mem_alloc(&l.y, sizeof x) == 0 && cu.mem_alloc(&l.status, 4) == 0,
        "alloc");
  CHECK(cu.memcpy_htod_async(l.x, x, sizeof x, NULL) == 0, "upload");
  return l;
}

static void unload_fixture(loaded_t* l) {
  CHECK(cu.mem_free(l->x) == 0 && cu.mem_free(l->y) == 0 && cu.mem_free(l->status) == 0, "free");
  CHECK(cu.module_unload(l->module) == 0, "unload");
}

static bool y_is_axpy(CUdeviceptr y, float offset) {
  float out[AXPY_N];
  if (cu.memcpy_dtoh_async(out, y, sizeof out, NULL)) return false;
  for (int i = 0; i < AXPY_N; i++)
    if (out[i] != 2 * ((float)i + offset) + 1) return false;
  return true;
}

static CUresult axpy(CUfunction f, unsigned grid, unsigned block, unsigned shared, CUstream stream, CUdeviceptr x,
                     CUdeviceptr y) {
  void* params[] = {&x, &y};
  return cu.launch_kernel(f, grid, 1, 1, block, 1, 1, shared, stream, params, NULL);
}

static void test_launch(void) {
  push_primary(0);
  loaded_t l = load_fixture();
  CUstream stream = NULL;
  CHECK(cu.stream_create(&stream, 2) == AOT__CUDA_ERROR_INVALID_VALUE, "stream flags 2");
  CHECK(cu.stream_create(&stream, AOT__CU_STREAM_NON_BLOCKING) == 0, "stream");
  uint64_t runs = stat_of("kernel_runs");
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, stream, l.x, l.y) == 0, "launch: %s", why());
  CHECK(stat_of("kernel_runs") == runs + 1, "one run");
  CHECK(cu.stream_synchronize(stream) == 0, "sync");
  CHECK(y_is_axpy(l.y, 0), "y = 2 x + 1");
  /* the launch must be the kernel's own, within the device's limits */
  CHECK(axpy(l.axpy, 2, AXPY_THREADS, 0, stream, l.x, l.y) == AOT__CUDA_ERROR_INVALID_VALUE, "grid 2");
  CHECK(strstr(why(), "its code wants grid (4, 1, 1)") != NULL, "why: %s", why());
  CHECK(axpy(l.axpy, AXPY_BLOCKS, 128, 0, stream, l.x, l.y) == AOT__CUDA_ERROR_INVALID_VALUE, "block 128");
  CHECK(axpy(l.axpy, AXPY_BLOCKS, 2048, 0, stream, l.x, l.y) == AOT__CUDA_ERROR_INVALID_VALUE, "block 2048");
  CHECK(axpy(l.axpy, AXPY_BLOCKS, 0, 0, stream, l.x, l.y) == AOT__CUDA_ERROR_INVALID_VALUE, "block 0");
  CHECK(axpy(l.axpy, 0, AXPY_THREADS, 0, stream, l.x, l.y) == AOT__CUDA_ERROR_INVALID_VALUE, "grid 0");
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 16, stream, l.x, l.y) == AOT__CUDA_ERROR_INVALID_VALUE,
        "shared bytes");
  void* params[] = {&l.x, &l.y};
  void* extra[] = {NULL};
  CHECK(cu.launch_kernel(l.axpy, AXPY_BLOCKS, 1, 1, AXPY_THREADS, 1, 1, 0, stream, params, extra) ==
            AOT__CUDA_ERROR_INVALID_VALUE, "extra");
  CHECK(cu.launch_kernel(l.axpy, AXPY_BLOCKS, 1, 1, AXPY_THREADS, 1, 1, 0, stream, NULL, NULL) ==
            AOT__CUDA_ERROR_INVALID_VALUE, "no params");
  /* dynamic shared memory above 48 KiB needs the function's opt-in first */
  void* shared_params[] = {&l.y};
  CHECK(cu.launch_kernel(l.shared, 1, 1, 1, 32, 1, 1, SHARED_BYTES, NULL, shared_params, NULL) ==
            AOT__CUDA_ERROR_INVALID_VALUE, "64 KiB without the opt-in");
  CHECK(cu.func_set_attribute(l.shared, AOT__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, SHARED_BYTES) == 0,
        "opt in");
  int value = 0;
  CHECK(cu.func_get_attribute(&value, AOT__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, l.shared) == 0 &&
            value == SHARED_BYTES, "recorded %d", value);
  CHECK(cu.launch_kernel(l.shared, 1, 1, 1, 32, 1, 1, SHARED_BYTES, NULL, shared_params, NULL) == 0,
        "64 KiB after the opt-in: %s", why());
  /* the checks kernel: its status word needs only int32 alignment */
  int32_t status = -1;
  CUdeviceptr status_at = l.status;
  void* check_params[] = {&l.x, &status_at};
  CHECK(cu.launch_kernel(l.checks, 1, 1, 1, 1, 1, 1, 0, NULL, check_params, NULL) == 0, "checks: %s", why());
  CHECK(cu.memcpy_dtoh_async(&status, l.status, 4, NULL) == 0 && status == 0, "status %d", status);
  /* a stream of this context only, alive */
  CHECK(cu.stream_destroy(stream) == 0, "destroy stream");
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, stream, l.x, l.y) == AOT_FAKE_CUDA_ERROR_INVALID_HANDLE,
        "destroyed stream");
  CHECK(cu.stream_destroy(stream) == AOT_FAKE_CUDA_ERROR_INVALID_HANDLE, "destroy twice");
  /* an argument outside every allocation is a fault: the context stays broken */
  CHECK(cu.stream_create(&stream, 0) == 0, "stream");
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, NULL, l.x, l.y + 4 * AXPY_N + 64) ==
            AOT__CUDA_ERROR_ILLEGAL_ADDRESS, "outside: %s", why());
  CHECK(stat_of("broken_contexts") == 1, "broken %llu", (unsigned long long)stat_of("broken_contexts"));
  CUdeviceptr more;
  CHECK(cu.mem_alloc(&more, 64) == AOT__CUDA_ERROR_ILLEGAL_ADDRESS, "alloc after the fault");
  CHECK(cu.stream_synchronize(stream) == AOT__CUDA_ERROR_ILLEGAL_ADDRESS, "sync after the fault");
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, NULL, l.x, l.y) == AOT__CUDA_ERROR_ILLEGAL_ADDRESS,
        "a good launch after the fault");
  const char* name = NULL;
  CHECK(cu.get_error_name(AOT__CUDA_ERROR_ILLEGAL_ADDRESS, &name) == 0, "names still work");
  CHECK(cu.stream_destroy(stream) == 0, "releases still work");
  unload_fixture(&l);
  pop_release(0);
  /* the last release destroys the context: the next retain gets a working one */
  CHECK(stat_of("broken_contexts") == 0 && stat_of("primary_retains") == 0, "released");
  push_primary(0);
  l = load_fixture();
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, NULL, l.x + 4, l.y) == AOT_FAKE_CUDA_ERROR_MISALIGNED_ADDRESS,
        "misaligned: %s", why());
  unload_fixture(&l);
  pop_release(0);
  push_primary(0);
  l = load_fixture();
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, NULL, l.x, l.y) == 0, "a fresh context: %s", why());
  unload_fixture(&l);
  pop_release(0);
  /* another device's function */
  setenv("AOT_FAKE_CUDA_DEVICES", "2", 1);
  push_primary(0);
  l = load_fixture();
  push_primary(1);
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, NULL, l.x, l.y) == AOT__CUDA_ERROR_INVALID_VALUE,
        "device 0's function on device 1");
  pop_release(1);
  unload_fixture(&l);
  pop_release(0);
  unsetenv("AOT_FAKE_CUDA_DEVICES");
}

static aot__cuda_kernel_node_params_t node_params(CUfunction f, void** params) {
  aot__cuda_kernel_node_params_t p;
  memset(&p, 0, sizeof p);
  p.func = f;
  p.grid_x = AXPY_BLOCKS;
  p.grid_y = p.grid_z = 1;
  p.block_x = AXPY_THREADS;
  p.block_y = p.block_z = 1;
  p.kernel_params = params;
  return p;
}

static void test_graphs(void) {
  push_primary(0);
  loaded_t l = load_fixture();
  CUdeviceptr y2;
  CHECK(cu.mem_alloc(&y2, 4 * AXPY_N) == 0, "alloc");
  CUgraph graph = NULL, other = NULL;
  CUgraphNode first = NULL, second = NULL, stranger = NULL;
  CUgraphExec exec = NULL;
  CHECK(cu.graph_create(&graph, 1) == AOT__CUDA_ERROR_INVALID_VALUE, "graph flags");
  CHECK(cu.graph_create(&graph, 0) == 0 && cu.graph_create(&other, 0) == 0, "graphs");
  CUdeviceptr x = l.x, y = l.y, status = l.status;
  void* params[] = {&x, &y};
  aot__cuda_kernel_node_params_t p = node_params(l.axpy, params);
  CHECK(cu.graph_add_kernel_node(&first, graph, NULL, 0, &p) == 0, "node: %s", why());
  CHECK(cu.graph_add_kernel_node(&stranger, other, NULL, 0, &p) == 0, "a node of the other graph");
  y = y2; /* the values were copied at add time */
  void* check_params[] = {&x, &status};
  aot__cuda_kernel_node_params_t c = node_params(l.checks, check_params);
  c.grid_x = c.block_x = 1;
  CHECK(cu.graph_add_kernel_node(&second, graph, &stranger, 1, &c) == AOT__CUDA_ERROR_INVALID_VALUE,
        "a dependency in another graph");
  CHECK(cu.graph_add_kernel_node(&second, graph, &first, 1, &c) == 0, "dependent node");
  c.kern = &c;
  CHECK(cu.graph_add_kernel_node(&second, graph, &first, 1, &c) == AOT__CUDA_ERROR_INVALID_VALUE, "kern set");
  c.kern = NULL;
  p.grid_x = 2;
  CHECK(cu.graph_add_kernel_node(&stranger, graph, NULL, 0, &p) == AOT__CUDA_ERROR_INVALID_VALUE, "grid 2 node");
  p.grid_x = AXPY_BLOCKS;
  CHECK(cu.graph_instantiate(&exec, graph, 1) == AOT__CUDA_ERROR_INVALID_VALUE, "instantiate flags");
  CHECK(cu.graph_instantiate(&exec, graph, 0) == 0, "instantiate");
  uint64_t runs = stat_of("kernel_runs"), launches = stat_of("cuGraphLaunch");
  CHECK(cu.graph_launch(exec, NULL) == 0, "graph launch: %s", why());
  CHECK(y_is_axpy(l.y, 0), "the graph's axpy wrote y");
  float bumped[AXPY_N];
  for (int i = 0; i < AXPY_N; i++) bumped[i] = (float)i + 1;
  CHECK(cu.memcpy_htod_async(l.x, bumped, sizeof bumped, NULL) == 0, "new x");
  CHECK(cu.graph_launch(exec, NULL) == 0, "replay");
  CHECK(y_is_axpy(l.y, 1), "the replay read the new x");
  CHECK(stat_of("kernel_runs") == runs + 4 && stat_of("cuGraphLaunch") == launches + 2, "two nodes, twice");
  /* new arguments in the exec only */
  y = y2;
  CHECK(cu.graph_exec_kernel_node_set_params(exec, first, &p) == 0, "set params: %s", why());
  CHECK(cu.graph_launch(exec, NULL) == 0 && y_is_axpy(y2, 1), "the exec writes y2");
  CHECK(cu.graph_exec_kernel_node_set_params(exec, stranger, &p) == AOT__CUDA_ERROR_INVALID_VALUE, "a stranger");
  CHECK(cu.graph_exec_kernel_node_set_params(exec, first, &c) == AOT__CUDA_ERROR_INVALID_VALUE, "another function");
  CUgraphExec exec2 = NULL;
  CHECK(cu.graph_instantiate(&exec2, graph, 0) == 0, "instantiate again");
  y = l.y;
  CHECK(cu.memcpy_htod_async(l.y, bumped, sizeof bumped, NULL) == 0, "clobber y");
  CHECK(cu.graph_launch(exec2, NULL) == 0 && y_is_axpy(l.y, 1), "the graph itself kept y");
  /* the v1 names take the v1 struct */
  CUgraphNode third = NULL;
  CHECK(cu_v1.graph_add_kernel_node(&third, graph, &second, 1, &p) == 0, "v1 add: %s", why());
  CHECK(cu_v1.graph_exec_kernel_node_set_params(exec2, first, &p) == 0, "v1 set params: %s", why());
  CHECK(cu_v1.graph_exec_kernel_node_set_params(exec2, third, &p) == AOT__CUDA_ERROR_INVALID_VALUE,
        "a node added after the instantiation");
  CHECK(cu.graph_exec_destroy(exec2) == 0, "destroy exec2");
  /* an argument freed before a replay is a fault */
  CHECK(cu.graph_exec_kernel_node_set_params(exec, first, &p) == 0, "back to y");
  CHECK(cu.mem_free(y2) == 0, "free y2");
  CHECK(cu.graph_launch(exec, NULL) == 0, "the exec no longer uses y2");
  y = y2;
  CHECK(cu.graph_exec_kernel_node_set_params(exec, first, &p) == 0, "a freed buffer");
  CHECK(cu.graph_launch(exec, NULL) == AOT__CUDA_ERROR_ILLEGAL_ADDRESS, "replay over freed memory");
  CHECK(cu.graph_exec_destroy(exec) == 0 && cu.graph_destroy(graph) == 0 && cu.graph_destroy(other) == 0,
        "destroy");
  CHECK(cu.graph_destroy(graph) == AOT_FAKE_CUDA_ERROR_INVALID_HANDLE, "destroy twice");
  CHECK(stat_of("live_graphs") == 0 && stat_of("live_execs") == 0, "graphs left");
  unload_fixture(&l);
  pop_release(0);
}

static void test_faults(void) {
  push_primary(0);
  CUdeviceptr a = 0, b = 0, c = 0;
  setenv("AOT_FAKE_CUDA_FAIL", "cuMemAlloc_v2:2=2", 1);
  CHECK(cu.mem_alloc(&a, 64) == 0, "first");
  CHECK(cu.mem_alloc(&b, 64) == AOT__CUDA_ERROR_OUT_OF_MEMORY && b == 0, "second fails, writes nothing");
  CHECK(cu.mem_alloc(&b, 64) == 0, "third");
  reset_faults();
  CHECK(cu.mem_alloc(&c, 64) == 0, "first again");
  CHECK(cu.mem_alloc(&c, 64) == AOT__CUDA_ERROR_OUT_OF_MEMORY, "second again");
  CHECK(cu.mem_free(a) == 0 && cu.mem_free(b) == 0 && cu.mem_free(c) == 0, "free");
  setenv("AOT_FAKE_CUDA_FAIL", "cuStreamCreate:*=CUDA_ERROR_UNKNOWN, bogus,cuMemFree_v2:x=1", 1);
  CUstream stream;
  CHECK(cu.stream_create(&stream, 0) == 999 && cu.stream_create(&stream, 0) == 999, "every call");
  CHECK(cu.mem_alloc(&a, 64) == 0 && cu.mem_free(a) == 0, "malformed rules do nothing");
  /* an injected launch failure breaks the context like a real one */
  loaded_t l = load_fixture();
  setenv("AOT_FAKE_CUDA_FAIL", "cuLaunchKernel:2=CUDA_ERROR_LAUNCH_FAILED", 1);
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, NULL, l.x, l.y) == 0, "first launch");
  CHECK(axpy(l.axpy, AXPY_BLOCKS, AXPY_THREADS, 0, NULL, l.x, l.y) == AOT__CUDA_ERROR_LAUNCH_FAILED, "second");
  CHECK(cu.stream_synchronize(NULL) == AOT__CUDA_ERROR_LAUNCH_FAILED, "sticky");
  unsetenv("AOT_FAKE_CUDA_FAIL");
  unload_fixture(&l);
  pop_release(0);
  push_primary(0);
  CHECK(cu.stream_synchronize(NULL) == 0, "a fresh context");
  pop_release(0);
}

/* a thread's own context, module, buffers and launches; its count of failed calls in *arg
 * (CHECK is not thread-safe) */
static void* worker(void* arg) {
  int* result = arg;
  CUdevice device = *result;
  CUcontext ctx = NULL;
  CUmodule module = NULL;
  CUfunction f = NULL;
  CUdeviceptr x = 0, y = 0;
  float host[AXPY_N];
  for (int i = 0; i < AXPY_N; i++) host[i] = (float)i;
  int failed = cu.primary_ctx_retain(&ctx, device) != 0;
  failed += cu.ctx_push_current(ctx) != 0;
  failed += cu.module_load_data_ex(&module, FIXTURE_PTX, 0, NULL, NULL) != 0;
  failed += cu.module_get_function(&f, module, "aot_fake_test_axpy") != 0;
  failed += cu.mem_alloc(&x, sizeof host) != 0 || cu.mem_alloc(&y, sizeof host) != 0;
  failed += cu.memcpy_htod_async(x, host, sizeof host, NULL) != 0;
  for (int i = 0; i < 20; i++) failed += axpy(f, AXPY_BLOCKS, AXPY_THREADS, 0, NULL, x, y) != 0 || !y_is_axpy(y, 0);
  failed += cu.mem_free(x) != 0 || cu.mem_free(y) != 0 || cu.module_unload(module) != 0;
  failed += cu.ctx_pop_current(NULL) != 0 || cu.primary_ctx_release(device) != 0;
  *result = failed;
  return NULL;
}

static void test_threads(void) {
  setenv("AOT_FAKE_CUDA_DEVICES", "2", 1);
  int results[4] = {0, 1, 0, 1}; /* in: the device; out: failed calls */
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) CHECK(pthread_create(&threads[i], NULL, worker, &results[i]) == 0, "thread");
  for (int i = 0; i < 4; i++) {
    pthread_join(threads[i], NULL);
    CHECK(results[i] == 0, "thread %d: %d calls failed", i, results[i]);
  }
  /* a context is per thread: this one has none */
  CUdeviceptr a;
  CHECK(cu.mem_alloc(&a, 64) == AOT__CUDA_ERROR_INVALID_CONTEXT, "no context here");
  unsetenv("AOT_FAKE_CUDA_DEVICES");
}

static void test_leaks(void) {
  CHECK(stat_of("live_allocations") == 0 && stat_of("live_modules") == 0 && stat_of("live_streams") == 0 &&
            stat_of("live_graphs") == 0 && stat_of("live_execs") == 0 && stat_of("primary_retains") == 0 &&
            stat_of("used_bytes") == 0 && stat_of("destroyed_with_context") == 0,
        "left alive: %llu allocations, %llu modules, %llu streams, %llu retains",
        (unsigned long long)stat_of("live_allocations"), (unsigned long long)stat_of("live_modules"),
        (unsigned long long)stat_of("live_streams"), (unsigned long long)stat_of("primary_retains"));
  CHECK(stat_of("no such stat") == UINT64_MAX, "unknown stat");
  /* what a context still holds at its last release is destroyed with it, and counted */
  push_primary(0);
  CUdeviceptr a;
  CUstream stream;
  CHECK(cu.mem_alloc(&a, 64) == 0 && cu.stream_create(&stream, 0) == 0, "leak two");
  pop_release(0);
  CHECK(stat_of("destroyed_with_context") == 2 && stat_of("live_allocations") == 0, "destroyed %llu",
        (unsigned long long)stat_of("destroyed_with_context"));
}

/* the scratch directory goes, with the links install() made */
static void remove_host_dir(void) {
  DIR* dir = opendir(g_host_dir);
  if (!dir) return;
  char path[PATH_MAX + 300];
  for (struct dirent* entry; (entry = readdir(dir));) {
    if (entry->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", g_host_dir, entry->d_name);
    unlink(path);
  }
  closedir(dir);
  rmdir(g_host_dir);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s <libcuda.so.1> <fixture.so> <scratch dir>\n", argv[0]);
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    fprintf(stderr, "cannot open %s: %s\n", argv[1], dlerror());
    return 1;
  }
  if (!realpath(argv[2], g_fixture)) {
    fprintf(stderr, "no fixture %s\n", argv[2]);
    return 1;
  }
  snprintf(g_host_dir, sizeof g_host_dir, "%s/host-XXXXXX", argv[3]);
  if (!mkdtemp(g_host_dir)) {
    fprintf(stderr, "cannot make a directory under %s\n", argv[3]);
    return 1;
  }
  unsetenv("AOT_FAKE_CUDA_FAIL");
  resolve(library);
  if (g_failures) return 1;
  install(FIXTURE_PTX, strlen(FIXTURE_PTX));
  test_before_init();
  test_errors();
  test_devices();
  test_no_context();
  test_contexts();
  test_memory();
  test_modules();
  setenv("AOT_FAKE_CUDA_HOST_DIR", g_host_dir, 1);
  test_launch();
  test_graphs();
  test_faults();
  test_threads();
  test_leaks();
  remove_host_dir();
  printf("fake CUDA driver: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}

#endif
