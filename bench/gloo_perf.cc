// gloo-perf: the ftccl-perf loop on Gloo (TCP transport), for a same-machine comparison.
//
// Collectives: gloo::allreduce (ring), allgather, broadcast and alltoall from Gloo's
// options-based API; reducescatter, which that API lacks, runs Gloo's classic
// ReduceScatterHalvingDoubling (in place, so each iteration first copies the input to a scratch
// buffer and afterwards this rank's block to the output; both copies are timed).
// Rendezvous: a gloo::rendezvous::FileStore in the run's scratch directory.
// Rails: Gloo has one TCP pair per peer and no notion of rails; every rank uses its first rail
// address (127.0.1.(k+1)) and --rails only matters to ftccl-perf.
// Reductions run in the element type (f16/bf16 through float, rounded after each step); avg is
// a sum followed by one division by the rank count, as ftccl defines it.
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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "perf_common.h"

namespace faultline::bench {
namespace {

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

// Which Gloo allreduce runs (FAULTLINE_GLOO_ALLREDUCE): the options API's ring or bcube, or the
// classic in-place ring_chunked or halving_doubling (input copied to the output first, timed).
enum class AllreduceAlgo { kRing, kBcube, kRingChunked, kHalvingDoubling };

struct NamedAlgo {
  const char* name;
  AllreduceAlgo algo;
};
constexpr NamedAlgo kAllreduceAlgos[] = {{"ring", AllreduceAlgo::kRing},
                                         {"bcube", AllreduceAlgo::kBcube},
                                         {"ring_chunked", AllreduceAlgo::kRingChunked},
                                         {"halving_doubling", AllreduceAlgo::kHalvingDoubling}};
constexpr const char* kAllreduceEnv = "FAULTLINE_GLOO_ALLREDUCE";
constexpr const char* kDefaultAllreduce = "ring";

std::string AllreduceAlgoName() {
  const char* v = std::getenv(kAllreduceEnv);
  return v != nullptr && *v != '\0' ? v : kDefaultAllreduce;
}

std::optional<AllreduceAlgo> ParseAllreduceAlgo(const std::string& name) {
  for (const auto& a : kAllreduceAlgos) {
    if (name == a.name) return a.algo;
  }
  return std::nullopt;
}

// Everything that depends on the element type, behind one table.
struct TypeOps {
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
                                                 AllreduceAlgo, void*, int)>
      make_allreduce;
};

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
    ops.make_allreduce = [function](const std::shared_ptr<gloo::Context>& ctx, AllreduceAlgo algo,
                                    void* data, int count) {
      std::vector<S*> ptrs{static_cast<S*>(data)};
      if (algo == AllreduceAlgo::kHalvingDoubling) {
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

class GlooCcl final : public PerfCcl {
 public:
  GlooCcl(std::shared_ptr<gloo::rendezvous::Context> ctx, const PerfOptions& o,
          AllreduceAlgo allreduce)
      : ctx_(std::move(ctx)), o_(o), ops_(TypeOpsFor(o.dtype, o.redop)), allreduce_(allreduce) {}

  Status Prepare(const OpArgs& a) override {
    const bool classic_allreduce =
        a.coll == Coll::kAllReduce && (allreduce_ == AllreduceAlgo::kRingChunked ||
                                       allreduce_ == AllreduceAlgo::kHalvingDoubling);
    if (a.coll != Coll::kReduceScatter && !classic_allreduce) return Status::Ok();
    if (classic_ != nullptr) {
      // The previous size's algorithm may still receive a peer's last notification; once every
      // rank is past it (the barrier's messages follow on the same connections) it can go.
      Status st = Barrier();
      if (!st.ok()) return st;
      classic_.reset();
    }
    return Catch([&] {
      if (classic_allreduce) {
        classic_ = ops_.make_allreduce(ctx_, allreduce_, a.recv, static_cast<int>(a.count));
        return;
      }
      const size_t total = a.count * static_cast<size_t>(ctx_->size);
      scratch_.assign(total * DTypeSize(a.dtype), 0);
      std::vector<int> recv_elems(ctx_->size, static_cast<int>(a.count));
      classic_ =
          ops_.make_reduce_scatter(ctx_, scratch_.data(), static_cast<int>(total), recv_elems);
    });
  }

  Status Run(const OpArgs& a) override {
    return Catch([&] {
      const size_t n = static_cast<size_t>(ctx_->size);
      const auto timeout = std::chrono::milliseconds(o_.timeout_s * 1000LL);
      switch (a.coll) {
        case Coll::kAllReduce: {
          if (classic_ != nullptr) {  // in place on the output
            std::memcpy(a.recv, a.send, a.count * DTypeSize(a.dtype));
            classic_->run();
            if (a.redop == RedOp::kAvg) ops_.divide(a.recv, a.count, ctx_->size);
            break;
          }
          gloo::AllreduceOptions opts(ctx_);
          if (allreduce_ == AllreduceAlgo::kBcube) {
            opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
          }
          SetBuffers(opts, a.dtype, a.send, a.count, a.recv, a.count);
          opts.setReduceFunction(ops_.reduce);
          opts.setTimeout(timeout);
          gloo::allreduce(opts);
          if (a.redop == RedOp::kAvg) ops_.divide(a.recv, a.count, ctx_->size);
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
          if (a.redop == RedOp::kAvg) ops_.divide(a.recv, a.count, ctx_->size);
          break;
        }
        case Coll::kBroadcast: {
          gloo::BroadcastOptions opts(ctx_);
          if (ctx_->rank == a.root) {
            SetBuffers(opts, a.dtype, a.send, a.count, a.recv, a.count);
          } else {
            switch (DTypeSize(a.dtype)) {  // non-roots have no input
              case 1:
                opts.setOutput(static_cast<uint8_t*>(a.recv), a.count);
                break;
              case 2:
                opts.setOutput(static_cast<uint16_t*>(a.recv), a.count);
                break;
              case 4:
                opts.setOutput(static_cast<uint32_t*>(a.recv), a.count);
                break;
              default:
                opts.setOutput(static_cast<uint64_t*>(a.recv), a.count);
                break;
            }
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

  Status Barrier() override {
    return Catch([&] {
      gloo::BarrierOptions opts(ctx_);
      opts.setTimeout(std::chrono::milliseconds(o_.timeout_s * 1000LL));
      gloo::barrier(opts);
    });
  }

 private:
  // Gloo reports failures as exceptions; they stop here.
  template <typename F>
  static Status Catch(F&& fn) {
    try {
      fn();
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Error(std::string("gloo: ") + e.what());
    } catch (...) {
      return Status::Error("gloo: unknown exception");
    }
  }

  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  const PerfOptions& o_;
  TypeOps ops_;
  std::vector<char> scratch_;
  AllreduceAlgo allreduce_;
  std::unique_ptr<gloo::Algorithm> classic_;  // reducescatter, or a classic allreduce
};

Status CreateGloo(const RankEnv& env, std::unique_ptr<PerfCcl>* out) {
  if (env.bootstrap_listen_fd >= 0) close(env.bootstrap_listen_fd);  // Gloo uses the file store
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = env.rail_addrs.at(0);
    attr.ai_family = AF_INET;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(env.rank, env.size);
    ctx->setTimeout(std::chrono::milliseconds(env.options->timeout_s * 1000LL));
    gloo::rendezvous::FileStore store(env.scratch_dir);
    ctx->connectFullMesh(store, device);
    const auto algo = ParseAllreduceAlgo(AllreduceAlgoName());
    if (!algo) return Status::Error(std::string("bad ") + kAllreduceEnv);
    *out = std::make_unique<GlooCcl>(std::move(ctx), *env.options, *algo);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(std::string("gloo: ") + e.what());
  } catch (...) {
    return Status::Error("gloo: unknown exception");
  }
}

}  // namespace
}  // namespace faultline::bench

int main(int argc, char** argv) {
  using namespace faultline::bench;
  PerfBackend backend;
  backend.name = "gloo";
  backend.notes = {
      "gloo: TCP transport, one pair per peer; every rank uses its rail 0 address only "
      "(--rails affects ftccl-perf, not gloo-perf)",
      "gloo: allgather/broadcast/alltoall from the options API; allreduce as "
      "FAULTLINE_GLOO_ALLREDUCE says (ring|bcube: options API; ring_chunked|halving_doubling: "
      "classic, in place, input copy timed); reducescatter: classic "
      "ReduceScatterHalvingDoubling, in place (input copy timed)"};
  backend.validate = [](const PerfOptions&) {
    if (!ParseAllreduceAlgo(AllreduceAlgoName())) {
      return Status::Error(std::string(kAllreduceEnv) +
                           " must be ring, bcube, ring_chunked or halving_doubling");
    }
    return Status::Ok();
  };
  backend.knobs = [](const PerfOptions& o) {
    return std::vector<std::pair<std::string, std::string>>{
        {"transport", "tcp"},
        {"rendezvous", "file_store"},
        {"address", "127.0.1.(k+1)"},
        {"allreduce", AllreduceAlgoName()},
        {"timeout_ms", std::to_string(o.timeout_s * 1000LL)}};
  };
  backend.create = &CreateGloo;
  return PerfMain(argc, argv, backend);
}
