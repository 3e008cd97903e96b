// The Metal backend (core/src/backend.h) in metal-cpp: loads metal_linalg.metallib (built from
// metal/kernels.metal), caches one pipeline per entry, and launches the plans the core routes
// (core/src/routing.h) in every kind the table has: a threadgroup per matrix (block), one
// thread per matrix in a slice of the threadgroup memory (lane), one thread per matrix in
// registers (register), and the blocked algorithms (the step kernels core/src/blocked.cpp
// sequences, one dispatch each with a memory barrier between them, over a workspace buffer). Every entry declares its 32 KB of threadgroup memory statically
// (ML_METAL_SCRATCH_FLOATS); pipelines whose device offers less are refused.
//  - Host buffers (run_host): our own command queue; each buffer wraps the caller's memory
//    without a copy (newBuffer(bytesNoCopy)) when pointer and length are page-aligned, else a
//    staged shared-memory copy; long batches are split into command buffers of bounded work
//    (launch_config.h) so none meets macOS's GPU watchdog; synchronous.
//  - Caller's stream (run_device, ML_MEMORY_METAL): encodes into the caller's compute encoder
//    or command buffer (ml_metal_stream), MTL::Buffer handles plus byte offsets; nothing is
//    committed or waited for.
// Type-checked on Linux against Apple's metal-cpp headers (tools/check_metal_host.sh); built
// and run only on macOS, where it has not been run yet (no Apple machine was available).
#include <dlfcn.h>

#include <Foundation/Foundation.hpp>
#include <Metal/Metal.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#define ML_CPU_SERIAL 1
#include "../core/kernels/compat_cpu.h"
#include "../core/kernels/kernel_table.h"
#include "backend.h"
#include "blocked.h"
#include "errors.h"
#include "kernel_table.h"
#include "launch_config.h"
#include "ops.h"
#include "routing.h"

namespace ml::metal {
namespace {

const char *kWhere = "metal";

// Threads per threadgroup of each GROUP and SIMD line (launch_config.h), null for REGISTER lines.
using GroupSizeFn = int (*)(int m, int n, int64_t batch);
#define ML_METAL_GS_GROUP(name) group_size_##name
#define ML_METAL_GS_REGISTER(name) nullptr
#define ML_METAL_GS_SIMD(name) group_size_##name
#define ML_METAL_GS(name, op, fn, outs, kind, scratch, fits, choose) ML_METAL_GS_##kind(name),
const GroupSizeFn kGroupSize[] = {ML_KERNEL_TABLE(ML_METAL_GS)};
constexpr int kKernelCount = static_cast<int>(sizeof(kGroupSize) / sizeof(kGroupSize[0]));

// Directory of this shared library: metal_linalg.metallib is installed next to it.
std::string library_dir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<const void *>(&library_dir), &info) && info.dli_fname) {
    std::string path = info.dli_fname;
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) return path.substr(0, slash);
  }
  return ".";
}

NS::String *ns(const std::string &s) {
  return NS::String::string(s.c_str(), NS::UTF8StringEncoding);
}

// One buffer argument as the kernels see it: a Metal buffer and the byte offset of the data.
struct Arg {
  MTL::Buffer *buffer = nullptr;
  NS::UInteger offset = 0;
};

// Where encode() records its commands: a compute encoder, or the caller's callbacks.
struct Sink {
  MTL::ComputeCommandEncoder *enc = nullptr;
  const ml_metal_encoder_ops *ops = nullptr;
  void pipeline(MTL::ComputePipelineState *ps) const {
    if (enc)
      enc->setComputePipelineState(ps);
    else
      ops->set_pipeline(ops->user, ps);
  }
  void buffer(const Arg &a, int index) const {
    if (enc)
      enc->setBuffer(a.buffer, a.offset, NS::UInteger(index));
    else
      ops->set_buffer(ops->user, a.buffer, int64_t(a.offset), index);
  }
  void bytes(const void *p, size_t len, int index) const {
    if (enc)
      enc->setBytes(p, NS::UInteger(len), NS::UInteger(index));
    else
      ops->set_bytes(ops->user, p, int64_t(len), index);
  }
  void dispatch(NS::UInteger groups, NS::UInteger threads) const {
    if (enc)
      enc->dispatchThreadgroups(MTL::Size(groups, 1, 1), MTL::Size(threads, 1, 1));
    else
      ops->dispatch_threadgroups(ops->user, int64_t(groups), int64_t(threads));
  }
  // Whether barrier() can be encoded (the caller's callbacks may lack one).
  bool can_barrier() const { return enc != nullptr || (ops && ops->barrier); }
  void barrier() const {
    if (enc)
      enc->memoryBarrier(MTL::BarrierScopeBuffers);
    else
      ops->barrier(ops->user);
  }
};

// Options of the blocked algorithms on Metal: 256-lane products (16 x 16), panels of 32.
const blocked::Options &blocked_options() {
  static const blocked::Options o = [] {
    blocked::Options x;
    x.nb = 32;
    x.gemm_lanes = 16;
    x.max_group = 1024;
    x.shared_floats = kScratchFloats;
    x.nb_outer = 0;  // larft of 64 reflectors needs 8256 floats, above the 8192 of an entry
    return x;
  }();
  return o;
}

class MetalBackend final : public Backend {
 public:
  const char *name() const override { return "metal"; }
  int32_t memory() const override { return ML_MEMORY_METAL; }
  bool available() const override { return state().ok; }
  const char *device_name() const override { return state().ok ? state().name.c_str() : ""; }
  int64_t scratch_budget(int32_t) const override { return state().ok ? kScratchFloats : 0; }
  bool plan(const Call &c, const policy::Resolved &pol, int32_t, Plan *out) const override {
    return state().ok && gpu_plan(c, pol, kScratchFloats, nullptr, out, nullptr, true);
  }
  const char *plan_name(const Call &c, const Plan &p, const policy::Resolved &) const override {
    return gpu_plan_name("metal", p, c.op);
  }
  int64_t workspace_bytes(const Call &c, const Plan &p) const override {
    return p.launch == Launch::kBlocked
               ? blocked::workspace_bytes(c, p.kernel_flags, blocked_options())
               : 0;
  }
  ml_status run_host(const Call &c, const Plan &p, const policy::Resolved &,
                     const char *where) override;
  ml_status run_device(const ml_exec &exec, const Call &c, const Plan &p,
                       const char *where) override;

 private:
  struct State {
    bool ok = false;
    std::string name, error;
    MTL::Device *device = nullptr;
    MTL::Library *library = nullptr;
    MTL::CommandQueue *queue = nullptr;
  };
  // The device, library and queue, set up once (never released: no Metal calls at exit).
  static const State &state() {
    static const State s = [] {
      State st;
      NS::AutoreleasePool *pool = NS::AutoreleasePool::alloc()->init();
      st.device = MTL::CreateSystemDefaultDevice();
      if (!st.device) {
        st.error = "no Metal device";
      } else if (st.device->maxThreadgroupMemoryLength() < NS::UInteger(kScratchFloats) * 4) {
        st.error = "the device offers less than 32 KB of threadgroup memory";
      } else {
        const char *env = std::getenv("METAL_LINALG_METALLIB");
        const std::string path = env && *env ? env : library_dir() + "/metal_linalg.metallib";
        NS::Error *err = nullptr;
        st.library = st.device->newLibrary(ns(path), &err);
        if (!st.library) {
          st.error = "cannot load " + path +
                     (err ? std::string(": ") + err->localizedDescription()->utf8String() : "");
        } else {
          st.queue = st.device->newCommandQueue();
          st.name = st.device->name()->utf8String();
          st.ok = st.queue != nullptr;
        }
      }
      pool->release();
      return st;
    }();
    return s;
  }

  // The pipeline of table line k (lane: its _lane entry), created once.
  MTL::ComputePipelineState *pipeline(int k, bool lane, const char *where, ml_status *st) {
    std::lock_guard<std::mutex> lock(mu_);
    MTL::ComputePipelineState *&p = pipelines_[k][lane ? 1 : 0];
    if (p) return p;
    int count = 0;
    const KernelInfo &info = kernel_table(&count)[k];
    p = new_pipeline(std::string("ml_metal_") + info.name + (lane ? "_lane" : ""), where, st);
    return p;
  }

  // The pipeline of step kernel `step` (ml_metal_step_<name>), created once.
  MTL::ComputePipelineState *step_pipeline(int step, const char *where, ml_status *st) {
    std::lock_guard<std::mutex> lock(mu_);
    MTL::ComputePipelineState *&p = step_pipelines_[step];
    if (p) return p;
    p = new_pipeline(std::string("ml_metal_step_") + blocked::step_name(step), where, st);
    return p;
  }

  // A pipeline of the library's function fn (nullptr and *st set when that fails); the
  // callers hold mu_ and keep it.
  MTL::ComputePipelineState *new_pipeline(const std::string &fn, const char *where,
                                          ml_status *st) {
    MTL::ComputePipelineState *p = nullptr;
    NS::AutoreleasePool *pool = NS::AutoreleasePool::alloc()->init();
    MTL::Function *f = state().library->newFunction(ns(fn));
    NS::Error *err = nullptr;
    if (f) p = state().device->newComputePipelineState(f, &err);
    if (!p)
      *st = fail(ML_RUNTIME_ERROR, where, "Metal pipeline %s: %s", fn.c_str(),
                 !f ? "not in metal_linalg.metallib"
                    : err ? err->localizedDescription()->utf8String() : "unknown error");
    if (f) f->release();
    pool->release();
    return p;
  }

  // Encodes matrices [first, first + count) of c into out: args are a, out0, out1, out2, info.
  ml_status encode(const Sink &out, const Call &c, const Plan &pl, const Arg args[5],
                   int64_t first, int64_t count, const char *where);
  // Encodes a blocked plan: every step of core/src/blocked.cpp's sequence, a memory barrier
  // after each; ws: the workspace (workspace_bytes), args as encode().
  ml_status encode_blocked(const Sink &out, const Call &c, const Plan &pl, const Arg args[5],
                           const Arg &ws, const char *where);

  std::mutex mu_;
  MTL::ComputePipelineState *pipelines_[kKernelCount][2] = {};
  MTL::ComputePipelineState *step_pipelines_[blocked::kStepCount] = {};
};

// The steps of a blocked plan into a Sink. Buffers: 0 workspace, 1 a, 2..4 the outputs, 5 info,
// 6 the parameters; an absent buffer is bound to the workspace (never read through).
class StepEncoder final : public blocked::Runner {
 public:
  using PipelineFn = MTL::ComputePipelineState *(*)(void *self, int step, const char *where,
                                                    ml_status *st);
  StepEncoder(const Sink &out, const Arg args[5], const Arg &ws, void *self, PipelineFn pipeline,
              const char *where)
      : out_(out), args_(args), ws_(ws), self_(self), pipeline_(pipeline), where_(where) {}
  ml_status launch(const blocked::StepLaunch &l) override {
    ml_status st = ML_OK;
    MTL::ComputePipelineState *ps = pipeline_(self_, l.step, where_, &st);
    if (!ps) return st;
    if (l.group_size > static_cast<int>(ps->maxTotalThreadsPerThreadgroup()))
      return fail(ML_RUNTIME_ERROR, where_, "step %s: %d lanes, the pipeline allows %d",
                  blocked::step_name(l.step), l.group_size,
                  static_cast<int>(ps->maxTotalThreadsPerThreadgroup()));
    if (l.shared_floats > kScratchFloats)
      return fail(ML_RUNTIME_ERROR, where_, "step %s: %d shared floats, the entry has %d",
                  blocked::step_name(l.step), l.shared_floats, kScratchFloats);
    out_.pipeline(ps);
    out_.buffer(ws_, 0);
    for (int i = 0; i < 5; ++i) out_.buffer(args_[i].buffer ? args_[i] : ws_, i + 1);
    out_.bytes(&l.p, sizeof l.p, 6);
    out_.dispatch(NS::UInteger(l.p.groups), NS::UInteger(l.group_size));
    out_.barrier();
    return ML_OK;
  }

 private:
  const Sink &out_;
  const Arg *args_;
  const Arg &ws_;
  void *self_;
  PipelineFn pipeline_;
  const char *where_;
};

ml_status MetalBackend::encode_blocked(const Sink &out, const Call &c, const Plan &pl,
                                       const Arg args[5], const Arg &ws, const char *where) {
  if (!out.can_barrier())
    return fail(ML_INVALID_ARGUMENT, where,
                "a blocked plan needs ml_metal_encoder_ops.barrier (memory barriers between its "
                "steps)");
  auto pipeline = [](void *self, int step, const char *w, ml_status *st) {
    return static_cast<MetalBackend *>(self)->step_pipeline(step, w, st);
  };
  StepEncoder r(out, args, ws, this, pipeline, where);
  return blocked::run(c, pl.kernel_flags, blocked_options(), r);
}

ml_status MetalBackend::encode(const Sink &out, const Call &c, const Plan &pl,
                               const Arg args[5], int64_t first, int64_t count,
                               const char *where) {
  int n_table = 0;
  const KernelInfo &kt = kernel_table(&n_table)[pl.kernel];
  // The ops with a right-hand side: nrhs as m (the caller bound B at index 3).
  const int m = static_cast<int>(kernel_rows(c)), n = static_cast<int>(c.n);
  bool lane = pl.launch != Launch::kBlock;
  ml_params p;
  std::memset(&p, 0, sizeof p);
  p.m = m;
  p.n = n;
  p.max_iter = policy::iteration_cap();
  p.batch = c.batch;
  int threads = 0;
  // Kernel flags for the scratch one matrix gets: the threadgroup's, or a lane's slice.
  p.flags = kt.choose_flags(m, n, pl.kernel_flags, kScratchFloats);
  if (pl.launch == Launch::kLane) {
    const int f = kt.choose_flags(m, n, pl.kernel_flags, lane_slice(kSimdWidth));
    if (lane_threads(count, kt.scratch(m, n, f), 1024) > 0)
      p.flags = f;
    else
      lane = false;  // not even one slice holds it: a threadgroup per matrix
  }
  ml_status st = ML_OK;
  MTL::ComputePipelineState *ps = pipeline(pl.kernel, lane, where, &st);
  if (!ps) return st;
  const int max_threads = static_cast<int>(ps->maxTotalThreadsPerThreadgroup());
  if (pl.launch == Launch::kRegister) {
    threads = register_threads(max_threads);
  } else if (lane) {
    threads = lane_threads(count, kt.scratch(m, n, p.flags), max_threads);
    if (threads == 0)
      return fail(ML_RUNTIME_ERROR, where, "%s: the pipeline allows no lane launch", kt.name);
  } else {
    threads = kGroupSize[pl.kernel](m, n, c.batch);
    if (threads > max_threads) threads = std::max(32, max_threads / 32 * 32);
  }
  out.pipeline(ps);
  for (int i = 0; i < 5; ++i) out.buffer(args[i], i);
  // Matrices per threadgroup: one (block) or `threads` (lane, register).
  const int64_t per_group = lane ? threads : 1;
  const int64_t chunk = matrices_per_dispatch(c.m, c.n);
  for (int64_t off = first; off < first + count; off += chunk) {
    const int64_t todo = std::min(chunk, first + count - off);
    p.group_offset = off;
    out.bytes(&p, sizeof p, 5);
    out.dispatch(NS::UInteger((todo + per_group - 1) / per_group), NS::UInteger(threads));
  }
  return ML_OK;
}

ml_status MetalBackend::run_device(const ml_exec &exec, const Call &c, const Plan &pl,
                                   const char *where) {
  const auto *s = static_cast<const ml_metal_stream *>(exec.stream);
  if (!s) return fail(ML_INVALID_ARGUMENT, where, "exec->stream must point to an ml_metal_stream");
  if (exec.device != 0)
    return fail(ML_INVALID_ARGUMENT, where, "exec->device must be 0 for ML_MEMORY_METAL");
  if ((s->command_buffer != nullptr) + (s->encoder != nullptr) + (s->encoder_ops != nullptr) != 1)
    return fail(ML_INVALID_ARGUMENT, where,
                "exactly one of ml_metal_stream.command_buffer, .encoder and .encoder_ops must be "
                "set");
  if (s->encoder_ops && (!s->encoder_ops->set_pipeline || !s->encoder_ops->set_buffer ||
                         !s->encoder_ops->set_bytes || !s->encoder_ops->dispatch_threadgroups))
    return fail(ML_INVALID_ARGUMENT, where, "every callback of ml_metal_encoder_ops must be set");
  for (int i = 0; i < 3; ++i)
    if (s->reserved[i] != 0)
      return fail(ML_INVALID_ARGUMENT, where, "ml_metal_stream.reserved[%d] must be zero", i);
  // out_offset is in the op table's output order; Call holds the outputs in their slots.
  int64_t slot_offset[3] = {0, 0, 0};
  for (int i = 0; i < op_desc(c.op).outputs; ++i)
    slot_offset[op_desc(c.op).out[i].slot] = s->out_offset[i];
  int64_t floats[3];
  output_floats(c.op, c.m, c.n, c.flags, floats, c.nrhs);
  // The ops with a right-hand side take b in the out2 slot (kernel_args).
  const bool rhs = rhs_op(c);
  const void *ptrs[5] = {c.a, c.out0, c.out1, rhs ? c.b : c.out2, c.info};
  const int64_t offsets[5] = {s->a_offset, slot_offset[0], slot_offset[1],
                              rhs ? s->b_offset : slot_offset[2], s->info_offset};
  const int64_t bytes[5] = {c.batch * c.m * c.n * 4, c.batch * floats[0] * 4,
                            c.batch * floats[1] * 4,
                            c.batch * (rhs ? c.n * c.nrhs : floats[2]) * 4, c.batch * 4};
  const char *names[5] = {"a", "output 0", "output 1", rhs ? "b" : "output 2", "info"};
  Arg args[5];
  for (int i = 0; i < 5; ++i) {
    if (!ptrs[i]) continue;
    auto *buf = static_cast<MTL::Buffer *>(const_cast<void *>(ptrs[i]));
    if (offsets[i] < 0 || offsets[i] % 4 != 0)
      return fail(ML_INVALID_ARGUMENT, where, "%s offset %lld must be >= 0 and a multiple of 4",
                  names[i], static_cast<long long>(offsets[i]));
    if (static_cast<uint64_t>(offsets[i] + bytes[i]) > buf->length())
      return fail(ML_INVALID_ARGUMENT, where,
                  "%s: offset %lld + %lld bytes exceeds the MTL::Buffer's %llu bytes", names[i],
                  static_cast<long long>(offsets[i]), static_cast<long long>(bytes[i]),
                  static_cast<unsigned long long>(buf->length()));
    args[i] = {buf, NS::UInteger(offsets[i])};
  }
  Sink out;
  out.ops = s->encoder_ops;
  out.enc = static_cast<MTL::ComputeCommandEncoder *>(s->encoder);
  const bool own = s->command_buffer != nullptr;
  if (own) {
    out.enc = static_cast<MTL::CommandBuffer *>(s->command_buffer)->computeCommandEncoder();
    if (!out.enc) return fail(ML_RUNTIME_ERROR, where, "cannot open a Metal compute encoder");
  }
  ml_status st = ML_OK;
  if (c.m > 0 && c.n > 0) {
    if (pl.launch == Launch::kBlocked) {
      const int64_t need = workspace_bytes(c, pl);
      auto *wb = static_cast<MTL::Buffer *>(exec.workspace);
      if (need > 0 && (!wb || exec.workspace_bytes < need ||
                       static_cast<uint64_t>(need) > wb->length()))
        st = fail(ML_INVALID_ARGUMENT, where,
                  "a blocked plan needs exec->workspace: an MTL::Buffer of %lld bytes",
                  static_cast<long long>(need));
      else
        st = encode_blocked(out, c, pl, args, Arg{wb, 0}, where);
    } else {
      st = encode(out, c, pl, args, 0, c.batch, where);
    }
  }
  if (own) out.enc->endEncoding();
  return st;
}

ml_status MetalBackend::run_host(const Call &c, const Plan &pl, const policy::Resolved &,
                                 const char *where) {
  if (c.m == 0 || c.n == 0) {
    if (c.info) std::memset(c.info, 0, c.batch * sizeof(int32_t));
    return ML_OK;
  }
  const State &sx = state();
  int64_t floats[3];
  output_floats(c.op, c.m, c.n, c.flags, floats);
  void *ptrs[5] = {const_cast<float *>(c.a), c.out0, c.out1, c.out2, c.info};
  const int64_t per[5] = {c.m * c.n, floats[0], floats[1], floats[2], 1};
  NS::AutoreleasePool *pool = NS::AutoreleasePool::alloc()->init();
  // Unified memory: wrap page-aligned caller memory; stage the rest in shared buffers.
  const uintptr_t page = 16384;
  Arg args[5];
  bool staged[5] = {};
  ml_status st = ML_OK;
  for (int i = 0; i < 5 && st == ML_OK; ++i) {
    if (!ptrs[i] || per[i] == 0) continue;
    const NS::UInteger len = NS::UInteger(c.batch * per[i] * 4);
    const bool aligned = reinterpret_cast<uintptr_t>(ptrs[i]) % page == 0 && len % page == 0;
    MTL::Buffer *b =
        aligned ? sx.device->newBuffer(ptrs[i], len, MTL::ResourceStorageModeShared, nullptr)
                : sx.device->newBuffer(len, MTL::ResourceStorageModeShared);
    if (!b) {
      st = fail(ML_OUT_OF_MEMORY, where, "cannot allocate a Metal buffer of %llu bytes",
                static_cast<unsigned long long>(len));
      break;
    }
    staged[i] = !aligned;
    if (staged[i] && i == 0) std::memcpy(b->contents(), ptrs[0], len);
    args[i] = {b, 0};
  }
  // One command buffer per bounded chunk of matrices, all committed, then waited for (a
  // blocked plan: one command buffer, its workspace a private buffer).
  std::vector<MTL::CommandBuffer *> cbs;
  const bool blocked = pl.launch == Launch::kBlocked;
  const int64_t chunk = blocked ? c.batch : matrices_per_dispatch(c.m, c.n);
  MTL::Buffer *wsb = nullptr;
  if (st == ML_OK && blocked) {
    const NS::UInteger len = NS::UInteger(std::max<int64_t>(workspace_bytes(c, pl), 4));
    wsb = sx.device->newBuffer(len, MTL::ResourceStorageModePrivate);
    if (!wsb)
      st = fail(ML_OUT_OF_MEMORY, where, "cannot allocate a Metal workspace of %llu bytes",
                static_cast<unsigned long long>(len));
  }
  for (int64_t off = 0; st == ML_OK && off < c.batch; off += chunk) {
    MTL::CommandBuffer *cb = sx.queue->commandBuffer();
    MTL::ComputeCommandEncoder *enc = cb ? cb->computeCommandEncoder() : nullptr;
    if (!enc) {
      st = fail(ML_RUNTIME_ERROR, where, "cannot create a Metal command buffer");
      break;
    }
    Sink out;
    out.enc = enc;
    st = blocked ? encode_blocked(out, c, pl, args, Arg{wsb, 0}, where)
                 : encode(out, c, pl, args, off, std::min(chunk, c.batch - off), where);
    enc->endEncoding();
    cb->commit();
    cbs.push_back(cb);
  }
  for (MTL::CommandBuffer *cb : cbs) {
    cb->waitUntilCompleted();
    if (st == ML_OK && cb->status() == MTL::CommandBufferStatusError)
      st = fail(ML_RUNTIME_ERROR, where, "Metal command buffer failed: %s",
                cb->error() ? cb->error()->localizedDescription()->utf8String() : "unknown");
  }
  for (int i = 1; i < 5 && st == ML_OK; ++i)
    if (staged[i])
      std::memcpy(ptrs[i], args[i].buffer->contents(), size_t(c.batch * per[i] * 4));
  for (int i = 0; i < 5; ++i)
    if (args[i].buffer) args[i].buffer->release();
  if (wsb) wsb->release();
  pool->release();
  return st;
}

}  // namespace
}  // namespace ml::metal

namespace ml {

Backend &metal_backend() {
  static metal::MetalBackend b;
  return b;
}

}  // namespace ml
