// Blocked symmetric eigendecomposition (blocked_eigh.cpp): the Householder tridiagonalisation
// (core/kernels/sytrd_blocked.h) and the back-transformation of the tridiagonal's
// eigenvectors, each callable on its own for a chunk of matrices (the kernel tests check them
// separately from the tridiagonal eigensolver).
#pragma once
#include <cstdint>

#include "blocked.h"

namespace ml::blocked {

// Regions of one matrix's workspace slice, in floats from the slice start.
struct EighLayout {
  int n = 0, nb = 0;
  // The back-transformation's blocks of reflectors (T and the products), bt wide; with
  // t_blocks the T of all of them in one launch after the reduction (larft.h, the blocks form).
  int bt = 0;
  bool t_blocks = false;
  bool vectors = false;
  int64_t stat = 0;  // ML_STAT_FLOATS (core/kernels/blocked_common.h)
  int64_t a = 0;     // n x n, column-major: the matrix, then the unit lower reflectors
  int64_t dv = 0;    // d (n), e (n - 1, at n), tau (n, at 2 n), ...: ML_TRD_* of sytrd_blocked.h
  int64_t p = 0;     // the panel's [V | W | V], n x 3 nb
  int64_t t = 0;     // T of each block of bt reflectors (bt x bt each), vectors only
  int64_t z = 0;     // eigenvectors, n x n, vectors only
  int64_t x1 = 0, x2 = 0;  // bt x n products of the back-transformation, vectors only
  int64_t w = 0;           // eigenvalues (n)
  int64_t scratch = 0;     // the tridiagonal eigensolver's scratch
  int64_t sync = 0;        // trd_panel's two words (ticket, items done), zeroed before each panel
  int64_t per = 0;         // floats of the slice
  int64_t d() const { return dv; }
  int64_t e() const { return dv + n; }
  int64_t tau() const { return dv + 2 * int64_t{n}; }
};

// The slice of an n x n problem; solver_floats: the tridiagonal eigensolver's scratch.
EighLayout eigh_layout(int n, bool vectors, int64_t solver_floats, const Options &o);

// On matrices first .. first + batch - 1 of the call bound to r, the slice of matrix first + b
// at b * L.per floats of the workspace:
// sytrd: the load of the call's input (kf: ML_K_LOWER / ML_K_UPPER: the triangle read) into
// L.a scaled by 2^-e (L.stat), then Q^T A Q = tridiag(d, e) with Q = H_0 ... H_{n-2}, the
// reflectors unit lower in L.a (column i: zeros to row i, 1 at row i + 1), tau, and with
// L.vectors the T of compact WY of each block of L.bt reflectors in L.t.
ml_status sytrd(Runner &r, int64_t first, int64_t batch, int32_t kf, const Options &o,
                const EighLayout &L);
// Z = Q Z for Z (n x ncols, column-major, ld ldz) at workspace offset z of each slice, with
// sytrd's reflectors and T (L.vectors); L.x1, L.x2 hold nb x ncols.
ml_status ormtr(Runner &r, int64_t first, int64_t batch, const Options &o, const EighLayout &L,
                int64_t z, int ldz, int ncols);

struct Chunk;  // blocked_impl.h

// Two-stage eigvalsh (blocked_eigh2.cpp): regions of one matrix's slice.
struct BandLayout {
  int n = 0, bw = 0;  // order, the band's half-width
  int64_t stat = 0, a = 0;  // as EighLayout; a: the matrix, then the band (both triangles)
  int64_t d = 0, e = 0;     // the tridiagonal (n, n - 1)
  int64_t v = 0, x1 = 0, x = 0;  // a panel's reflectors and products, n x bw (ld n) each
  int64_t t = 0, tin = 0, y = 0, mm = 0, sx1 = 0, sx2 = 0;  // bw x bw (ld bw) each
  int64_t tau = 0, qstat = 0;  // inner panels' tau; the panels' (ignored) rank bits
  int64_t part = 0, part_floats = 0;  // split-k partials
  int64_t w = 0, scratch = 0, per = 0;  // eigenvalues, the solver's scratch, floats of the slice
  // eigh (vectors): stage 1's reflectors kept, reflector c (of A's rows c + bw ..) in column c
  // of vq (n x n, ld n, unit lower trapezoidal: row i for A's row i + bw), taus at tauq; the T
  // of blocks of q1w of them (q1w x q1w each) at tq and the products' q1w x n buffers xq1, xq2
  // of their application; the chase's reflectors (sb2st.h's store) at v2, the T of their
  // blocks of k2 sweeps (sb2st_back.h) at t2; the eigenvectors Z (n x n) at z.
  bool vectors = false;
  int k2 = 0, panels = 0, q1w = 0;
  int64_t vq = 0, tauq = 0, tq = 0, xq1 = 0, xq2 = 0, v2 = 0, t2 = 0, z = 0;
};

// Whether c runs by two stages under o (eigvalsh from o.eigh_two_stage_min_n, eigh from
// o.eigh_vec_two_stage_min_n).
bool eigh_two_stage(const Call &c, const Options &o);
// The slice of an n x n problem in a call of `batch` matrices (the split-k partials); with
// vectors the regions of eigh's back-transformations too.
BandLayout band_layout(int n, int64_t batch, int64_t solver_floats, const Options &o,
                       bool vectors = false);
// Stage 1: the load of the call's input (kf: the triangle read) into L.a scaled by 2^-e, then
// Q1^T A Q1 = B, B symmetric with half-width L.bw, both triangles of L.a (the entries up to
// 3 L.bw below the diagonal exact: zero outside the band).
ml_status sy2sb(Runner &r, int64_t first, int64_t batch, int32_t kf, const Options &o,
                const BandLayout &L);
// Stage 2: Q2^T B Q2 = tridiag(d, e) into L.d, L.e (L.a overwritten).
ml_status sb2st(Runner &r, int64_t first, int64_t batch, const Options &o, const BandLayout &L);
// With L.vectors (stage 1's panels and the chase's reflectors kept), Z (n x ncols, ld ldz, at
// workspace offset z of each slice): sb2st_back Z := Q2 Z (sb2st_back.h: T of the reflector
// blocks, then a launch per wavefront of blocks), sy2sb_back Z := Q1 Z (the panels' block
// reflectors in blocks of L.q1w, T by larft(), the last block first, by larfb(); ncols <= n).
ml_status sb2st_back(Runner &r, int64_t first, int64_t batch, const Options &o,
                     const BandLayout &L, int64_t z, int ldz, int ncols);
ml_status sy2sb_back(Runner &r, int64_t first, int64_t batch, const Options &o,
                     const BandLayout &L, int64_t z, int ldz, int ncols);
// The Algo entries of the two-stage eigvalsh and eigh.
int64_t eigh2_per_matrix(const Call &c, int32_t kf, const Options &o);
ml_status eigh2_run_chunk(const Call &c, int32_t kf, const Options &o, const Chunk &ch);

}  // namespace ml::blocked
