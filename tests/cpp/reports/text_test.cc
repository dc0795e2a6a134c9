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

TEST(FormatTarget, NamesEveryField) {
  EXPECT_EQ(FormatTarget({{"host", 1}, {"rail", 0}, {"side", "switch"}}), "host 1 rail 0 (switch)");
  EXPECT_EQ(FormatTarget({{"host", 0}, {"rank", 3}}), "host 0 rank 3");
}

TEST(MarkdownCell, EscapesPipesAndNewlines) {
  EXPECT_EQ(MarkdownCell("a|b\nc<d>"), "a\\|b c&lt;d&gt;");
}

}  // namespace
}  // namespace faultline::reports
