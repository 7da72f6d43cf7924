// SPDX-License-Identifier: MIT
#include "app_main.h"
#include "screenshot.h"

int main(int argc, char **argv)
{
    // --screenshot comes from clusterppl_app_fixtures, which only this executable (and the tests) link.
    return cppl::app::appMain(argc, argv, &cppl::app::screenshotCommand);
}
