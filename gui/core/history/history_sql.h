// SPDX-License-Identifier: MIT
#pragma once

// The history's SQL in one place, shared by the reading connection (RunHistory) and the writer
// thread's own connection (HistoryWriter). Every function throws cppl::IoError naming the history file
// and the statement's error. Not part of the public API; tests use createSchema() to build older
// versions.

#include "history/run_record.h"

#include <QSqlDatabase>
#include <QString>

namespace cppl::core::history::sql {

inline constexpr int kCurrentVersion = 3;

/// Opens a fresh connection named @p connection to @p path: WAL, foreign keys, busy timeout.
QSqlDatabase openConnection(const QString &path, const QString &connection);
/// Closes and removes the connection (its QSqlDatabase handles must be gone).
void closeConnection(const QString &connection);

[[nodiscard]] int userVersion(QSqlDatabase &db);
/// Creates schema @p version (1, 2 or 3: 3 has 2's tables) in an empty database (tests build old
/// stores with it).
void createSchema(QSqlDatabase &db, int version);
/// Brings the database to kCurrentVersion, one step at a time, each in its own transaction.
/// Returns the version found. Refuses a newer version than this build knows.
int migrate(QSqlDatabase &db, const QString &path);

void exec(QSqlDatabase &db, const QString &statement);

/// Inserts the runs row (and, when present, rank summaries, samples, logs and alerts); returns its id.
std::int64_t insertRun(QSqlDatabase &db, const RunRecord &rec, bool withDetails);
/// Pre-flight reports, the versions they carry, and the hosts with what pre-flight found (cores, GPUs).
void updatePreflight(QSqlDatabase &db, std::int64_t id, const QJsonArray &preflight, const QJsonObject &versions, const QJsonArray &hosts);
/// Status, end, result and the fields parsed from it, hosts, rank summaries.
void updateEnd(QSqlDatabase &db, std::int64_t id, const RunRecord &rec);
void insertSamples(QSqlDatabase &db, std::int64_t id, const std::vector<RankSample> &samples);
void insertLogs(QSqlDatabase &db, std::int64_t id, const std::vector<LogLine> &lines);
void trimLogs(QSqlDatabase &db, std::int64_t id, int rank, std::int64_t fromSeq, std::int64_t toSeq);
void insertAlert(QSqlDatabase &db, std::int64_t id, const StoredAlert &a);
void replaceRankSummary(QSqlDatabase &db, std::int64_t id, const std::vector<RankSummary> &ranks);

[[nodiscard]] std::optional<std::int64_t> idOf(QSqlDatabase &db, const QString &runId);

} // namespace cppl::core::history::sql
