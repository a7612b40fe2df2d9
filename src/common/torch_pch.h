// Precompiled header shared by the library, the CLI and the tests (torch dominates compile time).
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
