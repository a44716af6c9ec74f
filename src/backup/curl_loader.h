// libcurl, loaded when the first S3 store is made rather than at program start.
//
// Debian's libcurl brings about twenty libraries with it (GnuTLS, Kerberos, LDAP, SSH, RTMP...):
// about 4 MiB of resident memory in every agent, most of which never use S3 (the default store
// is a directory). Loading it with dlopen on first use keeps that out of the agents that do not.
#pragma once

#include <curl/curl.h>

#include "absl/status/statusor.h"

namespace steward {

// The few libcurl entry points the S3 client calls, resolved from libcurl.so.4.
struct CurlApi {
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  CURLcode (*easy_perform)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// Loads libcurl and runs curl_global_init once per process; later calls return the same table
// (or the same error: a library that failed to load is not retried).
absl::StatusOr<const CurlApi*> LoadCurl();

}  // namespace steward
