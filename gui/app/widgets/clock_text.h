// SPDX-License-Identifier: MIT
#pragma once

#include <QString>

namespace cppl::app {

/// Time into a run as the Run page writes it ("elapsed 6:12", alert times, heat-map tooltips):
/// m:ss, and h:mm:ss from an hour on. @p seconds is whole seconds (the caller rounds or cuts).
inline QString clockText(qint64 seconds)
{
    using namespace Qt::StringLiterals;
    const qint64 s = seconds < 0 ? 0 : seconds;
    if (s >= 3600)
        return u"%1:%2:%3"_s.arg(s / 3600).arg((s / 60) % 60, 2, 10, QLatin1Char('0')).arg(s % 60, 2, 10, QLatin1Char('0'));
    return u"%1:%2"_s.arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
}

} // namespace cppl::app
