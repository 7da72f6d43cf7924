// SPDX-License-Identifier: MIT
#pragma once

// The collector's snapshots as Qt passes them between threads and signals: immutable, shared.

#include "telemetry/collector_state.h"

#include <QMetaType>

#include <memory>

namespace cppl::core::telemetry {
using SnapshotPtr = std::shared_ptr<const Snapshot>;
} // namespace cppl::core::telemetry

Q_DECLARE_METATYPE(cppl::core::telemetry::SnapshotPtr)
