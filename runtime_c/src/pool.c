/* pool.c - the public thread pool (aot_pool_*, aot_runtime.h): threadpool.c's
 * pool behind a run lock, for the programs of statically linked models.
 *
 * Generated code (aot-compile --emit c) calls aot_pool_run through a weak
 * reference, so an object that is linked without this library still links; it
 * passes a program it describes itself (aot_program_t), which is checked here
 * as any caller's argument would be: a NULL kernel table, a kernel without a
 * function or a negative work count is refused before anything runs. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

/* a live pool's `magic`; cleared by aot_pool_destroy so a second destroy or a
 * run on a destroyed pool is refused (while the memory is not reused) */
#define POOL_MAGIC 0x4c4f4f50u /* "POOL" */

struct aot_pool {
  uint32_t magic;
  uint32_t num_threads;
  pthread_mutex_t run_lock; /* one run at a time: the inner pool's rule */
  aot__pool_t* inner;
};

static int live(const aot_pool_t* pool) { return pool && pool->magic == POOL_MAGIC; }

aot_status_t aot_pool_create(uint32_t num_threads, aot_pool_t** out_pool, aot_error_t* err) {
  if (!out_pool) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "out_pool is NULL");
  *out_pool = NULL;
  if (num_threads < 1 || num_threads > AOT__MAX_THREADS)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "num_threads %u: a pool has 1 to %u threads",
                     num_threads, AOT__MAX_THREADS);
  aot_pool_t* pool = calloc(1, sizeof *pool);
  if (!pool) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  if (pthread_mutex_init(&pool->run_lock, NULL) != 0) {
    free(pool);
    return aot__fail(err, AOT_ERR_INTERNAL, "pthread_mutex_init failed");
  }
  aot_status_t st = aot__pool_create(num_threads, &pool->inner, err);
  if (st) {
    pthread_mutex_destroy(&pool->run_lock);
    free(pool);
    return st;
  }
  pool->magic = POOL_MAGIC;
  pool->num_threads = num_threads;
  *out_pool = pool;
  return aot__ok(err);
}

void aot_pool_destroy(aot_pool_t* pool) {
  if (!live(pool)) return;
  pool->magic = 0;
  aot__pool_destroy(pool->inner);
  pthread_mutex_destroy(&pool->run_lock);
  free(pool);
}

uint32_t aot_pool_num_threads(const aot_pool_t* pool) { return live(pool) ? pool->num_threads : 0; }

/* The program's table as generated code writes it; refused if it could not be. */
static aot_status_t check_program(const aot_program_t* p, aot_error_t* err) {
  if (!p) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "program is NULL");
  if (p->struct_size < sizeof *p)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT,
                     "program: struct_size %u is below this runtime's aot_program_t (%zu bytes)",
                     p->struct_size, sizeof *p);
  if (p->kernel_count && !p->kernels)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "program: %u kernels but no kernel table",
                     p->kernel_count);
  for (uint32_t k = 0; k < p->kernel_count; k++) {
    if (!p->kernels[k].fn)
      return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "program: kernel %u has no function", k);
    /* bounded as a manifest's "work" is (model.c), so chunk arithmetic cannot overflow */
    if (p->kernels[k].work < 0 || p->kernels[k].work > INT64_MAX / 4)
      return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "program: kernel %u has work %lld", k,
                       (long long)p->kernels[k].work);
  }
  return AOT_OK;
}

aot_status_t aot_pool_run(aot_pool_t* pool, const aot_program_t* program, const void* const* inputs,
                          void* const* outputs, void* arena, aot_error_t* err) {
  if (!live(pool)) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "pool is NULL or destroyed");
  aot_status_t st = check_program(program, err);
  if (st) return st;
  pthread_mutex_lock(&pool->run_lock);
  st = aot__pool_bind(pool->inner, program->kernels, program->kernel_count, err);
  if (st == AOT_OK) {
    aot__job_t job = {inputs, outputs, (uint8_t*)arena, program->weights};
    aot__pool_run(pool->inner, &job);
  }
  pthread_mutex_unlock(&pool->run_lock);
  return st ? st : aot__ok(err);
}
