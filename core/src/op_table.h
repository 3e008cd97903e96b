// The op table: what each operation is, described once. Names (messages, policy files,
// environment variables, plan names), inputs, the flag argument and its checks, the outputs
// with their shapes and dtypes, and the info word all come from here: ops.h and checks.cpp
// derive from it, the C API exports it (ml_op_name, ml_output_shape, ml_output_desc, ml_run)
// and the frontends read it from there. tools/check_op_table.py fails on a restated copy.
// Adding an op: a value in ml_op (metal_linalg.h, the C ABI), one row here, its backends.
#pragma once
#include <cstdint>

#include "metal_linalg/metal_linalg.h"

namespace ml {

// A dimension of one output matrix as a function of the call's m, n, k = min(m, n) and flags.
enum class Dim : int8_t {
  kNone = 0,      // no such dimension (cols of a vector)
  kM,             // m
  kN,             // n
  kK,             // k = min(m, n)
  kMIfComplete,   // m under ML_QR_COMPLETE, else k (qr's Q columns, R rows)
};

// What the flag argument of an op means and which values it takes.
enum class FlagKind : int8_t {
  kNone = 0,      // must be 0
  kQrMode,        // ML_QR_REDUCED, ML_QR_R, ML_QR_COMPLETE
  kUplo,          // ML_LOWER, ML_UPPER
  kFullMatrices,  // 0 or 1
  // The linear-system ops add their kinds here (upper, left, unit diagonal).
};

// The argument name and the values 0..count-1 of each FlagKind, as messages name them.
struct FlagKindDesc {
  const char *arg;
  int32_t count;
  const char *values[3];
};
inline constexpr FlagKindDesc kFlagKinds[] = {
    {"flags", 1, {"0"}},
    {"mode", 3, {"ML_QR_REDUCED", "ML_QR_R", "ML_QR_COMPLETE"}},
    {"uplo", 2, {"ML_LOWER", "ML_UPPER"}},
    {"full_matrices", 2, {"0", "1"}},
};
inline const FlagKindDesc &flag_kind_desc(FlagKind k) { return kFlagKinds[static_cast<int>(k)]; }

struct OutputDesc {
  const char *name;     // argument name in messages and the C function ("q")
  Dim rows, cols;       // cols kNone: a vector of rows
  int32_t dtype;        // ml_dtype
  int32_t slot;         // the Call slot (out0..out2) backends and kernels read it from
  int32_t absent_flag;  // the flag value under which the op has no such output (-1: none)
};

constexpr int kMaxOutputs = 3;

struct OpDesc {
  int32_t id;               // ml_op
  const char *name;         // "qr": messages, policy files, plan names, ml_op_by_name
  const char *env;          // "QR": METAL_LINALG_QR_*
  int32_t inputs;           // input matrices (A; the linear systems add B)
  bool square;              // needs m == n
  FlagKind flag_kind;
  int32_t square_flag;      // a flag value implemented for square matrices only (-1: none)
  int32_t outputs;          // outputs, in the C function's argument order
  OutputDesc out[kMaxOutputs];
  bool info;                // takes a per-matrix info word
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

// The value of d for a call of m x n with flags.
constexpr int64_t dim_value(Dim d, int64_t m, int64_t n, int32_t flags) {
  const int64_t k = m < n ? m : n;
  switch (d) {
    case Dim::kM: return m;
    case Dim::kN: return n;
    case Dim::kK: return k;
    case Dim::kMIfComplete: return flags == ML_QR_COMPLETE ? m : k;
    default: return 0;
  }
}

// 'm', 'n' or 'k' under flags (what frontends build symbolic shapes from), 0 for kNone.
constexpr char dim_symbol(Dim d, int32_t flags) {
  switch (d) {
    case Dim::kM: return 'm';
    case Dim::kN: return 'n';
    case Dim::kK: return 'k';
    case Dim::kMIfComplete: return flags == ML_QR_COMPLETE ? 'm' : 'k';
    default: return 0;
  }
}

// Whether output `index` of op exists under flags.
inline bool has_output(int32_t op, int32_t flags, int index) {
  if (!valid_op(op) || index < 0 || index >= op_desc(op).outputs) return false;
  return op_desc(op).out[index].absent_flag != flags;
}

}  // namespace ml
