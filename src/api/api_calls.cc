// POST /v1/calls: a tool call for the workers, as `ringfence call` sends it;
// GET /v1/calls/{id}: its state and output (already redacted by the worker),
// or with Accept: text/event-stream, the output as it comes, then `end`.
// The call's user is its token's, never the body's; its timeout is bounded
// by the project's operator policy.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/exec_json.h"
#include "api/json_answers.h"
#include "core/json_input.h"
#include "identity/audit_events.h"
#include "identity/cascade.h"
#include "policy/load.h"
#include "store/identity_store.h"
#include "store/labels.h"
#include "store/run_names.h"

namespace rf::api {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

// "requires": {"labels": {"zone": "b"}}: only a worker with them takes it.
std::optional<ServiceError> read_requires(const json& req, store::NewCall& call) {
  if (!req.is_object()) return ServiceError{400, "requires", "expected {\"labels\": {...}}"};
  for (auto it = req.begin(); it != req.end(); ++it) {
    if (it.key() != "labels") return ServiceError{400, "requires." + it.key(), "unknown field"};
  }
  if (!req.contains("labels")) return std::nullopt;
  if (!req["labels"].is_object()) {
    return ServiceError{400, "requires.labels", "expected an object of strings"};
  }
  auto labels = store::labels_from_json(req["labels"].dump());
  if (!labels) {
    // labels_from_json names a bad entry "label KEY".
    const std::string& at = labels.error().where;
    return ServiceError{
        400, at.starts_with("label ") ? "requires.labels." + at.substr(6) : "requires.labels",
        labels.error().message};
  }
  call.requires_labels = std::move(*labels);
  return std::nullopt;
}

// "identity": {"workflow": W, "user": U}: the user must be the token's.
std::optional<ServiceError> read_identity(const json& id, const policy::Principal& who,
                                          store::NewCall& call) {
  if (!id.is_object()) return ServiceError{400, "identity", "expected {\"workflow\", \"user\"}"};
  for (auto it = id.begin(); it != id.end(); ++it) {
    if (it.key() != "workflow" && it.key() != "user") {
      return ServiceError{400, "identity." + it.key(), "unknown field"};
    }
    if (!it.value().is_string()) {
      return ServiceError{400, "identity." + it.key(), "expected a string"};
    }
  }
  auto user = who.user_for(id.value("user", ""), "identity.user");
  if (!user) return ServiceError{403, user.error().where, user.error().message};
  call.identity = store::IdentityScope{id.value("workflow", ""), *user};
  return std::nullopt;
}

}  // namespace

Api::Borrowed Api::borrow_store() {
  if (options_.call_stores != nullptr) {
    // A pool that cannot open another connection leaves the shared one.
    if (auto lease = options_.call_stores->acquire()) {
      store::Store* s = lease->get();
      return Borrowed{std::move(*lease), s};
    }
  }
  return Borrowed{{}, &store_};
}

void Api::calls_create(Ctx& c) {
  const Borrowed borrowed = borrow_store();
  store::Store& st = *borrowed;
  auto body = body_object(c.request, c.out);
  if (!body) return;
  json exec = *body;
  for (const char* k : {"run", "identity", "requires"}) exec.erase(k);
  auto parsed = parse_exec(exec);
  if (auto* e = std::get_if<ServiceError>(&parsed))
    return fail(c.out, e->status, e->field, e->message);
  const ExecCall& ec = std::get<ExecCall>(parsed);
  if (!body->contains("run") || !(*body)["run"].is_string() ||
      (*body)["run"].get<std::string>().empty()) {
    return fail(c.out, 400, "run", "expected the run's id (a string)");
  }
  store::NewCall call;
  call.project = c.who.project;
  // The project's own run of that name, whatever other projects name theirs.
  const std::string run_name = (*body)["run"].get<std::string>();
  if (!valid_run_name(run_name, "run", c.out)) return;
  auto run = store::RunNames(st).claim(c.who.project, run_name);
  if (!run) return fail(c.out, 503, "", run.error().to_string());
  call.run = *run;
  call.argv = ec.argv;
  call.env = ec.env;
  call.cwd = body->contains("cwd") ? ec.cwd : "";
  call.stdin_bytes = ec.stdin_data;
  auto policy = policy::load_policy(st, c.who.project);
  if (!policy) return fail(c.out, 503, "", policy.error().to_string());
  std::chrono::milliseconds timeout = ec.timeout.count() > 0 ? ec.timeout : call.timeout;
  if (auto s = policy->bound_timeout(timeout, ec.timeout.count() > 0, "timeout"); !s) {
    ++denied_;
    return fail(c.out, 403, s.error().where, s.error().message);
  }
  call.timeout = timeout;
  if (body->contains("requires")) {
    if (auto e = read_requires((*body)["requires"], call)) {
      return fail(c.out, e->status, e->field, e->message);
    }
  }
  if (body->contains("identity")) {
    if (auto e = read_identity((*body)["identity"], c.who, call)) {
      if (e->status == 403) ++denied_;
      return fail(c.out, e->status, e->field, e->message);
    }
    // Checked now, fail closed naming the key and secret; again at sandbox start.
    store::IdentityStore rows(st);
    const identity::CascadeRequest wanted{c.who.project, call.identity->workflow,
                                          call.identity->user};
    auto plan = identity::plan_cascade(rows, wanted);
    if (!plan) {
      identity::audit_refusal(st, "api " + c.who.token_id, wanted, plan.error().to_string(),
                              {call.run, {}, {}});
      return fail(c.out, 403, "identity", "call refused: " + plan.error().to_string());
    }
  }
  if (!st.project(c.who.project)) {
    (void)st.ensure_project(c.who.project, store::Environment::development);
  }
  auto id = st.enqueue_call(call);
  if (!id) return fail(c.out, 409, "run", with_name(id.error().to_string(), call.run, run_name));
  answer(c.out, 201, {{"id", *id}, {"state", "queued"}},
         {{"Location", "/v1/calls/" + std::to_string(*id)}});
}

void Api::call_get(Ctx& c) {
  const std::string& text = c.param("id");
  char* end = nullptr;
  const long long id = std::strtoll(text.c_str(), &end, 10);
  Borrowed borrowed = borrow_store();
  store::Store* st = borrowed.store;
  auto view = *end != '\0' ? Result<store::CallView>(make_error("", "")) : st->call(id);
  if (!view || view->project_id != c.who.project) {
    return fail(c.out, 404, "id", "no call " + text);
  }
  auto run_name = [&](const std::string& run_id) {
    auto name = store::RunNames(*st).name_of(run_id);
    return name ? *name : run_id;
  };
  auto call_json = [&](const store::CallView& v) {
    json j = {{"id", v.id},
              {"run", run_name(v.run_id)},
              {"state", std::string(store::to_string(v.state))},
              {"exit_code", opt(v.exit_code)},
              {"error", opt(v.error)},
              {"enqueued_at", v.enqueued_at},
              {"finished_at", opt(v.finished_at)}};
    if (v.result_json) j["result"] = parse_json_or_discarded(*v.result_json);
    return j;
  };
  auto ended = [](store::CallState s) {
    return s != store::CallState::queued && s != store::CallState::claimed &&
           s != store::CallState::running;
  };
  if (c.request[http::field::accept].find("text/event-stream") == boost::beast::string_view::npos) {
    std::string out, err;
    int64_t seq = 0;
    while (true) {
      auto chunks = st->output(id, seq);
      if (!chunks || chunks->empty()) break;
      for (const auto& ch : *chunks) {
        (ch.stream == store::Stream::out ? out : err) += ch.data;
        seq = ch.seq;
      }
    }
    json j = call_json(*view);
    put_bytes(j, "stdout", out);
    put_bytes(j, "stderr", err);
    return answer(c.out, 200, j);
  }
  borrowed.lease.reset();  // a stream holds a Store only while it reads
  if (!c.out.begin_stream(200, "text/event-stream")) return;
  int64_t seq = 0;
  while (true) {
    const uint32_t seen = store_.call_version(id);
    borrowed = borrow_store();
    st = borrowed.store;
    auto now = st->call(id);  // the state first: output written before it is then complete
    auto chunks = st->output(id, seq);
    std::optional<json> last;  // the `end` event's call, once it has ended
    if (now && ended(now->state) && !(chunks && !chunks->empty())) last = call_json(*now);
    borrowed.lease.reset();  // not held while a slow client reads
    if (chunks && !chunks->empty()) {
      for (const auto& ch : *chunks) {
        json j;
        put_bytes(j, "data", ch.data);
        if (!c.out.write_chunk(std::string("event: ") +
                               (ch.stream == store::Stream::out ? "stdout" : "stderr") +
                               "\ndata: " + j.dump() + "\n\n")) {
          return;
        }
        seq = ch.seq;
      }
      continue;
    }
    if (!now) break;
    if (last) {
      (void)c.out.write_chunk("event: end\ndata: " + last->dump() + "\n\n");
      break;
    }
    store_.wait_for_call(id, seen, std::chrono::milliseconds(500));
    if (c.out.client_gone()) return;
  }
  (void)c.out.end_stream();
}

}  // namespace rf::api
