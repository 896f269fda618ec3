/* cuda_driver.c - open the CUDA driver library at run time and name its errors.
 *
 * The runtime is built without CUDA: every entry point it uses (cuda_api.h) is resolved
 * here with dlsym. A machine without the driver gets AOT_ERR_NO_DEVICE from the first
 * CUDA context, and nothing else changes for CPU contexts. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The symbol names the loader falls back on when the driver lacks the first one. */
static const char* const kFallbacks[][2] = {AOT__CUDA_V1_FALLBACKS};

static void* resolve(void* handle, const char* symbol) {
  void* p = dlsym(handle, symbol);
  for (size_t i = 0; !p && i < sizeof kFallbacks / sizeof kFallbacks[0]; i++)
    if (strcmp(kFallbacks[i][0], symbol) == 0) p = dlsym(handle, kFallbacks[i][1]);
  return p;
}

aot_status_t aot__cuda_open(aot__cuda_api_t* api, aot_error_t* err) {
  memset(api, 0, sizeof *api);
  const char* path = getenv(AOT__CUDA_DRIVER_ENV);
  if (!path || !path[0]) path = AOT__CUDA_DRIVER_DEFAULT;
  api->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!api->handle) {
    const char* why = dlerror();
    return aot__fail(err, AOT_ERR_NO_DEVICE, "no CUDA driver: cannot load %s (%s)", path,
                     why ? why : "unknown dlopen error");
  }
  /* POSIX leaves void* -> function pointer conversions to the implementation; memcpy keeps
   * -Wpedantic quiet where a cast would not */
#define AOT__CUDA_RESOLVE(member, symbol, ret, params)                                         \
  {                                                                                            \
    void* p = resolve(api->handle, symbol);                                                    \
    if (!p) {                                                                                  \
      aot__cuda_close(api);                                                                    \
      return aot__fail(err, AOT_ERR_NO_DEVICE,                                                 \
                       "the CUDA driver %s has no %s: it is older than this runtime needs "    \
                       "(CUDA 11.4 or later)",                                                 \
                       path, symbol);                                                          \
    }                                                                                          \
    memcpy(&api->member, &p, sizeof p);                                                        \
  }
  AOT__CUDA_FUNCTIONS(AOT__CUDA_RESOLVE)
#undef AOT__CUDA_RESOLVE
  CUresult r = api->init(0);
  if (r != AOT__CUDA_SUCCESS) {
    /* CUDA_ERROR_NO_DEVICE and a driver without a GPU or kernel module end here */
    aot__cuda_fail(api, err, r, "cuInit", "no usable CUDA driver (%s)", path);
    if (err) err->code = AOT_ERR_NO_DEVICE;
    aot__cuda_close(api);
    return AOT_ERR_NO_DEVICE;
  }
  return AOT_OK;
}

void aot__cuda_close(aot__cuda_api_t* api) {
  if (api->handle) dlclose(api->handle);
  memset(api, 0, sizeof *api);
}

aot_status_t aot__cuda_fail(const aot__cuda_api_t* api, aot_error_t* err, CUresult r,
                            const char* call, const char* fmt, ...) {
  const char* name = NULL;
  const char* text = NULL;
  if (api && api->get_error_name && api->get_error_name(r, &name) != AOT__CUDA_SUCCESS) name = NULL;
  if (api && api->get_error_string && api->get_error_string(r, &text) != AOT__CUDA_SUCCESS)
    text = NULL;
  aot_status_t code = r == AOT__CUDA_ERROR_OUT_OF_MEMORY ? AOT_ERR_NO_MEMORY : AOT_ERR_DEVICE;
  if (!err) return code;
  char where[AOT_ERROR_MESSAGE_SIZE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(where, sizeof where, fmt, ap);
  va_end(ap);
  char unknown[32];
  if (!name) {
    snprintf(unknown, sizeof unknown, "CUDA error %d", (int)r);
    name = unknown;
  }
  /* the message is cut at AOT_ERROR_MESSAGE_SIZE: the driver's text goes last */
  if (text)
    return aot__fail(err, code, "%s: %s failed: %s (%s)", where, call, name, text);
  return aot__fail(err, code, "%s: %s failed: %s", where, call, name);
}
