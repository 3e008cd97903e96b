// The op table: what each operation is, described once. Names (messages, policy files,
// environment variables, plan names), inputs, the flag argument and its checks, the outputs
// with their shapes and dtypes, and the info word all come from here: ops.h and checks.cpp
// derive from it, the C API exports it (ml_op_name, ml_output_shape, ml_output_desc, ml_run)
// and the frontends read it from there. tools/check_op_table.py fails on a restated copy.
// Adding an op: a value in ml_op (metal_linalg.h, the C ABI), one row here, its backends
// (docs/design.md section 4.4).
#pragma once
#include <cstdint>

#include "metal_linalg/metal_linalg.h"

namespace ml {

// A dimension of one output matrix as a function of the call's m, n, k = min(m, n), the
// right-hand side's column count r (nrhs, the ops with two inputs) and flags.
enum class Dim : int8_t {
  kNone = 0,      // no such dimension (cols of a vector)
  kM,             // m
  kN,             // n
  kK,             // k = min(m, n)
  kMIfComplete,   // m under ML_QR_COMPLETE, else k (qr's Q columns, R rows)
  kRhsRows,       // B's rows: n, or r under ML_LS_RIGHT (X A = B)
  kRhsCols,       // B's columns: r, or n under ML_LS_RIGHT
};

// What the flag argument of an op means and which values it takes.
enum class FlagKind : int8_t {
  kNone = 0,      // must be 0
  kQrMode,        // ML_QR_REDUCED, ML_QR_R, ML_QR_COMPLETE
  kUplo,          // ML_LOWER, ML_UPPER
  kFullMatrices,  // 0 or 1
  // The linear systems' bit sets of ml_ls_flag (any combination of the kind's bits).
  kUpper,         // ML_LS_UPPER (cholesky)
  kRight,         // ML_LS_RIGHT (solve)
  kTriangular,    // ML_LS_UPPER | ML_LS_RIGHT | ML_LS_UNIT (solve_triangular)
};

// The argument name and the values 0..count-1 of each FlagKind, as messages name them; a bit-set
// kind (bits != 0) takes any combination of its bits instead, values naming bit 0, 1, ... of it.
struct FlagKindDesc {
  const char *arg;
  int32_t count;
  const char *values[3];
  int32_t bits;  // 0: the values 0..count-1; else the mask of the ml_ls_flag bits it takes
};
inline constexpr FlagKindDesc kFlagKinds[] = {
    {"flags", 1, {"0"}, 0},
    {"mode", 3, {"ML_QR_REDUCED", "ML_QR_R", "ML_QR_COMPLETE"}, 0},
    {"uplo", 2, {"ML_LOWER", "ML_UPPER"}, 0},
    {"full_matrices", 2, {"0", "1"}, 0},
    {"flags", 1, {"ML_LS_UPPER"}, ML_LS_UPPER},
    {"flags", 1, {"ML_LS_RIGHT"}, ML_LS_RIGHT},
    {"flags", 3, {"ML_LS_UPPER", "ML_LS_RIGHT", "ML_LS_UNIT"},
     ML_LS_UPPER | ML_LS_RIGHT | ML_LS_UNIT},
};

// The name of ml_ls_flag bit `bit` (a power of two) for messages.
constexpr const char *ls_flag_name(int32_t bit) {
  switch (bit) {
    case ML_LS_UPPER: return "ML_LS_UPPER";
    case ML_LS_RIGHT: return "ML_LS_RIGHT";
    case ML_LS_UNIT: return "ML_LS_UNIT";
    default: return "?";
  }
}
inline const FlagKindDesc &flag_kind_desc(FlagKind k) { return kFlagKinds[static_cast<int>(k)]; }

struct OutputDesc {
  const char *name;     // argument name in messages and the C function ("q")
  Dim rows, cols;       // cols kNone: a vector of rows
  int32_t dtype;        // ml_dtype
  int32_t slot;         // the Call slot (out0..out2) backends and kernels read it from
  int32_t absent_flag;  // the flag value under which the op has no such output (-1: none)
};

constexpr int kMaxOutputs = 3;

// What the info word of an op holds.
enum class Info : int8_t {
  kBits = 0,  // ML_INFO_* bits and the sweep count (the decompositions)
  kLapack,    // LAPACK's info k > 0 or ML_INFO_LS_NONFINITE (the linear systems)
};

struct OpDesc {
  int32_t id;               // ml_op
  const char *name;         // "qr": messages, policy files, plan names, ml_op_by_name
  const char *env;          // "QR": METAL_LINALG_QR_*
  int32_t inputs;           // input matrices: 1 (A), or 2 (A and the right-hand side B:
                            // ml_run's sizes then hold nrhs, Call::b and Call::nrhs)
  bool square;              // needs m == n
  FlagKind flag_kind;
  int32_t square_flag;      // a flag value implemented for square matrices only (-1: none)
  int32_t outputs;          // outputs, in the C function's argument order
  OutputDesc out[kMaxOutputs];
  bool info;                // takes a per-matrix info word
  Info info_kind = Info::kBits;
};

// clang-format off
inline constexpr OpDesc kOpTable[] = {
  {ML_OP_QR, "qr", "QR", 1, false, FlagKind::kQrMode, -1, 2,
   {{"q", Dim::kM, Dim::kMIfComplete, ML_DTYPE_FLOAT32, 0, ML_QR_R},
    {"r", Dim::kMIfComplete, Dim::kN, ML_DTYPE_FLOAT32, 1, -1}}, true},
  {ML_OP_EIGH, "eigh", "EIGH", 1, true, FlagKind::kUplo, -1, 2,
   {{"w", Dim::kN, Dim::kNone, ML_DTYPE_FLOAT32, 0, -1},
    {"v", Dim::kN, Dim::kN, ML_DTYPE_FLOAT32, 1, -1}}, true},
  {ML_OP_EIGVALSH, "eigvalsh", "EIGVALSH", 1, true, FlagKind::kUplo, -1, 1,
   {{"w", Dim::kN, Dim::kNone, ML_DTYPE_FLOAT32, 0, -1}}, true},
  {ML_OP_SVD, "svd", "SVD", 1, false, FlagKind::kFullMatrices, 1, 3,
   {{"u", Dim::kM, Dim::kK, ML_DTYPE_FLOAT32, 0, -1},
    {"s", Dim::kK, Dim::kNone, ML_DTYPE_FLOAT32, 1, -1},
    {"vt", Dim::kK, Dim::kN, ML_DTYPE_FLOAT32, 2, -1}}, true},
  // s in Call slot 1: the kernels share svd's output layout.
  {ML_OP_SVDVALS, "svdvals", "SVDVALS", 1, false, FlagKind::kNone, -1, 1,
   {{"s", Dim::kK, Dim::kNone, ML_DTYPE_FLOAT32, 1, -1}}, true},
  // The linear systems (the CPU backend's LAPACK path, cpu/cpu_linsys.cpp).
  {ML_OP_CHOLESKY, "cholesky", "CHOLESKY", 1, true, FlagKind::kUpper, -1, 1,
   {{"l", Dim::kN, Dim::kN, ML_DTYPE_FLOAT32, 0, -1}}, true, Info::kLapack},
  {ML_OP_SOLVE, "solve", "SOLVE", 2, true, FlagKind::kRight, -1, 1,
   {{"x", Dim::kRhsRows, Dim::kRhsCols, ML_DTYPE_FLOAT32, 0, -1}}, true, Info::kLapack},
  {ML_OP_INV, "inv", "INV", 1, true, FlagKind::kNone, -1, 1,
   {{"x", Dim::kN, Dim::kN, ML_DTYPE_FLOAT32, 0, -1}}, true, Info::kLapack},
  {ML_OP_SOLVE_TRIANGULAR, "solve_triangular", "SOLVE_TRIANGULAR", 2, true,
   FlagKind::kTriangular, -1, 1,
   {{"x", Dim::kRhsRows, Dim::kRhsCols, ML_DTYPE_FLOAT32, 0, -1}}, true, Info::kLapack},
  {ML_OP_LU_FACTOR, "lu_factor", "LU_FACTOR", 1, false, FlagKind::kNone, -1, 2,
   {{"lu", Dim::kM, Dim::kN, ML_DTYPE_FLOAT32, 0, -1},
    {"pivots", Dim::kK, Dim::kNone, ML_DTYPE_INT32, 1, -1}}, true, Info::kLapack},
};
// clang-format on

inline constexpr int kOpRows = sizeof(kOpTable) / sizeof(kOpTable[0]);
static_assert(kOpRows == ML_OP_COUNT, "ML_OP_COUNT must equal the rows of kOpTable");

constexpr bool op_ids_in_order() {
  for (int i = 0; i < kOpRows; ++i)
    if (kOpTable[i].id != i) return false;
  return true;
}
static_assert(op_ids_in_order(), "row i of kOpTable must describe ml_op value i");

inline bool valid_op(int32_t op) { return op >= 0 && op < ML_OP_COUNT; }

// The row of a valid op.
inline const OpDesc &op_desc(int32_t op) { return kOpTable[op]; }

// The value of d for a call of m x n (and a right-hand side of r columns) with flags.
constexpr int64_t dim_value(Dim d, int64_t m, int64_t n, int32_t flags, int64_t r = 1) {
  const int64_t k = m < n ? m : n;
  switch (d) {
    case Dim::kM: return m;
    case Dim::kN: return n;
    case Dim::kK: return k;
    case Dim::kMIfComplete: return flags == ML_QR_COMPLETE ? m : k;
    case Dim::kRhsRows: return flags & ML_LS_RIGHT ? r : n;
    case Dim::kRhsCols: return flags & ML_LS_RIGHT ? n : r;
    default: return 0;
  }
}

// 'm', 'n', 'k' or 'r' under flags (what frontends build symbolic shapes from), 0 for kNone.
constexpr char dim_symbol(Dim d, int32_t flags) {
  switch (d) {
    case Dim::kM: return 'm';
    case Dim::kN: return 'n';
    case Dim::kK: return 'k';
    case Dim::kMIfComplete: return flags == ML_QR_COMPLETE ? 'm' : 'k';
    case Dim::kRhsRows: return flags & ML_LS_RIGHT ? 'r' : 'n';
    case Dim::kRhsCols: return flags & ML_LS_RIGHT ? 'n' : 'r';
    default: return 0;
  }
}

// Whether output `index` of op exists under flags.
inline bool has_output(int32_t op, int32_t flags, int index) {
  if (!valid_op(op) || index < 0 || index >= op_desc(op).outputs) return false;
  return op_desc(op).out[index].absent_flag != flags;
}

}  // namespace ml
