// SPDX-License-Identifier: MIT
#include "message_bar.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QStyle>
#include <QToolButton>

#include <algorithm>
#include <cmath>

using namespace Qt::StringLiterals;

namespace cppl::app {

MessageBar::MessageBar(QWidget *parent)
    : QWidget(parent)
{
    setObjectName(u"messageBar"_s);
    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(10, 4, 4, 4);
    m_icon = new QLabel(this);
    m_label = new QLabel(this);
    m_label->setWordWrap(true);
    m_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_close = new QToolButton(this);
    m_close->setAutoRaise(true);
    m_close->setText(u"✕"_s);
    m_close->setToolTip(tr("Dismiss"));
    layout->addWidget(m_icon);
    layout->addWidget(m_label, 1);
    layout->addWidget(m_close);
    connect(m_close, &QToolButton::clicked, this, &QWidget::hide);
    hide();
}

void MessageBar::showMessage(Level level, const QString &text)
{
    m_level = level;
    m_label->setText(text);
    applyStyle();
    show();
}

QString MessageBar::text() const
{
    return isVisible() || !isHidden() ? m_label->text() : QString();
}

void MessageBar::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    // The desktop may switch between light and dark while a message shows: recompute then too.
    // Only child palettes are set here, so this never feeds back into a PaletteChange of our own.
    if (event->type() == QEvent::StyleChange || event->type() == QEvent::PaletteChange)
        applyStyle();
}

namespace {

double luminance(const QColor &c)
{
    auto lin = [](double v) { return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF());
}

QColor mix(const QColor &a, const QColor &b, double t)
{
    return QColor::fromRgbF(float(a.redF() * (1 - t) + b.redF() * t), float(a.greenF() * (1 - t) + b.greenF() * t),
                            float(a.blueF() * (1 - t) + b.blueF() * t));
}

} // namespace

double MessageBar::contrastRatio(const QColor &a, const QColor &b)
{
    const double la = luminance(a), lb = luminance(b);
    return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

QColor MessageBar::levelColor() const
{
    return m_level == Level::Error ? QColor(0xd5, 0x5e, 0x00) : m_level == Level::Warning ? QColor(0xe6, 0x9f, 0x00) : QColor(0x00, 0x72, 0xb2);
}

QColor MessageBar::background() const
{
    // A tint of the window colour, so the bar belongs to either palette; the stripe, the icon and
    // the message's own words carry the level for those who do not see the tint.
    const QColor window = palette().color(QPalette::Window);
    return mix(window, levelColor(), window.lightness() < 128 ? 0.30 : 0.16);
}

QColor MessageBar::textColor() const
{
    // The palette's text colour unless it is too faint on the tint (WCAG AA: 4.5:1); then black or
    // white, whichever reads better. A hard-coded light or dark text is what made it unreadable.
    const QColor bg = background();
    const QColor text = palette().color(QPalette::WindowText);
    if (contrastRatio(text, bg) >= 4.5)
        return text;
    return contrastRatio(Qt::black, bg) >= contrastRatio(Qt::white, bg) ? QColor(Qt::black) : QColor(Qt::white);
}

void MessageBar::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    p.fillRect(rect(), background());
    p.fillRect(QRect(0, 0, 4, height()), levelColor());
}

void MessageBar::applyStyle()
{
    const QColor text = textColor();
    for (QWidget *w : {static_cast<QWidget *>(m_label), static_cast<QWidget *>(m_close)}) {
        QPalette p = w->palette();
        p.setColor(QPalette::WindowText, text);
        p.setColor(QPalette::ButtonText, text);
        p.setColor(QPalette::Text, text);
        w->setPalette(p);
    }
    const QStyle::StandardPixmap icon = m_level == Level::Error     ? QStyle::SP_MessageBoxCritical
                                        : m_level == Level::Warning ? QStyle::SP_MessageBoxWarning
                                                                    : QStyle::SP_MessageBoxInformation;
    const int size = style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, this);
    m_icon->setPixmap(style()->standardIcon(icon, nullptr, this).pixmap(size, size));
    update();
}

} // namespace cppl::app
