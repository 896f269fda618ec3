/* fake_cuda.h - what the test stand-in for libcuda.so.1 (fake_cuda.c) and the host-code
 * libraries it runs agree on: the exported kernel table of a library, the module key that
 * names a library after the GPU image it stands for, and the stand-in's own exports for
 * tests. aot/codegen/nvptx/host_library.py writes the libraries (the same layout, in LLVM
 * IR); test_fake_cuda.c writes a tiny one in C. Test code only: nothing here is part of the
 * runtime or its ABI. */
#ifndef AOT_FAKE_CUDA_H_
#define AOT_FAKE_CUDA_H_

#include <stddef.h>
#include <stdint.h>

/* One kernel of a host-code library: `run(params)` runs every block of the kernel's host
 * build at once, each params[i] pointing to one uint64 device address (the kernelParams
 * convention of cuLaunchKernel); the launch it must get is grid x block with shared_bytes
 * of dynamic shared memory. 56 bytes, no padding but after shared_bytes. */
typedef struct aot_fake_kernel_record {
  const char* symbol;
  void (*run)(void** params);
  uint32_t param_count;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  int64_t blocks;
} aot_fake_kernel_record_t;

/* driver result codes the stand-in answers beyond cuda_api.h's (the driver's values) */
#define AOT_FAKE_CUDA_ERROR_INVALID_HANDLE 400
#define AOT_FAKE_CUDA_ERROR_MISALIGNED_ADDRESS 716

/* the library's exports: aot_fake_kernel_record_t[count] and uint32_t count */
#define AOT_FAKE_KERNEL_TABLE "aot_fake_kernel_table"
#define AOT_FAKE_KERNEL_COUNT "aot_fake_kernel_count"

/* A library stands for the module image whose key it is named after: "<key>.so" in the
 * directory AOT_FAKE_CUDA_HOST_DIR names, the key 16 lowercase hex digits of the 64-bit
 * FNV-1a hash of the image's bytes (a PTX text without its NUL, a cubin's whole ELF). */
static inline uint64_t aot_fake_fnv1a(const void* data, size_t size) {
  const unsigned char* bytes = (const unsigned char*)data;
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; i++) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

/* The stand-in's exports beside the driver's entry points (for tests, through dlsym):
 *   uint64_t aot_fake_cuda_stat(const char* what)
 *     calls of one entry point by symbol name ("cuLaunchKernel"), or "live_allocations",
 *     "live_modules", "live_functions", "live_streams", "live_graphs", "live_execs",
 *     "primary_retains" (the primary contexts' reference counts, summed), "used_bytes",
 *     "kernel_runs" (host kernels run, by launches and graph launches), "broken_contexts"
 *     (retained contexts holding a sticky error), "destroyed_with_context" (objects still
 *     alive when their context's last reference went: leaks); UINT64_MAX for any other name.
 *   void aot_fake_cuda_reset_faults(void)
 *     restart the AOT_FAKE_CUDA_FAIL call counts (they also restart when its value changes).
 *   size_t aot_fake_cuda_last_rejection(char* out, size_t size)
 *     why the last failing call failed, NUL-terminated in out; returns its length. */
typedef uint64_t (*aot_fake_cuda_stat_fn)(const char* what);
typedef void (*aot_fake_cuda_reset_faults_fn)(void);
typedef size_t (*aot_fake_cuda_last_rejection_fn)(char* out, size_t size);

#endif /* AOT_FAKE_CUDA_H_ */
