// Small helpers shared by dtplan's HTML reports (html_report.cc,
// validation_html.cc): escaping text for HTML/SVG, printf-style number
// formatting, and the page's opening (inline CSS; no scripts, no external
// resources). Pure; thread-safe.
#pragma once

#include <cstdio>
#include <string>

namespace dt::cli {

inline std::string Esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

inline std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// <!DOCTYPE html> ... <body>: the common style of dtplan's pages.
inline std::string HtmlHead(const std::string& title) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + Esc(title) +
         "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
         "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;"
         "text-align:right}th{background:#eee}table.rank tr:nth-child(2){background:#e8f0ff}td.l{text-align:left}"
         ".legend{font-size:12px}.legend span{display:inline-block;width:14px;height:10px}"
         "figure{display:inline-block;margin:0 24px 12px 0;vertical-align:top}"
         "figcaption{font-size:13px;max-width:560px}"
         "p.note{max-width:900px;border-left:4px solid #d08000;padding:4px 10px;background:#fff6e5}</style>"
         "</head><body>\n";
}

}  // namespace dt::cli
