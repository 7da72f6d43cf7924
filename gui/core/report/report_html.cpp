// SPDX-License-Identifier: MIT
// The HTML report: one file, inline CSS, charts as inline SVG (light and dark renders, switched by
// prefers-color-scheme), no reference to anything outside the file.
#include "report/report_charts.h"
#include "report/report_document.h"

#include "charts/chart_export.h"

#include <QRegularExpression>

#include <map>

using namespace Qt::StringLiterals;

namespace cppl::core::report {

namespace {

constexpr QSize kChartSize(900, 340);

const char kCss[] = R"(
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1a1a1a; --muted: #5a5f6a; --accent: #1f3a6e; --rule: #d0d4dc;
        --head: #e4e9f2; --stripe: #f4f6f9; --ok: #e3f4e6; --warn: #fdf0d8; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #16181d; --fg: #e6e6e6; --muted: #a0a6b0; --accent: #9cb8f0; --rule: #3a3f4a;
          --head: #262b36; --stripe: #1d2027; --ok: #1e3a25; --warn: #3d3118; }
  .chart-light { display: none; }
  .chart-dark { display: block; }
}
body { background: var(--bg); color: var(--fg); font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       max-width: 1000px; margin: 2em auto; padding: 0 1em; }
h1 { color: var(--accent); font-size: 1.6em; margin-bottom: 0.2em; }
h2 { color: var(--accent); font-size: 1.3em; border-bottom: 1px solid var(--rule); padding-bottom: 0.2em; margin-top: 1.6em; }
h3 { color: var(--accent); font-size: 1.1em; margin-top: 1.2em; }
p.note { color: var(--muted); font-size: 0.9em; font-style: italic; margin-top: 0.2em; }
p.ok { background: var(--ok); padding: 0.4em 0.6em; font-weight: 600; }
p.warn, p.alert { background: var(--warn); padding: 0.4em 0.6em; }
table { border-collapse: collapse; width: 100%; margin: 0.6em 0; font-size: 0.9em; }
th { background: var(--head); text-align: left; }
th, td { padding: 0.25em 0.5em; border-bottom: 1px solid var(--rule); vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.kv td:first-child { width: 12em; color: var(--muted); }
table.kv td { overflow-wrap: anywhere; }
tbody tr:nth-child(even) { background: var(--stripe); }
figure { margin: 1em 0; }
figure svg { width: 100%; height: auto; display: block; }
.chart-dark { display: none; }
)";

QString esc(const QString &s)
{
    return s.toHtmlEscaped();
}

/// QSvgGenerator writes a standalone document; inline SVG in HTML needs none of its prolog or
/// namespace declarations (which would be the file's only URLs).
QString inlineSvg(const QByteArray &svg, const QString &idPrefix)
{
    QString s = QString::fromUtf8(svg);
    const qsizetype start = s.indexOf(u"<svg"_s);
    if (start > 0)
        s = s.mid(start);
    static const QRegularExpression ns(uR"re(\s+xmlns(:\w+)?="[^"]*")re"_s);
    s.remove(ns);
    static const QRegularExpression baseProfile(uR"re(\s+(version|baseProfile)="[^"]*")re"_s);
    s.remove(baseProfile);
    // Fixed width/height attributes would stop the figure from following the page width.
    static const QRegularExpression size(uR"re(<svg([^>]*?)\s+width="[^"]*"([^>]*?)\s+height="[^"]*")re"_s);
    s.replace(size, u"<svg\\1\\2"_s);
    // Ids (fill patterns) are document-wide in HTML: each chart, light and dark, gets its own.
    s.replace(u"id=\""_s, u"id=\""_s + idPrefix);
    s.replace(u"url(#"_s, u"url(#"_s + idPrefix);
    s.replace(u"href=\"#"_s, u"href=\"#"_s + idPrefix);
    return s;
}

void table(QString &h, const Table &t, bool keyValues)
{
    h += keyValues ? u"<table class=\"kv\">"_s : u"<table>"_s;
    if (!keyValues) {
        h += u"<thead><tr>"_s;
        for (int i = 0; i < t.header.size(); ++i) {
            const bool numeric = !t.rows.empty() && static_cast<size_t>(i) < t.rows.front().size() && t.rows.front()[static_cast<size_t>(i)].numeric;
            h += (numeric ? u"<th class=\"num\">"_s : u"<th>"_s) + esc(t.header[i]) + u"</th>"_s;
        }
        h += u"</tr></thead>"_s;
    }
    h += u"<tbody>\n"_s;
    for (const auto &row : t.rows) {
        h += u"<tr>"_s;
        for (const Cell &c : row) {
            h += c.numeric ? u"<td class=\"num\""_s : u"<td"_s;
            if (!c.exact.isEmpty())
                h += u" data-value=\""_s + esc(c.exact) + u'"';
            h += u'>' + esc(c.text) + u"</td>"_s;
        }
        h += u"</tr>\n"_s;
    }
    h += u"</tbody></table>\n"_s;
}

} // namespace

QByteArray reportHtml(const ReportData &data)
{
    const charts::Theme light = reportTheme(false), dark = reportTheme(true);
    std::map<int, std::pair<std::vector<ReportChart>, std::vector<ReportChart>>> chartSets;
    auto svgOf = [&](int run, const QString &id, bool isDark) -> QString {
        auto it = chartSets.find(run);
        if (it == chartSets.end()) {
            if (run < 0)
                it = chartSets.emplace(run, std::make_pair(comparisonCharts(data, light), comparisonCharts(data, dark))).first;
            else
                it = chartSets.emplace(run, std::make_pair(runCharts(data.runs[static_cast<size_t>(run)], light),
                                                           runCharts(data.runs[static_cast<size_t>(run)], dark))).first;
        }
        for (const ReportChart &c : isDark ? it->second.second : it->second.first)
            if (c.id == id)
                return inlineSvg(charts::renderToSvg(*c.chart, kChartSize),
                                 u"c%1-%2-%3-"_s.arg(run < 0 ? u"cmp"_s : QString::number(run), id, isDark ? u"d"_s : u"l"_s));
        return {};
    };

    QString h;
    h += u"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"_s
         + esc(reportTitle(data)) + u"</title>\n<style>"_s + QString::fromUtf8(kCss) + u"</style>\n</head>\n<body>\n"_s;
    for (const Block &b : buildDocument(data)) {
        switch (b.kind) {
        case Block::Kind::Title: h += u"<h1>"_s + esc(b.text) + u"</h1>\n"_s; break;
        case Block::Kind::Heading: h += u"<h2>"_s + esc(b.text) + u"</h2>\n"_s; break;
        case Block::Kind::Subheading: h += u"<h3>"_s + esc(b.text) + u"</h3>\n"_s; break;
        case Block::Kind::Note: h += u"<p class=\"note\">"_s + esc(b.text) + u"</p>\n"_s; break;
        case Block::Kind::Paragraph:
            h += (b.cssClass.isEmpty() ? u"<p>"_s : u"<p class=\""_s + b.cssClass + u"\">"_s) + esc(b.text) + u"</p>\n"_s;
            break;
        case Block::Kind::Alert: h += u"<p class=\"alert\">"_s + esc(b.text) + u"</p>\n"_s; break;
        case Block::Kind::KeyValues: table(h, b.table, true); break;
        case Block::Kind::Table: table(h, b.table, false); break;
        case Block::Kind::Chart:
            h += u"<figure id=\"chart-%1-%2\">\n<div class=\"chart-light\">"_s.arg(b.runIndex < 0 ? u"comparison"_s : QString::number(b.runIndex), b.chartId)
                 + svgOf(b.runIndex, b.chartId, false) + u"</div>\n<div class=\"chart-dark\">"_s + svgOf(b.runIndex, b.chartId, true)
                 + u"</div>\n</figure>\n"_s;
            break;
        }
    }
    h += u"</body>\n</html>\n"_s;
    return h.toUtf8();
}

} // namespace cppl::core::report
