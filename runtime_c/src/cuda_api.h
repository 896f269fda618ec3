/* cuda_api.h - the part of the CUDA driver API the runtime uses, declared here so that
 * building the runtime needs no CUDA headers or libraries. The driver library is opened
 * at run time (cuda_driver.c); tests/fake_cuda.c implements the same entry points on the
 * CPU (the test stand-in for libcuda.so.1).
 *
 * Types and values are the driver's (cuda.h, stable since CUDA 11): opaque handles,
 * CUresult as int, CUdeviceptr as a 64-bit integer. Every function is named by the
 * symbol libcuda.so.1 exports with the ABI used here: the _v2 names where the driver
 * versioned an entry point (a driver older than CUDA 12 lacks the two graph node _v2
 * ones: the loader then takes the unversioned v1 symbols, AOT__CUDA_V1_FALLBACKS).
 * Nothing here is part of the runtime's ABI. */
#ifndef AOT_CUDA_API_H_
#define AOT_CUDA_API_H_

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;

/* CUresult values the runtime tells apart (the rest are named by cuGetErrorName) */
#define AOT__CUDA_SUCCESS 0
#define AOT__CUDA_ERROR_INVALID_VALUE 1
#define AOT__CUDA_ERROR_OUT_OF_MEMORY 2
#define AOT__CUDA_ERROR_NOT_INITIALIZED 3
#define AOT__CUDA_ERROR_NO_DEVICE 100
#define AOT__CUDA_ERROR_INVALID_DEVICE 101
#define AOT__CUDA_ERROR_INVALID_IMAGE 200
#define AOT__CUDA_ERROR_INVALID_CONTEXT 201
#define AOT__CUDA_ERROR_NO_BINARY_FOR_GPU 209
#define AOT__CUDA_ERROR_INVALID_PTX 218
#define AOT__CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
#define AOT__CUDA_ERROR_NOT_FOUND 500
#define AOT__CUDA_ERROR_ILLEGAL_ADDRESS 700
#define AOT__CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701
#define AOT__CUDA_ERROR_LAUNCH_FAILED 719

/* CUdevice_attribute */
#define AOT__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define AOT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define AOT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define AOT__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97

/* CUfunction_attribute */
#define AOT__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define AOT__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1
#define AOT__CU_FUNC_ATTRIBUTE_NUM_REGS 4
#define AOT__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

/* CUjit_option: the JIT's error log, so a PTX that does not compile says why */
#define AOT__CU_JIT_ERROR_LOG_BUFFER 5
#define AOT__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

/* CUpointer_attribute */
#define AOT__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9

/* cuStreamCreate flags */
#define AOT__CU_STREAM_NON_BLOCKING 1

/* CUDA_KERNEL_NODE_PARAMS_v2 (CUDA 12), what cuGraphAddKernelNode_v2 and
 * cuGraphExecKernelNodeSetParams_v2 take; its first fields are the v1 struct, what the
 * unversioned symbols of older drivers take (the loader falls back to those), and the
 * runtime leaves `kern` and `ctx` NULL */
typedef struct aot__cuda_kernel_node_params {
  CUfunction func;
  unsigned int grid_x, grid_y, grid_z;
  unsigned int block_x, block_y, block_z;
  unsigned int shared_bytes;
  void** kernel_params;
  void** extra;
  void* kern;
  CUcontext ctx;
} aot__cuda_kernel_node_params_t;

/* X(member, "symbol", return type, parameters): every entry point the runtime resolves.
 * The stand-in defines each symbol with exactly these parameters. */
#define AOT__CUDA_FUNCTIONS(X)                                                                   \
  X(init, "cuInit", CUresult, (unsigned int flags))                                              \
  X(driver_get_version, "cuDriverGetVersion", CUresult, (int* version))                          \
  X(get_error_name, "cuGetErrorName", CUresult, (CUresult error, const char** name))              \
  X(get_error_string, "cuGetErrorString", CUresult, (CUresult error, const char** text))          \
  X(device_get_count, "cuDeviceGetCount", CUresult, (int* count))                                \
  X(device_get, "cuDeviceGet", CUresult, (CUdevice* device, int ordinal))                        \
  X(device_get_name, "cuDeviceGetName", CUresult, (char* name, int length, CUdevice device))     \
  X(device_get_attribute, "cuDeviceGetAttribute", CUresult,                                      \
    (int* value, int attribute, CUdevice device))                                                \
  X(device_total_mem, "cuDeviceTotalMem_v2", CUresult, (size_t* bytes, CUdevice device))         \
  X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext* ctx, CUdevice device)) \
  X(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice device))           \
  X(ctx_push_current, "cuCtxPushCurrent_v2", CUresult, (CUcontext ctx))                          \
  X(ctx_pop_current, "cuCtxPopCurrent_v2", CUresult, (CUcontext* ctx))                           \
  X(module_load_data_ex, "cuModuleLoadDataEx", CUresult,                                         \
    (CUmodule* module, const void* image, unsigned int count, int* options, void** values))     \
  X(module_unload, "cuModuleUnload", CUresult, (CUmodule module))                                \
  X(module_get_function, "cuModuleGetFunction", CUresult,                                        \
    (CUfunction* function, CUmodule module, const char* name))                                   \
  X(func_get_attribute, "cuFuncGetAttribute", CUresult,                                          \
    (int* value, int attribute, CUfunction function))                                            \
  X(func_set_attribute, "cuFuncSetAttribute", CUresult,                                          \
    (CUfunction function, int attribute, int value))                                             \
  X(mem_get_info, "cuMemGetInfo_v2", CUresult, (size_t* free_bytes, size_t* total_bytes))        \
  X(mem_alloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr* address, size_t bytes))                  \
  X(mem_free, "cuMemFree_v2", CUresult, (CUdeviceptr address))                                   \
  X(memcpy_htod_async, "cuMemcpyHtoDAsync_v2", CUresult,                                         \
    (CUdeviceptr dst, const void* src, size_t bytes, CUstream stream))                           \
  X(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", CUresult,                                         \
    (void* dst, CUdeviceptr src, size_t bytes, CUstream stream))                                 \
  X(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2", CUresult,                                         \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                           \
  X(pointer_get_attribute, "cuPointerGetAttribute", CUresult,                                    \
    (void* value, int attribute, CUdeviceptr address))                                           \
  X(stream_create, "cuStreamCreate", CUresult, (CUstream* stream, unsigned int flags))           \
  X(stream_destroy, "cuStreamDestroy_v2", CUresult, (CUstream stream))                           \
  X(stream_synchronize, "cuStreamSynchronize", CUresult, (CUstream stream))                      \
  X(launch_kernel, "cuLaunchKernel", CUresult,                                                   \
    (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,          \
     unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, \
     CUstream stream, void** params, void** extra))                                              \
  X(graph_create, "cuGraphCreate", CUresult, (CUgraph* graph, unsigned int flags))               \
  X(graph_add_kernel_node, "cuGraphAddKernelNode_v2", CUresult,                                     \
    (CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies, size_t count,           \
     const aot__cuda_kernel_node_params_t* params))                                              \
  X(graph_instantiate, "cuGraphInstantiateWithFlags", CUresult,                                  \
    (CUgraphExec* exec, CUgraph graph, unsigned long long flags))                                \
  X(graph_exec_kernel_node_set_params, "cuGraphExecKernelNodeSetParams_v2", CUresult,              \
    (CUgraphExec exec, CUgraphNode node, const aot__cuda_kernel_node_params_t* params))          \
  X(graph_launch, "cuGraphLaunch", CUresult, (CUgraphExec exec, CUstream stream))                \
  X(graph_exec_destroy, "cuGraphExecDestroy", CUresult, (CUgraphExec exec))                      \
  X(graph_destroy, "cuGraphDestroy", CUresult, (CUgraph graph))

/* "_v2 symbol", "v1 symbol" pairs the loader may fall back on */
#define AOT__CUDA_V1_FALLBACKS                                           \
  {"cuGraphAddKernelNode_v2", "cuGraphAddKernelNode"},                   \
  {"cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams"}

/* The environment variable naming the driver library to open instead of libcuda.so.1:
 * the test suite points it at the stand-in. */
#define AOT__CUDA_DRIVER_ENV "AOT_CUDA_DRIVER"
#define AOT__CUDA_DRIVER_DEFAULT "libcuda.so.1"

#endif /* AOT_CUDA_API_H_ */
