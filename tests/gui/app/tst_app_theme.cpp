// SPDX-License-Identifier: MIT
// The message bar reads in both palettes: rendered offscreen, its text pixels against its own
// background reach WCAG AA contrast (4.5:1) at every level, light, dark, and after the desktop
// switches palette while a message shows.

#include "message_bar.h"
#include "theme.h"

#include <QApplication>
#include <QImage>
#include <QLabel>
#include <QStyleFactory>
#include <QTest>
#include <QVBoxLayout>

#include <map>

using namespace Qt::StringLiterals;
using cppl::app::MessageBar;

namespace {

/// The most common colour of the bar's image (its background) and the pixel of the label's area
/// that differs most from it (the text's ink): their contrast ratio.
double renderedContrast(MessageBar &bar)
{
    const QImage img = bar.grab().toImage().convertToFormat(QImage::Format_RGB32);
    std::map<QRgb, int> counts;
    for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x)
            ++counts[img.pixel(x, y)];
    QRgb bg = 0;
    int most = -1;
    for (const auto &[rgb, n] : counts)
        if (n > most) {
            most = n;
            bg = rgb;
        }
    const QLabel *label = nullptr;
    for (QLabel *l : bar.findChildren<QLabel *>())
        if (!l->text().isEmpty())
            label = l;
    const QRect area = label ? QRect(label->mapTo(&bar, QPoint(0, 0)), label->size()) : bar.rect();
    const qreal dpr = img.devicePixelRatio();
    double best = 1.0;
    for (int y = int(area.top() * dpr); y < int(area.bottom() * dpr) && y < img.height(); ++y)
        for (int x = int(area.left() * dpr); x < int(area.right() * dpr) && x < img.width(); ++x)
            best = std::max(best, MessageBar::contrastRatio(QColor(img.pixel(x, y)), QColor(bg)));
    return best;
}

} // namespace

class TestAppTheme : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QApplication::setStyle(QStyleFactory::create(u"Fusion"_s)); }

    void messageBarContrast_data()
    {
        QTest::addColumn<bool>("dark");
        QTest::addColumn<int>("level");
        for (bool dark : {false, true})
            for (auto [level, name] : {std::pair{MessageBar::Level::Error, "error"}, std::pair{MessageBar::Level::Warning, "warning"},
                                       std::pair{MessageBar::Level::Info, "info"}})
                QTest::addRow("%s, %s", dark ? "dark" : "light", name) << dark << int(level);
    }
    void messageBarContrast()
    {
        QFETCH(bool, dark);
        QFETCH(int, level);
        QApplication::setPalette(cppl::app::themePalette(dark));
        QWidget window;
        auto *layout = new QVBoxLayout(&window);
        auto *bar = new MessageBar(&window);
        layout->addWidget(bar);
        window.resize(700, 80);
        bar->showMessage(MessageBar::Level(level), u"Host node7 (port 22): cannot connect: Connection refused"_s);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        // The tint follows the palette: dark under a dark window, light under a light one.
        QCOMPARE(bar->background().lightness() < 128, dark);
        QVERIFY2(MessageBar::contrastRatio(bar->textColor(), bar->background()) >= 4.5,
                 qPrintable(u"text %1 on %2"_s.arg(bar->textColor().name(), bar->background().name())));
        const double rendered = renderedContrast(*bar);
        QVERIFY2(rendered >= 4.5, qPrintable(u"rendered contrast %1"_s.arg(rendered)));

        // The desktop switches to the other palette while the message is up.
        QApplication::setPalette(cppl::app::themePalette(!dark));
        QTRY_COMPARE(bar->background().lightness() < 128, !dark);
        QVERIFY(MessageBar::contrastRatio(bar->textColor(), bar->background()) >= 4.5);
        const double after = renderedContrast(*bar);
        QVERIFY2(after >= 4.5, qPrintable(u"rendered contrast after the switch %1"_s.arg(after)));
    }

    void contrastRatioKnownValues()
    {
        QCOMPARE(qRound(MessageBar::contrastRatio(Qt::black, Qt::white) * 10), 210);
        QCOMPARE(MessageBar::contrastRatio(QColor(0x80, 0x80, 0x80), QColor(0x80, 0x80, 0x80)), 1.0);
    }
};

QTEST_MAIN(TestAppTheme)
#include "tst_app_theme.moc"
