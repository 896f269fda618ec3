/* loader.c - load the CPU code section (an ELF shared object) with dlopen.
 *
 * The image goes into an anonymous memfd and is opened as
 * /proc/self/fd/N; without memfd (old kernels, seccomp), into a mkstemp file
 * in $TMPDIR or /tmp that is unlinked right after dlopen. The fd stays open
 * while the code is loaded: glibc recognises already-loaded objects by path,
 * so the path must not be reused for a different image meanwhile.
 *
 * Before dlopen the ELF header is checked (class, byte order, machine, type)
 * so a wrong-architecture or damaged image gives a clear error. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#else
#define HOST_MACHINE EM_NONE
#endif

static aot_status_t check_elf(const uint8_t* image, uint64_t size, const char* section,
                              aot_error_t* err) {
  Elf64_Ehdr eh;
  if (size < sizeof eh)
    return aot__fail(err, AOT_ERR_FORMAT, "section '%s': too small for an ELF header", section);
  memcpy(&eh, image, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return aot__fail(err, AOT_ERR_FORMAT, "section '%s': not an ELF image", section);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return aot__fail(err, AOT_ERR_UNSUPPORTED, "section '%s': not a 64-bit little-endian ELF",
                     section);
  if (eh.e_type != ET_DYN)
    return aot__fail(err, AOT_ERR_FORMAT, "section '%s': ELF type %u is not a shared object",
                     section, (unsigned)eh.e_type);
  if (HOST_MACHINE == EM_NONE || eh.e_machine != HOST_MACHINE)
    return aot__fail(err, AOT_ERR_UNSUPPORTED,
                     "section '%s': ELF machine %u does not match this host", section,
                     (unsigned)eh.e_machine);
  if (eh.e_phoff > size || (uint64_t)eh.e_phnum * eh.e_phentsize > size - eh.e_phoff)
    return aot__fail(err, AOT_ERR_FORMAT, "section '%s': ELF program headers outside the image",
                     section);
  return AOT_OK;
}

static int write_all(int fd, const uint8_t* p, uint64_t n) {
  while (n) {
    size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
    ssize_t w = write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (uint64_t)w;
  }
  return 0;
}

static int make_memfd(void) {
#if defined(SYS_memfd_create)
  return (int)syscall(SYS_memfd_create, "aot-code", (unsigned)MFD_CLOEXEC);
#else
  errno = ENOSYS;
  return -1;
#endif
}

aot_status_t aot__code_load(const uint8_t* image, uint64_t size, const char* section,
                            aot__code_t* out, aot_error_t* err) {
  out->handle = NULL;
  out->fd = -1;
  aot_status_t st = check_elf(image, size, section, err);
  if (st) return st;

  char path[512];
  char tmpl[512];
  int is_temp = 0;
  int fd = make_memfd();
  if (fd >= 0) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (access(path, R_OK) != 0) { /* /proc not mounted */
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    const char* dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    int n = snprintf(tmpl, sizeof tmpl, "%s/aot-code-XXXXXX", dir);
    if (n < 0 || (size_t)n >= sizeof tmpl)
      return aot__fail(err, AOT_ERR_IO, "section '%s': temp dir path too long", section);
    fd = mkstemp(tmpl);
    if (fd < 0)
      return aot__fail(err, AOT_ERR_IO, "section '%s': cannot create a memfd or temp file: %s",
                       section, strerror(errno));
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    memcpy(path, tmpl, sizeof path);
    is_temp = 1;
  }
  if (write_all(fd, image, size) != 0) {
    int e = errno;
    close(fd);
    if (is_temp) unlink(tmpl);
    return aot__fail(err, AOT_ERR_IO, "section '%s': cannot write code image: %s", section,
                     strerror(e));
  }
  (void)dlerror();
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (is_temp) unlink(tmpl);
  if (!h) {
    const char* msg = dlerror();
    close(fd);
    return aot__fail(err, AOT_ERR_INTERNAL, "section '%s': dlopen failed: %s", section,
                     msg ? msg : "unknown error");
  }
  out->handle = h;
  out->fd = fd;
  return AOT_OK;
}

aot_status_t aot__code_symbol(const aot__code_t* code, const char* symbol, void** out,
                              aot_error_t* err) {
  (void)dlerror();
  void* p = dlsym(code->handle, symbol);
  if (!p) return aot__fail(err, AOT_ERR_FORMAT, "code: missing symbol '%s'", symbol);
  *out = p;
  return AOT_OK;
}

aot_status_t aot__code_object(const aot__code_t* code, const char* symbol, const void** out,
                              uint64_t* out_size, aot_error_t* err) {
  *out = NULL;
  *out_size = UINT64_MAX;
  void* p = NULL;
  aot_status_t st = aot__code_symbol(code, symbol, &p, err);
  if (st) return st;
#if defined(__GLIBC__)
  /* the symbol's st_size from the code's dynamic symbol table */
  Dl_info info;
  const ElfW(Sym)* sym = NULL;
  if (dladdr1(p, &info, (void**)&sym, RTLD_DL_SYMENT) && sym && info.dli_saddr == p)
    *out_size = (uint64_t)sym->st_size;
#endif
  *out = p;
  return AOT_OK;
}

void aot__code_unload(aot__code_t* code) {
  if (code->handle) dlclose(code->handle);
  if (code->fd >= 0) close(code->fd);
  code->handle = NULL;
  code->fd = -1;
}
