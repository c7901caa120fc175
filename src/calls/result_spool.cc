#include "calls/result_spool.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/base64.h"
#include "core/io.h"
#include "core/log.h"

namespace rf::calls {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json to_json(const SpooledEnd& e) {
  json out = json::array();
  for (const store::PendingChunk& c : e.output) {
    out.push_back(
        {{"stream", c.stream == store::Stream::out ? 1 : 2}, {"data", base64_encode(c.data)}});
  }
  return {{"call_id", e.call_id},     {"worker_id", e.worker_id},
          {"epoch", e.epoch},         {"state", e.state},
          {"exit_code", e.exit_code}, {"result_json", e.result_json},
          {"error", e.error},         {"output", out}};
}

Result<SpooledEnd> from_json(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return make_error(where, "not a JSON object");
  try {
    SpooledEnd e;
    e.call_id = j.at("call_id").get<int64_t>();
    e.worker_id = j.at("worker_id").get<std::string>();
    e.epoch = j.at("epoch").get<int64_t>();
    e.state = j.at("state").get<std::string>();
    e.exit_code = j.at("exit_code").get<int>();
    e.result_json = j.at("result_json").get<std::string>();
    e.error = j.at("error").get<std::string>();
    for (const json& c : j.at("output")) {
      auto data = base64_decode(c.at("data").get<std::string>());
      if (!data) return make_error(where, "output: bad base64");
      e.output.push_back({c.at("stream").get<int>() == 1 ? store::Stream::out : store::Stream::err,
                          std::move(*data)});
    }
    if (e.state != "done" && e.state != "failed" && e.state != "revoked")
      return make_error(where, "state \"" + e.state + "\" is not done, failed or revoked");
    return e;
  } catch (const json::exception& ex) {
    return make_error(where, ex.what());
  }
}

}  // namespace

Status write_end(store::Store& store, const SpooledEnd& end) {
  if (end.state == "done")
    return store.finish_call(end.call_id, end.worker_id, end.exit_code, end.result_json,
                             end.output);
  if (end.state == "revoked")
    return store.revoke_call(end.call_id, end.worker_id, end.error, end.output);
  return store.fail_call(end.call_id, end.worker_id, end.error, end.output);
}

ResultSpool::ResultSpool(std::string dir, size_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {}

std::string ResultSpool::path_of(int64_t call_id) const {
  return dir_ + "/call-" + std::to_string(call_id) + ".json";
}

Status ResultSpool::put(const SpooledEnd& end) {
  RF_TRY(make_private_dirs(dir_));
  const std::string text = to_json(end).dump();
  size_t used = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec))
    used += entry.is_regular_file(ec) ? entry.file_size(ec) : 0;
  if (used + text.size() > max_bytes_) {
    return make_error("spool call " + std::to_string(end.call_id),
                      "the spool " + dir_ + " holds " + std::to_string(used) +
                          " bytes; its bound is " + std::to_string(max_bytes_));
  }
  RF_TRY(write_file_atomic(path_of(end.call_id), text, 0600));
  std::lock_guard lock(mu_);
  writing_.insert(end.call_id);
  return ok_status();
}

void ResultSpool::drop(int64_t call_id) {
  std::error_code ec;
  fs::remove(path_of(call_id), ec);
  let_go(call_id);
}

void ResultSpool::let_go(int64_t call_id) {
  std::lock_guard lock(mu_);
  writing_.erase(call_id);
}

std::vector<SpooledEnd> ResultSpool::all() const {
  std::vector<SpooledEnd> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".json" ||
        !entry.path().filename().string().starts_with("call-"))
      continue;
    auto text = read_file(path);
    auto end = text ? from_json(*text, path) : Result<SpooledEnd>(text.error());
    if (!end) {
      spdlog::warn("result spool: {}; set aside as {}.bad", end.error().to_string(), path);
      fs::rename(path, path + ".bad", ec);
      continue;
    }
    out.push_back(std::move(*end));
  }
  std::sort(out.begin(), out.end(),
            [](const SpooledEnd& a, const SpooledEnd& b) { return a.call_id < b.call_id; });
  return out;
}

int ResultSpool::file_all(store::Store& store, std::optional<int64_t> registered) {
  int filed = 0;
  for (const SpooledEnd& end : all()) {
    {
      std::lock_guard lock(mu_);
      if (writing_.count(end.call_id) != 0) continue;
    }
    if (registered && end.epoch != *registered) {
      // An earlier process's, not filed before this one registered: its
      // call was interrupted when this process started.
      spdlog::warn(
          "call {}: its end, kept by an earlier process of worker {}, is too late: "
          "the call was interrupted when this process started",
          end.call_id, end.worker_id);
      drop(end.call_id);
      continue;
    }
    // Under the registration that held the call: a process filing its
    // predecessor's ends does so before it registers the id again.
    if (!registered) store.adopt_registration(end.worker_id, end.epoch);
    Status written = write_end(store, end);
    if (!written.ok() && written.error().code == ErrorCode::kUnavailable) break;
    if (written.ok()) {
      ++filed;
      spdlog::info("call {}: its end, kept while the store was unreachable, is filed", end.call_id);
    } else {
      spdlog::warn("call {}: its end, kept while the store was unreachable, cannot be filed: {}",
                   end.call_id, written.error().to_string());
    }
    drop(end.call_id);
  }
  return filed;
}

}  // namespace rf::calls
