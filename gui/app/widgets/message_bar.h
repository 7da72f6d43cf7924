// SPDX-License-Identifier: MIT
#pragma once

// A dismissable bar at the top of the window: every error reaches the user here with its specific
// cause (the log has it too, but never only the log).

#include <QColor>
#include <QWidget>

class QLabel;
class QToolButton;

namespace cppl::app {

class MessageBar : public QWidget
{
    Q_OBJECT

public:
    enum class Level { Info, Warning, Error };
    explicit MessageBar(QWidget *parent = nullptr);

    void showMessage(Level level, const QString &text);
    [[nodiscard]] QString text() const;
    [[nodiscard]] Level level() const noexcept { return m_level; }
    /// The bar's colours now (tests check their contrast in both palettes).
    [[nodiscard]] QColor background() const;
    [[nodiscard]] QColor textColor() const;
    /// WCAG contrast ratio of two colours, 1..21.
    [[nodiscard]] static double contrastRatio(const QColor &a, const QColor &b);

protected:
    void changeEvent(QEvent *event) override;
    void paintEvent(QPaintEvent *event) override;

private:
    void applyStyle();
    [[nodiscard]] QColor levelColor() const;
    QLabel *m_icon = nullptr;
    QLabel *m_label = nullptr;
    QToolButton *m_close = nullptr;
    Level m_level = Level::Info;
};

} // namespace cppl::app
