// Sequencing of the blocked algorithms (blocked.h): the shared pieces and the chunking of a
// call's batch. Per matrix the workspace is a slice of consecutive regions (blocked_impl.h);
// a chunk of `in_flight` matrices holds that many slices back to back, and batches larger than
// a chunk run chunk after chunk on the same queue, reusing it.
#include "blocked_impl.h"
#include "errors.h"

namespace ml::blocked {

ml_status Chunk::launch(int32_t step, int64_t groups, int gs, int shared,
                        ml_step_params p) const {
  StepLaunch l;
  l.step = step;
  l.group_size = gs;
  l.shared_floats = std::max(shared, ML_RED_FLOATS);
  p.batch = batch;
  p.groups = groups;
  p.group_offset = 0;
  p.first = first;
  for (int i = 0; i < 4; ++i)
    if (p.stride[i] == 0) p.stride[i] = stride;
  l.p = p;
  return r.launch(l);
}

int panel_lanes(int64_t r, const Options &o) {
  // Warps take the panel's columns one each: more warps, more columns at once.
  const int g = r >= 256 ? 512 : 256;
  return std::max(1, std::min(g, o.max_group));
}

int plain_lanes(const Options &o) { return std::max(1, std::min(256, o.max_group)); }

int split_slices(int64_t batch, const Options &o) {
  const int64_t s = o.parallel_groups / std::max<int64_t>(batch, 1);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(s, 16)));
}

static_assert(kGemmTransA == ML_GEMM_TRANS_A && kGemmTransB == ML_GEMM_TRANS_B,
              "product flags drifted");

namespace {

struct GemmTile {
  int lanes, regs;
};

// The tile of a product: 128 x 128 while that still gives every multiprocessor a group (H200:
// 2048^2 in 256 such tiles 37.5 TFLOP/s, in 1024 64 x 64 tiles 25.5); a thin product (a panel's
// nb rows or columns) in 32-wide tiles, no half-empty wide tile.
GemmTile gemm_tile(int m, int n, int64_t batch, const Options &o) {
  const int l = o.gemm_lanes >= 16 ? 16 : o.gemm_lanes >= 8 ? 8 : 4;  // the step's variants
  if (std::min(m, n) <= 32) return {std::min(l, 8), 4};
  if (o.gemm_regs == 8 && l == 16 &&
      2 * ml_gemm_groups(m, n, 16, 8, batch) >= o.parallel_groups)
    return {16, 8};
  return {l, 4};
}

// Whether every matrix's 4-float runs starting at multiples of 4 are 16-byte aligned.
bool runs_aligned(int64_t off, int64_t ld, int64_t stride) {
  return off % 4 == 0 && ld % 4 == 0 && stride % 4 == 0;
}

}  // namespace

ml_status gemm(const Chunk &ch, const Options &o, int flags, int m, int n, int k, float alpha,
               int64_t a, int lda, int64_t b, int ldb, float beta, int64_t c, int ldc,
               int64_t part, int64_t part_floats) {
  if (m <= 0 || n <= 0) return ML_OK;
  GemmCall g;
  g.flags = flags;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.a = a;
  g.b = b;
  g.c = c;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.batch = ch.batch;
  g.stride = ch.stride;
  g.part_floats = part_floats;
  ml_status hooked = ML_OK;
  if (ch.r.gemm(g, &hooked)) return hooked;
  const GemmTile tile = gemm_tile(m, n, ch.batch, o);
  const int64_t groups = ml_gemm_groups(m, n, tile.lanes, tile.regs, ch.batch);
  int split = 1;
  if (part_floats > 0 && groups < o.parallel_groups && k >= 8 * ML_GEMM_BK) {
    const int64_t want = (o.parallel_groups + groups - 1) / groups;
    const int64_t most = std::min<int64_t>(k / (4 * ML_GEMM_BK), part_floats / (int64_t{m} * n));
    split = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({want, most, 64})));
  }
  ml_step_params p = step_params();
  p.m = m;
  p.n = n;
  p.k = k;
  p.flags = flags;
  p.alpha = alpha;
  p.beta = beta;
  ML_GEMM_LANES(p) = tile.lanes;
  ML_GEMM_SPLIT(p) = split;
  ML_GEMM_REGS(p) = tile.regs;
  ML_GEMM_VEC(p) = (runs_aligned(a, lda, ch.stride) ? ML_GEMM_VEC_A : 0) |
                   (runs_aligned(b, ldb, ch.stride) ? ML_GEMM_VEC_B : 0) |
                   (runs_aligned(c, ldc, ch.stride) ? ML_GEMM_VEC_C : 0) |
                   (runs_aligned(part, m, ch.stride) ? ML_GEMM_VEC_PART : 0);
  p.off[ML_GEMM_A] = a;
  p.ld[ML_GEMM_A] = lda;
  p.off[ML_GEMM_B] = b;
  p.ld[ML_GEMM_B] = ldb;
  p.off[ML_GEMM_C] = c;
  p.ld[ML_GEMM_C] = ldc;
  p.off[ML_GEMM_PART] = part;
  if (ml_status st = ch.launch(kStep_gemm, groups * split, tile.lanes * tile.lanes,
                               ml_gemm_shared_floats(tile.lanes, tile.regs), p))
    return st;
  if (split == 1) return ML_OK;
  const int gs = plain_lanes(o);
  const int64_t per = (int64_t{m} * n + gs - 1) / gs;
  return ch.launch(kStep_gemm_sum, ch.batch * per, gs, 0, p);
}

void gemm_scalar_access(ml_step_params &p) { ML_GEMM_VEC(p) = 0; }

ml_status larft_gram(const Chunk &ch, const Options &o, int64_t v, int ldv, int64_t tau, int r,
                     int jb, int nb, int64_t t, int64_t part, int64_t part_floats,
                     ml_step_params &p) {
  const int below = r - jb;
  if (below > 0) {
    if (ml_status st = gemm(ch, o, ML_GEMM_TRANS_A, jb, jb, below, 1.0f, v + jb, ldv, v + jb, ldv,
                            0.0f, t, nb, part, part_floats))
      return st;
  }
  p = step_params();
  p.m = r;
  ML_LARFT_COUNT(p) = jb;
  ML_LARFT_LDT(p) = nb;
  ML_LARFT_HAS_G(p) = below > 0 ? 1 : 0;
  p.off[ML_LARFT_V] = v;
  p.ld[ML_LARFT_V] = ldv;
  p.off[ML_LARFT_TAU] = tau;
  p.off[ML_LARFT_T] = t;
  return ML_OK;
}

ml_status larft(const Chunk &ch, const Options &o, int64_t v, int ldv, int64_t tau, int r, int jb,
                int nb, int64_t t, int lanes, int64_t part, int64_t part_floats) {
  ml_step_params p;
  if (ml_status st = larft_gram(ch, o, v, ldv, tau, r, jb, nb, t, part, part_floats, p))
    return st;
  return ch.launch(kStep_larft_gram, ch.batch, lanes, ml_larft_step_shared_floats(nb), p);
}

ml_status larfb(const Chunk &ch, const Options &o, const BlockReflector &h, bool transpose,
                int64_t c, int ldc, int ncols, const LarfbWork &w) {
  if (ncols <= 0) return ML_OK;
  const bool thin = ncols <= o.larfb_cols ||
                    ch.batch * h.rows * int64_t{ncols} * h.count <= o.larfb_work;
  if (thin && ml_larfb_fits(h.count, 1)) {
    // One group per few columns: as many columns a group as still gives the device a group
    // per multiprocessor's share (parallel_groups), at least one.
    int cp = 64 / ml_larfb_class(h.count);
    if (cp > 8) cp = 8;
    while (cp > 1 && ch.batch * ((ncols + cp - 1) / cp) < o.parallel_groups) cp /= 2;
    ml_step_params p = step_params();
    p.m = h.rows;
    p.n = ncols;
    ML_LARFB_COUNT(p) = h.count;
    ML_LARFB_CP(p) = cp;
    ML_LARFB_TRANS(p) = transpose ? 1 : 0;
    p.off[ML_LARFB_V] = h.v;
    p.ld[ML_LARFB_V] = h.ldv;
    p.off[ML_LARFB_T] = h.t;
    p.ld[ML_LARFB_T] = h.ldt;
    p.off[ML_LARFB_C] = c;
    p.ld[ML_LARFB_C] = ldc;
    const int gs = std::max(32, std::min({256, o.max_group / 32 * 32, (h.rows + 31) / 32 * 32}));
    return ch.launch(kStep_larfb_cols, ch.batch * ((ncols + cp - 1) / cp), gs,
                     ml_larfb_shared_floats(gs), p);
  }
  ml_status st;
  if ((st = gemm(ch, o, ML_GEMM_TRANS_A, h.count, ncols, h.rows, 1.0f, h.v, h.ldv, c, ldc, 0.0f,
                 w.x1, w.ld, w.part, w.part_floats)) ||
      (st = gemm(ch, o, transpose ? ML_GEMM_TRANS_A : 0, h.count, ncols, h.count, 1.0f, h.t,
                 h.ldt, w.x1, w.ld, 0.0f, w.x2, w.ld)) ||
      (st = gemm(ch, o, 0, h.rows, ncols, h.count, -1.0f, h.v, h.ldv, w.x2, w.ld, 1.0f, c, ldc)))
    return st;
  return ML_OK;
}

ml_status product(Runner &r, const Options &o, const GemmCall &g, int64_t part,
                  int64_t part_floats) {
  const Chunk ch{r, 0, g.batch, g.stride};
  return gemm(ch, o, g.flags, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc,
              part, part_floats);
}

ml_status load_input(const Chunk &ch, const Options &o, int m, int n, int tri, int64_t stat,
                     int64_t w) {
  const int gs = plain_lanes(o);
  ml_step_params p = step_params();
  p.m = m;
  p.n = n;
  p.flags = tri;
  p.off[0] = stat;
  p.off[1] = w;  // the partial maxima, before the load overwrites them
  const int64_t blocks = (m + 31) / 32;
  if (ml_status st = ch.launch(kStep_scan, ch.batch * blocks, gs, ML_RED_FLOATS, p)) return st;
  if (ml_status st = ch.launch(kStep_scan_final, ch.batch, gs, ML_RED_FLOATS, p)) return st;
  p.ld[1] = m;
  return ch.launch(kStep_load, ch.batch * tiles32(m, n), gs, 32 * 33, p);
}

ml_status store_output(const Chunk &ch, const Options &o, int out, int m, int n, int flags,
                       int64_t w, int ld, int64_t stat) {
  if (m <= 0 || n <= 0) return ML_OK;
  ml_step_params s = step_params();
  s.m = m;
  s.n = n;
  s.i[0] = out;
  s.flags = flags;
  s.off[0] = w;
  s.ld[0] = ld;
  s.off[3] = stat;
  return ch.launch(kStep_store, ch.batch * tiles32(m, n), plain_lanes(o), 32 * 33, s);
}

ml_status store_info(const Chunk &ch, const Options &o, int64_t stat, bool has_info) {
  if (!has_info) return ML_OK;
  const int gs = plain_lanes(o);
  ml_step_params p = step_params();
  p.off[0] = stat;
  return ch.launch(kStep_info, (ch.batch + gs - 1) / gs, gs, 0, p);
}

namespace {

// The algorithm of c's op, or nullptr.
const Algo *algo_of(int32_t op) {
  if (op == ML_OP_QR) return qr_algo();
  if (op == ML_OP_EIGH || op == ML_OP_EIGVALSH) return eigh_algo();
  if (op == ML_OP_SVD || op == ML_OP_SVDVALS) return svd_algo();
  if (op == ML_OP_CHOLESKY || op == ML_OP_LU_FACTOR || op == ML_OP_SOLVE || op == ML_OP_INV ||
      op == ML_OP_SOLVE_TRIANGULAR)
    return linsys_algo();
  return nullptr;
}

int64_t in_flight(const Call &c, int64_t per, const Options &o) {
  const int64_t fit = o.max_workspace_bytes / (std::max<int64_t>(per, 1) * 4);
  return std::max<int64_t>(1, std::min<int64_t>(c.batch, fit));
}

}  // namespace

const char *step_name(int32_t step) {
#define ML_STEP_NAME(name, fn) #name,
  static const char *const names[] = {ML_STEP_TABLE(ML_STEP_NAME)};
#undef ML_STEP_NAME
  return step >= 0 && step < kStepCount ? names[step] : "?";
}

bool supported(int32_t op) { return algo_of(op) != nullptr; }

int64_t workspace_bytes(const Call &c, int32_t kf, const Options &o) {
  const Algo *a = algo_of(c.op);
  if (!a || c.m <= 0 || c.n <= 0 || c.batch <= 0) return 0;
  const int64_t per = a->per_matrix(c, kf, o);
  return per * in_flight(c, per, o) * 4;
}

ml_status run(const Call &c, int32_t kf, const Options &o, Runner &r) {
  const Algo *a = algo_of(c.op);
  if (!a) return fail(ML_RUNTIME_ERROR, "blocked", "no blocked algorithm for this op");
  if (c.m <= 0 || c.n <= 0 || c.batch <= 0) return ML_OK;
  const int64_t per = a->per_matrix(c, kf, o);
  const int64_t chunk = in_flight(c, per, o);
  for (int64_t first = 0; first < c.batch; first += chunk) {
    const Chunk ch{r, first, std::min(chunk, c.batch - first), per};
    if (ml_status st = a->run_chunk(c, kf, o, ch)) return st;
  }
  return ML_OK;
}

}  // namespace ml::blocked
