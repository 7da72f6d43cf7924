// SPDX-License-Identifier: MIT
#pragma once

#include "telemetry/collector.h"
#include "telemetry/snapshot_ptr.h"

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QTimer>

#include <atomic>
#include <memory>

namespace cppl::core::telemetry {

/**
 * Qt face of a Collector: the collector's receive thread only raises a flag and posts one queued
 * call; a single-shot timer on this object's thread then takes one snapshot and emits it. However
 * many messages arrive, views get at most one snapshot per interval (40 ms: 25 Hz).
 */
class CollectorObject : public QObject
{
    Q_OBJECT

public:
    explicit CollectorObject(QObject *parent = nullptr);
    ~CollectorObject() override;

    /// Binds and starts receiving; on failure emits failed() with the reason and returns false.
    bool start(CollectorOptions options);
    void stop();
    [[nodiscard]] QString endpoint() const;
    [[nodiscard]] SnapshotPtr latest() const { return m_latest; }
    /// A snapshot taken now, outside the coalescing timer (the end of a run); also becomes latest().
    [[nodiscard]] SnapshotPtr snapshotNow();
    /// Messages received so far (0 when stopped before it started).
    [[nodiscard]] std::int64_t messagesReceived() const noexcept { return m_collector ? m_collector->messagesReceived() : m_receivedAtStop; }

    static constexpr int kMinIntervalMs = 40;

Q_SIGNALS:
    void snapshotReady(cppl::core::telemetry::SnapshotPtr snapshot);
    void failed(const QString &reason);

private:
    void schedule();
    void emitSnapshot();

    std::unique_ptr<Collector> m_collector;
    QTimer m_timer;
    std::atomic<bool> m_posted{false};
    SnapshotPtr m_latest;
    std::int64_t m_receivedAtStop = 0;
};

} // namespace cppl::core::telemetry

