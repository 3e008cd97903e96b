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
  const int g = r >= 2048 ? 512 : r >= 512 ? 256 : 128;
  return std::max(1, std::min(g, o.max_group));
}

int plain_lanes(const Options &o) { return std::max(1, std::min(256, o.max_group)); }

ml_status gemm(const Chunk &ch, const Options &o, int flags, int m, int n, int k, float alpha,
               int64_t a, int lda, int64_t b, int ldb, float beta, int64_t c, int ldc) {
  if (m <= 0 || n <= 0) return ML_OK;
  ml_step_params p = step_params();
  p.m = m;
  p.n = n;
  p.k = k;
  p.flags = flags;
  p.alpha = alpha;
  p.beta = beta;
  p.i[0] = o.gemm_lanes;
  p.off[0] = a;
  p.off[1] = b;
  p.off[2] = c;
  p.ld[0] = lda;
  p.ld[1] = ldb;
  p.ld[2] = ldc;
  return ch.launch(kStep_gemm, ml_gemm_groups(m, n, o.gemm_lanes, ch.batch),
                   o.gemm_lanes * o.gemm_lanes, ml_gemm_shared_floats(o.gemm_lanes), p);
}

ml_status load_input(const Chunk &ch, const Options &o, int m, int n, int tri, int64_t stat,
                     int64_t w) {
  const int gs = plain_lanes(o);
  ml_step_params p = step_params();
  p.m = m;
  p.n = n;
  p.flags = tri;
  p.off[0] = stat;
  if (ml_status st = ch.launch(kStep_scan, ch.batch, gs, ML_RED_FLOATS, p)) return st;
  p.off[1] = w;
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
  if (op == ML_OP_SVD || op == ML_OP_SVDVALS) return svd_algo();
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
