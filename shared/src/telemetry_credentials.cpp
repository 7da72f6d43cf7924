// SPDX-License-Identifier: MIT
// The POSIX half of cppl/telemetry.h: credential files (permissions) and loopback addresses.
#include "cppl/telemetry.h"
#include "cppl/host.h"

#include "cppl/errors.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <iterator>
#include <sys/stat.h>
#include <unistd.h>

namespace cppl::telemetry {

bool Endpoint::isLoopback() const noexcept
{
    return isLoopbackHost(host);
}

Credentials readCredentialsFile(const std::string &path)
{
    if (path == "-") {
        std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
        return parseCredentials(text, "<stdin>");
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        throw ConfigError(path + ": cannot open the telemetry credentials: " + std::strerror(errno));
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw ConfigError(path + ": the telemetry credentials must be a regular file");
    }
    // Another user who can read (or replace) the file can join or impersonate the run's ranks.
    if (st.st_uid != ::geteuid()) {
        ::close(fd);
        throw ConfigError(path + ": the telemetry credentials belong to uid " + std::to_string(st.st_uid) + ", not to this user (uid "
                          + std::to_string(::geteuid()) + "); use a key file you own, with mode 0600 or 0400");
    }
    if ((st.st_mode & 077) != 0) {
        ::close(fd);
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 0777));
        throw ConfigError(path + ": the telemetry credentials are open to other users (mode " + mode
                          + "); they must be mode 0600 or 0400: run `chmod 600 " + path + "`, or let the launcher pass them on stdin");
    }
    std::string text;
    char buf[4096];
    for (;;) {
        const auto n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            throw ConfigError(path + ": cannot read the telemetry credentials: " + std::strerror(err));
        }
        if (n == 0)
            break;
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > (1u << 20)) {
            ::close(fd);
            throw ConfigError(path + ": too large for a telemetry credentials file");
        }
    }
    ::close(fd);
    return parseCredentials(text, path);
}

void writeCredentialsFile(const std::string &path, const Credentials &c)
{
    ::unlink(path.c_str()); // a new inode, so an old file's wider mode cannot survive
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        throw IoError(path + ": cannot create the telemetry credentials: " + std::strerror(errno));
    const std::string text = formatCredentials(c);
    std::size_t done = 0;
    while (done < text.size()) {
        const auto n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            const int err = errno;
            ::close(fd);
            throw IoError(path + ": cannot write the telemetry credentials: " + std::strerror(err));
        }
        done += static_cast<std::size_t>(n);
    }
    ::fchmod(fd, 0600); // against a umask that removed owner bits
    ::close(fd);
}

} // namespace cppl::telemetry
