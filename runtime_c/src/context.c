/* context.c - execution contexts, aot_run and aot_run_device.
 *
 * A CPU context owns an arena (arena.bytes, aligned to arena.alignment) and,
 * with num_threads > 1, a thread pool; a CUDA context owns a stream and a device
 * arena (gpu_context.c). One thread at a time per context.
 *
 * Donated inputs (manifest "donations"): the code reads input j from output k's
 * buffer, so a run that got two buffers copies input j there first; one buffer for
 * both (a decode loop's cache) is updated in place and nothing is copied. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A live context's `magic`: aot_context_destroy clears it before freeing, so
 * aot_run on a destroyed context is refused rather than run on freed memory (in
 * the common case: once the memory is reused, nothing can tell). */
#define CONTEXT_MAGIC 0x58434f41u /* "AOCX" */

struct aot_context {
  uint32_t magic;
  const aot_model_t* model;
  uint8_t* arena;
  aot__pool_t* pool; /* NULL: single-threaded */
  aot__gpu_context_t* gpu; /* a CUDA context's device side; NULL for a CPU context */
  const void** in_ptrs;
  void** out_ptrs;
  uint64_t* io;         /* a CPU run's input, then output addresses */
  uint64_t* checked_io; /* the addresses aot__check_apart last accepted */
};

static aot_status_t create_cuda(const aot_model_t* model, int32_t ordinal, uint32_t flags,
                                aot_context_t** out_context, aot_error_t* err) {
  aot_context_t* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  ctx->magic = CONTEXT_MAGIC;
  ctx->model = model;
  ctx->in_ptrs = calloc(model->input_count + 1, sizeof *ctx->in_ptrs);
  ctx->out_ptrs = calloc(model->output_count + 1, sizeof *ctx->out_ptrs);
  if (!ctx->in_ptrs || !ctx->out_ptrs) {
    aot_context_destroy(ctx);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  }
  aot_status_t st = aot__gpu_context_create(model, ordinal, flags, &ctx->gpu, err);
  if (st) {
    aot_context_destroy(ctx);
    return st;
  }
  *out_context = ctx;
  return aot__ok(err);
}

aot_status_t aot_context_create(const aot_model_t* model, const aot_context_options_t* options,
                                aot_context_t** out_context, aot_error_t* err) {
  if (!out_context) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "out_context is NULL");
  *out_context = NULL;
  if (!model) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is NULL");
  if (model->magic != AOT__MODEL_MAGIC)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is closed (or not a model)");
  uint32_t threads = 1, device = AOT_DEVICE_CPU, flags = 0;
  int32_t ordinal = 0;
  if (options) {
    /* Options structs are append-only: read only the fields the caller's
     * struct_size covers. */
    if (options->struct_size < 2 * sizeof(uint32_t))
      return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "options->struct_size %u is too small",
                       options->struct_size);
    threads = options->num_threads ? options->num_threads : 1;
    if (options->struct_size >= offsetof(aot_context_options_t, reserved) + sizeof(uint32_t)) {
      device = options->device;
      ordinal = options->device_ordinal;
      flags = options->flags;
      if (options->reserved != 0)
        return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "options->reserved must be 0");
    } else if (options->struct_size > 2 * sizeof(uint32_t)) {
      return aot__fail(err, AOT_ERR_INVALID_ARGUMENT,
                       "options->struct_size %u covers part of the device fields (%zu or %zu "
                       "expected)", options->struct_size, 2 * sizeof(uint32_t),
                       sizeof(aot_context_options_t));
    }
  }
  if (device != AOT_DEVICE_CPU && device != AOT_DEVICE_CUDA)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT,
                     "options->device %u is neither AOT_DEVICE_CPU (0) nor AOT_DEVICE_CUDA (1)", device);
  if (flags & ~AOT_CONTEXT_NO_CUDA_GRAPH)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "options->flags 0x%x has unknown bits", flags);
  if (device == AOT_DEVICE_CUDA) return create_cuda(model, ordinal, flags, out_context, err);
  if (!model->entry) {
    char sms[128];
    aot__gpu_sm_list(model->gpu, sms, sizeof sms);
    return aot__fail(err, AOT_ERR_UNSUPPORTED,
                     "the artifact holds GPU code only (cuda: %s): create the context with device "
                     "AOT_DEVICE_CUDA, or compile with --target cpu or cpu,cuda", sms);
  }
  if (threads > AOT__MAX_THREADS)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "num_threads %u exceeds %u", threads,
                     AOT__MAX_THREADS);
  aot_context_t* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  ctx->magic = CONTEXT_MAGIC;
  ctx->model = model;
  ctx->arena = aot__aligned_alloc(model->arena_align, model->arena_bytes);
  ctx->in_ptrs = calloc(model->input_count + 1, sizeof *ctx->in_ptrs);
  ctx->out_ptrs = calloc(model->output_count + 1, sizeof *ctx->out_ptrs);
  ctx->io = calloc((size_t)model->input_count + model->output_count + 1, sizeof *ctx->io);
  ctx->checked_io = calloc((size_t)model->input_count + model->output_count + 1, sizeof *ctx->checked_io);
  if (!ctx->arena || !ctx->in_ptrs || !ctx->out_ptrs || !ctx->io || !ctx->checked_io) {
    aot_context_destroy(ctx);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "cannot allocate the arena (%llu bytes)",
                     (unsigned long long)model->arena_bytes);
  }
  /* no pool (no threads at all) when every kernel runs whole on the caller anyway */
  if (threads > 1 && aot__model_splits(model, threads)) {
    aot_status_t st = aot__pool_create(threads, &ctx->pool, err);
    if (st == AOT_OK) st = aot__pool_bind(ctx->pool, model->kernels, model->kernel_count, err);
    if (st) {
      aot_context_destroy(ctx);
      return st;
    }
  }
  *out_context = ctx;
  return aot__ok(err);
}

void aot_context_destroy(aot_context_t* ctx) {
  if (!ctx || ctx->magic != CONTEXT_MAGIC) return; /* NULL, or destroyed already */
  ctx->magic = 0;
  aot__pool_destroy(ctx->pool);
  aot__gpu_context_destroy(ctx->gpu);
  free(ctx->arena);
  free(ctx->in_ptrs);
  free(ctx->out_ptrs);
  free(ctx->io);
  free(ctx->checked_io);
  free(ctx);
}

static const aot__tensor_desc_t* io_desc(const aot_model_t* m, uint32_t i) {
  return i < m->input_count ? &m->inputs[i] : &m->outputs[i - m->input_count];
}

aot_status_t aot__check_apart(const aot_model_t* m, const uint64_t* io, const char* on, aot_error_t* err) {
  for (uint32_t o = 0; o < m->output_count; o++) {
    uint64_t ob = m->outputs[o].byte_size, oa = io[m->input_count + o];
    if (!ob) continue;
    for (uint32_t i = 0; i < m->input_count; i++) {
      uint64_t ib = m->inputs[i].byte_size, ia = io[i];
      if (!ib || oa >= ia + ib || ia >= oa + ob) continue;
      int64_t d = aot__donation_of_input(m, i);
      int donated = d >= 0 && m->donations[d].output == o;
      if (donated && ia == oa) continue; /* one buffer: updated in place */
      if (donated)
        return aot__fail(err, AOT_ERR_INVALID_ARGUMENT,
                         "output '%s' overlaps its donated input '%s'%s without being the same buffer: "
                         "pass one buffer for both (updated in place) or two apart",
                         m->outputs[o].name, m->inputs[i].name, on);
      return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "output '%s' overlaps input '%s'%s%s",
                       m->outputs[o].name, m->inputs[i].name, on,
                       m->donation_count ? " (only a donated input may share its output's buffer)" : "");
    }
  }
  return AOT_OK;
}

/* A CPU run's buffers apart (checked again only when an address changed), then each donated
 * input copied into its output's buffer unless the caller gave one buffer for both. */
static aot_status_t donate_cpu(aot_context_t* ctx, aot_error_t* err) {
  const aot_model_t* m = ctx->model;
  uint32_t n = m->input_count + m->output_count;
  for (uint32_t i = 0; i < n; i++)
    ctx->io[i] = (uint64_t)(uintptr_t)(i < m->input_count ? ctx->in_ptrs[i] : ctx->out_ptrs[i - m->input_count]);
  if (memcmp(ctx->io, ctx->checked_io, n * sizeof *ctx->io) != 0) {
    aot_status_t st = aot__check_apart(m, ctx->io, "", err);
    if (st) return st;
    memcpy(ctx->checked_io, ctx->io, n * sizeof *ctx->io);
  }
  for (uint32_t i = 0; i < m->donation_count; i++) {
    const aot__donation_t* d = &m->donations[i];
    uint64_t bytes = io_desc(m, d->input)->byte_size;
    if (bytes && ctx->in_ptrs[d->input] != ctx->out_ptrs[d->output])
      memcpy(ctx->out_ptrs[d->output], ctx->in_ptrs[d->input], (size_t)bytes);
  }
  return AOT_OK;
}

static void format_shape(char* buf, size_t size, const int64_t* shape, uint32_t rank) {
  size_t used = 0;
  buf[0] = '\0';
  int n = snprintf(buf, size, "[");
  if (n > 0) used = (size_t)n;
  for (uint32_t i = 0; i < rank && used < size; i++) {
    n = snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (n < 0) return;
    used += (size_t)n;
  }
  if (used < size) snprintf(buf + used, size - used, "]");
}

static aot_status_t check_tensor(const aot__tensor_desc_t* d, const aot_tensor_t* t,
                                 const char* what, uint32_t index, aot_error_t* err) {
  if (t->dtype != d->dtype)
    return aot__fail(err, AOT_ERR_DTYPE_MISMATCH, "%s '%s' (index %u): expected dtype %s, got %s",
                     what, d->name, index, aot_dtype_name(d->dtype), aot_dtype_name(t->dtype));
  int same = t->rank == d->rank && (t->rank == 0 || t->shape != NULL);
  for (uint32_t i = 0; same && i < d->rank; i++) same = t->shape[i] == d->shape[i];
  if (!same) {
    char want[160], got[160];
    format_shape(want, sizeof want, d->shape, d->rank);
    /* The caller's rank may be the wrong field (a bogus 1000 over a 2-entry
     * array): its dims are printed only when there are no more of them than the
     * model has, so this reads no more than the caller says it holds, nor more
     * than the model's rank. */
    if (t->rank && !t->shape) snprintf(got, sizeof got, "rank %u with NULL shape", t->rank);
    else if (t->rank > d->rank) snprintf(got, sizeof got, "rank %u", t->rank);
    else format_shape(got, sizeof got, t->shape, t->rank);
    return aot__fail(err, AOT_ERR_SHAPE_MISMATCH, "%s '%s' (index %u): expected shape %s, got %s",
                     what, d->name, index, want, got);
  }
  if (t->byte_size != d->byte_size)
    return aot__fail(err, AOT_ERR_SHAPE_MISMATCH,
                     "%s '%s' (index %u): byte_size %llu does not match its shape (expected %llu)",
                     what, d->name, index, (unsigned long long)t->byte_size,
                     (unsigned long long)d->byte_size);
  if (!t->data && d->byte_size)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "%s '%s' (index %u): data is NULL", what,
                     d->name, index);
  return AOT_OK;
}

/* The model's run-time checks, on this thread after every kernel has finished (the
 * pool returns once the last kernel's chunks are all done), so the first failing
 * check is the same whichever thread computed what. */
static aot_status_t run_checks(aot_context_t* ctx, aot_error_t* err) {
  const aot_model_t* m = ctx->model;
  if (!m->checks) return aot__ok(err);
  int32_t failed = m->checks(ctx->in_ptrs, ctx->out_ptrs, ctx->arena, m->weights);
  if (failed == 0) return aot__ok(err);
  if (failed < 0 || (uint32_t)failed > m->check_count)
    return aot__fail(err, AOT_ERR_INTERNAL,
                     "the model's checks function returned %d (it has %u checks)", failed,
                     m->check_count);
  return aot__fail(err, AOT_ERR_CHECK_FAILED, "%s", m->check_messages[failed - 1]);
}

/* The checks every run makes of its arguments; fills ctx's pointer tables. */
static aot_status_t check_run(aot_context_t* ctx, const aot_tensor_t* inputs, uint32_t input_count,
                              aot_tensor_t* outputs, uint32_t output_count, aot_error_t* err) {
  if (!ctx) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "context is NULL");
  if (ctx->magic != CONTEXT_MAGIC)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "context is destroyed (or not a context)");
  const aot_model_t* m = ctx->model;
  if (m->magic != AOT__MODEL_MAGIC)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT,
                     "the context's model is closed: close it only after its contexts");
  if (input_count != m->input_count)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "expected %u inputs, got %u", m->input_count,
                     input_count);
  if (output_count != m->output_count)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "expected %u outputs, got %u", m->output_count,
                     output_count);
  if ((input_count && !inputs) || (output_count && !outputs))
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "inputs or outputs array is NULL");
  for (uint32_t i = 0; i < input_count; i++) {
    aot_status_t st = check_tensor(&m->inputs[i], &inputs[i], "input", i, err);
    if (st) return st;
    ctx->in_ptrs[i] = inputs[i].data;
  }
  for (uint32_t i = 0; i < output_count; i++) {
    aot_status_t st = check_tensor(&m->outputs[i], &outputs[i], "output", i, err);
    if (st) return st;
    ctx->out_ptrs[i] = outputs[i].data;
  }
  return AOT_OK;
}

aot_status_t aot_run(aot_context_t* ctx, const aot_tensor_t* inputs, uint32_t input_count,
                     aot_tensor_t* outputs, uint32_t output_count, aot_error_t* err) {
  aot_status_t st = check_run(ctx, inputs, input_count, outputs, output_count, err);
  if (st) return st;
  const aot_model_t* m = ctx->model;
  if (ctx->gpu) return aot__gpu_run_host(ctx->gpu, ctx->in_ptrs, ctx->out_ptrs, err);
  if ((st = donate_cpu(ctx, err))) return st;
  if (ctx->pool) {
    aot__job_t job = {ctx->in_ptrs, ctx->out_ptrs, ctx->arena, m->weights};
    aot__pool_run(ctx->pool, &job);
  } else {
    m->entry(ctx->in_ptrs, ctx->out_ptrs, ctx->arena, m->weights);
  }
  return run_checks(ctx, err);
}

aot_status_t aot_run_device(aot_context_t* ctx, const aot_tensor_t* inputs, uint32_t input_count,
                            aot_tensor_t* outputs, uint32_t output_count, void* stream,
                            aot_error_t* err) {
  aot_status_t st = check_run(ctx, inputs, input_count, outputs, output_count, err);
  if (st) return st;
  if (!ctx->gpu)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT,
                     "aot_run_device needs a CUDA context (device AOT_DEVICE_CUDA); this one runs "
                     "on the CPU: use aot_run");
  return aot__gpu_run_device(ctx->gpu, ctx->in_ptrs, ctx->out_ptrs, stream, err);
}

/* A live CUDA context, or NULL with err filled. */
static aot__gpu_context_t* cuda_of(aot_context_t* ctx, const char* call, aot_error_t* err) {
  if (!ctx || ctx->magic != CONTEXT_MAGIC) {
    aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "%s: context is NULL or destroyed", call);
    return NULL;
  }
  if (ctx->model->magic != AOT__MODEL_MAGIC) {
    aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "%s: the context's model is closed", call);
    return NULL;
  }
  if (!ctx->gpu)
    aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "%s needs a CUDA context; this one runs on the CPU", call);
  return ctx->gpu;
}

aot_device_kind_t aot_context_device(const aot_context_t* ctx, int32_t* out_ordinal) {
  int live = ctx && ctx->magic == CONTEXT_MAGIC && ctx->gpu;
  if (out_ordinal) *out_ordinal = live ? aot__gpu_context_ordinal(ctx->gpu) : -1;
  return live ? AOT_DEVICE_CUDA : AOT_DEVICE_CPU;
}

void* aot_context_cuda_stream(const aot_context_t* ctx) {
  return ctx && ctx->magic == CONTEXT_MAGIC && ctx->gpu ? aot__gpu_context_stream(ctx->gpu) : NULL;
}

aot_status_t aot_device_alloc(aot_context_t* ctx, uint64_t bytes, uint64_t* out_address,
                              aot_error_t* err) {
  if (!out_address) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "out_address is NULL");
  *out_address = 0;
  aot__gpu_context_t* g = cuda_of(ctx, "aot_device_alloc", err);
  return g ? aot__gpu_alloc(g, bytes, out_address, err) : AOT_ERR_INVALID_ARGUMENT;
}

aot_status_t aot_device_free(aot_context_t* ctx, uint64_t address, aot_error_t* err) {
  aot__gpu_context_t* g = cuda_of(ctx, "aot_device_free", err);
  return g ? aot__gpu_free(g, address, err) : AOT_ERR_INVALID_ARGUMENT;
}

aot_status_t aot_device_upload(aot_context_t* ctx, uint64_t device_address, const void* host,
                               uint64_t bytes, aot_error_t* err) {
  aot__gpu_context_t* g = cuda_of(ctx, "aot_device_upload", err);
  if (!g) return AOT_ERR_INVALID_ARGUMENT;
  if (bytes && (!host || !device_address))
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "aot_device_upload: a NULL address");
  return aot__gpu_copy(g, (void*)(uintptr_t)host, device_address, bytes, 1, err);
}

aot_status_t aot_device_download(aot_context_t* ctx, void* host, uint64_t device_address,
                                 uint64_t bytes, aot_error_t* err) {
  aot__gpu_context_t* g = cuda_of(ctx, "aot_device_download", err);
  if (!g) return AOT_ERR_INVALID_ARGUMENT;
  if (bytes && (!host || !device_address))
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "aot_device_download: a NULL address");
  return aot__gpu_copy(g, host, device_address, bytes, 0, err);
}
