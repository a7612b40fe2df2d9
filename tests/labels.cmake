# The tiers of the test suite, as ctest labels (`ctest -L unit`, `ctest -LE 'e2e|slow'`, ...).
#
# ctest includes this file (TEST_INCLUDE_FILES, CMakeLists.txt) after it has read the tests that
# gtest_discover_tests found in autocompress_tests (their names, "Suite.Test", are in
# autocompress_tests_TESTS). Each test gets the label of every rule below whose regular
# expression matches its name; a test that needs none of model, client or slow is `unit`.
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
set(_ac_label_rules
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
  slow   "^CompressGpuScenario\\."
  slow   "^CompressSignal\\."
  slow   "^CompressResume\\."
  slow   "^CompressData\\.AProfileOfAnotherMachine"
  slow   "^CompressData\\.Stories15mOnMobyDick"
  slow   "^HubCheckpoint\\.Compress"
  slow   "^ReportHtml\\.CompressOnTheCpuScenario"
  slow   "^HfTokenizerParity\\.(Llama2|Qwen3)StateOfTheUnion$"
  slow   "^LlamaCppStage\\.RunsOnATokenizerJsonCheckpoint$"
)

if(NOT DEFINED autocompress_tests_TESTS)
  message(FATAL_ERROR "tests/labels.cmake: no autocompress_tests_TESTS (gtest_discover_tests)")
endif()
list(LENGTH _ac_label_rules _ac_n)
math(EXPR _ac_last "${_ac_n} - 1")
foreach(_ac_test IN LISTS autocompress_tests_TESTS)
  set(_ac_labels "")
  foreach(_ac_i RANGE 0 ${_ac_last} 2)
    math(EXPR _ac_j "${_ac_i} + 1")
    list(GET _ac_label_rules ${_ac_i} _ac_label)
    list(GET _ac_label_rules ${_ac_j} _ac_regex)
    if(_ac_test MATCHES "${_ac_regex}")
      list(APPEND _ac_labels ${_ac_label})
    endif()
  endforeach()
  if(NOT _ac_labels MATCHES "model|client|slow")
    list(APPEND _ac_labels unit)
  endif()
  list(REMOVE_DUPLICATES _ac_labels)
  set_tests_properties("${_ac_test}" PROPERTIES LABELS "${_ac_labels}")
endforeach()
