// Data-parallel training over several processes with torch.distributed's c10d: Gloo on the
// CPU, NCCL on CUDA GPUs (a build with CUDA; one GPU per rank).
//
// Scheme (PyTorch DistributedDataParallel, Li et al., "PyTorch Distributed: Experiences on
// Accelerating Data Parallel Training", VLDB 2020): every rank holds the whole model, runs
// forward + backward on its own shard of the global batch, and the gradients are all-reduced
// (mean) before the optimizer step, so every rank applies the same update and the weights stay
// identical. With equal shards and a loss that is a mean over the shard's tokens, the mean of
// the ranks' gradients equals the gradient of the global batch: the run matches one process
// with the same global batch up to float summation order.
//
// Rendezvous (torch.distributed init_method): "file:///path/to/file" (c10d FileStore; every rank
// on a shared file system) or "tcp://host:port" (c10d TCPStore; rank 0 hosts the store).
//
// The c10d headers (and Gloo's) stay inside data_parallel.cpp.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace ac {

/// One process's membership of a data-parallel group. Not copyable; destroyed last.
class DataParallel {
 public:
  /// Joins the group; blocks until all `world_size` ranks have joined or `timeout_s` passes.
  /// `device`: where this rank's gradients live: the CPU (Gloo) or its CUDA GPU (NCCL; the
  /// tensors reduced must be on it). Throws ConfigError on a malformed init_method, rank outside
  /// [0, world_size), world_size < 1, or a CUDA device in a build without CUDA; RuntimeError
  /// (c10::Error text) when the rendezvous fails or times out.
  DataParallel(const std::string& init_method, int rank, int world_size, double timeout_s = 300,
               const c10::Device& device = c10::kCPU);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool is_main() const { return rank_ == 0; }

  /// In place: every tensor becomes the mean over the ranks of that tensor. Tensors: any
  /// shapes, fp32 or fp64, contiguous or not (one flat buffer per dtype is reduced). The
  /// result is bitwise identical on every rank.
  void allreduce_mean(const std::vector<at::Tensor>& tensors);

  /// "gloo" or "nccl".
  const char* backend() const;

  /// Sum over the ranks of a scalar (loss logging, stop flags).
  double allreduce_sum(double value);

  /// Blocks until every rank reaches it.
  void barrier();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_size_ = 1;
  c10::Device device_ = c10::kCPU;
};

}  // namespace ac
