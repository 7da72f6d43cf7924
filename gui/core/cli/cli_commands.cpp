// SPDX-License-Identifier: MIT
#include "cli/cli_commands.h"

#include "cli/cli_history.h"
#include "cli/cli_run.h"

#include "cppl/cluster_profile.h"
#include "cppl/config.h"
#include "cppl/errors.h"
#include "cppl/hostfile.h"

#include <QCommandLineParser>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QTextStream>

#include <map>

using namespace Qt::StringLiterals;

namespace cppl::core {

namespace {

const QString kUsage = uR"(clusterppl-cli — headless front end of ClusterPPL

Commands:
  profile check PROFILE.json
      Validate a cluster profile and show its ranks, groups and leaders.
  hostfile import HOSTFILE [--include FILTER | --exclude FILTER] [--launcher ssh|local] [--like PROFILE.json]
                  [--agent PATH] [--workdir DIR] [--ssh-user USER] [-o PROFILE.json]
      Turn a DeepSpeed hostfile (HOST slots=N [group=NAME]) into a profile. FILTER as DeepSpeed:
      host1:0,1@host2. --like takes the evaluation, thresholds and name from PROFILE, and what all
      its hosts share (agent, workdir, env, SSH user, port, key). --agent, --workdir and --ssh-user
      set those of every host.
  hostfile export PROFILE.json [-o HOSTFILE]
      Write a profile's hosts as a DeepSpeed hostfile.
  run --profile PROFILE.json [--json OUT] [options]   (clusterppl-cli run --help)
      Pre-flight every host, then launch one agent per rank through the profile's launcher (local
      or ssh): progress and the final estimate here, the result JSON to OUT, a summary of who failed
      and why. Unknown SSH host keys are refused unless --accept-new-host-keys; changed ones always.
  check --profile PROFILE.json [run's SSH options] [--json OUT]
      Check hosts: the pre-flight of every host (agent, LibTorch, GPUs, NCCL, memory, paths,
      refusals), launching nothing; exit 0 when every host passes, 10 when one would be refused.
  list | show RUN | compare RUN... | delete RUN | export RUN -o FILE | import FILE | sweep --profile P --nodes 1,2,4
      The run history: every run is recorded (run --no-store turns it off); compare and sweep give
      scaling efficiency, comm share, the one-rank deviation, a recommendation and a projection
      (clusterppl-cli list --help).
  report RUN... --format pdf|html|csv|json -o PATH
      A run report (one RUN) or a comparison report (several): setup, result, per-rank table,
      charts, alerts; scaling, recommendation and projection (clusterppl-cli report --help).
  --version, --help
)"_s;

QString qs(const std::string &s)
{
    return QString::fromStdString(s);
}

std::string readFileOrThrow(const QString &path, const QString &what)
{
    QFile f(path);
    if (!f.exists())
        throw IoError(QString(path + u": the "_s + what + u" does not exist"_s).toStdString());
    if (!f.open(QIODevice::ReadOnly))
        throw IoError(QString(path + u": cannot read the "_s + what + u": "_s + f.errorString()).toStdString());
    return f.readAll().toStdString();
}

void writeOutput(const QString &path, const std::string &text, QTextStream &out)
{
    if (path.isEmpty() || path == u"-"_s) {
        out << qs(text);
        return;
    }
    QSaveFile f(path); // atomic: a failed write never leaves half a file behind
    if (!f.open(QIODevice::WriteOnly) || f.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size())
        || !f.commit())
        throw IoError(QString(path + u": cannot write: "_s + f.errorString()).toStdString());
}

ClusterProfile loadProfileFile(const QString &path)
{
    const std::string text = readFileOrThrow(path, u"profile"_s);
    ProfileParseResult r = parseProfile(text, path.toStdString());
    if (!r.ok()) {
        std::string msg = path.toStdString() + ": invalid profile:";
        for (const auto &e : r.errors)
            msg += "\n  " + e;
        throw ConfigError(msg);
    }
    return r.profile;
}

int profileCheck(const QStringList &args, QTextStream &out, QTextStream &err)
{
    if (args.size() != 1) {
        err << "clusterppl-cli: profile check takes one PROFILE.json\n";
        return kCliBadArguments;
    }
    const ClusterProfile p = loadProfileFile(args.front());
    const RankLayout layout = rankLayout(p);
    out << args.front() << ": valid profile" << (p.name.empty() ? QString() : u" \""_s + qs(p.name) + u"\""_s) << '\n'
        << "  launcher   " << qs(p.launcher) << '\n'
        << "  hosts      " << p.hosts.size() << '\n'
        << "  ranks      " << layout.worldSize() << '\n'
        << "  groups     " << layout.groups.size() << " (reduce inside each group, all-reduce among leaders)\n";
    for (const auto &g : layout.groups) {
        out << "    " << qs(g.name) << ": " << (g.ranks.size() == 1 ? "rank " : "ranks ") << qs(rankListText(g.ranks)) << " (leader "
            << g.ranks.front() << ")\n";
    }
    const EvaluationSpec &e = p.evaluation;
    out << "  evaluation " << qs(e.protocol) << ", context " << e.context << ", batch " << (e.batch == kAutoBatch ? u"auto"_s : QString::number(e.batch)) << ", "
        << (e.dtype == "auto" ? u"dtype auto (bfloat16 on GPUs, else float32)"_s : qs(e.dtype));
    if (!e.model.empty())
        out << ", model " << qs(e.model);
    out << '\n';
    return kCliOk;
}

int hostfileImport(const QStringList &arguments, QTextStream &out, QTextStream &err)
{
    QCommandLineParser parser;
    const QCommandLineOption include(u"include"_s, u"Hosts/slots to keep."_s, u"FILTER"_s);
    const QCommandLineOption exclude(u"exclude"_s, u"Hosts/slots to drop."_s, u"FILTER"_s);
    const QCommandLineOption launcher(u"launcher"_s, u"ssh or local."_s, u"KIND"_s, u"ssh"_s);
    const QCommandLineOption output({u"o"_s, u"output"_s}, u"Profile to write."_s, u"FILE"_s);
    // What every node shares (a hostfile says none of it): the agent's path, the working
    // directory, the SSH login.
    const QCommandLineOption agent(u"agent"_s, u"The agent on every host."_s, u"PATH"_s);
    const QCommandLineOption workdir(u"workdir"_s, u"Working directory on every host."_s, u"DIR"_s);
    const QCommandLineOption user(u"ssh-user"_s, u"SSH login on every host."_s, u"USER"_s);
    // A profile to take everything else from: the evaluation, thresholds, and what its hosts share.
    const QCommandLineOption like(u"like"_s, u"Profile to take the evaluation and shared host settings from."_s, u"PROFILE"_s);
    parser.addOptions({include, exclude, launcher, output, agent, workdir, user, like});
    parser.addPositionalArgument(u"hostfile"_s, u"DeepSpeed hostfile."_s);
    if (!parser.parse(QStringList{u"clusterppl-cli"_s} + arguments)) {
        err << "clusterppl-cli: hostfile import: " << parser.errorText() << '\n';
        return kCliBadArguments;
    }
    if (parser.positionalArguments().size() != 1) {
        err << "clusterppl-cli: hostfile import takes one HOSTFILE\n";
        return kCliBadArguments;
    }
    const QString path = parser.positionalArguments().front();
    const auto parsed = parseHostfile(readFileOrThrow(path, u"hostfile"_s), path.toStdString());
    if (!parsed.ok()) {
        std::string msg = path.toStdString() + ": invalid hostfile:";
        for (const auto &e : parsed.errors)
            msg += "\n  " + e;
        throw ConfigError(msg);
    }
    auto hosts = applyHostFilter(parsed.hosts, parser.value(include).toStdString(), parser.value(exclude).toStdString());
    ClusterProfile p = profileFromHosts(std::move(hosts), parser.value(launcher).toStdString());
    p.name = QFileInfo(path).completeBaseName().toStdString();
    if (parser.isSet(like)) {
        const ClusterProfile t = loadProfileFile(parser.value(like));
        p.name = t.name;
        p.evaluation = t.evaluation;
        p.thresholds = t.thresholds;
        const std::vector<std::string> carried = carrySharedHostSettings(t.hosts, p.hosts);
        QStringList fields;
        for (const std::string &f : carried)
            fields << QString::fromStdString(f);
        err << "clusterppl-cli: hostfile import: from " << parser.value(like) << ": the evaluation, the thresholds"
            << (fields.isEmpty() ? QString() : u", and on every host "_s + fields.join(u", "_s)) << '\n';
        // With the local launcher, relative paths mean the profile's own directory, which the new
        // profile need not share: they become absolute. (On SSH hosts they mean the remote
        // working directory, the same for both.)
        if (p.launcher == "local" && t.launcher == "local") {
            const QDir base = QFileInfo(parser.value(like)).absoluteDir();
            for (std::string *file : {&p.evaluation.model, &p.evaluation.text, &p.evaluation.tokens, &p.evaluation.tokenizer})
                if (!file->empty() && *file != "bytes" && QDir::isRelativePath(QString::fromStdString(*file)))
                    *file = QDir::cleanPath(base.absoluteFilePath(QString::fromStdString(*file))).toStdString();
        }
    }
    for (HostSpec &h : p.hosts) {
        if (parser.isSet(agent))
            h.agent = parser.value(agent).toStdString();
        if (parser.isSet(workdir))
            h.workdir = parser.value(workdir).toStdString();
        if (parser.isSet(user))
            h.ssh.user = parser.value(user).toStdString();
    }
    if (const auto problems = validateProfile(p); !problems.empty())
        throw ConfigError(problems.front());
    writeOutput(parser.value(output), profileToJson(p), out);
    return kCliOk;
}

std::map<QString, CliCommand> &registeredCommands()
{
    static std::map<QString, CliCommand> commands;
    return commands;
}

} // namespace

void registerCliCommand(const QString &name, CliCommand handler)
{
    registeredCommands()[name] = handler;
}

int cliMain(const QStringList &arguments, QTextStream &out, QTextStream &err)
{
    if (arguments.isEmpty() || arguments.front() == u"--help"_s || arguments.front() == u"-h"_s) {
        (arguments.isEmpty() ? err : out) << kUsage;
        return arguments.isEmpty() ? kCliBadArguments : kCliOk;
    }
    if (arguments.front() == u"--version"_s) {
        out << "clusterppl-cli " << CLUSTERPPL_VERSION_STRING << '\n';
        return kCliOk;
    }
    const QString command = arguments.mid(0, 2).join(u' ');
    const QStringList rest = arguments.mid(2);
    const auto registered = registeredCommands().find(arguments.front());
    if (arguments.front() != u"run"_s && arguments.front() != u"check"_s && !isHistoryCommand(arguments.front()) && registered == registeredCommands().end() && (rest.contains(u"--help"_s) || rest.contains(u"-h"_s))) {
        out << kUsage;
        return kCliOk;
    }
    try {
        if (arguments.front() == u"run"_s)
            return cliRun(arguments.mid(1), out, err);
        if (arguments.front() == u"check"_s)
            return cliRun(arguments.mid(1) << u"--check-only"_s, out, err);
        if (isHistoryCommand(arguments.front()))
            return cliHistory(arguments, out, err);
        if (registered != registeredCommands().end())
            return registered->second(arguments, out, err);
        if (command == u"profile check"_s)
            return profileCheck(rest, out, err);
        if (command == u"hostfile import"_s)
            return hostfileImport(rest, out, err);
        if (command == u"hostfile export"_s) {
            QCommandLineParser parser;
            const QCommandLineOption output({u"o"_s, u"output"_s}, u"Hostfile to write."_s, u"FILE"_s);
            parser.addOption(output);
            if (!parser.parse(QStringList{u"clusterppl-cli"_s} + rest) || parser.positionalArguments().size() != 1) {
                err << "clusterppl-cli: hostfile export takes one PROFILE.json [-o HOSTFILE]\n";
                return kCliBadArguments;
            }
            const ClusterProfile p = loadProfileFile(parser.positionalArguments().front());
            writeOutput(parser.value(output), hostfileFromHosts(p.hosts), out);
            return kCliOk;
        }
        err << "clusterppl-cli: unknown command \"" << command << "\" (try --help)\n";
        return kCliBadArguments;
    } catch (const IoError &e) {
        err << "clusterppl-cli: " << qs(e.what()) << '\n';
        return kCliIoError;
    } catch (const ConfigError &e) {
        err << "clusterppl-cli: " << qs(e.what()) << '\n';
        return kCliBadArguments;
    } catch (const cppl::Error &e) {
        err << "clusterppl-cli: " << qs(e.what()) << '\n';
        return kCliFailed;
    } catch (const std::exception &e) {
        // The one place every command's unexpected failure ends: a message, never an abort.
        err << "clusterppl-cli: internal error in \"" << command << "\": " << e.what()
            << " (please report it with the command line)\n";
        return kCliFailed;
    }
}

} // namespace cppl::core
