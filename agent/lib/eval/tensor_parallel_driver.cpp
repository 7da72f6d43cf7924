// SPDX-License-Identifier: MIT
// Leader-driven tensor-parallel groups: the leader's commands and the followers' loop
// (tensor_parallel_driver.h).
#include "tensor_parallel_driver.h"

#include "tensor_parallel.h"

#include "fault_hooks.h"

#include "cppl/errors.h"

#include <csignal>

#include <array>
#include <chrono>
#include <string>

namespace cppl::agent {

namespace {

/// A command: {kind, first window, end window}.
enum Command : std::int64_t { kEvaluate = 1, kReport = 2, kFinish = 3 };
constexpr std::size_t kCommandWords = 3;
/// A member's figures in the report's exchange: compute, tensor-parallel and wall seconds, ranges.
constexpr std::size_t kFigureWords = 4;

/// CLUSTERPPL_TEST_DIE=R:tp-range (tests): a member of a group lost in the middle of the run.
void dieNow(const TensorParallelGroup &group)
{
    sayHook("clusterppl-agent: tensor-parallel member " + std::to_string(group.rank())
            + ": killing itself (SIGKILL) after its first range (CLUSTERPPL_TEST_DIE)");
    ::raise(SIGKILL);
}

double secondsSince(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Every member's figures on every member: each fills its own slot, the ordered sum adds zeros
/// elsewhere, so the exchange is exact.
std::vector<MemberFigures> exchangeFigures(TensorParallelGroup &group, const MemberFigures &mine)
{
    const auto n = static_cast<std::size_t>(group.size());
    std::vector<double> slots(n * kFigureWords, 0.0);
    double *own = slots.data() + static_cast<std::size_t>(group.rank()) * kFigureWords;
    own[0] = mine.computeSeconds;
    own[1] = mine.tensorParallelSeconds;
    own[2] = mine.wallSeconds;
    own[3] = static_cast<double>(mine.ranges);
    group.allReduceSum(slots.data(), static_cast<std::int64_t>(slots.size()));
    std::vector<MemberFigures> all(n);
    for (std::size_t m = 0; m < n; ++m) {
        const double *x = slots.data() + m * kFigureWords;
        all[m] = {x[0], x[1], x[2], static_cast<std::int64_t>(x[3])};
    }
    return all;
}

} // namespace

TensorParallelLeader::TensorParallelLeader(WindowScorer &inner, TensorParallelGroup &group, bool dieAfterFirstRange)
    : m_inner(inner), m_group(group), m_dieAfterFirstRange(dieAfterFirstRange)
{
}

void TensorParallelLeader::send(std::int64_t kind, std::int64_t first, std::int64_t end)
{
    CPPL_ENFORCE(!m_finished, "a tensor-parallel command after the followers left");
    std::array<std::int64_t, kCommandWords> words{kind, first, end};
    m_group.broadcastCommand(words.data(), static_cast<std::int64_t>(words.size()));
}

void TensorParallelLeader::run(std::int64_t first, std::int64_t end, NllStats &stats, ReferenceStats *reference, const Progress &progress)
{
    send(kEvaluate, first, end);
    m_inner.run(first, end, stats, reference, progress);
    if (m_dieAfterFirstRange)
        dieNow(m_group);
}

std::vector<MemberFigures> TensorParallelLeader::followerFigures()
{
    send(kReport, 0, 0);
    std::vector<MemberFigures> all = exchangeFigures(m_group, MemberFigures{});
    all.erase(all.begin()); // the leader's own figures are the round loop's
    return all;
}

double TensorParallelLeader::collectiveSeconds() const
{
    return m_group.collectiveSeconds();
}

void TensorParallelLeader::finish()
{
    if (m_finished)
        return;
    send(kFinish, 0, 0);
    m_finished = true;
}

MemberFigures followLeader(WindowScorer &scorer, TensorParallelGroup &group, const std::function<void(const MemberFigures &)> &afterRange,
                           bool dieAfterFirstRange)
{
    const auto start = std::chrono::steady_clock::now();
    MemberFigures mine;
    NllStats scratch; // the group's sums are its leader's
    for (;;) {
        std::array<std::int64_t, kCommandWords> c{};
        group.broadcastCommand(c.data(), static_cast<std::int64_t>(c.size()));
        mine.wallSeconds = secondsSince(start);
        mine.tensorParallelSeconds = group.collectiveSeconds();
        switch (c[0]) {
        case kEvaluate: {
            const auto t0 = std::chrono::steady_clock::now();
            scorer.run(c[1], c[2], scratch, nullptr, {});
            mine.computeSeconds += secondsSince(t0);
            mine.tensorParallelSeconds = group.collectiveSeconds();
            ++mine.ranges;
            if (dieAfterFirstRange)
                dieNow(group);
            if (afterRange)
                afterRange(mine);
            break;
        }
        case kReport:
            (void)exchangeFigures(group, mine);
            break;
        case kFinish:
            return mine;
        default:
            throw ProtocolError("tensor-parallel member " + std::to_string(group.rank()) + ": its leader sent an unknown command "
                                + std::to_string(c[0]) + ": do all ranks run the same agent version?");
        }
    }
}

} // namespace cppl::agent
