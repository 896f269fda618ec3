/* C tests of the public thread pool (pool.c, aot_runtime.h's aot_pool_*), through
 * the public header only: what a statically linked model's <prefix>_run_threads
 * does with it. Kernels count every item they are given, so a run that skips an
 * item or runs one twice is caught; the counts are exact, nothing is timed. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "aot_runtime.h"
#include "check.h"

#define WORK 4096
#define KERNELS 3

/* per kernel and item: how often it ran; outputs[0] points at one such table */
typedef struct counts {
  _Atomic int32_t items[KERNELS][WORK];
  _Atomic int32_t bad_pointers;
} counts_t;

static const uint8_t g_weights[64] = {42};
static uint8_t g_arena[64];
static const int32_t g_input = 7;

static void count_items(int k, const void* const* in, void* const* out, uint8_t* arena,
                        const uint8_t* weights, int64_t begin, int64_t end) {
  counts_t* c = (counts_t*)out[0];
  if (in[0] != &g_input || arena != g_arena || weights != g_weights)
    atomic_fetch_add(&c->bad_pointers, 1);
  for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->items[k][i], 1);
}

static void kernel0(const void* const* in, void* const* out, uint8_t* arena, const uint8_t* weights,
                    int64_t begin, int64_t end) {
  count_items(0, in, out, arena, weights, begin, end);
}
static void kernel1(const void* const* in, void* const* out, uint8_t* arena, const uint8_t* weights,
                    int64_t begin, int64_t end) {
  count_items(1, in, out, arena, weights, begin, end);
}
static void kernel2(const void* const* in, void* const* out, uint8_t* arena, const uint8_t* weights,
                    int64_t begin, int64_t end) {
  count_items(2, in, out, arena, weights, begin, end);
}

/* one kernel estimated far above any split's threshold (split from the first run),
 * one tiny (always on the caller), one with no estimate (split by item count) */
static const aot_kernel_t g_kernels[KERNELS] = {
    {kernel0, WORK, 1000000000}, {kernel1, WORK, 10}, {kernel2, WORK, -1}};
static const aot_program_t g_program = {sizeof(aot_program_t), KERNELS, g_kernels, g_weights};
/* a second program on the same pool: the first two kernels, with fewer items */
static const aot_kernel_t g_kernels_b[2] = {{kernel0, WORK / 2, 1000000000}, {kernel1, 3, 10}};
static const aot_program_t g_program_b = {sizeof(aot_program_t), 2, g_kernels_b, g_weights};

static counts_t g_counts;

/* every item of every kernel of `p` counted `runs` times, the rest never */
static void check_counts(const counts_t* c, const aot_program_t* p, int runs, const char* what) {
  int32_t wrong = 0;
  for (int k = 0; k < KERNELS; k++)
    for (int64_t i = 0; i < WORK; i++) {
      int32_t want = (uint32_t)k < p->kernel_count && i < p->kernels[k].work ? runs : 0;
      wrong += atomic_load(&c->items[k][i]) != want;
    }
  CHECK(wrong == 0, "%s: %d items ran a wrong number of times", what, wrong);
  CHECK(atomic_load(&c->bad_pointers) == 0, "%s: a kernel got other pointers than the run's", what);
}

static aot_status_t run(aot_pool_t* pool, const aot_program_t* p, counts_t* c, aot_error_t* err) {
  const void* inputs[1] = {&g_input};
  void* outputs[1] = {c};
  return aot_pool_run(pool, p, inputs, outputs, g_arena, err);
}

static void test_create_refuses_bad_arguments(void) {
  aot_pool_t* pool = (aot_pool_t*)&g_counts;
  aot_error_t err;
  CHECK(aot_pool_create(0, &pool, &err) == AOT_ERR_INVALID_ARGUMENT && pool == NULL &&
            strstr(err.message, "num_threads 0"),
        "0 threads: %s", err.message);
  CHECK(aot_pool_create(1025, &pool, &err) == AOT_ERR_INVALID_ARGUMENT &&
            strstr(err.message, "1 to 1024"),
        "1025 threads: %s", err.message);
  CHECK(aot_pool_create(2, NULL, &err) == AOT_ERR_INVALID_ARGUMENT, "no out_pool");
  CHECK(aot_pool_num_threads(NULL) == 0, "NULL pool");
  aot_pool_destroy(NULL);
}

static void test_runs_every_item_once(uint32_t threads) {
  aot_pool_t* pool = NULL;
  aot_error_t err;
  if (aot_pool_create(threads, &pool, &err) != AOT_OK) {
    CHECK(0, "aot_pool_create(%u): %s", threads, err.message);
    return;
  }
  CHECK(aot_pool_num_threads(pool) == threads, "%u threads", aot_pool_num_threads(pool));
  /* past the calibration runs, and back and forth between two programs, each
   * rebinding the pool: every run of either covers its items exactly once */
  static counts_t a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int runs_a = 0, runs_b = 0;
  for (int i = 0; i < 12; i++) {
    int second = i % 4 == 3;
    aot_status_t st = second ? run(pool, &g_program_b, &b, &err) : run(pool, &g_program, &a, &err);
    CHECK(st == AOT_OK, "run %d on %u threads: %s", i, threads, err.message);
    runs_a += !second;
    runs_b += second;
  }
  char what[64];
  snprintf(what, sizeof what, "program a on %u threads", threads);
  check_counts(&a, &g_program, runs_a, what);
  snprintf(what, sizeof what, "program b on %u threads", threads);
  check_counts(&b, &g_program_b, runs_b, what);
  aot_pool_destroy(pool);
}

static void test_run_refuses_bad_programs(void) {
  aot_pool_t* pool = NULL;
  aot_error_t err;
  if (aot_pool_create(2, &pool, &err) != AOT_OK) {
    CHECK(0, "aot_pool_create: %s", err.message);
    return;
  }
  static counts_t c;
  memset(&c, 0, sizeof c);
  CHECK(run(NULL, &g_program, &c, &err) == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "pool"),
        "NULL pool: %s", err.message);
  CHECK(run(pool, NULL, &c, &err) == AOT_ERR_INVALID_ARGUMENT, "NULL program: %s", err.message);
  aot_program_t small = g_program;
  small.struct_size = 8;
  CHECK(run(pool, &small, &c, &err) == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "struct_size 8"),
        "old struct: %s", err.message);
  aot_program_t no_table = g_program;
  no_table.kernels = NULL;
  CHECK(run(pool, &no_table, &c, &err) == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "no kernel table"),
        "no table: %s", err.message);
  aot_kernel_t broken[KERNELS];
  memcpy(broken, g_kernels, sizeof broken);
  broken[2].fn = NULL;
  aot_program_t no_fn = {sizeof(aot_program_t), KERNELS, broken, g_weights};
  CHECK(run(pool, &no_fn, &c, &err) == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "kernel 2 has no function"),
        "no function: %s", err.message);
  memcpy(broken, g_kernels, sizeof broken);
  broken[1].work = -1;
  CHECK(run(pool, &no_fn, &c, &err) == AOT_ERR_INVALID_ARGUMENT && strstr(err.message, "kernel 1 has work -1"),
        "negative work: %s", err.message);
  check_counts(&c, &g_program, 0, "refused programs"); /* none of them ran a kernel */
  aot_program_t empty = {sizeof(aot_program_t), 0, NULL, NULL};
  CHECK(run(pool, &empty, &c, &err) == AOT_OK, "no kernels: %s", err.message);
  aot_pool_destroy(pool);
}

/* Two threads share one pool: their runs take turns (the pool's run lock), and
 * each covers its items once. */
#define SHARED_RUNS 25
static aot_pool_t* g_shared;
static counts_t g_shared_counts[2];

static void* run_shared(void* arg) {
  counts_t* c = (counts_t*)arg;
  aot_error_t err;
  for (int i = 0; i < SHARED_RUNS; i++)
    if (run(g_shared, &g_program, c, &err) != AOT_OK) atomic_fetch_add(&c->bad_pointers, 1);
  return NULL;
}

static void test_threads_share_a_pool(void) {
  aot_error_t err;
  if (aot_pool_create(3, &g_shared, &err) != AOT_OK) {
    CHECK(0, "aot_pool_create: %s", err.message);
    return;
  }
  memset(g_shared_counts, 0, sizeof g_shared_counts);
  pthread_t other;
  if (pthread_create(&other, NULL, run_shared, &g_shared_counts[1]) != 0) {
    CHECK(0, "pthread_create");
    aot_pool_destroy(g_shared);
    return;
  }
  run_shared(&g_shared_counts[0]);
  pthread_join(other, NULL);
  check_counts(&g_shared_counts[0], &g_program, SHARED_RUNS, "first of two sharing threads");
  check_counts(&g_shared_counts[1], &g_program, SHARED_RUNS, "second of two sharing threads");
  aot_pool_destroy(g_shared);
}

/* Programs whose kernel the pool times before it splits it: 64 items of 2 us each, estimated
 * at 100 us (below what a 2-thread pool splits untimed, above what it splits once measured).
 * Each run of either counts its kernel's calls: 1 while it runs whole, one per chunk after. */
#define SLOW_ITEMS 64
#define SLOW_ITEM_NS 2000
static _Atomic int64_t g_slow_calls[2];

static int64_t clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void spin(int which, int64_t begin, int64_t end) {
  int64_t until = clock_ns() + (end - begin) * SLOW_ITEM_NS;
  while (clock_ns() < until) {
  }
  atomic_fetch_add(&g_slow_calls[which], 1);
}
static void slow_a(const void* const* in, void* const* out, uint8_t* arena, const uint8_t* weights,
                   int64_t begin, int64_t end) {
  (void)in, (void)out, (void)arena, (void)weights;
  spin(0, begin, end);
}
static void slow_b(const void* const* in, void* const* out, uint8_t* arena, const uint8_t* weights,
                   int64_t begin, int64_t end) {
  (void)in, (void)out, (void)arena, (void)weights;
  spin(1, begin, end);
}

/* Runs of two programs alternate on one pool: each is timed in its own first two runs and
 * split in every run after, so switching programs keeps each one's measured splits. */
static void test_alternating_programs_keep_their_splits(void) {
  static const aot_kernel_t ka[1] = {{slow_a, SLOW_ITEMS, 100000}}, kb[1] = {{slow_b, SLOW_ITEMS, 100000}};
  static const aot_program_t a = {sizeof(aot_program_t), 1, ka, NULL}, b = {sizeof(aot_program_t), 1, kb, NULL};
  aot_pool_t* pool = NULL;
  aot_error_t err;
  if (aot_pool_create(2, &pool, &err) != AOT_OK) {
    CHECK(0, "aot_pool_create: %s", err.message);
    return;
  }
  for (int round = 0; round < 6; round++) {
    for (int which = 0; which < 2; which++) {
      atomic_store(&g_slow_calls[which], 0);
      CHECK(aot_pool_run(pool, which ? &b : &a, NULL, NULL, NULL, &err) == AOT_OK, "run: %s", err.message);
      int64_t calls = atomic_load(&g_slow_calls[which]);
      if (round < 2)
        CHECK(calls == 1, "round %d, program %d: timed whole, got %lld calls", round, which, (long long)calls);
      else
        CHECK(calls > 1, "round %d, program %d: split by its measured time, got %lld call(s)", round, which,
              (long long)calls);
    }
  }
  aot_pool_destroy(pool);
}

int main(void) {
  test_create_refuses_bad_arguments();
  test_runs_every_item_once(1);
  test_runs_every_item_once(2);
  test_runs_every_item_once(4);
  test_run_refuses_bad_programs();
  test_threads_share_a_pool();
  test_alternating_programs_keep_their_splits();
  printf("test_pool: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
