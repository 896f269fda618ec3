/* gpu_device.c - a model's GPU code and weights on one device, made by its first CUDA
 * context there and shared by the rest until the model closes.
 *
 * The code: the cubin built for the device's architecture (same major version, minor not
 * above the device's), else the PTX of the newest architecture not above the device's,
 * which the driver compiles (and caches on disk, as it does for every PTX). The functions
 * of the launch plan are looked up once and checked against the plan: a block larger than
 * the compiled code allows, or more shared memory than the device has, is refused here
 * with the kernel's name rather than failing at the first launch. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define JIT_LOG_BYTES 2048
/* what a block may use without opting in (cuFuncSetAttribute) */
#define DEFAULT_DYNAMIC_SHARED (48 * 1024)

/* The launch plan to load on a device of architecture `sm`, and whether from its cubin.
 * *cubin: the best cubin (NULL if none fits); *ptx: the newest PTX not above sm. */
static void pick_code(const aot__gpu_model_t* g, uint32_t sm, const aot__gpu_sm_t** cubin,
                      const aot__gpu_sm_t** ptx) {
  *cubin = *ptx = NULL;
  for (uint32_t i = 0; i < g->sm_count; i++) {
    const aot__gpu_sm_t* e = &g->sms[i];
    if (e->sm > sm) continue;
    if (e->cubin.data && e->sm / 10 == sm / 10 && (!*cubin || e->sm > (*cubin)->sm)) *cubin = e;
    if (!*ptx || e->sm > (*ptx)->sm) *ptx = e;
  }
}

static void unload(const aot__cuda_api_t* api, aot__gpu_device_t* d) {
  if (d->context && api->ctx_push_current(d->context) == AOT__CUDA_SUCCESS) {
    CUcontext popped;
    if (d->weights) api->mem_free(d->weights);
    if (d->module) api->module_unload(d->module);
    api->ctx_pop_current(&popped);
  }
  if (d->context) api->primary_ctx_release(d->device);
  free(d->functions);
  free(d);
}

/* Load `code` (its cubin when `use_cubin`) into the current context. */
static aot_status_t load_module(const aot__cuda_api_t* api, aot__gpu_device_t* d,
                                const aot__gpu_sm_t* code, int use_cubin, CUresult* driver_result,
                                aot_error_t* err) {
  uint8_t* image = NULL;
  aot_status_t st = aot__stored_section_decode(use_cubin ? &code->cubin : &code->ptx, &image, err);
  if (st) return st;
  if (!use_cubin && strlen((const char*)image) != code->ptx.section.raw_size) {
    free(image);
    return aot__fail(err, AOT_ERR_FORMAT, "section '%s': PTX text holds a NUL byte",
                     code->ptx.section.name);
  }
  char log[JIT_LOG_BYTES];
  log[0] = '\0';
  int options[2] = {AOT__CU_JIT_ERROR_LOG_BUFFER, AOT__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[2] = {log, (void*)(uintptr_t)sizeof log};
  CUresult r = api->module_load_data_ex(&d->module, image, 2, options, values);
  free(image);
  *driver_result = r;
  if (r == AOT__CUDA_SUCCESS) return AOT_OK;
  d->module = NULL;
  log[sizeof log - 1] = '\0';
  for (char* p = log; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  return aot__cuda_fail(api, err, r, "cuModuleLoadDataEx", "device %d (%s): loading the %s of sm_%u%s%s",
                        d->ordinal, d->name, use_cubin ? "cubin" : "PTX", code->sm,
                        log[0] ? ": " : "", log);
}

/* Look up every launch's function and check the plan against what the code allows. */
static aot_status_t bind_functions(const aot__cuda_api_t* api, aot__gpu_device_t* d,
                                   int shared_optin, aot_error_t* err) {
  const aot__gpu_sm_t* code = d->code;
  d->functions = calloc(code->launch_count ? code->launch_count : 1, sizeof *d->functions);
  if (!d->functions) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  for (uint32_t i = 0; i < code->launch_count; i++) {
    const aot__gpu_launch_t* l = &code->launches[i];
    CUresult r = api->module_get_function(&d->functions[i], d->module, l->symbol);
    if (r != AOT__CUDA_SUCCESS)
      return aot__cuda_fail(api, err, r, "cuModuleGetFunction", "kernel %s: function '%s' in the sm_%u code",
                            l->name, l->symbol, code->sm);
    int max_threads = 0, registers = 0, static_shared = 0;
    if ((r = api->func_get_attribute(&max_threads, AOT__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                     d->functions[i])) ||
        (r = api->func_get_attribute(&registers, AOT__CU_FUNC_ATTRIBUTE_NUM_REGS, d->functions[i])) ||
        (r = api->func_get_attribute(&static_shared, AOT__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                     d->functions[i])))
      return aot__cuda_fail(api, err, r, "cuFuncGetAttribute", "kernel %s", l->name);
    uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    if (threads > (uint64_t)max_threads)
      return aot__fail(err, AOT_ERR_UNSUPPORTED,
                       "kernel %s: the launch plan asks for %llu threads a block, the code loaded "
                       "on device %d (%s) allows %d (it uses %d registers a thread)",
                       l->name, (unsigned long long)threads, d->ordinal, d->name, max_threads,
                       registers);
    if ((uint64_t)l->shared_bytes + (uint64_t)static_shared > (uint64_t)shared_optin)
      return aot__fail(err, AOT_ERR_UNSUPPORTED,
                       "kernel %s: it needs %u bytes of dynamic and %d of static shared memory a "
                       "block; device %d (%s) has %d",
                       l->name, l->shared_bytes, static_shared, d->ordinal, d->name, shared_optin);
    if (l->shared_bytes > DEFAULT_DYNAMIC_SHARED) {
      /* the most any launch of this function asks for: launches may share a function */
      int most = 0;
      for (uint32_t k = 0; k < code->launch_count; k++)
        if (strcmp(code->launches[k].symbol, l->symbol) == 0 && (int)code->launches[k].shared_bytes > most)
          most = (int)code->launches[k].shared_bytes;
      r = api->func_set_attribute(d->functions[i], AOT__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most);
      if (r != AOT__CUDA_SUCCESS)
        return aot__cuda_fail(api, err, r, "cuFuncSetAttribute", "kernel %s: allowing %d bytes of shared memory",
                              l->name, most);
    }
  }
  return AOT_OK;
}

/* Copy the model's weights to the device (synchronously, once). */
static aot_status_t upload_weights(const aot_model_t* m, const aot__cuda_api_t* api,
                                   aot__gpu_device_t* d, aot_error_t* err) {
  if (m->weights_bytes == 0) return AOT_OK;
  size_t free_bytes = 0, total = 0;
  CUresult r = api->mem_get_info(&free_bytes, &total);
  if (r != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(api, err, r, "cuMemGetInfo", "device %d (%s)", d->ordinal, d->name);
  if (m->weights_bytes > free_bytes)
    return aot__fail(err, AOT_ERR_NO_MEMORY,
                     "device %d (%s): the weights take %llu bytes, %llu of its %llu are free",
                     d->ordinal, d->name, (unsigned long long)m->weights_bytes,
                     (unsigned long long)free_bytes, (unsigned long long)total);
  if ((r = api->mem_alloc(&d->weights, (size_t)m->weights_bytes)) != AOT__CUDA_SUCCESS) {
    d->weights = 0;
    return aot__cuda_fail(api, err, r, "cuMemAlloc", "device %d (%s): the weights (%llu bytes)",
                          d->ordinal, d->name, (unsigned long long)m->weights_bytes);
  }
  CUstream stream;
  if ((r = api->stream_create(&stream, AOT__CU_STREAM_NON_BLOCKING)) != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(api, err, r, "cuStreamCreate", "device %d (%s)", d->ordinal, d->name);
  r = api->memcpy_htod_async(d->weights, m->weights, (size_t)m->weights_bytes, stream);
  CUresult synced = r == AOT__CUDA_SUCCESS ? api->stream_synchronize(stream) : r;
  api->stream_destroy(stream);
  if (synced != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(api, err, synced, r ? "cuMemcpyHtoDAsync" : "cuStreamSynchronize",
                          "device %d (%s): copying the weights", d->ordinal, d->name);
  return AOT_OK;
}

/* Everything the model needs on device `ordinal`, with its primary context current. */
static aot_status_t load_on(const aot_model_t* m, aot__gpu_device_t* d, aot_error_t* err) {
  const aot__gpu_model_t* g = m->gpu;
  const aot__cuda_api_t* api = &g->api;
  int major = 0, minor = 0, optin = 0;
  CUresult r;
  if ((r = api->device_get_attribute(&major, AOT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->device)) ||
      (r = api->device_get_attribute(&minor, AOT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->device)) ||
      (r = api->device_get_attribute(&optin, AOT__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                     d->device)))
    return aot__cuda_fail(api, err, r, "cuDeviceGetAttribute", "device %d (%s)", d->ordinal, d->name);
  d->sm = (uint32_t)(major * 10 + minor);
  const aot__gpu_sm_t *cubin, *ptx;
  pick_code(g, d->sm, &cubin, &ptx);
  if (!cubin && !ptx) {
    char have[128];
    aot__gpu_sm_list(g, have, sizeof have);
    return aot__fail(err, AOT_ERR_NO_DEVICE,
                     "device %d (%s) is sm_%u: the artifact has GPU code for %s only (compile "
                     "with --sm sm_%u)", d->ordinal, d->name, d->sm, have, d->sm);
  }
  if ((r = api->primary_ctx_retain(&d->context, d->device)) != AOT__CUDA_SUCCESS) {
    d->context = NULL;
    return aot__cuda_fail(api, err, r, "cuDevicePrimaryCtxRetain", "device %d (%s)", d->ordinal, d->name);
  }
  if ((r = api->ctx_push_current(d->context)) != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(api, err, r, "cuCtxPushCurrent", "device %d (%s)", d->ordinal, d->name);
  aot_status_t st = AOT_ERR_INTERNAL;
  CUresult loaded = AOT__CUDA_ERROR_NO_BINARY_FOR_GPU;
  if (cubin) {
    d->code = cubin;
    st = load_module(api, d, cubin, 1, &loaded, err);
  }
  /* A cubin the driver refuses leaves the PTX, which the driver compiles: a cubin of a newer
   * toolkit than the driver (ptxas 13 for a CUDA 12 driver) is refused with one error or
   * another (no binary, invalid image, unsupported version), so any refusal but a lack of
   * memory or a broken context falls back. */
  int refused = st && loaded != AOT__CUDA_SUCCESS && loaded != AOT__CUDA_ERROR_OUT_OF_MEMORY &&
                loaded < AOT__CUDA_ERROR_ILLEGAL_ADDRESS;
  if (!cubin || (refused && ptx)) {
    d->code = ptx;
    st = load_module(api, d, ptx, 0, &loaded, err);
    if (st && cubin) aot__error_prefix(err, "the cubin and the PTX both failed to load; the PTX: ");
  }
  if (!st) st = bind_functions(api, d, optin, err);
  if (!st) st = upload_weights(m, api, d, err);
  CUcontext popped;
  api->ctx_pop_current(&popped);
  return st;
}

aot_status_t aot__gpu_device_get(const aot_model_t* m, int32_t ordinal, aot__gpu_device_t** out,
                                 aot_error_t* err) {
  *out = NULL;
  aot__gpu_model_t* g = m->gpu;
  if (!g)
    return aot__fail(err, AOT_ERR_UNSUPPORTED,
                     "the artifact has no GPU code: compile it with --target cuda or cpu,cuda");
  if (ordinal < 0)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "device_ordinal %d is negative", ordinal);
  pthread_mutex_t* lock = g->lock;
  pthread_mutex_lock(lock);
  aot_status_t st = AOT_OK;
  if (!g->api_loaded) {
    if ((st = aot__cuda_open(&g->api, err))) goto done; /* tried again by the next context */
    g->api_loaded = 1;
  }
  for (aot__gpu_device_t* d = g->devices; d; d = d->next)
    if (d->ordinal == ordinal) {
      *out = d;
      goto done;
    }
  const aot__cuda_api_t* api = &g->api;
  int count = 0;
  CUresult r = api->device_get_count(&count);
  if (r != AOT__CUDA_SUCCESS) {
    st = aot__cuda_fail(api, err, r, "cuDeviceGetCount", "CUDA");
    goto done;
  }
  if (ordinal >= count) {
    st = aot__fail(err, AOT_ERR_NO_DEVICE, "no CUDA device %d: the driver sees %d", ordinal, count);
    goto done;
  }
  aot__gpu_device_t* d = calloc(1, sizeof *d);
  if (!d) {
    st = aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
    goto done;
  }
  d->ordinal = ordinal;
  snprintf(d->name, sizeof d->name, "?");
  if ((r = api->device_get(&d->device, ordinal)) != AOT__CUDA_SUCCESS) {
    free(d);
    st = aot__cuda_fail(api, err, r, "cuDeviceGet", "device %d", ordinal);
    goto done;
  }
  if (api->device_get_name(d->name, (int)sizeof d->name, d->device) != AOT__CUDA_SUCCESS)
    snprintf(d->name, sizeof d->name, "?");
  d->name[sizeof d->name - 1] = '\0';
  if ((st = load_on(m, d, err))) {
    unload(api, d);
    goto done;
  }
  d->next = g->devices;
  g->devices = d;
  *out = d;
done:
  pthread_mutex_unlock(lock);
  return st;
}

void aot__gpu_model_free(aot__gpu_model_t* g) {
  if (!g) return;
  while (g->devices) {
    aot__gpu_device_t* d = g->devices;
    g->devices = d->next;
    unload(&g->api, d);
  }
  if (g->api_loaded) aot__cuda_close(&g->api);
  aot__gpu_plan_free(g);
  if (g->lock) {
    pthread_mutex_destroy((pthread_mutex_t*)g->lock);
    free(g->lock);
  }
  free(g);
}
