// `autocompress generate`: text continuation with the native engine (greedy by default), for
// every model kind the forward computes: the Llama family, Qwen3-MoE / Mixtral and Nemotron-H
// (chosen by config.json's model_type).
#include <cstdio>

#include "cli/command.h"
#include "cli/device_options.h"
#include "common/json_io.h"
#include "io/checkpoint.h"
#include "io/nemotron_h_checkpoint.h"
#include "io/text_tokenizer.h"
#include "model/moe_family_config.h"
#include "model/nemotron_h_config.h"
#include "model/trainable.h"

namespace {

// The checkpoint in `dir` loaded as its kind, moved to `device`, continuing `ids`.
std::vector<int64_t> generate_any(const ac::fs::path& dir, const c10::Device& device,
                                  const std::vector<int64_t>& ids, const ac::GenerateOptions& go) {
  const std::string type =
      ac::read_json_file(dir / "config.json").value("model_type", std::string("llama"));
  if (ac::is_nemotron_h_model_type(type))
    return ac::generate(ac::model_to_device(ac::load_nemotron_h_checkpoint(dir), device), ids, go);
  if (ac::is_moe_family_model_type(type))
    return ac::generate(ac::model_to_device(ac::load_moe_checkpoint(dir), device), ids, go);
  return ac::generate(ac::model_to_device(ac::load_checkpoint(dir), device), ids, go);
}

struct GenerateArgs {
  std::string model, prompt = "Once upon a time";
  int64_t max_new_tokens = 64;
  double temperature = 0, top_p = 1.0;
  uint64_t seed = 0;
  ac::cli::DeviceArgs compute;
};

ac::cli::RegisterCommand reg(15, [](CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* s = app.add_subcommand("generate", "Continue a prompt with a checkpoint (greedy by default)");
  s->add_option("--model", args->model, "checkpoint folder (config.json, *.safetensors, tokenizer.json or tokenizer.bin)")->required();
  s->add_option("--prompt", args->prompt, "prompt text")->capture_default_str();
  s->add_option("--max-new-tokens", args->max_new_tokens, "tokens to generate")->capture_default_str();
  s->add_option("--temperature", args->temperature, "0 = greedy")->capture_default_str();
  s->add_option("--top-p", args->top_p, "nucleus sampling threshold")->capture_default_str();
  s->add_option("--seed", args->seed, "sampling seed")->capture_default_str();
  ac::cli::add_device_options(s, args->compute, /*with_precision=*/false);
  s->callback([args] {
    const c10::Device device = args->compute.resolve();
    const ac::fs::path config = ac::fs::path(args->model) / "config.json";
    const int64_t vocab_size = ac::read_json_file(config).value("vocab_size", int64_t(0));
    const std::unique_ptr<ac::TextTokenizer> tok = ac::load_tokenizer(args->model, vocab_size);
    ac::GenerateOptions go;
    go.max_new_tokens = args->max_new_tokens;
    go.temperature = args->temperature;
    go.top_p = args->top_p;
    go.seed = args->seed;
    std::vector<int64_t> ids = tok->encode(args->prompt, /*add_special_tokens=*/true);
    for (int64_t t : generate_any(args->model, device, ids, go)) ids.push_back(t);
    std::printf("%s\n", tok->decode(ids, /*skip_special_tokens=*/true).c_str());
  });
});
}  // namespace
