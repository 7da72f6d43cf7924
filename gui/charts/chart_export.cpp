// SPDX-License-Identifier: MIT
#include "charts/chart_export.h"

#include "charts/chart.h"

#include <cppl/errors.h>

#include <QBuffer>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>

namespace cppl::charts {
namespace {

void writeFile(const QString &path, const QByteArray &data, const char *what)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(data) != data.size() || !file.commit()) {
        throw IoError(std::string("cannot write the ") + what + " chart file '" + path.toStdString() + "': " +
                      file.errorString().toStdString() + "; check that the folder exists and is writable");
    }
}

} // namespace

QImage renderToImage(const Chart &chart, QSize size, qreal dpr)
{
    QImage image(size * dpr, QImage::Format_ARGB32_Premultiplied);
    image.setDevicePixelRatio(dpr);
    image.fill(chart.theme().background);
    QPainter painter(&image);
    chart.paint(painter, QRectF(QPointF(0, 0), QSizeF(size)));
    return image;
}

QByteArray renderToSvg(const Chart &chart, QSize size)
{
    QByteArray out;
    QBuffer buffer(&out);
    buffer.open(QIODevice::WriteOnly);
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(size);
    generator.setViewBox(QRect(QPoint(0, 0), size));
    generator.setTitle(chart.title());
    generator.setDescription(QStringLiteral("ClusterPPL chart"));
    QPainter painter(&generator);
    chart.paint(painter, QRectF(QPointF(0, 0), QSizeF(size)));
    painter.end();
    return out;
}

void renderToSvgFile(const Chart &chart, const QString &path, QSize size)
{
    writeFile(path, renderToSvg(chart, size), "SVG");
}

QByteArray renderToPdf(const Chart &chart, QSize size)
{
    QByteArray out;
    QBuffer buffer(&out);
    buffer.open(QIODevice::WriteOnly);
    QPdfWriter writer(&buffer);
    // 96 dpi: one device unit per screen pixel, so the layout and font sizes match the screen.
    writer.setResolution(96);
    writer.setPageSize(QPageSize(QSizeF(size) * 72.0 / 96.0, QPageSize::Point, QString(), QPageSize::ExactMatch));
    writer.setPageMargins(QMarginsF(0, 0, 0, 0));
    writer.setTitle(chart.title());
    writer.setCreator(QStringLiteral("ClusterPPL"));
    QPainter painter(&writer);
    chart.paint(painter, QRectF(QPointF(0, 0), QSizeF(size)));
    painter.end();
    return out;
}

void renderToPdfFile(const Chart &chart, const QString &path, QSize size)
{
    writeFile(path, renderToPdf(chart, size), "PDF");
}

void renderToPainter(const Chart &chart, QPainter &painter, const QRectF &rect)
{
    chart.paint(painter, rect);
}

} // namespace cppl::charts
