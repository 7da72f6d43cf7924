# SPDX-License-Identifier: MIT
# Writes a man page from an executable's own --help output, so the page can never disagree with it.
#   cmake -DEXE=path -DNAME=clusterppl-cli -DVERSION=0.1.0 -DOUT=clusterppl-cli.1.gz
#         [-DSUBCOMMANDS=run;list;report] -P gen-manpage.cmake
# Each SUBCOMMAND adds a section with `EXE SUBCOMMAND --help`. gzip -9n: reproducible (no name, no time).
foreach(v EXE NAME VERSION OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "gen-manpage.cmake: -D${v}= is required")
  endif()
endforeach()

# The dashboard is a QApplication: --help must not need a display.
set(ENV{QT_QPA_PLATFORM} offscreen)

function(help_of out_var)
  execute_process(COMMAND "${EXE}" ${ARGN} --help
                  OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    message(FATAL_ERROR "gen-manpage.cmake: `${EXE} ${ARGN} --help` failed (exit ${rc}): ${err}")
  endif()
  # QCommandLineParser prints argv[0]: the build tree's path, not the installed name.
  string(REPLACE "${EXE}" "${NAME}" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# Verbatim troff: backslashes escaped, control characters at line starts neutralised.
function(troff_verbatim out_var text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "—" "\\(em" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  set(${out_var} ".nf\n${text}\n.fi\n" PARENT_SCOPE)
endfunction()

help_of(main_help)
# NAME: the first line's "name — summary" (QCommandLineParser's "Usage: ..." first line has none).
string(REGEX MATCH "^[^\n]*" first "${main_help}")
set(summary "")
if(first MATCHES "— (.*)$")
  set(summary "${CMAKE_MATCH_1}")
endif()
if(NOT "${SUMMARY}" STREQUAL "")
  set(summary "${SUMMARY}")
endif()

# SYNOPSIS: every usage line of the help that starts with the executable's name, and the commands
# a "Commands:" list names (two-space indent, until the next blank line).
set(synopsis "")
# One list element per line: ';' and brackets (which would join list elements) stand in as codes.
string(ASCII 1 SC)
string(ASCII 2 LB)
string(ASCII 3 RB)
function(lines_of out_var text)
  string(REPLACE ";" "${SC}" text "${text}")
  string(REPLACE "[" "${LB}" text "${text}")
  string(REPLACE "]" "${RB}" text "${text}")
  string(REPLACE "\n" ";" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()
lines_of(lines "${main_help}")
foreach(sub IN LISTS SUBCOMMANDS)
  help_of(sub_help ${sub})
  lines_of(sub_lines "${sub_help}")
  list(APPEND lines ${sub_lines})
endforeach()
set(in_commands OFF)
foreach(line IN LISTS lines)
  if(line STREQUAL "Commands:")
    set(in_commands ON)
    continue()
  elseif(line STREQUAL "")
    set(in_commands OFF)
  elseif(in_commands AND line MATCHES "^  ([a-z].*)$")
    list(APPEND synopsis "${NAME} ${CMAKE_MATCH_1}")
  elseif(line MATCHES "—")
    # the title line, "name — summary": NAME, not SYNOPSIS
  elseif(line MATCHES "^(Usage: )?[ ]*(${NAME}( .*)?)$")
    string(STRIP "${CMAKE_MATCH_2}" s)
    list(APPEND synopsis "${s}")
  endif()
endforeach()
list(REMOVE_DUPLICATES synopsis)

string(TOUPPER "${NAME}" upper)
set(page ".TH ${upper} 1 \"\" \"ClusterPPL ${VERSION}\" \"User Commands\"\n")
string(APPEND page ".SH NAME\n${NAME} \\- ${summary}\n.SH SYNOPSIS\n")
foreach(s IN LISTS synopsis)
  string(REPLACE "${SC}" ";" s "${s}")
  string(REPLACE "${LB}" "[" s "${s}")
  string(REPLACE "${RB}" "]" s "${s}")
  string(REPLACE "\\" "\\e" s "${s}")
  string(REPLACE "-" "\\-" s "${s}")
  string(APPEND page ".B ${s}\n.br\n")
endforeach()
troff_verbatim(body "${main_help}")
string(APPEND page ".SH DESCRIPTION\nThe text of\n.B ${NAME} \\-\\-help\n(this page is generated from it):\n.PP\n${body}")
foreach(sub IN LISTS SUBCOMMANDS)
  help_of(sub_help ${sub})
  troff_verbatim(body "${sub_help}")
  string(APPEND page ".SH \"${upper} ${sub}\"\n.PP\n${body}")
endforeach()
string(APPEND page ".SH SEE ALSO\n/usr/share/doc/clusterppl/ and the project's docs/ (exit codes, profiles, telemetry).\n")

string(REGEX REPLACE "\\.gz$" "" plain "${OUT}")
file(WRITE "${plain}" "${page}")
execute_process(COMMAND gzip -9nf "${plain}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gen-manpage.cmake: gzip ${plain} failed")
endif()
