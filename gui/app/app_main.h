// SPDX-License-Identifier: MIT
#pragma once

namespace cppl::app {

/// The dashboard's main(): options (--screenshot DIR [--scale 1|2] [--theme light|dark]
/// [--synthetic-ranks N]), the application, the window.
int appMain(int argc, char **argv);

} // namespace cppl::app
