/* libFuzzer harness: the manifest JSON parser, and the whole open path (container,
 * section decode, manifest, weights, code lookup) and run on arbitrary artifacts.
 *
 * The input's LAST byte selects what is fuzzed (every artifact begins with the
 * same magic, so a leading selector would pick one target for all of them):
 *   sel % 4 == 0  the JSON parser on the other bytes
 *   sel % 4 == 1  aot_model_open_memory
 *   sel % 4 == 2  open, then aot_run on 1 thread with zeroed inputs
 *   sel % 4 == 3  open, then aot_run on 3 threads
 *   sel & 4       keep the section and header CRCs as given (else they are repaired,
 *                 as anyone who edits a file can do, so mutations reach the parsers
 *                 behind the checksums)
 *   sel & 8       keep the header's file_size as given (else it is set to the size)
 *
 * Loading code is the trust boundary: the runtime dlopens the code section, so a
 * mutated one would fuzz the dynamic loader, not aot. dlopen is wrapped (link with
 * -Wl,--wrap=dlopen) and loads only images byte-identical to one of the files in
 * $AOT_FUZZ_CODE_DIR (the seeds' code sections); any other image fails to load.
 * Without that variable no code loads and opens stop there.
 *
 * The run targets execute the seeds' real code under whatever the mutated
 * manifest claims (arena size, kernel work, tensor sizes). The runtime compares
 * the manifest with the code's aot_code_info before anything runs; were a lie to
 * slip through, the code would write out of bounds, which ASan does not see (the
 * code is not instrumented) until a later, unrelated input trips over the damaged
 * heap: then reproduce with the corpus, not the last input alone.
 * AOT_FUZZ_NO_RUN=1 turns the run targets into open, to fuzz the parsers alone.
 *
 * In runtime_c/ (tests/runtime/test_libfuzzer.py does the same for 60 s):
 *   make fuzz CC=clang
 *   python3 ../benchmarks/fuzz_seeds.py build/fuzz/work    # seeds/, code/, aot.dict
 *   mkdir -p build/fuzz/work/corpus
 *   AOT_FUZZ_CODE_DIR=build/fuzz/work/code build/fuzz/fuzz_open -dict=build/fuzz/work/aot.dict \
 *     -max_total_time=60 build/fuzz/work/corpus build/fuzz/work/seeds */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define HEADER_SIZE 64u
#define ENTRY_SIZE 64u
#define MAX_CODE_IMAGES 64
#define MAX_RUN_BYTES (16u << 20) /* inputs + outputs of one run */

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
void* __real_dlopen(const char* file, int mode);
void* __wrap_dlopen(const char* file, int mode);

typedef struct {
  uint8_t* bytes;
  size_t size;
} image_t;

static image_t allowed[MAX_CODE_IMAGES];
static int allowed_count;
static int no_run;

static uint8_t* read_file(const char* path, size_t* out_size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat sb;
  uint8_t* buf = NULL;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) buf = malloc((size_t)sb.st_size + 1);
  size_t got = 0;
  while (buf && got < (size_t)sb.st_size) {
    ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  *out_size = got;
  return buf;
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  no_run = getenv("AOT_FUZZ_NO_RUN") && strcmp(getenv("AOT_FUZZ_NO_RUN"), "0") != 0;
  const char* dir = getenv("AOT_FUZZ_CODE_DIR");
  DIR* d = dir ? opendir(dir) : NULL;
  if (!d) {
    fprintf(stderr, "fuzz_open: AOT_FUZZ_CODE_DIR unset or unreadable: no code will load\n");
    return 0;
  }
  for (struct dirent* e; (e = readdir(d)) && allowed_count < MAX_CODE_IMAGES;) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    image_t im;
    im.bytes = read_file(path, &im.size);
    if (im.bytes) allowed[allowed_count++] = im;
  }
  closedir(d);
  fprintf(stderr, "fuzz_open: %d trusted code images from %s\n", allowed_count, dir);
  return 0;
}

/* The runtime writes the code image to a memfd and dlopens /proc/self/fd/N. */
void* __wrap_dlopen(const char* file, int mode) {
  size_t n = 0;
  uint8_t* image = file ? read_file(file, &n) : NULL;
  int ok = 0;
  for (int i = 0; image && i < allowed_count && !ok; i++)
    ok = allowed[i].size == n && memcmp(allowed[i].bytes, image, n) == 0;
  free(image);
  return ok ? __real_dlopen(file, mode) : NULL;
}

static uint32_t rd32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t* p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void wr32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t* p, uint64_t v) {
  wr32(p, (uint32_t)v);
  wr32(p + 4, (uint32_t)(v >> 32));
}

/* Make the checksums (and file_size) agree with the mutated bytes, as far as
 * the header and table say where things are (packaging/FORMAT.md). */
static void repair(uint8_t* p, size_t n, int crcs, int file_size) {
  if (n < HEADER_SIZE || memcmp(p, "AOTMODEL", 8) != 0) return;
  if (file_size) wr64(p + 24, (uint64_t)n);
  if (!crcs) return;
  uint32_t count = rd32(p + 12);
  if (count > AOT_MAX_SECTIONS) count = AOT_MAX_SECTIONS;
  size_t table_end = HEADER_SIZE + (size_t)count * ENTRY_SIZE;
  if (table_end > n) return;
  for (uint32_t i = 0; i < count; i++) {
    uint8_t* e = p + HEADER_SIZE + (size_t)i * ENTRY_SIZE;
    uint64_t off = rd64(e + 32), stored = rd64(e + 40);
    if (off <= n && stored <= n - off) wr32(e + 56, aot__crc32(0, p + off, (size_t)stored));
  }
  memset(p + 32, 0, 4);
  wr32(p + 32, aot__crc32(0, p, table_end));
}

static void run(const aot_model_t* m, uint32_t threads) {
  uint32_t ni = aot_model_input_count(m), no = aot_model_output_count(m);
  aot_tensor_t* t = calloc((size_t)ni + no + 1, sizeof *t);
  uint64_t total = 0;
  aot_context_t* ctx = NULL;
  aot_error_t err;
  int ok = t != NULL;
  for (uint32_t i = 0; ok && i < ni + no; i++) {
    aot_tensor_info_t info;
    ok = (i < ni ? aot_model_input_info(m, i, &info, NULL) : aot_model_output_info(m, i - ni, &info, NULL)) == AOT_OK &&
         info.byte_size <= MAX_RUN_BYTES - total;
    if (!ok) break;
    total += info.byte_size;
    t[i] = (aot_tensor_t){info.dtype, info.rank, info.shape, calloc(1, info.byte_size + 1), info.byte_size};
    ok = t[i].data != NULL;
  }
  aot_context_options_t opt = {.struct_size = sizeof opt, .num_threads = threads};
  if (ok && aot_context_create(m, &opt, &ctx, &err) == AOT_OK) {
    (void)aot_run(ctx, t, ni, t + ni, no, &err);
    aot_context_destroy(ctx);
  }
  for (uint32_t i = 0; t && i < ni + no; i++) free(t[i].data);
  free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t sel = data[size - 1];
  size_t n = size - 1;
  aot_error_t err;
  if (sel % 4 == 0) {
    aot__json_doc_t* doc = NULL;
    const aot__json_t* root = NULL;
    if (aot__json_parse((const char*)data, n, &doc, &root, &err) == AOT_OK) aot__json_free(doc);
    return 0;
  }
  uint8_t* p = malloc(n ? n : 1);
  if (!p) return 0;
  memcpy(p, data, n);
  repair(p, n, !(sel & 4), !(sel & 8));
  aot_model_t* m = NULL;
  if (aot_model_open_memory(p, n, &m, &err) == AOT_OK) {
    if (sel % 4 >= 2 && !no_run) run(m, sel % 4 == 2 ? 1 : 3);
    aot_model_close(m);
  }
  free(p);
  return 0;
}
