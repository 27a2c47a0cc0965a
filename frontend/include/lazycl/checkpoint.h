#pragma once

#include <map>
#include <string>

#include "lazycl/device.h"
#include "lazycl/tensor.h"

// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors); README,
// "Checkpoints".
namespace lazycl {

// The tensors of the safetensors file at `path`, on `device`, by name. Only the header is read:
// each tensor has its shape and dtype and no memory, and its bytes are read from the file and
// uploaded the first time something reads it (a kernel, to_vector, item, to); a tensor never
// used is never read. The file stays open while any of them waits. A truncated, malformed or
// hostile file, a dtype lazycl cannot hold, or offsets outside the file are an Error naming
// the file and the tensor.
std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device);

// Writes `tensors` to `path` as a safetensors file, sorted by name, atomically (into
// `path` + ".tmp", then renamed). Each tensor's data is computed and read back; a loaded tensor
// never read since is copied from its own file. An empty name, a placeholder or an unwritable
// path is an Error.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors);

}  // namespace lazycl
