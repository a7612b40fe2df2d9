// safetensors reader/writer: bit-exact round trips, the byte layout checked by hand, sharded
// folders, and hand-made corrupt files that must each throw a FormatError saying what is wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "common/error.h"
#include "test_util.h"
#include "common/json_io.h"
#include "io/safetensors.h"

namespace ac {
namespace {

using test::TempDir;

std::string bytes_of(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

void write_bytes(const fs::path& p, const std::string& b) {
  std::ofstream(p, std::ios::binary).write(b.data(), std::streamsize(b.size()));
}

/// A safetensors file from a raw header text and data bytes (no validation: for corrupt files).
std::string raw_file(const std::string& header, const std::string& data, uint64_t len_field) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char(len_field >> (8 * i));
  return out + header + data;
}
std::string raw_file(const std::string& header, const std::string& data) {
  return raw_file(header, data, header.size());
}

/// Expects SafetensorsFile(path) to throw FormatError whose message names the file and
/// contains `needle`.
void expect_corrupt(const fs::path& p, const std::string& needle) {
  try {
    SafetensorsFile f(p);
    FAIL() << "no error for " << p << " (expected '" << needle << "')";
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p.filename().string()), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m << "\nexpected: " << needle;
  }
}

TEST(Safetensors, RoundTripIsBitExact) {
  TempDir tmp;
  at::manual_seed(3);
  TensorMap in;
  in["f32.odd"] = at::randn({31, 33});
  in["f32.scalar"] = at::scalar_tensor(-2.5f);  // 0-dim
  in["f32.transposed"] = at::randn({5, 7}).t();  // not contiguous
  in["f32.empty"] = at::zeros({0, 4});
  in["f32.special"] = at::tensor({0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f});
  in["f16"] = at::randn({257}).to(at::kHalf);
  in["bf16"] = at::randn({3, 1, 5}).to(at::kBFloat16);
  in["i64"] = at::randint(-(int64_t(1) << 62), int64_t(1) << 62, {2, 3, 3}, at::kLong);
  const fs::path p = tmp.path / "x.safetensors";
  save_safetensors(p, in, {{"format", "pt"}, {"note", "round trip"}});

  SafetensorsFile f(p);
  EXPECT_EQ(f.names().size(), in.size());
  EXPECT_EQ(f.metadata().at("note"), "round trip");
  for (const auto& [name, t] : in) {
    at::Tensor got = f.get(name);
    EXPECT_EQ(got.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(got.sizes(), t.sizes()) << name;
    EXPECT_EQ(f.shape(name), t.sizes().vec()) << name;
    EXPECT_EQ(bytes_of(got), bytes_of(t)) << name;  // bit for bit, NaN and -0 included
  }
  // Tensors keep the mapping alive after the file object is gone.
  at::Tensor kept = SafetensorsFile(p).get("f32.odd");
  EXPECT_EQ(bytes_of(kept), bytes_of(in["f32.odd"]));
}

TEST(Safetensors, ByteLayoutMatchesTheSpecByHand) {
  TempDir tmp;
  const fs::path p = tmp.path / "a.safetensors";
  save_safetensors(p, {{"b", at::tensor({int32_t(7)})}, {"a", at::tensor({1.0f, 2.0f})}});
  const std::string file = read_file(p);
  // Names sorted, offsets in that order, header padded with spaces to a multiple of 8.
  const std::string json =
      R"({"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
      R"("b":{"data_offsets":[8,12],"dtype":"I32","shape":[1]}})";
  const std::string header = json + std::string((8 - json.size() % 8) % 8, ' ');
  ASSERT_EQ(file.size(), 8 + header.size() + 12);
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  EXPECT_EQ(n, header.size());
  EXPECT_EQ(file.substr(8, header.size()), header);
  const float a[2] = {1.0f, 2.0f};
  const int32_t b = 7;
  EXPECT_EQ(file.substr(8 + header.size(), 8), std::string(reinterpret_cast<const char*>(a), 8));
  EXPECT_EQ(file.substr(16 + header.size()), std::string(reinterpret_cast<const char*>(&b), 4));
}

TEST(Safetensors, ShardedFolderWithIndex) {
  TempDir tmp;
  TensorMap s1{{"model.embed_tokens.weight", at::randn({11, 4})}};
  TensorMap s2{{"model.norm.weight", at::randn({4})},
               {"lm_head.weight", at::randn({11, 4}).to(at::kBFloat16)}};
  save_safetensors(tmp.path / "model-00001-of-00002.safetensors", s1);
  save_safetensors(tmp.path / "model-00002-of-00002.safetensors", s2);
  json index = {{"metadata", {{"total_size", 0}}},
                {"weight_map",
                 {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                  {"model.norm.weight", "model-00002-of-00002.safetensors"},
                  {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  write_json_file(tmp.path / "model.safetensors.index.json", index);
  TensorMap got = load_safetensors_dir(tmp.path);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(bytes_of(got["model.embed_tokens.weight"]), bytes_of(s1["model.embed_tokens.weight"]));
  EXPECT_EQ(bytes_of(got["model.norm.weight"]), bytes_of(s2["model.norm.weight"]));
  EXPECT_EQ(bytes_of(got["lm_head.weight"]), bytes_of(s2["lm_head.weight"]));

  index["weight_map"]["model.layers.0.mlp.up_proj.weight"] = "model-00002-of-00002.safetensors";
  write_json_file(tmp.path / "model.safetensors.index.json", index);
  try {
    load_safetensors_dir(tmp.path);
    FAIL() << "a tensor missing from its shard was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.up_proj.weight"), std::string::npos)
        << e.what();
  }
  index["weight_map"]["x"] = "model-00003-of-00002.safetensors";
  write_json_file(tmp.path / "model.safetensors.index.json", index);
  EXPECT_THROW(load_safetensors_dir(tmp.path), FormatError);
  index["weight_map"]["x"] = "../escape.safetensors";
  write_json_file(tmp.path / "model.safetensors.index.json", index);
  EXPECT_THROW(load_safetensors_dir(tmp.path), FormatError);
}

TEST(Safetensors, SingleFileFolderAndMissingFolder) {
  TempDir tmp;
  EXPECT_THROW(load_safetensors_dir(tmp.path), FormatError);
  save_safetensors(tmp.path / "model.safetensors", {{"w", at::ones({2, 2})}});
  EXPECT_EQ(load_safetensors_dir(tmp.path).count("w"), 1u);
}

TEST(Safetensors, TruncatedFilesThrow) {
  TempDir tmp;
  const fs::path good = tmp.path / "good.safetensors";
  save_safetensors(good, {{"a", at::randn({4, 4})}, {"b", at::randn({3})}});
  const std::string full = read_file(good);
  uint64_t n = 0;
  std::memcpy(&n, full.data(), 8);
  const fs::path p = tmp.path / "cut.safetensors";
  const std::pair<size_t, const char*> cuts[] = {
      {0, "shorter than the 8-byte header"},
      {5, "shorter than the 8-byte header"},
      {8, "exceeds file size"},
      {8 + n / 2, "exceeds file size"},
      {8 + n, "outside the data section"},
      {full.size() - 1, "outside the data section"},
  };
  for (const auto& [size, needle] : cuts) {
    write_bytes(p, full.substr(0, size));
    expect_corrupt(p, needle);
  }
}

TEST(Safetensors, HostileHeadersThrow) {
  TempDir tmp;
  const fs::path p = tmp.path / "bad.safetensors";
  const std::string data16(16, '\x01');
  auto check = [&](const std::string& file, const std::string& needle) {
    write_bytes(p, file);
    expect_corrupt(p, needle);
  };
  const std::string ok_a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  check(raw_file("{" + ok_a + "}", data16, 1ull << 40), "exceeds the");  // absurd header length
  check(raw_file("{" + ok_a + "}", data16, 200), "header length 200 exceeds file size");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 data16.substr(0, 12)),
        "overlaps 'a'");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data16.substr(0, 8)),
        "needs 12 bytes but data_offsets [0, 8] hold 8");
  check(raw_file(R"({"a":{"dtype":"F8_E9","shape":[2],"data_offsets":[0,8]}})", data16.substr(0, 8)),
        "unknown dtype 'F8_E9'");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data16.substr(0, 8)),
        "outside the data section of 8 bytes");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data16),
        "gap of 8 bytes");
  check(raw_file("{" + ok_a + "}", data16), "8 bytes after the last tensor");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,2],"data_offsets":[0,8]}})",
                 data16.substr(0, 8)),
        "at most 8 dims");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data16.substr(0, 8)),
        "not a non-negative integer");
  check(raw_file(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                 data16.substr(0, 8)),
        "overflows");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data16.substr(0, 8)),
        "data_offsets [0] must be two");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[2]})", data16.substr(0, 8)), "not valid JSON");
  check(raw_file(R"([1,2])", ""), "expected an object");
  check(raw_file(R"({"__metadata__":{"k":1}})", ""), "expected a string");
}

}  // namespace
}  // namespace ac
