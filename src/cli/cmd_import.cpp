// `autocompress import FORMAT ...`: converts a checkpoint from another format into the HF layout
// every stage reads. One sub-subcommand per format (llama2c, gguf).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/flag_checks.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "io/checkpoint.h"
#include "io/text_tokenizer.h"
#include "export/gguf_model.h"
#include "io/llama2c.h"

namespace ac::cli {
namespace {

void setup_llama2c(CLI::App& import) {
  struct Options {
    std::string model_bin, tokenizer_bin, out;
  };
  auto o = std::make_shared<Options>();
  auto* s = import.add_subcommand(
      "llama2c", "Import a llama2.c model.bin + tokenizer.bin (e.g. stories15M) as an HF folder");
  s->add_option("model", o->model_bin, "llama2.c model.bin (version-0 layout)")->required();
  s->add_option("tokenizer", o->tokenizer_bin, "llama2.c tokenizer.bin")->required();
  s->add_option("--out", o->out, "output checkpoint folder (written atomically)")->required();
  s->callback([o] {
    check_output_flag("import llama2c", "--out", o->out, OutputKind::kFolder);
    import_llama2c(o->model_bin, o->tokenizer_bin, o->out);
    std::printf("%s\n", o->out.c_str());
  });
}

void setup_gguf(CLI::App& import) {
  struct Options {
    std::string gguf, out;
  };
  auto o = std::make_shared<Options>();
  auto* s = import.add_subcommand(
      "gguf", "Import a llama/deci GGUF (F32/F16/BF16, SentencePiece vocabulary) as an HF folder");
  s->add_option("model", o->gguf, "model.gguf")->required();
  s->add_option("--out", o->out, "output checkpoint folder (written atomically)")->required();
  s->callback([o] {
    check_output_flag("import gguf", "--out", o->out, OutputKind::kFolder);
    import_gguf(o->gguf, o->out);
    std::printf("%s\n", o->out.c_str());
  });
}

// Random weights in a real architecture: a stand-in of a Hub checkpoint of that shape for timing
// and memory runs where the weights cannot be had (scripts/device_cuda.sh); not a model.
void setup_random(CLI::App& import) {
  struct Options {
    std::string config, tokenizer_from, out;
    uint64_t seed = 0;
    double std = 0.02;
  };
  auto o = std::make_shared<Options>();
  auto* s = import.add_subcommand(
      "random", "Random weights in the architecture of a config.json (timing and memory runs)");
  s->add_option("config", o->config, "HF config.json (e.g. architectures/tinyllama-1.1b.json)")
      ->required();
  s->add_option("--tokenizer-from", o->tokenizer_from,
                "checkpoint folder whose tokenizer files are copied (its vocabulary must have "
                "the config's vocab_size)");
  s->add_option("--seed", o->seed, "seed of the weights")->capture_default_str();
  s->add_option("--std", o->std, "standard deviation of the projections")->capture_default_str();
  s->add_option("--out", o->out, "output checkpoint folder (written atomically)")->required();
  s->callback([o] {
    check_not_overwriting_inputs({o->config, o->tokenizer_from}, o->out, "import");
    check_output_flag("import random", "--out", o->out, OutputKind::kFolder);
    const ModelConfig c = config_from_hf_json(read_json_file(o->config), o->config);
    if (!o->tokenizer_from.empty()) load_tokenizer(o->tokenizer_from, c.vocab_size);
    save_checkpoint_atomic(o->out, LlamaModel{c, random_weights(c, o->seed, o->std)},
                           o->tokenizer_from);
    std::printf("%s\n", o->out.c_str());
  });
}

RegisterCommand reg(10, [](CLI::App& app) {
  auto* import = app.add_subcommand("import", "Convert a checkpoint from another format");
  import->require_subcommand(1);
  setup_llama2c(*import);
  setup_gguf(*import);
  setup_random(*import);
});

}  // namespace
}  // namespace ac::cli
