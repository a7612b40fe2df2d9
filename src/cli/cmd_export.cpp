// `autocompress export`: writes a checkpoint in the formats serving engines load (HF safetensors
// + config.json, DeciLM for heterogeneous models; GGUF for llama.cpp, also quantized to q8_0 or
// q4_0) and proves each reloads to identical logits (export/hf_export.h).
#include <cstdio>

#include "cli/command.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "export/engine_loaders.h"
#include "export/hf_export.h"

namespace {

struct Options {
  std::string model, out, format = "hf", dtype = "f32", parent, engine;
  int64_t tensor_parallel = 1;
  std::vector<std::string> check_loaders;
};

void print_report(const ac::ExportReport& r, const std::string& out) {
  int carried = 0;
  for (const auto& f : r.fields) {
    if (f.status == "carried") {
      ++carried;
      continue;
    }
    std::printf("  %-24s %-8s %s -> %s  (%s)\n", f.field.c_str(), f.status.c_str(),
                f.before.dump().c_str(), f.after.dump().c_str(), f.reason.c_str());
  }
  std::printf("  %d config fields carried unchanged; copied byte for byte: %zu files\n", carried,
              r.files_copied.size());
  for (const auto& n : r.notes) std::printf("  note: %s\n", n.c_str());
  std::printf("exported %s (reloads to identical logits; details in export_report.json)\n",
              out.c_str());
}

ac::cli::RegisterCommand reg(85, [](CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* s = app.add_subcommand(
      "export", "Export a checkpoint for serving engines (HF / DeciLM safetensors, GGUF for "
                "llama.cpp) and check it reloads to identical logits");
  s->add_option("--model", o->model, "checkpoint folder")->required();
  s->add_option("--out", o->out, "output folder (written atomically)")->required();
  s->add_option("--format", o->format, "hf, gguf (model.gguf) or both")
      ->check(CLI::IsMember({"hf", "gguf", "both"}))
      ->capture_default_str();
  s->add_option("--dtype", o->dtype, "weight type: f32, f16 or bf16; GGUF also q8_0 or q4_0 "
                                     "(ggml's 32-value blocks, docs/formats.md)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}))
      ->capture_default_str();
  s->add_option("--parent", o->parent,
                "folder whose config.json is the parent for the field listing (default: --model)");
  s->add_option("--engine", o->engine,
                "serving engine the files are for (engines/NAME.json: native, llama.cpp, vllm, "
                "tensorrt-llm): an architecture its loader cannot build is refused before "
                "anything is written");
  s->add_option("--tensor-parallel", o->tensor_parallel,
                "GPUs the engine splits the model over: its heads and widths must divide "
                "(engines/NAME.json \"structure\" tensor_parallel_divides)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--check-loaders", o->check_loaders,
                "after writing, read the files as these engines' loaders do "
                "(export/engine_loaders.h: vllm, tensorrt-llm, llama.cpp) and list what each "
                "would refuse; fails if any refuses")
      ->delimiter(',');
  s->callback([o] {
    ac::cli::check_output_flag("export", "--out", o->out, ac::cli::OutputKind::kFolder);
    ac::ExportOptions opt;
    opt.hf = o->format != "gguf";
    opt.gguf = o->format != "hf";
    opt.dtype = ac::ggml_type_from_string(o->dtype);
    opt.parent = o->parent;
    opt.engine = o->engine;
    opt.tensor_parallel = o->tensor_parallel;
    print_report(ac::export_model(o->model, o->out, opt), o->out);
    int refused = 0;
    for (const std::string& engine : o->check_loaders) {
      const std::vector<std::string> errors =
          ac::engine_load_errors(engine, o->out, o->tensor_parallel);
      std::printf("%s loader (tensor_parallel %lld): %s\n", engine.c_str(),
                  static_cast<long long>(o->tensor_parallel),
                  errors.empty() ? "builds the model, every tensor fits" : "REFUSES");
      for (const std::string& e : errors) std::printf("  %s\n", e.c_str());
      refused += !errors.empty();
    }
    if (refused)
      throw ac::ConfigError(ac::msg("export", "{} of {} loaders refuse {}", refused,
                                    o->check_loaders.size(), o->out));
  });
});

}  // namespace
