// SPDX-License-Identifier: MIT
#include "message_bar.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QStyle>
#include <QToolButton>

using namespace Qt::StringLiterals;

namespace cppl::app {

MessageBar::MessageBar(QWidget *parent)
    : QWidget(parent)
{
    setObjectName(u"messageBar"_s);
    setAutoFillBackground(true);
    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(8, 4, 4, 4);
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
    if (event->type() == QEvent::StyleChange)
        applyStyle();
}

void MessageBar::applyStyle()
{
    // Tinted from the window colour so it reads in light and dark palettes; the icon and the word
    // "Error"/"Warning" in the text carry the level for those who do not see the tint.
    const QColor window = parentWidget() ? parentWidget()->palette().color(QPalette::Window) : palette().color(QPalette::Window);
    const bool dark = window.lightness() < 128;
    QColor tint = m_level == Level::Error ? QColor(0xd5, 0x5e, 0x00) : m_level == Level::Warning ? QColor(0xe6, 0x9f, 0x00) : QColor(0x00, 0x72, 0xb2);
    QColor bg = window;
    const float a = dark ? 0.35f : 0.18f;
    bg.setRgbF(window.redF() * (1 - a) + tint.redF() * a, window.greenF() * (1 - a) + tint.greenF() * a,
               window.blueF() * (1 - a) + tint.blueF() * a);
    QPalette p = palette();
    p.setColor(QPalette::Window, bg);
    setPalette(p);
    const QStyle::StandardPixmap icon = m_level == Level::Error     ? QStyle::SP_MessageBoxCritical
                                        : m_level == Level::Warning ? QStyle::SP_MessageBoxWarning
                                                                    : QStyle::SP_MessageBoxInformation;
    const int size = style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, this);
    m_icon->setPixmap(style()->standardIcon(icon, nullptr, this).pixmap(size, size));
}

} // namespace cppl::app
