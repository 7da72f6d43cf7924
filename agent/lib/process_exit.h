// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace cppl::agent {

// How the agent's process ends while threads it cannot stop may still run (docs/communication.md,
// "A rank's end and its threads").
//
// A rank's own failure, once it reports it, decides its exit: its code and its message. After
// that report the store's server (rank 0) may exit at once, and LibTorch 1.13's store client has a
// thread of its own per connection that throws out of itself when that server resets the
// connection (a connection it had not accepted yet): std::terminate, SIGABRT, and a rank that
// failed with exit 3 was seen by its launcher killed by signal 6 (tst_distributed,
// failingRankTellsTheOthers, 1 run in ~50; failureOutlivesItsStore makes it happen).

/// @brief The exit this process ends with from now on: @p code and @p line, the line agentMain()
/// prints for it ("clusterppl-agent: rank R: ..."). The first call decides; later ones are ignored.
void decideExit(int code, const std::string &line) noexcept;
/// @brief Whether agentMain() is to print @p line: false only for the decided exit's line once the
/// terminate guard printed it (each is printed once, whichever comes first).
[[nodiscard]] bool takeExitLine(const std::string &line) noexcept;
/// @brief A thread this process can neither stop nor join is left running (Gloo's process groups
/// forming in the background, abandoned communicators and their store connections): the process
/// must not run its static destructors under it (endProcess()).
void noteThreadLeftRunning() noexcept;
/// @brief Runs @p work on a thread of its own and waits at most @p bound: true when it finished in
/// time; past the bound the thread is left running (noteThreadLeftRunning) and false is returned.
/// For work that may block on a peer and must not hold a rank that is leaving (a store write, an
/// NCCL abort). @p work must not throw; starting the thread may (std::system_error).
[[nodiscard]] bool finishesWithin(std::function<void()> work, std::chrono::milliseconds bound);
/// @brief std::set_terminate: once an exit is decided, an exception that escapes any thread ends
/// the process with that exit (its line printed if it was not, and a note naming the exception);
/// before, the default handler (abort, with what was thrown).
void installTerminateGuard();
/// @brief main()'s end: flushes stdout and stderr, then ends the process with _Exit(@p code) when a
/// thread was left running or an exit was decided (no static destructors under a live thread);
/// otherwise returns @p code for a normal exit.
int endProcess(int code);

} // namespace cppl::agent
