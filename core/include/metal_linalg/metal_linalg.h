/* metal-linalg public C API (C99).
 *
 * Batched float32 QR, symmetric eigendecomposition and SVD of row-major matrices, and
 * the linear systems (Cholesky, LU, solve, inverse, triangular solve; CPU through LAPACK).
 * A batch is `batch` matrices stored back to back; every size is 64-bit.
 * The caller allocates every output. All functions are thread-safe.
 *
 * Errors: every function returning ml_status sets a per-thread message readable
 * with ml_last_error() when it returns anything but ML_OK.
 * Per-matrix outcome: the optional `info` array (one int32 per matrix, in the
 * same memory space as the data) receives ML_INFO_* bits and the sweep count.
 * A matrix with NaN/Inf (ML_INFO_NONFINITE) or one whose iteration did not
 * converge (ML_INFO_NOT_CONVERGED: LAPACK info > 0 or a kernel's sweep cap)
 * gets NaN in every output; the other matrices of the batch are unaffected.
 *
 * Sizes: m and n must be >= 1, also when batch = 0 (frontends handle empty
 * matrices themselves); batch may be 0, and then no pointer is read. Every
 * per-matrix array must be addressable by 32-bit LAPACK: each op checks the
 * arrays it really stores (qr: m x n, plus m x m for ML_QR_COMPLETE; eigh:
 * n x n; svd: m x n) and its LAPACK workspace, and rejects larger sizes with
 * ML_INVALID_ARGUMENT, so tall-skinny matrices (10^6 x 3) are accepted.
 *
 * Alignment: a, the outputs and info must be aligned to 4 bytes (float /
 * int32); a misaligned pointer is ML_INVALID_ARGUMENT.
 */
#ifndef METAL_LINALG_H
#define METAL_LINALG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ML_API __declspec(dllexport)
#else
#define ML_API __attribute__((visibility("default")))
#endif

#define ML_API_VERSION 1

typedef enum ml_status {
  ML_OK = 0,
  ML_INVALID_ARGUMENT = 1,
  ML_RUNTIME_ERROR = 2,
  ML_OUT_OF_MEMORY = 3
} ml_status;

/* Operations. The core's op table describes each one (names, flags, outputs): read it
 * with ml_op_count, ml_op_name, ml_op_by_name, ml_output_desc and ml_output_shape. */
typedef enum ml_op {
  ML_OP_QR = 0,
  ML_OP_EIGH = 1,
  ML_OP_EIGVALSH = 2,
  ML_OP_SVD = 3,
  ML_OP_SVDVALS = 4,
  /* The linear systems (LAPACK's info words; GPU kernels where the build has a GPU
   * backend: ml_op_kernels). */
  ML_OP_CHOLESKY = 5,
  ML_OP_SOLVE = 6,
  ML_OP_INV = 7,
  ML_OP_SOLVE_TRIANGULAR = 8,
  ML_OP_LU_FACTOR = 9
} ml_op;
#define ML_OP_COUNT 10

typedef enum ml_qr_mode {
  ML_QR_REDUCED = 0,  /* Q: m x k, R: k x n, k = min(m, n) */
  ML_QR_R = 1,        /* R only: k x n (q must be NULL) */
  ML_QR_COMPLETE = 2  /* Q: m x m, R: m x n */
} ml_qr_mode;

typedef enum ml_uplo { ML_LOWER = 0, ML_UPPER = 1 } ml_uplo;

/* Flags of the linear-system ops: a bit set, 0 being torch.linalg's defaults. Each op
 * accepts only its own bits (cholesky: UPPER; solve: RIGHT; solve_triangular: UPPER,
 * RIGHT, UNIT; inv: none). */
typedef enum ml_ls_flag {
  ML_LS_UPPER = 1, /* cholesky: read A's upper triangle, A = U^T U, the output is U;
                      solve_triangular: A is upper triangular (else lower) */
  ML_LS_RIGHT = 2, /* solve, solve_triangular: X A = B (torch's left=False), else A X = B */
  ML_LS_UNIT = 4   /* solve_triangular: A's diagonal is taken to be ones (not read) */
} ml_ls_flag;

/* Element types of outputs (ml_output_desc). */
typedef enum ml_dtype { ML_DTYPE_FLOAT32 = 0, ML_DTYPE_INT32 = 1 } ml_dtype;

/* Where the buffers of a call live. */
typedef enum ml_memory { ML_MEMORY_HOST = 0, ML_MEMORY_CUDA = 1, ML_MEMORY_METAL = 2 } ml_memory;

/* Per-matrix info word bits. Bits 16..31 hold the sweep/iteration count. */
#define ML_INFO_NOT_CONVERGED 0x1
#define ML_INFO_NONFINITE 0x2
#define ML_INFO_RANK_DEFICIENT 0x4
#define ML_INFO_SWEEPS_SHIFT 16

/* The linear-system ops' info word is LAPACK's instead: 0 (success); k > 0, LAPACK's
 * info (cholesky: the leading minor of order k is not positive definite; solve, inv,
 * lu_factor: U(k,k) of the LU factorization is exactly zero, the first such k;
 * solve_triangular: A(k,k) is exactly zero); or ML_INFO_LS_NONFINITE (A or B has a
 * NaN/Inf entry, in the part the op reads). Each such matrix gets NaN in every entry of
 * its output (lu_factor: only for a NaN/Inf input, whose pivots are then 1..k; a singular
 * matrix keeps its factorization, as LAPACK's); the rest of the batch is unaffected. */
#define ML_INFO_LS_NONFINITE 0x40000000

/* Execution descriptor. Zero-initialise it (or pass NULL) for host memory.
 * For ML_MEMORY_CUDA: every buffer argument is a device pointer on `device`,
 * work is enqueued on `stream` (a cudaStream_t; NULL = legacy default stream)
 * with no host synchronisation, and `workspace` must hold at least the bytes
 * returned by ml_workspace_size() (device memory). For host memory the
 * workspace is optional: NULL means the library allocates its own.
 * For ML_MEMORY_METAL: `stream` points to an ml_metal_stream (below), every
 * buffer argument (a, the outputs, info) is an MTL::Buffer* (id<MTLBuffer>)
 * cast to the argument's pointer type, with the data at the byte offset the
 * ml_metal_stream gives; `device` must be 0 (the buffers' device is used) and
 * `workspace` is unused (ml_workspace_size() returns 0). */
typedef struct ml_exec {
  int32_t memory;        /* ml_memory */
  int32_t device;        /* CUDA device ordinal */
  void *stream;          /* cudaStream_t, or const ml_metal_stream * */
  void *workspace;
  int64_t workspace_bytes;
  int64_t reserved[4];   /* must be zero */
} ml_exec;

/* Callbacks through which the library encodes into a caller's own encoder
 * object (e.g. MLX's metal::CommandEncoder, whose raw compute encoder is not
 * public, through its set_compute_pipeline_state / set_buffer / set_bytes /
 * dispatch_threadgroups). Every pointer is passed through unchanged. */
typedef struct ml_metal_encoder_ops {
  void *user;
  /* pipeline: an MTL::ComputePipelineState* owned by the library. */
  void (*set_pipeline)(void *user, void *pipeline);
  /* buffer: an MTL::Buffer* (NULL for an absent output), offset in bytes. */
  void (*set_buffer)(void *user, void *buffer, int64_t offset, int32_t index);
  void (*set_bytes)(void *user, const void *bytes, int64_t length, int32_t index);
  /* groups x 1 x 1 threadgroups of threads_per_group x 1 x 1 threads. */
  void (*dispatch_threadgroups)(void *user, int64_t groups, int64_t threads_per_group);
  /* A memory barrier over buffers between two dispatches (e.g. MLX's
   * CommandEncoder::barrier): the blocked algorithms' steps read what the
   * previous ones wrote. May be NULL; calls that need it then fail. */
  void (*barrier)(void *user);
} ml_metal_encoder_ops;

/* The caller's Metal command stream for ML_MEMORY_METAL calls (e.g. MLX's
 * eval_gpu). Exactly one of command_buffer, encoder and encoder_ops is set:
 *  - encoder: an MTL::ComputeCommandEncoder* the caller has open; the library
 *    sets its own pipeline state, buffers and parameters on it and
 *    dispatches, and leaves it open (the caller's later dispatches must set
 *    their own state again);
 *  - encoder_ops: the same through the caller's callbacks;
 *  - command_buffer: an MTL::CommandBuffer* not yet committed; the library
 *    opens a compute encoder on it, dispatches and ends that encoder.
 * Nothing is committed or waited for: the work runs when the caller commits.
 * Offsets are in bytes, each a multiple of 4: a_offset for a; out_offset[i]
 * for the i-th output argument of the function (qr: q, r; eigh: w, v;
 * eigvalsh: w; svd: u, s, vt; svdvals: s); info_offset for info; b_offset
 * for b (the ops with a right-hand side; b is then an MTL::Buffer* too).
 * Buffer indices the kernels use: 0 a, 1..3 the outputs as stored (svdvals'
 * s and svd's s at 2; b at 3), 4 info, 5 parameters (set_bytes). Long batches are split
 * into several dispatches (bounded work each, for macOS's GPU watchdog); all
 * go into the given encoder or command buffer. Blocked plans (large matrices,
 * ml_workspace_size > 0) take exec->workspace as an MTL::Buffer* of at least
 * that many bytes (offset 0) and encode one dispatch per step with a memory
 * barrier between them (encoder_ops: its barrier callback). */
typedef struct ml_metal_stream {
  void *command_buffer;                     /* MTL::CommandBuffer*, or NULL */
  void *encoder;                            /* MTL::ComputeCommandEncoder*, or NULL */
  const ml_metal_encoder_ops *encoder_ops;  /* or NULL */
  int64_t a_offset;
  int64_t out_offset[3];
  int64_t info_offset;
  int64_t b_offset;                         /* b (solve, solve_triangular) */
  int64_t reserved[3];                      /* must be zero */
} ml_metal_stream;

/* ---- decompositions ----
 * a is never modified. info may be NULL.
 * qr:      q (see ml_qr_mode), r; R is upper triangular/trapezoidal.
 * eigh:    w[batch][n] ascending, v[batch][n][n] with eigenvectors as columns.
 * svd:     full_matrices = 0: u[m][k], s[k], vt[k][n], k = min(m, n);
 *          full_matrices = 1 (m == n only): same sizes.
 *          s descending. */
ML_API ml_status ml_qr(const ml_exec *exec, const float *a, int64_t batch, int64_t m,
                       int64_t n, int32_t mode, float *q, float *r, int32_t *info);
ML_API ml_status ml_eigh(const ml_exec *exec, const float *a, int64_t batch, int64_t n,
                         int32_t uplo, float *w, float *v, int32_t *info);
ML_API ml_status ml_eigvalsh(const ml_exec *exec, const float *a, int64_t batch, int64_t n,
                             int32_t uplo, float *w, int32_t *info);
ML_API ml_status ml_svd(const ml_exec *exec, const float *a, int64_t batch, int64_t m,
                        int64_t n, int32_t full_matrices, float *u, float *s, float *vt,
                        int32_t *info);
ML_API ml_status ml_svdvals(const ml_exec *exec, const float *a, int64_t batch, int64_t m,
                            int64_t n, float *s, int32_t *info);

/* ---- linear systems (torch.linalg's semantics; info: ML_INFO_LS_NONFINITE above) ----
 * a (n x n; lu_factor: m x n) and b are never modified. info may be NULL.
 * cholesky:         l[n][n] = L with A = L L^T from A's lower triangle (flags 0), or U with
 *                   A = U^T U from its upper triangle (ML_LS_UPPER); the other triangle 0.
 * solve:            x = A^-1 B, B and x n x nrhs (flags 0), or x = B A^-1, B and x
 *                   nrhs x n (ML_LS_RIGHT); LU with partial pivoting (sgetrf, sgetrs).
 * inv:              x[n][n] = A^-1 (sgetrf, sgetri).
 * solve_triangular: as solve with A triangular (ML_LS_UPPER: upper, else lower;
 *                   ML_LS_UNIT: unit diagonal); the other triangle is not read (strsm).
 * lu_factor:        A (m x n) = P L U with partial pivoting (sgetrf): lu[m][n] holds L
 *                   (unit diagonal, not stored) below the diagonal and U on and above it,
 *                   pivots[k] (int32, k = min(m, n)) LAPACK's 1-based row interchanges. */
ML_API ml_status ml_cholesky(const ml_exec *exec, const float *a, int64_t batch, int64_t n,
                             int32_t flags, float *l, int32_t *info);
ML_API ml_status ml_solve(const ml_exec *exec, const float *a, const float *b, int64_t batch,
                          int64_t n, int64_t nrhs, int32_t flags, float *x, int32_t *info);
ML_API ml_status ml_inv(const ml_exec *exec, const float *a, int64_t batch, int64_t n, float *x,
                        int32_t *info);
ML_API ml_status ml_solve_triangular(const ml_exec *exec, const float *a, const float *b,
                                     int64_t batch, int64_t n, int64_t nrhs, int32_t flags,
                                     float *x, int32_t *info);
ML_API ml_status ml_lu_factor(const ml_exec *exec, const float *a, int64_t batch, int64_t m,
                              int64_t n, float *lu, int32_t *pivots, int32_t *info);

/* ---- the generic entry point ----
 * ml_run(exec, op, inputs, sizes, flags, outputs, info) computes any op:
 * inputs = the op's input matrices (ml_op_inputs of them): {a}, or {a, b} for
 * the ops with a right-hand side (solve, solve_triangular);
 * sizes = {batch, m, n} for one input (eigh, eigvalsh, cholesky, inv: m = n),
 * {batch, n, n, nrhs} for two: A is n x n, B and the output n x nrhs (nrhs x n
 * under ML_LS_RIGHT), nrhs >= 1 (ml_output_desc names it 'r'); only the
 * entries the op uses are read;
 * flags as for the op's function;
 * outputs[i] = output i in the op's table order (ml_output_desc; svdvals: s
 * is outputs[0]), NULL for an output the op does not have under flags (q in
 * mode ML_QR_R); an int32 output (ml_output_desc's dtype) is passed cast to
 * float *. Each per-op function above is this call with its arguments in this
 * order. */
ML_API ml_status ml_run(const ml_exec *exec, int32_t op, const float *const *inputs,
                        const int64_t *sizes, int32_t flags, float *const *outputs,
                        int32_t *info);

/* How a call would run, decided once: *memory receives where its buffers must
 * live (exec->memory when the core runs it there; ML_MEMORY_HOST when a
 * device-memory call is better served by host buffers, so the caller copies),
 * *workspace_bytes the device workspace the call needs with exec->memory
 * (0 for host), *name the plan name ml_backend reports (per thread, valid until
 * the next call). sizes and flags as for ml_run; any of the outputs may be NULL. */
ML_API ml_status ml_plan(const ml_exec *exec, int32_t op, const int64_t *sizes, int32_t flags,
                         int32_t *memory, int64_t *workspace_bytes, const char **name);

/* ---- the op table ----
 * ml_op_count: ML_OP_COUNT of the library. ml_op_name: "qr", "eigh", "eigvalsh",
 * "svd", "svdvals", "cholesky", ... (the names of policy files and
 * METAL_LINALG_<OP>_* variables, in upper case there); NULL for an invalid op.
 * ml_op_by_name: the op, or -1.
 * ml_output_desc: output `index` of op under flags: *name ("q"), *ndim (1, 2, or
 * 0 when the op has no such output), dims: 'm', 'n', 'k' (= min(m, n)) or 'r'
 * (nrhs, the right-hand side's column count) for each dimension ('\0' past
 * ndim), *dtype (ml_dtype); any may be NULL except ndim. ml_output_count: how
 * many outputs op has (also those absent under some flags).
 * ml_op_inputs: the input matrices op takes (1: a; 2: a and b), 0 for an
 * invalid op. ml_op_kernels: 1 when op has GPU kernels (the GPU backends, the
 * routing policy's GPU fields and calibration apply to it), 0 when it runs
 * through LAPACK on the CPU only (device buffers: ml_plan answers
 * ML_MEMORY_HOST; ml_run with device buffers fails with a message saying so).
 * ml_op_linear_system: 1 for the linear systems (cholesky, solve, inv,
 * solve_triangular, lu_factor: LAPACK's info words), 0 for the decompositions
 * (ML_INFO_* bits) and an invalid op; the frontends' calibration and
 * benchmark cover the decompositions with kernels.
 * ml_output_dims: the numbers of ml_output_desc for a call's sizes (ml_run's
 * sizes array); like ml_output_shape, which cannot give the shapes that
 * depend on nrhs and refuses the ops with two inputs. */
ML_API int32_t ml_op_count(void);
ML_API const char *ml_op_name(int32_t op);
ML_API int32_t ml_op_by_name(const char *name);
ML_API int32_t ml_output_count(int32_t op);
ML_API ml_status ml_output_desc(int32_t op, int32_t flags, int32_t index, const char **name,
                                int32_t *ndim, char dims[2], int32_t *dtype);
ML_API int32_t ml_op_inputs(int32_t op);
ML_API int32_t ml_op_kernels(int32_t op);
ML_API int32_t ml_op_linear_system(int32_t op);
ML_API ml_status ml_output_dims(int32_t op, const int64_t *sizes, int32_t flags, int32_t index,
                                int32_t *ndim, int64_t dims[2]);

/* Bytes of workspace a call with these arguments needs (0 is possible).
 * flags: qr mode / eigh uplo / svd full_matrices, as for the call. Nonzero
 * for ML_MEMORY_CUDA calls the policy routes to a global launch (a kernel
 * with its scratch in device memory, for shapes beyond shared memory: at
 * most about 1 GiB) or to a blocked plan (the same beyond the window: the
 * steps' device workspace; for solve and solve_triangular it does not depend
 * on nrhs, which this function does not take); it depends on the policy in
 * force, so query it again after changing the policy. */
ML_API ml_status ml_workspace_size(const ml_exec *exec, int32_t op, int64_t batch, int64_t m,
                                   int64_t n, int32_t flags, int64_t *bytes);

/* Per-matrix shape of output `index` (0-based, in the table's order, which is the
 * function's output argument order: qr q, r; eigh w, v; eigvalsh w; svd u, s, vt;
 * svdvals s) of
 * a call of op on m x n matrices with flags (qr mode / eigh uplo / svd
 * full_matrices): *ndim is 1 (a vector of dims[0] floats), 2 (dims[0] rows x
 * dims[1] columns) or 0 (the op has no such output, e.g. q in mode ML_QR_R,
 * or index past the last output; dims are then 0). For eigh and eigvalsh pass
 * m = n. The batch dimension comes first in memory, as for every call. */
ML_API ml_status ml_output_shape(int32_t op, int64_t m, int64_t n, int32_t flags, int32_t index,
                                 int32_t *ndim, int64_t dims[2]);

/* ---- errors and versions ---- */
ML_API const char *ml_last_error(void);      /* per thread; "" when none */
ML_API int32_t ml_api_version(void);         /* ML_API_VERSION of the library */
ML_API const char *ml_version_string(void);  /* e.g. "0.1.0" */

/* ---- warnings ----
 * A setting that is ignored or adjusted where it takes effect (a garbage
 * METAL_LINALG_* value, METAL_LINALG_<OP>_BACKEND=gpu without a usable GPU, a
 * policy file that is not a regular file, is too large or has malformed
 * lines, a thread count above the core count) gives one warning per distinct
 * text and process. They are printed to stderr until a caller first calls
 * ml_take_warnings; from then on they queue (up to 64) for the caller, which
 * hands them to its user (the Python frontends raise Python warnings).
 * ml_take_warnings writes the pending warnings, one per line, into buf
 * (NUL-terminated; whole lines that fit, at least one, truncated if it must
 * be) and removes them; *needed receives the bytes all pending ones need.
 * buf = NULL with buf_len = 0 only claims / measures.
 * ml_pending_warnings: how many are queued (cheap; for polling after calls). */
ML_API ml_status ml_take_warnings(char *buf, size_t buf_len, size_t *needed);
ML_API int32_t ml_pending_warnings(void);

/* ---- devices and backends ----
 * ml_device_name: the device policies are tuned for: the GPU's name when a GPU
 * backend (CUDA, else Metal) is usable, else the CPU model name.
 * ml_backend_available: "cpu", "cuda", "metal".
 * ml_backend: which kernel a call of op with this shape and batch would use,
 * for buffers in `memory` (e.g. "cpu:lapack", "cpu:kernel", "cuda:eigh_tridiag_ql").
 * For ops without m (eigh, eigvalsh) pass m = n. For the ops with a right-hand side
 * (solve, solve_triangular) ml_backend answers for one right-hand side column;
 * ml_backend_rhs answers for an n x n A with nrhs >= 1 columns of B (an op without a
 * right-hand side: "" with ML_INVALID_ARGUMENT). */
ML_API const char *ml_device_name(void);
ML_API int32_t ml_backend_available(const char *backend);
ML_API const char *ml_backend(int32_t op, int32_t memory, int64_t m, int64_t n, int64_t batch);
ML_API const char *ml_backend_rhs(int32_t op, int32_t memory, int64_t n, int64_t nrhs,
                                  int64_t batch);

/* ---- CPU-only mode and GPU size ----
 * ml_set_cpu_only(1): every call is routed to the CPU backend until
 * ml_set_cpu_only(0) (process-wide; overrides the policy, including a forced
 * METAL_LINALG_<OP>_BACKEND=gpu). ml_backend then names a CPU kernel for every
 * memory space: for device buffers that is the host route frontends take by
 * copying. ml_cpu_only: the current setting (0 or 1).
 * ml_gpu_core_count: compute units of the GPU policies are keyed by: the
 * multiprocessor (SM) count of CUDA device 0; 0 when no GPU backend is usable
 * and on Metal (Metal has no public query for the GPU core count). */
ML_API void ml_set_cpu_only(int32_t on);
ML_API int32_t ml_cpu_only(void);
ML_API int32_t ml_gpu_core_count(void);

/* ---- routing policy ----
 * Each op has a policy of named integer fields. Sources, highest first:
 * "user" (ml_policy_set) > "env:<VAR>" > "tuned:<device>" > "default:untuned-device".
 * ml_policy_get writes "field=value;field=value..." into buf (NUL-terminated,
 * truncated to buf_len) and returns the full length needed in *needed. */
ML_API ml_status ml_policy_get(int32_t op, char *buf, size_t buf_len, size_t *needed);
ML_API ml_status ml_policy_set(int32_t op, const char *field, int64_t value);
ML_API ml_status ml_policy_reset(int32_t op);
ML_API const char *ml_policy_source(int32_t op);
/* "tuned" (a measured table exists for this device) or "untuned". */
ML_API const char *ml_calibration_status(int32_t op);
/* The per-machine policy file a calibration writes and the core reads
 * (METAL_LINALG_POLICY_FILE, else $XDG_CACHE_HOME or ~/.cache
 * /metal_linalg/<device>.policy). Lines: "<op> <field> <value>", '#' comments,
 * op one of the ml_op_name names. ml_policy_reload() re-reads it. */
ML_API const char *ml_policy_file(void);
ML_API ml_status ml_policy_reload(void);

/* ---- CPU backend ----
 * Threads used for batches (0 = all cores; also METAL_LINALG_CPU_THREADS). */
ML_API ml_status ml_set_cpu_threads(int32_t n);
ML_API int32_t ml_get_cpu_threads(void);
/* LAPACK provider: a shared library path and the symbol prefix/suffix of its
 * Fortran LAPACK entry points (e.g. "scipy_", "_"). Frontends call this at
 * import; without it the library tries the provider found at build time and
 * then METAL_LINALG_LAPACK. */
ML_API ml_status ml_set_lapack(const char *path, const char *prefix, const char *suffix);
ML_API const char *ml_lapack_info(void);

/* ---- testing ----
 * Caps the iterations (sweeps) of the portable kernels' eigen- and singular
 * value iterations at `cap` (0 restores each kernel's own default), so tests
 * can reach the not-converged outcome cheaply. Process-wide; not for production. */
ML_API ml_status ml_set_iteration_cap(int32_t cap);

#ifdef __cplusplus
}
#endif
#endif /* METAL_LINALG_H */
