// SPDX-License-Identifier: MIT
#pragma once

#include <QPalette>

namespace cppl::app {

/// Fusion's palette for "light" or "dark" (--theme and screenshots; the desktop's otherwise).
[[nodiscard]] QPalette themePalette(bool dark);

} // namespace cppl::app
