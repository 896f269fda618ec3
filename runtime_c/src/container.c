/* container.c - reader of the .aot container (see packaging/FORMAT.md).
 *
 * The input is hostile: every field is checked before use, bounds checks are
 * written `off <= len && n <= len - off` so they cannot wrap, and every error
 * names the section it concerns. */
#define _DEFAULT_SOURCE /* madvise */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
/* ZSTD_d_stableOutBuffer: one of zstd's experimental parameters, set through the stable
 * ZSTD_DCtx_setParameter (a libzstd without it refuses it, and the decode goes on without) */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "internal.h"

#define HEADER_SIZE 64u
#define ENTRY_SIZE 64u
#define SECTION_ALIGN 64u

static uint32_t rd32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t* p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static int all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static aot_status_t parse_entry(const uint8_t* e, uint32_t index, aot__section_t* s,
                                aot_error_t* err) {
  const uint8_t* nul = memchr(e, 0, AOT_SECTION_NAME_SIZE);
  if (!nul) return aot__fail(err, AOT_ERR_FORMAT, "section %u: name is not NUL-terminated", index);
  size_t len = (size_t)(nul - e);
  if (len == 0) return aot__fail(err, AOT_ERR_FORMAT, "section %u: empty name", index);
  if (!all_zero(nul, AOT_SECTION_NAME_SIZE - len))
    return aot__fail(err, AOT_ERR_FORMAT, "section %u: bytes after the name's NUL are not zero",
                     index);
  for (size_t i = 0; i < len; i++)
    if (e[i] < 0x21 || e[i] > 0x7e)
      return aot__fail(err, AOT_ERR_FORMAT, "section %u: name is not printable ASCII", index);
  memset(s->name, 0, sizeof s->name);
  memcpy(s->name, e, len);
  s->codec = rd32(e + 24);
  s->offset = rd64(e + 32);
  s->stored_size = rd64(e + 40);
  s->raw_size = rd64(e + 48);
  s->crc32 = rd32(e + 56);
  if (s->codec != AOT_CODEC_NONE && s->codec != AOT_CODEC_ZSTD)
    return aot__fail(err, AOT_ERR_UNSUPPORTED, "section '%s': unknown codec %u", s->name,
                     s->codec);
  if (rd32(e + 28) != 0 || rd32(e + 60) != 0)
    return aot__fail(err, AOT_ERR_FORMAT, "section '%s': reserved fields are not zero", s->name);
  return AOT_OK;
}

/* Drop the whole pages inside [at, at + n) of a release_behind container's mapping. */
static void release(const aot__container_t* c, const uint8_t* at, size_t n) {
  if (!c->release_behind || n == 0) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t first = ((uintptr_t)at + page - 1) / page * page;
  uintptr_t end = ((uintptr_t)at + n) / page * page;
  if (end > first) (void)madvise((void*)first, end - first, MADV_DONTNEED);
}

/* CRC-32 of n bytes at p, read (and released) a window at a time. */
static uint32_t crc_released(const aot__container_t* c, const uint8_t* p, uint64_t n) {
  uint32_t crc = 0;
  while (n) {
    size_t step = n < AOT__STREAM_WINDOW ? (size_t)n : AOT__STREAM_WINDOW;
    crc = aot__crc32(crc, p, step);
    release(c, p, step);
    p += step;
    n -= step;
  }
  return crc;
}

aot_status_t aot__container_parse_mapped(const void* data, size_t size, int release_behind,
                                         aot__container_t* out, aot_error_t* err) {
  const uint8_t* p = (const uint8_t*)data;
  uint64_t n = (uint64_t)size;
  memset(out, 0, sizeof *out);
  out->release_behind = release_behind;
  if (!p && n) return aot__fail(err, AOT_ERR_INVALID_ARGUMENT, "data is NULL");
  if (n < HEADER_SIZE)
    return aot__fail(err, AOT_ERR_FORMAT,
                     "truncated: file is %llu bytes, the header alone needs %u",
                     (unsigned long long)n, HEADER_SIZE);
  if (memcmp(p, "AOTMODEL", 8) != 0)
    return aot__fail(err, AOT_ERR_FORMAT, "bad magic: not an aot artifact");
  uint32_t version = rd32(p + 8);
  if (version < AOT_FORMAT_VERSION)
    return aot__fail(err, AOT_ERR_UNSUPPORTED,
                     "format version %u; this runtime reads %u: recompile the model", version,
                     AOT_FORMAT_VERSION);
  if (version > AOT_FORMAT_VERSION)
    return aot__fail(err, AOT_ERR_UNSUPPORTED,
                     "format version %u; this runtime reads %u: a newer aot wrote it, update "
                     "the runtime",
                     version, AOT_FORMAT_VERSION);
  uint32_t count = rd32(p + 12);
  uint64_t table_off = rd64(p + 16);
  uint64_t file_size = rd64(p + 24);
  uint32_t header_crc = rd32(p + 32);
  if (file_size > n)
    return aot__fail(err, AOT_ERR_FORMAT, "truncated: file is %llu bytes, header says %llu",
                     (unsigned long long)n, (unsigned long long)file_size);
  if (file_size < n)
    return aot__fail(err, AOT_ERR_FORMAT, "trailing data: file is %llu bytes, header says %llu",
                     (unsigned long long)n, (unsigned long long)file_size);
  if (count < 1 || count > AOT_MAX_SECTIONS)
    return aot__fail(err, AOT_ERR_FORMAT, "header: bad section count %u (must be 1..%u)", count,
                     AOT_MAX_SECTIONS);
  if (table_off != HEADER_SIZE)
    return aot__fail(err, AOT_ERR_FORMAT, "header: bad section table offset %llu (must be %u)",
                     (unsigned long long)table_off, HEADER_SIZE);
  uint64_t table_end = HEADER_SIZE + (uint64_t)count * ENTRY_SIZE; /* count <= 64: no wrap */
  if (table_end > n)
    return aot__fail(err, AOT_ERR_FORMAT, "truncated: file is %llu bytes, section table ends at %llu",
                     (unsigned long long)n, (unsigned long long)table_end);
  uint8_t hdr[HEADER_SIZE];
  memcpy(hdr, p, HEADER_SIZE);
  memset(hdr + 32, 0, 4);
  uint32_t crc = aot__crc32(0, hdr, HEADER_SIZE);
  crc = aot__crc32(crc, p + HEADER_SIZE, (size_t)(table_end - HEADER_SIZE));
  if (crc != header_crc)
    return aot__fail(err, AOT_ERR_CHECKSUM,
                     "header: checksum mismatch (stored 0x%08x, computed 0x%08x)", header_crc, crc);
  if (!all_zero(p + 36, HEADER_SIZE - 36))
    return aot__fail(err, AOT_ERR_FORMAT, "header: reserved bytes are not zero");

  uint64_t prev_end = table_end;
  for (uint32_t i = 0; i < count; i++) {
    aot__section_t* s = &out->sections[i];
    aot_status_t st = parse_entry(p + HEADER_SIZE + (uint64_t)i * ENTRY_SIZE, i, s, err);
    if (st) return st;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(out->sections[j].name, s->name) == 0)
        return aot__fail(err, AOT_ERR_FORMAT, "section '%s': duplicate name", s->name);
    if (s->offset % SECTION_ALIGN)
      return aot__fail(err, AOT_ERR_FORMAT, "section '%s': offset %llu is not %u-byte aligned",
                       s->name, (unsigned long long)s->offset, SECTION_ALIGN);
    if (s->offset < prev_end)
      return aot__fail(err, AOT_ERR_FORMAT,
                       "section '%s': offset %llu overlaps the table or the previous section "
                       "(ends at %llu)",
                       s->name, (unsigned long long)s->offset, (unsigned long long)prev_end);
    if (!(s->offset <= n && s->stored_size <= n - s->offset))
      return aot__fail(err, AOT_ERR_FORMAT,
                       "section '%s': bytes [%llu, %llu+%llu) lie outside the file (%llu bytes)",
                       s->name, (unsigned long long)s->offset, (unsigned long long)s->offset,
                       (unsigned long long)s->stored_size, (unsigned long long)n);
    if (s->codec == AOT_CODEC_NONE && s->raw_size != s->stored_size)
      return aot__fail(err, AOT_ERR_FORMAT,
                       "section '%s': raw size %llu != stored size %llu for codec none", s->name,
                       (unsigned long long)s->raw_size, (unsigned long long)s->stored_size);
    if (!all_zero(p + prev_end, (size_t)(s->offset - prev_end)))
      return aot__fail(err, AOT_ERR_FORMAT, "section '%s': padding before it is not zero", s->name);
    prev_end = s->offset + s->stored_size;
  }
  for (uint32_t i = 0; i < count; i++) {
    const aot__section_t* s = &out->sections[i];
    uint32_t c = crc_released(out, p + s->offset, s->stored_size);
    if (c != s->crc32)
      return aot__fail(err, AOT_ERR_CHECKSUM,
                       "section '%s': checksum mismatch (stored 0x%08x, computed 0x%08x)", s->name,
                       s->crc32, c);
  }
  out->data = p;
  out->size = n;
  out->count = count;
  return AOT_OK;
}

const aot__section_t* aot__container_find(const aot__container_t* c, const char* name) {
  for (uint32_t i = 0; i < c->count; i++)
    if (strcmp(c->sections[i].name, name) == 0) return &c->sections[i];
  return NULL;
}

/* Decode zstd section s into buf (raw_size bytes) a window of input at a time, releasing
 * each window behind it. */
static aot_status_t decode_stream(const aot__container_t* c, const aot__section_t* s,
                                  const uint8_t* src, uint8_t* buf, aot_error_t* err) {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  if (!dctx) return aot__fail(err, AOT_ERR_NO_MEMORY, "section '%s': out of memory", s->name);
  /* the output buffer stays put between calls: zstd decodes straight into it instead of
   * through a window buffer of its own (up to 8 MB more) */
  (void)ZSTD_DCtx_setParameter(dctx, ZSTD_d_stableOutBuffer, 1);
  ZSTD_outBuffer out = {buf, (size_t)s->raw_size, 0};
  size_t left = 1; /* ZSTD_decompressStream's hint: 0 once the frame is complete */
  uint64_t done = 0;
  aot_status_t st = AOT_OK;
  while (left != 0 && done < s->stored_size && st == AOT_OK) {
    size_t step = s->stored_size - done < AOT__STREAM_WINDOW ? (size_t)(s->stored_size - done)
                                                              : AOT__STREAM_WINDOW;
    ZSTD_inBuffer in = {src + done, step, 0};
    while (left != 0 && in.pos < in.size) {
      size_t in_before = in.pos, out_before = out.pos;
      left = ZSTD_decompressStream(dctx, &out, &in);
      if (ZSTD_isError(left)) {
        st = aot__fail(err, AOT_ERR_FORMAT, "section '%s': zstd decompression failed: %s",
                       s->name, ZSTD_getErrorName(left));
        break;
      }
      if (left != 0 && in.pos == in_before && out.pos == out_before) { /* output is full */
        st = aot__fail(err, AOT_ERR_FORMAT, "section '%s': decompresses to more than raw size %llu",
                       s->name, (unsigned long long)s->raw_size);
        break;
      }
    }
    release(c, src + done, in.pos);
    done += in.pos;
  }
  ZSTD_freeDCtx(dctx);
  if (st == AOT_OK && (left != 0 || out.pos != s->raw_size))
    st = aot__fail(err, AOT_ERR_FORMAT, "section '%s': decompressed to %zu bytes, raw size says %llu",
                   s->name, out.pos, (unsigned long long)s->raw_size);
  return st;
}

aot_status_t aot__section_decode(const aot__container_t* c, const aot__section_t* s,
                                 uint64_t align, uint8_t** out, aot_error_t* err) {
  *out = NULL;
  const uint8_t* src = c->data + s->offset;
  if (s->raw_size > (uint64_t)SIZE_MAX - 4096)
    return aot__fail(err, AOT_ERR_NO_MEMORY, "section '%s': raw size %llu is too large", s->name,
                     (unsigned long long)s->raw_size);
  if (s->codec == AOT_CODEC_ZSTD) {
    size_t stored = (size_t)s->stored_size;
    unsigned long long fcs = ZSTD_getFrameContentSize(src, stored);
    if (fcs == ZSTD_CONTENTSIZE_ERROR)
      return aot__fail(err, AOT_ERR_FORMAT, "section '%s': bad zstd frame header", s->name);
    if (fcs == ZSTD_CONTENTSIZE_UNKNOWN)
      return aot__fail(err, AOT_ERR_FORMAT, "section '%s': zstd frame lacks its content size",
                       s->name);
    if (fcs != s->raw_size)
      return aot__fail(err, AOT_ERR_FORMAT,
                       "section '%s': zstd frame content size %llu != raw size %llu", s->name, fcs,
                       (unsigned long long)s->raw_size);
    size_t frame = ZSTD_findFrameCompressedSize(src, stored);
    if (ZSTD_isError(frame))
      return aot__fail(err, AOT_ERR_FORMAT, "section '%s': bad zstd frame: %s", s->name,
                       ZSTD_getErrorName(frame));
    if (frame != stored)
      return aot__fail(err, AOT_ERR_FORMAT, "section '%s': trailing bytes after the zstd frame",
                       s->name);
  }
  uint8_t* buf = aot__aligned_alloc(align, s->raw_size + 1);
  if (!buf)
    return aot__fail(err, AOT_ERR_NO_MEMORY, "section '%s': cannot allocate %llu bytes", s->name,
                     (unsigned long long)s->raw_size);
  if (s->codec == AOT_CODEC_NONE) {
    for (uint64_t at = 0; at < s->raw_size; at += AOT__STREAM_WINDOW) {
      size_t step = s->raw_size - at < AOT__STREAM_WINDOW ? (size_t)(s->raw_size - at)
                                                          : AOT__STREAM_WINDOW;
      memcpy(buf + at, src + at, step);
      release(c, src + at, step);
    }
  } else if (c->release_behind) {
    release(c, src, (size_t)s->stored_size); /* what the frame checks above touched */
    aot_status_t st = decode_stream(c, s, src, buf, err);
    if (st) {
      free(buf);
      return st;
    }
  } else {
    size_t got = ZSTD_decompress(buf, (size_t)s->raw_size, src, (size_t)s->stored_size);
    if (ZSTD_isError(got)) {
      free(buf);
      return aot__fail(err, AOT_ERR_FORMAT, "section '%s': zstd decompression failed: %s",
                       s->name, ZSTD_getErrorName(got));
    }
    if (got != s->raw_size) {
      free(buf);
      return aot__fail(err, AOT_ERR_FORMAT,
                       "section '%s': decompressed to %zu bytes, raw size says %llu", s->name, got,
                       (unsigned long long)s->raw_size);
    }
  }
  buf[s->raw_size] = 0;
  *out = buf;
  return AOT_OK;
}
