#include "runner/explore/generator.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "runner/core/split_mix64.h"

namespace faultline::runner::explore {
namespace {

constexpr int64_t kMs = 1'000'000;

// Uniform in [lo, hi] (inclusive), up to a modulo bias far below what a campaign can see.
int64_t Uniform(SplitMix64& rng, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(rng.Next() % span);
}

// A duration range drawn in whole milliseconds (files stay readable and replay the same).
int64_t UniformMs(SplitMix64& rng, const IntRange& r) {
  const int64_t lo = (r.lo + kMs - 1) / kMs;
  const int64_t hi = std::max(lo, r.hi / kMs);
  return Uniform(rng, lo, hi) * kMs;
}

std::string Ms(int64_t ns) { return std::to_string(ns / kMs) + "ms"; }

// Two faults on one link (host, rank's port and rail; either side; a whole NIC is every rail
// of its rank) overlap in time. A one-shot occupies its instant; back to back is fine.
bool Overlap(const GenFault& a, const GenFault& b) {
  if (a.host != b.host || a.rank != b.rank) return false;
  if (a.rail != b.rail && !a.WholeNic() && !b.WholeNic()) return false;
  const int64_t ae = a.EndNs(), be = b.EndNs();
  if (a.at_ns == ae) return b.at_ns <= a.at_ns && a.at_ns < be;
  if (b.at_ns == be) return a.at_ns <= b.at_ns && b.at_ns < ae;
  return std::max(a.at_ns, b.at_ns) < std::min(ae, be);
}

// Faults in effect at `t` (started at or before, not yet over).
int ActiveAt(const std::vector<GenFault>& fs, int64_t t) {
  int n = 0;
  for (const auto& f : fs) {
    if (f.at_ns <= t && (t < f.EndNs() || (f.at_ns == f.EndNs() && t == f.at_ns))) ++n;
  }
  return n;
}

const KindSpec& PickKind(const FaultSpace& s, SplitMix64& rng) {
  int64_t total = 0;
  for (const auto& k : s.kinds) total += k.weight;
  int64_t x = Uniform(rng, 0, total - 1);
  for (const auto& k : s.kinds) {
    if (x < k.weight) return k;
    x -= k.weight;
  }
  return s.kinds.back();
}

GenFault DrawParams(const KindSpec& k, SplitMix64& rng) {
  GenFault f;
  f.type = k.type;
  if (k.type == "link_flap") {
    f.down_ns = UniformMs(rng, k.down_ns);
    f.up_ns = UniformMs(rng, k.up_ns);
    f.count = Uniform(rng, k.count.lo, k.count.hi);
  } else if (!k.Permanent() && !k.OneShot()) {
    f.for_ns = UniformMs(rng, k.duration_ns);
  }
  if (k.type == "loss") {
    f.percent = static_cast<double>(Uniform(rng, static_cast<int64_t>(k.percent.lo * 10 + 0.5),
                                            static_cast<int64_t>(k.percent.hi * 10 + 0.5))) /
                10.0;
  }
  if (k.type == "bandwidth") f.rate_mbps = Uniform(rng, k.rate_mbps.lo, k.rate_mbps.hi);
  if (k.type == "conn_corrupt") {
    f.part =
        k.parts[static_cast<size_t>(Uniform(rng, 0, static_cast<int64_t>(k.parts.size()) - 1))];
  }
  return f;
}

uint64_t StreamSeed(uint64_t seed, int64_t index) {
  SplitMix64 mix(seed);
  const uint64_t a = mix.Next();
  SplitMix64 mix2(a ^ (static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ULL));
  return mix2.Next();
}

}  // namespace

int64_t GenFault::LengthNs() const {
  if (type == "port_drop") return kForever;
  if (OneShot()) return 0;
  if (type == "link_flap") return count * down_ns + (count - 1) * up_ns;
  return for_ns;
}

int64_t GenFault::EndNs() const {
  const int64_t l = LengthNs();
  return l == kForever ? kForever : at_ns + l;
}

RunFaults Generate(const FaultSpace& space, uint64_t seed, int64_t index) {
  SplitMix64 rng(StreamSeed(seed, index));
  RunFaults run;
  run.scenario_seed = rng.Next() % 1'000'000'000ULL;
  const int64_t n = Uniform(rng, space.faults_per_run.lo, space.faults_per_run.hi);
  int64_t t = UniformMs(rng, space.start_ns);
  int next_id = 0;
  for (int64_t i = 0; i < n; ++i) {
    const KindSpec& kind = PickKind(space, rng);
    GenFault f = DrawParams(kind, rng);
    // The candidate targets in a fixed order; one is drawn among those free for the fault.
    const int64_t pick = static_cast<int64_t>(rng.Next() >> 1);
    const int64_t gap = UniformMs(rng, space.gap_ns);
    // Wait for a slot under max_concurrent (the earliest end of what is in effect).
    while (ActiveAt(run.faults, t) >= space.max_concurrent) {
      int64_t next = kForever;
      for (const auto& g : run.faults) {
        if (g.EndNs() > t) next = std::min(next, g.EndNs());
      }
      t = next;
      if (t == kForever) break;
    }
    f.at_ns = t;
    if (t == kForever || t >= space.horizon_ns) break;
    if (f.EndNs() != kForever && f.EndNs() > space.horizon_ns) {
      t += gap;
      continue;
    }
    std::vector<GenFault> free;
    // A rank's own port only for the kinds with a link; one-shots hit rank 0's connection.
    const std::vector<int> ranks = kind.HasSide() && space.base.topology.per_rank_nics()
                                       ? space.targets.ranks
                                       : std::vector<int>{0};
    const std::vector<int> rails = kind.WholeNic() ? std::vector<int>{0} : space.targets.rails;
    for (int h : space.targets.hosts) {
      for (int k : ranks) {
        for (int r : rails) {
          const std::vector<LinkSide> sides =
              kind.HasSide() ? space.targets.sides : std::vector<LinkSide>{LinkSide::kHost};
          // conn_corrupt: a frame to a rank on each other host (the topology's, not only the
          // targets': the connection is what is hit, at the target host's end).
          std::vector<int> peers = {0};
          if (f.type == "conn_corrupt") {
            peers.clear();
            for (int o = 0; o < space.base.topology.hosts; ++o) {
              if (o != h) peers.push_back(o);
            }
          }
          for (LinkSide side : sides) {
            for (int peer : peers) {
              GenFault c = f;
              c.host = h;
              c.rank = k;
              c.rail = r;
              c.side = side;
              if (f.type == "conn_corrupt") c.peer_host = peer;
              if (std::none_of(run.faults.begin(), run.faults.end(),
                               [&](const GenFault& g) { return Overlap(c, g); })) {
                free.push_back(c);
              }
            }
          }
        }
      }
    }
    if (!free.empty()) {
      GenFault chosen = free[static_cast<size_t>(pick % static_cast<int64_t>(free.size()))];
      char id[16];
      std::snprintf(id, sizeof id, "f%d", next_id++);
      chosen.id = id;
      run.faults.push_back(chosen);
    }
    t += gap;
  }
  return run;
}

bool FitsSpace(const FaultSpace& space, const std::vector<GenFault>& faults) {
  if (faults.empty()) return true;
  for (size_t i = 0; i < faults.size(); ++i) {
    const GenFault& f = faults[i];
    if (f.at_ns <= space.base.workload.warmup_ns || f.at_ns >= space.horizon_ns) return false;
    if (f.EndNs() != kForever && f.EndNs() > space.horizon_ns) return false;
    if (f.type != "port_drop" && !f.OneShot() && f.LengthNs() <= 0) return false;
    if (f.type == "conn_corrupt" &&
        (f.peer_host == f.host || f.peer_host < 0 || f.peer_host >= space.base.topology.hosts ||
         (f.part != "payload" && f.part != "header"))) {
      return false;
    }
    if (f.type == "link_flap" && (f.down_ns <= 0 || f.up_ns <= 0 || f.count < 1)) return false;
    const Topology& topo = space.base.topology;
    if (f.host < 0 || f.host >= topo.hosts || f.rail < 0 || f.rail >= topo.rails) return false;
    if (f.rank < 0 || f.rank >= topo.ranks_per_host) return false;
    if (f.rank != 0 && (!topo.per_rank_nics() || f.OneShot())) return false;
    if (f.WholeNic() && f.rail != 0) return false;
    for (size_t j = 0; j < i; ++j) {
      if (Overlap(f, faults[j])) return false;
    }
    if (ActiveAt(faults, f.at_ns) > space.max_concurrent) return false;
  }
  return true;
}

std::string Describe(const GenFault& f) {
  std::ostringstream o;
  o << f.id << " " << f.type << " h" << f.host;
  if (f.rank != 0 || f.WholeNic()) o << " k" << f.rank;
  if (!f.WholeNic()) o << " r" << f.rail;
  if (f.type == "conn_corrupt") {
    o << " to h" << f.peer_host << " " << f.part;
  } else if (!f.OneShot()) {
    o << " " << LinkSideString(f.side);
  }
  o << " at " << Ms(f.at_ns);
  if (f.type == "link_flap") {
    o << " down " << Ms(f.down_ns) << " up " << Ms(f.up_ns) << " x" << f.count;
  } else if (f.for_ns > 0) {
    o << " for " << Ms(f.for_ns);
  }
  if (f.type == "loss") o << " " << f.percent << "%";
  if (f.type == "bandwidth") o << " " << f.rate_mbps << "Mbps";
  return o.str();
}

std::string RenderScenario(const FaultSpace& space, const RunFaults& run, const RunOrigin& origin) {
  const Scenario& b = space.base;
  const Topology& t = b.topology;
  const Workload& w = b.workload;
  std::ostringstream o;
  o << "# Generated by `faultline explore` from " << space.file << "\n";
  o << "# space sha256 " << space.sha256 << "\n";
  if (origin.note.empty()) {
    o << "# seed " << origin.seed << ", index " << origin.index
      << ": the same space, seed and index generate this file again\n";
  } else {
    o << "# seed " << origin.seed << ", index " << origin.index << ": " << origin.note << "\n";
  }
  o << "name: " << b.name << "-s" << origin.seed << "-i" << origin.index << "\n";
  o << "seed: " << run.scenario_seed << "\n";
  char gbps[32];
  std::snprintf(gbps, sizeof gbps, "%g", t.rail_gbps);
  o << "topology: {hosts: " << t.hosts << ", ranks_per_host: " << t.ranks_per_host
    << ", rails: " << t.rails << ", rail_gbps: " << gbps;
  if (t.arp_retrans_ms) o << ", arp_retrans_ms: " << *t.arp_retrans_ms;
  if (t.per_rank_nics()) o << ", nics: " << NicLayoutString(t.nics);
  o << "}\n";
  o << "ccl: " << CclNameString(b.ccl) << "\n";
  o << "workload: {op: " << CollOpName(w.op) << ", dtype: " << w.dtype;
  if (w.reduce != "sum") o << ", reduce: " << w.reduce;
  if (w.root != 0) o << ", root: " << w.root;
  o << ", bytes: " << w.bytes << "B, duration: " << Ms(*w.duration_ns);
  if (w.warmup_iters > 0) {
    o << ", warmup: " << w.warmup_iters;
  } else if (w.warmup_ns > 0) {
    o << ", warmup: " << Ms(w.warmup_ns);
  }
  o << ", check: " << (w.check ? "true" : "false") << "}\n";
  if (!run.faults.empty()) {
    o << "faults:\n";
    for (const auto& f : run.faults) {
      if (f.WholeNic()) {
        // The NIC as its ports (a rank's own, or the host's shared one): one link_down per
        // rail, at once, for as long.
        for (int r = 0; r < t.rails; ++r) {
          o << "  - {id: " << f.id << "r" << r << ", at: " << Ms(f.at_ns)
            << ", type: link_down, target: {host: " << f.host;
          if (t.per_rank_nics()) o << ", rank: " << f.rank;
          o << ", rail: " << r << ", side: " << LinkSideString(f.side) << "}, for: " << Ms(f.for_ns)
            << "}\n";
        }
        continue;
      }
      o << "  - {id: " << f.id << ", at: " << Ms(f.at_ns) << ", type: " << f.type
        << ", target: {host: " << f.host;
      if (f.type == "conn_corrupt") {
        o << ", rank: 0";
      } else if (t.per_rank_nics() && !f.OneShot()) {
        o << ", rank: " << f.rank;
      }
      o << ", rail: " << f.rail;
      if (!f.OneShot()) o << ", side: " << LinkSideString(f.side);
      o << "}";
      if (f.type == "conn_corrupt") {
        o << ", peer: " << f.peer_host * t.ranks_per_host << ", part: " << f.part;
      }
      if (f.type == "link_flap") {
        o << ", down: " << Ms(f.down_ns) << ", up: " << Ms(f.up_ns) << ", count: " << f.count;
      } else if (f.for_ns > 0) {
        o << ", for: " << Ms(f.for_ns);
      }
      if (f.type == "loss") o << ", percent: " << f.percent << "%";
      if (f.type == "bandwidth") o << ", rate: " << f.rate_mbps << "Mbps";
      o << "}\n";
    }
  }
  o << "expect: {abort_within: " << Ms(space.invariants.abort_within_ns) << "}\n";
  return o.str();
}

}  // namespace faultline::runner::explore
