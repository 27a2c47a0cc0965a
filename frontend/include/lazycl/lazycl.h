#pragma once

// The umbrella header of lazycl.
#include "lazycl/autograd.h"
#include "lazycl/checkpoint.h"
#include "lazycl/device.h"
#include "lazycl/dtype.h"
#include "lazycl/env.h"
#include "lazycl/error.h"
#include "lazycl/factories.h"
#include "lazycl/function.h"
#include "lazycl/memory.h"
#include "lazycl/metrics.h"
#include "lazycl/nn.h"
#include "lazycl/ops.h"
#include "lazycl/optim.h"
#include "lazycl/profile.h"
#include "lazycl/tensor.h"
