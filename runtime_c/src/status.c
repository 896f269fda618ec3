/* status.c - status strings, error filling, dtypes, aligned allocation. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

uint32_t aot_abi_version(void) { return AOT_ABI_VERSION; }

const char* aot_status_string(aot_status_t status) {
  switch (status) {
    case AOT_OK: return "ok";
    case AOT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case AOT_ERR_IO: return "i/o error";
    case AOT_ERR_FORMAT: return "malformed artifact";
    case AOT_ERR_CHECKSUM: return "checksum mismatch";
    case AOT_ERR_UNSUPPORTED: return "unsupported";
    case AOT_ERR_NO_MEMORY: return "out of memory";
    case AOT_ERR_SHAPE_MISMATCH: return "shape mismatch";
    case AOT_ERR_DTYPE_MISMATCH: return "dtype mismatch";
    case AOT_ERR_INTERNAL: return "internal error";
    case AOT_ERR_CHECK_FAILED: return "run-time check failed";
    case AOT_ERR_NO_DEVICE: return "no device";
    case AOT_ERR_DEVICE: return "device error";
  }
  return "unknown status";
}

aot_status_t aot__fail(aot_error_t* err, aot_status_t code, const char* fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

aot_status_t aot__ok(aot_error_t* err) {
  if (err) {
    err->code = AOT_OK;
    err->message[0] = '\0';
  }
  return AOT_OK;
}

void aot__error_prefix(aot_error_t* err, const char* fmt, ...) {
  if (!err) return;
  char prefix[AOT_ERROR_MESSAGE_SIZE];
  char old[AOT_ERROR_MESSAGE_SIZE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, err->message, sizeof old);
  old[sizeof old - 1] = '\0';
  size_t np = strlen(prefix);
  size_t no = strlen(old);
  if (no > sizeof err->message - 1 - np) no = sizeof err->message - 1 - np;
  memcpy(err->message, prefix, np);
  memcpy(err->message + np, old, no);
  err->message[np + no] = '\0';
}

static const struct {
  const char* name;
  aot_dtype_t dtype;
  uint32_t size;
} kDtypes[] = {
    {"float32", AOT_DTYPE_FLOAT32, 4}, {"float64", AOT_DTYPE_FLOAT64, 8},
    {"float16", AOT_DTYPE_FLOAT16, 2}, {"bfloat16", AOT_DTYPE_BFLOAT16, 2},
    {"int8", AOT_DTYPE_INT8, 1},       {"int16", AOT_DTYPE_INT16, 2},
    {"int32", AOT_DTYPE_INT32, 4},     {"int64", AOT_DTYPE_INT64, 8},
    {"uint8", AOT_DTYPE_UINT8, 1},     {"bool", AOT_DTYPE_BOOL, 1},
    {"uint16", AOT_DTYPE_UINT16, 2},   {"uint32", AOT_DTYPE_UINT32, 4},
    {"uint64", AOT_DTYPE_UINT64, 8},
    {"float8e4m3fn", AOT_DTYPE_FLOAT8E4M3FN, 1},
    {"float8e4m3fnuz", AOT_DTYPE_FLOAT8E4M3FNUZ, 1},
    {"float8e5m2", AOT_DTYPE_FLOAT8E5M2, 1},
    {"float8e5m2fnuz", AOT_DTYPE_FLOAT8E5M2FNUZ, 1},
};

uint32_t aot_dtype_size(aot_dtype_t dtype) {
  for (size_t i = 0; i < sizeof kDtypes / sizeof kDtypes[0]; i++)
    if (kDtypes[i].dtype == dtype) return kDtypes[i].size;
  return 0;
}

const char* aot_dtype_name(aot_dtype_t dtype) {
  for (size_t i = 0; i < sizeof kDtypes / sizeof kDtypes[0]; i++)
    if (kDtypes[i].dtype == dtype) return kDtypes[i].name;
  return "invalid";
}

aot_dtype_t aot__dtype_from_name(const char* name) {
  for (size_t i = 0; i < sizeof kDtypes / sizeof kDtypes[0]; i++)
    if (strcmp(kDtypes[i].name, name) == 0) return kDtypes[i].dtype;
  return AOT_DTYPE_INVALID;
}

void* aot__aligned_alloc(uint64_t align, uint64_t size) {
  if (align < 64) align = 64;
  if (size == 0) size = 1;
  if (size > SIZE_MAX - align) return NULL;
  void* p = NULL;
  if (posix_memalign(&p, (size_t)align, (size_t)size) != 0) return NULL;
  return p;
}
