// SPDX-License-Identifier: MIT
#include "torch_profile.h"

#include <c10/util/Exception.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <utility>

namespace cppl::agent {

namespace {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

/// An event's duration in microseconds, whichever accessor this LibTorch has (newer ones count
/// nanoseconds and may drop the microsecond one).
template <class Event>
double microseconds(const Event &e)
{
    if constexpr (requires { e.durationNs(); })
        return static_cast<double>(e.durationNs()) / 1000.0;
    else
        return static_cast<double>(e.durationUs());
}

std::string firstLine(const std::string &s) { return s.substr(0, std::min(s.find('\n'), std::size_t{300})); }

/// Sums the events by (name, device), largest total first.
void summarise(const std::vector<prof::KinetoEvent> &events, ProfileReport &r)
{
    std::map<std::pair<std::string, std::string>, ProfiledOp> byName;
    for (const prof::KinetoEvent &e : events) {
        const bool onDevice = e.deviceType() == c10::DeviceType::CUDA;
        ProfiledOp &op = byName[{e.name(), onDevice ? "cuda" : "cpu"}];
        op.name = e.name();
        op.device = onDevice ? "cuda" : "cpu";
        ++op.calls;
        op.totalMicroseconds += microseconds(e);
        if (onDevice) {
            r.deviceActivities = true;
            r.deviceMicroseconds += microseconds(e);
        }
    }
    for (auto &[key, op] : byName)
        r.ops.push_back(std::move(op));
    std::stable_sort(r.ops.begin(), r.ops.end(), [](const ProfiledOp &a, const ProfiledOp &b) { return a.totalMicroseconds > b.totalMicroseconds; });
}

} // namespace

ProfileReport profileWork(bool cuda, const std::function<void()> &work, const std::string &tracePath)
{
    ProfileReport r;
    const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
    std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
    if (cuda)
        activities.insert(impl::ActivityType::CUDA);
    try {
        prof::prepareProfiler(config, activities);
        prof::enableProfiler(config, activities);
    } catch (const c10::Error &e) { // e.g. CUPTI refused: the CPU's operators still tell a lot
        if (!cuda)
            throw;
        r.note = "the GPU's kernels could not be recorded (" + firstLine(e.what_without_backtrace()) + "); CPU operators only";
        activities.erase(impl::ActivityType::CUDA);
        prof::prepareProfiler(config, activities);
        prof::enableProfiler(config, activities);
    }
    const auto start = std::chrono::steady_clock::now();
    try {
        work();
    } catch (...) {
        (void)prof::disableProfiler();
        throw;
    }
    r.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
    summarise(result->events(), r);
    if (cuda && !r.deviceActivities && r.note.empty())
        r.note = "no GPU kernel was recorded (this LibTorch's profiler has no CUDA activities); CPU operators only";
    if (!tracePath.empty()) {
        try {
            result->save(tracePath);
            r.tracePath = tracePath;
        } catch (const c10::Error &e) { // a LibTorch without Kineto (Debian's) keeps the events, writes no trace
            r.note += std::string(r.note.empty() ? "" : "; ") + "no Chrome trace: " + firstLine(e.what_without_backtrace());
        }
    }
    return r;
}

} // namespace cppl::agent
