// A new user's first hour (issue 44), through the CLI on tiny random models with a llama2.c
// tokenizer.bin built in memory:
//
//   MistypedSubcommandSuggestsTheNearest: `prun` is "unknown subcommand 'prun' (did you mean
//     prune?)" with the list, not "A subcommand is required";
//   UnwritableOutputsAreRefusedFirst: an output flag whose folder is missing (or a file) is
//     refused naming the flag and the path, before the inputs are even read;
//   CalibratePrintsASummaryNotTheJson: calibrate prints the errors of the fit in a few lines and
//     where the profile went, the fit itself only in the file;
//   PlainTextIsOneDocumentAndJsonlMany: sample --text-out NAME.jsonl is one document per story;
//     a plain text file is one, its log line and make-tasks's error say how to give several;
//   TokenFileOfAnotherTokenizerIsRefused: a token file records its tokenizer; a model with
//     another of the same size refuses it, its own accepts it, a version-1 file is not checked.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/data_source.h"
#include "data/token_file.h"
#include "hardware/profile.h"
#include "io/checkpoint.h"
#include "profile_fixture.h"
#include "test_util.h"
#include "tokenizer_fixture.h"

namespace ac {
namespace {

using test::TempDir;

using test::CliRun;

/// `autocompress ARGS` with its logs on (no AC_QUIET: some checks read the log lines).
CliRun run_cli(const std::string& args, const fs::path& logs) {
  return test::run_cli(args, logs, /*log=*/true);
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

/// D 32, 2 layers, vocab 300 (the tokenizer's 3 specials, 256 bytes, " " and fillers), 256
/// positions, saved in `dir` with tokenizer.bin `tokenizer`.
void save_tiny_model(const fs::path& dir, const std::string& tokenizer, uint64_t seed = 7) {
  ModelConfig c = ModelConfig::uniform(300, 32, 2, LayerConfig{4, 2, 8, 48});
  c.max_position_embeddings = 256;
  fs::create_directories(dir);
  save_checkpoint(dir, LlamaModel{c, random_weights(c, seed, 0.3)});
  write_file_atomic(dir / "tokenizer.bin", tokenizer);
}

/// The tokenizer of save_tiny_model, and one of the same size whose filler 260 is another piece.
std::string tokenizer_a() { return test::tokenizer_bytes(300); }
std::string tokenizer_b() {
  std::string b = test::tokenizer_bytes(300);
  const size_t at = b.find("p260");
  b[at] = 'q';
  return b;
}

TEST(CliFirstHour, MistypedSubcommandSuggestsTheNearest) {
  TempDir logs;
  CliRun r = run_cli("prun --model x", logs.path);
  EXPECT_NE(r.rc, 0);
  EXPECT_TRUE(has(r.err, "unknown subcommand 'prun' (did you mean prune?)")) << r.err;
  EXPECT_FALSE(has(r.err, "A subcommand is required")) << r.err;
  for (const char* name : {"sample", "importance", "search", "prune", "distill", "eval"})
    EXPECT_TRUE(has(r.err, std::string("\n  ") + name + " ")) << name << " not listed:\n" << r.err;
  r = run_cli("import llam2c model.bin tokenizer.bin --out x", logs.path);
  EXPECT_TRUE(has(r.err, "unknown subcommand 'import llam2c' (did you mean import llama2c?)"))
      << r.err;
  r = run_cli("frobnicate", logs.path);  // nothing near it: the list alone
  EXPECT_TRUE(has(r.err, "unknown subcommand 'frobnicate'\nsubcommands:")) << r.err;
}

TEST(CliFirstHour, UnwritableOutputsAreRefusedFirst) {
  TempDir d, logs;
  write_file_atomic(d.path / "file.txt", "x");
  // Inputs that do not exist: the output check must come first to be the error seen.
  const std::string m = (d.path / "no-model").string(), data = (d.path / "no.tokens").string();
  const std::string gone = (d.path / "missing-dir").string();
  const std::string not_dir = (d.path / "file.txt").string();
  struct Case {
    std::string args, flag, path, what;
  };
  const std::string missing = "the folder " + gone + " does not exist";
  const std::string file_parent = not_dir + " is not a folder";
  const std::vector<Case> cases = {
      {fmt::format("sample --model {} --count 2 --seed 1 --out {}/x.tokens", m, gone), "--out",
       gone + "/x.tokens", missing},
      {fmt::format("sample --model {} --count 2 --seed 1 --out {}/x.tokens --text-out {}/x.txt",
                   m, d.path.string(), gone),
       "--text-out", gone + "/x.txt", missing},
      {fmt::format("eval --model {} --data {} --out {}/r.json", m, data, gone), "--out",
       gone + "/r.json", missing},
      {fmt::format("eval --model {} --data {} --tasks t.jsonl --samples-out {}/s.jsonl", m, data,
                   gone),
       "--samples-out", gone + "/s.jsonl", missing},
      {fmt::format("importance --model {} --data {} --out {}/i.safetensors", m, data, gone),
       "--out", gone + "/i.safetensors", missing},
      {fmt::format("calibrate --profile {}/p.json --out {}/p2.json", d.path.string(), gone),
       "--out", gone + "/p2.json", missing},
      {fmt::format("plan --config {} --scenario cpu-local --out {}/plan.json", m, gone), "--out",
       gone + "/plan.json", missing},
      {fmt::format("make-tasks --model {} --data {} --seed 1 --out {}/tasks", m, data, not_dir),
       "--out", not_dir + "/tasks", file_parent},
      {fmt::format("export --model {} --out {}/hf", m, not_dir), "--out", not_dir + "/hf",
       file_parent},
      {fmt::format("prune --model {} --importance i --arch a --out {}/p", m, not_dir), "--out",
       not_dir + "/p", file_parent},
      {fmt::format("distill --teacher {} --student {} --data {} --tokens 10 --out {}/s", m, m,
                   data, not_dir),
       "--out", not_dir + "/s", file_parent},
      {fmt::format("compress --model {} --scenario stories15m-serving --out {}/run", m, not_dir),
       "--out", not_dir + "/run", file_parent},
      {fmt::format("export --model {} --out {}", m, not_dir), "--out", not_dir, "is a file"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_cli(c.args, logs.path);
    EXPECT_NE(r.rc, 0) << c.args;
    EXPECT_TRUE(has(r.err, c.flag + " " + c.path + ": ") && has(r.err, c.what))
        << c.args << "\nstderr: " << r.err << "\nexpected: " << c.flag << " " << c.path << ": "
        << c.what;
  }
}

TEST(CliFirstHour, CalibratePrintsASummaryNotTheJson) {
  init_torch_threads();
  TempDir d, logs;
  LayerConfig l{4, 2, 8, 24};
  ModelConfig c = ModelConfig::uniform(50, 16, 1, l);
  fs::create_directories(d.path / "base");
  save_checkpoint(d.path / "base", LlamaModel{c, random_weights(c, 3, 0.2)});
  const Workload w = ac::test::tiny_workload();
  ProfileOptions o = ac::test::quick_profile_options(8);
  save_profile(d.path / "p.json", run_profile({c}, w, o));
  const std::string out = (d.path / "p2.json").string();
  const CliRun r = run_cli(fmt::format("calibrate --profile {} --base {} --count 2 --repeats 1 "
                                       "--out {}", (d.path / "p.json").string(),
                                       (d.path / "base").string(), out),
                           logs.path);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(has(r.out, "{")) << "the fit's JSON on stdout:\n" << r.out;
  EXPECT_LE(std::count(r.out.begin(), r.out.end(), '\n'), 6) << r.out;
  for (const char* needle : {"uncorrected", "corrected", "leave-one-out", "TTFT", "TPOT"})
    EXPECT_TRUE(has(r.out, needle)) << needle << "\n" << r.out;
  EXPECT_TRUE(has(r.out, "written to " + out)) << r.out;
  EXPECT_TRUE(load_profile(out).correction.fitted);
}

TEST(CliFirstHour, PlainTextIsOneDocumentAndJsonlMany) {
  TempDir d, logs;
  const fs::path model = d.path / "model";
  save_tiny_model(model, tokenizer_a());
  // (a) sample --text-out NAME.jsonl: one {"text": ...} line per story, read back as as many
  // documents.
  const fs::path jsonl = d.path / "s.jsonl";
  CliRun r = run_cli(fmt::format("sample --model {} --count 6 --seq-len 12 --seed 1 --out {} "
                              "--text-out {}", model.string(), (d.path / "s.tokens").string(),
                              jsonl.string()),
                  logs.path);
  ASSERT_EQ(r.rc, 0) << r.err;
  int64_t lines = 0;
  std::istringstream text(read_file(jsonl));
  for (std::string line; std::getline(text, line);) {
    if (line.empty()) continue;
    ++lines;
    EXPECT_TRUE(json::parse(line).at("text").is_string()) << line;
  }
  EXPECT_GT(lines, 1);
  EXPECT_EQ(tokenize_text_data(jsonl, model, 300, "text", 0).summary.documents, lines);

  // Stories of several sentences: as JSONL, make-tasks finds its items; the same stories as
  // plain text are one document, which the log line and the error say, with what to do.
  std::string plain;
  std::string lines_out;
  const char* names[] = {"Tom", "Sue", "Max", "Lily", "Ben"};
  for (int i = 0; i < 40; ++i) {
    const std::string name = names[i % 5];
    const std::string story = fmt::format(
        "{} had a red ball number {}. {} liked to play with the ball in the park. One day the "
        "ball rolled away. {} ran after it and found it under a big tree. {} was happy again.",
        name, i, name, name, name);
    plain += story + "\n\n";
    lines_out += json{{"text", story}}.dump() + "\n";
  }
  write_file_atomic(d.path / "stories.txt", plain);
  write_file_atomic(d.path / "stories.jsonl", lines_out);
  r = run_cli(fmt::format("make-tasks --model {} --data {} --seed 1 --out {}", model.string(),
                          (d.path / "stories.jsonl").string(), (d.path / "tasks").string()),
              logs.path);
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_cli(fmt::format("make-tasks --model {} --data {} --seed 1 --out {}", model.string(),
                          (d.path / "stories.txt").string(), (d.path / "tasks2").string()),
              logs.path);
  EXPECT_NE(r.rc, 0);
  const std::string hint = "plain text is read as one document (blank lines are not document "
                           "boundaries); for several documents give JSONL, one {\"text\": ...} "
                           "per line";
  EXPECT_TRUE(has(r.err, "[data] " + (d.path / "stories.txt").string() + ": " + hint)) << r.err;
  EXPECT_TRUE(has(r.err, "stories give") &&
              has(r.err, "--data " + (d.path / "stories.txt").string() + ": " + hint))
      << r.err;
  EXPECT_FALSE(fs::exists(d.path / "tasks2"));
}

TEST(CliFirstHour, TokenFileOfAnotherTokenizerIsRefused) {
  TempDir d, logs;
  const fs::path a = d.path / "a", b = d.path / "b";
  save_tiny_model(a, tokenizer_a());
  save_tiny_model(b, tokenizer_b(), /*seed=*/8);
  const TokenizerFingerprint fa = model_tokenizer_fingerprint(a, 300);
  const TokenizerFingerprint fb = model_tokenizer_fingerprint(b, 300);
  ASSERT_TRUE(fa.known() && fb.known());
  EXPECT_EQ(fa.vocab_size, 300);
  EXPECT_EQ(fb.vocab_size, 300);
  EXPECT_NE(fa.hash, fb.hash);

  // sample records the tokenizer it sampled with.
  const fs::path tokens = d.path / "a.tokens";
  CliRun r = run_cli(fmt::format("sample --model {} --count 8 --seq-len 32 --seed 1 --out {}",
                              a.string(), tokens.string()),
                  logs.path);
  ASSERT_EQ(r.rc, 0) << r.err;
  const TokenFile f = read_token_file(tokens);
  EXPECT_EQ(f.version, 2);
  EXPECT_EQ(f.tokenizer, fa);

  const std::vector<std::string> needles = {
      "--data " + tokens.string() + " was written with a tokenizer of 300 tokens (vocabulary "
      "hash " + fmt::format("{:016x}", fa.hash),
      "the model " + b.string() + " has a tokenizer of 300 tokens (vocabulary hash " +
      fmt::format("{:016x}", fb.hash)};
  const std::string t = tokens.string(), out = (d.path / "out").string();
  for (const std::string& args :
       {fmt::format("eval --model {} --data {} --seq-len 16", b.string(), t),
        fmt::format("importance --model {} --data {} --seq-len 16 --out {}", b.string(), t, out),
        fmt::format("distill --teacher {} --student {} --data {} --tokens 32 --seq-len 16 --out {}",
                    b.string(), b.string(), t, out)}) {
    r = run_cli(args, logs.path);
    EXPECT_NE(r.rc, 0) << args;
    for (const std::string& n : needles) EXPECT_TRUE(has(r.err, n)) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
  // The model it was sampled from reads it.
  r = run_cli(fmt::format("eval --model {} --data {} --seq-len 16", a.string(), t), logs.path);
  EXPECT_EQ(r.rc, 0) << r.err;
  // A version-1 file (no tokenizer recorded) is read as before, unchecked.
  std::string v1 = read_file(tokens);
  v1.erase(24, 16);
  v1[5] = '1';
  write_file_atomic(d.path / "v1.tokens", v1);
  const TokenFile old = read_token_file(d.path / "v1.tokens");
  EXPECT_EQ(old.version, 1);
  EXPECT_FALSE(old.tokenizer.known());
  EXPECT_EQ(old.ids, f.ids);
  r = run_cli(fmt::format("eval --model {} --data {} --seq-len 16", b.string(),
                          (d.path / "v1.tokens").string()),
              logs.path);
  EXPECT_EQ(r.rc, 0) << r.err;
}

}  // namespace
}  // namespace ac
