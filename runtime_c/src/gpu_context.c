/* gpu_context.c - CUDA contexts: a stream, a device arena, and the launch sequence.
 *
 * Every kernel parameter is one device address (packaging/FORMAT.md, "GPU code"). A context
 * computes them all once (arena and weights offsets never change) and, per run, only those
 * of the model's inputs and outputs. By default the launch sequence, with the checks launch,
 * is one CUDA graph, instantiated at the first run and replayed after; when the inputs or
 * outputs move (aot_run_device with other buffers) only the launches that use them get new
 * parameters (cuGraphExecKernelNodeSetParams). A run ends with a synchronization: the
 * checks' status word is read back, and an asynchronous fault is reported by the run that
 * caused it.
 *
 * The runtime never leaves a CUDA context current on the caller's thread: each call pushes
 * the device's primary context and pops it before returning.
 *
 * A donated input is read from its output's buffer (the launch plan names the output): aot_run
 * uploads it there, aot_run_device copies it there on the stream (cuMemcpyDtoDAsync) unless the
 * caller gave one buffer for both, which the kernels then update in place. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DEVICE_ALIGN 256 /* what cuMemAlloc gives; the kernels need 16 */

struct aot__gpu_context {
  const aot_model_t* model;
  const aot__cuda_api_t* api;
  aot__gpu_device_t* device;
  const aot__gpu_sm_t* code;
  CUstream stream;
  CUdeviceptr arena;   /* at least DEVICE_ALIGN bytes */
  CUdeviceptr status;  /* the checks' int32 status word; also the address of empty buffers */
  CUdeviceptr staging; /* aot_run's device copies: inputs, then outputs */
  uint64_t* staging_offsets;
  uint32_t io_count;   /* inputs + outputs */
  CUdeviceptr* io;     /* each input's, then output's, device address for this run */
  CUdeviceptr* values; /* every launch's parameters, launch after launch */
  void** params;       /* &values[k], what the driver takes */
  uint32_t* first_arg; /* per launch: its first index in values */
  uint8_t* uses_io;    /* per launch: 1 when an argument is an input or output */
  int use_graph;
  CUgraph graph;
  CUgraphExec exec;
  CUgraphNode* nodes;
  CUdeviceptr* graph_io; /* the io the exec's parameters hold */
  CUdeviceptr* values_io; /* the io `values` hold */
  CUdeviceptr* checked_io; /* the io last checked to be device memory of this device */
  int broken;            /* a fault poisoned the device's context: every run fails */
  int32_t status_host;
};

static uint64_t round_up(uint64_t n) { return (n + DEVICE_ALIGN - 1) / DEVICE_ALIGN * DEVICE_ALIGN; }

static const aot__tensor_desc_t* io_desc(const aot_model_t* m, uint32_t i) {
  return i < m->input_count ? &m->inputs[i] : &m->outputs[i - m->input_count];
}

/* Push the device's context; each call pairs it with pop(). */
static aot_status_t push(const aot__gpu_context_t* g, aot_error_t* err) {
  CUresult r = g->api->ctx_push_current(g->device->context);
  if (r != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(g->api, err, r, "cuCtxPushCurrent", "device %d (%s)", g->device->ordinal,
                          g->device->name);
  return AOT_OK;
}

static void pop(const aot__gpu_context_t* g) {
  CUcontext popped;
  g->api->ctx_pop_current(&popped);
}

/* The parameter values of every launch (`all`), or of the launches that take an input or
 * output, with io as the current inputs and outputs. */
static void fill_values(aot__gpu_context_t* g, int all) {
  const aot__gpu_device_t* d = g->device;
  CUdeviceptr weights = d->weights ? d->weights : g->status; /* no weights: never read */
  for (uint32_t i = 0; i < g->code->launch_count; i++) {
    if (!all && !g->uses_io[i]) continue;
    const aot__gpu_launch_t* l = &g->code->launches[i];
    CUdeviceptr* v = &g->values[g->first_arg[i]];
    for (uint32_t a = 0; a < l->arg_count; a++) {
      const aot__gpu_arg_t* arg = &l->args[a];
      switch (arg->kind) {
        case AOT__GPU_ARG_ARENA: v[a] = g->arena + arg->value; break;
        case AOT__GPU_ARG_WEIGHTS: v[a] = weights + arg->value; break;
        case AOT__GPU_ARG_INPUT: v[a] = g->io[arg->value]; break;
        case AOT__GPU_ARG_OUTPUT: v[a] = g->io[g->model->input_count + arg->value]; break;
        case AOT__GPU_ARG_STATUS: v[a] = g->status; break;
      }
    }
  }
}

static void node_params(const aot__gpu_context_t* g, uint32_t i, aot__cuda_kernel_node_params_t* p) {
  const aot__gpu_launch_t* l = &g->code->launches[i];
  memset(p, 0, sizeof *p);
  p->func = g->device->functions[i];
  p->grid_x = l->grid[0];
  p->grid_y = l->grid[1];
  p->grid_z = l->grid[2];
  p->block_x = l->block[0];
  p->block_y = l->block[1];
  p->block_z = l->block[2];
  p->shared_bytes = l->shared_bytes;
  p->kernel_params = &g->params[g->first_arg[i]];
}

static aot_status_t device_fault(aot__gpu_context_t* g, CUresult r, const char* call,
                                 const char* what, aot_error_t* err) {
  /* launch failures and illegal addresses poison the context for the process's lifetime */
  if (r == AOT__CUDA_ERROR_ILLEGAL_ADDRESS || r == AOT__CUDA_ERROR_LAUNCH_FAILED ||
      r == 702 /* LAUNCH_TIMEOUT */ || r == 710 /* ASSERT */ || r == 714 /* HARDWARE_STACK_ERROR */ ||
      r == 715 /* ILLEGAL_INSTRUCTION */ || r == 716 /* MISALIGNED_ADDRESS */ ||
      r == 717 /* INVALID_ADDRESS_SPACE */ || r == 718 /* INVALID_PC */)
    g->broken = 1;
  return aot__cuda_fail(g->api, err, r, call, "device %d (%s): %s", g->device->ordinal,
                        g->device->name, what);
}

static aot_status_t add_nodes(aot__gpu_context_t* g, aot_error_t* err);

/* One graph of every launch in order (each depends on the one before); on failure nothing is
 * kept, so the next run tries again from the start. */
static aot_status_t build_graph(aot__gpu_context_t* g, aot_error_t* err) {
  aot_status_t st = add_nodes(g, err);
  if (st && g->graph) {
    g->api->graph_destroy(g->graph);
    g->graph = NULL;
  }
  return st;
}

static aot_status_t add_nodes(aot__gpu_context_t* g, aot_error_t* err) {
  const aot__cuda_api_t* api = g->api;
  CUresult r = api->graph_create(&g->graph, 0);
  if (r != AOT__CUDA_SUCCESS) {
    g->graph = NULL;
    return device_fault(g, r, "cuGraphCreate", "building the CUDA graph", err);
  }
  for (uint32_t i = 0; i < g->code->launch_count; i++) {
    aot__cuda_kernel_node_params_t p;
    node_params(g, i, &p);
    r = api->graph_add_kernel_node(&g->nodes[i], g->graph, i ? &g->nodes[i - 1] : NULL, i ? 1 : 0, &p);
    if (r != AOT__CUDA_SUCCESS) {
      char what[160];
      snprintf(what, sizeof what, "adding kernel %s to the CUDA graph", g->code->launches[i].name);
      return device_fault(g, r, "cuGraphAddKernelNode", what, err);
    }
  }
  r = api->graph_instantiate(&g->exec, g->graph, 0);
  if (r != AOT__CUDA_SUCCESS) {
    g->exec = NULL;
    return device_fault(g, r, "cuGraphInstantiateWithFlags", "instantiating the CUDA graph", err);
  }
  memcpy(g->graph_io, g->io, g->io_count * sizeof *g->io);
  return AOT_OK;
}

/* Enqueue every launch on `stream`, then the status word's copy back. */
static aot_status_t enqueue(aot__gpu_context_t* g, CUstream stream, aot_error_t* err) {
  const aot__cuda_api_t* api = g->api;
  const aot__gpu_sm_t* code = g->code;
  /* a server that reuses its buffers pays nothing here */
  if (memcmp(g->values_io, g->io, g->io_count * sizeof *g->io) != 0) {
    fill_values(g, 0);
    memcpy(g->values_io, g->io, g->io_count * sizeof *g->io);
  }
  CUresult r;
  if (g->use_graph) {
    if (!g->exec) {
      aot_status_t st = build_graph(g, err);
      if (st) return st;
    } else if (memcmp(g->graph_io, g->io, g->io_count * sizeof *g->io) != 0) {
      for (uint32_t i = 0; i < code->launch_count; i++) {
        if (!g->uses_io[i]) continue;
        aot__cuda_kernel_node_params_t p;
        node_params(g, i, &p);
        if ((r = api->graph_exec_kernel_node_set_params(g->exec, g->nodes[i], &p)) != AOT__CUDA_SUCCESS) {
          char what[160];
          snprintf(what, sizeof what, "giving kernel %s its new buffers in the CUDA graph",
                   code->launches[i].name);
          return device_fault(g, r, "cuGraphExecKernelNodeSetParams", what, err);
        }
      }
      memcpy(g->graph_io, g->io, g->io_count * sizeof *g->io);
    }
    if ((r = api->graph_launch(g->exec, stream)) != AOT__CUDA_SUCCESS) {
      char what[96];
      snprintf(what, sizeof what, "launching the CUDA graph of %u kernels", code->launch_count);
      return device_fault(g, r, "cuGraphLaunch", what, err);
    }
  } else {
    for (uint32_t i = 0; i < code->launch_count; i++) {
      const aot__gpu_launch_t* l = &code->launches[i];
      r = api->launch_kernel(g->device->functions[i], l->grid[0], l->grid[1], l->grid[2], l->block[0],
                             l->block[1], l->block[2], l->shared_bytes, stream,
                             &g->params[g->first_arg[i]], NULL);
      if (r != AOT__CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "kernel %s (launch %u of %u)", l->name, i + 1, code->launch_count);
        return device_fault(g, r, "cuLaunchKernel", what, err);
      }
    }
  }
  if (code->has_checks &&
      (r = api->memcpy_dtoh_async(&g->status_host, g->status, sizeof g->status_host, stream)) != AOT__CUDA_SUCCESS)
    return device_fault(g, r, "cuMemcpyDtoHAsync", "reading the run-time checks' status", err);
  return AOT_OK;
}

/* Wait for the run on `stream` and read the checks' answer. */
static aot_status_t finish(aot__gpu_context_t* g, CUstream stream, aot_error_t* err) {
  CUresult r = g->api->stream_synchronize(stream);
  if (r != AOT__CUDA_SUCCESS)
    return device_fault(g, r, "cuStreamSynchronize",
                        "running the model's kernels (a fault is reported when the stream is "
                        "synchronized; CUDA_LAUNCH_BLOCKING=1 with AOT_CONTEXT_NO_CUDA_GRAPH names "
                        "the kernel)", err);
  const aot_model_t* m = g->model;
  if (!g->code->has_checks) return aot__ok(err);
  int32_t failed = g->status_host;
  if (failed == 0) return aot__ok(err);
  if (failed < 0 || (uint32_t)failed > m->check_count)
    return aot__fail(err, AOT_ERR_INTERNAL, "the model's GPU checks kernel wrote %d (it has %u checks)",
                     failed, m->check_count);
  return aot__fail(err, AOT_ERR_CHECK_FAILED, "%s", m->check_messages[failed - 1]);
}

static aot_status_t usable(const aot__gpu_context_t* g, aot_error_t* err) {
  if (g->broken)
    return aot__fail(err, AOT_ERR_DEVICE,
                     "device %d (%s): an earlier fault broke the CUDA context of this process; "
                     "no run can succeed on it (restart the process)",
                     g->device->ordinal, g->device->name);
  return AOT_OK;
}

aot_status_t aot__gpu_run_host(aot__gpu_context_t* g, const void* const* inputs,
                               void* const* outputs, aot_error_t* err) {
  aot_status_t st = usable(g, err);
  if (st || (st = push(g, err))) return st;
  const aot_model_t* m = g->model;
  const aot__cuda_api_t* api = g->api;
  CUresult r;
  for (uint32_t i = 0; i < g->io_count; i++) g->io[i] = g->staging + g->staging_offsets[i];
  for (uint32_t i = 0; i < m->donation_count; i++) /* uploaded straight into its output's buffer */
    g->io[m->donations[i].input] = g->io[m->input_count + m->donations[i].output];
  for (uint32_t i = 0; i < m->input_count && !st; i++) {
    if (!m->inputs[i].byte_size) continue;
    if ((r = api->memcpy_htod_async(g->io[i], inputs[i], m->inputs[i].byte_size, g->stream)))
      st = aot__cuda_fail(api, err, r, "cuMemcpyHtoDAsync", "copying input '%s' to device %d",
                          m->inputs[i].name, g->device->ordinal);
  }
  if (!st) st = enqueue(g, g->stream, err);
  for (uint32_t i = 0; i < m->output_count && !st; i++) {
    if (!m->outputs[i].byte_size) continue;
    if ((r = api->memcpy_dtoh_async(outputs[i], g->io[m->input_count + i], m->outputs[i].byte_size,
                                    g->stream)))
      st = aot__cuda_fail(api, err, r, "cuMemcpyDtoHAsync", "copying output '%s' from device %d",
                          m->outputs[i].name, g->device->ordinal);
  }
  /* wait even after a failure: nothing may still write the caller's buffers on return */
  aot_status_t done = finish(g, g->stream, st ? NULL : err);
  pop(g);
  return st ? st : done;
}

/* Checks device addresses that changed since the last run: aligned, device memory of this
 * context's device, outputs not overlapping inputs (but a donated pair's one buffer). */
static aot_status_t check_addresses(aot__gpu_context_t* g, aot_error_t* err) {
  if (memcmp(g->checked_io, g->io, g->io_count * sizeof *g->io) == 0) return AOT_OK;
  const aot_model_t* m = g->model;
  for (uint32_t i = 0; i < g->io_count; i++) {
    const aot__tensor_desc_t* d = io_desc(m, i);
    const char* what = i < m->input_count ? "input" : "output";
    uint32_t index = i < m->input_count ? i : i - m->input_count;
    if (!d->byte_size) continue;
    if (g->io[i] % 16)
      return aot__fail(err, AOT_ERR_INVALID_ARGUMENT,
                       "%s '%s' (index %u): device address 0x%llx is not 16-byte aligned", what,
                       d->name, index, (unsigned long long)g->io[i]);
    int ordinal = -1;
    CUresult r = g->api->pointer_get_attribute(&ordinal, AOT__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, g->io[i]);
    if (r != AOT__CUDA_SUCCESS) {
      aot__cuda_fail(g->api, err, r, "cuPointerGetAttribute",
                     "%s '%s' (index %u): 0x%llx is not device memory", what, d->name, index,
                     (unsigned long long)g->io[i]);
      if (err) err->code = AOT_ERR_INVALID_ARGUMENT;
      return AOT_ERR_INVALID_ARGUMENT;
    }
    if (ordinal != g->device->ordinal)
      return aot__fail(err, AOT_ERR_INVALID_ARGUMENT,
                       "%s '%s' (index %u): 0x%llx is memory of device %d, the context runs on "
                       "device %d", what, d->name, index, (unsigned long long)g->io[i], ordinal,
                       g->device->ordinal);
  }
  aot_status_t st = aot__check_apart(m, g->io, " on the device", err);
  if (st) return st;
  memcpy(g->checked_io, g->io, g->io_count * sizeof *g->io);
  return AOT_OK;
}

/* Each donated input that is not its output's buffer copied there, on `stream`. */
static aot_status_t copy_donated(aot__gpu_context_t* g, CUstream stream, aot_error_t* err) {
  const aot_model_t* m = g->model;
  for (uint32_t i = 0; i < m->donation_count; i++) {
    const aot__donation_t* d = &m->donations[i];
    uint64_t bytes = m->inputs[d->input].byte_size;
    CUdeviceptr from = g->io[d->input], to = g->io[m->input_count + d->output];
    if (!bytes || from == to) continue;
    CUresult r = g->api->memcpy_dtod_async(to, from, (size_t)bytes, stream);
    if (r != AOT__CUDA_SUCCESS) {
      char what[160];
      snprintf(what, sizeof what, "copying donated input '%s' into output '%s'", m->inputs[d->input].name,
               m->outputs[d->output].name);
      return device_fault(g, r, "cuMemcpyDtoDAsync", what, err);
    }
  }
  return AOT_OK;
}

aot_status_t aot__gpu_run_device(aot__gpu_context_t* g, const void* const* inputs,
                                 void* const* outputs, void* stream, aot_error_t* err) {
  aot_status_t st = usable(g, err);
  if (st || (st = push(g, err))) return st;
  const aot_model_t* m = g->model;
  for (uint32_t i = 0; i < g->io_count; i++) {
    const void* p = i < m->input_count ? inputs[i] : outputs[i - m->input_count];
    /* an empty tensor may have no address; its kernels read none of it */
    g->io[i] = io_desc(m, i)->byte_size ? (CUdeviceptr)(uintptr_t)p : g->status;
  }
  CUstream s = stream ? (CUstream)stream : g->stream;
  st = check_addresses(g, err);
  if (!st) st = copy_donated(g, s, err);
  if (!st) st = enqueue(g, s, err);
  aot_status_t done = finish(g, s, st ? NULL : err);
  pop(g);
  return st ? st : done;
}

void aot__gpu_context_destroy(aot__gpu_context_t* g) {
  if (!g) return;
  const aot__cuda_api_t* api = g->api;
  if (api && g->device && push(g, NULL) == AOT_OK) {
    if (g->exec) api->graph_exec_destroy(g->exec);
    if (g->graph) api->graph_destroy(g->graph);
    if (g->stream) {
      api->stream_synchronize(g->stream);
      api->stream_destroy(g->stream);
    }
    if (g->staging) api->mem_free(g->staging);
    if (g->status) api->mem_free(g->status);
    if (g->arena) api->mem_free(g->arena);
    pop(g);
  }
  free(g->staging_offsets);
  free(g->io);
  free(g->values);
  free(g->params);
  free(g->first_arg);
  free(g->uses_io);
  free(g->nodes);
  free(g->graph_io);
  free(g->checked_io);
  free(g->values_io);
  free(g);
}

/* The host-side tables: parameter slots, io, graph nodes. */
static aot_status_t make_tables(aot__gpu_context_t* g, aot_error_t* err) {
  const aot_model_t* m = g->model;
  const aot__gpu_sm_t* code = g->code;
  g->io_count = m->input_count + m->output_count;
  uint64_t args = 0;
  for (uint32_t i = 0; i < code->launch_count; i++) args += code->launches[i].arg_count;
  size_t io = g->io_count ? g->io_count : 1, n = code->launch_count ? code->launch_count : 1;
  g->staging_offsets = calloc(io, sizeof *g->staging_offsets);
  g->io = calloc(io, sizeof *g->io);
  g->graph_io = calloc(io, sizeof *g->graph_io);
  g->checked_io = calloc(io, sizeof *g->checked_io);
  g->values_io = calloc(io, sizeof *g->values_io);
  g->values = calloc(args ? args : 1, sizeof *g->values);
  g->params = calloc(args ? args : 1, sizeof *g->params);
  g->first_arg = calloc(n, sizeof *g->first_arg);
  g->uses_io = calloc(n, sizeof *g->uses_io);
  g->nodes = calloc(n, sizeof *g->nodes);
  if (!g->staging_offsets || !g->io || !g->graph_io || !g->checked_io || !g->values_io || !g->values ||
      !g->params ||
      !g->first_arg || !g->uses_io || !g->nodes)
    return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  uint32_t k = 0;
  for (uint32_t i = 0; i < code->launch_count; i++) {
    g->first_arg[i] = k;
    for (uint32_t a = 0; a < code->launches[i].arg_count; a++, k++) {
      g->params[k] = &g->values[k];
      aot__gpu_arg_kind_t kind = code->launches[i].args[a].kind;
      if (kind == AOT__GPU_ARG_INPUT || kind == AOT__GPU_ARG_OUTPUT) g->uses_io[i] = 1;
    }
  }
  return AOT_OK;
}

/* Device memory of the context: arena, status word, staging for aot_run. */
static aot_status_t allocate(aot__gpu_context_t* g, aot_error_t* err) {
  const aot_model_t* m = g->model;
  const aot__cuda_api_t* api = g->api;
  const aot__gpu_device_t* d = g->device;
  uint64_t staging = 0;
  for (uint32_t i = 0; i < g->io_count; i++) {
    g->staging_offsets[i] = staging;
    /* a donated input is uploaded into its output's staging: it needs none of its own */
    if (i >= m->input_count || aot__donation_of_input(m, i) < 0) staging += round_up(io_desc(m, i)->byte_size);
  }
  uint64_t arena = round_up(m->gpu->arena_bytes ? m->gpu->arena_bytes : 1);
  uint64_t need = arena + DEVICE_ALIGN + staging;
  size_t free_bytes = 0, total = 0;
  CUresult r = api->mem_get_info(&free_bytes, &total);
  if (r != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(api, err, r, "cuMemGetInfo", "device %d (%s)", d->ordinal, d->name);
  if (need > free_bytes)
    return aot__fail(err, AOT_ERR_NO_MEMORY,
                     "device %d (%s): a context needs %llu bytes (arena %llu, inputs and outputs "
                     "%llu), %llu of its %llu are free", d->ordinal, d->name,
                     (unsigned long long)need, (unsigned long long)m->gpu->arena_bytes,
                     (unsigned long long)staging, (unsigned long long)free_bytes,
                     (unsigned long long)total);
  if ((r = api->mem_alloc(&g->arena, (size_t)arena)) != AOT__CUDA_SUCCESS) {
    g->arena = 0;
    return aot__cuda_fail(api, err, r, "cuMemAlloc", "device %d (%s): the arena (%llu bytes)",
                          d->ordinal, d->name, (unsigned long long)arena);
  }
  if ((r = api->mem_alloc(&g->status, DEVICE_ALIGN)) != AOT__CUDA_SUCCESS) {
    g->status = 0;
    return aot__cuda_fail(api, err, r, "cuMemAlloc", "device %d (%s): the status word", d->ordinal,
                          d->name);
  }
  if (staging && (r = api->mem_alloc(&g->staging, (size_t)staging)) != AOT__CUDA_SUCCESS) {
    g->staging = 0;
    return aot__cuda_fail(api, err, r, "cuMemAlloc", "device %d (%s): inputs and outputs (%llu bytes)",
                          d->ordinal, d->name, (unsigned long long)staging);
  }
  if ((r = api->stream_create(&g->stream, AOT__CU_STREAM_NON_BLOCKING)) != AOT__CUDA_SUCCESS) {
    g->stream = NULL;
    return aot__cuda_fail(api, err, r, "cuStreamCreate", "device %d (%s)", d->ordinal, d->name);
  }
  return AOT_OK;
}

aot_status_t aot__gpu_context_create(const aot_model_t* m, int32_t ordinal, uint32_t flags,
                                     aot__gpu_context_t** out, aot_error_t* err) {
  *out = NULL;
  aot__gpu_device_t* d;
  aot_status_t st = aot__gpu_device_get(m, ordinal, &d, err);
  if (st) return st;
  aot__gpu_context_t* g = calloc(1, sizeof *g);
  if (!g) return aot__fail(err, AOT_ERR_NO_MEMORY, "out of memory");
  g->model = m;
  g->api = &m->gpu->api;
  g->device = d;
  g->code = d->code;
  g->use_graph = !(flags & AOT_CONTEXT_NO_CUDA_GRAPH);
  if ((st = make_tables(g, err)) || (st = push(g, err))) {
    aot__gpu_context_destroy(g);
    return st;
  }
  st = allocate(g, err);
  pop(g);
  if (!st) fill_values(g, 1); /* io all 0 as values_io says: the first run fills them */
  if (st) {
    aot__gpu_context_destroy(g);
    return st;
  }
  *out = g;
  return AOT_OK;
}

int32_t aot__gpu_context_ordinal(const aot__gpu_context_t* g) { return g->device->ordinal; }
void* aot__gpu_context_stream(const aot__gpu_context_t* g) { return g->stream; }

aot_status_t aot__gpu_alloc(aot__gpu_context_t* g, uint64_t bytes, uint64_t* out, aot_error_t* err) {
  aot_status_t st = push(g, err);
  if (st) return st;
  CUdeviceptr p = 0;
  CUresult r = g->api->mem_alloc(&p, (size_t)(bytes ? bytes : 1));
  pop(g);
  if (r != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(g->api, err, r, "cuMemAlloc", "device %d (%s): %llu bytes", g->device->ordinal,
                          g->device->name, (unsigned long long)bytes);
  *out = p;
  return aot__ok(err);
}

aot_status_t aot__gpu_free(aot__gpu_context_t* g, uint64_t address, aot_error_t* err) {
  aot_status_t st = push(g, err);
  if (st) return st;
  CUresult r = g->api->mem_free(address);
  pop(g);
  if (r != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(g->api, err, r, "cuMemFree", "device %d (%s): address 0x%llx",
                          g->device->ordinal, g->device->name, (unsigned long long)address);
  return aot__ok(err);
}

aot_status_t aot__gpu_copy(aot__gpu_context_t* g, void* host, uint64_t address, uint64_t bytes,
                           int to_device, aot_error_t* err) {
  if (!bytes) return aot__ok(err);
  aot_status_t st = push(g, err);
  if (st) return st;
  const aot__cuda_api_t* api = g->api;
  CUresult r = to_device ? api->memcpy_htod_async(address, host, (size_t)bytes, g->stream)
                         : api->memcpy_dtoh_async(host, address, (size_t)bytes, g->stream);
  CUresult synced = api->stream_synchronize(g->stream);
  pop(g);
  if (r != AOT__CUDA_SUCCESS || synced != AOT__CUDA_SUCCESS)
    return aot__cuda_fail(api, err, r ? r : synced, r ? (to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync")
                                                      : "cuStreamSynchronize",
                          "device %d (%s): copying %llu bytes %s 0x%llx", g->device->ordinal,
                          g->device->name, (unsigned long long)bytes, to_device ? "to" : "from",
                          (unsigned long long)address);
  return aot__ok(err);
}
