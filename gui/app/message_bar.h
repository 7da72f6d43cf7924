// SPDX-License-Identifier: MIT
#pragma once

// A dismissable bar at the top of the window: every error reaches the user here with its specific
// cause (the log has it too, but never only the log).

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

protected:
    void changeEvent(QEvent *event) override;

private:
    void applyStyle();
    QLabel *m_icon = nullptr;
    QLabel *m_label = nullptr;
    QToolButton *m_close = nullptr;
    Level m_level = Level::Info;
};

} // namespace cppl::app
