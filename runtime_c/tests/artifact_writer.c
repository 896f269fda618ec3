#include "artifact_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "aot_runtime.h"

uint32_t aot__crc32(uint32_t crc, const void* data, size_t n); /* from the library */

static void wr32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

uint8_t* tw_pack(const char* manifest_json, const tw_section_t* sections, size_t count,
                 size_t* out_size) {
  size_t total = count + 1;
  tw_section_t* all = calloc(total, sizeof *all);
  void** stored = calloc(total, sizeof *stored);
  size_t* stored_size = calloc(total, sizeof *stored_size);
  all[0].name = "manifest";
  all[0].data = manifest_json;
  all[0].size = strlen(manifest_json);
  all[0].zstd = 1;
  if (count) memcpy(all + 1, sections, count * sizeof *sections);
  size_t off = align64(64 + 64 * total);
  size_t end = off;
  for (size_t i = 0; i < total; i++) {
    if (all[i].zstd == 2) {
      stored[i] = malloc(all[i].size + 1);
      memcpy(stored[i], all[i].data, all[i].size);
      stored_size[i] = all[i].size;
    } else if (all[i].zstd) {
      size_t cap = ZSTD_compressBound(all[i].size);
      stored[i] = malloc(cap);
      stored_size[i] = ZSTD_compress(stored[i], cap, all[i].data, all[i].size, 3);
    } else {
      stored[i] = malloc(all[i].size + 1);
      memcpy(stored[i], all[i].data, all[i].size);
      stored_size[i] = all[i].size;
    }
    end = off + stored_size[i];
    off = align64(end);
  }
  uint8_t* buf = calloc(1, end);
  memcpy(buf, "AOTMODEL", 8);
  wr32(buf + 8, AOT_FORMAT_VERSION);
  wr32(buf + 12, (uint32_t)total);
  wr64(buf + 16, 64);
  wr64(buf + 24, end);
  off = align64(64 + 64 * total);
  for (size_t i = 0; i < total; i++) {
    uint8_t* e = buf + 64 + 64 * i;
    strncpy((char*)e, all[i].name, 23);
    wr32(e + 24, all[i].zstd ? 1 : 0);
    wr64(e + 32, off);
    wr64(e + 40, stored_size[i]);
    wr64(e + 48, all[i].zstd == 2 ? ZSTD_getFrameContentSize(all[i].data, all[i].size) : all[i].size);
    wr32(e + 56, aot__crc32(0, stored[i], stored_size[i]));
    memcpy(buf + off, stored[i], stored_size[i]);
    off = align64(off + stored_size[i]);
    free(stored[i]);
  }
  wr32(buf + 32, aot__crc32(0, buf, 64 + 64 * total));
  free(all);
  free(stored);
  free(stored_size);
  *out_size = end;
  return buf;
}

uint8_t* tw_zstd_zeros(uint64_t n, size_t* out_size) {
  static const uint8_t zeros[1 << 16];
  ZSTD_CCtx* c = ZSTD_createCCtx();
  size_t cap = (size_t)(n / 1024) + (1 << 16); /* zero blocks compress to a few bytes each */
  uint8_t* out = malloc(cap);
  if (!c || !out || ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1)) ||
      ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(c, n))) {
    ZSTD_freeCCtx(c);
    free(out);
    return NULL;
  }
  ZSTD_outBuffer o = {out, cap, 0};
  for (uint64_t done = 0; done < n;) {
    size_t chunk = n - done < sizeof zeros ? (size_t)(n - done) : sizeof zeros;
    ZSTD_inBuffer in = {zeros, chunk, 0};
    while (in.pos < in.size)
      if (ZSTD_isError(ZSTD_compressStream2(c, &o, &in, ZSTD_e_continue)) || o.pos == o.size) {
        ZSTD_freeCCtx(c);
        free(out);
        return NULL;
      }
    done += chunk;
  }
  ZSTD_inBuffer none = {NULL, 0, 0};
  size_t left;
  while ((left = ZSTD_compressStream2(c, &o, &none, ZSTD_e_end)) != 0)
    if (ZSTD_isError(left) || o.pos == o.size) {
      ZSTD_freeCCtx(c);
      free(out);
      return NULL;
    }
  ZSTD_freeCCtx(c);
  *out_size = o.pos;
  return out;
}

uint8_t* tw_read_file(const char* path, size_t* out_size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  *out_size = got;
  return buf;
}

int tw_write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, size, f);
  fclose(f);
  return w == size ? 0 : -1;
}
