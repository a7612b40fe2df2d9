// compress(), its progress events and its report (pipeline/compress.h). The run computes with
// the GIL released; each progress event takes it back to call the Python callback and to let a
// pending Ctrl-C raise KeyboardInterrupt there (the run then stops like on any error: the stages
// complete so far stay in the work folder, and resume=True continues it). During a distillation
// Ctrl-C is the library's own stop signal (distill/stop_signal.h): the loop stops at its next
// step with its state saved, and Interrupted (a KeyboardInterrupt) is raised.
#include <nanobind/nanobind.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <map>

#include "bindings.h"
#include "common/error.h"
#include "common/json_io.h"
#include "common/progress.h"
#include "pipeline/compress.h"
#include "pipeline/report_html.h"
#include "pipeline/run_report.h"

namespace nb = nanobind;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace acpy {
namespace {

/// report.json of a run and the folder it is in.
struct Report {
  ac::RunReport report;
  fs::path run_dir;
};

// Thrown through the pipeline when the progress callback raised (the Python error itself is
// kept aside and raised once the run has unwound). Not a std::exception, so that no stage
// mistakes it for one of its own failures.
struct CallbackRaised {};

// `run` with the GIL released, every progress event passed to `progress` (may be None).
ac::RunReport run_with_progress(nb::handle progress, const std::function<ac::RunReport()>& run) {
  std::exception_ptr raised;
  ac::ProgressCallbackScope scope([&](const ac::ProgressEvent& e) {
    nb::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw nb::python_error();  // Ctrl-C: KeyboardInterrupt
      // A copy: the callback may keep the event past this call.
      if (!progress.is_none()) progress(nb::cast(e, nb::rv_policy::copy));
    } catch (const nb::python_error&) {
      raised = std::current_exception();
      throw CallbackRaised{};
    }
  });
  try {
    nb::gil_scoped_release release;
    return run();
  } catch (const CallbackRaised&) {
    std::rethrow_exception(raised);
  }
}

// The keyword options of compress(): the CLI's flags (--seq-len is seq_len), each setting its
// CompressOptions field.
using Setter = std::function<void(ac::CompressOptions&, nb::handle)>;

template <typename T>
Setter set(T& (*field)(ac::CompressOptions&)) {
  return [field](ac::CompressOptions& o, nb::handle v) { field(o) = nb::cast<T>(v); };
}

const std::map<std::string, Setter>& compress_options() {
  using O = ac::CompressOptions;
  static const std::map<std::string, Setter> options = {
      {"method", set<std::string>([](O& o) -> std::string& { return o.search.method; })},
      {"data_text", set<fs::path>([](O& o) -> fs::path& { return o.in.data_text; })},
      {"data", set<fs::path>([](O& o) -> fs::path& { return o.in.data_dir; })},
      {"profile", set<fs::path>([](O& o) -> fs::path& { return o.in.profile_path; })},
      {"text_field", set<std::string>([](O& o) -> std::string& { return o.in.text_field; })},
      {"allow_nonfinite", set<bool>([](O& o) -> bool& { return o.in.allow_nonfinite; })},
      {"device", set<std::string>([](O& o) -> std::string& { return o.compute.device; })},
      {"precision", set<std::string>([](O& o) -> std::string& { return o.compute.precision; })},
      {"seed", set<uint64_t>([](O& o) -> uint64_t& { return o.data.seed; })},
      {"seq_len", set<int64_t>([](O& o) -> int64_t& { return o.data.seq_len; })},
      {"calibration_sequences",
       set<int64_t>([](O& o) -> int64_t& { return o.data.calibration_sequences; })},
      {"train_sequences", set<int64_t>([](O& o) -> int64_t& { return o.data.train_sequences; })},
      {"heldout_sequences",
       set<int64_t>([](O& o) -> int64_t& { return o.data.heldout_sequences; })},
      {"task_items", set<int64_t>([](O& o) -> int64_t& { return o.data.task_items; })},
      {"distill_tokens", set<int64_t>([](O& o) -> int64_t& { return o.distill.tokens; })},
      {"distill_batch_size", set<int64_t>([](O& o) -> int64_t& { return o.distill.batch; })},
      {"distill_lr", set<double>([](O& o) -> double& { return o.distill.lr; })},
      {"distill_hidden_loss_weight",
       set<double>([](O& o) -> double& { return o.distill.hidden_loss_weight; })},
      {"minitron_retrain_top_k",
       set<int64_t>([](O& o) -> int64_t& { return o.search.minitron_retrain.top_k; })},
      {"minitron_retrain_tokens",
       set<int64_t>([](O& o) -> int64_t& { return o.search.minitron_retrain.tokens; })},
      {"autocompress_retrain_top_k",
       set<int64_t>([](O& o) -> int64_t& { return o.search.autocompress_retrain.top_k; })},
      {"autocompress_retrain_tokens",
       set<int64_t>([](O& o) -> int64_t& { return o.search.autocompress_retrain.tokens; })},
      {"distill_bld_tokens", set<int64_t>([](O& o) -> int64_t& { return o.distill.bld_tokens; })},
      {"max_removed_layers",
       set<int64_t>([](O& o) -> int64_t& { return o.search.max_removed_layers; })},
      {"autocompress_restarts",
       set<int64_t>([](O& o) -> int64_t& { return o.search.autocompress_restarts; })},
      {"autocompress_judge",
       set<std::string>([](O& o) -> std::string& { return o.search.autocompress_judge; })},
      {"max_attention_free_layers",
       set<std::vector<int64_t>>([](O& o) -> std::vector<int64_t>& { return o.search.attention_caps; })},
      {"safety_margin", set<double>([](O& o) -> double& { return o.search.safety_margin; })},
      {"fit_attempts", set<int>([](O& o) -> int& { return o.measure.fit_attempts; })},
      {"fit_margin", set<double>([](O& o) -> double& { return o.measure.fit_margin; })},
      {"measure_rounds", set<int>([](O& o) -> int& { return o.measure.rounds.min_rounds; })},
      {"max_measure_rounds", set<int>([](O& o) -> int& { return o.measure.rounds.max_rounds; })},
  };
  return options;
}

ac::CompressOptions options_from(const fs::path& model, const std::string& scenario,
                                 const fs::path& out, const nb::kwargs& kwargs) {
  ac::CompressOptions o;
  o.in.model_dir = model;
  o.in.scenario = scenario;
  o.in.out_dir = out;
  for (auto [key, value] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    const auto it = compress_options().find(name);
    if (it == compress_options().end()) {
      std::string known;
      for (const auto& [k, _] : compress_options()) known += (known.empty() ? "" : ", ") + k;
      throw ac::ConfigError(ac::msg("compress", "unknown option '{}'; the options are {}", name, known));
    }
    if (!value.is_none()) it->second(o, value);
  }
  return o;
}

ac::RunReport compress(const std::optional<fs::path>& model,
                       const std::optional<std::string>& scenario, const fs::path& out,
                       nb::handle progress, bool resume, const nb::kwargs& kwargs) {
  if (resume) {
    // The recorded options are the run's: any other option would make it another run.
    for (auto [key, value] : kwargs)
      throw ac::ConfigError(ac::msg("compress", "resume=True takes the options of the "
                                    "interrupted run; {} cannot be given with it",
                                    nb::cast<std::string>(key)));
    if (model || scenario)
      throw ac::ConfigError(ac::msg("compress", "resume=True takes the options of the "
                                    "interrupted run; pass model=None, scenario=None"));
    return run_with_progress(progress, [&] { return ac::resume_compress(out); });
  }
  if (!model || !scenario)
    throw ac::ConfigError(ac::msg("compress", "{} is required (or resume=True to continue an "
                                  "interrupted run)", model ? "scenario" : "model"));
  const ac::CompressOptions o = options_from(*model, *scenario, out, kwargs);
  return run_with_progress(progress, [&] { return ac::run_compress(o); });
}

}  // namespace

void bind_compress(nb::module_& m) {
  nb::class_<ac::ProgressEvent>(m, "ProgressEvent",
                                "`done` of `total` `unit` in `stage` (common/progress.h).")
      .def_ro("stage", &ac::ProgressEvent::stage,
              "'profile', 'sample', 'importance', 'search', 'bld', 'distill', 'eval', ...; "
              "'compress' for each pipeline stage complete (message: its name)")
      .def_ro("done", &ac::ProgressEvent::done)
      .def_ro("total", &ac::ProgressEvent::total, "0 when not known in advance")
      .def_ro("unit", &ac::ProgressEvent::unit, "'tok', 'steps', 'stages', ...")
      .def_ro("message", &ac::ProgressEvent::message, "e.g. 'step 2/64 loss 3.1 lr 1e-3'")
      .def("__repr__", [](const ac::ProgressEvent& e) {
        return fmt::format("ProgressEvent(stage='{}', done={}, total={}, unit='{}', message='{}')",
                           e.stage, e.done, e.total, e.unit, e.message);
      });

  nb::class_<Report>(m, "RunReport",
                     "report.json of a compress run: every field is an attribute (dicts and "
                     "lists as in the file; ms, bytes, tokens/s, seconds as named).")
      .def_static("load", [](const fs::path& run_dir) {
        const fs::path file = run_dir / "report.json";
        return Report{ac::RunReport::from_json(ac::read_json_file(file), file.string()), run_dir};
      }, nb::arg("run_dir"), "The report of a finished run folder. Raises FormatError.")
      .def_ro("run_dir", &Report::run_dir, "the run's output folder")
      .def("to_dict", [](const Report& r) { return to_python(r.report.to_json()); },
           "report.json as a dict")
      .def("__getattr__", [](const Report& r, const std::string& name) {
        const json j = r.report.to_json();
        if (!j.contains(name)) throw nb::attribute_error(("RunReport has no field '" + name + "'").c_str());
        return to_python(j[name]);
      })
      .def("__dir__", [](const Report& r) {
        std::vector<std::string> names{"run_dir", "to_dict", "load"};
        for (const auto& [k, _] : r.report.to_json().items()) names.push_back(k);
        return names;
      })
      .def("_repr_html_", [](const Report& r) { return ac::report_html_of(r.run_dir, r.report); },
           "report.html: the plots of the run")
      .def("__repr__", [](const Report& r) {
        return fmt::format("RunReport('{}': {} -> {}, scenario '{}')", r.run_dir.string(),
                           r.report.teacher.config, r.report.compressed.config,
                           r.report.scenario.name);
      });

  m.def("compress",
        [](const std::optional<fs::path>& model, const std::optional<std::string>& scenario,
           const fs::path& out, nb::object progress, bool resume, const nb::kwargs& kwargs) {
          return Report{compress(model, scenario, out, progress, resume, kwargs), out};
        },
        nb::arg("model").none(), nb::arg("scenario").none(), nb::arg("out"), nb::kw_only(),
        nb::arg("progress") = nb::none(), nb::arg("resume") = false, nb::arg("kwargs"),
        "`autocompress compress`: every stage (profile, data, importance, search, prune, distill, "
        "eval, export, report) of `model` (HF checkpoint folder) for `scenario` (name or path) "
        "into `out`. Keyword options are the CLI's flags (method='autocompress', data_text=None, "
        "device='cpu', seed, seq_len, distill_tokens, ...; docs/python.md). `progress` is called "
        "with a ProgressEvent. resume=True continues the interrupted run writing to `out` with "
        "its recorded options (model and scenario None). Ctrl-C raises KeyboardInterrupt and "
        "leaves the run resumable. Raises ConfigError, FormatError, InfeasibleError.");
}

}  // namespace acpy
