#include "reports/text.h"

#include <gtest/gtest.h>

#include "synthetic.h"

namespace faultline::reports {
namespace {

TEST(XmlEscape, EscapesMarkupAndQuotes) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(XmlEscape("tab\tnl\ncr\r"), "tab&#9;nl&#10;cr&#13;");
  EXPECT_EQ(XmlText("tab\tnl\n<"), "tab\tnl\n&lt;");
}

TEST(XmlEscape, ReplacesWhatXml10CannotCarry) {
  // NUL, ESC, a lone continuation byte and a truncated sequence.
  const std::string in = std::string("a\0b", 3) + "\x1b" + "\x80" + "\xE2\x82";
  EXPECT_EQ(XmlEscape(in), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  // Valid multi-byte text stays as it is.
  EXPECT_EQ(XmlEscape("µs → ✓ 𝄞"), "µs → ✓ 𝄞");
  // And the result parses as an attribute and as text.
  const std::string nasty = std::string("x\x01y\"<&>'\xff", 9);
  EXPECT_EQ(testing::XmlError("<a b=\"" + XmlEscape(nasty) + "\">" + XmlText(nasty) + "</a>"), "");
}

TEST(FormatNumber, TrimsZerosKeepsSign) {
  EXPECT_EQ(FormatNumber(812.25), "812.25");
  EXPECT_EQ(FormatNumber(12.0), "12");
  EXPECT_EQ(FormatNumber(0.12345), "0.123");
  EXPECT_EQ(FormatNumber(-0.0001), "0");
  EXPECT_EQ(FormatNumber(-3.5), "-3.5");
}

TEST(FormatValue, NullsAndTypes) {
  EXPECT_EQ(FormatValue(nullptr), "null");
  EXPECT_EQ(FormatValue(7), "7");
  EXPECT_EQ(FormatValue("survived"), "survived");
  EXPECT_EQ(FormatValue(true), "true");
}

TEST(FormatLimit, ObjectsAndScalars) {
  EXPECT_EQ(FormatLimit({{"max", 500.0}}), "max 500");
  EXPECT_EQ(FormatLimit({{"pct", 90}, {"within_ms", 1000}}), "pct 90, within_ms 1000");
  EXPECT_EQ(FormatLimit("survived"), "survived");
}

TEST(FormatCycles, SaysHowTheFlapWasPlayed) {
  // Three cycles: downs of 50, 60 and 52 ms, ups of 40 and 45 ms; the latest transition is the
  // second cycle's up, 10.5 ms after its time.
  const nlohmann::json fault = {
      {"id", "flap"},
      {"cycles",
       {{{"down_scheduled_s", 1.0}, {"down_s", 1.0005}, {"up_scheduled_s", 1.05}, {"up_s", 1.0505}},
        {{"down_scheduled_s", 1.09},
         {"down_s", 1.0905},
         {"up_scheduled_s", 1.14},
         {"up_s", 1.1505}},
        {{"down_scheduled_s", 1.19},
         {"down_s", 1.1955},
         {"up_scheduled_s", 1.24},
         {"up_s", 1.2475}}}}};
  EXPECT_EQ(FormatCycles(fault),
            "3 cycles played: down 52 ms (50 to 60), up 42.5 ms (40 to 45), median (min to max); "
            "the latest transition 10.5 ms after its time");
}

TEST(FormatCycles, SaysWhatWasNotPlayed) {
  const nlohmann::json fault = {{"cycles",
                                 {{{"down_scheduled_s", 1.0},
                                   {"down_s", nullptr},
                                   {"up_scheduled_s", 1.05},
                                   {"up_s", nullptr}},
                                  {{"down_scheduled_s", 1.09},
                                   {"down_s", 1.09},
                                   {"up_scheduled_s", nullptr},
                                   {"up_s", nullptr}}}}};
  EXPECT_EQ(FormatCycles(fault),
            "2 cycles played; the latest transition 0 ms after its time; 1 down(s) not applied; "
            "1 up(s) left to the final heal");
  EXPECT_EQ(FormatCycles({{"id", "f1"}, {"applied_s", 1.0}}), "");
  EXPECT_EQ(FormatCycles({{"cycles", nlohmann::json::array()}}), "");
}

TEST(FormatTarget, NamesEveryField) {
  EXPECT_EQ(FormatTarget({{"host", 1}, {"rail", 0}, {"side", "switch"}}), "host 1 rail 0 (switch)");
  EXPECT_EQ(FormatTarget({{"host", 0}, {"rank", 3}}), "host 0 rank 3");
}

TEST(MarkdownCell, EscapesPipesAndNewlines) {
  EXPECT_EQ(MarkdownCell("a|b\nc<d>"), "a\\|b c&lt;d&gt;");
}

}  // namespace
}  // namespace faultline::reports
