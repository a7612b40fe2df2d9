# The tests ctest runs, and their tiers as ctest labels (`ctest -L unit`, `ctest -LE 'e2e|slow'`).
#
# ctest includes this file (TEST_INCLUDE_FILES, CMakeLists.txt) each time it starts. It lists the
# tests of autocompress_tests (`--gtest_list_tests`, names "Suite.Test"), gives each the label of
# every rule below whose regular expression matches its name (a test that needs none of model,
# client, slow or judge is `unit`), and registers them:
#   - a test labelled slow alone, named "Suite.Test": it runs for minutes, under its own timeout;
#   - the other tests of a suite together, one process for each set of labels, named "Suite.*"
#     (with "/label+label" after it when the suite spans several sets): each process pays the
#     start of the binary (0.7 s in Release, 2 s under ASan) once instead of once a test.
# `ctest -R Distill` selects suites; one test alone is
# `build/autocompress_tests --gtest_filter=Distill.ShortRunLowersHeldOutKl`.
#
#   unit    needs nothing but the build and the Debian packages of scripts/setup.sh: no network,
#           no model files, no node, no chromium; seconds each. scripts/test.sh runs this tier
#           under scripts/hermetic.sh, which takes all four away: a test that needs one of them
#           and is not labelled for it fails there.
#   model   needs stories15M (scripts/fetch_stories15m.sh).
#   client  runs a real client or reads its files: llama.cpp through node-llama-cpp
#           (scripts/setup_node.sh), headless chromium, Hugging Face's JavaScript tokenizers and
#           the real tokenizer.json files of the parity kit (scripts/setup_tokenizers.sh).
#   e2e     runs the CLI through several stages (import, sample, importance, prune, distill,
#           eval, report) or `compress`; the sanitizer tree leaves these out, they repeat code
#           that the other tiers test piece by piece. An e2e test may also be unit.
#   slow    more than 10 s in the Release build.
#   judge   runs the field's own code on what we write and score (tests/golden/judge_exports.py:
#           gguf-py, transformers; tests/golden/judge_lm_eval.py: lm-evaluation-harness) with the
#           Python environment of scripts/setup_torch_venv.sh; where that is absent (CI has no
#           PyPI) each test skips saying why, and ctest reports it skipped.
set(_ac_label_rules
  judge  "^Judge\\."
  model  "^Judge\\.LmEval"
  model  "^Stories15M\\."
  model  "^Llama2c\\.ImportsRealStories15m$"
  model  "^Tokenizer\\.(Stories15m|HeapMerge)"
  model  "^CompressData\\."
  model  "^CompressGpuScenario\\."
  model  "^CompressSignal\\."
  model  "^CompressResume\\."
  model  "^LlamaCppStage\\.MeasuresTpot"
  model  "^ReportHtml\\.CompressOnTheCpuScenario"
  client "^LlamaCpp\\."
  client "^LlamaCppEngineClient\\."
  client "^LlamaCppNemotronH\\."
  client "^CompressData\\.Stories15mOnMobyDick"
  client "^HubCheckpoint\\."
  client "^HfTokenizerParity\\."
  client "^GgufTokenizer\\."
  client "^GgufVocab\\.RealTokenizers"
  client "^LlamaCppStage\\.RunsOnATokenizerJsonCheckpoint$"
  client "^TextCorpus\\.Llama3ParagraphIdsEqualTheWholeText$"
  client "^LlamaCppStage\\.MeasuresTpot"
  client "^ReportHtml\\.(EveryPlotOfTheFixtureRun|CompressOnTheCpuScenario)"
  e2e    "^CompressGpuScenario\\."
  e2e    "^CompressSignal\\."
  e2e    "^CompressResume\\."
  e2e    "^CompressData\\.AProfileOfAnotherMachine"
  e2e    "^CompressData\\.Stories15mOnMobyDick"
  e2e    "^HubCheckpoint\\.Compress"
  e2e    "^ReportHtml\\.(CompressOnTheCpuScenario|CliRerenders)"
  e2e    "^Cli\\.(SampleDistillEval|MakeTasksThenEvalTwoModels)$"
  e2e    "^DistillCli\\."
  e2e    "^DistillHidden\\.CliReads"
  e2e    "^Prune\\.CliImportanceThenPrune$"
  e2e    "^Llama2c\\.CliImport$"
  e2e    "^Plan\\.CliWritesTheJson"
  e2e    "^CliReference\\."
  slow   "^CompressGpuScenario\\."
  slow   "^CompressSignal\\."
  slow   "^CompressResume\\."
  slow   "^CompressData\\.AProfileOfAnotherMachine"
  slow   "^CompressData\\.Stories15mOnMobyDick"
  slow   "^HubCheckpoint\\.Compress"
  slow   "^ReportHtml\\.CompressOnTheCpuScenario"
  slow   "^HfTokenizerParity\\.(Llama2|Qwen3)StateOfTheUnion$"
  slow   "^LlamaCppStage\\.RunsOnATokenizerJsonCheckpoint$"
  slow   "^Judge\\.LmEval"
)

if(NOT EXISTS "${AC_TESTS_BIN}")
  message(FATAL_ERROR "tests/labels.cmake: ${AC_TESTS_BIN} does not exist; build it first "
                      "(scripts/build.sh)")
endif()
execute_process(COMMAND "${AC_TESTS_BIN}" --gtest_list_tests OUTPUT_VARIABLE _ac_listing
                RESULT_VARIABLE _ac_rc ERROR_VARIABLE _ac_err TIMEOUT 120)
if(NOT _ac_rc EQUAL 0)
  message(FATAL_ERROR "tests/labels.cmake: ${AC_TESTS_BIN} --gtest_list_tests failed "
                      "(${_ac_rc}): ${_ac_err}")
endif()
# The listing: "Suite." on a line, then "  Test" lines; parameterized ones carry "  # ...".
string(REPLACE ";" "\\;" _ac_listing "${_ac_listing}")
string(REPLACE "\n" ";" _ac_lines "${_ac_listing}")
set(_ac_suite "")
set(_ac_groups "")
list(LENGTH _ac_label_rules _ac_n)
math(EXPR _ac_last "${_ac_n} - 1")
foreach(_ac_line IN LISTS _ac_lines)
  string(REGEX REPLACE "#.*" "" _ac_line "${_ac_line}")
  if(_ac_line MATCHES "^([^ ]+)\\.[ ]*$")
    set(_ac_suite "${CMAKE_MATCH_1}")
    continue()
  elseif(NOT _ac_line MATCHES "^  +([^ ]+)")
    continue()
  endif()
  set(_ac_test "${_ac_suite}.${CMAKE_MATCH_1}")
  set(_ac_labels "")
  foreach(_ac_i RANGE 0 ${_ac_last} 2)
    math(EXPR _ac_j "${_ac_i} + 1")
    list(GET _ac_label_rules ${_ac_i} _ac_label)
    list(GET _ac_label_rules ${_ac_j} _ac_regex)
    if(_ac_test MATCHES "${_ac_regex}")
      list(APPEND _ac_labels ${_ac_label})
    endif()
  endforeach()
  if(NOT _ac_labels MATCHES "model|client|slow|judge")
    list(APPEND _ac_labels unit)
  endif()
  list(REMOVE_DUPLICATES _ac_labels)
  list(SORT _ac_labels)
  string(REPLACE ";" "+" _ac_key "${_ac_labels}")
  list(FIND _ac_labels slow _ac_slow)
  if(_ac_slow GREATER -1)
    set(_ac_group "${_ac_test}")
  else()
    set(_ac_group "${_ac_suite}/${_ac_key}")
  endif()
  if(NOT DEFINED _ac_members_${_ac_group})
    list(APPEND _ac_groups "${_ac_group}")
    set(_ac_labels_${_ac_group} "${_ac_labels}")
    set(_ac_suite_${_ac_group} "${_ac_suite}")
    if(NOT DEFINED _ac_sets_${_ac_suite})
      set(_ac_sets_${_ac_suite} 0)
    endif()
    math(EXPR _ac_sets_${_ac_suite} "${_ac_sets_${_ac_suite}} + 1")
  endif()
  list(APPEND _ac_members_${_ac_group} "${_ac_test}")
endforeach()
if(NOT _ac_groups)
  message(FATAL_ERROR "tests/labels.cmake: ${AC_TESTS_BIN} lists no tests")
endif()
foreach(_ac_group IN LISTS _ac_groups)
  set(_ac_suite "${_ac_suite_${_ac_group}}")
  if(_ac_group MATCHES "/")
    set(_ac_name "${_ac_suite}.*")
    if(_ac_sets_${_ac_suite} GREATER 1)
      string(REPLACE ";" "+" _ac_key "${_ac_labels_${_ac_group}}")
      string(APPEND _ac_name "/${_ac_key}")
    endif()
  else()
    set(_ac_name "${_ac_group}")
  endif()
  string(REPLACE ";" ":" _ac_filter "${_ac_members_${_ac_group}}")
  add_test("${_ac_name}" "${AC_TESTS_BIN}" "--gtest_filter=${_ac_filter}")
  set_tests_properties("${_ac_name}" PROPERTIES LABELS "${_ac_labels_${_ac_group}}"
                       ENVIRONMENT "AC_BIN=${AC_CLI_BIN}" WORKING_DIRECTORY "${AC_TESTS_DIR}")
  list(FIND _ac_labels_${_ac_group} judge _ac_judge)
  if(_ac_judge GREATER -1)
    # GTEST_SKIP (no judge Python here) shows as skipped, not passed.
    set_tests_properties("${_ac_name}" PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endif()
endforeach()
