// SPDX-License-Identifier: MIT
#include "telemetry/collector_object.h"

#include "cppl/errors.h"

#include <QMetaObject>

namespace cppl::core::telemetry {

CollectorObject::CollectorObject(QObject *parent) : QObject(parent)
{
    qRegisterMetaType<SnapshotPtr>();
    m_timer.setSingleShot(true);
    m_timer.setInterval(kMinIntervalMs);
    connect(&m_timer, &QTimer::timeout, this, &CollectorObject::emitSnapshot);
}

CollectorObject::~CollectorObject()
{
    stop();
}

bool CollectorObject::start(CollectorOptions options)
{
    stop();
    try {
        // Called on the collector's thread, possibly thousands of times a second: one queued call
        // is in flight at most.
        m_collector = std::make_unique<Collector>(std::move(options), [this] {
            if (!m_posted.exchange(true))
                QMetaObject::invokeMethod(this, &CollectorObject::schedule, Qt::QueuedConnection);
        });
    } catch (const cppl::Error &e) {
        Q_EMIT failed(tr("Telemetry collector: %1").arg(QString::fromStdString(e.what())));
        return false;
    }
    return true;
}

void CollectorObject::stop()
{
    if (m_collector) {
        m_collector->stop();
        m_receivedAtStop = m_collector->messagesReceived();
    }
    m_collector.reset();
    m_timer.stop();
}

QString CollectorObject::endpoint() const
{
    return m_collector ? QString::fromStdString(m_collector->endpoint()) : QString();
}

SnapshotPtr CollectorObject::snapshotNow()
{
    if (m_collector)
        m_latest = std::make_shared<const Snapshot>(m_collector->snapshot());
    return m_latest ? m_latest : std::make_shared<const Snapshot>();
}

void CollectorObject::schedule()
{
    if (!m_timer.isActive())
        m_timer.start();
}

void CollectorObject::emitSnapshot()
{
    m_posted = false; // changes after this point post a new call
    if (!m_collector)
        return;
    m_latest = std::make_shared<const Snapshot>(m_collector->snapshot());
    Q_EMIT snapshotReady(m_latest);
}

} // namespace cppl::core::telemetry
