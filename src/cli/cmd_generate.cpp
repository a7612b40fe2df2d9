// `autocompress generate`: text continuation with the native engine (greedy by default).
#include <cstdio>

#include "cli/command.h"
#include "cli/device_options.h"
#include "io/checkpoint.h"
#include "io/text_tokenizer.h"

namespace {
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
    ac::LlamaModel m = ac::load_checkpoint(args->model);
    m.weights = ac::to_device(m.config, m.weights, device);
    const std::unique_ptr<ac::TextTokenizer> tok = ac::load_tokenizer(args->model, m.config.vocab_size);
    ac::GenerateOptions go;
    go.max_new_tokens = args->max_new_tokens;
    go.temperature = args->temperature;
    go.top_p = args->top_p;
    go.seed = args->seed;
    std::vector<int64_t> ids = tok->encode(args->prompt, /*add_special_tokens=*/true);
    for (int64_t t : ac::generate(m, ids, go)) ids.push_back(t);
    std::printf("%s\n", tok->decode(ids, /*skip_special_tokens=*/true).c_str());
  });
});
}  // namespace
