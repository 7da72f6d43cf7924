// SPDX-License-Identifier: MIT
#pragma once

#include <QPalette>
#include <QStringList>

namespace cppl::app {

class MainWindow;

/// Fusion's palette for "light" or "dark" (screenshots and --theme; the desktop's otherwise).
[[nodiscard]] QPalette themePalette(bool dark);

struct ScreenshotOptions
{
    QString directory;
    int syntheticRanks = 0;   ///< 0: the Run page as it is (idle); else a synthetic run mid-run and finished
    int width = 1500;         ///< logical pixels; the device pixel ratio multiplies them
    int height = 940;
};

/// Renders every page of @p window offscreen (QWidget::grab) to PNG files in the directory and
/// returns their paths; throws nothing, an empty list with @p error set on failure.
QStringList renderScreenshots(MainWindow &window, const ScreenshotOptions &options, QString *error);

} // namespace cppl::app
