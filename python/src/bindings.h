// What the two files of the extension share: JSON as Python objects, and the compress binding.
#pragma once
#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

namespace acpy {

/// `j` as Python objects: dict, list, str, int, float, bool, None.
nanobind::object to_python(const nlohmann::json& j);

/// Binds compress(), RunReport and ProgressEvent (bind_compress.cpp).
void bind_compress(nanobind::module_& m);

}  // namespace acpy
