#pragma once

#include <string>
#include <string_view>

namespace lazycl {

// Where a tensor lives. Host tensors are eager and computed with plain C++; OpenCL tensors are
// lazy and computed by generated kernels. OpenCL index k is the k-th device that the LAZYCL_*
// environment variables leave (see README), so "cl" is the device the environment selects.
class Device {
 public:
  enum class Kind { host, opencl };

  static Device host() { return Device(Kind::host, 0); }
  static Device opencl(int index = 0);
  // "host", "cpu" (an alias of host), "cl", "cl:1", "opencl:1"; anything else is an Error.
  static Device parse(std::string_view text);

  Kind kind() const { return kind_; }
  int index() const { return index_; }
  bool is_host() const { return kind_ == Kind::host; }
  bool is_opencl() const { return kind_ == Kind::opencl; }
  std::string str() const;  // "host" or "cl:0"

  bool operator==(const Device&) const = default;

 private:
  Device(Kind kind, int index) : kind_(kind), index_(index) {}
  Kind kind_;
  int index_;
};

}  // namespace lazycl
