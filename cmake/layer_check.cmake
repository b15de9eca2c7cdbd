# layer_check.cmake: the ctest tests layers/* (CMakeLists.txt, "layer
# checks"), run as `cmake -P`. Two modes:
#
#   MODE=probe: for one target, compiles a one-line file `#include "<header>"`
#     with exactly that target's include directories, once per header of
#     every layer, and checks the outcome against the layer table: a header
#     of the target's own layer or of one it sees must compile; any other
#     must fail with "not found", under its file name and under its old path
#     from src/ ("model/model.h"). So the test fails when a target's include
#     path grows a folder it must not see (an upward include would compile),
#     and when it loses one it needs.
#     Inputs: TARGET, CC, INCLUDES and DEFINES ('|'-separated), WORK (a
#     scratch folder), PROBES ('|'-separated "header=ok" or "header=fail=path").
#
#   MODE=paths: include paths cannot stop `#include "../model/model.h"` (a
#     quoted include is looked up next to the including file first), so this
#     mode fails on any quoted include in src, tools, tests, bench or fuzz that
#     climbs with "../" or names a layer's folder. Input: ROOT (the source tree).
cmake_minimum_required(VERSION 3.22)
set(errors "")

if(MODE STREQUAL "paths")
  file(GLOB_RECURSE files ${ROOT}/src/*.[ch] ${ROOT}/tools/*.[ch] ${ROOT}/tests/*.[ch]
       ${ROOT}/bench/*.[ch] ${ROOT}/fuzz/*.[ch])
  foreach(f ${files})
    file(STRINGS ${f} bad REGEX
         "^[ \t]*#[ \t]*include[ \t]*\"(\\.\\./|(base|tensor|backend|model|audio|asr)/)")
    foreach(line ${bad})
      file(RELATIVE_PATH rel ${ROOT} ${f})
      string(APPEND errors "  ${rel}: ${line}\n")
    endforeach()
  endforeach()
  if(errors)
    message(FATAL_ERROR "includes by path (include headers by file name; "
                        "scripts/fix-includes.sh rewrites them):\n${errors}")
  endif()
  return()
endif()

string(REPLACE "|" ";" incs "${INCLUDES}")
string(REPLACE "|" ";" defs "${DEFINES}")
string(REPLACE "|" ";" probes "${PROBES}")
set(flags -std=c11 -fsyntax-only -D_GNU_SOURCE)
foreach(i ${incs})
  list(APPEND flags -I${i})
endforeach()
foreach(d ${defs})
  list(APPEND flags -D${d})
endforeach()
file(MAKE_DIRECTORY ${WORK})
set(n_ok 0)
set(n_fail 0)
foreach(p ${probes})
  string(REPLACE "=" ";" parts "${p}")
  list(GET parts 0 header)
  list(GET parts 1 want)
  set(names ${header})
  if(want STREQUAL "fail")
    list(GET parts 2 path)
    if(NOT path STREQUAL "-")
      list(APPEND names ${path})
    endif()
  endif()
  foreach(name ${names})
    file(WRITE ${WORK}/probe.c "#include \"${name}\"\n")
    execute_process(COMMAND ${CC} ${flags} ${WORK}/probe.c
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(want STREQUAL "ok")
      math(EXPR n_ok "${n_ok} + 1")
      if(NOT rc EQUAL 0)
        string(APPEND errors "  ${TARGET} may include \"${name}\" but it does not compile:\n${out}\n")
      endif()
    else()
      math(EXPR n_fail "${n_fail} + 1")
      if(rc EQUAL 0)
        string(APPEND errors "  ${TARGET} can include \"${name}\", a header of a layer it must not see\n")
      elseif(NOT out MATCHES "${name}('|:) (No such file or directory|file not found)")
        # (a header that is found but includes one that is not would pass
        # for the wrong reason)
        string(APPEND errors "  ${TARGET}: \"${name}\" fails, but not as not found:\n${out}\n")
      endif()
    endif()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "layer check of ${TARGET} (include path: ${incs}):\n${errors}")
endif()
message(STATUS "${TARGET}: ${n_ok} headers it may include compile, ${n_fail} it must not see are not found")
