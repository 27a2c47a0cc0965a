#pragma once

#include <string>
#include <vector>

// One function per lazycl-bench subcommand; main.cpp maps names to them. Each returns the exit
// status and reads only its own arguments.
namespace lazycl::bench {

int Devices(const std::vector<std::string>& args);
int Backend(const std::vector<std::string>& args);
int Transfer(const std::vector<std::string>& args);
int Ops(const std::vector<std::string>& args);
int OpsFirstResult(const std::vector<std::string>& args);
int Models(const std::vector<std::string>& args);
int Tune(const std::vector<std::string>& args);
int Scaling(const std::vector<std::string>& args);
int Warmup(const std::vector<std::string>& args);

}  // namespace lazycl::bench
