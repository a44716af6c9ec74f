// Moved: the admission rules are peer/admission.h, where the peer server and the node side
// both reach them. This header only forwards, for src/agent/orders.cc, which is being moved to
// src/node/ (issue 33) and is not edited meanwhile; delete it once that file includes
// peer/admission.h.
#pragma once

#include "peer/admission.h"
