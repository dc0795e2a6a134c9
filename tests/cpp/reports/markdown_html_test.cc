// reports/markdown_html.h on the Markdown the project writes: tables become tables (with
// alignment), headings shift, lists and code blocks render, and nothing in the text becomes
// markup (escaped once: entities MarkdownCell wrote stay as they are).
#include "reports/markdown_html.h"

#include <gtest/gtest.h>

#include "reports/text.h"

namespace faultline::reports {
namespace {

TEST(MarkdownHtml, PipeTableWithAlignmentAndEscapedPipes) {
  const std::string html = MarkdownToHtml(
      "### Inputs\n\n| input | value |\n|---|---:|\n| rate a\\|b | 12.5 |\n| `x` | **3** |\n");
  EXPECT_EQ(html,
            "<h3>Inputs</h3>\n<table>\n<tr><th>input</th><th style=\"text-align:right\">value"
            "</th></tr>\n<tr><td>rate a|b</td><td style=\"text-align:right\">12.5</td></tr>\n"
            "<tr><td><code>x</code></td><td style=\"text-align:right\"><strong>3</strong></td>"
            "</tr>\n</table>\n");
}

TEST(MarkdownHtml, HeadingsShiftAndStopAtSix) {
  EXPECT_EQ(MarkdownToHtml("# A\n###### B\n", 1), "<h2>A</h2>\n<h6>B</h6>\n");
  EXPECT_EQ(MarkdownToHtml("#no space\n"), "<p>#no space</p>\n");
}

TEST(MarkdownHtml, ListsParagraphsAndCode) {
  EXPECT_EQ(MarkdownToHtml("text one\ntext two\n\n- a\n  continued\n- b\n\n```\n<x> & y\n```\n"),
            "<p>text one text two</p>\n<ul>\n<li>a continued</li>\n<li>b</li>\n</ul>\n"
            "<pre>&lt;x&gt; &amp; y\n</pre>\n");
}

TEST(MarkdownHtml, NothingBecomesMarkup) {
  const std::string html =
      MarkdownToHtml("<script>alert(1)</script> & \"q\"\n\n| <b>x</b> |\n|---|\n| <img> |\n");
  EXPECT_EQ(html.find("<script"), std::string::npos) << html;
  EXPECT_EQ(html.find("<b>"), std::string::npos) << html;
  EXPECT_EQ(html.find("<img"), std::string::npos) << html;
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot;"),
            std::string::npos)
      << html;
  // A cell MarkdownCell escaped renders as the text it escaped, escaped once.
  const std::string cell = MarkdownCell("a<b>|c&d");
  const std::string t = MarkdownToHtml("| h |\n|---|\n| " + cell + " |\n");
  EXPECT_NE(t.find("<td>a&lt;b&gt;|c&amp;d</td>"), std::string::npos) << t;
}

}  // namespace
}  // namespace faultline::reports
