/* aot_server - serve aot artifacts over HTTP/1.1 with the Open Inference Protocol
 * (KServe v2, as Triton's REST API and tritonclient.http speak it).
 *
 *   aot_server --model NAME=PATH.aot [--model ...] [--host 0.0.0.0] [--port 8000]
 *              [--workers N] [--queue N] [--max-body-bytes N] [--max-connections N]
 *              [--max-buffered-bytes N] [--request-timeout S] [--idle-timeout S] [--threads-per-worker N]
 *
 * Endpoints: GET /v2/health/live, GET /v2/health/ready, GET /v2 (server metadata),
 * GET /v2/models/NAME[/versions/1] (model metadata), GET /v2/models/NAME[/versions/1]/ready,
 * GET /v2/models/NAME[/versions/1]/config (Triton's model configuration, for its tools),
 * POST /v2/models/NAME[/versions/1]/infer with JSON tensors ("data" flat or nested) or the
 * binary tensor extension (Inference-Header-Content-Length; "binary_data_size" on inputs;
 * "binary_data" on requested outputs or "binary_data_output" on the request).
 *
 * Threads: the main thread accepts; each connection has a thread of its own (at most
 * --max-connections; past that a client gets 503 and is closed) that reads requests with a
 * deadline (--request-timeout from a request's first byte to its last, --idle-timeout
 * between keep-alive requests), parses them and answers them. Inference runs on --workers
 * worker threads, each with its own aot context per model; a connection hands a checked
 * request to them through a queue of --queue entries, and a request that finds it full is
 * answered 503 at once. Memory is bounded: a connection holds at most one request of
 * --max-body-bytes (413 past that, before the body is read), and all of them together at
 * most --max-buffered-bytes of bodies (503 past that, before the body is read); besides the
 * body, a request's parse tree (20 bytes a JSON value, at most one value per 2 bytes of
 * JSON and 2 per element of the model's inputs, plus 4096), its tensors and its answer.
 *
 * SIGTERM/SIGINT: stop accepting, let the requests being read or run finish and be answered,
 * close every connection, then exit 0.
 *
 * This file holds the threads, sockets and routing; http.c parses a request's head and
 * writes an answer's, kserve.c turns a request body into tensors and outputs into an answer,
 * server_json.c is their JSON.
 *
 * Errors are KServe JSON {"error": "..."}: 400 (bad HTTP or JSON, a wrong input name, shape
 * or datatype, truncated binary data), 404 (unknown model, version or path), 405, 408 (a
 * request not received in time), 411 (chunked bodies: send Content-Length), 413, 415
 * (Content-Encoding), 431, 500, 503 (queue or connections full, shutting down). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "aot_runtime.h"
#include "http.h"
#include "kserve.h"
#include "server_json.h"

#define MAX_MODELS 64
#define MAX_NAME 128
#define MAX_HEADER_BYTES (16 * 1024)

/* ---------------------------------------------------------------- configuration */

typedef struct {
  const char* host;
  int port;
  uint32_t workers, queue, max_connections, threads_per_worker;
  uint64_t max_body, max_buffered;
  double request_timeout, idle_timeout;
  uint32_t n_models;
  char model_names[MAX_MODELS][MAX_NAME];
  const char* model_paths[MAX_MODELS];
} config_t;

typedef struct job {
  uint32_t model;
  aot_tensor_t* inputs;
  aot_tensor_t* outputs;
  aot_status_t status;
  aot_error_t err;
  int done;
  pthread_cond_t cv;
} job_t;

typedef struct server {
  config_t cfg;
  aot_served_model_t models[MAX_MODELS];
  uint32_t n_models;
  aot_context_t** contexts; /* [worker * n_models + model] */
  pthread_t* worker_threads;
  uint32_t n_workers_started;
  /* the job queue; mu also guards each job's done flag */
  pthread_mutex_t mu;
  pthread_cond_t not_empty;
  job_t** ring;
  uint32_t head, count;
  int workers_stop;
  /* connections */
  pthread_mutex_t conn_mu;
  pthread_cond_t conn_cv;
  uint32_t active_conns;
  uint64_t buffered; /* request body bytes held by connections, at most cfg.max_buffered */
  atomic_int shutting_down;
  int stop_read_fd; /* readable once shutdown begins: every poll sees it */
  int listen_fd;
} server_t;

/* The signal handler's one way out: the write end of the stop pipe. */
static int g_stop_write_fd = -1;

static void on_signal(int sig) {
  (void)sig;
  int saved = errno;
  if (g_stop_write_fd >= 0) {
    ssize_t r = write(g_stop_write_fd, "x", 1);
    (void)r;
  }
  errno = saved;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- worker pool */

static void* worker_main(void* arg) {
  void** a = arg;
  server_t* s = a[0];
  uint32_t w = (uint32_t)(uintptr_t)a[1];
  free(arg);
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (s->count == 0 && !s->workers_stop) pthread_cond_wait(&s->not_empty, &s->mu);
    if (s->count == 0) {
      pthread_mutex_unlock(&s->mu);
      return NULL;
    }
    job_t* job = s->ring[s->head];
    s->head = (s->head + 1) % s->cfg.queue;
    s->count--;
    pthread_mutex_unlock(&s->mu);

    const aot_served_model_t* m = &s->models[job->model];
    aot_context_t* ctx = s->contexts[(size_t)w * s->n_models + job->model];
    aot_status_t st = aot_run(ctx, job->inputs, m->n_in, job->outputs, m->n_out, &job->err);

    pthread_mutex_lock(&s->mu);
    job->status = st;
    job->done = 1;
    pthread_cond_signal(&job->cv);
    pthread_mutex_unlock(&s->mu);
  }
}

/* Queue a job and wait for it: 0 when it ran (see job->status), -1 when the queue is full. */
static int run_job(server_t* s, job_t* job) {
  pthread_mutex_lock(&s->mu);
  if (s->count == s->cfg.queue) {
    pthread_mutex_unlock(&s->mu);
    return -1;
  }
  job->done = 0;
  s->ring[(s->head + s->count) % s->cfg.queue] = job;
  s->count++;
  pthread_cond_signal(&s->not_empty);
  while (!job->done) pthread_cond_wait(&job->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

/* ---------------------------------------------------------------- socket I/O */

typedef struct {
  server_t* srv;
  int fd;
  char* buf;
  size_t len, cap;
} conn_t;

/* Wait until fd is ready for `events` or the deadline passes: 1 ready, 0 timed out,
 * -2 shutdown began (only when watch_stop), -1 error. */
static int wait_fd(conn_t* c, short events, double deadline, int watch_stop) {
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return 0;
    struct pollfd p[2] = {{c->fd, events, 0}, {c->srv->stop_read_fd, POLLIN, 0}};
    int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
    int r = poll(p, watch_stop ? 2 : 1, ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) continue; /* the loop checks the deadline */
    if (p[0].revents) return 1;
    if (watch_stop && p[1].revents) return -2;
  }
}

static int send_all(conn_t* c, const char* data, size_t n, double deadline) {
  size_t off = 0;
  while (off < n) {
    ssize_t k = send(c->fd, data + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      off += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_fd(c, POLLOUT, deadline, 0) != 1) return -1;
      continue;
    }
    return -1;
  }
  return 0;
}

static int send_response(conn_t* c, aot_http_response_t* r, int keep_alive) {
  aot_sb_t head;
  aot_sb_init(&head, 0);
  if (r->body.failed) aot_http_error(r, 500, "out of memory writing the response");
  aot_http_write_head(r, keep_alive, &head);
  int rc = -1;
  size_t body_len = r->body.len;
  if (body_len <= 65536) { /* one send, one segment for a small answer */
    aot_sb_append(&head, r->body.data, body_len);
    body_len = 0;
  }
  if (!head.failed) {
    double deadline = now_s() + c->srv->cfg.request_timeout;
    rc = send_all(c, head.data, head.len, deadline);
    if (rc == 0 && body_len) rc = send_all(c, r->body.data, body_len, deadline);
  }
  aot_sb_free(&head);
  return rc;
}


/* POST .../infer: decode and check the request, run it on a worker, encode the answer. */
static void infer(server_t* s, uint32_t mi, const aot_http_request_t* q, const char* body, size_t n,
                  aot_http_response_t* r) {
  const aot_served_model_t* m = &s->models[mi];
  aot_kserve_request_t* t = malloc(sizeof(*t));
  if (!t) {
    aot_http_error(r, 500, "out of memory");
    return;
  }
  if (aot_kserve_decode(m, body, n, q->has_infer_header_len, q->infer_header_len, t, r)) {
    free(t);
    return;
  }
  job_t job;
  memset(&job, 0, sizeof(job));
  job.model = mi;
  job.inputs = t->in;
  job.outputs = t->out;
  if (pthread_cond_init(&job.cv, NULL) != 0) {
    aot_http_error(r, 500, "pthread_cond_init failed");
  } else {
    /* during shutdown too: the workers run until every connection has been answered */
    if (run_job(s, &job)) {
      aot_http_error(r, 503, "server busy: all %u queue entries are taken; retry later", s->cfg.queue);
    } else if (job.status != AOT_OK) {
      int bad_input = job.status == AOT_ERR_SHAPE_MISMATCH || job.status == AOT_ERR_DTYPE_MISMATCH ||
                      job.status == AOT_ERR_CHECK_FAILED;
      aot_http_error(r, bad_input ? 400 : 500, "model '%s' failed: %s (%s)", m->name, job.err.message,
                     aot_status_string(job.status));
    } else {
      aot_kserve_encode(m, t, r);
    }
    pthread_cond_destroy(&job.cv);
  }
  aot_kserve_request_free(m, t);
  free(t);
}

static int find_model(const server_t* s, const char* name, size_t len) {
  for (uint32_t i = 0; i < s->n_models; i++)
    if (strlen(s->models[i].name) == len && memcmp(s->models[i].name, name, len) == 0) return (int)i;
  return -1;
}

static void route(server_t* s, const aot_http_request_t* q, const char* body, size_t n,
                  aot_http_response_t* r) {
  char path[sizeof(q->path)];
  memcpy(path, q->path, sizeof(path));
  char* qs = strchr(path, '?');
  if (qs) *qs = '\0';
  size_t plen = strlen(path);
  while (plen > 1 && path[plen - 1] == '/') path[--plen] = '\0';
  int get = strcmp(q->method, "GET") == 0, post = strcmp(q->method, "POST") == 0;
  if (strcmp(path, "/v2/health/live") == 0 || strcmp(path, "/v2/health/ready") == 0 ||
      strcmp(path, "/v2") == 0) {
    if (!get) {
      aot_http_error(r, 405, "%s is not allowed on %s (use GET)", q->method, path);
      r->allow = "GET";
      return;
    }
    if (strcmp(path, "/v2") == 0) { /* "version": the runtime's ABI version, what a client can rely on */
      aot_sb_printf(&r->body,
                    "{\"name\":\"aot_server\",\"version\":\"%u\",\"extensions\":[\"binary_tensor_data\"]}",
                    aot_abi_version());
      r->status = 200;
    } else if (strcmp(path, "/v2/health/ready") == 0 && atomic_load(&s->shutting_down)) {
      aot_http_error(r, 503, "the server is shutting down");
    } else {
      r->status = 200;
    }
    return;
  }
  static const char prefix[] = "/v2/models/";
  if (strncmp(path, prefix, sizeof(prefix) - 1) != 0) {
    aot_http_error(r, 404, "no such endpoint: %s %s", q->method, path);
    return;
  }
  const char* name = path + sizeof(prefix) - 1;
  const char* slash = strchr(name, '/');
  size_t nlen = slash ? (size_t)(slash - name) : strlen(name);
  const char* rest = slash ? slash : "";
  int mi = find_model(s, name, nlen);
  if (mi < 0) {
    aot_sb_t names;
    aot_sb_init(&names, 2048);
    for (uint32_t i = 0; i < s->n_models; i++) {
      if (i) aot_sb_str(&names, ", ");
      aot_sb_str(&names, s->models[i].name);
    }
    aot_sb_append(&names, "", 1);
    aot_http_error(r, 404, "unknown model '%.*s' (this server serves: %s)", (int)(nlen > 200 ? 200 : nlen),
                   name, names.failed ? "..." : names.data);
    aot_sb_free(&names);
    return;
  }
  if (strncmp(rest, "/versions/", 10) == 0) {
    const char* v = rest + 10;
    const char* vs = strchr(v, '/');
    size_t vlen = vs ? (size_t)(vs - v) : strlen(v);
    if (!(vlen == 1 && v[0] == '1')) {
      aot_http_error(r, 404, "model '%s' has no version '%.*s' (it has version 1)", s->models[mi].name,
                     (int)(vlen > 64 ? 64 : vlen), v);
      return;
    }
    rest = vs ? vs : "";
  }
  if (rest[0] == '\0' || strcmp(rest, "/ready") == 0 || strcmp(rest, "/config") == 0) {
    if (!get) {
      aot_http_error(r, 405, "%s is not allowed on %s (use GET)", q->method, path);
      r->allow = "GET";
      return;
    }
    if (rest[0] == '\0') {
      aot_kserve_metadata(&s->models[mi], r);
    } else if (strcmp(rest, "/config") == 0) {
      aot_kserve_config(&s->models[mi], r);
    } else {
      aot_sb_str(&r->body, "{\"name\":");
      aot_sb_json_string(&r->body, s->models[mi].name, strlen(s->models[mi].name));
      aot_sb_str(&r->body, ",\"ready\":true}");
      r->status = 200;
    }
    return;
  }
  if (strcmp(rest, "/infer") == 0) {
    if (!post) {
      aot_http_error(r, 405, "%s is not allowed on %s (use POST)", q->method, path);
      r->allow = "POST";
      return;
    }
    if (q->content_encoding[0] && strcasecmp(q->content_encoding, "identity") != 0) {
      aot_http_error(r, 415, "Content-Encoding '%s' is not supported: send the body uncompressed",
                     q->content_encoding);
      return;
    }
    infer(s, (uint32_t)mi, q, body, n, r);
    return;
  }
  aot_http_error(r, 404, "no such endpoint: %s %s", q->method, path);
}

/* ---------------------------------------------------------------- connections */

/* Read more bytes into c->buf (growing it to hold `want` bytes): 1 read some, 0 timed out,
 * -1 closed or failed, -2 shutdown while idle. */
static int read_more(conn_t* c, size_t want, double deadline, int idle) {
  if (want > c->cap) {
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < want) cap *= 2;
    char* b = realloc(c->buf, cap);
    if (!b) return -1;
    c->buf = b;
    c->cap = cap;
  }
  int w = wait_fd(c, POLLIN, deadline, idle);
  if (w != 1) return w == -2 ? -2 : w;
  for (;;) {
    ssize_t k = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
    if (k > 0) {
      c->len += (size_t)k;
      return 1;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1; /* spurious wake-up */
    return -1;
  }
}

static void release(server_t* s, uint64_t bytes) {
  if (!bytes) return;
  pthread_mutex_lock(&s->conn_mu);
  s->buffered -= bytes;
  pthread_mutex_unlock(&s->conn_mu);
}

static void* conn_main(void* arg) {
  conn_t* c = arg;
  server_t* s = c->srv;
  for (;;) {
    aot_http_request_t q;
    memset(&q, 0, sizeof(q));
    aot_http_response_t r;
    memset(&r, 0, sizeof(r));
    aot_sb_init(&r.body, 0);
    int keep = 0;
    uint64_t reserved = 0; /* of s->buffered, for this request's body */
    /* the head: wait --idle-timeout for its first byte, then --request-timeout in all */
    double start = now_s();
    double deadline = start + (c->len ? s->cfg.request_timeout : s->cfg.idle_timeout);
    int started = c->len > 0;
    char* head_end = NULL;
    size_t scanned = 0; /* bytes searched for the blank line: each read scans only its own */
    for (;;) {
      /* skip the empty lines a client may send between requests (RFC 9112 2.2) */
      size_t skip = 0;
      while (skip + 1 < c->len && c->buf[skip] == '\r' && c->buf[skip + 1] == '\n') skip += 2;
      if (skip) {
        memmove(c->buf, c->buf + skip, c->len - skip);
        c->len -= skip;
        scanned = 0;
      }
      if (c->len >= 4) {
        size_t lim = c->len < MAX_HEADER_BYTES ? c->len : MAX_HEADER_BYTES;
        for (size_t k = scanned > 3 ? scanned - 3 : 0; k + 4 <= lim; k++)
          if (memcmp(c->buf + k, "\r\n\r\n", 4) == 0) {
            head_end = c->buf + k + 4;
            break;
          }
      }
      if (head_end) break;
      scanned = c->len;
      if (c->len >= MAX_HEADER_BYTES) {
        aot_http_error(&r, 431, "request line and headers exceed %d bytes", MAX_HEADER_BYTES);
        goto answer_close;
      }
      int got = read_more(c, MAX_HEADER_BYTES, deadline, !started);
      if (got == 0 && started) {
        aot_http_error(&r, 408, "request headers not received within %.1f s; closing the connection",
                       s->cfg.request_timeout);
        goto answer_close;
      }
      if (got != 1) goto close; /* idle timeout, peer closed, shutdown, error */
      if (!started) {
        started = 1;
        deadline = now_s() + s->cfg.request_timeout;
      }
    }
    q.header_bytes = (size_t)(head_end - c->buf);
    if (aot_http_parse_head(c->buf, q.header_bytes, &q, &r)) goto answer_close;
    if (q.chunked) {
      aot_http_error(&r, 411,
                     "Transfer-Encoding is not supported: send the body with a Content-Length header");
      goto answer_close;
    }
    if (!q.has_content_length && strcmp(q.method, "POST") == 0) {
      aot_http_error(&r, 411, "a POST needs a Content-Length header");
      goto answer_close;
    }
    if (q.content_length > s->cfg.max_body) {
      aot_http_error(&r, 413,
                     "request body of %llu bytes is over this server's limit of %llu (--max-body-bytes)",
                     (unsigned long long)q.content_length, (unsigned long long)s->cfg.max_body);
      goto answer_close;
    }
    if (q.expect_continue && q.content_length > c->len - q.header_bytes) {
      static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
      if (send_all(c, cont, sizeof(cont) - 1, deadline)) goto close;
    }
    pthread_mutex_lock(&s->conn_mu);
    int over = q.content_length > s->cfg.max_buffered - s->buffered;
    if (!over) s->buffered += q.content_length;
    pthread_mutex_unlock(&s->conn_mu);
    if (over) {
      aot_http_error(&r, 503,
                     "server busy: request bodies of all connections would pass %llu bytes "
                     "(--max-buffered-bytes); retry later",
                     (unsigned long long)s->cfg.max_buffered);
      goto answer_close;
    }
    reserved = q.content_length;
    size_t total = q.header_bytes + (size_t)q.content_length;
    while (c->len < total) {
      int got = read_more(c, total, deadline, 0);
      if (got == 0) {
        aot_http_error(&r, 408,
                       "request body not received within %.1f s (%zu of %llu bytes); closing the connection",
                       s->cfg.request_timeout, c->len - q.header_bytes,
                       (unsigned long long)q.content_length);
        goto answer_close;
      }
      if (got != 1) goto close;
    }
    route(s, &q, c->buf + q.header_bytes, (size_t)q.content_length, &r);
    release(s, reserved); /* before the answer: a client that has it may send the next at once */
    reserved = 0;
    keep = q.keep_alive && !atomic_load(&s->shutting_down);
    if (send_response(c, &r, keep)) keep = 0;
    aot_sb_free(&r.body);
    memmove(c->buf, c->buf + total, c->len - total);
    c->len -= total;
    if (c->cap > 65536 && c->len < 4096) { /* give back a large body's buffer */
      char* b = realloc(c->buf, 4096);
      if (b) {
        c->buf = b;
        c->cap = 4096;
      }
    }
    if (!keep) goto close;
    continue;
  answer_close:
    send_response(c, &r, 0);
  close:
    release(s, reserved);
    aot_sb_free(&r.body);
    break;
  }
  /* a lingering close: read what the client still sends (a refused body) for a moment, so
   * that closing with unread bytes does not reset the connection before it reads the answer */
  shutdown(c->fd, SHUT_WR);
  double linger_end = now_s() + 0.5;
  for (size_t drained = 0; drained < (1u << 20);) {
    if (wait_fd(c, POLLIN, linger_end, 0) != 1) break;
    char sink[4096];
    ssize_t k = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) break;
    if (k > 0) drained += (size_t)k;
  }
  close(c->fd);
  free(c->buf);
  free(c);
  pthread_mutex_lock(&s->conn_mu);
  s->active_conns--;
  pthread_cond_broadcast(&s->conn_cv);
  pthread_mutex_unlock(&s->conn_mu);
  return NULL;
}

/* ---------------------------------------------------------------- start-up */

static void usage(FILE* f) {
  fprintf(f,
          "usage: aot_server --model NAME=PATH.aot [--model ...] [--host ADDR] [--port P]\n"
          "                  [--workers N] [--queue N] [--max-body-bytes N] [--max-connections N]\n"
          "                  [--max-buffered-bytes N]\n"
          "                  [--request-timeout S] [--idle-timeout S] [--threads-per-worker N]\n"
          "Serves the models over HTTP/1.1 with the KServe v2 (Open Inference) protocol.\n"
          "  --host              address to listen on (default 0.0.0.0)\n"
          "  --port              TCP port (default 8000; 0 picks a free one, printed at start)\n"
          "  --workers           inference threads, each with a context per model (default: cores)\n"
          "  --queue             requests that may wait for a worker; past that 503 (default 64)\n"
          "  --max-body-bytes    largest request body; past that 413 (default 67108864)\n"
          "  --max-connections   open connections; past that 503 and close (default 256)\n"
          "  --max-buffered-bytes  request body bytes all connections may hold at once; past\n"
          "                      that 503 before the body is read (default 1073741824)\n"
          "  --request-timeout   seconds from a request's first byte to its last (default 30)\n"
          "  --idle-timeout      seconds a keep-alive connection may wait idle (default 60)\n"
          "  --threads-per-worker  threads of each worker's aot context (default 1)\n");
}

static int parse_u64(const char* s, uint64_t lo, uint64_t hi, uint64_t* out) {
  if (!s || !*s || *s == '-') return -1;
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_seconds(const char* s, double* out) {
  if (!s || !*s) return -1;
  char* end;
  double v = strtod(s, &end);
  if (*end || !(v > 0) || v > 1e6) return -1;
  *out = v;
  return 0;
}

static int parse_args(int argc, char** argv, config_t* cfg) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  cfg->host = "0.0.0.0";
  cfg->port = 8000;
  cfg->workers = cores > 0 ? (uint32_t)cores : 1;
  cfg->queue = 64;
  cfg->max_connections = 256;
  cfg->threads_per_worker = 1;
  cfg->max_body = 64ull << 20;
  cfg->max_buffered = 1ull << 30;
  cfg->request_timeout = 30;
  cfg->idle_timeout = 60;
  for (int a = 1; a < argc; a++) {
    const char* opt = argv[a];
    if (strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    const char* val = a + 1 < argc ? argv[a + 1] : NULL;
    if (!val) {
      fprintf(stderr, "aot_server: %s needs a value\n", opt);
      return -1;
    }
    a++;
    uint64_t u;
    if (strcmp(opt, "--model") == 0) {
      const char* eq = strchr(val, '=');
      size_t n = eq ? (size_t)(eq - val) : 0;
      if (!eq || n == 0 || n >= MAX_NAME || !eq[1]) {
        fprintf(stderr, "aot_server: --model takes NAME=PATH (NAME 1 to %d characters), got '%s'\n",
                MAX_NAME - 1, val);
        return -1;
      }
      for (size_t k = 0; k < n; k++) {
        char ch = val[k];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-' || ch == '.')) {
          fprintf(stderr, "aot_server: model name '%.*s' may hold only letters, digits, '_', '-', '.'\n",
                  (int)n, val);
          return -1;
        }
      }
      if (cfg->n_models == MAX_MODELS) {
        fprintf(stderr, "aot_server: at most %d models\n", MAX_MODELS);
        return -1;
      }
      for (uint32_t i = 0; i < cfg->n_models; i++)
        if (strlen(cfg->model_names[i]) == n && memcmp(cfg->model_names[i], val, n) == 0) {
          fprintf(stderr, "aot_server: model name '%.*s' given twice\n", (int)n, val);
          return -1;
        }
      memcpy(cfg->model_names[cfg->n_models], val, n);
      cfg->model_names[cfg->n_models][n] = '\0';
      cfg->model_paths[cfg->n_models++] = eq + 1;
    } else if (strcmp(opt, "--host") == 0) {
      cfg->host = val;
    } else if (strcmp(opt, "--port") == 0) {
      if (parse_u64(val, 0, 65535, &u)) goto bad;
      cfg->port = (int)u;
    } else if (strcmp(opt, "--workers") == 0) {
      if (parse_u64(val, 1, 1024, &u)) goto bad;
      cfg->workers = (uint32_t)u;
    } else if (strcmp(opt, "--queue") == 0) {
      if (parse_u64(val, 1, 1 << 20, &u)) goto bad;
      cfg->queue = (uint32_t)u;
    } else if (strcmp(opt, "--max-connections") == 0) {
      if (parse_u64(val, 1, 1 << 16, &u)) goto bad;
      cfg->max_connections = (uint32_t)u;
    } else if (strcmp(opt, "--threads-per-worker") == 0) {
      if (parse_u64(val, 1, 1024, &u)) goto bad;
      cfg->threads_per_worker = (uint32_t)u;
    } else if (strcmp(opt, "--max-body-bytes") == 0) {
      if (parse_u64(val, 1, (uint64_t)UINT32_MAX - 1, &u)) goto bad;
      cfg->max_body = u;
    } else if (strcmp(opt, "--max-buffered-bytes") == 0) {
      if (parse_u64(val, 1, UINT64_MAX / 2, &u)) goto bad;
      cfg->max_buffered = u;
    } else if (strcmp(opt, "--request-timeout") == 0) {
      if (parse_seconds(val, &cfg->request_timeout)) goto bad;
    } else if (strcmp(opt, "--idle-timeout") == 0) {
      if (parse_seconds(val, &cfg->idle_timeout)) goto bad;
    } else {
      fprintf(stderr, "aot_server: unknown option %s\n", opt);
      usage(stderr);
      return -1;
    }
    continue;
  bad:
    fprintf(stderr, "aot_server: bad value '%s' for %s\n", val, opt);
    return -1;
  }
  if (cfg->n_models == 0) {
    fprintf(stderr, "aot_server: no model: give --model NAME=PATH.aot\n");
    usage(stderr);
    return -1;
  }
  return 0;
}

static int load_models(server_t* s) {
  aot_error_t err;
  for (uint32_t i = 0; i < s->cfg.n_models; i++) {
    aot_served_model_t* m = &s->models[i];
    m->name = s->cfg.model_names[i];
    if (aot_model_open_file(s->cfg.model_paths[i], &m->model, &err) != AOT_OK) {
      fprintf(stderr, "aot_server: model '%s': cannot open %s: %s\n", m->name, s->cfg.model_paths[i],
              err.message);
      return -1;
    }
    s->n_models = i + 1;
    m->n_in = aot_model_input_count(m->model);
    m->n_out = aot_model_output_count(m->model);
    if (m->n_in > AOT_KSERVE_MAX_TENSORS || m->n_out > AOT_KSERVE_MAX_TENSORS) {
      fprintf(stderr, "aot_server: model '%s' has more than %d inputs or outputs\n", m->name,
              AOT_KSERVE_MAX_TENSORS);
      return -1;
    }
    m->in = calloc(m->n_in ? m->n_in : 1, sizeof(*m->in));
    m->out = calloc(m->n_out ? m->n_out : 1, sizeof(*m->out));
    if (!m->in || !m->out) return -1;
    for (uint32_t k = 0; k < m->n_in; k++) {
      if (aot_model_input_info(m->model, k, &m->in[k], &err) != AOT_OK) goto info_failed;
      uint32_t size = aot_dtype_size(m->in[k].dtype);
      m->in_elements += m->in[k].byte_size / (size ? size : 1);
    }
    for (uint32_t k = 0; k < m->n_out; k++)
      if (aot_model_output_info(m->model, k, &m->out[k], &err) != AOT_OK) goto info_failed;
    continue;
  info_failed:
    fprintf(stderr, "aot_server: model '%s': %s\n", m->name, err.message);
    return -1;
  }
  s->contexts = calloc((size_t)s->cfg.workers * s->n_models, sizeof(*s->contexts));
  if (!s->contexts) return -1;
  aot_context_options_t opts;
  memset(&opts, 0, sizeof(opts));
  opts.struct_size = sizeof(opts);
  opts.num_threads = s->cfg.threads_per_worker;
  for (uint32_t w = 0; w < s->cfg.workers; w++)
    for (uint32_t i = 0; i < s->n_models; i++)
      if (aot_context_create(s->models[i].model, &opts, &s->contexts[(size_t)w * s->n_models + i],
                             &err) != AOT_OK) {
        fprintf(stderr, "aot_server: model '%s': context for worker %u: %s\n", s->models[i].name, w,
                err.message);
        return -1;
      }
  return 0;
}

static int open_listener(server_t* s) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  char port[16];
  snprintf(port, sizeof(port), "%d", s->cfg.port);
  int rc = getaddrinfo(s->cfg.host, port, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "aot_server: --host %s: %s\n", s->cfg.host, gai_strerror(rc));
    return -1;
  }
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) {
    fprintf(stderr, "aot_server: socket: %s\n", strerror(errno));
    freeaddrinfo(res);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
    fprintf(stderr, "aot_server: cannot listen on %s:%d: %s\n", s->cfg.host, s->cfg.port,
            strerror(errno));
    freeaddrinfo(res);
    close(fd);
    return -1;
  }
  freeaddrinfo(res);
  struct sockaddr_storage addr;
  socklen_t alen = sizeof(addr);
  int bound = s->cfg.port;
  if (getsockname(fd, (struct sockaddr*)&addr, &alen) == 0)
    bound = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&addr)->sin6_port
                                             : ((struct sockaddr_in*)&addr)->sin_port);
  s->cfg.port = bound;
  s->listen_fd = fd;
  return 0;
}

/* Answer a connection over the limit without a thread: best effort, never blocking. */
static void refuse(int fd, uint32_t limit) {
  char msg[256];
  char body[160];
  int bn = snprintf(body, sizeof(body),
                    "{\"error\":\"server busy: all %u connections are open (--max-connections); retry later\"}",
                    limit);
  int n = snprintf(msg, sizeof(msg),
                   "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                   bn, body);
  if (n > 0) {
    ssize_t k = send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)k;
  }
  close(fd);
}

int main(int argc, char** argv) {
  static server_t srv; /* large (the config's name table): not on the stack */
  server_t* s = &srv;
  if (parse_args(argc, argv, &s->cfg)) return 2;
  s->listen_fd = -1;
  int pipefd[2];
  if (pipe(pipefd) != 0) {
    fprintf(stderr, "aot_server: pipe: %s\n", strerror(errno));
    return 1;
  }
  fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
  s->stop_read_fd = pipefd[0];
  g_stop_write_fd = pipefd[1];
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->not_empty, NULL);
  pthread_mutex_init(&s->conn_mu, NULL);
  pthread_cond_init(&s->conn_cv, NULL);
  atomic_init(&s->shutting_down, 0);

  int rc = 1;
  s->ring = calloc(s->cfg.queue, sizeof(*s->ring));
  s->worker_threads = calloc(s->cfg.workers, sizeof(*s->worker_threads));
  if (!s->ring || !s->worker_threads) {
    fprintf(stderr, "aot_server: out of memory\n");
    goto out;
  }
  if (load_models(s) || open_listener(s)) goto out;
  for (uint32_t w = 0; w < s->cfg.workers; w++) {
    void** a = malloc(2 * sizeof(void*));
    if (!a) goto out;
    a[0] = s;
    a[1] = (void*)(uintptr_t)w;
    if (pthread_create(&s->worker_threads[w], NULL, worker_main, a) != 0) {
      free(a);
      fprintf(stderr, "aot_server: cannot start worker %u\n", w);
      goto out;
    }
    s->n_workers_started = w + 1;
  }
  for (uint32_t i = 0; i < s->n_models; i++)
    fprintf(stderr, "aot_server: model '%s' from %s (%u inputs, %u outputs)\n", s->models[i].name,
            s->cfg.model_paths[i], s->models[i].n_in, s->models[i].n_out);
  fprintf(stderr, "aot_server: listening on http://%s:%d (%u workers, queue %u)\n", s->cfg.host,
          s->cfg.port, s->cfg.workers, s->cfg.queue);
  fflush(stderr);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (;;) {
    struct pollfd p[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_read_fd, POLLIN, 0}};
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || p[1].revents) break;
    if (!p[0].revents) continue;
    int fd = accept(s->listen_fd, NULL, NULL);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) usleep(10000); /* let connections close */
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    pthread_mutex_lock(&s->conn_mu);
    int full = s->active_conns >= s->cfg.max_connections;
    if (!full) s->active_conns++;
    pthread_mutex_unlock(&s->conn_mu);
    if (full) {
      refuse(fd, s->cfg.max_connections);
      continue;
    }
    conn_t* c = calloc(1, sizeof(*c));
    pthread_t th;
    if (c) {
      c->srv = s;
      c->fd = fd;
    }
    if (!c || pthread_create(&th, &attr, conn_main, c) != 0) {
      free(c);
      refuse(fd, s->cfg.max_connections);
      pthread_mutex_lock(&s->conn_mu);
      s->active_conns--;
      pthread_mutex_unlock(&s->conn_mu);
    }
  }
  pthread_attr_destroy(&attr);
  /* shutdown: no new connections; the open ones finish what they have read and close */
  fprintf(stderr, "aot_server: shutting down\n");
  atomic_store(&s->shutting_down, 1);
  close(s->listen_fd);
  s->listen_fd = -1;
  pthread_mutex_lock(&s->conn_mu);
  while (s->active_conns > 0) pthread_cond_wait(&s->conn_cv, &s->conn_mu);
  pthread_mutex_unlock(&s->conn_mu);
  rc = 0;
out:
  pthread_mutex_lock(&s->mu);
  s->workers_stop = 1;
  pthread_cond_broadcast(&s->not_empty);
  pthread_mutex_unlock(&s->mu);
  for (uint32_t w = 0; w < s->n_workers_started; w++) pthread_join(s->worker_threads[w], NULL);
  if (s->contexts)
    for (size_t k = 0; k < (size_t)s->cfg.workers * s->n_models; k++) aot_context_destroy(s->contexts[k]);
  for (uint32_t i = 0; i < s->n_models; i++) {
    aot_model_close(s->models[i].model);
    free(s->models[i].in);
    free(s->models[i].out);
  }
  free(s->contexts);
  free(s->ring);
  free(s->worker_threads);
  if (s->listen_fd >= 0) close(s->listen_fd);
  if (rc == 0) fprintf(stderr, "aot_server: stopped\n");
  return rc;
}
