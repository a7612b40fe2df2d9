// `autocompress import FORMAT ...`: converts a checkpoint from another format into the HF layout
// every stage reads. One sub-subcommand per format (llama2c, gguf).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
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
    import_gguf(o->gguf, o->out);
    std::printf("%s\n", o->out.c_str());
  });
}

RegisterCommand reg(10, [](CLI::App& app) {
  auto* import = app.add_subcommand("import", "Convert a checkpoint from another format");
  import->require_subcommand(1);
  setup_llama2c(*import);
  setup_gguf(*import);
});

}  // namespace
}  // namespace ac::cli
