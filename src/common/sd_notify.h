// systemd's readiness protocol (sd_notify(3)), written out instead of linking libsystemd: the
// library and the compression and crypto libraries it brings cost an agent about 1 MiB of
// resident memory for one datagram at start and one at stop.
#pragma once

#include <string_view>

namespace steward {

// Sends `state` ("READY=1\nSTATUS=...") to the socket named by $NOTIFY_SOCKET (a path, or an
// abstract name written with a leading '@'). Returns false when the variable is unset (not under
// a Type=notify unit: nothing to do) or the datagram could not be sent.
bool NotifySystemd(std::string_view state);

}  // namespace steward
