// `autocompress export`: writes a checkpoint in a serving format and proves it reloads.
#include <cstdio>

#include "cli/command.h"
#include "common/error.h"
#include "io/checkpoint.h"

namespace {
ac::cli::RegisterCommand reg(85, [](CLI::App& app) {
  auto model = std::make_shared<std::string>(), out = std::make_shared<std::string>(),
       format = std::make_shared<std::string>("hf");
  CLI::App* s = app.add_subcommand("export", "Export a checkpoint (HF safetensors + config.json) and check it reloads to identical logits");
  s->add_option("--model", *model, "checkpoint folder")->required();
  s->add_option("--out", *out, "output folder (written atomically)")->required();
  s->add_option("--format", *format, "output format")->check(CLI::IsMember({"hf"}))->capture_default_str();
  s->callback([model, out] {
    ac::check_not_overwriting_input(*model, *out, "export");
    ac::LlamaModel m = ac::load_checkpoint(*model);
    ac::save_checkpoint_atomic(*out, m, *model);
    ac::LlamaModel back = ac::load_checkpoint(*out);
    at::NoGradGuard no_grad;
    at::Tensor probe = at::arange(0, std::min<int64_t>(16, m.config.vocab_size), at::kLong).view({1, -1});
    double diff = (back.forward(probe) - m.forward(probe)).abs().max().item<double>();
    if (diff != 0)
      throw ac::InternalError("[export] reloaded logits differ from the source by " + std::to_string(diff));
    std::printf("exported %s (reloads to identical logits)\n", out->c_str());
  });
});
}  // namespace
