/* kserve.c - see kserve.h. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "kserve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char* aot_kserve_dtype(aot_dtype_t d) {
  switch (d) {
    case AOT_DTYPE_FLOAT32: return "FP32";
    case AOT_DTYPE_FLOAT64: return "FP64";
    case AOT_DTYPE_FLOAT16: return "FP16";
    case AOT_DTYPE_BFLOAT16: return "BF16";
    case AOT_DTYPE_INT8: return "INT8";
    case AOT_DTYPE_INT16: return "INT16";
    case AOT_DTYPE_INT32: return "INT32";
    case AOT_DTYPE_INT64: return "INT64";
    case AOT_DTYPE_UINT8: return "UINT8";
    case AOT_DTYPE_UINT16: return "UINT16";
    case AOT_DTYPE_UINT32: return "UINT32";
    case AOT_DTYPE_UINT64: return "UINT64";
    case AOT_DTYPE_BOOL: return "BOOL";
    /* no KServe names: these travel as binary data only */
    case AOT_DTYPE_FLOAT8E4M3FN: return "FP8E4M3FN";
    case AOT_DTYPE_FLOAT8E4M3FNUZ: return "FP8E4M3FNUZ";
    case AOT_DTYPE_FLOAT8E5M2: return "FP8E5M2";
    case AOT_DTYPE_FLOAT8E5M2FNUZ: return "FP8E5M2FNUZ";
    default: return "INVALID";
  }
}

/* d as the bits of a binary float of `ebits` exponent and `mbits` mantissa bits (FP16: 5, 10;
 * BF16: 8, 7), rounded to nearest, ties to even, from the double itself (numpy's float64 ->
 * float16), not through a float (which would round twice). Every step is exact but rint. */
static uint32_t narrow_float(double d, int ebits, int mbits) {
  uint32_t sign = signbit(d) ? 1u << (ebits + mbits) : 0, inf = ((1u << ebits) - 1) << mbits;
  if (isnan(d)) return sign | inf | (1u << (mbits - 1));
  double a = fabs(d);
  if (isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int bias = (1 << (ebits - 1)) - 1, e;
  frexp(a, &e); /* a in [2^(e-1), 2^e) */
  int exp = e - 1;
  if (exp < 1 - bias) /* subnormal: a count of the smallest step, 2^(1 - bias - mbits); a count
                         of 2^mbits is the smallest normal's encoding, as it should be */
    return sign | (uint32_t)rint(ldexp(a, bias - 1 + mbits));
  double m = rint(ldexp(a, mbits - exp)); /* in [2^mbits, 2^(mbits+1)] */
  if (m == ldexp(1.0, mbits + 1)) {
    m /= 2;
    exp++;
  }
  if (exp > bias) return sign | inf;
  return sign | (uint32_t)(exp + bias) << mbits | ((uint32_t)m - (1u << mbits));
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1F, mant = h & 0x3FF, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    exp = 113;
    while (!(mant & 0x400)) {
      mant <<= 1;
      exp--;
    }
    bits = sign | (exp << 23) | ((mant & 0x3FF) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static void json_shape(aot_sb_t* b, uint32_t rank, const int64_t* shape) {
  aot_sb_str(b, "[");
  for (uint32_t d = 0; d < rank; d++) aot_sb_printf(b, "%s%lld", d ? "," : "", (long long)shape[d]);
  aot_sb_str(b, "]");
}

static void json_tensor_infos(aot_sb_t* b, const aot_tensor_info_t* t, uint32_t n) {
  aot_sb_str(b, "[");
  for (uint32_t i = 0; i < n; i++) {
    aot_sb_str(b, i ? ",{\"name\":" : "{\"name\":");
    aot_sb_json_string(b, t[i].name, strlen(t[i].name));
    aot_sb_printf(b, ",\"datatype\":\"%s\",\"shape\":", aot_kserve_dtype(t[i].dtype));
    json_shape(b, t[i].rank, t[i].shape);
    aot_sb_str(b, "}");
  }
  aot_sb_str(b, "]");
}

/* Triton's model configuration (GET .../config), which tools such as perf_analyzer read. */
static void config_tensors(aot_sb_t* b, const aot_tensor_info_t* t, uint32_t n) {
  aot_sb_str(b, "[");
  for (uint32_t i = 0; i < n; i++) {
    aot_sb_str(b, i ? ",{\"name\":" : "{\"name\":");
    aot_sb_json_string(b, t[i].name, strlen(t[i].name));
    aot_sb_printf(b, ",\"data_type\":\"TYPE_%s\",\"dims\":", aot_kserve_dtype(t[i].dtype));
    json_shape(b, t[i].rank, t[i].shape);
    aot_sb_str(b, "}");
  }
  aot_sb_str(b, "]");
}

void aot_kserve_config(const aot_served_model_t* m, aot_http_response_t* r) {
  aot_sb_t* b = &r->body;
  aot_sb_str(b, "{\"name\":");
  aot_sb_json_string(b, m->name, strlen(m->name));
  aot_sb_str(b, ",\"platform\":\"aot\",\"backend\":\"aot\",\"max_batch_size\":0,\"input\":");
  config_tensors(b, m->in, m->n_in);
  aot_sb_str(b, ",\"output\":");
  config_tensors(b, m->out, m->n_out);
  aot_sb_str(b, "}");
  r->status = 200;
}

void aot_kserve_metadata(const aot_served_model_t* m, aot_http_response_t* r) {
  aot_sb_t* b = &r->body;
  aot_sb_str(b, "{\"name\":");
  aot_sb_json_string(b, m->name, strlen(m->name));
  aot_sb_str(b, ",\"versions\":[\"1\"],\"platform\":\"aot\",\"inputs\":");
  json_tensor_infos(b, m->in, m->n_in);
  aot_sb_str(b, ",\"outputs\":");
  json_tensor_infos(b, m->out, m->n_out);
  aot_sb_str(b, "}");
  r->status = 200;
}

/* Write the leaves of `node` (nested arrays, row-major) into dst as dtype, counting them in
 * *count; dst holds `capacity` elements. -1 with the error set on a bad or extra element. */
static int fill_elements(const aot_sj_doc_t* d, uint32_t node, aot_dtype_t dt, unsigned char* dst,
                         uint64_t capacity, uint64_t* count, const char* input, aot_http_response_t* r) {
  const aot_sj_node_t* nd = &d->nodes[node];
  if (nd->kind == AOT_SJ_ARRAY) {
    for (uint32_t k = nd->first; k != AOT_SJ_NONE; k = d->nodes[k].next)
      if (fill_elements(d, k, dt, dst, capacity, count, input, r)) return -1;
    return 0;
  }
  uint64_t i = *count;
  if (i >= capacity) {
    aot_http_error(r, 400, "input '%s': \"data\" holds more than the %llu elements of its shape", input,
                   (unsigned long long)capacity);
    return -1;
  }
  const char* want = aot_kserve_dtype(dt);
  int64_t iv = 0;
  uint64_t uv = 0;
  double dv = 0;
  int ok;
  switch (dt) {
    case AOT_DTYPE_FLOAT32: {
      float fv;
      ok = aot_sj_float(d, node, &fv) == 0;
      if (ok) ((float*)dst)[i] = fv;
      break;
    }
    case AOT_DTYPE_FLOAT16:
      ok = aot_sj_double(d, node, &dv) == 0;
      if (ok) ((uint16_t*)dst)[i] = (uint16_t)narrow_float(dv, 5, 10);
      break;
    case AOT_DTYPE_BFLOAT16:
      ok = aot_sj_double(d, node, &dv) == 0;
      if (ok) ((uint16_t*)dst)[i] = (uint16_t)narrow_float(dv, 8, 7);
      break;
    case AOT_DTYPE_FLOAT64:
      ok = aot_sj_double(d, node, &dv) == 0;
      if (ok) ((double*)dst)[i] = dv;
      break;
    case AOT_DTYPE_BOOL:
      ok = nd->kind == AOT_SJ_TRUE || nd->kind == AOT_SJ_FALSE;
      if (ok) dst[i] = nd->kind == AOT_SJ_TRUE;
      break;
    case AOT_DTYPE_INT8:
      ok = aot_sj_int64(d, node, &iv) == 0 && iv >= INT8_MIN && iv <= INT8_MAX;
      if (ok) ((int8_t*)dst)[i] = (int8_t)iv;
      break;
    case AOT_DTYPE_INT16:
      ok = aot_sj_int64(d, node, &iv) == 0 && iv >= INT16_MIN && iv <= INT16_MAX;
      if (ok) ((int16_t*)dst)[i] = (int16_t)iv;
      break;
    case AOT_DTYPE_INT32:
      ok = aot_sj_int64(d, node, &iv) == 0 && iv >= INT32_MIN && iv <= INT32_MAX;
      if (ok) ((int32_t*)dst)[i] = (int32_t)iv;
      break;
    case AOT_DTYPE_INT64:
      ok = aot_sj_int64(d, node, &iv) == 0;
      if (ok) ((int64_t*)dst)[i] = iv;
      break;
    case AOT_DTYPE_UINT8:
      ok = aot_sj_uint64(d, node, &uv) == 0 && uv <= UINT8_MAX;
      if (ok) dst[i] = (uint8_t)uv;
      break;
    case AOT_DTYPE_UINT16:
      ok = aot_sj_uint64(d, node, &uv) == 0 && uv <= UINT16_MAX;
      if (ok) ((uint16_t*)dst)[i] = (uint16_t)uv;
      break;
    case AOT_DTYPE_UINT32:
      ok = aot_sj_uint64(d, node, &uv) == 0 && uv <= UINT32_MAX;
      if (ok) ((uint32_t*)dst)[i] = (uint32_t)uv;
      break;
    case AOT_DTYPE_UINT64:
      ok = aot_sj_uint64(d, node, &uv) == 0;
      if (ok) ((uint64_t*)dst)[i] = uv;
      break;
    default:
      aot_http_error(r, 400, "input '%s': %s data must be sent as binary data (binary_data_size)", input,
                     want);
      return -1;
  }
  if (!ok) {
    unsigned len = nd->len > 40 ? 40 : nd->len;
    const char* text = nd->kind == AOT_SJ_ARRAY || nd->kind == AOT_SJ_OBJECT ? "an object"
                       : nd->kind == AOT_SJ_NULL                            ? "null"
                                                                            : NULL;
    if (text) {
      aot_http_error(r, 400, "input '%s': element %llu is %s, not a %s value", input,
                     (unsigned long long)i, text, want);
    } else {
      aot_http_error(r, 400, "input '%s': element %llu (%.*s) is not a %s value%s", input,
                     (unsigned long long)i, (int)len, d->text + nd->start, want,
                     dt == AOT_DTYPE_FLOAT32 || dt == AOT_DTYPE_FLOAT64 || dt == AOT_DTYPE_BOOL
                     ? ""
                     : " (an integer in range)");
    }
    return -1;
  }
  *count = i + 1;
  return 0;
}

static int bool_param(const aot_sj_doc_t* d, uint32_t obj, const char* key, int* out,
                      const char* where, aot_http_response_t* r) {
  uint32_t params = aot_sj_get(d, obj, "parameters");
  if (params == AOT_SJ_NONE) return 0;
  if (d->nodes[params].kind != AOT_SJ_OBJECT) {
    aot_http_error(r, 400, "%s: \"parameters\" is not an object", where);
    return -1;
  }
  uint32_t v = aot_sj_get(d, params, key);
  if (v == AOT_SJ_NONE) return 0;
  if (d->nodes[v].kind != AOT_SJ_TRUE && d->nodes[v].kind != AOT_SJ_FALSE) {
    aot_http_error(r, 400, "%s: parameter \"%s\" is not true or false", where, key);
    return -1;
  }
  *out = d->nodes[v].kind == AOT_SJ_TRUE;
  return 0;
}

static void* tensor_alloc(uint64_t bytes) {
  size_t n = (size_t)((bytes + 63) / 64 * 64);
  return aligned_alloc(64, n ? n : 64);
}



static void write_json_data(aot_sb_t* b, const aot_tensor_t* t) {
  uint64_t n = t->byte_size / (aot_dtype_size(t->dtype) ? aot_dtype_size(t->dtype) : 1);
  const unsigned char* p = t->data;
  aot_sb_str(b, "[");
  for (uint64_t i = 0; i < n && !b->failed; i++) {
    if (i) aot_sb_append(b, ",", 1);
    double v;
    int is_float = 1;
    switch (t->dtype) {
      case AOT_DTYPE_FLOAT32: v = ((const float*)p)[i]; break;
      case AOT_DTYPE_FLOAT64: v = ((const double*)p)[i]; break;
      case AOT_DTYPE_FLOAT16: v = half_to_float(((const uint16_t*)p)[i]); break;
      case AOT_DTYPE_BFLOAT16: {
        uint32_t bits = (uint32_t)((const uint16_t*)p)[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        v = f;
        break;
      }
      default: is_float = 0; v = 0; break;
    }
    if (is_float) {
      if (isnan(v)) aot_sb_str(b, "NaN");
      else if (isinf(v)) aot_sb_str(b, v > 0 ? "Infinity" : "-Infinity");
      else aot_sb_printf(b, t->dtype == AOT_DTYPE_FLOAT64 ? "%.17g" : "%.9g", v);
      continue;
    }
    switch (t->dtype) {
      case AOT_DTYPE_BOOL: aot_sb_str(b, p[i] ? "true" : "false"); break;
      case AOT_DTYPE_INT8: aot_sb_printf(b, "%d", ((const int8_t*)p)[i]); break;
      case AOT_DTYPE_INT16: aot_sb_printf(b, "%d", ((const int16_t*)p)[i]); break;
      case AOT_DTYPE_INT32: aot_sb_printf(b, "%d", ((const int32_t*)p)[i]); break;
      case AOT_DTYPE_INT64: aot_sb_printf(b, "%lld", (long long)((const int64_t*)p)[i]); break;
      case AOT_DTYPE_UINT8: aot_sb_printf(b, "%u", p[i]); break;
      case AOT_DTYPE_UINT16: aot_sb_printf(b, "%u", ((const uint16_t*)p)[i]); break;
      case AOT_DTYPE_UINT32: aot_sb_printf(b, "%u", ((const uint32_t*)p)[i]); break;
      case AOT_DTYPE_UINT64:
        aot_sb_printf(b, "%llu", (unsigned long long)((const uint64_t*)p)[i]);
        break;
      default: break;
    }
  }
  aot_sb_str(b, "]");
}

static int json_output_ok(aot_dtype_t d) {
  return d != AOT_DTYPE_FLOAT8E4M3FN && d != AOT_DTYPE_FLOAT8E4M3FNUZ && d != AOT_DTYPE_FLOAT8E5M2 &&
         d != AOT_DTYPE_FLOAT8E5M2FNUZ;
}

/* POST .../infer: body[0, n), its JSON the first header_len bytes when has_header_len. */
int aot_kserve_decode(const aot_served_model_t* m, const char* body, size_t n, int has_header_len,
                      uint64_t header_len, aot_kserve_request_t* t, aot_http_response_t* r) {
  memset(t, 0, sizeof(*t));
  size_t json_len = n;
  if (has_header_len) {
    if (header_len > n) {
      aot_http_error(r, 400,
                     "Inference-Header-Content-Length %llu is more than the body's %zu bytes",
                     (unsigned long long)header_len, n);
      return -1;
    }
    json_len = (size_t)header_len;
  }
  const char* bin = body + json_len;
  size_t bin_len = n - json_len, bin_off = 0;
  if (json_len == 0) {
    aot_http_error(r, 400, "empty request: the body must be a JSON inference request");
    return -1;
  }
  aot_sj_doc_t d;
  char err[256];
  /* a value costs at least 2 bytes of text; a valid request needs about one per element
   * (nested arrays add fewer than that) and a few dozen for its fields */
  uint64_t max_nodes = json_len / 2 + 2, useful = 2 * m->in_elements + 4096;
  if (max_nodes > useful) max_nodes = useful;
  if (aot_sj_parse(body, json_len, (uint32_t)max_nodes, &d, err, sizeof(err))) {
    aot_http_error(r, 400, "invalid inference request: %s", err);
    return -1;
  }
  int binary_output = 0;
  uint32_t root = 0, inputs, outputs, idn;
  if (d.nodes[root].kind != AOT_SJ_OBJECT) {
    aot_http_error(r, 400, "invalid inference request: the JSON is not an object");
    goto fail;
  }
  if ((idn = aot_sj_get(&d, root, "id")) != AOT_SJ_NONE) {
    if (aot_sj_string(&d, idn, t->id, sizeof(t->id))) {
      aot_http_error(r, 400, "\"id\" is not a string of at most %zu bytes", sizeof(t->id) - 1);
      goto fail;
    }
    t->has_id = 1;
  }
  if (bool_param(&d, root, "binary_data_output", &binary_output, "request", r)) goto fail;
  inputs = aot_sj_get(&d, root, "inputs");
  if (inputs == AOT_SJ_NONE || d.nodes[inputs].kind != AOT_SJ_ARRAY) {
    aot_http_error(r, 400, "invalid inference request: \"inputs\" must be an array");
    goto fail;
  }
  for (uint32_t k = d.nodes[inputs].first; k != AOT_SJ_NONE; k = d.nodes[k].next) {
    char name[AOT_KSERVE_MAX_NAME], dtname[32];
    if (d.nodes[k].kind != AOT_SJ_OBJECT ||
        aot_sj_string(&d, aot_sj_get(&d, k, "name"), name, sizeof(name))) {
      aot_http_error(r, 400, "each of \"inputs\" must be an object with a string \"name\"");
      goto fail;
    }
    uint32_t i = 0;
    while (i < m->n_in && strcmp(m->in[i].name, name) != 0) i++;
    if (i == m->n_in) {
      aot_sb_t names;
      aot_sb_init(&names, 512);
      for (uint32_t j = 0; j < m->n_in; j++) {
        if (j) aot_sb_str(&names, ", ");
        aot_sb_str(&names, m->in[j].name);
      }
      aot_sb_append(&names, "", 1);
      aot_http_error(r, 400, "model '%s' has no input '%s' (its inputs: %s)", m->name, name,
                     names.failed ? "..." : names.data);
      aot_sb_free(&names);
      goto fail;
    }
    const aot_tensor_info_t* info = &m->in[i];
    if (t->in[i].data) {
      aot_http_error(r, 400, "input '%s' is given twice", name);
      goto fail;
    }
    if (aot_sj_string(&d, aot_sj_get(&d, k, "datatype"), dtname, sizeof(dtname))) {
      aot_http_error(r, 400, "input '%s': \"datatype\" must be a string such as \"%s\"", name,
                     aot_kserve_dtype(info->dtype));
      goto fail;
    }
    if (strcmp(dtname, aot_kserve_dtype(info->dtype)) != 0) {
      aot_http_error(r, 400, "input '%s': datatype %s, but the model takes %s", name, dtname,
                     aot_kserve_dtype(info->dtype));
      goto fail;
    }
    uint32_t shape = aot_sj_get(&d, k, "shape");
    int shape_ok = shape != AOT_SJ_NONE && d.nodes[shape].kind == AOT_SJ_ARRAY;
    uint32_t rank = 0;
    for (uint32_t e = shape_ok ? d.nodes[shape].first : AOT_SJ_NONE; e != AOT_SJ_NONE;
         e = d.nodes[e].next, rank++) {
      int64_t dim;
      if (aot_sj_int64(&d, e, &dim) || rank >= info->rank || dim != info->shape[rank])
        shape_ok = 0;
    }
    if (!shape_ok || rank != info->rank) {
      aot_sb_t want;
      aot_sb_init(&want, 512);
      json_shape(&want, info->rank, info->shape);
      aot_sb_append(&want, "", 1);
      aot_sb_t given; /* the client's dims as their tokens: "[1,784]" */
      aot_sb_init(&given, 256);
      if (shape == AOT_SJ_NONE || d.nodes[shape].kind != AOT_SJ_ARRAY) {
        aot_sb_str(&given, "missing or not an array");
      } else {
        aot_sb_str(&given, "[");
        for (uint32_t e = d.nodes[shape].first; e != AOT_SJ_NONE; e = d.nodes[e].next) {
          if (e != d.nodes[shape].first) aot_sb_str(&given, ",");
          aot_sb_append(&given, d.text + d.nodes[e].start, d.nodes[e].len > 24 ? 24 : d.nodes[e].len);
        }
        aot_sb_str(&given, "]");
      }
      aot_sb_append(&given, "", 1);
      aot_http_error(r, 400, "input '%s': shape %s, but the model takes %s", name,
                     given.failed ? "[...]" : given.data, want.failed ? "?" : want.data);
      aot_sb_free(&given);
      aot_sb_free(&want);
      goto fail;
    }
    t->in[i].dtype = info->dtype;
    t->in[i].rank = info->rank;
    t->in[i].shape = info->shape;
    t->in[i].byte_size = info->byte_size;
    t->in[i].data = tensor_alloc(info->byte_size);
    if (!t->in[i].data) {
      aot_http_error(r, 500, "out of memory for input '%s' (%llu bytes)", name,
                     (unsigned long long)info->byte_size);
      goto fail;
    }
    uint32_t data = aot_sj_get(&d, k, "data");
    uint32_t params = aot_sj_get(&d, k, "parameters");
    uint32_t bsize = params == AOT_SJ_NONE ? AOT_SJ_NONE : aot_sj_get(&d, params, "binary_data_size");
    if (data != AOT_SJ_NONE && bsize != AOT_SJ_NONE) {
      aot_http_error(r, 400, "input '%s' has both \"data\" and binary_data_size", name);
      goto fail;
    }
    if (bsize != AOT_SJ_NONE) {
      uint64_t size;
      if (aot_sj_uint64(&d, bsize, &size)) {
        aot_http_error(r, 400, "input '%s': binary_data_size is not a byte count", name);
        goto fail;
      }
      if (size != info->byte_size) {
        aot_http_error(r, 400,
                       "input '%s': binary_data_size %llu, but its shape and datatype take %llu bytes",
                       name, (unsigned long long)size, (unsigned long long)info->byte_size);
        goto fail;
      }
      if (size > bin_len - bin_off) {
        aot_http_error(r, 400,
                       "input '%s': binary data truncated: %llu bytes expected, %zu left in the body "
                       "after the %zu-byte JSON header",
                       name, (unsigned long long)size, bin_len - bin_off, json_len);
        goto fail;
      }
      memcpy(t->in[i].data, bin + bin_off, (size_t)size);
      bin_off += (size_t)size;
    } else if (data != AOT_SJ_NONE) {
      uint64_t elems = info->byte_size / aot_dtype_size(info->dtype), count = 0;
      if (d.nodes[data].kind != AOT_SJ_ARRAY) {
        aot_http_error(r, 400, "input '%s': \"data\" must be an array", name);
        goto fail;
      }
      if (fill_elements(&d, data, info->dtype, t->in[i].data, elems, &count, name, r)) goto fail;
      if (count != elems) {
        aot_http_error(r, 400, "input '%s': \"data\" holds %llu elements, but its shape takes %llu", name,
                       (unsigned long long)count, (unsigned long long)elems);
        goto fail;
      }
    } else {
      aot_http_error(r, 400, "input '%s' has neither \"data\" nor parameters.binary_data_size", name);
      goto fail;
    }
  }
  for (uint32_t i = 0; i < m->n_in; i++)
    if (!t->in[i].data) {
      aot_http_error(r, 400, "missing input '%s' of model '%s'", m->in[i].name, m->name);
      goto fail;
    }
  if (bin_off != bin_len) {
    aot_http_error(r, 400, "%zu bytes of binary data after the last input's", bin_len - bin_off);
    goto fail;
  }
  outputs = aot_sj_get(&d, root, "outputs");
  if (outputs != AOT_SJ_NONE && d.nodes[outputs].kind != AOT_SJ_ARRAY) {
    aot_http_error(r, 400, "invalid inference request: \"outputs\" must be an array");
    goto fail;
  }
  if (outputs == AOT_SJ_NONE || d.nodes[outputs].first == AOT_SJ_NONE) {
    for (uint32_t o = 0; o < m->n_out; o++) {
      t->out_wanted[o] = (int)o + 1;
      t->out_binary[o] = binary_output;
    }
  } else {
    int place = 0;
    for (uint32_t k = d.nodes[outputs].first; k != AOT_SJ_NONE; k = d.nodes[k].next) {
      char name[AOT_KSERVE_MAX_NAME];
      if (d.nodes[k].kind != AOT_SJ_OBJECT ||
          aot_sj_string(&d, aot_sj_get(&d, k, "name"), name, sizeof(name))) {
        aot_http_error(r, 400, "each of \"outputs\" must be an object with a string \"name\"");
        goto fail;
      }
      uint32_t o = 0;
      while (o < m->n_out && strcmp(m->out[o].name, name) != 0) o++;
      if (o == m->n_out) {
        aot_http_error(r, 400, "model '%s' has no output '%s'", m->name, name);
        goto fail;
      }
      if (t->out_wanted[o]) {
        aot_http_error(r, 400, "output '%s' is requested twice", name);
        goto fail;
      }
      int b = binary_output;
      if (bool_param(&d, k, "binary_data", &b, "output", r)) goto fail;
      uint32_t params = aot_sj_get(&d, k, "parameters");
      if (params != AOT_SJ_NONE && aot_sj_get(&d, params, "classification") != AOT_SJ_NONE) {
        uint32_t cls = aot_sj_get(&d, params, "classification");
        int64_t cc;
        if (aot_sj_int64(&d, cls, &cc) || cc != 0) {
          aot_http_error(r, 400, "output '%s': the classification extension is not supported", name);
          goto fail;
        }
      }
      t->out_wanted[o] = ++place;
      t->out_binary[o] = b;
    }
  }
  for (uint32_t o = 0; o < m->n_out; o++) {
    if (t->out_wanted[o] && !t->out_binary[o] && !json_output_ok(m->out[o].dtype)) {
      aot_http_error(r, 400, "output '%s' is %s, which has no JSON form: request it as binary_data",
                     m->out[o].name, aot_kserve_dtype(m->out[o].dtype));
      goto fail;
    }
    t->out[o].dtype = m->out[o].dtype;
    t->out[o].rank = m->out[o].rank;
    t->out[o].shape = m->out[o].shape;
    t->out[o].byte_size = m->out[o].byte_size;
    t->out[o].data = tensor_alloc(m->out[o].byte_size);
    if (!t->out[o].data) {
      aot_http_error(r, 500, "out of memory for output '%s'", m->out[o].name);
      goto fail;
    }
  }
  aot_sj_free(&d);
  return 0;
fail:
  aot_sj_free(&d);
  aot_kserve_request_free(m, t);
  return -1;
}

void aot_kserve_encode(const aot_served_model_t* m, const aot_kserve_request_t* t,
                       aot_http_response_t* r) {
  aot_sb_t* b = &r->body;
  aot_sb_str(b, "{\"model_name\":");
  aot_sb_json_string(b, m->name, strlen(m->name));
  aot_sb_str(b, ",\"model_version\":\"1\"");
  if (t->has_id) {
    aot_sb_str(b, ",\"id\":");
    aot_sb_json_string(b, t->id, strlen(t->id));
  }
  aot_sb_str(b, ",\"outputs\":[");
  uint32_t order[AOT_KSERVE_MAX_TENSORS], n_order = 0; /* outputs in the order asked for */
  for (uint32_t o = 0; o < m->n_out; o++)
    if (t->out_wanted[o]) order[t->out_wanted[o] - 1] = o, n_order++;
  int any_binary = 0;
  for (uint32_t k = 0; k < n_order; k++) {
    uint32_t o = order[k];
    aot_sb_str(b, k ? ",{\"name\":" : "{\"name\":");
    aot_sb_json_string(b, m->out[o].name, strlen(m->out[o].name));
    aot_sb_printf(b, ",\"datatype\":\"%s\",\"shape\":", aot_kserve_dtype(m->out[o].dtype));
    json_shape(b, m->out[o].rank, m->out[o].shape);
    if (t->out_binary[o]) {
      any_binary = 1;
      aot_sb_printf(b, ",\"parameters\":{\"binary_data_size\":%llu}}",
                    (unsigned long long)m->out[o].byte_size);
    } else {
      aot_sb_str(b, ",\"data\":");
      write_json_data(b, &t->out[o]);
      aot_sb_str(b, "}");
    }
  }
  aot_sb_str(b, "]}");
  if (any_binary) {
    r->binary = 1;
    r->json_len = b->len;
    for (uint32_t k = 0; k < n_order; k++)
      if (t->out_binary[order[k]])
        aot_sb_append(b, t->out[order[k]].data, (size_t)t->out[order[k]].byte_size);
  }
  r->status = 200;
}

void aot_kserve_request_free(const aot_served_model_t* m, aot_kserve_request_t* t) {
  for (uint32_t i = 0; i < m->n_in; i++) {
    free(t->in[i].data);
    t->in[i].data = NULL;
  }
  for (uint32_t o = 0; o < m->n_out; o++) {
    free(t->out[o].data);
    t->out[o].data = NULL;
  }
}
