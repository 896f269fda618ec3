/* threadpool.c - a per-context pthread pool that runs a model's kernel list.
 *
 * One aot__pool_run wakes the workers once; then every thread (workers and
 * the caller) walks the same kernel list: it claims chunks of [0, work) of
 * kernel k from an atomic counter, then waits on a barrier before kernel
 * k+1. The barrier after the last kernel is the completion of the run.
 * Thread-safety: one aot__pool_run at a time per pool (the context's rule).
 *
 * Waiting spins first: a kernel of a small model takes microseconds, and a
 * futex sleep and wake-up per barrier cost tens of them (lenet on 2 threads
 * ran 13x slower than on 1 with pthread barriers). The barrier spins, then
 * yields the CPU; after a run, workers spin briefly for the next run (back
 * to back runs are the common serving loop) before they sleep on the
 * condition variable. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define CHUNKS_PER_THREAD 4
/* A waiter first spins on the CPU for PURE_SPIN_NS, then keeps polling with
 * sched_yield between reads: when the thread it waits for shares its CPU (the
 * kernel often wakes a worker on its waker's CPU), yielding lets that thread
 * run instead of burning the time slice. */
#define PURE_SPIN_NS 5000
/* how long a worker polls for the next run before it sleeps: long enough for a
 * caller's back-to-back runs, short enough not to hold a core when idle */
#define IDLE_SPIN_NS 50000
/* pause-loop iterations between clock reads */
#define SPINS_PER_CLOCK_READ 64

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Wait while *value equals `seen`: spin, then poll with sched_yield, for at
 * most `budget_ns` (< 0: no limit). */
static void wait_while_equal(_Atomic uint32_t* value, uint32_t seen, int64_t budget_ns) {
  int64_t start = now_ns();
  int yielding = 0;
  for (uint32_t polls = 1; atomic_load_explicit(value, memory_order_acquire) == seen; polls++) {
    if (yielding) {
      sched_yield();
      if (budget_ns >= 0 && now_ns() - start > budget_ns) return;
    } else if (polls % SPINS_PER_CLOCK_READ == 0) {
      int64_t waited = now_ns() - start;
      if (budget_ns >= 0 && waited > budget_ns) return;
      yielding = waited > PURE_SPIN_NS;
    } else {
      cpu_relax();
    }
  }
}

struct aot__pool {
  uint32_t workers;
  uint32_t started;
  pthread_t* threads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* bumped per run, under mu (workers may peek without it); a worker compares it
   * with the last run it took, so wrapping around is harmless */
  _Atomic uint32_t generation;
  int stop;                    /* under mu */
  const aot__job_t* job;       /* under mu */
  /* barrier of workers + 1 threads: the last to arrive resets `arrived` and
   * bumps `phase`; the others wait for `phase` to move */
  _Atomic uint32_t arrived;
  _Atomic uint32_t phase;
  uint32_t counter_count;
  _Atomic int64_t* counters; /* next unclaimed item per kernel */
};

static void barrier_wait(aot__pool_t* pool) {
  uint32_t threads = pool->workers + 1;
  uint32_t phase = atomic_load_explicit(&pool->phase, memory_order_acquire);
  if (atomic_fetch_add_explicit(&pool->arrived, 1, memory_order_acq_rel) + 1 == threads) {
    /* nobody arrives at the next barrier before `phase` moves, so the reset is safe */
    atomic_store_explicit(&pool->arrived, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->phase, phase + 1, memory_order_release);
    return;
  }
  wait_while_equal(&pool->phase, phase, -1);
}

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
    barrier_wait(pool);
  }
}

static void* worker_main(void* arg) {
  aot__pool_t* pool = (aot__pool_t*)arg;
  uint32_t seen = 0;
  while (1) {
    /* a next run that comes soon is taken without sleeping */
    wait_while_equal(&pool->generation, seen, IDLE_SPIN_NS);
    pthread_mutex_lock(&pool->mu);
    while (!pool->stop && atomic_load_explicit(&pool->generation, memory_order_relaxed) == seen)
      pthread_cond_wait(&pool->cv, &pool->mu);
    if (pool->stop) {
      pthread_mutex_unlock(&pool->mu);
      return NULL;
    }
    seen = atomic_load_explicit(&pool->generation, memory_order_relaxed);
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
  atomic_init(&pool->generation, 0);
  atomic_init(&pool->arrived, 0);
  atomic_init(&pool->phase, 0);
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
  atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
  pthread_cond_broadcast(&pool->cv);
  pthread_mutex_unlock(&pool->mu);
  run_kernels(pool, job);
}
