#include "reports/junit.h"

#include <map>

#include "reports/text.h"
#include "reports/verdict.h"

namespace faultline::reports {
namespace {

std::string Str(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return "";
  return FormatValue(obj[key]);
}

struct Case {
  std::string name;
  std::string kind;  // "", "failure", "error"
  std::string type;
  std::string message;
  std::string detail;
};

std::vector<Case> CasesOf(const nlohmann::json& report) {
  std::vector<Case> cases;
  // A run that was not started because the machine lacks what the scenario requires: one
  // skipped case, never a pass.
  if (report.contains("skipped") && report["skipped"].is_string()) {
    cases.push_back({"outcome", "skipped", "", report["skipped"].get<std::string>(), ""});
    return cases;
  }
  const std::string outcome = Str(report, "outcome");
  Case run{"outcome", "", "", "", ""};
  const std::vector<std::string> harness = HarnessErrors(report);
  if (!harness.empty()) {
    run.kind = "error";
    run.type = "harness";
    run.message = "the harness failed (outcome " + outcome + "): " + harness.front();
    for (const auto& e : harness) run.detail += e + "\n";
  } else if (auto why = UnexpectedOutcome(report)) {
    run.kind = "failure";
    run.type = "outcome";
    run.message = *why;
    run.detail = "outcome: " + outcome + "\n";
  }
  cases.push_back(run);
  const nlohmann::json& expectations = report.at("expectations");
  for (const auto& e : expectations) {
    Case c;
    c.name = "expect." + Str(e, "name");
    if (!e.value("pass", false)) {
      const nlohmann::json value = e.value("value", nlohmann::json());
      c.kind = "failure";
      c.type = "expectation";
      c.message = Str(e, "name") + ": measured " +
                  (value.is_null() ? (e.contains("reason") ? NullValueText(e) : std::string("null (not measured)"))
                                   : FormatValue(value)) +
                  "; limit " + FormatLimit(e.value("limit", nlohmann::json()));
      c.detail = e.dump(2) + "\n";
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

std::string JUnitXml(const std::vector<nlohmann::json>& reports) {
  std::map<std::string, int> name_count;
  for (const auto& r : reports) ++name_count[Str(r.at("scenario"), "name")];
  std::map<std::string, int> suite_names;

  std::string suites;
  size_t total_tests = 0, total_failures = 0, total_errors = 0;
  for (const auto& r : reports) {
    const nlohmann::json& sc = r.at("scenario");
    std::string name = Str(sc, "name");
    if (name_count[name] > 1) name += " [" + Str(r, "ccl") + ", seed " + Str(sc, "seed") + "]";
    if (int n = ++suite_names[name]; n > 1) name += " #" + std::to_string(n);
    const std::vector<Case> cases = CasesOf(r);
    size_t failures = 0, errors = 0, skipped = 0;
    for (const auto& c : cases) {
      failures += c.kind == "failure";
      errors += c.kind == "error";
      skipped += c.kind == "skipped";
    }
    total_tests += cases.size();
    total_failures += failures;
    total_errors += errors;

    suites += "  <testsuite name=\"" + XmlEscape(name) + "\" tests=\"" +
              std::to_string(cases.size()) + "\" failures=\"" + std::to_string(failures) +
              "\" errors=\"" + std::to_string(errors) + "\" skipped=\"" + std::to_string(skipped) +
              "\">\n";
    suites += "    <properties>\n";
    auto prop = [&](const std::string& key, const std::string& value) {
      if (value.empty()) return;
      suites += "      <property name=\"" + XmlEscape(key) + "\" value=\"" + XmlEscape(value) +
                "\"/>\n";
    };
    prop("scenario.file", Str(sc, "file"));
    prop("scenario.sha256", Str(sc, "sha256"));
    prop("seed", Str(sc, "seed"));
    prop("ccl", Str(r, "ccl"));
    prop("outcome", Str(r, "outcome"));
    prop("verdict", VerdictName(VerdictOf(r)));
    suites += "    </properties>\n";
    const std::string classname = XmlEscape("faultline." + name);
    for (const auto& c : cases) {
      suites += "    <testcase name=\"" + XmlEscape(c.name) + "\" classname=\"" + classname + "\"";
      if (c.kind.empty()) {
        suites += "/>\n";
        continue;
      }
      if (c.kind == "skipped") {
        suites += ">\n      <skipped message=\"" + XmlEscape(c.message) + "\"/>\n    </testcase>\n";
        continue;
      }
      suites += ">\n      <" + c.kind + " message=\"" + XmlEscape(c.message) + "\" type=\"" +
                XmlEscape(c.type) + "\">" + XmlText(c.detail) + "</" + c.kind + ">\n";
      suites += "    </testcase>\n";
    }
    const std::string line = r.contains("skipped") && r["skipped"].is_string()
                                 ? "SKIPPED: " + Str(sc, "name") + ": " + r["skipped"].get<std::string>()
                                 : VerdictLine(r);
    suites += "    <system-out>" + XmlText(line + "\n") + "</system-out>\n";
    suites += "  </testsuite>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"faultline\" tests=\"" +
         std::to_string(total_tests) + "\" failures=\"" + std::to_string(total_failures) +
         "\" errors=\"" + std::to_string(total_errors) + "\">\n" + suites + "</testsuites>\n";
}

}  // namespace faultline::reports
