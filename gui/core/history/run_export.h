// SPDX-License-Identifier: MIT
#pragma once

// A whole run as one JSON document ("clusterppl-run", version 1): what `export` writes, `import`
// reads on another machine, and the reports' JSON format can embed. Numbers round-trip exactly
// (doubles as JSON numbers, exact sums as the agent's strings).

#include "history/run_record.h"

#include <QJsonObject>

namespace cppl::core::history {

inline constexpr int kExportVersion = 1;

[[nodiscard]] QJsonObject runToJson(const RunRecord &run);
/// An exported run, or a bare agent result JSON (then @p runIdForResult names it; empty: derived
/// from the result's content). Throws cppl::ConfigError naming the field that is wrong.
[[nodiscard]] RunRecord runFromJson(const QJsonObject &json, const QString &runIdForResult = {});

} // namespace cppl::core::history
