// dvm: the public C++ API in one include.
#pragma once

#include "dvm/dtype.h"
#include "dvm/error.h"
#include "dvm/graph.h"
#include "dvm/runtime.h"
#include "dvm/shape.h"
#include "dvm/tensor.h"
#include "dvm/version.h"
#include "dvm/weights_file.h"
