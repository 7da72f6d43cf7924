// SPDX-License-Identifier: MIT
#include "process_exit.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

namespace cppl::agent {

namespace {

struct Decision
{
    int code;
    std::string line;
};

// Plain pointers and flags, never destroyed: the terminate guard may run during exit().
std::atomic<const Decision *> g_decision{nullptr};
std::atomic<bool> g_linePrinted{false};
std::atomic<bool> g_threadLeft{false};
std::terminate_handler g_previous = nullptr;

void writeAll(const std::string &text) noexcept
{
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(2, text.data() + done, text.size() - done);
        if (n <= 0)
            return;
        done += static_cast<std::size_t>(n);
    }
}

[[noreturn]] void onTerminate() noexcept
{
    const Decision *d = g_decision.load(std::memory_order_acquire);
    if (!d) {
        if (g_previous)
            g_previous();
        std::abort();
    }
    std::string what = "an exception of unknown type";
    try {
        if (const std::exception_ptr e = std::current_exception())
            std::rethrow_exception(e);
        what = "no exception (std::terminate was called)";
    } catch (const std::exception &e) {
        what = e.what();
    } catch (...) {
    }
    std::string text;
    if (!g_linePrinted.exchange(true))
        text = d->line + '\n';
    text += "clusterppl-agent: note: after this rank's failure, a thread of a library it uses ended with an uncaught exception (" + what
            + "; LibTorch's store client does when the store's server has gone); the exit code stays " + std::to_string(d->code) + '\n';
    std::fflush(stdout);
    writeAll(text);
    std::_Exit(d->code);
}

} // namespace

void decideExit(int code, const std::string &line) noexcept
{
    try {
        const Decision *expected = nullptr;
        auto *d = new Decision{code, line}; // never freed: read by the terminate guard until the process ends
        if (!g_decision.compare_exchange_strong(expected, d, std::memory_order_acq_rel))
            delete d;
    } catch (...) { // out of memory: the exit is not guarded, as before
    }
}

bool takeExitLine(const std::string &line) noexcept
{
    const Decision *d = g_decision.load(std::memory_order_acquire);
    return !d || d->line != line || !g_linePrinted.exchange(true);
}

void noteThreadLeftRunning() noexcept
{
    g_threadLeft.store(true);
}

void installTerminateGuard()
{
    g_previous = std::set_terminate(onTerminate);
}

int endProcess(int code)
{
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    if (g_threadLeft.load() || g_decision.load() != nullptr)
        std::_Exit(code);
    return code;
}

bool finishesWithin(std::function<void()> work, std::chrono::milliseconds bound)
{
    struct State
    {
        std::mutex m;
        std::condition_variable cv;
        bool done = false;
    };
    const auto st = std::make_shared<State>();
    std::thread t([st, work = std::move(work)] {
        work();
        const std::lock_guard lock(st->m);
        st->done = true;
        st->cv.notify_all();
    });
    std::unique_lock lock(st->m);
    if (st->cv.wait_for(lock, bound, [&] { return st->done; })) {
        lock.unlock();
        t.join();
        return true;
    }
    lock.unlock();
    t.detach();
    noteThreadLeftRunning();
    return false;
}

} // namespace cppl::agent
