// Umbrella header of the ftccl public C++ API.
#pragma once

#include "ftccl/communicator.h"
#include "ftccl/status.h"
#include "ftccl/types.h"
#include "ftccl/version.h"
