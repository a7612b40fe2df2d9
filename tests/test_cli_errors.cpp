// The mistakes of a user's first hour, through the CLI on tiny random models: each error names
// the flag or the file, says what was expected and what was found, and leaves nothing behind.
//
//   ImportanceOfAnotherModel: --importance of another model, in prune and in search;
//   ArchOfAnotherDepth: prune --arch with fewer layers than the parent;
//   SeqLenZero: --seq-len 0 (and search's --search-seq-len 0) in every subcommand that has it;
//   MissingProfile: --profile naming no file, and a CPU scenario searched without a profile;
//   ProfilePasses: profile --passes outside 1..64, refused before anything is timed;
//   SeqLenBeyondTheModelsContext: eval, importance, distill and search past
//     max_position_embeddings, eval past a Mistral's sliding window;
//   RefusedDistillLeavesNoState: a distill refused after its options were read leaves no
//     OUT.state folder (and no OUT);
//   TokenizeReadsATokenizerJsonAlone: tokenize --model on a folder with tokenizer.json and no
//     config.json, and the error on one with tokenizer.bin alone.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <set>

#include "common/error.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "data/token_file.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "io/hf_unicode.h"
#include "prune/arch.h"
#include "test_util.h"

namespace ac {
namespace {

using test::TempDir;

using test::CliRun;
using test::names_in;
using test::run_cli;

/// D 32, 3 layers of 4 query heads in 2 KV groups (head_dim 8), FFN 48, vocab 48; 256 positions
/// (the default --seq-len).
ModelConfig tiny(int64_t hidden = 32, int64_t layers = 3) {
  ModelConfig c = ModelConfig::uniform(48, hidden, layers, LayerConfig{4, 2, 8, 48});
  c.max_position_embeddings = 256;
  return c;
}

/// In `dir`: parent/ (tiny()), other/ (hidden 24), their importance files, train.tokens, and
/// arch.json (the parent's hidden size cut to 24).
struct Fixture {
  fs::path dir;
  TempDir logs;
  explicit Fixture(const fs::path& d) : dir(d) {
    for (const auto& [name, c] : {std::pair<std::string, ModelConfig>{"parent", tiny()},
                                  {"other", tiny(/*hidden=*/24)}}) {
      const LlamaModel m{c, random_weights(c, 7, 0.3)};
      fs::create_directories(dir / name);
      save_checkpoint(dir / name, m);
      ImportanceOptions io;
      io.show_progress = false;
      save_importance(dir / (name + ".importance.safetensors"),
                      compute_importance(m, {test::random_tokens(2, 12, 48, 5)}, io));
    }
    at::Tensor ids = test::random_tokens(1, 3000, 48, 6).to(at::kInt).view({-1});
    write_token_file(dir / "train.tokens",
                     std::vector<int32_t>(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + 3000),
                     48);
    ModelConfig target = tiny();
    target.hidden_size = 24;
    write_arch(dir / "arch.json", target);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  CliRun run(const std::string& args) const { return run_cli(args, logs.path); }
};

/// Expects a refusal (rc != 0) whose stderr holds every needle, and `dir` unchanged.
void expect_refused(const Fixture& fx, const std::string& args,
                    const std::vector<std::string>& needles) {
  const std::set<std::string> before = names_in(fx.dir);
  const CliRun r = fx.run(args);
  EXPECT_NE(r.rc, 0) << args;
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << args << "\nstderr: " << r.err
                                                << "\nexpected: " << n;
  EXPECT_EQ(names_in(fx.dir), before) << args << ": something was left behind";
}

TEST(CliErrors, ImportanceOfAnotherModel) {
  TempDir d;
  const Fixture fx(d.path);
  const std::string imp = fx.path("other.importance.safetensors");
  const std::string parent_config = fx.path("parent/config.json");
  const std::vector<std::string> needles = {"--importance " + imp, "hidden has shape [24]",
                                            "expected [32]", parent_config + " hidden_size",
                                            "computed for another model?"};
  expect_refused(fx, fmt::format("prune --model {} --importance {} --arch {} --out {}",
                                 fx.path("parent"), imp, fx.path("arch.json"), fx.path("out")),
                 needles);
  std::vector<std::string> search_needles = needles;
  search_needles[0] = "[search] --importance " + imp;
  expect_refused(fx, fmt::format("search --model {} --importance {} --scenario stories15m-serving "
                                 "--data {} --out {}", fx.path("parent"), imp,
                                 fx.path("train.tokens"), fx.path("searched.json")),
                 search_needles);
  // The parent's own importance passes the same check (the refusal is the importance's).
  const CliRun ok = fx.run(fmt::format("prune --model {} --importance {} --arch {} --out {}",
                                          fx.path("parent"),
                                          fx.path("parent.importance.safetensors"),
                                          fx.path("arch.json"), fx.path("pruned")));
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_TRUE(fs::exists(fx.dir / "pruned/config.json"));
}

TEST(CliErrors, ArchOfAnotherDepth) {
  TempDir d;
  const Fixture fx(d.path);
  write_arch(fx.dir / "shallow.json", tiny(/*hidden=*/24, /*layers=*/2));
  expect_refused(fx, fmt::format("prune --model {} --importance {} --arch {} --out {}",
                                 fx.path("parent"), fx.path("parent.importance.safetensors"),
                                 fx.path("shallow.json"), fx.path("out")),
                 {"[prune] --arch " + fx.path("shallow.json"), "2 layers, expected the parent's 3",
                  "parent: " + fx.path("parent/config.json")});
}

// CLI11 refuses the value while parsing, so no input is read: the paths need not exist.
TEST(CliErrors, SeqLenZero) {
  TempDir d;
  const Fixture fx(d.path);
  const std::string m = fx.path("parent"), data = fx.path("train.tokens"), out = fx.path("out");
  const std::vector<std::string> commands = {
      fmt::format("importance --model {} --data {} --out {} --seq-len 0", m, data, out),
      fmt::format("eval --model {} --data {} --seq-len 0", m, data),
      fmt::format("sample --model {} --count 2 --seed 1 --out {} --seq-len 0", m, out),
      fmt::format("distill --teacher {} --student {} --data {} --tokens 100 --out {} --seq-len 0",
                  m, m, data, out),
      fmt::format("search --model {} --importance {} --scenario stories15m-serving --data {} "
                  "--out {} --seq-len 0", m, fx.path("parent.importance.safetensors"), data, out),
      fmt::format("compress --model {} --scenario stories15m-serving --out {} --seq-len 0", m,
                  out)};
  for (const std::string& c : commands)
    expect_refused(fx, c, {"--seq-len: expected a positive number of tokens, found 0"});
  expect_refused(fx,
                 fmt::format("search --model {} --importance {} --scenario stories15m-serving "
                             "--data {} --out {} --search-seq-len 0", m,
                             fx.path("parent.importance.safetensors"), data, out),
                 {"--search-seq-len: expected a positive number of tokens, found 0"});
  expect_refused(fx, fmt::format("eval --model {} --data {} --seq-len -3", m, data),
                 {"--seq-len: expected a positive number of tokens, found -3"});
  // A blockwise start below one step (2 x 32 tokens) is refused before anything is read, not
  // after the search; so is a value below -1 through the old spelling, which CLI11 lets pass.
  for (const char* flag : {"--distill-bld-tokens 63", "--autocompress-bld-tokens -5"})
    expect_refused(fx,
                   fmt::format("compress --model {} --scenario stories15m-serving --out {} "
                               "--seq-len 32 {}", m, out, flag),
                   {"--distill-bld-tokens", "at least one step of 2 x 32 = 64 tokens"});
}

TEST(CliErrors, MissingProfile) {
  TempDir d;
  const Fixture fx(d.path);
  const std::string nope = fx.path("nope.json"), config = fx.path("parent/config.json");
  const std::vector<std::string> needles = {"--profile " + nope, "no such file",
                                            "expected a profile JSON"};
  expect_refused(fx, fmt::format("plan --config {} --scenario cpu-local --profile {}", config,
                                 nope), needles);
  expect_refused(fx, fmt::format("cost --config {} --scenario cpu-local --profile {}", config,
                                 nope), needles);
  expect_refused(fx, fmt::format("search --model {} --importance {} --scenario cpu-local "
                                 "--profile {} --data {} --out {}", fx.path("parent"),
                                 fx.path("parent.importance.safetensors"), nope,
                                 fx.path("train.tokens"), fx.path("searched.json")),
                 needles);
  expect_refused(fx, fmt::format("compress --model {} --scenario cpu-local --profile {} --out {}",
                                 fx.path("parent"), nope, fx.path("run")),
                 needles);
  // Required on a CPU scenario, and not given: the flag and what it needs.
  expect_refused(fx, fmt::format("search --model {} --importance {} --scenario cpu-local "
                                 "--data {} --out {}", fx.path("parent"),
                                 fx.path("parent.importance.safetensors"), fx.path("train.tokens"),
                                 fx.path("searched.json")),
                 {"scenario 'cpu-local' targets a CPU", "--profile",
                  "expected a profile, found none"});
}

TEST(CliErrors, ProfilePasses) {
  TempDir d;
  const Fixture fx(d.path);
  for (const char* passes : {"0", "-2", "65"})
    expect_refused(fx, fmt::format("profile --scenario cpu-local --passes {} --out {}", passes,
                                   fx.path("p.json")),
                   {fmt::format("--passes: Value {} not in range 1 to 64", passes)});
}

TEST(CliErrors, SeqLenBeyondTheModelsContext) {
  TempDir d;
  const Fixture fx(d.path);
  const std::string m = fx.path("parent"), data = fx.path("train.tokens");
  const std::vector<std::string> needles = {"--seq-len 257", "expected at most "
                                            "max_position_embeddings 256 of " +
                                            fx.path("parent/config.json")};
  std::vector<std::string> eval_needles = needles;
  eval_needles.push_back("--stride");
  expect_refused(fx, fmt::format("eval --model {} --data {} --seq-len 257", m, data), eval_needles);
  expect_refused(fx, fmt::format("eval --model {} --teacher {} --data {} --seq-len 257", m, m,
                                 data), eval_needles);
  expect_refused(fx, fmt::format("importance --model {} --data {} --out {} --seq-len 257", m, data,
                                 fx.path("imp.safetensors")),
                 needles);
  expect_refused(fx, fmt::format("distill --teacher {} --student {} --data {} --tokens 256 "
                                 "--out {} --seq-len 257", m, m, data, fx.path("out")),
                 needles);
  expect_refused(fx, fmt::format("search --model {} --importance {} --scenario stories15m-serving "
                                 "--data {} --out {} --seq-len 257", m,
                                 fx.path("parent.importance.safetensors"), data,
                                 fx.path("searched.json")),
                 needles);
  // At the model's context it runs.
  const CliRun ok = fx.run(fmt::format("eval --model {} --data {} --seq-len 256 "
                                          "--max-batches 1", m, data));
  EXPECT_EQ(ok.rc, 0) << ok.err;
  // A Mistral whose attention slides past 16 positions: refused before the forward would stop.
  ModelConfig mistral = tiny();
  mistral.model_type = "mistral";
  mistral.architecture = "MistralForCausalLM";
  mistral.extra["sliding_window"] = 16;
  fs::create_directories(fx.dir / "mistral");
  save_checkpoint(fx.dir / "mistral", LlamaModel{mistral, random_weights(mistral, 3, 0.3)});
  expect_refused(fx, fmt::format("eval --model {} --data {} --seq-len 32", fx.path("mistral"),
                                 data),
                 {"--seq-len 32", "expected at most sliding_window 16 of " +
                                      fx.path("mistral/config.json")});
  const CliRun in_window = fx.run(fmt::format("eval --model {} --data {} --seq-len 16 "
                                                 "--max-batches 1", fx.path("mistral"), data));
  EXPECT_EQ(in_window.rc, 0) << in_window.err;
}

TEST(CliErrors, RefusedDistillLeavesNoState) {
  TempDir d;
  const Fixture fx(d.path);
  const std::string base = fmt::format("distill --teacher {} --student {} --data {} --tokens 256 "
                                       "--out {}", fx.path("parent"), fx.path("parent"),
                                       fx.path("train.tokens"), fx.path("out"));
  // Refused by the distillation's options, after the state folder's place is known.
  expect_refused(fx, base + " --seq-len 1", {"seq_len >= 2"});
  expect_refused(fx, base + " --eval-at-tokens 128", {"--eval-at-tokens needs --eval-data"});
  // A state folder that was there before is the user's: kept.
  fs::create_directories(fx.dir / "mine.state");
  const CliRun r = fx.run(fmt::format("distill --teacher {} --student {} --data {} --tokens 256 "
                                         "--out {} --state-dir {} --seq-len 1", fx.path("parent"),
                                         fx.path("parent"), fx.path("train.tokens"),
                                         fx.path("out"), fx.path("mine.state")));
  EXPECT_NE(r.rc, 0);
  EXPECT_TRUE(fs::is_directory(fx.dir / "mine.state"));
}

/// A byte-level tokenizer.json: id b is byte b, then "he" (256); <|bos|> 257 an added token.
nlohmann::json byte_level_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[hf::byte_to_unicode()[b]] = b;
  vocab["he"] = 256;
  const nlohmann::json bytelevel = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                                    {"trim_offsets", true}, {"use_regex", true}};
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
          {"added_tokens", {{{"id", 257}, {"content", "<|bos|>"}, {"single_word", false},
                             {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                             {"special", true}}}},
          {"normalizer", nullptr}, {"pre_tokenizer", bytelevel}, {"post_processor", nullptr},
          {"decoder", bytelevel},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                     {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                     {"vocab", vocab}, {"merges", {"h e"}}}}};
}

TEST(CliErrors, TokenizeReadsATokenizerJsonAlone) {
  TempDir d, logs;
  fs::create_directories(d.path / "alone");
  write_json_file(d.path / "alone/tokenizer.json", byte_level_tokenizer_json());
  const std::string out = (logs.path / "ids.json").string();
  const std::string cmd = fmt::format("{} tokenize --model {} --prompt 'hehe!' --json > {}",
                                      test::cli_bin(), (d.path / "alone").string(), out);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const nlohmann::json j = read_json_file(out);
  // "he" twice and '!' (byte 33): the ids the file's merges give, by hand (no post-processor:
  // no BOS).
  EXPECT_EQ(j.at("ids"), nlohmann::json({256, 256, 33}));
  EXPECT_EQ(j.at("vocab_size"), 258);

  // tokenizer.bin cannot be read without config.json's vocab_size: the error says so.
  fs::create_directories(d.path / "bin");
  write_file_atomic(d.path / "bin/tokenizer.bin", "not read");
  const CliRun r = run_cli(fmt::format("tokenize --model {} --prompt x",
                                          (d.path / "bin").string()), logs.path);
  EXPECT_NE(r.rc, 0);
  for (const std::string& n : std::vector<std::string>{"--model " + (d.path / "bin").string(),
                                                       "no config.json",
                                                       "expected config.json beside tokenizer.bin"})
    EXPECT_NE(r.err.find(n), std::string::npos) << r.err << "\nexpected: " << n;
}

}  // namespace
}  // namespace ac
