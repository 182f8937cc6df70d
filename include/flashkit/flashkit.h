// FlashKit umbrella header: include this to get the whole public C++ API.
#pragma once

#include "flashkit/tensor.h"
#include "flashkit/errors.h"
#include "flashkit/attention.h"
#include "flashkit/decode.h"
#include "flashkit/mla.h"
#include "flashkit/kvcache.h"
