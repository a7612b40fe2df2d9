// Throughput and memory of the tokenizer.json tokenizer (io/hf_tokenizer.h). Torch-free, its own
// main: bench/tokenizer_bench.mjs runs it beside Hugging Face's JavaScript tokenizers on the same
// paragraphs and prints the ratio.
//   tokenize_bench TOKENIZER_DIR TEXT_FILE [--repeat N] [--ids OUT.json]
//     encodes TEXT_FILE paragraph by paragraph (split at blank lines, "\n\n", empty ones dropped)
//     N times (default 3) and prints one JSON line: paragraphs, tokens, best seconds,
//     tokens_per_s, load seconds, peak RSS. --ids writes the ids of the first pass.
//   tokenize_bench TOKENIZER_DIR --synthetic-mb M
//     streams M MiB of generated paragraphs of random words (every word new, so the BPE word
//     cache fills and is cleared many times) and prints RSS after 10%, 50% and 100%: memory stays
//     flat when encoding streams by paragraph.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/fs.h"
#include "io/hf_tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// VmRSS or VmHWM (peak) of this process in MiB, from /proc/self/status.
double rss_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::atof(line.c_str() + std::strlen(field)) / 1024.0;
  return -1;
}

std::vector<std::string> paragraphs_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 2;
  }
  return out;
}

int run_text(const ac::HfTokenizer& tok, const std::string& file, int repeat, const std::string& ids_out,
             double load_s) {
  const std::vector<std::string> paragraphs = paragraphs_of(ac::read_file(file));
  double best = 1e30;
  size_t tokens = 0;
  std::string ids_json = "[";
  for (int r = 0; r < repeat; ++r) {
    tokens = 0;
    const auto t0 = Clock::now();
    for (const std::string& p : paragraphs) {
      const std::vector<int64_t> ids = tok.encode(p, /*add_special_tokens=*/true);
      tokens += ids.size();
      if (r == 0 && !ids_out.empty()) {
        ids_json += ids_json.size() > 1 ? ",[" : "[";
        for (size_t k = 0; k < ids.size(); ++k) ids_json += (k ? "," : "") + std::to_string(ids[k]);
        ids_json += "]";
      }
    }
    best = std::min(best, seconds_since(t0));
  }
  if (!ids_out.empty()) ac::write_file_atomic(ids_out, ids_json + "]");
  std::printf("{\"impl\": \"autocompress\", \"paragraphs\": %zu, \"tokens\": %zu, \"seconds\": %.4f, "
              "\"tokens_per_s\": %.0f, \"load_s\": %.3f, \"peak_rss_mib\": %.1f}\n",
              paragraphs.size(), tokens, best, double(tokens) / best, load_s, rss_mib("VmHWM:"));
  return 0;
}

int run_synthetic(const ac::HfTokenizer& tok, double mib) {
  std::mt19937_64 rng(1234);
  const size_t total = size_t(mib * (1 << 20));
  size_t done = 0, tokens = 0;
  int next_report = 1;
  const double marks[] = {0.1, 0.5, 1.0};
  std::string p;
  const auto t0 = Clock::now();
  while (done < total) {
    p.clear();
    for (int w = 0; w < 200; ++w) {  // ~200 random words per paragraph
      const int len = 3 + int(rng() % 9);
      for (int k = 0; k < len; ++k) p += char('a' + rng() % 26);
      p += (w % 17 == 16) ? ". " : " ";
    }
    tokens += tok.encode(p, true).size();
    done += p.size();
    while (next_report <= 3 && done >= size_t(marks[next_report - 1] * double(total))) {
      std::printf("{\"synthetic_mib\": %.1f, \"tokens\": %zu, \"rss_mib\": %.1f, \"tokens_per_s\": %.0f}\n",
                  double(done) / (1 << 20), tokens, rss_mib("VmRSS:"), double(tokens) / seconds_since(t0));
      ++next_report;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 3) {
      std::fprintf(stderr, "usage: tokenize_bench TOKENIZER_DIR TEXT_FILE [--repeat N] [--ids OUT.json]\n"
                           "       tokenize_bench TOKENIZER_DIR --synthetic-mb M\n");
      return 2;
    }
    const auto t0 = Clock::now();
    const ac::HfTokenizer tok = ac::HfTokenizer::from_folder(argv[1]);
    const double load_s = seconds_since(t0);
    if (std::strcmp(argv[2], "--synthetic-mb") == 0 && argc > 3) return run_synthetic(tok, std::atof(argv[3]));
    int repeat = 3;
    std::string ids_out;
    for (int i = 3; i + 1 < argc; i += 2) {
      if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::max(1, std::atoi(argv[i + 1]));
      else if (std::strcmp(argv[i], "--ids") == 0) ids_out = argv[i + 1];
    }
    return run_text(tok, argv[2], repeat, ids_out, load_s);
  } catch (const ac::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
