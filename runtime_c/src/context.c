/* context.c - execution contexts and aot_run.
 *
 * A context owns an arena (arena.bytes, aligned to arena.alignment) and,
 * with num_threads > 1, a thread pool. One thread at a time per context. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_THREADS 1024u
/* A live context's `magic`: aot_context_destroy clears it before freeing, so
 * aot_run on a destroyed context is refused rather than run on freed memory (in
 * the common case: once the memory is reused, nothing can tell). */
#define CONTEXT_MAGIC 0x58434f41u /* "AOCX" */

struct aot_context {
  uint32_t magic;
  const aot_model_t* model;
  uint8_t* arena;
  aot__pool_t* pool; /* NULL: single-threaded */
  const void** in_ptrs;
  void** out_ptrs;
};

aot_status_t aot_context_create(const aot_model_t* model, const aot_context_options_t* options,
                                aot_context_t** out_context, aot_error_t* err) {
  if (!out_context) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "out_context is NULL");
  *out_context = NULL;
  if (!model) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is NULL");
  if (model->magic != AOT__MODEL_MAGIC)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is closed (or not a model)");
  uint32_t threads = 1;
  if (options) {
    /* Options structs are append-only: read only the fields the caller's
     * struct_size covers. */
    if (options->struct_size < 2 * sizeof(uint32_t))
      return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "options->struct_size %u is too small",
                       options->struct_size);
    threads = options->num_threads ? options->num_threads : 1;
  }
  if (threads > MAX_THREADS)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "num_threads %u exceeds %u", threads,
                     MAX_THREADS);
  aot_context_t* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  ctx->magic = CONTEXT_MAGIC;
  ctx->model = model;
  ctx->arena = aot__aligned_alloc(model->arena_align, model->arena_bytes);
  ctx->in_ptrs = calloc(model->input_count + 1, sizeof *ctx->in_ptrs);
  ctx->out_ptrs = calloc(model->output_count + 1, sizeof *ctx->out_ptrs);
  if (!ctx->arena || !ctx->in_ptrs || !ctx->out_ptrs) {
    aot_context_destroy(ctx);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "cannot allocate the arena (%llu bytes)",
                     (unsigned long long)model->arena_bytes);
  }
  /* no pool (no threads at all) when every kernel runs whole on the caller anyway */
  if (threads > 1 && aot__model_splits(model, threads)) {
    aot_status_t st = aot__pool_create(model, threads, &ctx->pool, err);
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
  free(ctx->arena);
  free(ctx->in_ptrs);
  free(ctx->out_ptrs);
  free(ctx);
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

aot_status_t aot_run(aot_context_t* ctx, const aot_tensor_t* inputs, uint32_t input_count,
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
  if (ctx->pool) {
    aot__job_t job = {ctx->in_ptrs, ctx->out_ptrs, ctx->arena};
    aot__pool_run(ctx->pool, &job);
  } else {
    m->entry(ctx->in_ptrs, ctx->out_ptrs, ctx->arena, m->weights);
  }
  return run_checks(ctx, err);
}
