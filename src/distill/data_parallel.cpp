#include "distill/data_parallel.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef AC_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <map>

#include "common/accelerator.h"
#include "common/error.h"

namespace ac {

// One of the two backends is set. They are kept apart (not as their common base) because that
// base moved from c10d::ProcessGroup to c10d::Backend in PyTorch 2.0.
struct DataParallel::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#ifdef AC_WITH_CUDA
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
  void allreduce(std::vector<at::Tensor>& ts) {
#ifdef AC_WITH_CUDA
    if (nccl) {
      nccl->allreduce(ts)->wait();
      return;
    }
#endif
    gloo->allreduce(ts)->wait();
  }
  void barrier() {
#ifdef AC_WITH_CUDA
    if (nccl) {
      nccl->barrier()->wait();
      return;
    }
#endif
    gloo->barrier()->wait();
  }
};

DataParallel::DataParallel(const std::string& init_method, int rank, int world_size,
                           double timeout_s, const c10::Device& device)
    : impl_(std::make_unique<Impl>()), rank_(rank), world_size_(world_size), device_(device) {
  const char* where = "data-parallel";
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw ConfigError(msg(where, "need 0 <= rank < world_size, found rank {} world_size {}",
                          rank, world_size));
  auto timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  std::string host = "127.0.0.1";
  if (init_method.rfind("file://", 0) == 0) {
    std::string path = init_method.substr(7);
    if (path.empty())
      throw ConfigError(msg(where, "init_method '{}': expected file:///path", init_method));
    impl_->store = c10::make_intrusive<c10d::FileStore>(path, world_size);
  } else if (init_method.rfind("tcp://", 0) == 0) {
    std::string rest = init_method.substr(6);
    size_t colon = rest.rfind(':');
    int port = -1;
    if (colon != std::string::npos) {
      try {
        port = std::stoi(rest.substr(colon + 1));
      } catch (const std::exception&) {
        port = -1;
      }
    }
    if (colon == std::string::npos || colon == 0 || port <= 0 || port > 65535)
      throw ConfigError(msg(where, "init_method '{}': expected tcp://host:port with a port in "
                            "1..65535", init_method));
    host = rest.substr(0, colon);
    c10d::TCPStoreOptions o;
    o.port = uint16_t(port);
    o.isServer = rank == 0;
    o.numWorkers = size_t(world_size);
    o.waitWorkers = true;
    o.timeout = timeout;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(host, o);
  } else {
    throw ConfigError(msg(where, "init_method '{}': expected file:///path or tcp://host:port",
                          init_method));
  }
  impl_->store->setTimeout(timeout);
  if (device.is_cuda()) {
#ifdef AC_WITH_CUDA
    c10::cuda::set_device(device.has_index() ? device.index() : 0);
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, rank, world_size,
                                                              options);
    return;
#else
    throw ConfigError(msg(where, "{} is a CUDA GPU, but this build has no CUDA (NCCL): build "
                                 "against a CUDA-enabled libtorch (scripts/build_cuda.sh)",
                          device_name(device)));
#endif
  }
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // The loopback device for a single machine; the store's host otherwise.
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
      host == "localhost" ? "127.0.0.1" : host));
  options->threads = 1;
  impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, rank, world_size,
                                                            options);
}

DataParallel::~DataParallel() = default;

void DataParallel::allreduce_mean(const std::vector<at::Tensor>& tensors) {
  if (world_size_ == 1 || tensors.empty()) return;
  at::NoGradGuard no_grad;
  // One flat buffer per dtype: one collective instead of one per tensor.
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, ts] : by_dtype) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : ts) flat_parts.push_back(t.reshape({-1}));
    std::vector<at::Tensor> buffer{at::cat(flat_parts)};
    impl_->allreduce(buffer);
    buffer[0].div_(double(world_size_));
    int64_t offset = 0;
    for (auto& t : ts) {
      int64_t n = t.numel();
      t.copy_(buffer[0].narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
}

double DataParallel::allreduce_sum(double value) {
  if (world_size_ == 1) return value;
  std::vector<at::Tensor> t{at::full({1}, value, at::TensorOptions(at::kDouble).device(device_))};
  impl_->allreduce(t);
  return t[0].item<double>();
}

void DataParallel::barrier() {
  if (world_size_ == 1) return;
  impl_->barrier();
}

const char* DataParallel::backend() const {
#ifdef AC_WITH_CUDA
  if (impl_->nccl) return "nccl";
#endif
  return "gloo";
}

}  // namespace ac
