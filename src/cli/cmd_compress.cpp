// `autocompress compress`: the whole pipeline (pipeline/compress.h), or `--resume OUT` to
// continue an interrupted run from its last complete stage.
#include <cstdio>
#include <limits>

#include "cli/command.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "pipeline/compress.h"
#include "pipeline/nemotron_h_compress.h"

namespace {
ac::cli::RegisterCommand reg(100, [](CLI::App& app) {
  auto o = std::make_shared<ac::CompressOptions>();
  auto model = std::make_shared<std::string>(), out = std::make_shared<std::string>(),
       profile = std::make_shared<std::string>(), data = std::make_shared<std::string>(),
       data_text = std::make_shared<std::string>(), resume = std::make_shared<std::string>();
  ac::CompressInputs& in = o->in;
  ac::CompressDataOptions& d = o->data;
  ac::CompressSearchOptions& se = o->search;
  ac::CompressMeasureOptions& me = o->measure;
  CLI::App* s = app.add_subcommand("compress", "Run every stage: profile, sample (or read your text), importance, search, prune, distill, eval, export, validate, report");
  CLI::Option* model_opt = s->add_option("--model", *model, "teacher checkpoint folder (HF layout)");
  CLI::Option* scenario_opt = s->add_option("--scenario", in.scenario, "scenario name (scenarios/NAME.json) or path");
  CLI::Option* out_opt = s->add_option("--out", *out, "output folder (created atomically; replaced only on success)");
  CLI::Option* resume_opt = s->add_option("--resume", *resume, "continue the interrupted run that was writing to this output folder, with its options, from its last complete stage (nothing else may be given)");
  s->add_option("--profile", *profile, "reuse a profile.json of this device instead of profiling");
  s->add_option("--data", *data, "reuse the teacher-sampled token files (calibration, train, heldout .tokens) of an earlier run's data/ folder instead of sampling");
  s->add_option("--data-text", *data_text, "calibrate, distill and evaluate on your text instead of teacher samples: a UTF-8 file, JSONL (--text-field) or a folder of .txt/.jsonl files, tokenized with the teacher's tokenizer; every 20th document (or the last 5% of each, with fewer than 20) is held out for evaluation");
  s->add_option("--text-field", in.text_field, "JSONL: the field holding each document's text")->capture_default_str();
  s->add_option("--method", se.method, "search method: autocompress (differentiable, per-layer), minitron (uniform grid) or both side by side (same distillation budget and held-out data)")->check(CLI::IsMember({"minitron", "autocompress", "both"}))->capture_default_str();
  s->add_option("--seed", d.seed, "seed of the run: the teacher-sampled data, the distillation's data order, the search's Gumbel noise and the task files")->capture_default_str();
  s->add_option("--seq-len", d.seq_len, "tokens per sequence (T)")->check(ac::cli::positive_tokens())->capture_default_str();
  s->add_option("--calibration-sequences", d.calibration_sequences, "teacher-sampled calibration stories")->capture_default_str();
  s->add_option("--train-sequences", d.train_sequences, "teacher-sampled training stories")->capture_default_str();
  s->add_option("--heldout-sequences", d.heldout_sequences, "held-out stories (other seeds)")->capture_default_str();
  s->add_option("--task-items", d.task_items, "items per in-domain task (cloze, story ending, character; 0 = none)")->capture_default_str();
  s->add_option("--distill-tokens", o->distill.tokens, "distillation token budget")->capture_default_str();
  s->add_option("--distill-batch-size", o->distill.batch, "distillation sequences per micro-batch")->capture_default_str();
  ac::cli::add_deprecated_spelling(s, "--distill-batch", "--distill-batch-size", o->distill.batch);
  s->add_option("--distill-lr", o->distill.lr, "distillation peak learning rate")->capture_default_str();
  s->add_option("--distill-hidden-loss-weight", o->distill.hidden_loss_weight, "hidden-state loss weight between mapped layers (0 = off)")->capture_default_str();
  s->add_option("--distill-bld-tokens", o->distill.bld_tokens, "the final distillation of every method, and each AutoCompress finalist's retraining (its first steps), start with a blockwise local distillation of this many tokens (Puzzle: each changed block trained alone on the teacher's residual stream; Llama-family teachers); the finalists not kept count it twice as search tokens (0 = off; -1 = --distill-tokens / 16, at least one step of 2 x --seq-len)")->check(CLI::Range(int64_t(-1), std::numeric_limits<int64_t>::max()))->capture_default_str();
  ac::cli::add_deprecated_spelling(s, "--autocompress-bld-tokens", "--distill-bld-tokens", o->distill.bld_tokens);
  s->add_option("--minitron-retrain-top-k", se.minitron_retrain.top_k, "minitron: candidates (best by KL after pruning) each distilled briefly before the final pick (0 = rank by KL after pruning alone)")->capture_default_str();
  s->add_option("--minitron-retrain-tokens", se.minitron_retrain.tokens, "minitron: distillation tokens per retrained candidate, counted as search tokens (0 = distill-tokens / 8)")->capture_default_str();
  s->add_option("--autocompress-retrain-top-k", se.autocompress_retrain.top_k, "autocompress: its best distinct proposals (by KL after pruning), beside every search's pick, judged before the final pick as --autocompress-judge says (0 = the ranking after pruning decides)")->capture_default_str();
  s->add_option("--autocompress-retrain-tokens", se.autocompress_retrain.tokens, "autocompress: distillation tokens per retrained finalist after its blockwise start (--autocompress-judge), counted as search tokens (0 = distill-tokens / 8)")->capture_default_str();
  s->add_option("--autocompress-retrain-schedule", se.autocompress_retrain.final_schedule, "autocompress: each retraining is a short run with its own warm-up and decay (own), or the first tokens of the final distillation's schedule (final)")->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"own", false}, {"final", true}}))->default_str("final");
  s->add_option("--max-removed-layers", se.max_removed_layers, "autocompress: whole layers the search may remove, at most (-1: a third of the layers, as Minitron's depth pruning)")->check(CLI::Range(int64_t(-1), std::numeric_limits<int64_t>::max()))->capture_default_str();
  s->add_option("--max-attention-free-layers", se.attention_caps, "autocompress: one search per value, each offering \"attention removed\" in at most that many layers, those of lowest block influence (-1: any); every search's pick is a finalist of the retraining (default: -1 and a third of the layers)")->delimiter(',');
  s->add_option("--autocompress-judge", se.autocompress_judge, "autocompress: what judges its finalists: the KL right after each one's blockwise start, then the better half (at least 2) retrained for --autocompress-retrain-tokens of the final distillation's schedule and judged again (halving); the KL after the blockwise start alone (blockwise); every finalist retrained (retraining). The blockwise start needs --distill-bld-tokens, else the retraining judges; the kept finalist's state is where the final run continues")->check(CLI::IsMember({"halving", "blockwise", "retraining"}))->capture_default_str();
  s->add_option("--autocompress-restarts", se.autocompress_restarts, "autocompress: the widest space's search (the first --max-attention-free-layers) this many times, restart k with the Gumbel seed --seed + 1000 k; every restart's pick is a finalist of the retraining, counted as search tokens; a restart that repeats an earlier pick gives its place to a variant of the picks with one layer's attention moved to the next layer")->check(CLI::Range(int64_t(1), int64_t(64)))->capture_default_str();
  s->add_option("--safety-margin", se.safety_margin, "search against limits x (1 - margin)")->check(CLI::Range(0.0, 0.99))->capture_default_str();
  s->add_option("--fit-attempts", me.fit_attempts, "searches at most, while the searched architecture measured beside the teacher (before distillation) breaks a limit: each next one under the limit tightened by the measured overshoot (1 = measure once, 0 = skip)")->check(CLI::Range(0, 10))->capture_default_str();
  s->add_option("--fit-margin", me.fit_margin, "a tightened limit is the measured overshoot plus this margin")->check(CLI::Range(0.0, 0.49))->capture_default_str();
  s->add_option("--measure-rounds", me.rounds.min_rounds, "paired rounds (teacher and compressed models, one request each) measured at least, before distillation and after")->check(CLI::Range(2, 1000))->capture_default_str();
  s->add_option("--max-measure-rounds", me.rounds.max_rounds, "paired rounds at most, added while a measured limit's 95% interval straddles it or is wider than +-2%")->check(CLI::Range(2, 1000))->capture_default_str();
  s->add_flag("--allow-nonfinite", in.allow_nonfinite, "run even if the teacher has NaN/Inf weights (refused by default)");
  auto compute = std::make_shared<ac::cli::DeviceArgs>();
  ac::cli::add_device_options(s, *compute, /*with_precision=*/true);
  s->callback([s, o, model, out, profile, data, data_text, resume, model_opt, scenario_opt, out_opt,
               resume_opt, compute] {
    if (resume_opt->count() > 0) {
      // The recorded options are the run's: any other option would make it another run.
      for (const CLI::Option* opt : s->get_options())
        if (opt != resume_opt && opt->count() > 0 && opt->get_name() != "--help")
          throw ac::ConfigError(ac::msg("compress", "--resume takes the options of the "
                                        "interrupted run; {} cannot be given with it",
                                        opt->get_name()));
      ac::resume_compress(*resume);
      std::printf("report: %s/report.md\n", resume->c_str());
      return;
    }
    for (const CLI::Option* req : {model_opt, scenario_opt, out_opt})
      if (req->count() == 0)
        throw ac::ConfigError(ac::msg("compress", "{} is required (or --resume OUT to continue "
                                      "an interrupted run)", req->get_name()));
    ac::cli::check_output_flag("compress", "--out", *out, ac::cli::OutputKind::kFolder);
    o->in.model_dir = *model;
    o->in.out_dir = *out;
    if (!profile->empty()) ac::cli::load_profile_flag(*profile, "compress");  // before any output
    o->in.profile_path = *profile;
    o->in.data_dir = *data;
    o->in.data_text = *data_text;
    o->compute = {compute->device, compute->precision};
    if (ac::is_nemotron_h_checkpoint(o->in.model_dir))
      ac::compress_nemotron_h(*o);  // the hybrid pipeline (pipeline/nemotron_h_compress.h)
    else
      ac::run_compress(*o);
    std::printf("report: %s/report.md\n", o->in.out_dir.c_str());
  });
});
}  // namespace
