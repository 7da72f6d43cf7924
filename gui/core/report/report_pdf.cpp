// SPDX-License-Identifier: MIT
// The PDF report: A4 pages drawn with QPainter on a QPdfWriter, so text stays text (selectable,
// pdftotext reads it) and charts stay vector paths.
#include "report/report_charts.h"
#include "report/report_document.h"

#include "charts/chart_export.h"

#include <QBuffer>
#include <QFontMetricsF>
#include <QPageLayout>
#include <QPainter>
#include <QPdfWriter>

#include <map>

using namespace Qt::StringLiterals;

namespace cppl::core::report {

namespace {

constexpr int kDpi = 96; // one unit = one CSS px: fonts and charts as on screen
constexpr double kChartHeight = 300;
constexpr double kCellPad = 3;

bool hasLongWord(const QString &s)
{
    int run = 0;
    for (QChar c : s) {
        run = c.isSpace() ? 0 : run + 1;
        if (run > 36)
            return true;
    }
    return false;
}

class PdfLayout
{
public:
    PdfLayout(QPdfWriter &writer, QString footer) : m_writer(writer), m_footer(std::move(footer))
    {
        m_painter.begin(&writer);
        const QRectF page = writer.pageLayout().paintRectPixels(kDpi);
        m_width = page.width();
        m_height = page.height() - 24; // room for the footer
        m_base = reportFont(8.5);
    }

    void finish()
    {
        footer();
        m_painter.end();
    }

    QFont font(double pt, bool bold = false, bool italic = false) const
    {
        QFont f = m_base;
        f.setPointSizeF(pt);
        f.setBold(bold);
        f.setItalic(italic);
        return f;
    }

    void ensure(double h)
    {
        if (m_y + h > m_height && m_y > 0)
            newPage();
    }

    void newPage()
    {
        footer();
        m_writer.newPage();
        m_y = 0;
        ++m_page;
    }

    double textHeight(const QFont &f, const QString &s, double width, int flags) const
    {
        const QFontMetricsF fm(f, &m_writer);
        return fm.boundingRect(QRectF(0, 0, width, 1e6), flags, s).height();
    }

    /// @p keepWithNext: room the next block needs on the same page (a heading never ends a page).
    void text(const QString &s, const QFont &f, const QColor &color, double spaceBefore, double spaceAfter, const QColor &fill = {},
              double keepWithNext = 0)
    {
        const int flags = Qt::AlignLeft | Qt::AlignTop | (hasLongWord(s) ? Qt::TextWrapAnywhere : Qt::TextWordWrap);
        const double pad = fill.isValid() ? 4 : 0;
        const double h = textHeight(f, s, m_width - 2 * pad, flags) + 2 * pad;
        m_y += spaceBefore;
        ensure(h + keepWithNext);
        if (fill.isValid())
            m_painter.fillRect(QRectF(0, m_y, m_width, h), fill);
        m_painter.setFont(f);
        m_painter.setPen(color);
        m_painter.drawText(QRectF(pad, m_y + pad, m_width - 2 * pad, h), flags, s);
        m_y += h + spaceAfter;
    }

    void table(const Table &t, bool keyValues)
    {
        std::vector<double> w = t.widths;
        if (w.size() != static_cast<size_t>(t.header.size()))
            w.assign(static_cast<size_t>(t.header.size()), 1.0);
        double sum = 0;
        for (double x : w)
            sum += x;
        for (double &x : w)
            x = x / sum * m_width;
        const QFont body = font(keyValues ? 8.5 : 7.5);
        const QFont head = font(keyValues ? 8.5 : 7.5, true);
        auto rowHeight = [&](const std::vector<Cell> &cells, const QFont &f) {
            double h = 0;
            for (size_t i = 0; i < cells.size() && i < w.size(); ++i)
                h = std::max(h, textHeight(f, cells[i].text, w[i] - 2 * kCellPad, flags(cells[i].text)));
            return h + 2 * kCellPad;
        };
        auto drawRow = [&](const std::vector<Cell> &cells, const QFont &f, double h, const QColor &fill, bool bold) {
            if (fill.isValid())
                m_painter.fillRect(QRectF(0, m_y, m_width, h), fill);
            m_painter.setFont(f);
            m_painter.setPen(bold ? QColor(0x1f, 0x2a, 0x44) : QColor(0x20, 0x20, 0x20));
            double x = 0;
            for (size_t i = 0; i < cells.size() && i < w.size(); ++i) {
                const int align = cells[i].numeric ? Qt::AlignRight : Qt::AlignLeft;
                m_painter.drawText(QRectF(x + kCellPad, m_y + kCellPad, w[i] - 2 * kCellPad, h - 2 * kCellPad),
                                   align | Qt::AlignTop | flags(cells[i].text), cells[i].text);
                x += w[i];
            }
            m_painter.setPen(QPen(QColor(0xd0, 0xd4, 0xdc), 0.5));
            m_painter.drawLine(QPointF(0, m_y + h), QPointF(m_width, m_y + h));
            m_y += h;
        };
        std::vector<Cell> header;
        for (int i = 0; i < t.header.size(); ++i) // column names align with their figures
            header.push_back({t.header[i], {}, !t.rows.empty() && static_cast<size_t>(i) < t.rows.front().size() && t.rows.front()[static_cast<size_t>(i)].numeric});
        const double headerH = rowHeight(header, head);
        auto drawHeader = [&] {
            if (!keyValues)
                drawRow(header, head, headerH, QColor(0xe4, 0xe9, 0xf2), true);
        };
        m_y += 4;
        ensure(headerH + (t.rows.empty() ? 0 : rowHeight(t.rows.front(), body)));
        drawHeader();
        for (size_t r = 0; r < t.rows.size(); ++r) {
            const double h = rowHeight(t.rows[r], body);
            if (m_y + h > m_height) {
                newPage();
                drawHeader(); // a table continued on a new page keeps its column names
            }
            std::vector<Cell> cells = t.rows[r];
            if (keyValues)
                drawRow(cells, body, h, r % 2 ? QColor() : QColor(0xf4, 0xf6, 0xf9), false);
            else
                drawRow(cells, body, h, r % 2 ? QColor(0xf4, 0xf6, 0xf9) : QColor(), false);
        }
        m_y += 6;
    }

    void chart(const charts::Chart &c, double height)
    {
        m_y += 4;
        ensure(height + 36); // keep the caption under it on the same page
        charts::renderToPainter(c, m_painter, QRectF(0, m_y, m_width, height));
        m_y += height + 2;
    }

private:
    static int flags(const QString &s) { return hasLongWord(s) ? Qt::TextWrapAnywhere : Qt::TextWordWrap; }

    void footer()
    {
        m_painter.setFont(font(7));
        m_painter.setPen(QColor(0x70, 0x70, 0x70));
        m_painter.drawText(QRectF(0, m_height + 8, m_width, 16), Qt::AlignLeft | Qt::AlignVCenter, m_footer);
        m_painter.drawText(QRectF(0, m_height + 8, m_width, 16), Qt::AlignRight | Qt::AlignVCenter, u"page %1"_s.arg(m_page));
    }

    QPdfWriter &m_writer;
    QPainter m_painter;
    QString m_footer;
    QFont m_base;
    double m_width = 0, m_height = 0, m_y = 0;
    int m_page = 1;
};

} // namespace

QByteArray reportPdf(const ReportData &data)
{
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    {
        QPdfWriter writer(&buffer);
        writer.setResolution(kDpi);
        writer.setPageLayout(QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Portrait, QMarginsF(14, 14, 14, 12), QPageLayout::Millimeter));
        writer.setTitle(reportTitle(data));
        writer.setCreator(u"ClusterPPL"_s);

        const charts::Theme theme = reportTheme(false);
        std::vector<ReportChart> cmpCharts = comparisonCharts(data, theme);
        std::map<int, std::vector<ReportChart>> runChartsByIndex;
        auto findChart = [&](int run, const QString &id) -> const charts::Chart * {
            std::vector<ReportChart> *list = &cmpCharts;
            if (run >= 0) {
                auto it = runChartsByIndex.find(run);
                if (it == runChartsByIndex.end())
                    it = runChartsByIndex.emplace(run, runCharts(data.runs[static_cast<size_t>(run)], theme)).first;
                list = &it->second;
            }
            for (const ReportChart &c : *list)
                if (c.id == id)
                    return c.chart.get();
            return nullptr;
        };

        PdfLayout l(writer, reportTitle(data));
        const QColor ink(0x1a, 0x1a, 0x1a), accent(0x1f, 0x3a, 0x6e), muted(0x5a, 0x5f, 0x6a);
        for (const Block &b : buildDocument(data)) {
            switch (b.kind) {
            case Block::Kind::Title: l.text(b.text, l.font(15, true), accent, 0, 4); break;
            case Block::Kind::Heading: l.text(b.text, l.font(12, true), accent, 12, 2, {}, 120); break;
            case Block::Kind::Subheading: l.text(b.text, l.font(10, true), accent, 8, 1, {}, 120); break;
            case Block::Kind::Note: l.text(b.text, l.font(7.5, false, true), muted, 1, 4); break;
            case Block::Kind::Paragraph:
                l.text(b.text, l.font(8.5, b.cssClass == u"ok"_s), ink, 3, 3,
                       b.cssClass == u"ok"_s ? QColor(0xe3, 0xf4, 0xe6) : b.cssClass == u"warn"_s ? QColor(0xfd, 0xf0, 0xd8) : QColor());
                break;
            case Block::Kind::Alert: l.text(u"alert  "_s + b.text, l.font(8.5), ink, 2, 2, QColor(0xfd, 0xf0, 0xd8)); break;
            case Block::Kind::KeyValues: l.table(b.table, true); break;
            case Block::Kind::Table: l.table(b.table, false); break;
            case Block::Kind::Chart:
                if (const charts::Chart *c = findChart(b.runIndex, b.chartId))
                    l.chart(*c, kChartHeight);
                break;
            }
        }
        l.finish();
    }
    return bytes;
}

} // namespace cppl::core::report
