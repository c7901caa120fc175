// S3 uploads for artifacts (issue 12): PutObject, or a multipart upload
// (CreateMultipartUpload, UploadPart..., CompleteMultipartUpload; aborted on
// failure) for objects above the part size. Path-style URLs
// (ENDPOINT/BUCKET/KEY), SigV4 of our own (sigv4.h), through http_client
// (and so through the step's egress policy). Errors name the bucket and key
// and what S3 said; they never hold the secret key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "artifact/sigv4.h"
#include "core/result.h"
#include "http_client/http_client.h"

namespace rf::artifact {

struct S3Target {
  std::string endpoint;  // http(s)://host[:port]
  std::string bucket;
  std::string key;
  std::string region = "us-east-1";
};

struct S3Upload {
  std::string etag;
  uint64_t size = 0;
  std::string sha256;
  int parts = 0;  // 0: one PutObject
};

// `part_size`: at least 5 MiB, as S3 requires of every part but the last.
Result<S3Upload> s3_put_object(const S3Target& target, const AwsCredentials& credentials,
                               std::string_view data, const http::Options& options,
                               uint64_t part_size = 8ull << 20);

}  // namespace rf::artifact
