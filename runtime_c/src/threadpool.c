/* threadpool.c - a pthread pool that runs a program's kernel list: a context's
 * model, or a statically linked model's (aot_pool_*, aot_runtime.h).
 *
 * The calling thread walks the kernel list. A kernel that schedule.c does not
 * split runs whole on the caller, and no other thread hears of it. A split
 * kernel is published as a task of `chunks` chunks (schedule.c cuts them):
 * the caller runs the first, and every thread, the caller included, claims
 * the next chunk from `state` until none is left; the caller goes on once
 * every claimed chunk has finished (`done`). So the
 * caller never waits for a worker that has not started: a worker that is
 * asleep, descheduled or shares the caller's core only misses its share of
 * the work, and n threads cost about what one costs. (With a barrier after
 * every kernel, as before, two threads on one core took turns, each kernel
 * waiting for a time slice: BERT ran 2x slower on 2 threads than on 1.)
 *
 * `state` holds an epoch (one per published task), the task's chunk count
 * and the next unclaimed chunk, so a claim is a compare-and-swap that fails
 * once the task is gone or fully claimed: no thread runs a chunk of another
 * task, and the task's fields, read after a successful claim, cannot change
 * until that chunk is done. (With the count kept apart, a worker that read
 * the next task's count before its epoch could claim a chunk past the end of
 * a finished task.)
 *
 * A worker reads the run's pointers (`inputs`, `outputs`, `arena`: the pool's
 * own copies, never the caller's job) only after it has claimed a chunk, and
 * the caller returns only once every claimed chunk is done; a run that
 * publishes no task (every kernel unsplit, or with no work) leaves the workers
 * polling `state` alone. So no worker touches a finished aot_run's memory. (An
 * earlier pool handed workers a pointer to the job on aot_run's stack, and when
 * no kernel had work it skipped its barriers and returned while they still
 * read it: issue 11.)
 *
 * Workers poll for tasks while a run is in flight and for IDLE_SPIN_NS after
 * it (back-to-back runs are the common serving loop), then sleep on a
 * condition variable until the next run.
 *
 * Split by measured cost: the pool is created when the manifest's estimates
 * (cost_ns, aot/kernel_cost.py: fitted on one machine, right within a factor
 * of two or so) split some kernel. A kernel whose estimate is far above what
 * its split could use (CERTAIN_FACTOR) is split from the first run. Every
 * other one, in the first AOT__CALIBRATION_RUNS runs, runs whole on the caller
 * and is timed; after them it is split (schedule.c) by its fastest measured
 * time on this machine instead of the estimate, so a kernel that runs in less
 * time here than a hand-off is worth stays on the caller. When no kernel is
 * worth splitting, runs never publish themselves and the workers stay asleep.
 * (Timing every run instead would cost two clock reads per kernel forever,
 * and a run slowed by the machine's other load would move the splits back and
 * forth.)
 * The pool runs the program last bound to it (aot__pool_bind): a context binds
 * its model once; the public aot_pool_run binds the program it is given. The
 * pool keeps the splits of the last POOL_PROGRAMS programs it ran, so each
 * one's calibration happens once even when runs of several alternate.
 * Thread-safety: one aot__pool_run at a time per pool (the context's rule; the
 * public aot_pool_run holds the pool's run lock). */
#define _GNU_SOURCE /* sched_getcpu, pthread_setaffinity_np (Linux) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

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
/* A kernel estimated at CERTAIN_FACTOR times the time its largest split needs
 * (threads * AOT__CHUNKS_PER_THREAD chunks of AOT__MIN_CHUNK_NS) is split from
 * the first run, untimed: its measured time would split it alike unless the
 * estimate were off by more than that (the fit's typical error is 1.6x), and
 * a model's heavy kernels then run on every thread from the first run. */
#define CERTAIN_FACTOR 4
/* measured_ns of a kernel that is not timed */
#define NOT_TIMED (-1)
/* state = epoch << 32 | chunks << 16 | next chunk; schedule.c makes at most
 * AOT__MAX_CHUNKS chunks. The 32-bit epoch wraps after 2^32 split kernels: a
 * claim could only misfire if a worker stalled, between reading `state` and
 * claiming, through exactly a multiple of that many. */
#define EPOCH_SHIFT 32
#define CHUNKS_SHIFT 16
#define FIELD_MASK UINT64_C(0xFFFF)
_Static_assert(AOT__MAX_CHUNKS <= FIELD_MASK, "chunk counts must fit state's 16-bit fields");
#define CACHE_LINE 64

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
 * most `budget_ns` (< 0: no limit). Returns the value last read. */
static uint64_t wait_while_equal(_Atomic uint64_t* value, uint64_t seen, int64_t budget_ns) {
  int64_t start = now_ns();
  int yielding = 0;
  uint64_t v;
  for (uint32_t polls = 1; (v = atomic_load_explicit(value, memory_order_acquire)) == seen;
       polls++) {
    if (yielding) {
      sched_yield();
      if (budget_ns >= 0 && now_ns() - start > budget_ns) break;
    } else if (polls % SPINS_PER_CLOCK_READ == 0) {
      int64_t waited = now_ns() - start;
      if (budget_ns >= 0 && waited > budget_ns) break;
      yielding = waited > PURE_SPIN_NS;
    } else {
      cpu_relax();
    }
  }
  return v;
}

/* A program the pool has run, and how it splits its kernels. */
typedef struct aot__program_splits {
  const aot__kernel_t* kernels; /* the binder's; NULL: a free slot */
  uint32_t kernel_count, capacity; /* per kernel tables of `capacity` */
  aot__split_t* splits;            /* for the pool's thread count */
  /* per kernel: its fastest time in the calibration runs so far, or NOT_TIMED */
  int64_t* measured_ns;
  uint32_t calibration_runs_left;
  /* a run may split a kernel: splits has one of 2 chunks or more, untimed
   * while calibration_runs_left */
  int any_split;
  uint64_t last_bound; /* the pool's bind count when it was last bound: the oldest is replaced */
} aot__program_splits_t;

/* the programs whose splits a pool keeps: a server running a few models through one pool
 * keeps each one's measured splits instead of calibrating again at every switch */
#define POOL_PROGRAMS 8

struct aot__pool {
  aot__program_splits_t programs[POOL_PROGRAMS];
  aot__program_splits_t* p; /* the bound one (programs[0], empty, until the first bind) */
  uint64_t binds;
  uint32_t thread_count; /* workers and the caller */
  uint32_t workers;
  uint32_t started;
  pthread_t* threads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop; /* under mu */
  /* The task, written (relaxed) before the release store of `state` that
   * publishes it and read after a claim of it. */
  _Alignas(CACHE_LINE) _Atomic uint32_t kernel;
  _Atomic(const void* const*) inputs;
  _Atomic(void* const*) outputs;
  _Atomic(uint8_t*) arena;
  _Atomic(const uint8_t*) weights;
  /* odd while a run is in flight; workers sleep only when it is even */
  _Atomic uint32_t run;
  _Atomic uint32_t sleepers; /* workers asleep or about to sleep on cv */
  _Atomic int caller_cpu; /* the CPU the caller woke the workers from, or -1 */
  /* the claim word and the completion count, each on its own line: every
   * thread writes them */
  _Alignas(CACHE_LINE) _Atomic uint64_t state;
  _Alignas(CACHE_LINE) _Atomic uint64_t done;
  /* the caller's own, off the lines above: epoch of the last task, and what
   * `done` reads once it is finished */
  _Alignas(CACHE_LINE) uint32_t epoch;
  uint64_t target;
};

/* Run chunk `chunk` of the published task's kernel and count it done. */
static void run_chunk(aot__pool_t* pool, uint32_t chunk) {
  uint32_t kernel = atomic_load_explicit(&pool->kernel, memory_order_relaxed);
  const aot__kernel_t* k = &pool->p->kernels[kernel];
  int64_t begin, end;
  aot__chunk_range(&pool->p->splits[kernel], k->work, chunk, &begin, &end);
  k->fn(atomic_load_explicit(&pool->inputs, memory_order_relaxed),
        atomic_load_explicit(&pool->outputs, memory_order_relaxed),
        atomic_load_explicit(&pool->arena, memory_order_relaxed),
        atomic_load_explicit(&pool->weights, memory_order_relaxed), begin, end);
  atomic_fetch_add_explicit(&pool->done, 1, memory_order_release);
}

/* Claim and run chunks of the task published as `s` (the state last read)
 * until none is left; returns the state last read. */
static uint64_t work_on(aot__pool_t* pool, uint64_t s) {
  while ((s & FIELD_MASK) < ((s >> CHUNKS_SHIFT) & FIELD_MASK)) {
    /* on failure s is reloaded: another thread claimed a chunk, or a new task came */
    if (!atomic_compare_exchange_weak_explicit(&pool->state, &s, s + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    run_chunk(pool, (uint32_t)(s & FIELD_MASK));
    s++;
  }
  return s;
}

/* A worker woken by the caller is often put on the caller's CPU, and the
 * scheduler moves it only at its next balancing, tens of milliseconds later:
 * until then the two take turns (mlp on 2 threads: 0.10 ms a run for the first
 * 30 ms after an idle spell, against 0.078 settled). So a woken worker on the
 * caller's CPU moves itself off it: its affinity without that CPU (which
 * migrates it now), then its own affinity back (which leaves it where it is). */
static void leave_callers_cpu(aot__pool_t* pool) {
#ifdef __linux__
  int caller = atomic_load_explicit(&pool->caller_cpu, memory_order_relaxed);
  if (caller < 0 || sched_getcpu() != caller) return;
  cpu_set_t allowed, others;
  if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0) return;
  others = allowed;
  CPU_CLR(caller, &others);
  if (CPU_COUNT(&others) == 0) return;
  if (pthread_setaffinity_np(pthread_self(), sizeof others, &others) == 0)
    (void)pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
#else
  (void)pool;
#endif
}

static void* worker_main(void* arg) {
  aot__pool_t* pool = (aot__pool_t*)arg;
  uint64_t s = atomic_load_explicit(&pool->state, memory_order_acquire);
  while (1) {
    /* when the task is fully claimed, wait for the next one */
    uint64_t seen = work_on(pool, s);
    s = wait_while_equal(&pool->state, seen, IDLE_SPIN_NS);
    if (s != seen) continue;
    uint32_t run = atomic_load_explicit(&pool->run, memory_order_seq_cst);
    if (run & 1) continue; /* a run is in flight: keep polling */
    pthread_mutex_lock(&pool->mu);
    /* sleepers, then run; the caller writes run, then reads sleepers: one of
     * the two sees the other (sequential consistency), so no wake-up is lost */
    atomic_fetch_add_explicit(&pool->sleepers, 1, memory_order_seq_cst);
    while (!pool->stop && atomic_load_explicit(&pool->run, memory_order_seq_cst) == run)
      pthread_cond_wait(&pool->cv, &pool->mu);
    atomic_fetch_sub_explicit(&pool->sleepers, 1, memory_order_relaxed);
    int stop = pool->stop;
    pthread_mutex_unlock(&pool->mu);
    if (stop) return NULL;
    leave_callers_cpu(pool);
    s = atomic_load_explicit(&pool->state, memory_order_acquire);
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

static void free_tables(aot__pool_t* pool) {
  for (int i = 0; i < POOL_PROGRAMS; i++) {
    free(pool->programs[i].splits);
    free(pool->programs[i].measured_ns);
  }
  free(pool->threads);
  free(pool);
}

aot_status_t aot__pool_create(uint32_t threads, aot__pool_t** out, aot_error_t* err) {
  *out = NULL;
  aot__pool_t* pool = aot__aligned_alloc(CACHE_LINE, sizeof *pool);
  if (!pool) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  memset(pool, 0, sizeof *pool);
  pool->p = &pool->programs[0];
  pool->workers = threads - 1;
  pool->thread_count = threads;
  pool->threads = calloc(pool->workers ? pool->workers : 1, sizeof *pool->threads);
  if (!pool->threads) {
    free_tables(pool);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  }
  if (pthread_mutex_init(&pool->mu, NULL) != 0) {
    free_tables(pool);
    return aot__fail(err, AOT_ERR_INTERNAL, "pthread_mutex_init failed");
  }
  if (pthread_cond_init(&pool->cv, NULL) != 0) {
    pthread_mutex_destroy(&pool->mu);
    free_tables(pool);
    return aot__fail(err, AOT_ERR_INTERNAL, "pthread_cond_init failed");
  }
  atomic_init(&pool->kernel, 0);
  atomic_init(&pool->inputs, NULL);
  atomic_init(&pool->outputs, NULL);
  atomic_init(&pool->arena, NULL);
  atomic_init(&pool->weights, NULL);
  atomic_init(&pool->run, 0);
  atomic_init(&pool->sleepers, 0);
  atomic_init(&pool->caller_cpu, -1);
  atomic_init(&pool->state, 0);
  atomic_init(&pool->done, 0);
  for (uint32_t i = 0; i < pool->workers; i++) {
    if (pthread_create(&pool->threads[i], NULL, worker_main, pool) != 0) {
      aot__pool_destroy(pool);
      return aot__fail(err, AOT_ERR_INTERNAL, "cannot start worker thread %u of %u", i + 1,
                       pool->workers);
    }
    pool->started = i + 1;
  }
  *out = pool;
  return AOT_OK;
}

aot_status_t aot__pool_bind(aot__pool_t* pool, const aot__kernel_t* kernels, uint32_t count,
                            aot_error_t* err) {
  pool->binds++;
  aot__program_splits_t* slot = NULL;
  for (int i = 0; i < POOL_PROGRAMS; i++) {
    aot__program_splits_t* q = &pool->programs[i];
    if (q->kernels == kernels && q->kernel_count == count && (kernels || !count)) {
      q->last_bound = pool->binds;
      pool->p = q; /* its splits, measured before, stay */
      return AOT_OK;
    }
    if (!slot || q->last_bound < slot->last_bound) slot = q; /* free slots have 0 */
  }
  if (count > slot->capacity) {
    aot__split_t* splits = calloc(count, sizeof *splits);
    int64_t* measured = calloc(count, sizeof *measured);
    if (!splits || !measured) {
      free(splits);
      free(measured);
      return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory for the split tables of %u kernels",
                       count);
    }
    free(slot->splits);
    free(slot->measured_ns);
    slot->splits = splits;
    slot->measured_ns = measured;
    slot->capacity = count;
  }
  slot->kernels = kernels;
  slot->kernel_count = count;
  slot->last_bound = pool->binds;
  pool->p = slot;
  /* until the calibration runs are done, the estimates say how to split the
   * kernels that are not timed */
  uint32_t threads = pool->thread_count;
  int64_t certain_ns = (int64_t)threads * AOT__CHUNKS_PER_THREAD * AOT__MIN_CHUNK_NS * CERTAIN_FACTOR;
  int timed = 0;
  slot->any_split = 0;
  for (uint32_t k = 0; k < count; k++) {
    const aot__kernel_t* kern = &kernels[k];
    slot->splits[k] = aot__split_kernel(kern, threads);
    int certain = kern->cost_ns >= certain_ns || kern->work < 2;
    slot->measured_ns[k] = certain ? NOT_TIMED : INT64_MAX;
    timed |= !certain;
    slot->any_split |= certain && slot->splits[k].chunks > 1;
  }
  slot->calibration_runs_left = timed && threads > 1 ? AOT__CALIBRATION_RUNS : 0;
  return AOT_OK;
}

void aot__pool_destroy(aot__pool_t* pool) {
  if (!pool) return;
  stop_workers(pool);
  pthread_cond_destroy(&pool->cv);
  pthread_mutex_destroy(&pool->mu);
  free_tables(pool);
}

/* After the last calibration run: each timed kernel split by its fastest time. */
static void split_by_measured(aot__pool_t* pool) {
  pool->p->any_split = 0;
  for (uint32_t k = 0; k < pool->p->kernel_count; k++) {
    if (pool->p->measured_ns[k] != NOT_TIMED) {
      aot__kernel_t timed = pool->p->kernels[k];
      timed.cost_ns = pool->p->measured_ns[k];
      pool->p->splits[k] = aot__split_kernel(&timed, pool->thread_count);
    }
    pool->p->any_split |= pool->p->splits[k].chunks > 1;
  }
}

/* Kernel k whole on the caller, timed if it is timed and the pool calibrating. */
static void run_whole(aot__pool_t* pool, uint32_t k, const aot__job_t* job, int calibrating) {
  const aot__kernel_t* kern = &pool->p->kernels[k];
  if (kern->work <= 0) return;
  int timed = calibrating && pool->p->measured_ns[k] != NOT_TIMED;
  int64_t start = timed ? now_ns() : 0;
  kern->fn(job->inputs, job->outputs, job->arena, job->weights, 0, kern->work);
  if (!timed) return;
  int64_t took = now_ns() - start;
  if (took < pool->p->measured_ns[k]) pool->p->measured_ns[k] = took;
}

void aot__pool_run(aot__pool_t* pool, const aot__job_t* job) {
  int calibrating = pool->p->calibration_runs_left > 0;
  if (!pool->p->any_split) { /* every kernel on the caller: the workers need not hear of this run */
    for (uint32_t k = 0; k < pool->p->kernel_count; k++) run_whole(pool, k, job, calibrating);
    if (calibrating && --pool->p->calibration_runs_left == 0) split_by_measured(pool);
    return;
  }
  /* no task of this run is published yet, and every chunk of the last run's
   * is done: no thread reads these now */
  atomic_store_explicit(&pool->inputs, job->inputs, memory_order_relaxed);
  atomic_store_explicit(&pool->outputs, job->outputs, memory_order_relaxed);
  atomic_store_explicit(&pool->arena, job->arena, memory_order_relaxed);
  atomic_store_explicit(&pool->weights, job->weights, memory_order_relaxed);
  atomic_fetch_add_explicit(&pool->run, 1, memory_order_seq_cst); /* odd: in flight */
  if (atomic_load_explicit(&pool->sleepers, memory_order_seq_cst)) {
    /* they wake while the caller runs the first kernels */
#ifdef __linux__
    atomic_store_explicit(&pool->caller_cpu, sched_getcpu(), memory_order_relaxed);
#endif
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
  }
  for (uint32_t k = 0; k < pool->p->kernel_count; k++) {
    aot__split_t split = pool->p->splits[k];
    if (split.chunks < 2 || (calibrating && pool->p->measured_ns[k] != NOT_TIMED)) {
      run_whole(pool, k, job, calibrating);
      continue;
    }
    atomic_store_explicit(&pool->kernel, k, memory_order_relaxed);
    /* published with chunk 0 already claimed: the caller's, so each kernel's first
     * rows stay with the thread that wrote the last kernel's (schedule.c) */
    uint64_t s = (uint64_t)++pool->epoch << EPOCH_SHIFT | (uint64_t)split.chunks << CHUNKS_SHIFT | 1;
    atomic_store_explicit(&pool->state, s, memory_order_release);
    pool->target += split.chunks;
    run_chunk(pool, 0);
    (void)work_on(pool, s);
    /* only chunks other threads claimed and still run are left */
    for (uint64_t d = atomic_load_explicit(&pool->done, memory_order_acquire); d != pool->target;
         d = atomic_load_explicit(&pool->done, memory_order_acquire))
      wait_while_equal(&pool->done, d, -1);
  }
  atomic_fetch_add_explicit(&pool->run, 1, memory_order_release); /* even: idle */
  if (calibrating && --pool->p->calibration_runs_left == 0) split_by_measured(pool);
}
