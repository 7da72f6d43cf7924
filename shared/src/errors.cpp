// SPDX-License-Identifier: MIT
#include "cppl/errors.h"

#include <cstdio>
#include <cstdlib>

namespace cppl {

void enforceFailed(const char *expr, const char *file, int line, const std::string &msg)
{
    std::fprintf(stderr, "%s:%d: internal error: %s (%s). Please report this as a bug.\n", file, line,
                 msg.c_str(), expr);
    std::abort();
}

} // namespace cppl
