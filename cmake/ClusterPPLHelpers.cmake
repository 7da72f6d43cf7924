# SPDX-License-Identifier: MIT
# clusterppl_add_test(NAME SOURCES a.cpp b.cpp LIBRARIES lib... LABELS unit|integration|e2e|gpu
#                     [TIMEOUT seconds] [ENVIRONMENT VAR=value ...] [RUN_SERIAL | SPLIT_TIMED])
# add_executable + add_test + labels in one place, so every test is registered the same way.
# The executable runs through tests/common/run_qtest.sh: a QSKIP makes the test "Skipped" (exit 77),
# and under CI=true any skip but a missing GPU fails it (docs/testing.md).
# RUN_SERIAL: for tests whose bounds are wall-clock times (stall windows, "dead within 3 s"), so
# that ctest -j does not run them next to other tests.
# SPLIT_TIMED: the executable is registered twice (tests/common/test_parts.h): NAME runs the
# functions whose bounds only catch a hang, beside other tests, and NAME_timed (RUN_SERIAL) the ones
# its main() lists as timed.
# Test sources build at -Og in optimised builds (Release, RelWithDebInfo): they drive and check
# processes and libraries, which keep -O3. -Og compiles a test TU in 13 s where -O3 took 22
# (tst_app_models, GCC 12; CI's clean clone compiles 61 of them: 675 CPU-s instead of 1067), and
# no test ran slower for it
# (tst_app_history 19.1 s vs 19.5, tst_app_models 5.2 vs 5.1, tst_native_kernels 12.7 vs 11.0).
function(clusterppl_add_test name)
  cmake_parse_arguments(ARG "RUN_SERIAL;SPLIT_TIMED" "TIMEOUT" "SOURCES;LIBRARIES;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT ARG_LABELS)
    message(FATAL_ERROR "clusterppl_add_test(${name}): LABELS is required (unit, integration, e2e or gpu)")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE clusterppl_options Qt6::Test ${ARG_LIBRARIES})
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}/tests/common")
  # After the build type's -O3 on the command line, so it wins.
  target_compile_options(${name} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-Og>)
  # QT_NO_KEYWORDS: Qt's `slots`/`signals` macros would eat HostSpec::slots and torch headers.
  target_compile_definitions(${name} PRIVATE
    QT_NO_KEYWORDS
    CPPL_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    CPPL_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(ARG_SPLIT_TIMED)
    if(ARG_RUN_SERIAL)
      message(FATAL_ERROR "clusterppl_add_test(${name}): RUN_SERIAL and SPLIT_TIMED exclude each other")
    endif()
    clusterppl_register_test(${name} ${name} "${ARG_LABELS}" "${ARG_TIMEOUT}" FALSE "CPPL_TEST_PART=untimed;${ARG_ENVIRONMENT}")
    clusterppl_register_test(${name}_timed ${name} "${ARG_LABELS}" "${ARG_TIMEOUT}" TRUE "CPPL_TEST_PART=timed;${ARG_ENVIRONMENT}")
  else()
    clusterppl_register_test(${name} ${name} "${ARG_LABELS}" "${ARG_TIMEOUT}" "${ARG_RUN_SERIAL}" "${ARG_ENVIRONMENT}")
  endif()
endfunction()

# One ctest test of the executable `target`, run through run_qtest.sh, with the properties every
# test has (clusterppl_add_test).
function(clusterppl_register_test name target labels timeout run_serial environment)
  add_test(NAME ${name} COMMAND bash "${PROJECT_SOURCE_DIR}/tests/common/run_qtest.sh" $<TARGET_FILE:${target}>)
  if(NOT timeout)
    set(timeout 300)
  endif()
  # Sanitizer builds (the asan presets) run the GUI tests 5-10x slower: their limits, and the
  # waits inside tests that read CPPL_TIMEOUT_SCALE, are three times as long there.
  set(timeout_scale 1)
  if("${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_INIT}" MATCHES "-fsanitize=")
    set(timeout_scale 3)
  endif()
  math(EXPR timeout "${timeout} * ${timeout_scale}")
  set_tests_properties(${name} PROPERTIES
    LABELS "${labels}"
    TIMEOUT ${timeout}
    SKIP_RETURN_CODE 77
    RUN_SERIAL ${run_serial}
    # CLUSTERPPL_STORE: runs a test records go to the build tree's history, never the user's.
    # QTEST_FUNCTION_TIMEOUT: Qt Test's own 5-minute limit per function is shorter than what a real
    # evaluation takes on a loaded 2-core machine; the test's TIMEOUT above still bounds the whole.
    ENVIRONMENT "QTEST_FUNCTION_TIMEOUT=900000;CPPL_TIMEOUT_SCALE=${timeout_scale};QT_QPA_PLATFORM=offscreen;XDG_RUNTIME_DIR=${PROJECT_BINARY_DIR}/xdg-runtime;CLUSTERPPL_STORE=${PROJECT_BINARY_DIR}/test-history/runs.sqlite;${environment}")
endfunction()
