#pragma once

#include <functional>
#include <optional>

#include "base/settings.h"

// Tiered execution (LAZYCL_COMPILE, README "Compile latency"): a graph whose fused program is
// neither built nor in the disk cache runs at once on the generic kernels
// (kernels/generic_library.h), while its fused program builds here, on one background thread;
// once built, the graph's later runs use it (runtime/executor.cpp chooses the tier per run).
namespace lazycl::runtime {

// Runs `job` on the background builder, after the jobs submitted before it. The thread starts at
// the first job. At process exit it finishes the job in progress and drops the rest: a build
// still running while the compiler is destroyed would crash the process. (That needs the exit
// handler to run before the compiler's own: registered after the device opened, and a device
// opens with its compiler loaded; see LoadCompiler in backend/opencl_device.cpp.)
void SubmitBackgroundBuild(std::function<void()> job);

// Blocks until every job submitted so far has run.
void WaitForBackgroundBuilds();

// The mode graphs run under: LAZYCL_COMPILE, unless SetCompileMode chose another.
base::CompileMode CurrentCompileMode();
// Overrides LAZYCL_COMPILE for this process (nullopt: back to it). For tests, which compare the
// tiers in one process, and lazycl-bench, which times the fused programs; a graph already
// prepared keeps the generic plan it has or lacks.
void SetCompileMode(std::optional<base::CompileMode> mode);

}  // namespace lazycl::runtime
