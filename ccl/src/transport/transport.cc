#include "transport/transport.h"

namespace ftccl::transport {

std::string Signature::ToString() const {
  std::string s = std::string(CollKindName(kind)) + "(dtype=" + DataTypeName(dtype) +
                  ", count=" + std::to_string(count);
  if (kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter ||
      kind == CollKind::kReduce) {
    s += std::string(", op=") + ReduceOpName(op);
  }
  if (kind == CollKind::kBroadcast || kind == CollKind::kReduce)
    s += ", root=" + std::to_string(root);
  return s + ")";
}

std::string ConnLabel(int peer, int rail, int channel) {
  return "rank " + std::to_string(peer) + " rail " + std::to_string(rail) + " channel " +
         std::to_string(channel);
}

}  // namespace ftccl::transport
