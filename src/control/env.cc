#include "control/env.h"

#include <random>

#include "etcd/client.h"
#include "peer/client.h"
#include "pki/node_certs.h"

namespace steward {

ControlEnv RealControlEnv(const Config& config,
                          std::shared_ptr<grpc::ChannelCredentials> credentials,
                          std::shared_ptr<CallCanceller> canceller) {
  ControlEnv env;
  env.clock = Clock::Real();
  env.dial_agent = [config, credentials, canceller](const NodeSpec& n) -> std::unique_ptr<PeerApi> {
    return std::make_unique<PeerClient>(config.AgentAddress(n), credentials, canceller);
  };
  // An adopted cluster's members may need other credentials (checked when the agent wires up).
  std::function<std::shared_ptr<grpc::ChannelCredentials>(const std::string&)> per_endpoint;
  if (config.cluster.adopt.enabled()) {
    if (auto f = ClusterCredentials(config, credentials); f.ok()) per_endpoint = *f;
  }
  env.dial_etcd = [credentials, per_endpoint](
                      const std::vector<std::string>& urls,
                      std::chrono::milliseconds timeout) -> std::unique_ptr<EtcdApi> {
    EtcdClient::Options o;
    o.timeout = timeout;
    o.credentials = credentials;
    o.credentials_for = per_endpoint;
    return std::make_unique<EtcdClient>(urls, o);
  };
  env.parallel = true;
  env.nonce = [] { return static_cast<uint32_t>(std::random_device{}() & 0xffff); };
  return env;
}

}  // namespace steward
