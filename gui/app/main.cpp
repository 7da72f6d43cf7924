// SPDX-License-Identifier: MIT
#include "app_main.h"

int main(int argc, char **argv)
{
    return cppl::app::appMain(argc, argv);
}
