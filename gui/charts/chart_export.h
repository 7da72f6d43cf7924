// SPDX-License-Identifier: MIT
#pragma once

#include <QByteArray>
#include <QImage>
#include <QSize>
#include <QString>

class QPainter;
class QRectF;

namespace cppl::charts {

class Chart;

/// The chart at size (device-independent px) on an image of size * dpr pixels with that DPR set.
QImage renderToImage(const Chart &chart, QSize size, qreal dpr = 1.0);

/// SVG document of the chart (vector: lines and text stay lines and text; a heat map is an embedded image).
QByteArray renderToSvg(const Chart &chart, QSize size);
/// Writes the SVG to path; throws cppl::IoError naming the path and the reason.
void renderToSvgFile(const Chart &chart, const QString &path, QSize size);

/// One-page vector PDF, page size = size px at 96 dpi (so fonts and lines look as on screen).
QByteArray renderToPdf(const Chart &chart, QSize size);
/// Writes the PDF to path; throws cppl::IoError naming the path and the reason.
void renderToPdfFile(const Chart &chart, const QString &path, QSize size);
/// Into a report being drawn (e.g. on a QPdfWriter with several charts per page).
void renderToPainter(const Chart &chart, QPainter &painter, const QRectF &rect);

} // namespace cppl::charts
