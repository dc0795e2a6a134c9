#include "runner/explore/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reports/text.h"

namespace faultline::runner::explore {
namespace {

constexpr int64_t kMs = 1'000'000;

bool Duration(const std::string& p) { return p == "duration" || p == "down" || p == "up"; }

// The parameters a kind takes (sweep.h).
std::vector<std::string> ParamsOf(const KindSpec& k) {
  if (k.type == "link_flap") return {"down", "up", "count"};
  if (k.type == "loss") return {"duration", "percent"};
  if (k.type == "bandwidth") return {"duration", "rate"};
  if (k.Permanent() || k.OneShot()) return {};
  return {"duration"};
}

std::string Fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

double Round(const std::string& param, double v) {
  if (param == "percent") return std::round(v * 10) / 10;
  return std::round(v);
}

}  // namespace

std::string SweepSpec::Unit() const {
  if (Duration(param)) return "ms";
  if (param == "rate") return "Mbps";
  if (param == "percent") return "%";
  return "";
}

std::string SweepSpec::Label() const {
  const std::string u = Unit();
  return kind + "." + param + (u.empty() ? "" : " (" + u + ")");
}

std::optional<std::string> ParseSweep(const std::string& text, const FaultSpace& space,
                                      SweepSpec* out) {
  const std::string form = "--sweep KIND.PARAM=A..B:N, e.g. link_flap.down=50..800:6";
  const size_t dot = text.find('.');
  const size_t eq = text.find('=');
  const size_t dots = text.find("..", eq == std::string::npos ? 0 : eq);
  const size_t colon = text.rfind(':');
  if (dot == std::string::npos || eq == std::string::npos || dot > eq ||
      dots == std::string::npos || colon == std::string::npos || colon < dots) {
    return "--sweep '" + text + "' is not of the form " + form;
  }
  SweepSpec s;
  s.kind = text.substr(0, dot);
  s.param = text.substr(dot + 1, eq - dot - 1);
  const KindSpec* kind = nullptr;
  for (const auto& k : space.kinds) {
    if (k.type == s.kind) kind = &k;
  }
  if (!kind) {
    std::string names;
    for (const auto& k : space.kinds) names += (names.empty() ? "" : ", ") + k.type;
    return "--sweep: the space has no kind " + s.kind + " (it has " + names + ")";
  }
  const auto params = ParamsOf(*kind);
  if (std::find(params.begin(), params.end(), s.param) == params.end()) {
    std::string names;
    for (const auto& p : params) names += (names.empty() ? "" : ", ") + p;
    return "--sweep: " + s.kind + " has no parameter " + s.param +
           (names.empty() ? " (it takes none)" : " (it takes " + names + ")");
  }
  auto number = [](const std::string& t, double* v) {
    char* end = nullptr;
    *v = std::strtod(t.c_str(), &end);
    return !t.empty() && end && *end == '\0' && std::isfinite(*v);
  };
  const std::string a = text.substr(eq + 1, dots - eq - 1);
  const std::string b = text.substr(dots + 2, colon - dots - 2);
  const std::string n = text.substr(colon + 1);
  double points = 0;
  if (!number(a, &s.lo) || !number(b, &s.hi) || !number(n, &points)) {
    return "--sweep '" + text + "': A, B and N must be plain numbers (in " +
           (s.Unit().empty() ? std::string("units of ") + s.param : s.Unit()) + "); " + form;
  }
  if (points < 1 || points > 100 || points != std::floor(points)) {
    return "--sweep: N must be a whole number from 1 to 100, got " + n;
  }
  s.points = static_cast<int>(points);
  if (s.hi < s.lo) return "--sweep: B (" + b + ") is below A (" + a + ")";
  const double min = s.param == "count" || Duration(s.param) || s.param == "rate" ? 1 : 0.1;
  if (s.lo < min) return "--sweep: A must be at least " + Fmt(min) + " " + s.Unit();
  if (s.param == "percent" && s.hi > 100) return "--sweep: percent is at most 100";
  *out = s;
  return std::nullopt;
}

std::vector<double> SweepValues(const SweepSpec& spec) {
  std::vector<double> v;
  for (int i = 0; i < spec.points; ++i) {
    const double x =
        spec.points == 1 ? spec.lo : spec.lo + (spec.hi - spec.lo) * i / (spec.points - 1);
    v.push_back(Round(spec.param, x));
  }
  return v;
}

FaultSpace SpaceAt(const FaultSpace& space, const SweepSpec& spec, double value) {
  FaultSpace s = space;
  s.kinds.clear();
  for (const auto& k : space.kinds) {
    if (k.type != spec.kind) continue;
    KindSpec f = k;
    const int64_t ns = static_cast<int64_t>(std::llround(value)) * kMs;
    if (spec.param == "duration") f.duration_ns = {ns, ns};
    if (spec.param == "down") f.down_ns = {ns, ns};
    if (spec.param == "up") f.up_ns = {ns, ns};
    if (spec.param == "count") f.count = {std::llround(value), std::llround(value)};
    if (spec.param == "percent") f.percent = {value, value};
    if (spec.param == "rate") f.rate_mbps = {std::llround(value), std::llround(value)};
    s.kinds.push_back(f);
  }
  return s;
}

std::string SweepSvg(const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  // Plot area inside margins; y from 0 to the largest stall (at least 100 ms), rounded up.
  const double w = 640, h = 320, left = 64, right = 16, top = 16, bottom = 48;
  const double pw = w - left - right, ph = h - top - bottom;
  double ymax = 100;
  for (const auto& p : points) {
    if (p.stall_ms) ymax = std::max(ymax, *p.stall_ms);
  }
  const double mag = std::pow(10, std::floor(std::log10(ymax)));
  ymax = std::ceil(ymax / mag) * mag;
  const double xlo = spec.lo, xhi = spec.hi > spec.lo ? spec.hi : spec.lo + 1;
  auto X = [&](double v) { return left + (v - xlo) / (xhi - xlo) * pw; };
  auto Y = [&](double v) { return top + ph - v / ymax * ph; };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
    << "\" viewBox=\"0 0 " << w << " " << h << "\" role=\"img\" aria-label=\"stall against "
    << reports::HtmlEscape(spec.Label()) << "\">\n";
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double v = ymax * i / 4, y = Y(v);
    o << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#eee\"/><text x=\"" << left - 6 << "\" y=\"" << y + 4
      << "\" font-size=\"11\" text-anchor=\"end\">" << Fmt(v) << "</text>\n";
  }
  for (double v : SweepValues(spec)) {
    o << "<text x=\"" << X(v) << "\" y=\"" << top + ph + 16
      << "\" font-size=\"11\" text-anchor=\"middle\">" << Fmt(v) << "</text>\n";
  }
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << h - 8
    << "\" font-size=\"12\" text-anchor=\"middle\">" << reports::HtmlEscape(spec.Label())
    << "</text>\n<text x=\"14\" y=\"" << top + ph / 2 << "\" font-size=\"12\" "
    << "text-anchor=\"middle\" transform=\"rotate(-90 14 " << top + ph / 2
    << ")\">stall (ms)</text>\n";
  for (const auto& p : points) {
    const double x = X(p.value);
    if (p.outcome == "hung" || p.outcome == "crashed" || !p.stall_ms) {
      const double y = top + 6;
      o << "<path class=\"" << (p.outcome.empty() ? "none" : p.outcome) << "\" d=\"M" << x - 5
        << " " << y - 5 << "L" << x + 5 << " " << y + 5 << "M" << x - 5 << " " << y + 5 << "L"
        << x + 5 << " " << y - 5 << "\" stroke=\"#c00\" stroke-width=\"2\"/>\n";
    } else if (p.outcome == "aborted_clean") {
      o << "<rect class=\"aborted_clean\" x=\"" << x - 4 << "\" y=\"" << Y(*p.stall_ms) - 4
        << "\" width=\"8\" height=\"8\" fill=\"#e90\"/>\n";
    } else {
      o << "<circle class=\"survived\" cx=\"" << x << "\" cy=\"" << Y(*p.stall_ms)
        << "\" r=\"4\" fill=\"#2a2\"/>\n";
    }
    if (p.violation) {
      const double y =
          p.stall_ms && p.outcome != "hung" && p.outcome != "crashed" ? Y(*p.stall_ms) : top + 6;
      o << "<circle class=\"violation\" cx=\"" << x << "\" cy=\"" << y
        << "\" r=\"8\" fill=\"none\" stroke=\"#c00\"/>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace faultline::runner::explore
