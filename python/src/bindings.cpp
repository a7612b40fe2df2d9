// autocompress._core: the Python bindings of the library (docs/python.md). Thin: every function
// calls the library functions the CLI's command calls (plan/plan.h plan_deployment,
// plan/cost_report.h cost_report, pipeline/compress.h), and every C++ error type becomes one
// Python exception class with the same message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <variant>

#include <c10/util/Exception.h>

#include "bindings.h"
#include "common/error.h"
#include "common/runtime.h"
#include "distill/distill.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "hardware/validate.h"
#include "plan/cost_report.h"
#include "plan/plan.h"

namespace nb = nanobind;
using json = nlohmann::json;

namespace acpy {

nb::object to_python(const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      nb::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[it.key().c_str()] = to_python(it.value());
      return d;
    }
    case json::value_t::array: {
      nb::list l;
      for (const json& v : j) l.append(to_python(v));
      return l;
    }
    case json::value_t::string: return nb::str(j.get_ref<const std::string&>().c_str());
    case json::value_t::boolean: return nb::bool_(j.get<bool>());
    case json::value_t::number_integer: return nb::int_(j.get<int64_t>());
    case json::value_t::number_unsigned: return nb::int_(j.get<uint64_t>());
    case json::value_t::number_float: return nb::float_(j.get<double>());
    default: return nb::none();
  }
}

namespace {

// The Python classes of the library's errors (common/error.h, distill/distill.h Interrupted).
PyObject* g_error = nullptr;
PyObject* g_format_error = nullptr;
PyObject* g_config_error = nullptr;
PyObject* g_infeasible_error = nullptr;
PyObject* g_internal_error = nullptr;
PyObject* g_interrupted = nullptr;

PyObject* add_exception(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("autocompress.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!cls) throw nb::python_error();
  m.attr(name) = nb::handle(cls);
  return cls;
}

void bind_errors(nb::module_& m) {
  g_error = add_exception(m, "Error", PyExc_RuntimeError,
                          "Base of every error the library raises on purpose (ac::Error).");
  g_format_error = add_exception(m, "FormatError", g_error,
                                 "A file is missing, truncated, corrupt or inconsistent.");
  g_config_error = add_exception(m, "ConfigError", g_error,
                                 "An invalid request: a bad option, architecture or device.");
  g_infeasible_error = add_exception(m, "InfeasibleError", g_error,
                                     "No architecture meets the deployment limits.");
  g_internal_error = add_exception(m, "InternalError", g_error,
                                   "An internal invariant failed: a bug in autocompress.");
  // Also a KeyboardInterrupt: Ctrl-C during a distillation stops it at a step boundary.
  nb::tuple bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_KeyboardInterrupt));
  g_interrupted = add_exception(m, "Interrupted", bases.ptr(),
                                "A signal (Ctrl-C, SIGTERM) stopped a training loop; its state is "
                                "saved and compress(..., resume=True) continues the run.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ac::Interrupted& e) {
      PyErr_SetString(g_interrupted, e.what());
    } catch (const ac::FormatError& e) {
      PyErr_SetString(g_format_error, e.what());
    } catch (const ac::ConfigError& e) {
      PyErr_SetString(g_config_error, e.what());
    } catch (const ac::InfeasibleError& e) {
      PyErr_SetString(g_infeasible_error, e.what());
    } catch (const ac::InternalError& e) {
      PyErr_SetString(g_internal_error, e.what());
    } catch (const ac::Error& e) {
      PyErr_SetString(g_error, e.what());
    } catch (const c10::Error& e) {  // as the CLI prints it
      PyErr_SetString(PyExc_RuntimeError, ("torch: " + std::string(e.what_without_backtrace())).c_str());
    }
  });
}

using ScenarioArg = std::variant<ac::Scenario, std::filesystem::path>;
using ProfileArg = std::optional<std::variant<ac::Profile, std::filesystem::path>>;

ac::Scenario scenario_of(const ScenarioArg& s) {
  if (const auto* path = std::get_if<std::filesystem::path>(&s)) return ac::find_scenario(path->string());
  return std::get<ac::Scenario>(s);
}

// The profile to cost with (null: none); `storage` holds one loaded from a path.
const ac::Profile* profile_of(const ProfileArg& p, ac::Profile& storage) {
  if (!p) return nullptr;
  if (const auto* path = std::get_if<std::filesystem::path>(&*p)) {
    storage = ac::load_profile(*path);
    return &storage;
  }
  return &std::get<ac::Profile>(*p);
}

void bind_scenario(nb::module_& m) {
  nb::class_<ac::Scenario>(m, "Scenario", "A deployment: device, engine, workload and limits "
                                          "(scenarios/*.json).")
      .def_static("load", [](const std::filesystem::path& p) { return ac::find_scenario(p.string()); },
                  nb::arg("name_or_path"),
                  "A scenario by name (scenarios/NAME.json of the data folder) or by path. "
                  "Raises FormatError on a malformed file, ConfigError on an unknown name, "
                  "device, engine or dtype.")
      .def_ro("name", &ac::Scenario::name)
      .def_ro("device", &ac::Scenario::device, "devices/<device>.json")
      .def_ro("engine", &ac::Scenario::engine, "engines/<engine>.json")
      .def_ro("notes", &ac::Scenario::notes)
      .def_prop_ro("prompt_tokens", [](const ac::Scenario& s) { return s.workload.prompt_tokens; },
                   "tokens of the prefill")
      .def_prop_ro("output_tokens", [](const ac::Scenario& s) { return s.workload.output_tokens; },
                   "decode steps")
      .def_prop_ro("batch_size", [](const ac::Scenario& s) { return s.workload.batch_size; },
                   "concurrent sequences")
      .def_prop_ro("weight_dtype", [](const ac::Scenario& s) { return s.workload.weight_dtype; })
      .def_prop_ro("kv_cache_dtype", [](const ac::Scenario& s) { return s.workload.kv_cache_dtype; })
      .def_prop_ro("limits", [](const ac::Scenario& s) { return to_python(s.limits.to_json()); },
                   "the limits as written: ttft_ms / tpot_ms (ms), peak_memory_bytes (bytes), "
                   "min_throughput_tokens_per_s (tokens/s), or {'fraction_of_teacher': x}")
      .def("__repr__", [](const ac::Scenario& s) {
        return "Scenario('" + s.name + "', device='" + s.device + "', engine='" + s.engine + "')";
      });
}

void bind_profile(nb::module_& m) {
  nb::class_<ac::Profile>(m, "Profile", "Latency tables of one device (`autocompress profile`).")
      .def_static("load", &ac::load_profile, nb::arg("path"),
                  "Reads a profile.json. Raises FormatError naming the file and field.")
      .def_prop_ro("device", [](const ac::Profile& p) { return p.identity.device; })
      .def_prop_ro("cpu_model", [](const ac::Profile& p) { return p.identity.cpu_model; })
      .def_prop_ro("cores", [](const ac::Profile& p) { return p.identity.cores; })
      .def_prop_ro("threads", [](const ac::Profile& p) { return p.identity.threads; })
      .def_prop_ro("date", [](const ac::Profile& p) { return p.identity.date; })
      .def("to_dict", [](const ac::Profile& p) { return to_python(p.to_json()); },
           "profile.json as a dict")
      .def("__repr__", [](const ac::Profile& p) {
        return "Profile(device='" + p.identity.device + "', cpu_model='" + p.identity.cpu_model +
               "', date='" + p.identity.date + "')";
      });
}

void bind_plan(nb::module_& m) {
  nb::class_<ac::Plan>(m, "Plan", "Does a model fit a deployment, and if not, the cheapest "
                                  "structural changes that make it fit (plan/plan.h).")
      .def_ro("verdict", &ac::Plan::verdict, "'fits', 'fits_after_changes' or 'no_fit'")
      .def_prop_ro("fits", [](const ac::Plan& p) { return p.broken.empty(); },
                   "the full model meets every limit")
      .def_ro("broken", &ac::Plan::broken, "the broken limits of the full model ('' = none)")
      .def_ro("warnings", &ac::Plan::warnings)
      .def_prop_ro("limits", [](const ac::Plan& p) { return to_python(p.limits.to_json()); },
                   "absolute limits (relative ones resolved against the full model)")
      .def_prop_ro("full", [](const ac::Plan& p) { return to_python(p.to_json()["full"]); },
                   "the full model: cost (ms, tokens/s, bytes), per-limit slack, fits, broken")
      .def_prop_ro("suggestions", [](const ac::Plan& p) {
        const json j = p.to_json();
        json all = j["uniform"];
        if (!j["per_layer"].is_null()) all.push_back(j["per_layer"]);
        for (const json& s : j["levers"]) all.push_back(s);
        return to_python(all);
      }, "every suggestion: uniform ones, the per-layer one, per-lever ones (hybrid models)")
      .def("to_dict", [](const ac::Plan& p) { return to_python(p.to_json()); },
           "the plan as `autocompress plan --json` prints it")
      .def("__str__", &ac::Plan::to_text, "the table `autocompress plan` prints")
      .def("__repr__", [](const ac::Plan& p) {
        return "Plan(verdict='" + p.verdict + "', config='" + ac::describe(p.config) +
               "', scenario='" + p.scenario.name + "')";
      });

  m.def("plan",
        [](const std::filesystem::path& config, const ScenarioArg& scenario,
           const ProfileArg& profile, int64_t width_granularity, int64_t width_steps,
           double min_width_fraction, double min_depth_fraction) {
          // In the CLI's order: the architecture, the scenario, the profile.
          const ac::ModelConfig c = ac::read_architecture(config);
          const ac::Scenario s = scenario_of(scenario);
          ac::Profile storage;
          const ac::Profile* p = profile_of(profile, storage);
          ac::PlanOptions o;
          o.width_granularity = width_granularity;
          o.width_steps = width_steps;
          o.min_width_fraction = min_width_fraction;
          o.min_depth_fraction = min_depth_fraction;
          nb::gil_scoped_release release;
          return ac::plan_deployment(c, config.string(), s, p, o);
        },
        nb::arg("config"), nb::arg("scenario"), nb::arg("profile") = nb::none(), nb::kw_only(),
        nb::arg("width_granularity") = ac::PlanOptions{}.width_granularity,
        nb::arg("width_steps") = ac::PlanOptions{}.width_steps,
        nb::arg("min_width_fraction") = ac::PlanOptions{}.min_width_fraction,
        nb::arg("min_depth_fraction") = ac::PlanOptions{}.min_depth_fraction,
        "`autocompress plan`: does the architecture in `config` (config.json, checkpoint folder "
        "or llama2.c model.bin) fit `scenario` (a Scenario, name or path) by the cost model, and "
        "the cheapest changes that make it fit. `profile` (a Profile or path) is required for a "
        "CPU scenario. width_granularity 0 = the device's width step. Raises ConfigError, FormatError.");
}

void bind_cost(nb::module_& m) {
  auto est = [](auto member) {
    return [member](const ac::CostReport& r) { return r.estimate.*member; };
  };
  nb::class_<ac::CostReport>(m, "Cost", "Predicted TTFT, TPOT, throughput and memory of an "
                                        "architecture in a scenario (hardware/cost_model.h).")
      .def_prop_ro("ttft_ms", est(&ac::CostEstimate::ttft_ms), "time to first token, ms")
      .def_prop_ro("tpot_ms", est(&ac::CostEstimate::tpot_ms), "time per output token, ms")
      .def_prop_ro("throughput_tokens_per_s", est(&ac::CostEstimate::throughput_tokens_per_s),
                   "output tokens/s of the batch")
      .def_prop_ro("peak_memory_bytes", est(&ac::CostEstimate::peak_memory_bytes), "bytes")
      .def_prop_ro("weight_bytes", est(&ac::CostEstimate::weight_bytes), "bytes")
      .def_prop_ro("kv_cache_bytes", est(&ac::CostEstimate::kv_cache_bytes), "bytes")
      .def_prop_ro("activation_bytes", est(&ac::CostEstimate::activation_bytes), "bytes")
      .def_prop_ro("source", est(&ac::CostEstimate::source), "'profile', 'profile+ENGINE' or 'roofline'")
      .def_prop_ro("architecture", [](const ac::CostReport& r) { return ac::describe(r.config); })
      .def_prop_ro("limits", [](const ac::CostReport& r) { return to_python(r.limits.to_json()); })
      .def_ro("limits_hold", &ac::CostReport::limits_hold,
              "None when limits relative to the teacher are not resolved (no teacher)")
      .def_ro("limits_broken", &ac::CostReport::limits_broken, "'' when they hold")
      .def("to_dict", [](const ac::CostReport& r) { return to_python(r.to_json()); },
           "the cost as `autocompress cost --json` prints it")
      .def("__repr__", [](const ac::CostReport& r) {
        return fmt::format("Cost(ttft_ms={:.4g}, tpot_ms={:.4g}, throughput_tokens_per_s={:.4g}, "
                           "peak_memory_bytes={}, source='{}')", r.estimate.ttft_ms,
                           r.estimate.tpot_ms, r.estimate.throughput_tokens_per_s,
                           r.estimate.peak_memory_bytes, r.estimate.source);
      });

  m.def("cost",
        [](const std::filesystem::path& config, const ScenarioArg& scenario,
           const ProfileArg& profile, const std::optional<std::filesystem::path>& teacher) {
          const ac::ModelConfig c = ac::read_architecture(config);  // in the CLI's order
          const ac::Scenario s = scenario_of(scenario);
          ac::Profile storage;
          const ac::Profile* p = profile_of(profile, storage);
          nb::gil_scoped_release release;
          return ac::cost_report(c, s, p, teacher.value_or(std::filesystem::path()));
        },
        nb::arg("config"), nb::arg("scenario"), nb::arg("profile") = nb::none(),
        nb::arg("teacher") = nb::none(),
        "`autocompress cost`: the predicted cost of the architecture in `config` in `scenario`, "
        "checked against its limits; `teacher` (an architecture) resolves limits relative to "
        "the teacher. Raises ConfigError, FormatError.");
}

}  // namespace
}  // namespace acpy

NB_MODULE(_core, m) {
  m.doc() = "The autocompress C++ library (docs/python.md).";
  ac::init_torch_threads();  // as the CLI's main: every core unless AC_NUM_THREADS
  acpy::bind_errors(m);
  acpy::bind_scenario(m);
  acpy::bind_profile(m);
  acpy::bind_plan(m);
  acpy::bind_cost(m);
  acpy::bind_compress(m);
}
