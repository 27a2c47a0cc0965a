#include "backend/cl_error.h"

#include <string>

#include "backend/cl.h"
#include "gtest/gtest.h"

namespace lazycl::backend {
namespace {

TEST(ClErrorTest, NamesStandardCodes) {
  EXPECT_EQ(ClErrorName(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
  EXPECT_EQ(ClErrorName(CL_MEM_OBJECT_ALLOCATION_FAILURE), "CL_MEM_OBJECT_ALLOCATION_FAILURE");
  EXPECT_EQ(ClErrorName(CL_BUILD_PROGRAM_FAILURE), "CL_BUILD_PROGRAM_FAILURE");
  EXPECT_EQ(ClErrorName(CL_INVALID_KERNEL_NAME), "CL_INVALID_KERNEL_NAME");
  EXPECT_EQ(ClErrorName(CL_INVALID_WORK_GROUP_SIZE), "CL_INVALID_WORK_GROUP_SIZE");
  EXPECT_EQ(ClErrorName(CL_PLATFORM_NOT_FOUND_KHR), "CL_PLATFORM_NOT_FOUND_KHR");
  EXPECT_EQ(ClErrorName(-12345), "CL_UNKNOWN_ERROR");
  // Every code from CL_DEVICE_NOT_FOUND to CL_KERNEL_ARG_INFO_NOT_AVAILABLE and the CL_INVALID_*
  // range has a name.
  for (int code = -1; code >= -19; --code) EXPECT_NE(ClErrorName(code), "CL_UNKNOWN_ERROR") << code;
  for (int code = -30; code >= -72; --code)
    EXPECT_NE(ClErrorName(code), "CL_UNKNOWN_ERROR") << code;
}

TEST(ClErrorTest, StatusNamesCallAndCode) {
  EXPECT_TRUE(ClStatus(CL_SUCCESS, "clFinish").ok());
  absl::Status s = ClStatus(CL_OUT_OF_RESOURCES, "clEnqueueWriteBuffer");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "clEnqueueWriteBuffer failed: CL_OUT_OF_RESOURCES (-5)");
}

TEST(ClErrorTest, CanonicalCodes) {
  EXPECT_EQ(ClStatus(CL_MEM_OBJECT_ALLOCATION_FAILURE, "x").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ClStatus(CL_INVALID_ARG_SIZE, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClStatus(CL_DEVICE_NOT_FOUND, "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ClStatus(CL_MAP_FAILURE, "x").code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace lazycl::backend
