# How a GoogleTest executable becomes ctest tests, and in which tier (scripts/run-tests).
#
#   faultline_gtest(TARGET [SLOW] [LABELS label...] [TIMEOUT s] [DISCOVERY_TIMEOUT s]
#                   [RESOURCE_LOCK name] [PREFIX text] [SERIAL regex...])
#
# Every test of TARGET is discovered from the built executable (gtest_discover_tests) and gets
# LABELS and TIMEOUT. The tier is declared where the test is:
# - a test whose full name starts with `Slow` (a suite `SlowFoo`, or an instantiation
#   `INSTANTIATE_TEST_SUITE_P(Slow, ...)`) also gets the label `slow`;
# - SLOW gives every test of TARGET the label `slow` (say why beside the call).
# `make test` runs what is not `slow`; `make check` runs everything.
# RESOURCE_LOCK: tests that cannot run beside each other name the thing they share (say why
# beside the call); ctest -j never runs two holders of one lock at once.
# PREFIX goes before every test's name (`explore.`: `ctest -R explore` selects them).
# SERIAL: the tests whose full names match one of the regexes run alone (RUN_SERIAL: ctest -j
# starts nothing beside them; say why beside the call).
include_guard(GLOBAL)
include(GoogleTest)

function(faultline_gtest target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "SLOW" "TIMEOUT;DISCOVERY_TIMEOUT;RESOURCE_LOCK;PREFIX"
                        "LABELS;SERIAL")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "faultline_gtest(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 60)
  endif()
  if(NOT arg_DISCOVERY_TIMEOUT)
    set(arg_DISCOVERY_TIMEOUT 60)
  endif()
  # A test executable of several units parses GoogleTest and nlohmann/json once.
  get_target_property(srcs ${target} SOURCES)
  list(LENGTH srcs nsrcs)
  if(nsrcs GREATER_EQUAL 4)
    faultline_precompile_headers(${target} <gtest/gtest.h> <nlohmann/json.hpp> <string> <vector>
                                 <map> <memory> <functional> <chrono>)
  endif()
  set(props TIMEOUT ${arg_TIMEOUT})
  if(arg_RESOURCE_LOCK)
    list(APPEND props RESOURCE_LOCK ${arg_RESOURCE_LOCK})
  endif()
  # gtest_discover_tests passes one value per property, so a test's several labels are set by
  # a file ctest reads after the discovered tests (the list TEST_LIST names every one of them).
  gtest_discover_tests(${target} TEST_LIST ${target}_TESTS DISCOVERY_TIMEOUT ${arg_DISCOVERY_TIMEOUT}
                       TEST_PREFIX "${arg_PREFIX}"
                       PROPERTIES ${props})
  set(labels ${arg_LABELS})
  set(slow_labels ${arg_LABELS} slow)
  if(arg_SLOW)
    set(labels ${slow_labels})
  endif()
  set(tiers ${CMAKE_CURRENT_BINARY_DIR}/${target}_tiers.cmake)
  file(WRITE ${tiers}
       "# Written by faultline_gtest (cmake/FaultlineTests.cmake): the labels of ${target}'s tests.\n"
       "foreach(_t IN LISTS ${target}_TESTS)\n"
       "  if(_t MATCHES \"^${arg_PREFIX}Slow\")\n"
       "    set_tests_properties(\"\${_t}\" PROPERTIES LABELS \"${slow_labels}\")\n")
  if(labels)
    file(APPEND ${tiers}
         "  else()\n"
         "    set_tests_properties(\"\${_t}\" PROPERTIES LABELS \"${labels}\")\n")
  endif()
  file(APPEND ${tiers} "  endif()\n")
  foreach(re IN LISTS arg_SERIAL)
    file(APPEND ${tiers}
         "  if(_t MATCHES \"${re}\")\n"
         "    set_tests_properties(\"\${_t}\" PROPERTIES RUN_SERIAL TRUE)\n"
         "  endif()\n")
  endforeach()
  file(APPEND ${tiers} "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${tiers})
endfunction()
