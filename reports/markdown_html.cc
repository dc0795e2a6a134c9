#include "reports/markdown_html.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace faultline::reports {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The length of an entity reference at the start of `s` (&lt; &#39; ...), 0 when none.
size_t EntityLength(std::string_view s) {
  if (s.size() < 3 || s[0] != '&') return 0;
  size_t i = 1;
  if (s[i] == '#') {
    ++i;
    const size_t digits = i;
    while (i < s.size() && i < 10 && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == digits) return 0;
  } else {
    const size_t letters = i;
    while (i < s.size() && i < 10 && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    if (i == letters) return 0;
  }
  return i < s.size() && s[i] == ';' ? i + 1 : 0;
}

// Escaped text with its entities kept and backslash escapes resolved.
std::string Text(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\' && i + 1 < s.size() && std::string_view("|\\*`_#-").find(s[i + 1]) !=
                                             std::string_view::npos) {
      out += s[++i];
      continue;
    }
    if (c == '&') {
      if (size_t n = EntityLength(s.substr(i)); n > 0) {
        out.append(s.substr(i, n));
        i += n - 1;
      } else {
        out += "&amp;";
      }
      continue;
    }
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Inline markup: `code` and **bold**; the rest through Text.
std::string Inline(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out += Text(s.substr(i, 2));
      i += 2;
      continue;
    }
    if (s[i] == '`') {
      const size_t end = s.find('`', i + 1);
      if (end != std::string_view::npos) {
        out += "<code>" + Text(s.substr(i + 1, end - i - 1)) + "</code>";
        i = end + 1;
        continue;
      }
    }
    if (s.substr(i, 2) == "**") {
      const size_t end = s.find("**", i + 2);
      if (end != std::string_view::npos && end > i + 2) {
        out += "<strong>" + Inline(s.substr(i + 2, end - i - 2)) + "</strong>";
        i = end + 2;
        continue;
      }
    }
    size_t j = i + 1;
    while (j < s.size() && s[j] != '`' && s[j] != '\\' && s.substr(j, 2) != "**") ++j;
    out += Text(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// A table row's cells: split on '|' not escaped by a backslash, outer pipes dropped.
std::vector<std::string_view> Cells(std::string_view line) {
  line = Trim(line);
  if (!line.empty() && line.front() == '|') line.remove_prefix(1);
  if (line.size() >= 2 && line.back() == '|' && line[line.size() - 2] != '\\') line.remove_suffix(1);
  std::vector<std::string_view> cells;
  size_t from = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\') {
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(Trim(line.substr(from, i - from)));
      from = i + 1;
    }
  }
  cells.push_back(Trim(line.substr(from)));
  return cells;
}

bool IsSeparator(std::string_view line) {
  line = Trim(line);
  if (line.empty() || line.front() != '|') return false;
  bool dash = false;
  for (char c : line) {
    if (c == '-') {
      dash = true;
    } else if (c != '|' && c != ':' && c != ' ') {
      return false;
    }
  }
  return dash;
}

const char* Align(std::string_view sep) {
  sep = Trim(sep);
  const bool left = !sep.empty() && sep.front() == ':';
  const bool right = !sep.empty() && sep.back() == ':';
  if (left && right) return " style=\"text-align:center\"";
  if (right) return " style=\"text-align:right\"";
  return "";
}

bool IsListItem(std::string_view line) {
  line = Trim(line);
  return line.size() >= 2 && (line[0] == '-' || line[0] == '*') && line[1] == ' ';
}

int HeadingLevel(std::string_view line) {
  int n = 0;
  while (n < static_cast<int>(line.size()) && line[n] == '#') ++n;
  return n >= 1 && n <= 6 && static_cast<size_t>(n) < line.size() && line[n] == ' ' ? n : 0;
}

}  // namespace

std::string MarkdownToHtml(std::string_view md, int heading_offset) {
  std::vector<std::string_view> lines;
  for (size_t from = 0; from <= md.size();) {
    size_t nl = md.find('\n', from);
    if (nl == std::string_view::npos) nl = md.size();
    std::string_view l = md.substr(from, nl - from);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    lines.push_back(l);
    from = nl + 1;
  }
  std::string out;
  std::string para;
  auto flush = [&] {
    if (!para.empty()) out += "<p>" + Inline(para) + "</p>\n";
    para.clear();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const std::string_view t = Trim(line);
    if (t.empty()) {
      flush();
      continue;
    }
    if (t.substr(0, 3) == "```") {
      flush();
      std::string code;
      for (++i; i < lines.size() && Trim(lines[i]).substr(0, 3) != "```"; ++i) {
        code += Text(lines[i]) + "\n";
      }
      out += "<pre>" + code + "</pre>\n";
      continue;
    }
    if (int level = HeadingLevel(t); level > 0) {
      flush();
      const int h = std::min(6, level + std::max(0, heading_offset));
      out += "<h" + std::to_string(h) + ">" + Inline(Trim(t.substr(level))) + "</h" +
             std::to_string(h) + ">\n";
      continue;
    }
    if (t.front() == '|' && i + 1 < lines.size() && IsSeparator(lines[i + 1])) {
      flush();
      const std::vector<std::string_view> head = Cells(t);
      const std::vector<std::string_view> seps = Cells(lines[i + 1]);
      out += "<table>\n<tr>";
      for (size_t c = 0; c < head.size(); ++c) {
        out += std::string("<th") + (c < seps.size() ? Align(seps[c]) : "") + ">" +
               Inline(head[c]) + "</th>";
      }
      out += "</tr>\n";
      for (i += 2; i < lines.size() && !Trim(lines[i]).empty() && Trim(lines[i]).front() == '|';
           ++i) {
        const std::vector<std::string_view> row = Cells(lines[i]);
        out += "<tr>";
        for (size_t c = 0; c < head.size(); ++c) {
          out += std::string("<td") + (c < seps.size() ? Align(seps[c]) : "") + ">" +
                 (c < row.size() ? Inline(row[c]) : "") + "</td>";
        }
        out += "</tr>\n";
      }
      --i;
      out += "</table>\n";
      continue;
    }
    if (IsListItem(t)) {
      flush();
      out += "<ul>\n";
      for (; i < lines.size() && IsListItem(lines[i]); ++i) {
        std::string item(Trim(lines[i]).substr(2));
        // Continuation lines (indented, not a new item) belong to the item.
        while (i + 1 < lines.size() && !Trim(lines[i + 1]).empty() && !IsListItem(lines[i + 1]) &&
               std::isspace(static_cast<unsigned char>(lines[i + 1].front()))) {
          item.push_back(' ');
          item.append(Trim(lines[++i]));
        }
        out += "<li>" + Inline(item) + "</li>\n";
      }
      --i;
      out += "</ul>\n";
      continue;
    }
    if (!para.empty()) para += " ";
    para += std::string(t);
  }
  flush();
  return out;
}

}  // namespace faultline::reports
