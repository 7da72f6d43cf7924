// SPDX-License-Identifier: MIT
#include "agent_cli.h"

#include <iostream>

int main(int argc, char **argv)
{
    return cppl::agent::agentMain(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
