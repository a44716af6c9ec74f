// bench/snapshot_probe: how fast can this machine move one etcd snapshot, and what does each
// stage of the backup pipeline cost on top? Reads Maintenance.Snapshot from ENDPOINT with our
// gRPC client and does one of:
//   discard       nothing (the ceiling set by etcd's sending side and the transport)
//   sha           sha256 of every byte
//   zstd          zstd -1 with 2 workers, output dropped
//   backup DIR    the whole pipeline (TakeBackup) into a file store at DIR
// Prints bytes, wall ms, MB/s and this process's CPU ms. bench/backup runs it with STAGES=1.
// With --cacert/--cert/--key (etcdctl's names) it reads an https endpoint with that client
// certificate, as stewardctl and etcdctl do in bench/backup.
#include <openssl/evp.h>
#include <sys/resource.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backup/pipeline.h"
#include "backup/store.h"
#include "client_args.h"
#include "etcd/client.h"

int main(int argc, char** argv) {
  const bench::ClientArgs cli = bench::ParseClientArgs(argc, argv);
  const std::vector<std::string>& args = cli.positional;
  if (args.size() < 2 || (args[1] == "backup" && args.size() != 3)) {
    std::fprintf(stderr,
                 "usage: snapshot_probe [--cacert CA --cert CERT --key KEY] ENDPOINT "
                 "discard|sha|zstd|backup DIR\n");
    return 2;
  }
  const std::string endpoint = args[0], mode = args[1];
  steward::EtcdClient::Options options;
  if (!bench::ApplyTls(cli, "snapshot_probe", &options)) return 2;
  steward::EtcdClient etcd({endpoint}, options);
  EVP_MD_CTX* sha = EVP_MD_CTX_new();
  EVP_DigestInit_ex(sha, EVP_sha256(), nullptr);
  ZSTD_CCtx* z = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(z, ZSTD_c_nbWorkers, 2);
  std::string out(ZSTD_CStreamOutSize(), '\0');
  auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<uint64_t> n;
  if (mode == "backup") {
    auto store = steward::NewFileStore(args[2]);
    auto meta = steward::TakeBackup(etcd, {endpoint, "probe"}, *store, "probe", "snapshot_probe",
                                    std::chrono::minutes(10));
    if (meta.ok()) {
      n = meta->db_size;
    } else {
      n = meta.status();
    }
  } else {
    n = etcd.Snapshot(
        endpoint,
        [&](std::string_view c) {
          if (mode == "sha") EVP_DigestUpdate(sha, c.data(), c.size());
          if (mode == "zstd") {
            ZSTD_inBuffer ib{c.data(), c.size(), 0};
            while (ib.pos < ib.size) {
              ZSTD_outBuffer ob{out.data(), out.size(), 0};
              ZSTD_compressStream2(z, &ob, &ib, ZSTD_e_continue);
            }
          }
          return absl::OkStatus();
        },
        std::chrono::minutes(10));
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!n.ok()) {
    std::fprintf(stderr, "snapshot_probe: %s\n", std::string(n.status().message()).c_str());
    return 1;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
               (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  std::printf("%s %llu B %.0f ms %.0f MB/s cpu %.0f ms\n", mode.c_str(),
              static_cast<unsigned long long>(*n), ms, *n / 1e3 / ms, cpu);
  return 0;
}
