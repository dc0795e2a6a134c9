// The Markdown the project writes (summary.md, trend.md, simulation.md, index.md), rendered
// as HTML for the pages that show it: ATX headings, pipe tables (with `---:` / `:---:`
// alignment), `-`/`*` lists, fenced code blocks, paragraphs, and inline `code` and **bold**.
// Everything else is text. Text is escaped; an entity the Markdown already holds (&lt; &gt;
// &amp; &quot; &#NN;, as MarkdownCell writes them) is kept as it is, and a backslash escape
// (\| \\ \* \`) yields the character. No raw HTML passes through. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace faultline::reports {

// `heading_offset` shifts heading levels (1: `#` becomes <h2>), so a page's own <h1> stays
// the only one; levels stop at <h6>.
std::string MarkdownToHtml(std::string_view md, int heading_offset = 0);

}  // namespace faultline::reports
