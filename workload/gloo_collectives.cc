#include "workload/gloo_collectives.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/socket.h>

#include <cstring>
#include <exception>
#include <functional>

namespace faultline::workload {

// Everything that depends on the element type and reduction, behind one table.
struct GlooTypeOps {
  // gloo::allreduce's untyped reduction (out, in1, in2, elements).
  std::function<void(void*, const void*, const void*, size_t)> reduce;
  // In-place avg finish: divide every element by the rank count.
  void (*divide)(void*, size_t, int) = nullptr;
  // Builds the classic reduce-scatter over `scratch` (count_total elements).
  std::function<std::unique_ptr<gloo::Algorithm>(const std::shared_ptr<gloo::Context>&, void*, int,
                                                 const std::vector<int>&)>
      make_reduce_scatter;
  // Builds a classic in-place allreduce over `data` (count elements).
  std::function<std::unique_ptr<gloo::Algorithm>(const std::shared_ptr<gloo::Context>&,
                                                 GlooAllreduce, void*, int)>
      make_allreduce;
};

namespace {

struct NamedAlgo {
  const char* name;
  GlooAllreduce algo;
};
constexpr NamedAlgo kAllreduceAlgos[] = {{"ring", GlooAllreduce::kRing},
                                         {"bcube", GlooAllreduce::kBcube},
                                         {"ring_chunked", GlooAllreduce::kRingChunked},
                                         {"halving_doubling", GlooAllreduce::kHalvingDoubling}};

using TypeOps = GlooTypeOps;

// ---- typed reductions ----------------------------------------------------------------------

template <typename C, RedOp kOp>
void ReduceInto(typename C::Storage* out, const typename C::Storage* a,
                const typename C::Storage* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = C::Encode(Combine(kOp, C::Decode(a[i]), C::Decode(b[i])));
}

template <typename C>
void DivideBy(void* data, size_t n, int ranks) {
  using A = typename C::Arith;
  auto* p = static_cast<typename C::Storage*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = C::Encode(C::Decode(p[i]) / static_cast<A>(ranks));
}

template <typename C>
struct MakeTypeOps {
  using S = typename C::Storage;
  // The classic algorithms take a two-operand in-place function pointer.
  template <RedOp kOp>
  static void InPlace(S* x, const S* y, size_t n) {
    ReduceInto<C, kOp>(x, x, y, n);
  }

  static TypeOps Run(RedOp op) {
    void (*in_place)(S*, const S*, size_t) = &InPlace<RedOp::kSum>;  // sum, avg
    void (*three)(S*, const S*, const S*, size_t) = &ReduceInto<C, RedOp::kSum>;
    if (op == RedOp::kProd) {
      in_place = &InPlace<RedOp::kProd>;
      three = &ReduceInto<C, RedOp::kProd>;
    } else if (op == RedOp::kMin) {
      in_place = &InPlace<RedOp::kMin>;
      three = &ReduceInto<C, RedOp::kMin>;
    } else if (op == RedOp::kMax) {
      in_place = &InPlace<RedOp::kMax>;
      three = &ReduceInto<C, RedOp::kMax>;
    }
    TypeOps ops;
    ops.reduce = [three](void* out, const void* a, const void* b, size_t n) {
      three(static_cast<S*>(out), static_cast<const S*>(a), static_cast<const S*>(b), n);
    };
    ops.divide = &DivideBy<C>;
    // Shared with the algorithms built below, which keep a raw pointer to it.
    auto function = std::make_shared<gloo::ReductionFunction<S>>(gloo::CUSTOM, in_place);
    ops.make_reduce_scatter = [function](const std::shared_ptr<gloo::Context>& ctx, void* scratch,
                                         int count_total, const std::vector<int>& recv_elems) {
      std::vector<S*> ptrs{static_cast<S*>(scratch)};
      return std::unique_ptr<gloo::Algorithm>(new gloo::ReduceScatterHalvingDoubling<S>(
          ctx, ptrs, count_total, recv_elems, function.get()));
    };
    ops.make_allreduce = [function](const std::shared_ptr<gloo::Context>& ctx, GlooAllreduce algo,
                                    void* data, int count) {
      std::vector<S*> ptrs{static_cast<S*>(data)};
      if (algo == GlooAllreduce::kHalvingDoubling) {
        return std::unique_ptr<gloo::Algorithm>(
            new gloo::AllreduceHalvingDoubling<S>(ctx, ptrs, count, function.get()));
      }
      return std::unique_ptr<gloo::Algorithm>(
          new gloo::AllreduceRingChunked<S>(ctx, ptrs, count, function.get()));
    };
    return ops;
  }
};

TypeOps TypeOpsFor(DType t, RedOp op) { return DispatchType<MakeTypeOps>(t, op); }

// Gloo's options take typed pointers only to learn the element size.
template <typename Options>
void SetBuffers(Options& opts, DType t, const void* send, size_t send_elems, void* recv,
                size_t recv_elems) {
  auto* in = const_cast<void*>(send);  // Gloo's API is not const-correct; input is only read
  switch (DTypeSize(t)) {
    case 1:
      opts.setInput(static_cast<uint8_t*>(in), send_elems);
      opts.setOutput(static_cast<uint8_t*>(recv), recv_elems);
      break;
    case 2:
      opts.setInput(static_cast<uint16_t*>(in), send_elems);
      opts.setOutput(static_cast<uint16_t*>(recv), recv_elems);
      break;
    case 4:
      opts.setInput(static_cast<uint32_t*>(in), send_elems);
      opts.setOutput(static_cast<uint32_t*>(recv), recv_elems);
      break;
    default:
      opts.setInput(static_cast<uint64_t*>(in), send_elems);
      opts.setOutput(static_cast<uint64_t*>(recv), recv_elems);
      break;
  }
}

template <typename Options>
void SetOutput(Options& opts, DType t, void* recv, size_t recv_elems) {
  switch (DTypeSize(t)) {
    case 1:
      opts.setOutput(static_cast<uint8_t*>(recv), recv_elems);
      break;
    case 2:
      opts.setOutput(static_cast<uint16_t*>(recv), recv_elems);
      break;
    case 4:
      opts.setOutput(static_cast<uint32_t*>(recv), recv_elems);
      break;
    default:
      opts.setOutput(static_cast<uint64_t*>(recv), recv_elems);
      break;
  }
}

// Gloo reports failures as exceptions; they stop here.
template <typename F>
Status Catch(F&& fn) {
  try {
    fn();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Unavailable(std::string("gloo: ") + e.what());
  } catch (...) {
    return Unavailable("gloo: unknown exception");
  }
}

bool SameArgs(const OpArgs& a, const OpArgs& b) {
  return a.coll == b.coll && a.send == b.send && a.recv == b.recv && a.count == b.count &&
         a.dtype == b.dtype && a.redop == b.redop && a.root == b.root;
}

}  // namespace

const char* GlooAllreduceName(GlooAllreduce a) {
  for (const auto& n : kAllreduceAlgos) {
    if (n.algo == a) return n.name;
  }
  return "?";
}

std::optional<GlooAllreduce> ParseGlooAllreduce(std::string_view name) {
  for (const auto& n : kAllreduceAlgos) {
    if (name == n.name) return n.algo;
  }
  return std::nullopt;
}

Status GlooCollectives::Connect(const GlooConnectOptions& o,
                                std::unique_ptr<GlooCollectives>* out) {
  if (o.rank < 0 || o.rank >= o.size) return Unavailable("gloo: rank out of range");
  if (o.store_dir.empty()) return Unavailable("gloo: no rendezvous directory");
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  Status st = Catch([&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.address;
    attr.ai_family = AF_INET;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    ctx->setTimeout(o.timeout);
    gloo::rendezvous::FileStore store(o.store_dir);
    ctx->connectFullMesh(store, device);
  });
  if (!st.ok()) return st;
  out->reset(new GlooCollectives(std::move(ctx), o.allreduce));
  return Status::Ok();
}

GlooCollectives::GlooCollectives(std::shared_ptr<gloo::rendezvous::Context> ctx,
                                 GlooAllreduce allreduce)
    : ctx_(std::move(ctx)), allreduce_(allreduce) {}

GlooCollectives::~GlooCollectives() = default;

int GlooCollectives::rank() const { return ctx_->rank; }
int GlooCollectives::size() const { return ctx_->size; }

const GlooTypeOps& GlooCollectives::OpsFor(DType t, RedOp op) {
  auto& slot = ops_[{t, op}];
  if (slot == nullptr) slot = std::make_unique<GlooTypeOps>(TypeOpsFor(t, op));
  return *slot;
}

bool GlooCollectives::IsClassic(const OpArgs& a) const {
  if (a.coll == Coll::kReduceScatter) return true;
  return a.coll == Coll::kAllReduce && (allreduce_ == GlooAllreduce::kRingChunked ||
                                        allreduce_ == GlooAllreduce::kHalvingDoubling);
}

Status GlooCollectives::Prepare(const OpArgs& a) {
  if (!IsClassic(a)) return Status::Ok();
  if (classic_ != nullptr) {
    // The previous algorithm may still receive a peer's last notification; once every rank is
    // past it (the barrier's messages follow on the same connections) it can go.
    Status st = Barrier(ctx_->getTimeout());
    if (!st.ok()) return st;
    classic_.reset();
    classic_args_.reset();
  }
  const GlooTypeOps& ops = OpsFor(a.dtype, a.redop);
  Status st = Catch([&] {
    if (a.coll == Coll::kAllReduce) {
      classic_ = ops.make_allreduce(ctx_, allreduce_, a.recv, static_cast<int>(a.count));
      return;
    }
    const size_t total = a.count * static_cast<size_t>(ctx_->size);
    scratch_.assign(total * DTypeSize(a.dtype), 0);
    std::vector<int> recv_elems(ctx_->size, static_cast<int>(a.count));
    classic_ = ops.make_reduce_scatter(ctx_, scratch_.data(), static_cast<int>(total), recv_elems);
  });
  if (st.ok()) classic_args_ = a;
  return st;
}

Status GlooCollectives::Run(const OpArgs& a, std::chrono::milliseconds timeout) {
  if (IsClassic(a) && (classic_ == nullptr || !classic_args_ || !SameArgs(*classic_args_, a))) {
    return Unavailable("gloo: Prepare was not called for these arguments");
  }
  const GlooTypeOps& ops = OpsFor(a.dtype, a.redop);
  return Catch([&] {
    const size_t n = static_cast<size_t>(ctx_->size);
    switch (a.coll) {
      case Coll::kAllReduce: {
        if (IsClassic(a)) {  // in place on the output
          std::memcpy(a.recv, a.send, a.count * DTypeSize(a.dtype));
          classic_->run();
          if (a.redop == RedOp::kAvg) ops.divide(a.recv, a.count, ctx_->size);
          break;
        }
        gloo::AllreduceOptions opts(ctx_);
        if (allreduce_ == GlooAllreduce::kBcube) {
          opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
        }
        SetBuffers(opts, a.dtype, a.send, a.count, a.recv, a.count);
        opts.setReduceFunction(ops.reduce);
        opts.setTimeout(timeout);
        gloo::allreduce(opts);
        if (a.redop == RedOp::kAvg) ops.divide(a.recv, a.count, ctx_->size);
        break;
      }
      case Coll::kAllGather: {
        gloo::AllgatherOptions opts(ctx_);
        SetBuffers(opts, a.dtype, a.send, a.count, a.recv, a.count * n);
        opts.setTimeout(timeout);
        gloo::allgather(opts);
        break;
      }
      case Coll::kReduceScatter: {
        const size_t ts = DTypeSize(a.dtype);
        std::memcpy(scratch_.data(), a.send, a.count * n * ts);
        classic_->run();
        std::memcpy(a.recv, scratch_.data(), a.count * ts);  // the result lands at the front
        if (a.redop == RedOp::kAvg) ops.divide(a.recv, a.count, ctx_->size);
        break;
      }
      case Coll::kBroadcast: {
        gloo::BroadcastOptions opts(ctx_);
        if (ctx_->rank == a.root) {
          SetBuffers(opts, a.dtype, a.send, a.count, a.recv, a.count);
        } else {
          SetOutput(opts, a.dtype, a.recv, a.count);  // non-roots have no input
        }
        opts.setRoot(a.root);
        opts.setTimeout(timeout);
        gloo::broadcast(opts);
        break;
      }
      case Coll::kAllToAll: {
        gloo::AlltoallOptions opts(ctx_);
        SetBuffers(opts, a.dtype, a.send, a.count * n, a.recv, a.count * n);
        opts.setTimeout(timeout);
        gloo::alltoall(opts);
        break;
      }
    }
  });
}

Status GlooCollectives::Barrier(std::chrono::milliseconds timeout) {
  return Catch([&] {
    gloo::BarrierOptions opts(ctx_);
    opts.setTimeout(timeout);
    gloo::barrier(opts);
  });
}

}  // namespace faultline::workload
