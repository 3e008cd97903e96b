// The blocked SVD's pieces (blocked_svd.cpp), callable one by one so that the tests can check
// the bidiagonalisation and the back-transformations on their own. The m x n input is the
// M x N problem (M = max(m, n), N = min(m, n)): the input itself, or its transpose when wide
// (m < n), A = Q B P^T with B upper bidiagonal (core/kernels/gebrd_blocked.h).
#pragma once
#include "blocked_impl.h"

namespace ml::blocked {

struct BrdLayout {
  int m = 0, n = 0;  // the call's shape
  int M = 0, N = 0;  // the problem's: M >= N
  bool wide = false;
  int nb = 0;
  int gs_col = 0, gs_row = 0, cb_row = 0, gs_x = 0;  // lanes, columns per brd_row group
  // Workspace offsets (floats from the slice start). vec: the stat slot, then tauq, taup, d, e,
  // the current row and the singular values (ML_BRD_*), each N floats.
  int64_t vec = 0, w = 0, v = 0, u = 0, x = 0, y = 0, p1 = 0, p3 = 0;
  // The resident bidiagonalisation's hand-offs (ml_brd_res_floats for res_g groups a matrix;
  // -1: brd_res off in these options).
  int64_t res = -1;
  int res_g = 0;
  // Back-transformations: T of one panel (nb x nb), two nb-row buffers of up to N columns.
  int64_t t = 0, x1 = 0, x2 = 0;
  // The SVD: U_B (M x N, aliases W), V_B (N x N), the Golub-Kahan tridiagonal (diagonal,
  // off-diagonal), its eigenvalues, eigenvectors (2N x N) and the solver's scratch.
  int64_t uf = 0, vf = 0, td = 0, te = 0, tw = 0, tz = -1, tscr = 0;
  int64_t per = 0;  // floats per matrix
};

// The layout of an m x n call: the bidiagonalisation's regions, those of the back-
// transformations and of U_B, V_B when `vectors`, those around the solver when `solver` (its
// scratch only when it is linked in).
// batch: the call's (brd_res's hand-off region is sized per matrix for the groups a chunk of
// min(batch, brd_res_max_batch) matrices gives each).
BrdLayout brd_layout(int64_t m, int64_t n, bool vectors, bool solver, const Options &o,
                     int64_t batch = 1);
// Scan and load of the call's input into W (M x N, ld M): A, or A^T when wide; fills the stat
// slot at L.vec.
ml_status brd_load(const Chunk &ch, const Options &o, const BrdLayout &L);
// W -> d, e (vector block) and the explicit reflectors V, U with tauq, taup. Launches: 3 per
// column (2 for the last) and 2 products per panel; with brd_res (brd_res_k0) the panels up to
// k0, then 2 launches for the columns from k0.
ml_status brd_bidiagonalize(const Chunk &ch, const Options &o, const BrdLayout &L);
// The first column the resident bidiagonalisation (brd_res) takes for a chunk of `batch`
// matrices (a panel boundary; L.N: none, the panels throughout).
int brd_res_k0(const Options &o, const BrdLayout &L, int64_t batch);
// X := Q X for X at workspace offset x (M x ncols, ld M); needs L built with vectors.
ml_status brd_apply_q(const Chunk &ch, const Options &o, const BrdLayout &L, int64_t x,
                      int ncols);
// X := P X for X at workspace offset x (N x ncols, ld N); needs L built with vectors.
ml_status brd_apply_p(const Chunk &ch, const Options &o, const BrdLayout &L, int64_t x,
                      int ncols);
// The SVD around the tridiagonal eigensolver (layout built with `solver`): brd_svd_front loads
// and bidiagonalises, and writes the Golub-Kahan tridiagonal (diagonal L.td, off-diagonal L.te);
// the solver leaves its N largest eigenvalues at L.tw (ascending) and, when L.tz >= 0, their
// eigenvectors at L.tz (2N x N, ld 2N); brd_svd_back forms the singular values and vectors of
// B, transforms the vectors back and stores the call's outputs and info words.
ml_status brd_svd_front(const Chunk &ch, const Options &o, const BrdLayout &L);
ml_status brd_svd_back(const Call &c, const Chunk &ch, const Options &o, const BrdLayout &L);

}  // namespace ml::blocked
