/* gpu_plan.c - the manifest's "cuda" entry: GPU architectures, their code sections and the
 * launch plan (packaging/FORMAT.md, "GPU code"), validated when the model opens.
 *
 * The GPU code trusts the addresses it is given, so every launch argument is checked here
 * against the buffers it names: an arena or weights offset within the arena or weights, an
 * input or output index within the model's. The manifest is hostile input: nothing in it is
 * used before it is checked, and names are echoed only after they are checked. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_ARGS 512
#define MAX_SHARED_BYTES (256 * 1024)
#define MAX_SYMBOL 255
#define MAX_SMS 16

aot_status_t aot__stored_section_decode(const aot__stored_section_t* s, uint8_t** out,
                                        aot_error_t* err) {
  /* zeroed: release_behind 0, the copy is the caller's memory (never dropped) */
  aot__container_t* one = calloc(1, sizeof *one);
  if (!one) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  one->data = s->data;
  one->size = s->section.stored_size;
  one->count = 1;
  one->sections[0] = s->section;
  aot_status_t st = aot__section_decode(one, &one->sections[0], 64, out, err);
  free(one);
  return st;
}

static void free_launch(aot__gpu_launch_t* l) {
  free(l->name);
  free(l->symbol);
  free(l->args);
}

void aot__gpu_sm_list(const aot__gpu_model_t* g, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; g && i < g->sm_count; i++) {
    int n = snprintf(buf + used, size - used, "%ssm_%u", i ? ", " : "", g->sms[i].sm);
    if (n < 0 || (size_t)n >= size - used) return;
    used += (size_t)n;
  }
}

static char* copy_string(const char* s) {
  size_t n = strlen(s) + 1;
  char* p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

/* a PTX .entry name: what ptxas accepts and safe to echo */
static int plain_symbol(const char* s) {
  size_t n = strlen(s);
  if (n == 0 || n > MAX_SYMBOL || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '_' || ch == '$'))
      return 0;
  }
  return 1;
}

/* "sm_80" -> 80 (two or three digits, as sm_100); 0 when it is not such a name */
static uint32_t parse_sm(const char* s) {
  if (strncmp(s, "sm_", 3) != 0) return 0;
  size_t n = strlen(s + 3);
  if (n < 2 || n > 3) return 0;
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[3 + i];
    if (ch < '0' || ch > '9') return 0;
    v = v * 10 + (uint32_t)(ch - '0');
  }
  return v >= 10 ? v : 0;
}

/* A [x, y, z] triple of integers in [1, max_xy] (x: [1, max_x]), z in [1, max_z]. */
static aot_status_t parse_dims(const aot__json_t* obj, const char* key, const char* where,
                               int64_t max_x, int64_t max_y, int64_t max_z, uint32_t out[3],
                               aot_error_t* err) {
  const aot__json_t* v = aot__json_get(obj, key);
  if (!v || v->kind != AOT_JSON_ARRAY || v->count != 3)
    return aot__fail(err, AOT_ERR_FORMAT, "%s: \"%s\" must be an array of 3 integers", where, key);
  const int64_t max[3] = {max_x, max_y, max_z};
  uint32_t i = 0;
  for (const aot__json_t* d = v->first; d; d = d->next, i++) {
    if (d->kind != AOT_JSON_NUMBER || !d->is_int || d->integer < 1 || d->integer > max[i])
      return aot__fail(err, AOT_ERR_FORMAT, "%s: %s[%u] must be an integer in [1, %lld]", where, key,
                       i, (long long)max[i]);
    out[i] = (uint32_t)d->integer;
  }
  return AOT_OK;
}

static aot_status_t parse_arg(const aot_model_t* m, const aot__gpu_model_t* g,
                              const aot__json_t* a, const char* where, aot__gpu_arg_t* out,
                              aot_error_t* err) {
  if (a->kind != AOT_JSON_OBJECT) return aot__fail(err, AOT_ERR_FORMAT, "%s: must be an object", where);
  const char* kind;
  aot_status_t st;
  if ((st = aot__manifest_string(a, "kind", where, 1, &kind, err))) return st;
  int64_t v;
  if (strcmp(kind, "arena") == 0 || strcmp(kind, "weights") == 0) {
    int arena = kind[0] == 'a';
    uint64_t size = arena ? g->arena_bytes : m->weights_bytes;
    if ((st = aot__manifest_int(a, "offset", where, 1, 0, 0, (int64_t)size, &v, err))) return st;
    /* every kernel parameter is 16-byte aligned by contract (vector loads) */
    if (v % 16)
      return aot__fail(err, AOT_ERR_FORMAT, "%s: %s offset %lld is not a multiple of 16", where, kind,
                       (long long)v);
    out->kind = arena ? AOT__GPU_ARG_ARENA : AOT__GPU_ARG_WEIGHTS;
  } else if (strcmp(kind, "input") == 0 || strcmp(kind, "output") == 0) {
    int input = kind[0] == 'i';
    uint32_t count = input ? m->input_count : m->output_count;
    if (count == 0)
      return aot__fail(err, AOT_ERR_FORMAT, "%s: the model has no %ss", where, kind);
    if ((st = aot__manifest_int(a, "index", where, 1, 0, 0, (int64_t)count - 1, &v, err))) return st;
    out->kind = input ? AOT__GPU_ARG_INPUT : AOT__GPU_ARG_OUTPUT;
  } else if (strcmp(kind, "status") == 0) {
    v = 0;
    out->kind = AOT__GPU_ARG_STATUS;
  } else {
    return aot__fail(err, AOT_ERR_FORMAT,
                     "%s: \"kind\" must be arena, weights, input, output or status", where);
  }
  out->value = (uint64_t)v;
  return AOT_OK;
}

/* One launch (kernels[i], or the checks launch when `checks`). */
static aot_status_t parse_launch(const aot_model_t* m, const aot__gpu_model_t* g,
                                 const aot__json_t* k, const char* where, int checks,
                                 aot__gpu_launch_t* out, aot_error_t* err) {
  if (k->kind != AOT_JSON_OBJECT) return aot__fail(err, AOT_ERR_FORMAT, "%s: must be an object", where);
  const char *name, *symbol;
  aot_status_t st;
  if ((st = aot__manifest_string(k, "symbol", where, 1, &symbol, err))) return st;
  if (!plain_symbol(symbol))
    return aot__fail(err, AOT_ERR_FORMAT,
                     "%s: \"symbol\" must be 1 to %d letters, digits, '_' or '$', not starting "
                     "with a digit",
                     where, MAX_SYMBOL);
  if ((st = aot__manifest_string(k, "name", where, 0, &name, err))) return st;
  out->symbol = copy_string(symbol);
  out->name = copy_string(checks ? "checks" : name && plain_symbol(name) ? name : symbol);
  if (!out->symbol || !out->name) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  if ((st = parse_dims(k, "grid", where, INT32_MAX, 65535, 65535, out->grid, err)) ||
      (st = parse_dims(k, "block", where, 1024, 1024, 64, out->block, err)))
    return st;
  if ((uint64_t)out->block[0] * out->block[1] * out->block[2] > 1024)
    return aot__fail(err, AOT_ERR_FORMAT, "%s: a block of %u x %u x %u threads is over 1024", where,
                     out->block[0], out->block[1], out->block[2]);
  int64_t shared;
  if ((st = aot__manifest_int(k, "shared_bytes", where, 1, 0, 0, MAX_SHARED_BYTES, &shared, err)))
    return st;
  out->shared_bytes = (uint32_t)shared;
  const aot__json_t* args = aot__json_get(k, "args");
  if (!args || args->kind != AOT_JSON_ARRAY || args->count < 1 || args->count > MAX_ARGS)
    return aot__fail(err, AOT_ERR_FORMAT, "%s: \"args\" must be an array of 1 to %d arguments", where,
                     MAX_ARGS);
  out->args = calloc(args->count, sizeof *out->args);
  if (!out->args) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  char at[128];
  uint32_t i = 0;
  for (const aot__json_t* a = args->first; a; a = a->next, i++) {
    snprintf(at, sizeof at, "%s: args[%u]", where, i);
    if ((st = parse_arg(m, g, a, at, &out->args[i], err))) return st;
    out->arg_count = i + 1;
    int last = a->next == NULL;
    if (out->args[i].kind == AOT__GPU_ARG_STATUS && !(checks && last))
      return aot__fail(err, AOT_ERR_FORMAT, "%s: a status argument is allowed only last in the "
                       "checks launch", at);
    if (checks && last && out->args[i].kind != AOT__GPU_ARG_STATUS)
      return aot__fail(err, AOT_ERR_FORMAT, "%s: the checks launch's last argument must be the "
                       "status", at);
  }
  return AOT_OK;
}

/* A copy of the named section as stored. `required`: its absence is malformed. */
static aot_status_t keep_section(const aot__container_t* c, const aot__json_t* entry,
                                 const char* key, const char* where, int required,
                                 uint64_t budget, uint64_t* used, aot__stored_section_t* out,
                                 aot_error_t* err) {
  const char* name;
  aot_status_t st;
  if ((st = aot__manifest_string(entry, key, where, required, &name, err)) || !name) return st;
  const aot__section_t* s = aot__container_find(c, name);
  if (!s) return aot__fail(err, AOT_ERR_FORMAT, "%s: section '%s' (%s) is missing", where, name, key);
  if (s->raw_size > AOT__MAX_CODE_BYTES)
    return aot__fail(err, AOT_ERR_FORMAT,
                     "section '%s': raw size %llu is over the %llu bytes a code section may have",
                     name, (unsigned long long)s->raw_size,
                     (unsigned long long)AOT__MAX_CODE_BYTES);
  if (s->stored_size > budget - *used)
    return aot__fail(err, AOT_ERR_NO_MEMORY,
                     "section '%s': %llu bytes would bring the model over max_memory_bytes", name,
                     (unsigned long long)s->stored_size);
  out->data = malloc(s->stored_size ? s->stored_size : 1);
  if (!out->data) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  memcpy(out->data, c->data + s->offset, s->stored_size);
  out->section = *s;
  out->section.offset = 0;
  *used += s->stored_size;
  return AOT_OK;
}

static aot_status_t parse_sm_entry(const aot_model_t* m, aot__gpu_model_t* g,
                                   const aot__container_t* c, const aot__json_t* e,
                                   uint32_t index, uint32_t kernel_count, uint64_t budget,
                                   uint64_t* used, aot_error_t* err) {
  char where[160];
  snprintf(where, sizeof where, "manifest: cuda.sms[%u]", index);
  if (e->kind != AOT_JSON_OBJECT) return aot__fail(err, AOT_ERR_FORMAT, "%s: must be an object", where);
  const char* name;
  aot_status_t st;
  if ((st = aot__manifest_string(e, "sm", where, 1, &name, err))) return st;
  aot__gpu_sm_t* sm = &g->sms[index];
  sm->sm = parse_sm(name);
  if (!sm->sm)
    return aot__fail(err, AOT_ERR_FORMAT, "%s: \"sm\" must name a GPU architecture as sm_80 does",
                     where);
  for (uint32_t i = 0; i < index; i++)
    if (g->sms[i].sm == sm->sm)
      return aot__fail(err, AOT_ERR_FORMAT, "%s: sm_%u is listed twice", where, sm->sm);
  snprintf(where, sizeof where, "manifest: cuda.sms[%u] (sm_%u)", index, sm->sm);
  if ((st = keep_section(c, e, "ptx", where, 1, budget, used, &sm->ptx, err)) ||
      (st = keep_section(c, e, "cubin", where, 0, budget, used, &sm->cubin, err)))
    return st;
  const aot__json_t* ks = aot__json_get(e, "kernels");
  if (!ks || ks->kind != AOT_JSON_ARRAY)
    return aot__fail(err, AOT_ERR_FORMAT, "%s: \"kernels\" must be an array", where);
  if (ks->count != kernel_count)
    return aot__fail(err, AOT_ERR_FORMAT, "%s: %zu launches for the manifest's %u kernels", where,
                     ks->count, kernel_count);
  const aot__json_t* checks = aot__json_get(e, "checks");
  if (checks && checks->kind == AOT_JSON_NULL) checks = NULL;
  if (!checks != !m->check_count)
    return aot__fail(err, AOT_ERR_FORMAT,
                     "%s: a \"checks\" launch must be present exactly when the manifest has checks "
                     "(it has %u)", where, m->check_count);
  sm->has_checks = checks != NULL;
  sm->launches = calloc(kernel_count + 1, sizeof *sm->launches);
  if (!sm->launches) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  char at[200];
  uint32_t i = 0;
  for (const aot__json_t* k = ks->first; k; k = k->next, i++) {
    snprintf(at, sizeof at, "%s: kernels[%u]", where, i);
    sm->launch_count = i + 1;
    if ((st = parse_launch(m, g, k, at, 0, &sm->launches[i], err))) return st;
  }
  if (checks) {
    snprintf(at, sizeof at, "%s: checks", where);
    sm->launch_count = i + 1;
    if ((st = parse_launch(m, g, checks, at, 1, &sm->launches[i], err))) return st;
  }
  return AOT_OK;
}

aot_status_t aot__gpu_plan_parse(const aot_model_t* m, const aot__container_t* c,
                                 const aot__json_t* root, uint32_t kernel_count, uint64_t budget,
                                 uint64_t* used, aot__gpu_model_t** out, aot_error_t* err) {
  *out = NULL;
  *used = 0;
  const aot__json_t* cuda = aot__json_get(root, "cuda");
  if (!cuda || cuda->kind == AOT_JSON_NULL) return AOT_OK;
  if (cuda->kind != AOT_JSON_OBJECT)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: \"cuda\" must be an object");
  aot__gpu_model_t* g = calloc(1, sizeof *g);
  pthread_mutex_t* lock = malloc(sizeof *lock);
  if (!g || !lock || pthread_mutex_init(lock, NULL) != 0) {
    free(g);
    free(lock);
    return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  }
  g->lock = lock;
  aot_status_t st;
  const aot__json_t* arena = aot__json_get(cuda, "arena");
  int64_t bytes;
  const char* weights;
  if (!arena || arena->kind != AOT_JSON_OBJECT) {
    st = aot__fail(err, AOT_ERR_FORMAT, "manifest: cuda.arena must be an object");
    goto fail;
  }
  if ((st = aot__manifest_int(arena, "bytes", "manifest: cuda.arena", 1, 0, 0, INT64_MAX, &bytes,
                              err)))
    goto fail;
  /* one plan for both targets: the CPU code vouched for the top-level arena */
  if ((uint64_t)bytes != m->arena_bytes) {
    st = aot__fail(err, AOT_ERR_FORMAT, "manifest: cuda.arena.bytes %lld differs from arena.bytes "
                   "%llu (one plan for both targets)", (long long)bytes,
                   (unsigned long long)m->arena_bytes);
    goto fail;
  }
  g->arena_bytes = (uint64_t)bytes;
  if ((st = aot__manifest_string(cuda, "weights", "manifest: cuda", 1, &weights, err))) goto fail;
  const aot__json_t* top = aot__json_get(root, "weights");
  const aot__json_t* section = top ? aot__json_get(top, "section") : NULL;
  if (!section || section->kind != AOT_JSON_STRING || strcmp(section->str, weights) != 0) {
    st = aot__fail(err, AOT_ERR_FORMAT, "manifest: cuda.weights must name the weights section");
    goto fail;
  }
  const aot__json_t* sms = aot__json_get(cuda, "sms");
  if (!sms || sms->kind != AOT_JSON_ARRAY || sms->count < 1 || sms->count > MAX_SMS) {
    st = aot__fail(err, AOT_ERR_FORMAT, "manifest: cuda.sms must be an array of 1 to %d entries",
                   MAX_SMS);
    goto fail;
  }
  g->sms = calloc(sms->count, sizeof *g->sms);
  if (!g->sms) {
    st = aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
    goto fail;
  }
  uint32_t i = 0;
  for (const aot__json_t* e = sms->first; e; e = e->next, i++) {
    g->sm_count = i + 1;
    if ((st = parse_sm_entry(m, g, c, e, i, kernel_count, budget, used, err))) goto fail;
  }
  *out = g;
  return AOT_OK;
fail:
  aot__gpu_model_free(g);
  *used = 0;
  return st;
}

void aot__gpu_plan_free(aot__gpu_model_t* g) {
  for (uint32_t i = 0; i < g->sm_count; i++) {
    aot__gpu_sm_t* sm = &g->sms[i];
    free(sm->ptx.data);
    free(sm->cubin.data);
    if (sm->launches)
      for (uint32_t k = 0; k < sm->launch_count; k++) free_launch(&sm->launches[k]);
    free(sm->launches);
  }
  free(g->sms);
  g->sms = NULL;
  g->sm_count = 0;
}
