// Nothing lost (docs/fuzzing.md, "Nothing lost"): outputs appear whole or not at all, a failed
// command leaves the previous output exactly as it was and no partial folder, a killed run's
// staging folder is cleaned up by the next run, and no command writes over its own input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <fstream>
#include <map>

#include "common/error.h"
#include "common/fs.h"
#include "io/llama2c.h"
#include "io/llama2c_header.h"
#include "test_util.h"
#include "tokenizer_fixture.h"

namespace ac {
namespace {

using test::TempDir;

void write_bytes(const fs::path& p, const std::string& b) {
  std::ofstream(p, std::ios::binary).write(b.data(), std::streamsize(b.size()));
}

/// Every regular file under `dir` (relative name -> bytes).
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_file(e.path());
  return out;
}

/// Names in `dir` that are not `keep`: staging folders, temporary files, ".old" folders.
std::vector<std::string> leftovers(const fs::path& dir, const std::vector<std::string>& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (std::find(keep.begin(), keep.end(), n) == keep.end()) out.push_back(n);
  }
  return out;
}

/// A tiny llama2.c model (D 8, F 16, L 2, H 2, G 1, V 300) and its tokenizer.bin.
void write_llama2c(const fs::path& model, const fs::path& tok, float fill) {
  const Llama2cHeader h{8, 16, 2, 2, 1, 300, 4};
  std::string b(reinterpret_cast<const char*>(&h), kLlama2cHeaderBytes);
  const uint64_t floats = (llama2c_expected_bytes(h) - kLlama2cHeaderBytes) / 4;
  for (uint64_t i = 0; i < floats; ++i) {
    const float x = fill * float(int64_t(i % 13) - 6);
    b.append(reinterpret_cast<const char*>(&x), 4);
  }
  write_bytes(model, b);
  const std::string t = test::tokenizer_bytes(300);
  write_bytes(tok, t);
}

std::string cli() {
  const char* env = std::getenv("AC_BIN");
  return env ? env : (ac::test::binary_dir() / "autocompress").string();
}

TEST(OutputSafety, WriteFileAtomicReplacesWholeOrNotAtAll) {
  TempDir tmp;
  const fs::path p = tmp.path / "out.json";
  write_file_atomic(p, "old");
  write_file_atomic(p, "new contents");
  EXPECT_EQ(read_file(p), "new contents");
  EXPECT_THROW(write_file_atomic(tmp.path / "missing" / "x.json", "x"), FormatError);
  EXPECT_EQ(leftovers(tmp.path, {"out.json"}), std::vector<std::string>{});
}

TEST(OutputSafety, StagingDirCommitsOrLeavesNothing) {
  TempDir tmp;
  const fs::path out = tmp.path / "out";
  {
    StagingDir s(out);
    write_file_atomic(s.path() / "a.txt", "first");
    s.commit();
  }
  EXPECT_EQ(snapshot(out), (std::map<std::string, std::string>{{"a.txt", "first"}}));
  try {  // a failed stage: the staging folder goes, the previous output stays
    StagingDir s(out);
    write_file_atomic(s.path() / "a.txt", "second");
    throw Error("stage failed");
  } catch (const Error&) {
  }
  EXPECT_EQ(snapshot(out), (std::map<std::string, std::string>{{"a.txt", "first"}}));
  EXPECT_EQ(leftovers(tmp.path, {"out"}), std::vector<std::string>{});
  {
    StagingDir s(out);  // a successful rerun replaces the old output entirely
    write_file_atomic(s.path() / "b.txt", "second");
    s.commit();
  }
  EXPECT_EQ(snapshot(out), (std::map<std::string, std::string>{{"b.txt", "second"}}));
  EXPECT_EQ(leftovers(tmp.path, {"out"}), std::vector<std::string>{});
  write_file_atomic(tmp.path / "file", "x");  // an output folder never replaces a file
  EXPECT_THROW(StagingDir s(tmp.path / "file"), ConfigError);
}

TEST(OutputSafety, KilledRunsStagingFolderIsRemovedByTheNextRun) {
  TempDir tmp;
  const fs::path out = tmp.path / "out";
  // A staging folder of a process that no longer exists (a run killed by SIGKILL): a child
  // that exits at once gives a PID that is surely dead once reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const fs::path dead = tmp.path / fmt::format(".staging-out.tmp-{}-abc", child);
  const fs::path alive = tmp.path / fmt::format(".staging-out.tmp-{}-def", ::getppid());
  fs::create_directories(dead / "model");
  fs::create_directories(alive);
  {
    StagingDir s(out);
    EXPECT_FALSE(fs::exists(dead));  // removed: its owner is gone
    EXPECT_TRUE(fs::exists(alive));  // kept: its owner may still be writing
    s.commit();
  }
  EXPECT_TRUE(fs::is_directory(out));
}

TEST(OutputSafety, FailedImportLeavesThePreviousOutputIntact) {
  TempDir tmp;
  const fs::path model = tmp.path / "model.bin", tok = tmp.path / "tokenizer.bin";
  const fs::path out = tmp.path / "ckpt";
  write_llama2c(model, tok, 0.01f);
  import_llama2c(model, tok, out);
  const auto before = snapshot(out);
  ASSERT_TRUE(before.count("model.safetensors") && before.count("config.json"));

  // Library: a truncated model.bin, then a tokenizer that disagrees: both refused, output kept.
  write_llama2c(model, tok, 0.02f);
  const std::string good = read_file(model);
  write_bytes(model, good.substr(0, good.size() - 4));
  EXPECT_THROW(import_llama2c(model, tok, out), FormatError);
  EXPECT_EQ(snapshot(out), before);
  write_bytes(model, good);
  write_bytes(tok, read_file(tok).substr(0, 100));
  EXPECT_THROW(import_llama2c(model, tok, out), FormatError);
  EXPECT_EQ(snapshot(out), before);
  EXPECT_EQ(leftovers(tmp.path, {"model.bin", "tokenizer.bin", "ckpt"}),
            std::vector<std::string>{});

  // The CLI: exit status 1, one error line, the previous output untouched.
  const std::string log = (tmp.path / "log.txt").string();
  const std::string cmd = cli() + " import llama2c " + model.string() + " " + tok.string() +
                          " --out " + out.string() + " > " + log + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(read_file(log).find(tok.string()), std::string::npos) << read_file(log);
  fs::remove(log);
  EXPECT_EQ(snapshot(out), before);
  EXPECT_EQ(leftovers(tmp.path, {"model.bin", "tokenizer.bin", "ckpt"}),
            std::vector<std::string>{});
}

TEST(OutputSafety, CommandsRefuseToWriteOverTheirInput) {
  TempDir tmp;
  const fs::path model = tmp.path / "model.bin", tok = tmp.path / "tokenizer.bin";
  write_llama2c(model, tok, 0.01f);
  // The output folder would replace the folder holding the inputs.
  EXPECT_THROW(import_llama2c(model, tok, tmp.path), ConfigError);
  import_llama2c(model, tok, tmp.path / "ckpt");
  const auto before = snapshot(tmp.path / "ckpt");
  const std::string ckpt = (tmp.path / "ckpt").string();
  const std::string log = (tmp.path / "log.txt").string();
  for (const std::string& args :
       {"export --model " + ckpt + " --out " + ckpt,
        "export --model " + ckpt + " --out " + ckpt + "/",
        "prune --model " + ckpt + " --importance x --arch y --out " + ckpt + "/sub",
        "sample --model " + ckpt + " --count 1 --seed 1 --out " + ckpt + "/config.json",
        "eval --model " + ckpt + " --data x.tokens --out " + ckpt + "/config.json"}) {
    const std::string cmd = cli() + " " + args + " > " + log + " 2>&1";
    EXPECT_NE(std::system(cmd.c_str()), 0) << args;
    EXPECT_NE(read_file(log).find("refusing to write"), std::string::npos)
        << args << ": " << read_file(log);
  }
  EXPECT_EQ(snapshot(tmp.path / "ckpt"), before);
}

}  // namespace
}  // namespace ac
