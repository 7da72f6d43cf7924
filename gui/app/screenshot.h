// SPDX-License-Identifier: MIT
#pragma once

#include "synthetic_history.h"

#include <QPalette>
#include <QStringList>
#include <QTemporaryDir>

namespace cppl::app {

class MainWindow;

/// For --screenshot --synthetic-ranks N: a temporary run store seeded with a synthetic node-count
/// sweep up to N ranks (synthetic_history.h), removed with this object. Construct the window with
/// path() (MainWindow's storePath) so that it never opens the user's store.
class ScreenshotStore
{
public:
    /// Throws cppl::IoError when the directory or the store cannot be made.
    explicit ScreenshotStore(int maxRanks);
    [[nodiscard]] QString path() const { return m_path; }
    [[nodiscard]] const SyntheticSweep &sweep() const noexcept { return m_sweep; }

private:
    QTemporaryDir m_dir;
    QString m_path;
    SyntheticSweep m_sweep;
};

/// Fusion's palette for "light" or "dark" (screenshots and --theme; the desktop's otherwise).
[[nodiscard]] QPalette themePalette(bool dark);

struct ScreenshotOptions
{
    QString directory;
    int syntheticRanks = 0;   ///< 0: the Run page as it is (idle); else a synthetic run mid-run and finished
    /// The runs of the window's store when it is a ScreenshotStore's: History shows them with the
    /// newest run selected and its detail (history-detail*.png), Compare the sweep. Null: History
    /// and Compare as the store has them.
    const SyntheticSweep *sweep = nullptr;
    int width = 1500;         ///< logical pixels; the device pixel ratio multiplies them
    int height = 940;
};

/// Renders every page of @p window offscreen (QWidget::grab) to PNG files in the directory and
/// returns their paths; throws nothing, an empty list with @p error set on failure.
QStringList renderScreenshots(MainWindow &window, const ScreenshotOptions &options, QString *error);

} // namespace cppl::app
