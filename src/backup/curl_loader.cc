#include "backup/curl_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

namespace steward {
namespace {

// Resolves `name` into `fn`; false (with the reason in `error`) when it is missing.
template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn, std::string* error) {
  void* sym = ::dlsym(lib, name);
  if (sym == nullptr) {
    *error = absl::StrCat("libcurl has no ", name);
    return false;
  }
  *fn = reinterpret_cast<Fn>(sym);
  return true;
}

}  // namespace

absl::StatusOr<const CurlApi*> LoadCurl() {
  static std::once_flag once;
  static CurlApi api;
  static std::string error;
  std::call_once(once, [] {
    // The soname of libcurl 7.16 and later (Debian's libcurl4 package, OpenSSL or GnuTLS build).
    void* lib = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = ::dlerror();
      error = absl::StrCat("the S3 store needs libcurl (Debian: apt-get install libcurl4): ",
                           why ? why : "libcurl.so.4 not found");
      return;
    }
    using GlobalInit = CURLcode (*)(long);  // NOLINT(runtime/int): curl's signature
    GlobalInit global_init = nullptr;
    if (!Resolve(lib, "curl_global_init", &global_init, &error) ||
        !Resolve(lib, "curl_easy_init", &api.easy_init, &error) ||
        !Resolve(lib, "curl_easy_cleanup", &api.easy_cleanup, &error) ||
        !Resolve(lib, "curl_easy_reset", &api.easy_reset, &error) ||
        !Resolve(lib, "curl_easy_setopt", &api.easy_setopt, &error) ||
        !Resolve(lib, "curl_easy_getinfo", &api.easy_getinfo, &error) ||
        !Resolve(lib, "curl_easy_perform", &api.easy_perform, &error) ||
        !Resolve(lib, "curl_easy_strerror", &api.easy_strerror, &error) ||
        !Resolve(lib, "curl_slist_append", &api.slist_append, &error) ||
        !Resolve(lib, "curl_slist_free_all", &api.slist_free_all, &error)) {
      return;  // the library stays loaded: unloading what curl_global_init may have set up is worse
    }
    if (CURLcode rc = global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK) {
      error = absl::StrCat("curl_global_init failed (code ", static_cast<int>(rc), ")");
    }
  });
  if (!error.empty()) return absl::FailedPreconditionError(error);
  return &api;
}

}  // namespace steward
