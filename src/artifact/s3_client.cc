#include "artifact/s3_client.h"

#include <ctime>

namespace rf::artifact {
namespace {

using Query = std::vector<std::pair<std::string, std::string>>;

std::string xml_text(const std::string& xml, const std::string& element) {
  const std::string open = "<" + element + ">", close = "</" + element + ">";
  const size_t a = xml.find(open);
  if (a == std::string::npos) return "";
  const size_t b = xml.find(close, a + open.size());
  if (b == std::string::npos) return "";
  return xml.substr(a + open.size(), b - a - open.size());
}

std::string unquote_entities(std::string s) {
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"&quot;", "\""}, {"&#34;", "\""}, {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
      s.replace(at, from.size(), to);
    }
  }
  return s;
}

class S3 {
 public:
  S3(const S3Target& t, const AwsCredentials& c, const http::Options& o) : t_(t), c_(c), o_(o) {}

  Status check() {
    auto url = http::parse_url(t_.endpoint);
    if (!url) return url.take_error();
    if (url->target != "/") {
      return make_error("S3 endpoint " + t_.endpoint, "give the endpoint without a path");
    }
    origin_ = *url;
    if (t_.bucket.empty()) return make_error("S3", "no bucket");
    if (t_.key.empty()) return make_error("S3 bucket " + t_.bucket, "no key");
    if (c_.access_key.empty() || c_.secret_key.empty()) {
      return make_error("S3 bucket " + t_.bucket, "no credentials (access key and secret key)");
    }
    return ok_status();
  }

  Result<http::Response> send(const std::string& method, const Query& query, std::string_view body,
                              const http::Headers& extra = {}) {
    SigV4Request r;
    r.method = method;
    r.host = origin_.authority();
    r.path = "/" + uri_encode(t_.bucket) + "/" + uri_encode_path(t_.key);
    r.query = query;
    r.payload_sha256 = sha256_hex(body);
    for (const auto& h : extra) r.headers.push_back(h);
    const SigV4Result signed_ = sign_v4(r, c_, t_.region, "s3", amz_date(std::time(nullptr)));
    http::Request req;
    req.method = method;
    std::string q;
    for (const auto& [k, v] : query) {
      q += (q.empty() ? "?" : "&") + uri_encode(k) +
           (v.empty() && k == "uploads" ? "" : "=" + uri_encode(v));
    }
    req.url = origin_.origin() + r.path + q;
    req.headers = signed_.headers;
    for (const auto& h : extra) req.headers.push_back(h);
    req.body = std::string(body);
    auto resp = http::fetch(req, o_);
    if (!resp) return make_error(what(), resp.error().to_string());
    if (resp->status / 100 != 2) {
      const std::string code = xml_text(resp->body, "Code"), msg = xml_text(resp->body, "Message");
      return make_error(what(), method + " answered " + std::to_string(resp->status) +
                                    (code.empty() ? "" : " " + code) +
                                    (msg.empty() ? "" : ": " + msg));
    }
    return resp;
  }

  std::string what() const { return "S3 s3://" + t_.bucket + "/" + t_.key + " at " + t_.endpoint; }

 private:
  const S3Target& t_;
  const AwsCredentials& c_;
  const http::Options& o_;
  http::Url origin_;
};

}  // namespace

Result<S3Upload> s3_put_object(const S3Target& target, const AwsCredentials& credentials,
                               std::string_view data, const http::Options& options,
                               uint64_t part_size) {
  part_size = std::max<uint64_t>(part_size, 5ull << 20);
  S3 s3(target, credentials, options);
  RF_TRY(s3.check());
  S3Upload out;
  out.size = data.size();
  out.sha256 = sha256_hex(data);
  const http::Headers type = {{"Content-Type", "application/x-tar"}};
  if (data.size() <= part_size) {
    auto r = s3.send("PUT", {}, data, type);
    if (!r) return r.take_error();
    out.etag = r->header("ETag");
    return out;
  }
  auto created = s3.send("POST", {{"uploads", ""}}, "", type);
  if (!created) return created.take_error();
  const std::string upload_id = xml_text(created->body, "UploadId");
  if (upload_id.empty()) return make_error(s3.what(), "CreateMultipartUpload gave no UploadId");
  auto abort = [&](Error e) -> Error {
    (void)s3.send("DELETE", {{"uploadId", upload_id}}, "");
    return e;
  };
  std::string parts_xml;
  int n = 0;
  for (uint64_t at = 0; at < data.size(); at += part_size) {
    ++n;
    auto part = s3.send("PUT", {{"partNumber", std::to_string(n)}, {"uploadId", upload_id}},
                        data.substr(at, part_size));
    if (!part) return abort(part.take_error());
    const std::string etag = part->header("ETag");
    if (etag.empty())
      return abort(make_error(s3.what(), "part " + std::to_string(n) + " has no ETag"));
    parts_xml +=
        "<Part><PartNumber>" + std::to_string(n) + "</PartNumber><ETag>" + etag + "</ETag></Part>";
  }
  auto done = s3.send("POST", {{"uploadId", upload_id}},
                      "<CompleteMultipartUpload>" + parts_xml + "</CompleteMultipartUpload>",
                      {{"Content-Type", "application/xml"}});
  if (!done) return abort(done.take_error());
  if (done->body.find("<Error>") != std::string::npos) {
    return abort(
        make_error(s3.what(), "CompleteMultipartUpload failed: " + xml_text(done->body, "Code") +
                                  " " + xml_text(done->body, "Message")));
  }
  out.etag = unquote_entities(xml_text(done->body, "ETag"));
  out.parts = n;
  return out;
}

}  // namespace rf::artifact
