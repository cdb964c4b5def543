/* dvm's C API (C11): the lazy tensor API behind opaque handles.
 *
 * Every function returns a dvm_status; on anything but DVM_OK,
 * dvm_last_error() gives this thread's message (which op, which shapes, what
 * was expected) and no output was written. No C++ exception crosses this
 * API. Handles are the C++ API's Tensor handles: ops record lazily and
 * values are computed when observed (dvm_read, dvm_sync); every handle a
 * function returns must be released with dvm_release (releasing NULL does
 * nothing). Semantics, dtypes and type promotion are the C++ API's
 * (include/dvm/tensor.h, docs/DTYPES.md); docs/API.md lists both. */
#ifndef DVM_DVM_C_H
#define DVM_DVM_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dvm_tensor_s* dvm_tensor;

typedef enum dvm_status {
  DVM_OK = 0,
  DVM_ERROR = 1,            /* a dvm::Error: bad shapes, axes, types, a failed flush, too little room
                               in an output buffer (dvm_read, dvm_get_isa) */
  DVM_INVALID_ARGUMENT = 2, /* a null handle or pointer, an unknown enum value */
  DVM_OUT_OF_MEMORY = 3     /* an allocation failed: the memory limit, the host allocator, the system
                               (also reading a tensor whose flush failed so) */
} dvm_status;

/* The values of dvm::Dtype. */
typedef enum dvm_dtype {
  DVM_F32 = 0,
  DVM_F16 = 1,
  DVM_BF16 = 2,
  DVM_I32 = 3,
  DVM_BOOL = 4, /* one byte per element, nonzero is true */
  DVM_I64 = 5,
  DVM_U8 = 6
} dvm_dtype;

typedef enum dvm_unary_op {
  DVM_NEG, DVM_ABS, DVM_EXP, DVM_LOG, DVM_SQRT, DVM_RSQRT, DVM_RECIPROCAL, DVM_TANH, DVM_SIGMOID,
  DVM_RELU, DVM_GELU, DVM_GELU_TANH, DVM_ERF, DVM_SIN, DVM_COS, DVM_FLOOR, DVM_CEIL, DVM_ROUND,
  DVM_BITWISE_NOT, DVM_LOGICAL_NOT
} dvm_unary_op;

typedef enum dvm_binary_op {
  DVM_ADD, DVM_SUB, DVM_MUL, DVM_DIV, DVM_MAXIMUM, DVM_MINIMUM, DVM_POW,
  DVM_EQ, DVM_NE, DVM_LT, DVM_LE, DVM_GT, DVM_GE,
  DVM_FLOOR_DIVIDE, DVM_REMAINDER, DVM_BITWISE_AND, DVM_BITWISE_OR, DVM_BITWISE_XOR,
  DVM_LOGICAL_AND, DVM_LOGICAL_OR, DVM_LOGICAL_XOR
} dvm_binary_op;

typedef enum dvm_reduce_op { DVM_SUM, DVM_MEAN, DVM_MAX, DVM_MIN } dvm_reduce_op;

typedef enum dvm_tier_mode { DVM_TIER_OFF = 0, DVM_TIER_AUTO = 1, DVM_TIER_EAGER = 2 } dvm_tier_mode;

enum { DVM_MAX_RANK = 8 };
/* The axis of dvm_squeeze (every axis of extent 1) and dvm_argmax /
 * dvm_argmin (every element). */
enum { DVM_ALL_AXES = -1000 };

/* Ops, dtypes and modes are passed as int (a dvm_unary_op, dvm_dtype, ...):
 * a value outside its enum is DVM_INVALID_ARGUMENT, never undefined
 * behaviour. */

/* This thread's message for its last failed call ("" if none failed yet).
 * The pointer stays valid until this thread's next failing call; copy the
 * message to keep it longer. */
const char* dvm_last_error(void);
/* "MAJOR.MINOR.PATCH" of the linked library. */
const char* dvm_version(void);

/* ---- creation ----------------------------------------------------------- */
/* Wraps user memory of shape[0..rank) elements of dtype without copying; it
 * must stay alive and unchanged while a tensor reads it. */
dvm_status dvm_from_blob(const void* data, const int64_t* shape, int rank, int dtype, dvm_tensor* out);
/* Copies the values. */
dvm_status dvm_from_copy(const void* data, const int64_t* shape, int rank, int dtype, dvm_tensor* out);
dvm_status dvm_full(const int64_t* shape, int rank, double value, int dtype, dvm_tensor* out);
dvm_status dvm_scalar(float value, dvm_tensor* out);
/* An integer scalar operand (C++ Tensor(int)): torch's wrapped integer, a 0-d
 * int64 tensor that changes the type of bool operands only (docs/DTYPES.md);
 * pass it to dvm_binary, dvm_where. */
dvm_status dvm_scalar_int(int64_t value, dvm_tensor* out);
dvm_status dvm_arange(double start, double end, double step, int dtype, dvm_tensor* out);
/* A second handle to the same tensor (release both). */
dvm_status dvm_retain(dvm_tensor t, dvm_tensor* out);
void dvm_release(dvm_tensor t);

/* ---- properties (never compute) ----------------------------------------- */
/* shape needs room for DVM_MAX_RANK extents. */
dvm_status dvm_shape(dvm_tensor t, int64_t* shape, int* rank);
dvm_status dvm_get_dtype(dvm_tensor t, dvm_dtype* dtype);
dvm_status dvm_numel(dvm_tensor t, int64_t* numel);

/* ---- observers (compute what is pending) ---------------------------------- */
/* Copies the values, row-major, in the tensor's own dtype, which must be
 * `dtype`; `bytes` is the room at out (numel * element size needed). */
dvm_status dvm_read(dvm_tensor t, int dtype, void* out, size_t bytes);
/* Copies the values converted to float32, whatever the dtype. */
dvm_status dvm_read_f32(dvm_tensor t, float* out, size_t count);
dvm_status dvm_sync(dvm_tensor t);
/* Computes everything pending on this thread. */
dvm_status dvm_flush(void);

/* ---- ops (numpy broadcasting, torch semantics) ----------------------------- */
dvm_status dvm_unary(int op, dvm_tensor x, dvm_tensor* out);
dvm_status dvm_binary(int op, dvm_tensor a, dvm_tensor b, dvm_tensor* out);
/* a op s (scalar_first = 0) or s op a (scalar_first = 1). */
dvm_status dvm_binary_scalar(int op, dvm_tensor a, float s, int scalar_first, dvm_tensor* out);
/* The same with an integer scalar (as ids + 1 in C++: an int32 a stays int32). */
dvm_status dvm_binary_scalar_int(int op, dvm_tensor a, int64_t s, int scalar_first, dvm_tensor* out);
dvm_status dvm_where(dvm_tensor mask, dvm_tensor a, dvm_tensor b, dvm_tensor* out);
/* Over axes[0..naxes) (negative counts from the end); naxes = 0: all axes.
 * keepdim (here and in dvm_var, dvm_std, dvm_argmax, dvm_argmin) is 0 or 1. */
dvm_status dvm_reduce(int op, dvm_tensor x, const int* axes, int naxes, int keepdim, dvm_tensor* out);
dvm_status dvm_softmax(dvm_tensor x, int axis, dvm_tensor* out);
dvm_status dvm_log_softmax(dvm_tensor x, int axis, dvm_tensor* out);
/* weight and bias may be NULL. */
dvm_status dvm_layer_norm(dvm_tensor x, const int64_t* normalized_shape, int rank, dvm_tensor weight, dvm_tensor bias,
                          float eps, dvm_tensor* out);
/* torch's var and std over axes[0..naxes) (naxes = 0: all axes), dividing
 * by count - correction. */
dvm_status dvm_var(dvm_tensor x, const int* axes, int naxes, int64_t correction, int keepdim, dvm_tensor* out);
dvm_status dvm_std(dvm_tensor x, const int* axes, int naxes, int64_t correction, int keepdim, dvm_tensor* out);
dvm_status dvm_clamp(dvm_tensor x, float lo, float hi, dvm_tensor* out);
dvm_status dvm_clamp_int(dvm_tensor x, int64_t lo, int64_t hi, dvm_tensor* out); /* integer bounds: x's type kept */
dvm_status dvm_silu(dvm_tensor x, dvm_tensor* out);
/* value where the bool mask is true, else x (x's type). */
dvm_status dvm_masked_fill(dvm_tensor x, dvm_tensor mask, float value, dvm_tensor* out);
dvm_status dvm_masked_fill_int(dvm_tensor x, dvm_tensor mask, int64_t value, dvm_tensor* out); /* exact */
dvm_status dvm_tril(dvm_tensor x, int64_t diagonal, dvm_tensor* out);
dvm_status dvm_triu(dvm_tensor x, int64_t diagonal, dvm_tensor* out);
dvm_status dvm_matmul(dvm_tensor a, dvm_tensor b, dvm_tensor* out);
dvm_status dvm_bmm(dvm_tensor a, dvm_tensor b, dvm_tensor* out);
/* bias may be NULL. */
dvm_status dvm_linear(dvm_tensor x, dvm_tensor weight, dvm_tensor bias, dvm_tensor* out);
dvm_status dvm_addmm(dvm_tensor input, dvm_tensor a, dvm_tensor b, float beta, float alpha, dvm_tensor* out);
dvm_status dvm_to(dvm_tensor x, int dtype, dvm_tensor* out);
/* The int64 index of the first maximum (minimum) along axis; axis =
 * DVM_ALL_AXES: into the flattened tensor, 0-d (keepdim: every extent 1). */
dvm_status dvm_argmax(dvm_tensor x, int axis, int keepdim, dvm_tensor* out);
dvm_status dvm_argmin(dvm_tensor x, int axis, int keepdim, dvm_tensor* out);
/* softmax(q k^T * scale + mask) v; attn_mask (bool: true takes part, or
 * float: added) may be NULL; is_causal is 0 or 1; scale <= 0: 1 / sqrt(E). */
dvm_status dvm_scaled_dot_product_attention(dvm_tensor q, dvm_tensor k, dvm_tensor v, dvm_tensor attn_mask,
                                            int is_causal, float scale, dvm_tensor* out);

/* ---- joining and indexing ------------------------------------------------------ */
/* tensors[0..n), n >= 1, joined along axis (cat) or a new axis (stack). */
dvm_status dvm_cat(const dvm_tensor* tensors, int n, int axis, dvm_tensor* out);
dvm_status dvm_stack(const dvm_tensor* tensors, int n, int axis, dvm_tensor* out);
/* Indices are int64 or int32; one outside its extent is DVM_ERROR. These
 * compute x and the indices first (a flush, if either is pending). */
dvm_status dvm_index_select(dvm_tensor x, int axis, dvm_tensor index, dvm_tensor* out);
/* Rows of weight [num, dim] at ids: ids' shape + [dim]. */
dvm_status dvm_embedding(dvm_tensor ids, dvm_tensor weight, dvm_tensor* out);
dvm_status dvm_gather(dvm_tensor x, int axis, dvm_tensor index, dvm_tensor* out);

/* ---- KV cache (dvm::KVCache) ---------------------------------------------------- */
/* A buffer of capacity_shape that fills along axis: append copies only the
 * new rows and gives every row so far, a view of the buffer. One thread at a
 * time uses a cache; the tensors it gave outlive it. */
typedef struct dvm_kv_cache_s* dvm_kv_cache;
dvm_status dvm_kv_cache_create(const int64_t* capacity_shape, int rank, int axis, int dtype, dvm_kv_cache* out);
/* rows: the cache's shape with any extent along axis, at most the capacity
 * left; *out is every row so far. */
dvm_status dvm_kv_cache_append(dvm_kv_cache c, dvm_tensor rows, dvm_tensor* out);
dvm_status dvm_kv_cache_values(dvm_kv_cache c, dvm_tensor* out);
dvm_status dvm_kv_cache_size(dvm_kv_cache c, int64_t* size);
dvm_status dvm_kv_cache_clear(dvm_kv_cache c);
void dvm_kv_cache_destroy(dvm_kv_cache c); /* NULL does nothing */

/* ---- views ------------------------------------------------------------------- */
dvm_status dvm_reshape(dvm_tensor x, const int64_t* shape, int rank, dvm_tensor* out);
dvm_status dvm_permute(dvm_tensor x, const int* axes, int rank, dvm_tensor* out);
dvm_status dvm_transpose(dvm_tensor x, int a, int b, dvm_tensor* out);
dvm_status dvm_slice(dvm_tensor x, int axis, int64_t start, int64_t end, int64_t step, dvm_tensor* out);
dvm_status dvm_expand(dvm_tensor x, const int64_t* shape, int rank, dvm_tensor* out);
dvm_status dvm_contiguous(dvm_tensor x, dvm_tensor* out);
/* axis = DVM_ALL_AXES: every axis of extent 1. */
dvm_status dvm_squeeze(dvm_tensor x, int axis, dvm_tensor* out);
dvm_status dvm_unsqueeze(dvm_tensor x, int axis, dvm_tensor* out);
dvm_status dvm_flatten(dvm_tensor x, int start_axis, int end_axis, dvm_tensor* out);
dvm_status dvm_narrow(dvm_tensor x, int axis, int64_t start, int64_t length, dvm_tensor* out);
/* Pieces of sizes[0..n) along axis into outs[0..n) (all or none). */
dvm_status dvm_split(dvm_tensor x, const int64_t* sizes, int n, int axis, dvm_tensor* outs);

/* ---- weights files (dvm::save_weights, load_weights; docs/WEIGHTS.md) ------------- */
/* Writes tensors[0..n) (float32, float16 or bfloat16) under names[0..n)
 * (unique, 1 to 4096 bytes) to path; n = 0 writes a file of no tensors. */
dvm_status dvm_save_weights(const char* path, const char* const* names, const dvm_tensor* tensors, int n);
/* A loaded file: its tensors in file order, by index or by name. */
typedef struct dvm_weights_s* dvm_weights;
dvm_status dvm_load_weights(const char* path, dvm_weights* out);
dvm_status dvm_weights_count(dvm_weights w, int64_t* n);
/* *name stays valid while w lives. */
dvm_status dvm_weights_name(dvm_weights w, int64_t i, const char** name);
/* A new handle (release it); it outlives w. */
dvm_status dvm_weights_tensor(dvm_weights w, int64_t i, dvm_tensor* out);
/* The tensor named name; none is DVM_INVALID_ARGUMENT. */
dvm_status dvm_weights_find(dvm_weights w, const char* name, dvm_tensor* out);
void dvm_weights_free(dvm_weights w); /* NULL does nothing */

/* ---- static graphs (dvm::Graph, dvm::Executable; docs/API.md) ------------------ */
/* A graph records the ops called on this thread between dvm_graph_new and
 * dvm_graph_compile (nothing is computed then); dvm_graph_symbol gives the
 * size to pass for a symbol (products of them, in int64, work as sizes). */
typedef struct dvm_graph_s* dvm_graph;
typedef struct dvm_executable_s* dvm_executable;
dvm_status dvm_graph_new(dvm_graph* out);
dvm_status dvm_graph_symbol(dvm_graph g, const char* name, int64_t* dim);
dvm_status dvm_graph_input(dvm_graph g, const char* name, const int64_t* shape, int rank, dvm_dtype dtype,
                           dvm_tensor* out);
dvm_status dvm_graph_output(dvm_graph g, const char* name, dvm_tensor t);
/* The graph is spent afterwards (free it); its tensors have no values. */
dvm_status dvm_graph_compile(dvm_graph g, dvm_executable* out);
void dvm_graph_free(dvm_graph g); /* NULL does nothing; on the thread that made it */
/* One run: every input and output by name (pointers to contiguous
 * elements of their types), every symbol bound (each >= 1). */
dvm_status dvm_executable_run(dvm_executable e, const char* const* input_names, const void* const* inputs,
                              int n_inputs, const char* const* output_names, void* const* outputs, int n_outputs,
                              const char* const* symbols, const int64_t* values, int n_symbols);
/* The extents of input or output `name` for a binding: *rank of them in shape[0..DVM_MAX_RANK). */
dvm_status dvm_executable_shape(dvm_executable e, const char* name, const char* const* symbols,
                                const int64_t* values, int n_symbols, int64_t* shape, int* rank);
/* The arena bytes a run at this binding uses for intermediates (dvm::Executable::memory). */
dvm_status dvm_executable_memory(dvm_executable e, const char* const* symbols, const int64_t* values, int n_symbols,
                                 int64_t* bytes);
/* Writes the executable to a file (dvm::Executable::save, docs/EXECUTABLES.md). */
dvm_status dvm_executable_save(dvm_executable e, const char* path);
/* An executable from a file dvm_executable_save wrote; a missing, truncated,
 * corrupt or other-version file is an error status naming the path. */
dvm_status dvm_executable_load(const char* path, dvm_executable* out);
void dvm_executable_free(dvm_executable e); /* NULL does nothing */

/* ---- settings and statistics ---------------------------------------------------- */
dvm_status dvm_set_num_threads(int n);
/* Runs launches on the host's job system (dvm::set_parallel_for): fn(host,
 * tasks, run, ctx) must call run(ctx, t) for every t in [0, tasks) and
 * return when all have returned; fn = NULL returns to dvm's own threads. */
typedef void (*dvm_task_fn)(void* ctx, int64_t task);
typedef void (*dvm_parallel_for_fn)(void* host, int64_t tasks, dvm_task_fn run, void* ctx);
dvm_status dvm_set_parallel_for(dvm_parallel_for_fn fn, void* host, int workers);
dvm_status dvm_set_isa(const char* name);
/* Writes the ISA's name ("portable", "avx2" or "avx512") with its NUL. */
dvm_status dvm_get_isa(char* out, size_t bytes);
dvm_status dvm_set_tier_mode(int mode);
dvm_status dvm_set_jit_threshold(int64_t calls);
dvm_status dvm_set_trace_limit(int64_t nodes);
dvm_status dvm_set_kernel_cache_capacity(int64_t kernels);
dvm_status dvm_wait_for_jit(void);

typedef struct dvm_stats {
  int64_t flushes, nodes_recorded, nodes_computed, kernels_launched, kernels_run, kernels_compiled, cache_hits,
      jit_compiles, jit_failures, jit_code_bytes, new_shapes;
} dvm_stats;
dvm_status dvm_get_stats(dvm_stats* out);
dvm_status dvm_reset_stats(void);

/* Memory (dvm::memory_stats, set_memory_limit, trim). */
typedef struct dvm_memory_stats {
  int64_t live_bytes, cached_bytes, peak_bytes, limit_bytes;
} dvm_memory_stats;
dvm_status dvm_get_memory_stats(dvm_memory_stats* out);
/* Of live_bytes, the weights' row-major copies (MemoryStats::weight_copy_bytes). */
dvm_status dvm_get_weight_copy_bytes(int64_t* out);
dvm_status dvm_set_memory_limit(int64_t bytes);
dvm_status dvm_trim(void);

/* ---- engine hooks (docs/EMBEDDING.md) ------------------------------------------ */
/* dvm::wait_for_jit(timeout_ms): *done is 1 when every compile finished. */
dvm_status dvm_wait_for_jit_timeout(double timeout_ms, int* done);
/* Compiles on the host's threads (dvm::set_compile_executor): fn(host, run,
 * job) must see that run(job) is called exactly once; fn = NULL returns to
 * dvm's compile thread. */
typedef void (*dvm_compile_job_fn)(void* job);
typedef void (*dvm_compile_executor_fn)(void* host, dvm_compile_job_fn run, void* job);
dvm_status dvm_set_compile_executor(dvm_compile_executor_fn fn, void* host);
/* Tensor buffers from the host (dvm::set_allocator): allocate returns bytes
 * aligned to `alignment` (64) or NULL; deallocate gets each block back with
 * its size. Both NULL: the system's allocator. */
typedef void* (*dvm_allocate_fn)(void* host, size_t bytes, size_t alignment);
typedef void (*dvm_deallocate_fn)(void* host, void* p, size_t bytes);
dvm_status dvm_set_allocator(dvm_allocate_fn allocate, dvm_deallocate_fn deallocate, void* host);
/* Messages (dvm::set_log_callback); level is a dvm_log_level. fn = NULL:
 * stderr. */
typedef enum dvm_log_level { DVM_LOG_DEBUG = 0, DVM_LOG_INFO = 1, DVM_LOG_WARNING = 2 } dvm_log_level;
typedef void (*dvm_log_fn)(void* ctx, int level, const char* message);
dvm_status dvm_set_log_callback(dvm_log_fn fn, void* ctx);
/* Named JIT code in /tmp/perf-<pid>.map (dvm::set_perf_map); on is 0 or 1. */
dvm_status dvm_set_perf_map(int on);
/* Row-major copies of weights read by columns (dvm::set_weight_copies); on is 0 or 1. */
dvm_status dvm_set_weight_copies(int on);
/* dvm::warm_up: runs frame(ctx) once with every kernel it launches compiled
 * to machine code first. frame returns 0, or nonzero to report a failure of
 * its own (then DVM_ERROR). A failing dvm_ call inside frame fails the warm-up
 * only if frame says so. out may be NULL. */
typedef struct dvm_warm_up_report {
  int64_t kernels, compiled, declined;
  double ms;
} dvm_warm_up_report;
typedef int (*dvm_frame_fn)(void* ctx);
dvm_status dvm_warm_up(dvm_frame_fn frame, void* ctx, dvm_warm_up_report* out);
/* dvm::precompile: computes what is pending with machine code compiled first. */
dvm_status dvm_precompile(void);

/* ---- profiling (dvm::profile_begin / profile_end, dump_fusion) ------------------ */
dvm_status dvm_profile_begin(void);
/* Writes the Chrome trace-event JSON file. */
dvm_status dvm_profile_end(const char* path);
dvm_status dvm_set_fusion_record(int on);
/* Writes the last recorded flush's fusion groups as Graphviz DOT. */
dvm_status dvm_dump_fusion(const char* path);

#ifdef __cplusplus
}
#endif

#endif /* DVM_DVM_C_H */
