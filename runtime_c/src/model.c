/* model.c - open an artifact: validate the container, read the manifest,
 * pick the CPU code variant this machine runs best (the first of its
 * architecture whose x86 features it has, or the one AOT_CPU_VARIANT names),
 * load it, resolve its symbols, compare the manifest with the code's own
 * description (code_info.c), and decode the weights.
 *
 * Memory: every section's raw size is bounded before it is decoded (the
 * manifest and code by the limits in internal.h, the weights by the manifest,
 * then by the code) and counted, with the arena, against the caller's
 * max_memory_bytes before anything large is allocated.
 *
 * A model is immutable once open and shared read-only by every context. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#if defined(__x86_64__)
#define HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define HOST_ARCH "aarch64"
#else
#define HOST_ARCH "unknown"
#endif

#define MAX_RANK 32u
#define MAX_ALIGN 4096
/* the checks function returns 1 + an index as int32 */
#define MAX_CHECKS (1u << 20)

/* A string member without embedded NULs; *out borrowed from the JSON tree. */
aot_status_t aot__manifest_string(const aot__json_t* obj, const char* key, const char* where,
                               int required, const char** out, aot_error_t* err) {
  *out = NULL;
  const aot__json_t* v = aot__json_get(obj, key);
  if (!v) {
    if (!required) return AOT_OK;
    return aot__fail(err, AOT_ERR_FORMAT, "%s: missing \"%s\"", where, key);
  }
  if (v->kind != AOT_JSON_STRING || strlen(v->str) != v->str_len)
    return aot__fail(err, AOT_ERR_FORMAT, "%s: \"%s\" must be a string without NULs", where, key);
  *out = v->str;
  return AOT_OK;
}

aot_status_t aot__manifest_int(const aot__json_t* obj, const char* key, const char* where,
                            int required, int64_t dflt, int64_t lo, int64_t hi, int64_t* out,
                            aot_error_t* err) {
  const aot__json_t* v = aot__json_get(obj, key);
  if (!v) {
    if (required) return aot__fail(err, AOT_ERR_FORMAT, "%s: missing \"%s\"", where, key);
    *out = dflt;
    return AOT_OK;
  }
  if (v->kind != AOT_JSON_NUMBER || !v->is_int || v->integer < lo || v->integer > hi)
    return aot__fail(err, AOT_ERR_FORMAT, "%s: \"%s\" must be an integer in [%lld, %lld]", where,
                     key, (long long)lo, (long long)hi);
  *out = v->integer;
  return AOT_OK;
}

static int is_pow2(int64_t a) { return a > 0 && (a & (a - 1)) == 0; }

/* What opening may allocate (aot_model_options_t.max_memory_bytes; 0: no limit), and what
 * it holds now. */
typedef struct budget {
  uint64_t limit, used;
} budget_t;

/* Count `bytes` for `what` before they are allocated or decoded. */
static aot_status_t take(budget_t* b, uint64_t bytes, const char* what, aot_error_t* err) {
  uint64_t total = bytes > UINT64_MAX - b->used ? UINT64_MAX : b->used + bytes;
  if (b->limit && total > b->limit)
    return aot__fail(err, AOT_ERR_NO_MEMORY,
                     "%s: %llu bytes would bring the model to %llu bytes, over max_memory_bytes %llu",
                     what, (unsigned long long)bytes, (unsigned long long)total,
                     (unsigned long long)b->limit);
  b->used = total;
  return AOT_OK;
}

static void give(budget_t* b, uint64_t bytes) { b->used -= bytes < b->used ? bytes : b->used; }

static void free_descs(aot__tensor_desc_t* d, uint32_t n) {
  if (!d) return;
  for (uint32_t i = 0; i < n; i++) {
    free(d[i].name);
    free(d[i].shape);
  }
  free(d);
}

static int name_order(const void* a, const void* b) {
  const aot__tensor_desc_t* x = *(const aot__tensor_desc_t* const*)a;
  const aot__tensor_desc_t* y = *(const aot__tensor_desc_t* const*)b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x < y ? -1 : x > y); /* equal names in manifest order */
}

/* Fails on the first of d's names (in manifest order) that repeats an earlier one. Sorted,
 * O(n log n): comparing every pair took 14 s for 40,000 inputs. */
static aot_status_t check_unique_names(const aot__tensor_desc_t* d, uint32_t n, const char* key,
                                       aot_error_t* err) {
  if (n < 2) return AOT_OK;
  const aot__tensor_desc_t** by_name = malloc(n * sizeof *by_name);
  if (!by_name) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  for (uint32_t i = 0; i < n; i++) by_name[i] = &d[i];
  qsort(by_name, n, sizeof *by_name, name_order);
  uint32_t dup = UINT32_MAX;
  for (uint32_t k = 1; k < n; k++)
    if (strcmp(by_name[k]->name, by_name[k - 1]->name) == 0 && (uint32_t)(by_name[k] - d) < dup)
      dup = (uint32_t)(by_name[k] - d);
  free(by_name);
  if (dup == UINT32_MAX) return AOT_OK;
  return aot__fail(err, AOT_ERR_FORMAT, "manifest: %s[%u]: duplicate name '%s'", key, dup,
                   d[dup].name);
}

/* The manifest's "inputs" or "outputs" (`required`: at least one entry). */
static aot_status_t parse_tensors(const aot__json_t* root, const char* key, int required,
                                  aot__tensor_desc_t** out, uint32_t* out_count,
                                  aot_error_t* err) {
  *out = NULL;
  *out_count = 0;
  const aot__json_t* arr = aot__json_get(root, key);
  if (!arr || arr->kind != AOT_JSON_ARRAY)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: \"%s\" must be an array", key);
  if (required && arr->count == 0)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: \"%s\" is empty (a model has at least one)",
                     key);
  if (arr->count > UINT32_MAX / 2)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: too many %s", key);
  aot__tensor_desc_t* d = calloc(arr->count ? arr->count : 1, sizeof *d);
  if (!d) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  uint32_t i = 0;
  char where[96];
  aot_status_t st = AOT_OK;
  for (const aot__json_t* t = arr->first; t; t = t->next, i++) {
    snprintf(where, sizeof where, "manifest: %s[%u]", key, i);
    if (t->kind != AOT_JSON_OBJECT) {
      st = aot__fail(err, AOT_ERR_FORMAT, "%s: must be an object", where);
      goto fail;
    }
    const char *name, *dtype;
    if ((st = aot__manifest_string(t, "name", where, 1, &name, err))) goto fail;
    if ((st = aot__manifest_string(t, "dtype", where, 1, &dtype, err))) goto fail;
    if (!name[0]) {
      st = aot__fail(err, AOT_ERR_FORMAT, "%s: empty name", where);
      goto fail;
    }
    d[i].name = malloc(strlen(name) + 1);
    if (!d[i].name) {
      st = aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
      goto fail;
    }
    memcpy(d[i].name, name, strlen(name) + 1);
    d[i].dtype = aot__dtype_from_name(dtype);
    if (d[i].dtype == AOT_DTYPE_INVALID) {
      st = aot__fail(err, AOT_ERR_UNSUPPORTED, "%s ('%s'): unknown dtype \"%s\"", where, name,
                     dtype);
      goto fail;
    }
    const aot__json_t* shape = aot__json_get(t, "shape");
    if (!shape || shape->kind != AOT_JSON_ARRAY || shape->count > MAX_RANK) {
      st = aot__fail(err, AOT_ERR_FORMAT, "%s ('%s'): \"shape\" must be an array of at most %u ints",
                     where, name, MAX_RANK);
      goto fail;
    }
    d[i].rank = (uint32_t)shape->count;
    d[i].shape = calloc(shape->count ? shape->count : 1, sizeof(int64_t));
    if (!d[i].shape) {
      st = aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
      goto fail;
    }
    uint64_t bytes = aot_dtype_size(d[i].dtype);
    uint32_t k = 0;
    for (const aot__json_t* dim = shape->first; dim; dim = dim->next, k++) {
      if (dim->kind != AOT_JSON_NUMBER || !dim->is_int || dim->integer < 0) {
        st = aot__fail(err, AOT_ERR_FORMAT, "%s ('%s'): shape[%u] must be a non-negative integer",
                       where, name, k);
        goto fail;
      }
      d[i].shape[k] = dim->integer;
      if (__builtin_mul_overflow(bytes, (uint64_t)dim->integer, &bytes) ||
          bytes > (uint64_t)INT64_MAX) {
        st = aot__fail(err, AOT_ERR_FORMAT, "%s ('%s'): byte size overflows", where, name);
        goto fail;
      }
    }
    d[i].byte_size = bytes;
  }
  if ((st = check_unique_names(d, (uint32_t)arr->count, key, err))) goto fail;
  *out = d;
  *out_count = (uint32_t)arr->count;
  return AOT_OK;
fail:
  free_descs(d, (uint32_t)arr->count);
  return st;
}

void aot_model_close(aot_model_t* m) {
  if (!m || m->magic != AOT__MODEL_MAGIC) return; /* NULL, or closed already */
  m->magic = 0;
  aot__gpu_model_free(m->gpu);
  aot__code_unload(&m->code);
  free_descs(m->inputs, m->input_count);
  free_descs(m->outputs, m->output_count);
  if (m->kernel_names)
    for (uint32_t i = 0; i < m->kernel_count; i++) free(m->kernel_names[i]);
  free(m->kernel_names);
  free(m->kernels);
  if (m->check_messages)
    for (uint32_t i = 0; i < m->check_count; i++) free(m->check_messages[i]);
  free(m->check_messages);
  free(m->donations);
  if (m->mapping)
    munmap((void*)m->mapping, m->mapping_bytes);
  else
    free(m->weights);
  free(m->name);
  free(m->cpu_variant);
  free(m);
}

/* The manifest's "weights" (required: a model without weights says "bytes": 0) and its
 * section, checked against each other before anything is decoded. *out: NULL when the
 * section is absent (allowed only for 0 bytes). */
static aot_status_t plan_weights(aot_model_t* m, const aot__container_t* c, const aot__json_t* root,
                                 const aot__section_t** out, aot_error_t* err) {
  *out = NULL;
  const aot__json_t* w = aot__json_get(root, "weights");
  if (!w || w->kind != AOT_JSON_OBJECT)
    return aot__fail(err, AOT_ERR_FORMAT,
                     "manifest: \"weights\" must be an object (a model without weights has "
                     "\"bytes\": 0)");
  const char* section;
  int64_t bytes, align;
  aot_status_t st;
  if ((st = aot__manifest_string(w, "section", "manifest: weights", 1, &section, err))) return st;
  if ((st = aot__manifest_int(w, "bytes", "manifest: weights", 1, 0, 0, INT64_MAX, &bytes, err))) return st;
  if ((st = aot__manifest_int(w, "alignment", "manifest: weights", 0, 64, 1, MAX_ALIGN, &align, err)))
    return st;
  if (!is_pow2(align))
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: weights: alignment %lld is not a power of two",
                     (long long)align);
  m->weights_bytes = (uint64_t)bytes;
  m->weights_align = (uint64_t)(align < 64 ? 64 : align);
  const aot__section_t* s = aot__container_find(c, section);
  if (!s) {
    if (bytes != 0)
      return aot__fail(err, AOT_ERR_FORMAT, "section '%s': missing (manifest weights)", section);
    return AOT_OK;
  }
  if (s->raw_size != (uint64_t)bytes)
    return aot__fail(err, AOT_ERR_FORMAT,
                     "section '%s': raw size %llu != %lld bytes in the manifest", section,
                     (unsigned long long)s->raw_size, (long long)bytes);
  *out = s;
  return AOT_OK;
}

/* The manifest's "donations" (optional): [{"input": j, "output": k}, ...], each input and each
 * output at most once, the two of one dtype and shape. */
static aot_status_t parse_donations(aot_model_t* m, const aot__json_t* root, aot_error_t* err) {
  const aot__json_t* ds = aot__json_get(root, "donations");
  if (!ds || ds->kind == AOT_JSON_NULL) return AOT_OK;
  if (ds->kind != AOT_JSON_ARRAY)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: \"donations\" must be an array");
  if (ds->count == 0) return AOT_OK;
  if (ds->count > m->input_count)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: %zu donations for %u inputs", ds->count,
                     m->input_count);
  m->donations = calloc(ds->count, sizeof *m->donations);
  if (!m->donations) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  uint32_t i = 0;
  char where[64];
  aot_status_t st;
  for (const aot__json_t* d = ds->first; d; d = d->next, i++) {
    snprintf(where, sizeof where, "manifest: donations[%u]", i);
    if (d->kind != AOT_JSON_OBJECT) return aot__fail(err, AOT_ERR_FORMAT, "%s: must be an object", where);
    int64_t in, out;
    if ((st = aot__manifest_int(d, "input", where, 1, 0, 0, (int64_t)m->input_count - 1, &in, err))) return st;
    if ((st = aot__manifest_int(d, "output", where, 1, 0, 0, (int64_t)m->output_count - 1, &out, err)))
      return st;
    const aot__tensor_desc_t *a = &m->inputs[in], *b = &m->outputs[out];
    int same = a->dtype == b->dtype && a->rank == b->rank && a->byte_size == b->byte_size;
    for (uint32_t k = 0; same && k < a->rank; k++) same = a->shape[k] == b->shape[k];
    if (!same)
      return aot__fail(err, AOT_ERR_FORMAT, "%s: input '%s' and output '%s' differ in dtype or shape",
                       where, a->name, b->name);
    for (uint32_t k = 0; k < i; k++)
      if (m->donations[k].input == (uint32_t)in || m->donations[k].output == (uint32_t)out)
        return aot__fail(err, AOT_ERR_FORMAT, "%s: input '%s' or output '%s' is in donations[%u] too",
                         where, a->name, b->name, k);
    m->donations[i].input = (uint32_t)in;
    m->donations[i].output = (uint32_t)out;
    m->donation_count = i + 1;
  }
  return AOT_OK;
}

int64_t aot__donation_of_input(const aot_model_t* m, uint32_t input) {
  for (uint32_t i = 0; i < m->donation_count; i++)
    if (m->donations[i].input == input) return i;
  return -1;
}

/* The manifest's "checks" messages (the CPU and GPU code answer with an index into them). */
static aot_status_t parse_checks(aot_model_t* m, const aot__json_t* root, aot_error_t* err) {
  const aot__json_t* cs = aot__json_get(root, "checks");
  if (!cs || cs->kind == AOT_JSON_NULL) return AOT_OK;
  if (cs->kind != AOT_JSON_ARRAY)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: \"checks\" must be an array");
  if (cs->count == 0) return AOT_OK;
  if (cs->count > MAX_CHECKS)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: more than %u checks", MAX_CHECKS);
  m->check_messages = calloc(cs->count, sizeof *m->check_messages);
  if (!m->check_messages) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  uint32_t i = 0;
  char where[64];
  aot_status_t st;
  for (const aot__json_t* k = cs->first; k; k = k->next, i++) {
    snprintf(where, sizeof where, "manifest: checks[%u]", i);
    if (k->kind != AOT_JSON_OBJECT)
      return aot__fail(err, AOT_ERR_FORMAT, "%s: must be an object", where);
    const char* message;
    if ((st = aot__manifest_string(k, "message", where, 1, &message, err))) return st;
    if (!message[0]) return aot__fail(err, AOT_ERR_FORMAT, "%s: empty message", where);
    size_t n = strlen(message) + 1;
    m->check_messages[i] = malloc(n);
    if (!m->check_messages[i]) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
    memcpy(m->check_messages[i], message, n);
    m->check_count = i + 1;
  }
  return AOT_OK;
}

/* Where the model has checks, the CPU checks function named by the chosen cpu entry's
 * "checks" (default aot_model_checks). */
static aot_status_t load_checks(aot_model_t* m, const aot__json_t* cpu, aot_error_t* err) {
  if (m->check_count == 0) return AOT_OK;
  const char* symbol;
  aot_status_t st;
  if ((st = aot__manifest_string(cpu, "checks", "manifest: cpu[" HOST_ARCH "]", 0, &symbol, err)))
    return st;
  void* sym;
  if ((st = aot__code_symbol(&m->code, symbol ? symbol : "aot_model_checks", &sym, err))) return st;
  m->checks = (aot__checks_fn)sym;
  return AOT_OK;
}

/* Append to buf[size] (at *used) what printf makes of fmt, truncated to fit. */
static void append(char* buf, size_t size, size_t* used, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char* buf, size_t size, size_t* used, const char* fmt, ...) {
  if (*used + 1 >= size) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *used, size - *used, fmt, ap);
  va_end(ap);
  if (n > 0) *used = (size_t)n < size - *used ? *used + (size_t)n : size - 1;
}

/* Whether cpu entry t is for this host's architecture, and its "cpu" name (NULL: unnamed). */
static aot_status_t host_entry(const aot__json_t* t, int* is_host, const char** name, aot_error_t* err) {
  const char* arch;
  aot_status_t st;
  *is_host = 0;
  *name = NULL;
  if ((st = aot__manifest_string(t, "arch", "manifest: cpu[]", 1, &arch, err))) return st;
  if (strcmp(arch, HOST_ARCH) != 0) return AOT_OK;
  *is_host = 1;
  return aot__manifest_string(t, "cpu", "manifest: cpu[" HOST_ARCH "]", 0, name, err);
}

/* The variant named AOT_CPU_VARIANT among the host's entries, which this machine must run
 * (the message names what it lacks), or a message naming the variants there are. */
static aot_status_t pick_forced(const aot__json_t* cpu, const char* forced, const aot__json_t** out,
                                aot_error_t* err) {
  char names[256] = "";
  size_t used = 0;
  for (const aot__json_t* t = cpu->first; t; t = t->next) {
    const char* name;
    int is_host;
    aot_status_t st;
    if ((st = host_entry(t, &is_host, &name, err))) return st;
    if (!is_host) continue;
    if (name && strcmp(name, forced) == 0) {
      if ((st = aot__cpu_check(t, err))) {
        aot__error_prefix(err, AOT_CPU_VARIANT_ENV "=%s: ", forced);
        return st;
      }
      *out = t;
      return AOT_OK;
    }
    append(names, sizeof names, &used, "%s%s", used ? ", " : "", name ? name : "(unnamed)");
  }
  return aot__fail(err, AOT_ERR_UNSUPPORTED, AOT_CPU_VARIANT_ENV "=%s: the artifact has no %s code for that "
                   "CPU (its %s variants: %s)", forced, HOST_ARCH, HOST_ARCH, used ? names : "none");
}

/* The first of the host's entries whose x86 features this machine has (the compiler writes
 * the best first); when none runs, a message naming each variant and what it lacks (one
 * variant: aot__cpu_check's). */
static aot_status_t pick_first(const aot__json_t* cpu, const aot__json_t** out, aot_error_t* err) {
  char why[AOT_ERROR_MESSAGE_SIZE] = "";
  size_t used = 0, variants = 0;
  const aot__json_t* only = NULL;
  for (const aot__json_t* t = cpu->first; t; t = t->next) {
    const char* name;
    int is_host;
    aot_status_t st;
    if ((st = host_entry(t, &is_host, &name, err))) return st;
    if (!is_host) continue;
    char lacks[AOT_ERROR_MESSAGE_SIZE];
    size_t count;
    if ((st = aot__cpu_lacking(t, lacks, sizeof lacks, &count, err))) return st;
    if (!count) {
      *out = t;
      return AOT_OK;
    }
    only = variants++ ? NULL : t;
    append(why, sizeof why, &used, "%s%s lacks %s", used ? "; " : "", name ? name : "(unnamed)", lacks);
  }
  if (!variants) return AOT_OK; /* none for this architecture: the caller says so */
  if (only) return aot__cpu_check(only, err);
  return aot__fail(err, AOT_ERR_UNSUPPORTED, "none of the artifact's %zu %s code variants runs on this CPU: %s",
                   variants, HOST_ARCH, why);
}

/* The "cpu" entry for this host and its code section, bounded before it is decoded.
 * AOT_CPU_VARIANT, when set and not empty, names the entry (its "cpu") to load. */
static aot_status_t pick_code(const aot__container_t* c, const aot__json_t* root,
                              const aot__json_t** out_pick, const aot__section_t** out,
                              aot_error_t* err) {
  const aot__json_t* cpu = aot__json_get(root, "cpu");
  if (!cpu || cpu->kind != AOT_JSON_ARRAY)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: \"cpu\" must be an array");
  *out_pick = NULL;
  *out = NULL;
  /* a GPU-only artifact: its CUDA contexts run it, a CPU context is refused */
  const aot__json_t* cuda = aot__json_get(root, "cuda");
  if (!cpu->first && cuda && cuda->kind != AOT_JSON_NULL) return AOT_OK;
  const aot__json_t* pick = NULL;
  const char* forced = getenv(AOT_CPU_VARIANT_ENV);
  aot_status_t st = forced && forced[0] ? pick_forced(cpu, forced, &pick, err) : pick_first(cpu, &pick, err);
  if (st) return st;
  if (!pick) {
    char have[256] = "";
    size_t used = 0;
    for (const aot__json_t* t = cpu->first; t; t = t->next) {
      const char* arch;
      if ((st = aot__manifest_string(t, "arch", "manifest: cpu[]", 1, &arch, err))) return st;
      append(have, sizeof have, &used, "%s%s", used ? ", " : "", arch);
    }
    return aot__fail(err, AOT_ERR_UNSUPPORTED, "no CPU code for %s in the artifact (has: %s)",
                     HOST_ARCH, used ? have : "none");
  }
  const char* section;
  if ((st = aot__manifest_string(pick, "section", "manifest: cpu[" HOST_ARCH "]", 1, &section, err)))
    return st;
  const aot__section_t* s = aot__container_find(c, section);
  if (!s) return aot__fail(err, AOT_ERR_FORMAT, "section '%s': missing (manifest cpu)", section);
  if (s->raw_size > AOT__MAX_CODE_BYTES)
    return aot__fail(err, AOT_ERR_FORMAT,
                     "section '%s': raw size %llu is over the %llu bytes a code section may have",
                     section, (unsigned long long)s->raw_size,
                     (unsigned long long)AOT__MAX_CODE_BYTES);
  *out_pick = pick;
  *out = s;
  return AOT_OK;
}

/* Decode and load the code section s of the "cpu" entry pick, resolve the manifest's
 * symbols in it (the entry's own "kernels" where it lists them, else the top-level ones),
 * and compare the manifest with the code's description. */
static aot_status_t load_code(aot_model_t* m, const aot__container_t* c, const aot__json_t* root,
                              const aot__json_t* pick, const aot__section_t* s,
                              aot_error_t* err) {
  const char *entry, *info;
  aot_status_t st;
  if ((st = aot__manifest_string(pick, "entry", "manifest: cpu[" HOST_ARCH "]", 0, &entry, err))) return st;
  if (!entry) entry = "aot_model_entry";
  if ((st = aot__manifest_string(pick, "code_info", "manifest: cpu[" HOST_ARCH "]", 0, &info, err))) return st;
  if (!info) info = AOT__CODE_INFO_SYMBOL;
  const char* section = s->name;
  uint8_t* image = NULL;
  if ((st = aot__section_decode(c, s, 64, &image, err))) return st;
  st = aot__code_load(image, s->raw_size, section, &m->code, err);
  free(image);
  if (st) return st;
  void* sym;
  if ((st = aot__code_symbol(&m->code, entry, &sym, err))) return st;
  m->entry = (aot__entry_fn)sym;
  if ((st = load_checks(m, pick, err))) return st;

  const char* variant;
  if ((st = aot__manifest_string(pick, "cpu", "manifest: cpu[" HOST_ARCH "]", 0, &variant, err))) return st;
  if (!variant) variant = "";
  m->cpu_variant = malloc(strlen(variant) + 1);
  if (!m->cpu_variant) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  memcpy(m->cpu_variant, variant, strlen(variant) + 1);

  const aot__json_t* ks = aot__json_get(root, "kernels");
  if (!ks || ks->kind != AOT_JSON_ARRAY)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: \"kernels\" must be an array");
  if (ks->count > UINT32_MAX / 2) return aot__fail(err, AOT_ERR_FORMAT, "manifest: too many kernels");
  /* the variant's own symbol, work and cost_ns per kernel (work follows its tiles); without
   * them (artifacts from before variants) the top-level kernels' */
  const aot__json_t* vks = aot__json_get(pick, "kernels");
  if (vks && vks->kind == AOT_JSON_NULL) vks = NULL;
  if (vks && (vks->kind != AOT_JSON_ARRAY || vks->count != ks->count))
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: cpu[" HOST_ARCH "]: \"kernels\" must be an array with "
                     "one entry per kernel (%zu)", (size_t)ks->count);
  m->kernels = calloc(ks->count ? ks->count : 1, sizeof *m->kernels);
  m->kernel_names = calloc(ks->count ? ks->count : 1, sizeof *m->kernel_names);
  if (!m->kernels || !m->kernel_names) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  uint32_t i = 0;
  char where[64], code_where[64];
  const aot__json_t* vk = vks ? vks->first : NULL;
  for (const aot__json_t* k = ks->first; k; k = k->next, i++, vk = vk ? vk->next : NULL) {
    snprintf(where, sizeof where, "manifest: kernels[%u]", i);
    if (k->kind != AOT_JSON_OBJECT) return aot__fail(err, AOT_ERR_FORMAT, "%s: must be an object", where);
    const aot__json_t* code_k = k;
    if (vk) {
      snprintf(code_where, sizeof code_where, "manifest: cpu[" HOST_ARCH "].kernels[%u]", i);
      if (vk->kind != AOT_JSON_OBJECT)
        return aot__fail(err, AOT_ERR_FORMAT, "%s: must be an object", code_where);
      code_k = vk;
    }
    const char* cw = vk ? code_where : where;
    const char *name, *symbol;
    int64_t work;
    if ((st = aot__manifest_string(k, "name", where, 0, &name, err))) return st;
    if ((st = aot__manifest_string(code_k, "symbol", cw, 1, &symbol, err))) return st;
    /* Bounded so the pool's chunk arithmetic (index x items, up to work plus a
     * chunk) cannot overflow. */
    if ((st = aot__manifest_int(code_k, "work", cw, 1, 0, 0, INT64_MAX / 4, &work, err))) return st;
    /* optional (-1: none): a hint for how to split the kernel across threads */
    if ((st = aot__manifest_int(code_k, "cost_ns", cw, 0, -1, 0, INT64_MAX, &m->kernels[i].cost_ns, err)))
      return st;
    if ((st = aot__code_symbol(&m->code, symbol, &sym, err))) return st;
    m->kernels[i].fn = (aot__kernel_fn)sym;
    m->kernels[i].work = work;
    if (!name) name = symbol;
    m->kernel_names[i] = malloc(strlen(name) + 1);
    if (!m->kernel_names[i]) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
    memcpy(m->kernel_names[i], name, strlen(name) + 1);
    m->kernel_count = i + 1;
  }
  return aot__code_info_check(m, info, entry, err);
}

/* The manifest's "arena" (required: a model without temporaries says "bytes": 0). */
static aot_status_t parse_arena(aot_model_t* m, const aot__json_t* root, aot_error_t* err) {
  const aot__json_t* arena = aot__json_get(root, "arena");
  if (!arena || arena->kind != AOT_JSON_OBJECT)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: \"arena\" must be an object");
  int64_t bytes, align;
  aot_status_t st;
  if ((st = aot__manifest_int(arena, "bytes", "manifest: arena", 1, 0, 0, INT64_MAX, &bytes, err))) return st;
  if ((st = aot__manifest_int(arena, "alignment", "manifest: arena", 0, 64, 1, MAX_ALIGN, &align, err)))
    return st;
  if (!is_pow2(align))
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: arena: alignment %lld is not a power of two",
                     (long long)align);
  m->arena_bytes = (uint64_t)bytes;
  m->arena_align = (uint64_t)(align < 64 ? 64 : align);
  return AOT_OK;
}

/* Decode and parse the manifest, bounded (internal.h) and counted. */
static aot_status_t read_manifest(const aot__container_t* c, budget_t* b, uint8_t** text,
                                  aot__json_doc_t** doc, const aot__json_t** root,
                                  aot_error_t* err) {
  const aot__section_t* ms = aot__container_find(c, "manifest");
  if (!ms) return aot__fail(err, AOT_ERR_FORMAT, "section 'manifest': missing");
  if (ms->raw_size > AOT__MAX_MANIFEST_BYTES)
    return aot__fail(err, AOT_ERR_FORMAT,
                     "section 'manifest': raw size %llu is over the %llu bytes a manifest may have",
                     (unsigned long long)ms->raw_size, (unsigned long long)AOT__MAX_MANIFEST_BYTES);
  aot_status_t st;
  if ((st = take(b, ms->raw_size + 1, "section 'manifest'", err))) return st;
  if ((st = aot__section_decode(c, ms, 64, text, err))) return st;
  uint64_t tree_max = AOT__MAX_MANIFEST_TREE_BYTES;
  int by_caller = b->limit && b->limit - b->used < tree_max;
  if (by_caller) tree_max = b->limit - b->used;
  if ((st = aot__json_parse_limited((const char*)*text, (size_t)ms->raw_size, tree_max, doc, root,
                                    err))) {
    if (st == AOT_ERR_NO_MEMORY && by_caller)
      aot__error_prefix(err, "section 'manifest' (over max_memory_bytes %llu): ",
                        (unsigned long long)b->limit);
    else
      aot__error_prefix(err, "section 'manifest': ");
    return st;
  }
  b->used += aot__json_doc_bytes(*doc); /* within the limit: the parser kept it so */
  if ((*root)->kind != AOT_JSON_OBJECT)
    return aot__fail(err, AOT_ERR_FORMAT, "section 'manifest': top level is not a JSON object");
  return AOT_OK;
}

static aot_status_t open_model(const void* data, size_t size, int mapped, budget_t* b,
                               aot_model_t* m, aot_error_t* err) {
  aot__container_t* c = malloc(sizeof *c);
  if (!c) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  aot__json_doc_t* doc = NULL;
  uint8_t* text = NULL;
  const aot__json_t* root = NULL;
  aot_status_t st = aot__container_parse_mapped(data, size, mapped, c, err);
  if (st) goto done;
  if ((st = read_manifest(c, b, &text, &doc, &root, err))) goto done;
  int64_t version;
  if ((st = aot__manifest_int(root, "format_version", "manifest", 1, 0, INT64_MIN, INT64_MAX, &version, err)))
    goto done;
  if (version != AOT_FORMAT_VERSION) { /* the header's was checked: this one disagrees */
    st = aot__fail(err, AOT_ERR_FORMAT, "manifest: format_version %lld, not the header's %u",
                   (long long)version, AOT_FORMAT_VERSION);
    goto done;
  }
  const aot__json_t* model = aot__json_get(root, "model");
  const char* name = NULL;
  if (model && model->kind == AOT_JSON_OBJECT &&
      (st = aot__manifest_string(model, "name", "manifest: model", 0, &name, err)))
    goto done;
  m->name = malloc(name ? strlen(name) + 1 : 1);
  if (!m->name) {
    st = aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
    goto done;
  }
  memcpy(m->name, name ? name : "", name ? strlen(name) + 1 : 1);
  if ((st = parse_tensors(root, "inputs", 0, &m->inputs, &m->input_count, err))) goto done;
  if ((st = parse_tensors(root, "outputs", 1, &m->outputs, &m->output_count, err))) goto done;
  if ((st = parse_arena(m, root, err))) goto done;
  if ((st = parse_checks(m, root, err))) goto done;
  if ((st = parse_donations(m, root, err))) goto done;
  const aot__section_t *ws = NULL, *cs = NULL;
  const aot__json_t* pick = NULL;
  if ((st = plan_weights(m, c, root, &ws, err))) goto done;
  if ((st = pick_code(c, root, &pick, &cs, err))) goto done;
  uint32_t kernel_count;
  if (cs) {
    /* Everything large is counted before any of it is allocated: the code is held twice
     * while it loads (decoded, and in its memfd or temp file). */
    char what[64];
    snprintf(what, sizeof what, "section '%s'", cs->name);
    if ((st = take(b, m->arena_bytes, "arena (one context's)", err)) ||
        (st = take(b, m->weights_bytes + 1, "section 'weights'", err)) ||
        (st = take(b, 2 * cs->raw_size + 1, what, err)))
      goto done;
    if ((st = load_code(m, c, root, pick, cs, err))) goto done;
    give(b, cs->raw_size + 1);
    kernel_count = m->kernel_count;
  } else {
    /* GPU code only: no CPU code vouches for sizes; the launch plan is checked against the
     * manifest's own (gpu_plan.c) and the weights section's raw size */
    const aot__json_t* ks = aot__json_get(root, "kernels");
    if (!ks || ks->kind != AOT_JSON_ARRAY || ks->count > UINT32_MAX / 2) {
      st = aot__fail(err, AOT_ERR_FORMAT, "manifest: \"kernels\" must be an array");
      goto done;
    }
    kernel_count = (uint32_t)ks->count;
    if ((st = take(b, m->weights_bytes + 1, "section 'weights'", err))) goto done;
  }
  uint64_t gpu_bytes = 0;
  if ((st = aot__gpu_plan_parse(m, c, root, kernel_count, b->limit ? b->limit - b->used : UINT64_MAX,
                                &gpu_bytes, &m->gpu, err)))
    goto done;
  b->used += gpu_bytes;
  /* the code (or, without CPU code, the section's size) has vouched for the weights' size:
   * only now are they decoded */
  if (ws && mapped && ws->codec == AOT_CODEC_NONE && ws->raw_size > 0 &&
      (uintptr_t)(c->data + ws->offset) % m->weights_align == 0) {
    /* stored as they are (--weights-codec none): read in place from the file's pages,
     * which the page cache shares between the processes that open it */
    m->weights = (uint8_t*)(uintptr_t)(c->data + ws->offset);
    m->mapping = c->data;
    m->mapping_bytes = (size_t)c->size;
  } else if (ws) {
    st = aot__section_decode(c, ws, m->weights_align, &m->weights, err);
  } else {
    m->weights = aot__aligned_alloc(64, 1);
    if (!m->weights) st = aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  }
done:
  aot__json_free(doc);
  free(text);
  free(c);
  return st;
}

/* The caller's options (NULL: the defaults) into b. */
static aot_status_t read_options(const aot_model_options_t* o, budget_t* b, aot_error_t* err) {
  b->limit = 0;
  b->used = 0;
  if (!o) return AOT_OK;
  /* append-only: read only the fields the caller's struct_size covers */
  if (o->struct_size < 2 * sizeof(uint32_t))
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "options->struct_size %u is too small",
                     o->struct_size);
  if (o->reserved != 0)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "options->reserved must be 0");
  if (o->struct_size >= offsetof(aot_model_options_t, max_memory_bytes) + sizeof(uint64_t))
    b->limit = o->max_memory_bytes;
  return AOT_OK;
}

static aot_status_t open_memory(const void* data, size_t size, int mapped, budget_t* b,
                                aot_model_t** out_model, aot_error_t* err) {
  aot_model_t* m = calloc(1, sizeof *m);
  if (!m) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  m->code.fd = -1;
  m->magic = AOT__MODEL_MAGIC;
  aot_status_t st = open_model(data, size, mapped, b, m, err);
  if (st) {
    aot_model_close(m);
    return st;
  }
  *out_model = m;
  return aot__ok(err);
}

aot_status_t aot_model_open_memory_with_options(const void* data, size_t size,
                                                const aot_model_options_t* options,
                                                aot_model_t** out_model, aot_error_t* err) {
  if (!out_model) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "out_model is NULL");
  *out_model = NULL;
  if (!data && size) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "data is NULL");
  budget_t b;
  aot_status_t st = read_options(options, &b, err);
  if (st) return st;
  return open_memory(data, size, 0, &b, out_model, err);
}

aot_status_t aot_model_open_memory(const void* data, size_t size, aot_model_t** out_model,
                                   aot_error_t* err) {
  return aot_model_open_memory_with_options(data, size, NULL, out_model, err);
}

aot_status_t aot_model_open_file_with_options(const char* path, const aot_model_options_t* options,
                                              aot_model_t** out_model, aot_error_t* err) {
  if (!out_model) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "out_model is NULL");
  *out_model = NULL;
  if (!path) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "path is NULL");
  budget_t b;
  aot_status_t st = read_options(options, &b, err);
  if (st) return st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return aot__fail(err, AOT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return aot__fail(err, AOT_ERR_IO, "cannot open '%s': not a regular file", path);
  }
  if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX - 1) {
    close(fd);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "'%s' is too large", path);
  }
  size_t size = (size_t)sb.st_size;
  char what[64];
  snprintf(what, sizeof what, "the file's bytes");
  if ((st = take(&b, size, what, err))) {
    close(fd);
    aot__error_prefix(err, "'%s': ", path);
    return st;
  }
  /* Mapped, the file's pages are dropped as each section is checked and decoded
   * (container.c: release_behind), so opening holds the decoded weights and a few MB
   * rather than the whole file besides them. Where it cannot be mapped, it is read. */
  void* map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  if (map != MAP_FAILED) {
    close(fd);
    st = open_memory(map, size, 1, &b, out_model, err);
    if (st != AOT_OK || (*out_model)->mapping != map) munmap(map, size); /* else the model's */
    return st;
  }
  uint8_t* buf = malloc(size ? size : 1);
  if (!buf) {
    close(fd);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "cannot allocate %zu bytes to read '%s'", size, path);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  /* A file that shrank while read is judged by the bytes actually read. */
  st = open_memory(buf, got, 0, &b, out_model, err);
  free(buf);
  return st;
}

aot_status_t aot_model_open_file(const char* path, aot_model_t** out_model, aot_error_t* err) {
  return aot_model_open_file_with_options(path, NULL, out_model, err);
}

static int live(const aot_model_t* m) { return m && m->magic == AOT__MODEL_MAGIC; }

uint32_t aot_model_input_count(const aot_model_t* m) { return live(m) ? m->input_count : 0; }
uint32_t aot_model_output_count(const aot_model_t* m) { return live(m) ? m->output_count : 0; }
uint64_t aot_model_arena_bytes(const aot_model_t* m) { return live(m) ? m->arena_bytes : 0; }
const char* aot_model_name(const aot_model_t* m) { return live(m) ? m->name : ""; }

const char* aot_model_cpu_variant(const aot_model_t* m) {
  return live(m) && m->cpu_variant ? m->cpu_variant : "";
}

static aot_status_t info(const aot__tensor_desc_t* d, uint32_t count, uint32_t index,
                         const char* what, aot_tensor_info_t* out, aot_error_t* err) {
  if (!out) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "out_info is NULL");
  if (index >= count)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "%s index %u out of range (model has %u)", what,
                     index, count);
  out->name = d[index].name;
  out->dtype = d[index].dtype;
  out->rank = d[index].rank;
  out->shape = d[index].shape;
  out->byte_size = d[index].byte_size;
  return aot__ok(err);
}

aot_status_t aot_model_input_info(const aot_model_t* m, uint32_t index, aot_tensor_info_t* out,
                                  aot_error_t* err) {
  if (!m) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is NULL");
  if (!live(m)) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is closed (or not a model)");
  return info(m->inputs, m->input_count, index, "input", out, err);
}

aot_status_t aot_model_output_info(const aot_model_t* m, uint32_t index, aot_tensor_info_t* out,
                                   aot_error_t* err) {
  if (!m) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is NULL");
  if (!live(m)) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is closed (or not a model)");
  return info(m->outputs, m->output_count, index, "output", out, err);
}

uint32_t aot_model_donation_count(const aot_model_t* m) { return live(m) ? m->donation_count : 0; }

aot_status_t aot_model_donation(const aot_model_t* m, uint32_t index, uint32_t* out_input,
                                uint32_t* out_output, aot_error_t* err) {
  if (!m) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is NULL");
  if (!live(m)) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "model is closed (or not a model)");
  if (!out_input || !out_output)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "out_input or out_output is NULL");
  if (index >= m->donation_count)
    return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "donation index %u out of range (model has %u)",
                     index, m->donation_count);
  *out_input = m->donations[index].input;
  *out_output = m->donations[index].output;
  return aot__ok(err);
}
