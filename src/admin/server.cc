#include "admin/server.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "admin/status_page.h"
#include "common/thread_cache.h"
#include "httplib.h"

namespace steward {

namespace {

constexpr char kText[] = "text/plain; charset=utf-8";
constexpr char kPrometheus[] = "text/plain; version=0.0.4; charset=utf-8";

// With TLS: did the client present a certificate the CA signed? (A foreign one fails the
// handshake already; this tells "none" from "a good one".)
bool HasClientCert(const httplib::Request& req) {
  if (req.ssl == nullptr) return true;  // plain HTTP: TLS is off for the whole cluster
  X509* cert = SSL_get1_peer_certificate(req.ssl);
  const bool ok = cert != nullptr && SSL_get_verify_result(req.ssl) == X509_V_OK;
  X509_free(cert);
  return ok;
}

// httplib's ThreadPool starts all its threads up front: 16 idle threads (stacks, malloc arenas)
// in every agent for a port that sees a scrape every few seconds. This one starts a worker when
// a request finds none free, up to 16, and a worker idle for 30 s ends (common/thread_cache.h).
class CachedTaskQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override {
    try {
      threads_.Run(fn);
    } catch (const std::system_error&) {
      // No thread to be had (a pids limit) and none running: this (the listening) thread
      // serves it, rather than leave it queued for ever.
      fn();
    }
  }
  // Workers finish the queued requests first (as httplib's pool does). Bounded: every request
  // has the server's read and write timeouts.
  void shutdown() override { threads_.Close(); }

 private:
  ThreadCache threads_{std::chrono::seconds(30), "st-admin-req", 16};
};

void Answer(httplib::Response& res, const std::optional<std::string>& problem,
            const std::string& ok_body) {
  res.status = problem ? 503 : 200;
  res.set_content(problem ? *problem + "\n" : ok_body, kText);
}

}  // namespace

AdminServer::AdminServer(std::string host, int port, AdminHandlers handlers,
                         std::optional<TlsPaths> tls)
    : host_(std::move(host)), port_(port), handlers_(std::move(handlers)), tls_(std::move(tls)) {}

AdminServer::~AdminServer() { Shutdown(); }

absl::Status AdminServer::Start() {
  if (tls_) {
    const TlsPaths t = *tls_;
    server_ = std::make_unique<httplib::SSLServer>([t](SSL_CTX& ctx) {
      if (SSL_CTX_use_certificate_chain_file(&ctx, t.agent_cert.c_str()) != 1 ||
          SSL_CTX_use_PrivateKey_file(&ctx, t.agent_key.c_str(), SSL_FILETYPE_PEM) != 1 ||
          SSL_CTX_load_verify_locations(&ctx, t.ca.c_str(), nullptr) != 1) {
        return false;
      }
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      // With peer verification on, OpenSSL refuses to resume a session without an ID context:
      // load balancers that reuse sessions for their health checks would fail.
      static const unsigned char kContext[] = "steward-admin";
      SSL_CTX_set_session_id_context(&ctx, kContext, sizeof(kContext) - 1);
      // Ask for a client certificate, verify one if given, but let health checks in without.
      SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, nullptr);
      return true;
    });
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("admin port: cannot load the agent's certificate (", tls_->agent_cert, ")"));
  }
  // A probe is one short request: no connection holds a worker for long, and up to 16 workers
  // (more than httplib's default) keep /healthz answering while a scrape waits on etcd.
  server_->new_task_queue = [] { return new CachedTaskQueue(); };
  server_->set_keep_alive_max_count(1);
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  // SO_REUSEADDR only (httplib's default adds SO_REUSEPORT, which would let a second process
  // bind the same port without an error).
  server_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const AdminHandlers h = handlers_;
  server_->Get("/healthz", [h](const httplib::Request&, httplib::Response& res) {
    Answer(res, h.not_alive(), "ok\n");
  });
  server_->Get("/readyz", [h](const httplib::Request&, httplib::Response& res) {
    Answer(res, h.not_ready(), "ready\n");
  });
  auto guarded = [](std::function<void(httplib::Response&)> serve) {
    return [serve](const httplib::Request& req, httplib::Response& res) {
      if (!HasClientCert(req)) {
        res.status = 403;
        res.set_content("a client certificate signed by the cluster's CA is required\n", kText);
        return;
      }
      serve(res);
    };
  };
  server_->Get("/leader", guarded([h](httplib::Response& res) {
                 const std::optional<std::string> problem = h.not_leader();
                 std::string body = "leader\n";
                 if (!problem && h.leader_detail) body += h.leader_detail();
                 Answer(res, problem, body);
               }));
  server_->Get("/metrics",
               guarded([h](httplib::Response& res) { res.set_content(h.metrics(), kPrometheus); }));
  // The status page describes the cluster as /metrics does: the same guard.
  server_->Get("/", guarded([h](httplib::Response& res) {
                 if (!h.status_json) {
                   res.status = 404;
                   return;
                 }
                 res.set_header("Content-Security-Policy", kStatusPageCsp);
                 res.set_header("X-Content-Type-Options", "nosniff");
                 res.set_header("Cache-Control", "no-cache");
                 res.set_content(StatusPageHtml(), "text/html; charset=utf-8");
               }));
  server_->Get("/status.json", guarded([h](httplib::Response& res) {
                 if (!h.status_json) {
                   res.status = 404;
                   return;
                 }
                 res.set_header("Cache-Control", "no-store");
                 res.set_header("X-Content-Type-Options", "nosniff");
                 res.set_content(h.status_json(), "application/json");
               }));
  if (!server_->bind_to_port(host_, port_)) {
    return absl::FailedPreconditionError(absl::StrCat("admin port: cannot listen on ", host_, ":",
                                                      port_, " (cluster.ports.admin in use?)"));
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-admin");
    server_->listen_after_bind();
  });
  // httplib's stop() does nothing before the listen loop runs: a Shutdown right after Start
  // would wait for ever. Bounded: the loop starts at once.
  for (int i = 0; i < 500 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::OkStatus();
}

void AdminServer::Shutdown() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace steward
