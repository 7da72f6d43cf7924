# SPDX-License-Identifier: MIT
# clusterppl_add_test(NAME SOURCES a.cpp b.cpp LIBRARIES lib... LABELS unit|integration|e2e|gpu
#                     [TIMEOUT seconds] [ENVIRONMENT VAR=value ...])
# add_executable + add_test + labels in one place, so every test is registered the same way.
function(clusterppl_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBRARIES;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT ARG_LABELS)
    message(FATAL_ERROR "clusterppl_add_test(${name}): LABELS is required (unit, integration, e2e or gpu)")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE clusterppl_options Qt6::Test ${ARG_LIBRARIES})
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}/tests/common")
  # QT_NO_KEYWORDS: Qt's `slots`/`signals` macros would eat HostSpec::slots and torch headers.
  target_compile_definitions(${name} PRIVATE
    QT_NO_KEYWORDS
    CPPL_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    CPPL_BINARY_DIR="${PROJECT_BINARY_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${ARG_LABELS}"
    TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "QT_QPA_PLATFORM=offscreen;XDG_RUNTIME_DIR=${PROJECT_BINARY_DIR}/xdg-runtime;${ARG_ENVIRONMENT}")
endfunction()
