/* aot_runtime.h - C runtime for artifacts produced by the aot compiler.
 *
 * This header is an ABI: fixed-width types, opaque handles, options structs
 * that begin with their own size. The rule for changing it: append only
 * (nothing is removed, renumbered, reordered or resized), and every addition
 * (a function, a status, a dtype, a field at the end of an options struct)
 * bumps AOT_ABI_VERSION and is marked with the first version that has it, so
 * a caller that needs it checks aot_abi_version() >= that version.
 *
 * AOT_FORMAT_VERSION is the artifact format's version, separate from the ABI:
 * a runtime opens artifacts of exactly that format (packaging/FORMAT.md) and
 * refuses others with AOT_ERR_UNSUPPORTED, saying which side to update.
 *
 * Thread-safety:
 *   - aot_model_t is immutable after aot_model_open_*: any number of threads
 *     may query it and create contexts from it concurrently. It must outlive
 *     every context created from it.
 *   - aot_context_t owns an arena and a thread pool; one thread at a time may
 *     call aot_run on a given context. Different contexts run concurrently.
 *   - aot_model_close and aot_context_destroy mark the handle dead before
 *     freeing it, so the common mistake (aot_run on a destroyed context or a
 *     context of a closed model, a query on a closed model, a second close)
 *     returns AOT_ERR_INVALID_ARGUMENT or does nothing instead of crashing.
 *     This holds only until the freed memory is reused: a safety net, not
 *     permission to use a handle after closing it.
 *
 * Errors: every fallible call returns an aot_status_t and, when out_error is
 * not NULL, fills it with the same code and a NUL-terminated message. The
 * library never prints, aborts or exits.
 *
 * Trust: the container (offsets, sizes, checksums, manifest) is validated
 * before use and a damaged file is an error, never a crash. The manifest is
 * also compared with the code's own record of what it was built for (arena,
 * weights, tensor sizes, kernels), so an edited manifest is refused too. The
 * CPU code in an artifact is native code and runs with the caller's
 * privileges: only load artifacts from sources you trust to run code
 * (checksums detect damage, not tampering).
 *
 * Memory: an artifact cannot make the runtime allocate more than its code
 * needs: the manifest is at most 16 MiB (its parse tree at most 128 MiB), a
 * code section at most 256 MiB, and the weights and arena exactly what the
 * code was built for, each checked before it is decoded or allocated. A
 * caller that wants a lower ceiling sets aot_model_options_t.max_memory_bytes.
 */
#ifndef AOT_RUNTIME_H_
#define AOT_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define AOT_API
#else
#define AOT_API __attribute__((visibility("default")))
#endif

#define AOT_ABI_VERSION 7u /* 2: AOT_ERR_CHECK_FAILED, dtypes 11-17; 3: aot_model_options_t and
                                 aot_model_open_{file,memory}_with_options; 4: GPU execution
                                 (AOT_ERR_NO_DEVICE, AOT_ERR_DEVICE, aot_context_options_t's
                                 device fields, aot_run_device, aot_context_device,
                                 aot_context_cuda_stream, aot_device_*); 5: buffer donation
                                 (aot_model_donation_count, aot_model_donation); 6:
                                 aot_model_cpu_variant; 7: thread pools for statically
                                 linked models (aot_pool_*, aot_program_t) */
#define AOT_FORMAT_VERSION 2u /* 2: the tooling section; the manifest holds runtime fields only */
#define AOT_ERROR_MESSAGE_SIZE 512

typedef enum aot_status {
  AOT_OK = 0,
  AOT_ERR_INVALID_ARGUMENT = 1, /* bad pointer, count or option */
  AOT_ERR_IO = 2,               /* the file cannot be opened or read */
  AOT_ERR_FORMAT = 3,           /* malformed container or manifest */
  AOT_ERR_CHECKSUM = 4,         /* a CRC-32 does not match */
  AOT_ERR_UNSUPPORTED = 5,      /* unknown version/codec, no code for this CPU, or code
                                   that needs x86 features this CPU (or its OS) lacks: the
                                   message names every one */
  AOT_ERR_NO_MEMORY = 6,         /* malloc failed, or over max_memory_bytes */
  AOT_ERR_SHAPE_MISMATCH = 7,   /* a tensor's rank, dims or byte size differ */
  AOT_ERR_DTYPE_MISMATCH = 8,
  AOT_ERR_INTERNAL = 9,         /* dlopen/dlsym/pthread failures */
  /* ABI version 2 */
  AOT_ERR_CHECK_FAILED = 10,    /* aot_run: a run-time check of the model failed, e.g. an ONNX If
                                   selected a branch that cannot run at the compiled shapes; the
                                   message says which and why; the outputs are unspecified */
  /* ABI version 4 */
  AOT_ERR_NO_DEVICE = 11,       /* a CUDA context cannot be had: no CUDA driver (libcuda.so.1 does
                                   not load), no device with that ordinal, or no GPU code in the
                                   artifact for the device's architecture; the message says which */
  AOT_ERR_DEVICE = 12           /* the CUDA driver failed a call: the message names the call, the
                                   driver's name for the error (CUDA_ERROR_...) and, for a launch,
                                   the kernel */
} aot_status_t;

typedef struct aot_error {
  aot_status_t code;
  char message[AOT_ERROR_MESSAGE_SIZE];
} aot_error_t;

typedef enum aot_dtype {
  AOT_DTYPE_INVALID = 0,
  AOT_DTYPE_FLOAT32 = 1,
  AOT_DTYPE_FLOAT64 = 2,
  AOT_DTYPE_FLOAT16 = 3,
  AOT_DTYPE_BFLOAT16 = 4,
  AOT_DTYPE_INT8 = 5,
  AOT_DTYPE_INT16 = 6,
  AOT_DTYPE_INT32 = 7,
  AOT_DTYPE_INT64 = 8,
  AOT_DTYPE_UINT8 = 9,
  AOT_DTYPE_BOOL = 10, /* one byte, 0 or 1 */
  /* ABI version 2 (builds late in version 1 had them before the rule above; a
     caller relies on them from 2): a runtime without them refuses their names in
     a manifest (AOT_ERR_UNSUPPORTED), it never misreads them */
  AOT_DTYPE_UINT16 = 11,
  AOT_DTYPE_UINT32 = 12,
  AOT_DTYPE_UINT64 = 13,
  /* float8, one byte each: ONNX FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ */
  AOT_DTYPE_FLOAT8E4M3FN = 14,
  AOT_DTYPE_FLOAT8E4M3FNUZ = 15,
  AOT_DTYPE_FLOAT8E5M2 = 16,
  AOT_DTYPE_FLOAT8E5M2FNUZ = 17
} aot_dtype_t;

typedef struct aot_model aot_model_t;
typedef struct aot_context aot_context_t;

/* Where a context runs the model (ABI version 4). */
typedef enum aot_device_kind {
  AOT_DEVICE_CPU = 0, /* the artifact's CPU code, on the calling thread and the context's pool */
  AOT_DEVICE_CUDA = 1 /* the artifact's GPU code on an NVIDIA GPU, through the CUDA driver */
} aot_device_kind_t;

/* aot_context_options_t.flags (ABI version 4) */
#define AOT_CONTEXT_NO_CUDA_GRAPH 1u /* launch the kernels one by one on every run instead of
                                        replaying one CUDA graph of them (the default) */

typedef struct aot_context_options {
  uint32_t struct_size; /* sizeof(aot_context_options_t) */
  uint32_t num_threads; /* 0 or 1: run the entry on the calling thread;
                           n > 1: a pool of n-1 workers plus the caller.
                           Kernels too small to pay for a hand-off run on the
                           caller (judged by the compiler's estimate, then by
                           their times in the context's first two runs, which
                           run such kernels on the caller), and a model with
                           only such kernels starts no workers. The workers poll (yielding the CPU)
                           while a run is in flight and for 50 us after it,
                           then sleep, so give a context no more threads than
                           it has cores; ignored by a CUDA context */
  /* ABI version 4 */
  uint32_t device;        /* aot_device_kind_t: AOT_DEVICE_CPU (0, the default) or
                             AOT_DEVICE_CUDA */
  int32_t device_ordinal; /* AOT_DEVICE_CUDA: the GPU, as the driver numbers them (0 default) */
  uint32_t flags;         /* AOT_CONTEXT_* bits; 0 by default */
  uint32_t reserved;      /* 0 */
} aot_context_options_t;

/* Options for opening a model (ABI version 3). Append-only: struct_size first, and a
 * runtime reads only the fields the caller's struct_size covers. */
typedef struct aot_model_options {
  uint32_t struct_size;      /* sizeof(aot_model_options_t) */
  uint32_t reserved;         /* 0 */
  uint64_t max_memory_bytes; /* 0: no limit beyond the artifact's own (see Memory above).
                                Else the most bytes the model may need: while opening (the
                                file's bytes for open_file, the manifest and its parse tree,
                                the code image, twice while it is loaded) and after (weights,
                                code, and one context's arena). Each is counted before it is
                                allocated or decoded; the one that would pass the limit fails
                                with AOT_ERR_NO_MEMORY naming it and the sizes. */
} aot_model_options_t;

/* Describes a model input or output. Pointers are owned by the model and
 * valid until aot_model_close. */
typedef struct aot_tensor_info {
  const char* name;
  aot_dtype_t dtype;
  uint32_t rank;
  const int64_t* shape; /* rank entries (NULL allowed when rank == 0) */
  uint64_t byte_size;   /* product(shape) * element size */
} aot_tensor_info_t;

/* A caller-owned tensor buffer, dense row-major (C order). */
typedef struct aot_tensor {
  aot_dtype_t dtype;
  uint32_t rank;
  const int64_t* shape;
  void* data; /* may be NULL only when byte_size == 0 */
  uint64_t byte_size;
} aot_tensor_t;

AOT_API uint32_t aot_abi_version(void);
AOT_API const char* aot_status_string(aot_status_t status);
/* Size in bytes of one element, 0 for an unknown dtype. */
AOT_API uint32_t aot_dtype_size(aot_dtype_t dtype);
/* "float32", ... as in the manifest; "invalid" for an unknown dtype. */
AOT_API const char* aot_dtype_name(aot_dtype_t dtype);

/* Open an artifact. open_memory copies what it needs: `data` may be freed
 * as soon as the call returns. */
AOT_API aot_status_t aot_model_open_file(const char* path, aot_model_t** out_model,
                                         aot_error_t* out_error);
AOT_API aot_status_t aot_model_open_memory(const void* data, size_t size,
                                           aot_model_t** out_model,
                                           aot_error_t* out_error);
/* The same, with options (NULL: the defaults, as the calls above). ABI version 3. */
AOT_API aot_status_t aot_model_open_file_with_options(const char* path,
                                                      const aot_model_options_t* options,
                                                      aot_model_t** out_model,
                                                      aot_error_t* out_error);
AOT_API aot_status_t aot_model_open_memory_with_options(const void* data, size_t size,
                                                        const aot_model_options_t* options,
                                                        aot_model_t** out_model,
                                                        aot_error_t* out_error);
AOT_API void aot_model_close(aot_model_t* model); /* NULL is a no-op */

AOT_API uint32_t aot_model_input_count(const aot_model_t* model);
AOT_API uint32_t aot_model_output_count(const aot_model_t* model);
AOT_API aot_status_t aot_model_input_info(const aot_model_t* model, uint32_t index,
                                          aot_tensor_info_t* out_info,
                                          aot_error_t* out_error);
AOT_API aot_status_t aot_model_output_info(const aot_model_t* model, uint32_t index,
                                           aot_tensor_info_t* out_info,
                                           aot_error_t* out_error);
/* Bytes of scratch memory each context allocates for the model. */
AOT_API uint64_t aot_model_arena_bytes(const aot_model_t* model);
/* Model name from the manifest ("" when absent); owned by the model. */
AOT_API const char* aot_model_name(const aot_model_t* model);
/* ABI version 6. The CPU code variant the model loaded: the chosen manifest "cpu" entry's
 * CPU name ("x86-64-v4"), the first for this architecture whose features the CPU has, or
 * the one the environment variable AOT_CPU_VARIANT names; "" for a GPU-only artifact or an
 * unnamed entry. Owned by the model. */
AOT_API const char* aot_model_cpu_variant(const aot_model_t* model);

AOT_API aot_status_t aot_context_create(const aot_model_t* model,
                                        const aot_context_options_t* options,
                                        aot_context_t** out_context,
                                        aot_error_t* out_error);
AOT_API void aot_context_destroy(aot_context_t* context); /* NULL is a no-op */

/* Run the model. inputs/outputs are in manifest order; each tensor's dtype,
 * rank, dims and byte_size must equal the model's. Outputs are written into
 * the caller's buffers, which must not overlap the inputs (AOT_ERR_INVALID_ARGUMENT),
 * but that a donated output (aot_model_donation) may be the very buffer of its
 * input: then it is updated in place and nothing is copied; given two buffers,
 * the run copies the input into the output's buffer first and leaves the input's
 * as it was. A model compiled
 * with run-time checks returns AOT_ERR_CHECK_FAILED, with the first failing
 * check's message, when these inputs need what was not compiled; the outputs
 * are then unspecified. Which check fails does not depend on num_threads. */
AOT_API aot_status_t aot_run(aot_context_t* context, const aot_tensor_t* inputs,
                             uint32_t input_count, aot_tensor_t* outputs,
                             uint32_t output_count, aot_error_t* out_error);

/* ---- GPU execution (ABI version 4) ----
 *
 * A context created with device AOT_DEVICE_CUDA runs the artifact's GPU code (an artifact
 * compiled with --target cuda or cpu,cuda) on the GPU `device_ordinal`. The runtime reaches
 * the GPU through the CUDA driver, opened at run time (dlopen of libcuda.so.1, or the file
 * the environment variable AOT_CUDA_DRIVER names): it needs no CUDA at build time, and a
 * machine without a driver gets AOT_ERR_NO_DEVICE ("no CUDA driver ...") from
 * aot_context_create, never a failed load.
 *
 * The first CUDA context of a model on a device loads the GPU code there (the cubin built
 * for the device's architecture, else the PTX of the newest architecture not above it,
 * compiled by the driver) and copies the weights to it; the model's later contexts on that
 * device share both, and aot_model_close frees them. Each context owns a stream and a
 * device arena, so contexts run concurrently. The CPU memory limit (max_memory_bytes) does
 * not count device memory; a context whose arena and buffers do not fit in the device's
 * free memory is refused with AOT_ERR_NO_MEMORY.
 *
 * On a CUDA context, aot_run takes host tensors: it copies the inputs to the device, runs,
 * copies the outputs back, and returns when they are in the caller's buffers. The calling
 * thread need not have any CUDA context current; the runtime leaves the thread's current
 * context as it found it. */

/* The context's device: AOT_DEVICE_CPU or AOT_DEVICE_CUDA; *out_ordinal (may be NULL) gets
 * its CUDA device ordinal, -1 for a CPU context. A dead context is AOT_DEVICE_CPU, -1. */
AOT_API aot_device_kind_t aot_context_device(const aot_context_t* context, int32_t* out_ordinal);

/* The CUstream a CUDA context runs on (one it created, non-blocking); NULL for a CPU
 * context. A caller may order its own work after a run's with it. */
AOT_API void* aot_context_cuda_stream(const aot_context_t* context);

/* Run a CUDA context's model on tensors already on its device: each data pointer is a
 * device address (CUdeviceptr) on the context's device, at least 16-byte aligned, dense
 * row-major; shapes, dtypes and byte sizes as for aot_run; outputs must not overlap inputs
 * but as aot_run allows for a donated pair (two buffers: the input is copied into the output's
 * on the stream first, cuMemcpyDtoDAsync).
 * `stream` is a CUstream of the context's device (the caller's: the run is ordered after
 * what the caller queued there before the call), or NULL for the context's own stream. The
 * call returns when the run has finished (it reads the model's run-time checks back), so
 * the outputs are ready for any stream. No other copies are made. A CPU context refuses it
 * (AOT_ERR_INVALID_ARGUMENT). */
AOT_API aot_status_t aot_run_device(aot_context_t* context, const aot_tensor_t* inputs,
                                    uint32_t input_count, aot_tensor_t* outputs,
                                    uint32_t output_count, void* stream, aot_error_t* out_error);

/* Device memory on a CUDA context's device, for callers without a CUDA library of their
 * own (the Python binding's device arrays): at least 256-byte aligned; bytes == 0 gives a
 * valid address of a 1-byte allocation. Free it with aot_device_free on a context of the
 * same device before the model is closed. */
AOT_API aot_status_t aot_device_alloc(aot_context_t* context, uint64_t bytes,
                                      uint64_t* out_address, aot_error_t* out_error);
AOT_API aot_status_t aot_device_free(aot_context_t* context, uint64_t address,
                                     aot_error_t* out_error);
/* Copies between host memory and device memory of a CUDA context's device, on the
 * context's stream; they return when the copy has finished. */
AOT_API aot_status_t aot_device_upload(aot_context_t* context, uint64_t device_address,
                                       const void* host, uint64_t bytes, aot_error_t* out_error);
AOT_API aot_status_t aot_device_download(aot_context_t* context, void* host,
                                         uint64_t device_address, uint64_t bytes,
                                         aot_error_t* out_error);

/* ---- Buffer donation (ABI version 5) ----
 *
 * A model compiled with donations (aot-compile --donate past_keys=present_keys, or inferred
 * from such names) lets an output take over an input's buffer, as a decoder's KV cache does:
 * the code reads the input from the output's buffer and writes the output there in place. A
 * decode loop passes one buffer as both (aot_run and aot_run_device then copy nothing); given
 * two, a run copies the input into the output's buffer first. The input and output of a pair
 * have one dtype and shape; each input and each output is in at most one pair. */

/* The number of donated pairs (0 for a model without, or a closed one). */
AOT_API uint32_t aot_model_donation_count(const aot_model_t* model);
/* Pair `index` (< aot_model_donation_count): the input's and the output's indices. */
AOT_API aot_status_t aot_model_donation(const aot_model_t* model, uint32_t index, uint32_t* out_input,
                                        uint32_t* out_output, aot_error_t* out_error);

/* ---- Thread pools for statically linked models (ABI version 7) ----
 *
 * `aot-compile MODEL --emit c` writes a model as an object with no loader: its header
 * declares <prefix>_run (the calling thread only) and <prefix>_run_threads, which takes an
 * aot_pool_t from this library and runs each kernel large enough to pay for it across the
 * pool's threads, as a context with num_threads does. A program that calls
 * <prefix>_run_threads links this library; one that calls only <prefix>_run need not.
 *
 * A pool is num_threads - 1 worker threads plus the thread that calls aot_pool_run. It
 * splits each kernel by the compiler's cost estimate at first, and after the first runs of
 * a program by that program's measured times on this machine (as a context does); it keeps
 * those for the last 8 programs it ran, so a pool shared by a few models measures each once. Workers
 * poll briefly after a run for the next one, then sleep. aot_pool_run calls on one pool
 * from several threads run one after another (a mutex), never interleaved: give each
 * serving thread its own pool, or share one to cap the threads a process uses. */
typedef struct aot_pool aot_pool_t;

/* One kernel of a compiled program: fn(inputs, outputs, arena, weights, begin, end) computes
 * its work items [begin, end) of [0, work); cost_ns is the compiler's estimate of all of
 * them on one thread (-1: none). The generated code fills these in; callers only pass them on. */
typedef void (*aot_kernel_fn_t)(const void* const* inputs, void* const* outputs, uint8_t* arena,
                                const uint8_t* weights, int64_t begin, int64_t end);
typedef struct aot_kernel {
  aot_kernel_fn_t fn;
  int64_t work;
  int64_t cost_ns;
} aot_kernel_t;

/* A compiled program: its kernels, run in order, and the weights they read. struct_size is
 * sizeof(aot_program_t) as the generated code knew it. */
typedef struct aot_program {
  uint32_t struct_size;
  uint32_t kernel_count;
  const aot_kernel_t* kernels;
  const uint8_t* weights;
} aot_program_t;

/* A pool of num_threads threads, the caller included: 1 to 1024 (1: no worker threads;
 * runs go on the calling thread). */
AOT_API aot_status_t aot_pool_create(uint32_t num_threads, aot_pool_t** out_pool,
                                     aot_error_t* out_error);
AOT_API void aot_pool_destroy(aot_pool_t* pool); /* NULL is a no-op; no run may be in flight */
/* The pool's thread count, the caller included (0 for NULL). */
AOT_API uint32_t aot_pool_num_threads(const aot_pool_t* pool);

/* Run `program` on the pool and return when every kernel has finished: inputs and outputs
 * are the program's pointer tables, arena its temporaries. AOT_ERR_INVALID_ARGUMENT for a
 * NULL or destroyed pool or a malformed program (nothing ran), AOT_ERR_NO_MEMORY when the
 * pool cannot hold a new program's split tables (nothing ran; the generated code then runs
 * the program on the calling thread). */
AOT_API aot_status_t aot_pool_run(aot_pool_t* pool, const aot_program_t* program,
                                  const void* const* inputs, void* const* outputs, void* arena,
                                  aot_error_t* out_error);

#ifdef __cplusplus
}
#endif

#endif /* AOT_RUNTIME_H_ */
