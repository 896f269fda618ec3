/* threadpool.c - a per-context pthread pool that runs a model's kernel list.
 *
 * One aot__pool_run wakes the workers once; then every thread (workers and
 * the caller) walks the same kernel list: it claims chunks of [0, work) of
 * kernel k from an atomic counter, then waits on a barrier before kernel
 * k+1. The barrier after the last kernel is the completion of the run.
 * Thread-safety: one aot__pool_run at a time per pool (the context's rule). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CHUNKS_PER_THREAD 4

struct aot__pool {
  uint32_t workers;
  uint32_t started;
  pthread_t* threads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t generation; /* bumped per run, under mu */
  int stop;            /* under mu */
  const aot__job_t* job;
  pthread_barrier_t barrier; /* workers + 1 */
  uint32_t counter_count;
  _Atomic int64_t* counters; /* next unclaimed item per kernel */
};

static void run_kernels(aot__pool_t* pool, const aot__job_t* job) {
  /* Copy everything first: `job` lives on the caller's stack and must not be
   * read after the final barrier. */
  const aot_model_t* m = job->model;
  const void* const* in = job->inputs;
  void* const* out = job->outputs;
  uint8_t* arena = job->arena;
  const uint8_t* weights = m->weights;
  uint32_t nk = m->kernel_count;
  int64_t threads = (int64_t)pool->workers + 1;
  for (uint32_t k = 0; k < nk; k++) {
    const aot__kernel_t* kern = &m->kernels[k];
    int64_t work = kern->work;
    if (work == 0) continue; /* every thread skips it: barriers stay matched */
    int64_t chunk = work / (threads * CHUNKS_PER_THREAD);
    if (chunk < 1) chunk = 1;
    while (1) {
      int64_t begin = atomic_fetch_add_explicit(&pool->counters[k], chunk, memory_order_relaxed);
      if (begin >= work) break;
      int64_t end = work - begin < chunk ? work : begin + chunk;
      kern->fn(in, out, arena, weights, begin, end);
    }
    pthread_barrier_wait(&pool->barrier);
  }
}

static void* worker_main(void* arg) {
  aot__pool_t* pool = (aot__pool_t*)arg;
  uint64_t seen = 0;
  while (1) {
    pthread_mutex_lock(&pool->mu);
    while (!pool->stop && pool->generation == seen) pthread_cond_wait(&pool->cv, &pool->mu);
    if (pool->stop) {
      pthread_mutex_unlock(&pool->mu);
      return NULL;
    }
    seen = pool->generation;
    const aot__job_t* job = pool->job;
    pthread_mutex_unlock(&pool->mu);
    run_kernels(pool, job);
  }
}

static void stop_workers(aot__pool_t* pool) {
  pthread_mutex_lock(&pool->mu);
  pool->stop = 1;
  pthread_cond_broadcast(&pool->cv);
  pthread_mutex_unlock(&pool->mu);
  for (uint32_t i = 0; i < pool->started; i++) pthread_join(pool->threads[i], NULL);
  pool->started = 0;
}

aot_status_t aot__pool_create(uint32_t workers, aot__pool_t** out, aot_error_t* err) {
  *out = NULL;
  aot__pool_t* pool = calloc(1, sizeof *pool);
  if (!pool) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  pool->workers = workers;
  pool->threads = calloc(workers ? workers : 1, sizeof *pool->threads);
  if (!pool->threads) {
    free(pool);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  }
  if (pthread_mutex_init(&pool->mu, NULL) != 0) {
    free(pool->threads);
    free(pool);
    return aot__fail(err, AOT_ERR_INTERNAL, "pthread_mutex_init failed");
  }
  if (pthread_cond_init(&pool->cv, NULL) != 0) {
    pthread_mutex_destroy(&pool->mu);
    free(pool->threads);
    free(pool);
    return aot__fail(err, AOT_ERR_INTERNAL, "pthread_cond_init failed");
  }
  if (pthread_barrier_init(&pool->barrier, NULL, workers + 1) != 0) {
    pthread_cond_destroy(&pool->cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool->threads);
    free(pool);
    return aot__fail(err, AOT_ERR_INTERNAL, "pthread_barrier_init failed");
  }
  for (uint32_t i = 0; i < workers; i++) {
    if (pthread_create(&pool->threads[i], NULL, worker_main, pool) != 0) {
      aot__pool_destroy(pool);
      return aot__fail(err, AOT_ERR_INTERNAL, "cannot start worker thread %u of %u", i + 1,
                       workers);
    }
    pool->started = i + 1;
  }
  *out = pool;
  return AOT_OK;
}

void aot__pool_destroy(aot__pool_t* pool) {
  if (!pool) return;
  stop_workers(pool);
  pthread_barrier_destroy(&pool->barrier);
  pthread_cond_destroy(&pool->cv);
  pthread_mutex_destroy(&pool->mu);
  free(pool->counters);
  free(pool->threads);
  free(pool);
}

void aot__pool_run(aot__pool_t* pool, const aot__job_t* job) {
  uint32_t nk = job->model->kernel_count;
  if (pool->counter_count < nk) {
    _Atomic int64_t* c = realloc(pool->counters, nk * sizeof *c);
    if (!c) { /* no memory for counters: run the entry on this thread */
      job->model->entry(job->inputs, job->outputs, job->arena, job->model->weights);
      return;
    }
    pool->counters = c;
    pool->counter_count = nk;
  }
  for (uint32_t k = 0; k < nk; k++) atomic_init(&pool->counters[k], 0);
  pthread_mutex_lock(&pool->mu);
  pool->job = job;
  pool->generation++;
  pthread_cond_broadcast(&pool->cv);
  pthread_mutex_unlock(&pool->mu);
  run_kernels(pool, job);
}
