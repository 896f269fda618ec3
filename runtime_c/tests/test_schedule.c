/* C tests of schedule.c: which kernels a context splits across its threads,
 * and that every split covers [0, work) exactly once; and of how threadpool.c
 * runs them: which thread runs each call of a kernel, counted, not timed. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "check.h"
#include "internal.h"

static aot__split_t split(int64_t work, int64_t cost_ns, uint32_t threads) {
  aot__kernel_t k = {NULL, work, cost_ns};
  return aot__split_kernel(&k, threads);
}

static void test_whole(void) {
  /* one thread, one item, or too little estimated work: the caller runs it whole */
  aot__split_t s = split(1000, -1, 1);
  CHECK(s.chunks == 1 && s.items == 1000, "one thread: %u x %lld", s.chunks, (long long)s.items);
  s = split(1, 1000000000, 8);
  CHECK(s.chunks == 1 && s.items == 1, "one item: %u", s.chunks);
  s = split(0, -1, 8);
  CHECK(s.chunks == 1 && s.items == 0, "no items: %u", s.chunks);
  s = split(4096, 2 * AOT__MIN_CHUNK_NS - 1, 8);
  CHECK(s.chunks == 1, "below two chunks' worth: %u", s.chunks);
  s = split(4096, 0, 8);
  CHECK(s.chunks == 1, "free kernel: %u", s.chunks);
}

static void test_split(void) {
  /* just two chunks' worth: two chunks, one per thread at most */
  aot__split_t s = split(148, 2 * AOT__MIN_CHUNK_NS, 4);
  CHECK(s.chunks == 2 && s.items == 74, "two chunks: %u x %lld", s.chunks, (long long)s.items);
  /* work for CHUNKS_PER_THREAD chunks per thread: that many equal ones */
  s = split(800, 2 * AOT__CHUNKS_PER_THREAD * AOT__MIN_CHUNK_NS, 2);
  CHECK(s.chunks == 2 * AOT__CHUNKS_PER_THREAD && s.items == 100 && s.head_chunks == s.chunks,
        "%u x %lld", s.chunks, (long long)s.items);
  /* plenty of work: a head chunk per thread (HEAD_PERCENT of the items), then
   * TAIL_CHUNKS_PER_THREAD small ones per thread */
  s = split(800, 1000000000, 2);
  CHECK(s.head_chunks == 2 && s.items == 800 * AOT__HEAD_PERCENT / 100 / 2, "head: %u x %lld",
        s.head_chunks, (long long)s.items);
  CHECK(s.chunks - s.head_chunks == 2 * AOT__TAIL_CHUNKS_PER_THREAD &&
            s.tail_items == (800 - 2 * s.items + 2 * AOT__TAIL_CHUNKS_PER_THREAD - 1) /
                                (2 * AOT__TAIL_CHUNKS_PER_THREAD),
        "tail: %u x %lld", s.chunks - s.head_chunks, (long long)s.tail_items);
  /* the tail's chunks keep MIN_CHUNK_NS of work each: fewer, larger ones */
  s = split(800, 20 * AOT__MIN_CHUNK_NS, 2);
  CHECK(s.head_chunks == 2 && s.tail_items == 40 && s.chunks == 2 + 5, "short tail: %u, %u x %lld",
        s.head_chunks, s.chunks - s.head_chunks, (long long)s.tail_items);
  /* more chunks than items are never made */
  s = split(3, 1000000000, 8);
  CHECK(s.chunks == 3 && s.items == 1, "three items: %u x %lld", s.chunks, (long long)s.items);
  /* no estimate (an older artifact): split by item count, as before estimates */
  s = split(148, -1, 4);
  CHECK(s.chunks == 15 && s.items == 10, "no estimate: %u x %lld", s.chunks, (long long)s.items);
}

/* For many shapes: chunks cover [0, work) exactly, in order, none empty; at most a
 * head chunk and TAIL_CHUNKS_PER_THREAD per thread, the head one per thread or all;
 * and each but the last holds at least MIN_CHUNK_NS of estimated work. */
static void test_cover(void) {
  static const int64_t works[] = {2, 3, 7, 24, 97, 128, 1000, 4097, INT64_MAX / 4};
  static const int64_t costs[] = {-1, 0, AOT__MIN_CHUNK_NS, 3 * AOT__MIN_CHUNK_NS + 1, 100000,
                                  1000000, INT64_MAX};
  static const uint32_t threads[] = {1, 2, 3, 4, 16, 1024, 100000};
  for (size_t w = 0; w < sizeof works / sizeof works[0]; w++)
    for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++)
      for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        int64_t work = works[w], cost = costs[c];
        aot__split_t s = split(work, cost, threads[t]);
        int64_t chunks = s.chunks, at = 0;
        for (uint32_t i = 0; i < s.chunks; i++) {
          int64_t begin, end;
          aot__chunk_range(&s, work, i, &begin, &end);
          CHECK(begin == at && end > begin && end <= work,
                "work %lld cost %lld threads %u: chunk %u of %lld is [%lld, %lld), expected from %lld",
                (long long)work, (long long)cost, threads[t], i, (long long)chunks,
                (long long)begin, (long long)end, (long long)at);
          if (begin != at || end <= begin) break;
          CHECK(i + 1 == s.chunks || cost < 0 ||
                    (long double)cost * (long double)(end - begin) / (long double)work >=
                        AOT__MIN_CHUNK_NS,
                "work %lld cost %lld threads %u: chunk %u of %lld items is too small",
                (long long)work, (long long)cost, threads[t], i, (long long)(end - begin));
          at = end;
        }
        CHECK(at == work, "work %lld cost %lld threads %u: the chunks end at %lld", (long long)work,
              (long long)cost, threads[t], (long long)at);
        CHECK(chunks == 1 || chunks <= (int64_t)threads[t] * (1 + AOT__TAIL_CHUNKS_PER_THREAD),
              "%lld chunks", (long long)chunks);
        CHECK(s.head_chunks == chunks || s.head_chunks == threads[t], "%u chunks in the head",
              s.head_chunks);
        CHECK(chunks <= AOT__MAX_CHUNKS, "%lld chunks", (long long)chunks);
      }
}

static void test_model_splits(void) {
  aot__kernel_t ks[2] = {{NULL, 100, 10}, {NULL, 1, 1000000000}};
  aot_model_t m = {0};
  m.kernels = ks;
  m.kernel_count = 2;
  CHECK(!aot__model_splits(&m, 2), "small kernels only: no pool");
  ks[0].cost_ns = 1000000;
  CHECK(aot__model_splits(&m, 2), "a large kernel: a pool");
  CHECK(!aot__model_splits(&m, 1), "one thread: no pool");
  m.kernel_count = 0;
  CHECK(!aot__model_splits(&m, 8), "no kernels: no pool");
}

/* ---- the pool: kernels that count their calls, and the calls off the caller ---- */
#define POOL_KERNELS 4
#define POOL_WORK 64
/* the slow kernel's time per item: its 64 items take at least 64 us, so its
 * measured time gives every chunk of the largest split MIN_CHUNK_NS or more */
#define SLOW_ITEM_NS 1000

static pthread_t g_caller;
static _Atomic int64_t g_calls[POOL_KERNELS], g_items[POOL_KERNELS], g_off_caller[POOL_KERNELS];
/* calls of item 0 off the caller */
static _Atomic int64_t g_first_off_caller[POOL_KERNELS];

static void count(int k, int64_t begin, int64_t end) {
  atomic_fetch_add(&g_calls[k], 1);
  atomic_fetch_add(&g_items[k], end - begin);
  if (!pthread_equal(pthread_self(), g_caller)) {
    atomic_fetch_add(&g_off_caller[k], 1);
    if (begin == 0) atomic_fetch_add(&g_first_off_caller[k], 1);
  }
}

static int64_t clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void slow_kernel(const void* const* in, void* const* out, uint8_t* arena,
                        const uint8_t* weights, int64_t begin, int64_t end) {
  (void)in, (void)out, (void)arena, (void)weights;
  int64_t until = clock_ns() + (end - begin) * SLOW_ITEM_NS;
  while (clock_ns() < until) {
  }
  count(0, begin, end);
}

static void tiny_kernel(const void* const* in, void* const* out, uint8_t* arena,
                        const uint8_t* weights, int64_t begin, int64_t end) {
  (void)in, (void)out, (void)arena, (void)weights;
  count(1, begin, end);
}

/* estimated slow, measured as fast as tiny_kernel */
static void overestimated_kernel(const void* const* in, void* const* out, uint8_t* arena,
                                 const uint8_t* weights, int64_t begin, int64_t end) {
  (void)in, (void)out, (void)arena, (void)weights;
  count(2, begin, end);
}

/* estimated far above the split's threshold: split from the first run, never timed */
static void certain_kernel(const void* const* in, void* const* out, uint8_t* arena,
                           const uint8_t* weights, int64_t begin, int64_t end) {
  (void)in, (void)out, (void)arena, (void)weights;
  count(3, begin, end);
}

/* an estimate that the pool times (below 4 times the largest split's worth) but
 * splits in as many chunks as `threads` get */
static int64_t timed_estimate(uint32_t threads) {
  return (int64_t)threads * AOT__CHUNKS_PER_THREAD * AOT__MIN_CHUNK_NS * 2;
}

static void reset_counts(void) {
  for (int k = 0; k < POOL_KERNELS; k++) {
    atomic_store(&g_calls[k], 0);
    atomic_store(&g_items[k], 0);
    atomic_store(&g_off_caller[k], 0);
    atomic_store(&g_first_off_caller[k], 0);
  }
}

/* A tiny kernel runs whole on the caller in every run; in the first
 * AOT__CALIBRATION_RUNS runs every kernel near the split threshold runs whole
 * on the caller (timed), and after them its split follows the measured time:
 * the slow kernel split, the overestimated one whole on the caller. A kernel
 * estimated far above the threshold is split in every run, and its first
 * chunk is always the caller's. */
static void test_pool_caller_runs_small_kernels(void) {
  aot__kernel_t ks[POOL_KERNELS] = {
      {slow_kernel, POOL_WORK, timed_estimate(2)},
      {tiny_kernel, POOL_WORK, 100},
      {overestimated_kernel, POOL_WORK, timed_estimate(2)},
      {certain_kernel, POOL_WORK, 1000000000},
  };
  int64_t chunks = aot__split_kernel(&ks[3], 2).chunks;
  aot_model_t m = {0};
  m.kernels = ks;
  m.kernel_count = POOL_KERNELS;
  CHECK(aot__model_splits(&m, 2), "the estimates split kernels 0 and 2: a pool");
  aot__pool_t* pool = NULL;
  aot_error_t err = {0};
  if (aot__pool_create(2, &pool, &err) != AOT_OK ||
      aot__pool_bind(pool, ks, POOL_KERNELS, &err) != AOT_OK) {
    CHECK(0, "aot__pool_create: %s", err.message);
    return;
  }
  g_caller = pthread_self();
  aot__job_t job = {NULL, NULL, NULL, NULL};
  for (int run = 0; run < AOT__CALIBRATION_RUNS; run++) {
    reset_counts();
    aot__pool_run(pool, &job);
    for (int k = 0; k < 3; k++)
      CHECK(g_calls[k] == 1 && g_items[k] == POOL_WORK && g_off_caller[k] == 0,
            "calibration run %d, kernel %d: %lld calls, %lld items, %lld off the caller", run, k,
            (long long)g_calls[k], (long long)g_items[k], (long long)g_off_caller[k]);
    CHECK(g_calls[3] == chunks && g_items[3] == POOL_WORK && g_first_off_caller[3] == 0,
          "calibration run %d: %lld calls, first chunk off the caller %lld times", run,
          (long long)g_calls[3], (long long)g_first_off_caller[3]);
  }
  /* the slow kernel's measured time is at least POOL_WORK * SLOW_ITEM_NS (more on a slow
   * clock, under qemu): split, in at most as many chunks as a head and a tail make */
  int64_t least = 2, most = 2 * (1 + AOT__TAIL_CHUNKS_PER_THREAD);
  CHECK(chunks > 2 * AOT__CHUNKS_PER_THREAD, "%lld chunks", (long long)chunks);
  for (int run = 0; run < 5; run++) {
    reset_counts();
    aot__pool_run(pool, &job);
    CHECK(g_calls[0] >= least && g_calls[0] <= most && g_items[0] == POOL_WORK,
          "run %d, slow kernel: %lld calls (%lld to %lld), %lld items", run, (long long)g_calls[0],
          (long long)least, (long long)most, (long long)g_items[0]);
    for (int k = 1; k < 3; k++)
      CHECK(g_calls[k] == 1 && g_items[k] == POOL_WORK && g_off_caller[k] == 0,
            "run %d, kernel %d: %lld calls, %lld items, %lld off the caller", run, k,
            (long long)g_calls[k], (long long)g_items[k], (long long)g_off_caller[k]);
    CHECK(g_calls[3] == chunks && g_items[3] == POOL_WORK && g_first_off_caller[3] == 0,
          "run %d: %lld calls, first chunk off the caller %lld times", run, (long long)g_calls[3],
          (long long)g_first_off_caller[3]);
  }
  aot__pool_destroy(pool);
}

/* Estimated worth splitting, measured not: after the calibration runs no
 * kernel is split and no worker runs any of them. */
static void test_pool_measured_small_runs_on_caller(void) {
  aot__kernel_t ks[2] = {
      {tiny_kernel, POOL_WORK, timed_estimate(4)},
      {overestimated_kernel, POOL_WORK, timed_estimate(4)},
  };
  aot__pool_t* pool = NULL;
  aot_error_t err = {0};
  if (aot__pool_create(4, &pool, &err) != AOT_OK || aot__pool_bind(pool, ks, 2, &err) != AOT_OK) {
    CHECK(0, "aot__pool_create: %s", err.message);
    return;
  }
  g_caller = pthread_self();
  aot__job_t job = {NULL, NULL, NULL, NULL};
  reset_counts();
  for (int run = 0; run < AOT__CALIBRATION_RUNS + 5; run++) aot__pool_run(pool, &job);
  for (int k = 1; k < 3; k++)
    CHECK(g_calls[k] == AOT__CALIBRATION_RUNS + 5 && g_off_caller[k] == 0,
          "kernel %d: %lld calls, %lld off the caller", k, (long long)g_calls[k],
          (long long)g_off_caller[k]);
  aot__pool_destroy(pool);
}

int main(void) {
  test_whole();
  test_split();
  test_cover();
  test_model_splits();
  test_pool_caller_runs_small_kernels();
  test_pool_measured_small_runs_on_caller();
  printf("test_schedule: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
