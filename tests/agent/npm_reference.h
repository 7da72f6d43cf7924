// SPDX-License-Identifier: MIT
// What the tokenizer tests need to run the npm references in tests/agent/npm (pinned in its
// package.json and package-lock.json, installed by scripts/install-deps.sh; tests never reach the
// network) and to say where ids differ: tst_tokenizer_reference.cpp, tst_tokenizer_families.cpp.
#pragma once

#include "tokenizer/tokenizer.h"

#include "test_files.h"

#include <QProcess>
#include <QStandardPaths>
#include <QString>
#include <QStringList>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cppl::test::npm {

// Pinned in package.json and package-lock.json there: a new release could change what "identical" is
// compared with. node_modules beside them is where scripts/install-deps.sh runs `npm ci`.
inline const QString kScripts = QStringLiteral(CPPL_SOURCE_DIR "/tests/agent/npm");
inline const QString kNpmPrefix = kScripts;
inline const QString kShared = QStringLiteral(CPPL_SOURCE_DIR "/../shared/data");
inline const QString kWikiText = kShared + QStringLiteral("/wikitext-2-raw/wiki.test.raw");

struct Run
{
    int exitCode = -1;
    QString out;
    QString err;
};

inline Run run(const QString &program, const QStringList &args, int timeoutMs = 300000)
{
    QProcess p;
    p.start(program, args);
    if (!p.waitForFinished(timeoutMs))
        return {-1, QString(), QStringLiteral("%1 did not finish in %2 s").arg(program).arg(timeoutMs / 1000)};
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

inline nlohmann::json readJsonFile(const QString &path)
{
    return nlohmann::json::parse(readFile(path), nullptr, false);
}

/// The pinned packages as "name@version", from package.json.
inline QStringList pinnedPackages()
{
    QStringList specs;
    const auto pins = readJsonFile(kNpmPrefix + QStringLiteral("/package.json"));
    if (pins.is_object() && pins.contains("dependencies"))
        for (const auto &[name, version] : pins["dependencies"].items())
            specs << QString::fromStdString(name + "@" + version.get<std::string>());
    return specs;
}

/// Empty when node and every pinned package at its pinned version are there; else what is missing
/// and what to run. Installing here would reach the network from a test.
inline QString missingNpmPackages()
{
    if (QStandardPaths::findExecutable(QStringLiteral("node")).isEmpty())
        return QStringLiteral("node is needed for the independent references: run scripts/install-deps.sh (nodejs)");
    const QStringList pins = pinnedPackages();
    if (pins.isEmpty())
        return QStringLiteral("%1/package.json lists no dependencies").arg(kNpmPrefix);
    QStringList missing;
    for (const QString &spec : pins) {
        const auto at = spec.lastIndexOf(QLatin1Char('@'));
        const auto installed = readJsonFile(kNpmPrefix + QStringLiteral("/node_modules/") + spec.left(at) + QStringLiteral("/package.json"));
        if (!installed.is_object() || installed.value("version", std::string()) != spec.mid(at + 1).toStdString())
            missing << spec;
    }
    if (missing.isEmpty())
        return {};
    return QStringLiteral("the npm reference tokenizers %1 are not in %2/node_modules: run scripts/install-deps.sh (npm ci from the package-lock)")
        .arg(missing.join(QStringLiteral(", ")), kNpmPrefix);
}

/// The text around byte @p at, marked <<HERE>>, newlines shown as \n.
inline QString around(const std::string &text, std::size_t at)
{
    const std::size_t from = at > 60 ? at - 60 : 0;
    const std::string window = text.substr(from, at - from) + "<<HERE>>" + text.substr(std::min(at, text.size()), 60);
    return QString::fromUtf8(QByteArray::fromStdString(window)).replace(QLatin1Char('\n'), QStringLiteral("\\n"));
}

/// Empty when equal; else the first differing position, the ids around it and the text there.
inline QString firstDifference(const std::vector<std::uint32_t> &ours, const std::vector<std::uint32_t> &theirs,
                               agent::Tokenizer &tokenizer, const std::string &text, const QString &theirName)
{
    const std::size_t n = std::min(ours.size(), theirs.size());
    std::size_t pos = 0;
    while (pos < n && ours[pos] == theirs[pos])
        ++pos;
    if (pos == n && ours.size() == theirs.size())
        return {};
    auto window = [&](const std::vector<std::uint32_t> &ids) {
        QStringList s;
        for (std::size_t i = pos > 5 ? pos - 5 : 0; i < std::min(ids.size(), pos + 6); ++i)
            s << (i == pos ? QStringLiteral("[%1]").arg(ids[i]) : QString::number(ids[i]));
        return s.join(QLatin1Char(' '));
    };
    const std::size_t byte = tokenizer.decode(std::span(ours.data(), pos)).size();
    return QStringLiteral("ids differ first at position %1 of %2 (ours) / %3 (%4), text byte %5.\n  ours:   %6\n  %4: %7\n  text there: \"%8\"")
        .arg(pos)
        .arg(ours.size())
        .arg(theirs.size())
        .arg(theirName)
        .arg(byte)
        .arg(window(ours), window(theirs), around(text, byte));
}

} // namespace cppl::test::npm
